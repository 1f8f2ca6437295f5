/* polypy's <cooperative_groups/reduce.h>: cg::reduce and its operators are declared, with the
 * rest of cooperative groups, in polypy's <cooperative_groups.h>. */
#include <cooperative_groups.h>
