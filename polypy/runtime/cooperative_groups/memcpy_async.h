/* polypy's <cooperative_groups/memcpy_async.h>: cg::memcpy_async and cg::wait are declared in polypy's
 * <cooperative_groups.h>, so that their use is a located error naming them. */
#include <cooperative_groups.h>
