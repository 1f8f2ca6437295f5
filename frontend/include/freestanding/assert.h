#ifndef POLYPY_ASSERT_H
#define POLYPY_ASSERT_H
#ifdef __cplusplus
extern "C" {
#endif
void __assert_fail(const char* expr, const char* file, unsigned int line, const char* fn);
#ifdef __cplusplus
}
#endif
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __assert_fail(#e, __FILE__, __LINE__, __func__))
#endif
#endif
