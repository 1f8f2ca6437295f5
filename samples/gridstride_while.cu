// gridstride_while: for each i < n, digit_sum[i] = sum of the decimal digits of in[i] and
// bit_len[i] = number of bits of in[i] (0 for 0); in[i] >= 0.
// Exercises: a grid-stride `for` loop (fewer threads than elements), a `do { } while` loop (runs
// at least once, so 0 has one digit), a `while` loop with a data-dependent trip count.
__global__ void gridstride_while(const int* in, int* digit_sum, int* bit_len, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int v = in[i];
        int s = 0;
        do {
            s += v % 10;
            v /= 10;
        } while (v != 0);
        digit_sum[i] = s;

        int u = in[i];
        int bits = 0;
        while (u > 0) {
            u >>= 1;
            ++bits;
        }
        bit_len[i] = bits;
    }
}
