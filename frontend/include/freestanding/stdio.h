#ifndef POLYPY_STDIO_H
#define POLYPY_STDIO_H
#include <stddef.h>
#include <stdarg.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct polypy_FILE FILE;
extern FILE* stdin;
extern FILE* stdout;
extern FILE* stderr;
#define EOF (-1)
int printf(const char* format, ...);
int fprintf(FILE* stream, const char* format, ...);
int sprintf(char* str, const char* format, ...);
int snprintf(char* str, size_t size, const char* format, ...);
int vprintf(const char* format, va_list ap);
int vfprintf(FILE* stream, const char* format, va_list ap);
int puts(const char* s);
int putchar(int c);
int fputs(const char* s, FILE* stream);
int fflush(FILE* stream);
FILE* fopen(const char* path, const char* mode);
int fclose(FILE* stream);
size_t fread(void* ptr, size_t size, size_t n, FILE* stream);
size_t fwrite(const void* ptr, size_t size, size_t n, FILE* stream);
int scanf(const char* format, ...);
int sscanf(const char* str, const char* format, ...);
int fscanf(FILE* stream, const char* format, ...);
void perror(const char* s);
#ifdef __cplusplus
}
#endif
#endif
