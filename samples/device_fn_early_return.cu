// device_fn_early_return: steps[i] = number of Collatz steps from start[i] down to 1, or -1 when
// more than `limit` steps would be needed (starting values must stay below 100000 so that the
// trajectory fits in 32 bits).
// Exercises: a __device__ function with several early returns, one of them inside a `while`
// loop with a data-dependent trip count; unsigned arithmetic, %, ternary.
__device__ int collatz_steps(unsigned int x, int limit)
{
    if (x <= 1)
        return 0;
    int steps = 0;
    while (x != 1) {
        if (steps == limit)
            return -1;
        x = (x % 2u == 0u) ? x / 2u : 3u * x + 1u;
        ++steps;
    }
    return steps;
}

__global__ void device_fn_early_return(const unsigned int* start, int* steps, int n, int limit)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        steps[i] = collatz_steps(start[i], limit);
}
