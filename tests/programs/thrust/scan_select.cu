// Host-side Thrust (tests/test_thrust.py): sequence, fill, inclusive and exclusive scans (with
// an operator), copy_if and count_if with a predicate object, counting, transform and zip
// iterators, and a function object whose __device__ operator() calls a __device__ function:
// Thrust's OpenMP system runs it on the CPU, where polypy's device code runs.
#include <cstdio>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/fill.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/tuple.h>

#define N 3000

__device__ float twice(float x) { return 2.0f * x; }

struct twice_plus_one {
  __device__ float operator()(float x) const { return twice(x) + 1.0f; }
};

struct multiple_of {
  int m;
  __host__ __device__ bool operator()(int x) const { return x % m == 0; }
};

struct product {
  __host__ __device__ float operator()(const thrust::tuple<float, float>& t) const {
    return thrust::get<0>(t) * thrust::get<1>(t);
  }
};

// nvcc's device pass (__CUDA_ARCH__ defined) gives the kernel; CCCL's headers are read in it too.
__global__ void add_index(int* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  if (i < n) a[i] += i % 7;
#else
  if (i < n) a[i] += 1000000;
#endif
}

int main() {
  thrust::device_vector<int> v(N);
  thrust::sequence(v.begin(), v.end(), 5, 3);
  add_index<<<(N + 255) / 256, 256>>>(thrust::raw_pointer_cast(&v[0]), N);
  cudaDeviceSynchronize();

  thrust::device_vector<int> inc(N), exc(N), run_max(N);
  thrust::inclusive_scan(v.begin(), v.end(), inc.begin());
  thrust::exclusive_scan(v.begin(), v.end(), exc.begin(), 7);
  thrust::device_vector<int> wave(N);
  thrust::transform(thrust::counting_iterator<int>(0), thrust::counting_iterator<int>(N), wave.begin(),
                    [] __host__ __device__ (int i) { return (i * 37) % 101 - i / 50; });
  thrust::inclusive_scan(wave.begin(), wave.end(), run_max.begin(), thrust::maximum<int>());
  printf("inclusive %d %d %d\n", (int)inc[0], (int)inc[N / 2], (int)inc[N - 1]);
  printf("exclusive %d %d %d\n", (int)exc[0], (int)exc[N / 2], (int)exc[N - 1]);
  printf("running_max %d %d %d\n", (int)run_max[10], (int)run_max[N / 3], (int)run_max[N - 1]);

  thrust::device_vector<int> picked(N);
  auto end = thrust::copy_if(v.begin(), v.end(), picked.begin(), multiple_of{4});
  int kept = (int)(end - picked.begin());
  long long picked_sum = thrust::reduce(picked.begin(), end, 0LL);
  int counted = (int)thrust::count_if(v.begin(), v.end(), multiple_of{4});
  printf("copy_if %d %d %d %lld\n", kept, (int)picked[0], (int)picked[kept - 1], picked_sum);
  printf("count_if %d\n", counted);

  thrust::device_vector<float> a(N), b(N);
  thrust::fill(a.begin(), a.end(), 1.5f);
  thrust::transform(a.begin(), a.end(), b.begin(), twice_plus_one());
  thrust::transform(thrust::counting_iterator<int>(0), thrust::counting_iterator<int>(N), a.begin(),
                    [] __host__ __device__ (int i) { return 0.25f * i; });
  float dot = thrust::transform_reduce(thrust::make_zip_iterator(thrust::make_tuple(a.begin(), b.begin())),
                                       thrust::make_zip_iterator(thrust::make_tuple(a.end(), b.end())), product(),
                                       0.0f, thrust::plus<float>());
  printf("device_functor %.2f\n", (float)b[17]);
  printf("zip_dot %.2f\n", dot);

  auto squares = thrust::make_transform_iterator(thrust::counting_iterator<long long>(0),
                                                 [] __host__ __device__ (long long i) { return i * i; });
  printf("transform_iterator %lld\n", thrust::reduce(squares, squares + N, 0LL));
  return 0;
}
