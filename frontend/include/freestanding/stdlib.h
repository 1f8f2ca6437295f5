#ifndef POLYPY_STDLIB_H
#define POLYPY_STDLIB_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#define RAND_MAX 2147483647
void* malloc(size_t size);
void* calloc(size_t n, size_t size);
void* realloc(void* ptr, size_t size);
void* aligned_alloc(size_t alignment, size_t size);
void free(void* ptr);
void exit(int status);
void _Exit(int status);
void abort(void);
int atexit(void (*fn)(void));
int atoi(const char* s);
long atol(const char* s);
double atof(const char* s);
long strtol(const char* s, char** end, int base);
unsigned long strtoul(const char* s, char** end, int base);
double strtod(const char* s, char** end);
float strtof(const char* s, char** end);
int rand(void);
void srand(unsigned int seed);
int abs(int x);
long labs(long x);
long long llabs(long long x);
char* getenv(const char* name);
void qsort(void* base, size_t n, size_t size, int (*cmp)(const void*, const void*));
#ifdef __cplusplus
}
#endif
#endif
