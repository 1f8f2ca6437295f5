"""cudaMalloc's alignment (polypy's runtime, parts/memory.h): CUDA guarantees that every address
the allocation routines return is aligned to at least 256 bytes, and programs rely on it
(NVIDIA's dmmaTensorCoreGemm asserts `((unsigned long long)A) % 128 == 0`): small, odd, large
and reused blocks."""
from __future__ import annotations

from c_support import run_against_runtime

PROGRAM = r"""
#include <cstdio>
#include "cuda_runtime.h"
int main() {
  size_t sizes[] = {1, 8, 100, 255, 256, 257, 4096 + 8, 100000, 3 << 20};
  int bad = 0, count = 0;
  for (int round = 0; round < 2; ++round) {       // the second round reuses the freed blocks
    void* p[9];
    for (int i = 0; i < 9; ++i) {
      if (cudaMalloc(&p[i], sizes[i]) != cudaSuccess) return 1;
      bad += ((unsigned long long)p[i]) % 256 != 0;
      ++count;
    }
    for (int i = 0; i < 9; ++i) cudaFree(p[i]);
  }
  printf("%d of %d misaligned\n", bad, count);
  return 0;
}
"""


def test_cuda_malloc_returns_256_byte_aligned_blocks(tmp_path) -> None:
    assert run_against_runtime(tmp_path, "malloc_alignment", PROGRAM) == "0 of 18 misaligned\n"
