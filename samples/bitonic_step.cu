// bitonic_step: one compare-exchange stage (j, k) of a bitonic sort of n = 2^m floats, in place.
// Thread i pairs with partner i ^ j; the lower index of each pair does the exchange, sorting the
// pair ascending when (i & k) == 0 and descending otherwise. The host runs this for
// k = 2, 4, ..., n and, for each k, j = k/2, k/4, ..., 1.
// Exercises: XOR and AND index arithmetic (non-affine), a data-dependent swap in place, a
// compound boolean condition; one thread per element (grid * block == n).
__global__ void bitonic_step(float* data, int j, int k)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int partner = i ^ (unsigned int)j;
    if (partner > i) {
        bool ascending = (i & (unsigned int)k) == 0;
        float a = data[i];
        float b = data[partner];
        if ((ascending && a > b) || (!ascending && a < b)) {
            data[i] = b;
            data[partner] = a;
        }
    }
}
