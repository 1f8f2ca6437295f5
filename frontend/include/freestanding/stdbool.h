#ifndef POLYPY_STDBOOL_H
#define POLYPY_STDBOOL_H
#ifndef __cplusplus
#define bool _Bool
#define true 1
#define false 0
#endif
#endif
