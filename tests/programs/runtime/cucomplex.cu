// <cuComplex.h> in a whole program (issue 36): kernels and the host use the same functions.
// Prints every result of the device, then whether the host's agree; exit 1 on a mismatch.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuComplex.h>

#define N 6

__global__ void floats(const cuFloatComplex* a, const cuFloatComplex* b, cuFloatComplex* out, float* mag) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    cuComplex x = a[i], y = b[i];
    out[5 * i + 0] = cuCaddf(x, y);
    out[5 * i + 1] = cuCsubf(x, cuConjf(y));
    out[5 * i + 2] = cuCmulf(x, y);
    out[5 * i + 3] = cuCdivf(x, y);
    out[5 * i + 4] = cuCfmaf(x, y, make_cuComplex(cuCrealf(y), cuCimagf(x)));
    mag[i] = cuCabsf(x);
  }
}

__global__ void doubles(const cuDoubleComplex* a, const cuDoubleComplex* b, cuDoubleComplex* out, double* mag) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    cuDoubleComplex x = a[i], y = b[i];
    out[3 * i + 0] = cuCmul(x, cuConj(y));
    out[3 * i + 1] = cuCdiv(x, y);
    out[3 * i + 2] = cuCfma(x, y, cuCsub(cuCadd(x, y), make_cuDoubleComplex(cuCreal(y), 0.0)));
    mag[i] = cuCabs(x);
  }
}

int main() {
  const float fr[N] = {1.0f, 3.0f, 0.0f, -2.5f, 1.0e30f, 7.0f};
  const float fi[N] = {2.0f, 4.0f, 0.0f, 0.75f, -3.0e30f, -1.0e-3f};
  std::vector<cuFloatComplex> a(N), b(N), out(5 * N);
  std::vector<float> mag(N);
  for (int i = 0; i < N; ++i) {
    a[i] = make_cuFloatComplex(fr[i], fi[i]);
    b[i] = make_cuFloatComplex(fi[(i + 1) % N] + 0.5f, fr[(i + 2) % N] - 1.0f);
  }
  cuFloatComplex *da, *db, *dout;
  float* dmag;
  cudaMalloc(&da, N * sizeof(cuFloatComplex));
  cudaMalloc(&db, N * sizeof(cuFloatComplex));
  cudaMalloc(&dout, 5 * N * sizeof(cuFloatComplex));
  cudaMalloc(&dmag, N * sizeof(float));
  cudaMemcpy(da, a.data(), N * sizeof(cuFloatComplex), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), N * sizeof(cuFloatComplex), cudaMemcpyHostToDevice);
  floats<<<2, 4>>>(da, db, dout, dmag);
  cudaMemcpy(out.data(), dout, 5 * N * sizeof(cuFloatComplex), cudaMemcpyDeviceToHost);
  cudaMemcpy(mag.data(), dmag, N * sizeof(float), cudaMemcpyDeviceToHost);

  std::vector<cuDoubleComplex> c(N), d(N), outd(3 * N);
  std::vector<double> magd(N);
  for (int i = 0; i < N; ++i) {
    c[i] = cuComplexFloatToDouble(a[i]);
    d[i] = make_cuDoubleComplex(cuCreal(cuComplexFloatToDouble(b[i])), 0.1 * i - 0.2);
  }
  cuDoubleComplex *dc, *dd, *doutd;
  double* dmagd;
  cudaMalloc(&dc, N * sizeof(cuDoubleComplex));
  cudaMalloc(&dd, N * sizeof(cuDoubleComplex));
  cudaMalloc(&doutd, 3 * N * sizeof(cuDoubleComplex));
  cudaMalloc(&dmagd, N * sizeof(double));
  cudaMemcpy(dc, c.data(), N * sizeof(cuDoubleComplex), cudaMemcpyHostToDevice);
  cudaMemcpy(dd, d.data(), N * sizeof(cuDoubleComplex), cudaMemcpyHostToDevice);
  doubles<<<1, 8>>>(dc, dd, doutd, dmagd);
  cudaMemcpy(outd.data(), doutd, 3 * N * sizeof(cuDoubleComplex), cudaMemcpyDeviceToHost);
  cudaMemcpy(magd.data(), dmagd, N * sizeof(double), cudaMemcpyDeviceToHost);

  int bad = 0;
  for (int i = 0; i < N; ++i) {
    printf("f %d", i);
    for (int k = 0; k < 5; ++k) printf(" %.9g %.9g", cuCrealf(out[5 * i + k]), cuCimagf(out[5 * i + k]));
    printf(" %.9g\n", mag[i]);
    cuComplex x = a[i], y = b[i];
    cuComplex host[5] = {cuCaddf(x, y), cuCsubf(x, cuConjf(y)), cuCmulf(x, y), cuCdivf(x, y),
                         cuCfmaf(x, y, make_cuComplex(cuCrealf(y), cuCimagf(x)))};
    for (int k = 0; k < 5; ++k)
      if (!(host[k].x == out[5 * i + k].x || host[k].x != host[k].x) || !(host[k].y == out[5 * i + k].y || host[k].y != host[k].y)) bad++;
    if (cuCabsf(x) != mag[i]) bad++;
  }
  for (int i = 0; i < N; ++i) {
    printf("d %d", i);
    for (int k = 0; k < 3; ++k) printf(" %.17g %.17g", cuCreal(outd[3 * i + k]), cuCimag(outd[3 * i + k]));
    printf(" %.17g\n", magd[i]);
    cuDoubleComplex x = c[i], y = d[i];
    cuDoubleComplex host[3] = {cuCmul(x, cuConj(y)), cuCdiv(x, y),
                               cuCfma(x, y, cuCsub(cuCadd(x, y), make_cuDoubleComplex(cuCreal(y), 0.0)))};
    for (int k = 0; k < 3; ++k)
      if (host[k].x != outd[3 * i + k].x || host[k].y != outd[3 * i + k].y) bad++;
    if (cuCabs(x) != magd[i]) bad++;
  }
  printf("%s\n", bad ? "FAIL" : "PASS");
  return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
