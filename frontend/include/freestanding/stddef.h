/* polypy bundled freestanding header (used only when no system compiler headers exist). */
#ifndef POLYPY_STDDEF_H
#define POLYPY_STDDEF_H
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
#ifndef __cplusplus
typedef __WCHAR_TYPE__ wchar_t;
#endif
#ifdef __cplusplus
#define NULL nullptr
namespace std { typedef decltype(nullptr) nullptr_t; typedef ::size_t size_t; typedef ::ptrdiff_t ptrdiff_t; }
#else
#define NULL ((void*)0)
#endif
#define offsetof(t, m) __builtin_offsetof(t, m)
#endif
