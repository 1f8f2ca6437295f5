// Host-side Thrust with a translated kernel between its algorithms (tests/test_thrust.py):
// sort, sort_by_key, a descending sort, reduce and transform_reduce with the user's function
// objects, transform with a lambda, and a device_vector's memory passed to a kernel. It names
// thrust::system_error without including <thrust/system_error.h>, as programs written for Thrust's
// CUDA system do (that system includes it with every header).
#include <cstdio>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/copy.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#define N 5000

struct weighted {
  int w;
  __host__ __device__ long long operator()(int x) const { return (long long)x * w; }
};

struct farthest_from {
  int c;
  __host__ __device__ int operator()(int a, int b) const {
    int da = a > c ? a - c : c - a, db = b > c ? b - c : c - b;
    return da > db || (da == db && a > b) ? a : b;
  }
};

__global__ void scale_and_offset(float* f, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) f[i] = f[i] * s + i;
}

static long long int_checksum(const thrust::host_vector<int>& h) {
  long long w = 0;
  for (int i = 0; i < (int)h.size(); ++i) w += (long long)h[i] * (i % 13 + 1);
  return w;
}

static double float_checksum(const thrust::host_vector<float>& h) {
  double w = 0;
  for (int i = 0; i < (int)h.size(); ++i) w += (double)h[i] * (i % 5 + 1);
  return w;
}

int main() {
  thrust::host_vector<int> h(N);
  thrust::host_vector<float> hv(N);
  for (int i = 0; i < N; ++i) { h[i] = (i * 7919 + 13) % 10007; hv[i] = 0.5f * i; }
  thrust::device_vector<int> keys = h;
  thrust::device_vector<float> vals = hv;

  long long sum = thrust::reduce(keys.begin(), keys.end(), 0LL, thrust::plus<long long>());
  int far = thrust::reduce(keys.begin(), keys.end(), 5000, farthest_from{5000});
  long long wsum = thrust::transform_reduce(keys.begin(), keys.end(), weighted{3}, 0LL, thrust::plus<long long>());
  printf("sum %lld\nfarthest %d\nweighted %lld\n", sum, far, wsum);

  try {
    thrust::sort_by_key(keys.begin(), keys.end(), vals.begin());
  } catch (thrust::system_error& e) {
    printf("sort_by_key failed: %s\n", e.what());
    return 1;
  }
  thrust::host_vector<int> sorted = keys;
  thrust::host_vector<float> moved = vals;
  printf("sorted_checksum %lld\nvalues_checksum %.1f\n", int_checksum(sorted), float_checksum(moved));

  thrust::device_vector<int> desc = h;
  thrust::sort(desc.begin(), desc.end(), thrust::greater<int>());
  printf("descending %d %d %lld\n", (int)desc[0], (int)desc[N - 1], int_checksum(thrust::host_vector<int>(desc)));

  thrust::device_vector<float> f(N);
  thrust::transform(keys.begin(), keys.end(), f.begin(), [] __host__ __device__ (int x) { return 0.5f * x + 1.0f; });
  scale_and_offset<<<(N + 127) / 128, 128>>>(thrust::raw_pointer_cast(f.data()), N, 3.0f);
  cudaError_t err = cudaDeviceSynchronize();
  thrust::host_vector<float> back(N);
  thrust::copy(f.begin(), f.end(), back.begin());
  printf("kernel %s %.1f %.1f %.1f\n", cudaGetErrorString(err), (float)back[0], (float)back[N - 1], float_checksum(back));
  return 0;
}
