// conv2d: 2-D correlation of a height x width image with a (2*MR+1) x (2*MR+1) mask, zero padding:
// out[y][x] = sum_{dy,dx in [-MR, MR]} mask[dy+MR][dx+MR] * img[y+dy][x+dx].
// Exercises: a 2-D grid with guards, a doubly nested constant-trip loop with a bounds test on
// each tap, two active inputs (image and mask); the mask's gradient is a reduction over all
// threads.
#ifndef REAL
#define REAL float
#endif

#define MR 2
#define MW (2 * MR + 1)

__global__ void conv2d(const REAL* img, const REAL* mask, REAL* out, int height, int width)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height)
        return;

    REAL acc = 0;
    for (int dy = -MR; dy <= MR; ++dy) {
        int yy = y + dy;
        if (yy < 0 || yy >= height)
            continue;
        for (int dx = -MR; dx <= MR; ++dx) {
            int xx = x + dx;
            if (xx >= 0 && xx < width)
                acc += mask[(dy + MR) * MW + (dx + MR)] * img[yy * width + xx];
        }
    }
    out[y * width + x] = acc;
}
