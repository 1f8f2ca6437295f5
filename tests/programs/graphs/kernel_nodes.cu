// Kernel nodes made by hand: the kernel's address, its parameters copied when the node is made.
#include <cstdio>
__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  const int n = 100;
  float *x, *y, h[n];
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  cudaMemset(y, 0, sizeof h);
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  float a = 2.0f; int nn = n;
  void* args[4] = {&a, &x, &y, &nn};
  cudaKernelNodeParams p = {0};
  p.func = (void*)axpy; p.gridDim = dim3(4); p.blockDim = dim3(32); p.sharedMemBytes = 0; p.kernelParams = args; p.extra = NULL;
  cudaGraphNode_t k1, k2;
  cudaGraphAddKernelNode(&k1, g, NULL, 0, &p);
  a = 3.0f;  // the node kept 2.0
  cudaGraphAddKernelNode(&k2, g, &k1, 1, &p);
  cudaGraphExec_t e; cudaGraphInstantiate(&e, g, 0);
  cudaGraphLaunch(e, 0);
  cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  printf("%g %g\n", h[1], h[99]);
  a = 10.0f;
  cudaGraphExecKernelNodeSetParams(e, k2, &p);
  cudaGraphLaunch(e, 0);
  cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  printf("%g %g\n", h[1], h[99]);
  // Not a kernel's address, or packed parameters: cudaErrorInvalidValue.
  p.func = (void*)h;
  printf("%s", cudaGetErrorName(cudaGraphAddKernelNode(&k1, g, NULL, 0, &p)));
  p.func = (void*)axpy;
  void* packed[1] = {0};
  p.extra = packed;
  printf(" %s\n", cudaGetErrorName(cudaGraphAddKernelNode(&k1, g, NULL, 0, &p)));
  cudaGetLastError();
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  return 0;
}
