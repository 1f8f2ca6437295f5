// struct_params: y[i] = clamp(alpha * x[i] + beta, lo, hi) for i < p.n, where the scalars come
// in a struct passed by value.
// Exercises: a user struct type as a kernel parameter (by value), member accesses p.field of
// int and float fields, fminf/fmaxf.
struct ClampParams {
    int n;
    float alpha;
    float beta;
    float lo;
    float hi;
};

__global__ void struct_params(ClampParams p, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) {
        float v = p.alpha * x[i] + p.beta;
        y[i] = fminf(fmaxf(v, p.lo), p.hi);
    }
}
