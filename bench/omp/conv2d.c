/* conv2d: out[y][x] = sum_{dy,dx in [-MR, MR]} mask[dy + MR][dx + MR] * img[y + dy][x + dx] on a
 * height x width image, zero padding, MR = 2 (samples/conv2d.cu).
 *
 *   void conv2d_omp(const float *img, const float *mask, float *out, int height, int width);
 *
 * Threads share out rows. Pixels at least MR away from every edge take a vectorized path
 * without bounds tests; the frame takes the guarded one. Taps are summed in the kernel's order.
 */
#define MR 2
#define MW (2 * MR + 1)

static float pixel(const float *restrict img, const float *restrict mask, int height, int width,
                   int y, int x)
{
    float acc = 0.0f;
    for (int dy = -MR; dy <= MR; ++dy) {
        int yy = y + dy;
        if (yy < 0 || yy >= height)
            continue;
        for (int dx = -MR; dx <= MR; ++dx) {
            int xx = x + dx;
            if (xx >= 0 && xx < width)
                acc += mask[(dy + MR) * MW + (dx + MR)] * img[(long)yy * width + xx];
        }
    }
    return acc;
}

void conv2d_omp(const float *restrict img, const float *restrict mask, float *restrict out,
                int height, int width)
{
    float m[MW * MW];
    for (int k = 0; k < MW * MW; ++k)
        m[k] = mask[k];

#pragma omp parallel for schedule(static)
    for (int y = 0; y < height; ++y) {
        float *restrict o = out + (long)y * width;
        if (y < MR || y >= height - MR || width <= 2 * MR) {
            for (int x = 0; x < width; ++x)
                o[x] = pixel(img, m, height, width, y, x);
            continue;
        }
        for (int x = 0; x < MR; ++x)
            o[x] = pixel(img, m, height, width, y, x);
#pragma omp simd
        for (int x = MR; x < width - MR; ++x) {
            float acc = 0.0f;
            for (int dy = -MR; dy <= MR; ++dy)
                for (int dx = -MR; dx <= MR; ++dx)
                    acc += m[(dy + MR) * MW + (dx + MR)] * img[(long)(y + dy) * width + x + dx];
            o[x] = acc;
        }
        for (int x = width - MR; x < width; ++x)
            o[x] = pixel(img, m, height, width, y, x);
    }
}
