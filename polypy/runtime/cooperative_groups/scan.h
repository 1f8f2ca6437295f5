/* polypy's <cooperative_groups/scan.h>: cg::inclusive_scan and cg::exclusive_scan are declared,
 * with the rest of cooperative groups, in polypy's <cooperative_groups.h>. */
#include <cooperative_groups.h>
