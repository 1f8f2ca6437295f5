/* The C side of multifile_kernels.cu: plain C, compiled with cc, linked with the translation. */
#include <stdio.h>

int axpb_on_device(float* host, float a, float b, int n);

int main(void) {
  float x[100];
  double sum = 0;
  for (int i = 0; i < 100; i++) x[i] = (float)i;
  if (axpb_on_device(x, 0.5f, 2.0f, 100) != 0) return 1;
  for (int i = 0; i < 100; i++) sum += x[i];
  printf("x[0] %.2f x[99] %.2f sum %.2f\n", x[0], x[99], sum);
  return 0;
}
