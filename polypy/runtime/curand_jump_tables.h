/* polypy's jump matrices of XORWOW (cuRAND's default generator): polypy_xorwow_matrices[k] is
 * A^(4^k) and polypy_xorwow_matrices[32 + k] is A^(2^67 * 4^k), A the step of the 160 xorshift
 * bits, k = 0..31. Row i (5 words) is the image of the state with only bit i set; the image of a
 * state is the xor of the rows of its set bits.
 *
 * The array is declared here, not initialized: it is computed, not carried as text. The frontend
 * (clang parsing CUDA: __CUDA__) gives it polypy.curand's words for the IR (the LLVM backend
 * and the emulator copy them into the array when a module is loaded); the C++ of a translated
 * program (compiled as C++: no __CUDA__) computes it below before main, by repeated squaring. */
#ifndef POLYPY_CURAND_JUMP_TABLES_H
#define POLYPY_CURAND_JUMP_TABLES_H
static __device__ unsigned int polypy_xorwow_matrices[64][800];

#if !(defined(__clang__) && defined(__CUDA__))
/* out = m m over GF(2): row i of out is the image under m of row i of m. */
static void polypy_xorwow_square(unsigned int* out, const unsigned int* m) {
  for (int i = 0; i < 160; i++) {
    unsigned int r[5] = {0u, 0u, 0u, 0u, 0u};
    for (int j = 0; j < 160; j++) {
      unsigned int take = 0u - ((m[5 * i + j / 32] >> (j % 32)) & 1u);
      for (int w = 0; w < 5; w++) r[w] ^= take & m[5 * j + w];
    }
    for (int w = 0; w < 5; w++) out[5 * i + w] = r[w];
  }
}

/* The matrix of one xorshift step (the Weyl counter is not in it): the images of the unit states. */
static void polypy_xorwow_step_matrix(unsigned int* m) {
  for (int i = 0; i < 160; i++) {
    unsigned int v[5] = {0u, 0u, 0u, 0u, 0u};
    v[i / 32] = 1u << (i % 32);
    unsigned int t = v[0] ^ (v[0] >> 2);
    m[5 * i] = v[1]; m[5 * i + 1] = v[2]; m[5 * i + 2] = v[3]; m[5 * i + 3] = v[4];
    m[5 * i + 4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1));
  }
}

/* Fills matrices first, first^4, first^16, ... into polypy_xorwow_matrices[base .. base + 31]. */
static void polypy_xorwow_fill_powers(unsigned int* m, int base) {
  unsigned int t[800];
  for (int k = 0; k < 32; k++) {
    for (int x = 0; x < 800; x++) polypy_xorwow_matrices[base + k][x] = m[x];
    polypy_xorwow_square(t, m);
    polypy_xorwow_square(m, t);
  }
}

static int polypy_xorwow_fill(void) {
  unsigned int m[800], t[800];
  polypy_xorwow_step_matrix(m);
  polypy_xorwow_fill_powers(m, 0);
  polypy_xorwow_step_matrix(m);
  for (int s = 0; s < 67; s++) { /* A^(2^67): a subsequence */
    polypy_xorwow_square(t, m);
    for (int x = 0; x < 800; x++) m[x] = t[x];
  }
  polypy_xorwow_fill_powers(m, 32);
  return 1;
}

/* Before main: a dynamic initializer, ahead of any of the program's own (this text comes first). */
static const int polypy_xorwow_filled = polypy_xorwow_fill();
#endif
#endif
