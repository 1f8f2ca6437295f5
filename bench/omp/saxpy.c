/* saxpy: y[i] = a * x[i] + y[i] for i < n (samples/saxpy.cu).
 *
 *   void saxpy_omp(int n, float a, const float *x, float *y);
 */
void saxpy_omp(int n, float a, const float *restrict x, float *restrict y)
{
#pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
