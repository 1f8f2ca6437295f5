// Device function pointers (docs/function_pointers.md): the host idiom (a __device__ variable
// holding a function's address, read with cudaMemcpyFromSymbol and passed to a kernel), a
// __constant__ table, a record holding a pointer passed by value, a table a kernel fills and the
// host passes back, a pointer copied into a __constant__ variable. Self-checking.
#include <cstdio>

typedef float (*op_t)(float, float);

__device__ float add(float a, float b) { return a + b; }
__device__ float sub(float a, float b) { return a - b; }
__host__ __device__ float mul(float a, float b) { return a * b; }

__device__ op_t d_add = add;
__device__ op_t d_mul = &mul;
__constant__ op_t c_ops[3] = {add, sub, mul};
__constant__ op_t c_chosen;

struct Job {
  op_t f;
  float scale;
  int n;
};

__constant__ Job c_jobs[2] = {{add, 1.0f, 0}, {&mul, 0.5f, 0}};  // records holding pointers, initialized

__global__ void by_jobs(float* out) {
  int t = threadIdx.x;
  out[t] = c_jobs[t & 1].scale * c_jobs[t & 1].f((float)t, 4.0f);
}

__global__ void apply(op_t f, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f != nullptr ? f(x[i], y[i]) : -1.0f;
}

__global__ void apply_job(Job job, const float* x, const float* y, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < job.n) out[i] = job.scale * job.f(x[i], y[i]);
}

__global__ void by_table(const int* which, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = c_ops[which[i]](x[i], y[i]) + c_chosen(1.0f, 2.0f);
}

__global__ void fill(op_t* table) {
  int i = threadIdx.x;
  table[i] = i == 0 ? add : (i == 1 ? sub : nullptr);
}

__global__ void call_one(op_t f, float* out) { out[0] = f(1.0f, 2.0f); }

template <op_t F>  // one instance per function: k<add> and k<sub> are two kernels
__global__ void fixed(float* out) { out[threadIdx.x] = F((float)threadIdx.x, 2.0f); }

int main() {
  const int n = 1000;
  static float hx[n], hy[n], ho[n];
  static int hw[n];
  for (int i = 0; i < n; ++i) { hx[i] = (float)(i % 17) - 8.0f; hy[i] = (float)(i % 5) + 0.5f; hw[i] = i % 3; }
  float *x, *y, *o;
  int* w;
  op_t* table;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float)); cudaMalloc(&o, n * sizeof(float));
  cudaMalloc(&w, n * sizeof(int)); cudaMalloc(&table, 3 * sizeof(op_t));
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw, n * sizeof(int), cudaMemcpyHostToDevice);
  int bad = 0;

  op_t h_add = nullptr, h_mul = nullptr;
  cudaMemcpyFromSymbol(&h_add, d_add, sizeof(op_t));
  cudaMemcpyFromSymbol(&h_mul, d_mul, sizeof(op_t));
  if (h_add == nullptr || h_mul == nullptr || h_add == h_mul) bad++;
  apply<<<(n + 127) / 128, 128>>>(h_add, x, y, o, n);
  cudaMemcpy(ho, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) if (ho[i] != hx[i] + hy[i]) bad++;
  apply<<<(n + 127) / 128, 128>>>(nullptr, x, y, o, n);
  cudaMemcpy(ho, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) if (ho[i] != -1.0f) bad++;
  printf("symbol idiom: %s\n", bad ? "FAILED" : "PASSED");

  Job job = {h_mul, 0.5f, n};
  apply_job<<<(n + 255) / 256, 256>>>(job, x, y, o);
  cudaMemcpy(ho, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad_job = 0;
  for (int i = 0; i < n; ++i) if (ho[i] != 0.5f * (hx[i] * hy[i])) bad_job++;
  printf("record member: %s\n", bad_job ? "FAILED" : "PASSED");

  cudaMemcpyToSymbol(c_chosen, &h_mul, sizeof(op_t));
  by_table<<<(n + 63) / 64, 64>>>(w, x, y, o, n);
  cudaMemcpy(ho, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad_table = 0;
  for (int i = 0; i < n; ++i) {
    float want = (hw[i] == 0 ? hx[i] + hy[i] : hw[i] == 1 ? hx[i] - hy[i] : hx[i] * hy[i]) + 2.0f;
    if (ho[i] != want) bad_table++;
  }
  printf("constant table: %s\n", bad_table ? "FAILED" : "PASSED");

  fill<<<1, 3>>>(table);
  op_t filled[3];
  cudaMemcpy(filled, table, 3 * sizeof(op_t), cudaMemcpyDeviceToHost);
  int bad_fill = (filled[0] != h_add) + (filled[1] == nullptr) + (filled[2] != nullptr) + (filled[1] == h_add);
  apply<<<(n + 127) / 128, 128>>>(filled[1], x, y, o, n);
  cudaMemcpy(ho, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) if (ho[i] != hx[i] - hy[i]) bad_fill++;
  printf("stored by a kernel: %s\n", bad_fill ? "FAILED" : "PASSED");
  printf("host call: %g\n", mul(3.0f, 4.0f));
  by_jobs<<<1, 4>>>(o);
  cudaMemcpy(ho, o, 4 * sizeof(float), cudaMemcpyDeviceToHost);
  printf("constant records: %g %g %g %g\n", ho[0], ho[1], ho[2], ho[3]);
  fixed<sub><<<1, 4>>>(o);
  cudaMemcpy(ho, o, 4 * sizeof(float), cudaMemcpyDeviceToHost);
  printf("fixed<sub>: %g %g\n", ho[0], ho[3]);
  fixed<add><<<1, 4>>>(o);
  cudaMemcpy(ho, o, 4 * sizeof(float), cudaMemcpyDeviceToHost);
  printf("fixed<add>: %g %g\n", ho[0], ho[3]);

  cudaFree(x); cudaFree(w); cudaFree(table);
  call_one<<<1, 1>>>(h_add, o);  // then through a null pointer: the launch fails, as on a GPU
  cudaMemcpy(ho, o, sizeof(float), cudaMemcpyDeviceToHost);
  printf("call: %g\n", ho[0]);
  call_one<<<1, 1>>>(nullptr, y);
  cudaError_t err = cudaDeviceSynchronize();
  printf("null call: %s\n", err != cudaSuccess ? "launch failed" : "no error");
  return bad + bad_job + bad_table + bad_fill;
}
