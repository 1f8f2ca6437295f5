// Tile sizes with defaults that -D overrides (as Rodinia's RD_WG_SIZE_0 does).
#ifndef TILE
#define TILE 32
#endif
#define OFFSET 3
