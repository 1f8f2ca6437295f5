// The surface real CUDA programs rely on (issue 14): the toolkit's headers by their names, host
// math without <math.h>, the samples' helper macros, the runtime API around launches, and GCC's
// <omp.h> in host code. Printed values are checked against NumPy in tests/test_real_surface.py.
#include <stdio.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <driver_types.h>
#include <vector_types.h>
#include <device_launch_parameters.h>
#include <helper_cuda.h>
#include <helper_functions.h>
#include <cutil.h>
#include <math_constants.h>
#include <omp.h>

#define N 1000
#define ROWS 6
#define COLS 10

__constant__ float c_scale[2];

__global__ void polar(const float4* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = in[i];
    out[i] = (v.x * v.y + v.z - v.w) * c_scale[0] + CUDART_PI_F * c_scale[1];
  }
}

__global__ void rows(float* m, size_t pitch_elems, int cols) {
  int r = blockIdx.x, c = threadIdx.x;
  if (c < cols) m[r * pitch_elems + c] = m[r * pitch_elems + c] * 2.0f + r;
}

#ifdef __DRIVER_TYPES_H__
static int defined_driver_types() { return 1; }
#else
static int defined_driver_types() { return 0; }
#endif

int main(int argc, char** argv) {
  findCudaDevice(argc, (const char**)argv);
  int count = 0;
  checkCudaErrors(cudaGetDeviceCount(&count));
  cudaDeviceProp prop;
  checkCudaErrors(cudaGetDeviceProperties(&prop, 0));
  checkCudaErrors(cudaSetDevice(0));
  printf("devices %d warp %d maxthreads %d sm>=1 %d cc>=3 %d\n", count, prop.warpSize, prop.maxThreadsPerBlock,
         prop.multiProcessorCount >= 1, prop.major >= 3);
  size_t free_mem = 0, total_mem = 0;
  cudaMemGetInfo(&free_mem, &total_mem);
  printf("meminfo %d\n", free_mem <= total_mem && total_mem > 0);

  // Host math, as nvcc allows it without <math.h>.
  int blocks = (int)ceil(N / 128.0);
  printf("host math %d %.4f %.4f %.4f %d %d %.4f %.4f\n", blocks, sqrt(2.0), pow(1.5, 3), fabs(-2.25), max(3, 7),
         min(3, 7), exp(1.0), max(0.5f, 0.25));

  // Mixed signedness (huffman's max(1, n / 2u)), every vector type, the toolkit's include guards.
  uchar3 u3 = make_uchar3(1, 2, 3);
  ulonglong2 ull2 = make_ulonglong2(7, 9);
  short4 s4 = make_short4(-1, -2, -3, -4);
  printf("mixed %u %u vectors %d %llu %d %d guards %d %d\n", max(3, 5u), min(7u, 4), u3.z, ull2.y, s4.w,
         (int)sizeof(double2), CUDART_VERSION >= 4000, defined_driver_types());

  float4* h_in;
  float* h_out;
  checkCudaErrors(cudaMallocHost((void**)&h_in, N * sizeof(float4)));
  checkCudaErrors(cudaHostAlloc((void**)&h_out, N * sizeof(float), cudaHostAllocDefault));
#pragma omp parallel for
  for (int i = 0; i < N; i++) h_in[i] = make_float4(i % 7, 0.5f * (i % 3), 0.25f * (i % 5), i % 2);
  float scale[2] = {2.0f, 1.0f / 8};
  checkCudaErrors(cudaMemcpyToSymbol(c_scale, scale, sizeof scale));
  float back[2] = {0, 0};
  checkCudaErrors(cudaMemcpyFromSymbol(back, c_scale, sizeof back));

  float4* d_in;
  float* d_out;
  checkCudaErrors(cudaMalloc((void**)&d_in, N * sizeof(float4)));
  checkCudaErrors(cudaMalloc((void**)&d_out, N * sizeof(float)));
  checkCudaErrors(cudaMemset(d_out, 0, N * sizeof(float)));
  cudaStream_t stream;
  checkCudaErrors(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, 0);
  StopWatchInterface* timer = 0;
  sdkCreateTimer(&timer);
  sdkStartTimer(&timer);
  checkCudaErrors(cudaMemcpyAsync(d_in, h_in, N * sizeof(float4), cudaMemcpyHostToDevice, stream));
  cudaFuncSetCacheConfig(polar, cudaFuncCachePreferL1);
  polar<<<blocks, 128, 0, stream>>>(d_in, d_out, N);
  getLastCudaError("polar failed");
  checkCudaErrors(cudaMemcpyAsync(h_out, d_out, N * sizeof(float), cudaMemcpyDeviceToHost, stream));
  checkCudaErrors(cudaStreamSynchronize(stream));
  cudaEventRecord(stop, 0);
  cudaEventSynchronize(stop);
  sdkStopTimer(&timer);
  float ms = -1;
  cudaEventElapsedTime(&ms, start, stop);
  printf("timing %d %d\n", ms >= 0, sdkGetTimerValue(&timer) >= 0);
  double sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < N; i++) sum += h_out[i];
  printf("symbol %.4f %.4f polar sum %.3f first %.5f last %.5f threads>=1 %d\n", back[0], back[1], sum, h_out[0],
         h_out[N - 1], omp_get_max_threads() >= 1);

  // Pitched 2D memory.
  float host2d[ROWS][COLS];
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) host2d[r][c] = r * COLS + c;
  float* d2;
  size_t pitch = 0;
  CUDA_SAFE_CALL(cudaMallocPitch((void**)&d2, &pitch, COLS * sizeof(float), ROWS));
  CUDA_SAFE_CALL(cudaMemcpy2D(d2, pitch, host2d, COLS * sizeof(float), COLS * sizeof(float), ROWS,
                              cudaMemcpyHostToDevice));
  rows<<<ROWS, 16>>>(d2, pitch / sizeof(float), COLS);
  CUT_CHECK_ERROR("rows failed");
  CUDA_SAFE_CALL(cudaMemcpy2D(host2d, COLS * sizeof(float), d2, pitch, COLS * sizeof(float), ROWS,
                              cudaMemcpyDeviceToHost));
  printf("pitch>=row %d m[0][0] %.1f m[5][9] %.1f m[3][4] %.1f\n", pitch >= COLS * sizeof(float), host2d[0][0],
         host2d[5][9], host2d[3][4]);

  // Errors: a bad free is reported, kept until read, and named.
  cudaError_t bad = cudaFree((void*)(h_out + 1));
  int peeked = cudaPeekAtLastError() == bad;
  int last = cudaGetLastError() == bad;
  int cleared = cudaGetLastError() == cudaSuccess;
  printf("error %d %s | peek %d | last %d | cleared %d | %s\n", bad != cudaSuccess, cudaGetErrorString(bad), peeked,
         last, cleared, cudaGetErrorName(cudaErrorInvalidValue));
  cudaStreamDestroy(stream);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  sdkDeleteTimer(&timer);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d2);
  cudaFreeHost(h_in);
  cudaFreeHost(h_out);
  cudaThreadSynchronize();
  cudaDeviceReset();
  cudaThreadExit();
  return 0;
}
