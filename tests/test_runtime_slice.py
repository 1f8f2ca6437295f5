"""A translated program holds only the runtime declarations it uses (``frontend.runtime_slice``,
``codegen.c.module.runtime_header``): the graph over a small runtime of our own, and whole programs
that use little of the runtime and much of it."""
from __future__ import annotations

import pathlib
import subprocess

from c_support import need_compiler
from codegen.c import find_compiler
from codegen.c.module import _left_out
from frontend.runtime_slice import unused_runtime_lines
from polypy.driver.cli import main

RUNTIME = """\
#define RT_TWICE(x) rt_double(x)
static inline int rt_unused(int x) { return x + 1; }
static inline int rt_leaf(int x) { return x * 3; }
static inline int rt_used(int x) { return rt_leaf(x) + 1; }
static inline int rt_double(int x) { return 2 * x; }
/* Only used by rt_unused_too:
 * left out with it. */
static inline int rt_helper(int x) { return x - 1; }
static inline int rt_unused_too(int x) { return rt_helper(x); }
struct rt_counter {
  int n;
  ~rt_counter();
};
rt_counter::~rt_counter() { n = 0; }
template <class T> struct rt_kind { static const int value = 0; };
template <> struct rt_kind<float> { static const int value = 1; };
struct rt_starter { rt_starter() { rt_leaf(1); } };
static rt_starter rt_start_up;
static inline int rt_in_region(int n) {
  int s = 0;
#pragma omp parallel for reduction(+ : s)
  for (int i = 0; i < n; ++i) s += rt_parallel_leaf(i);
  return s;
}
"""


def _lines(text: str, name: str) -> set[int]:
    return {i + 1 for i, line in enumerate(text.splitlines()) if name in line}


def test_unused_declarations_are_found_through_the_graph(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    # rt_parallel_leaf is used only inside an OpenMP region (no cursors there: found by its tokens).
    text = "static inline int rt_parallel_leaf(int i) { return i; }\n" + RUNTIME
    (runtime / "cuda_runtime.h").write_text(text)
    program = ('#include "cuda_runtime.h"\n'
               "int main() { rt_counter c; c.n = rt_used(1) + RT_TWICE(2) + rt_kind<float>::value"
               " + rt_in_region(3); return c.n; }\n")
    unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime)
    assert unused is not None
    (path, spans), = unused.items()
    gone = {line for a, b in spans for line in range(a, b + 1)}
    # The comment written above a declaration left out goes with it.
    assert gone == (_lines(text, "int rt_unused") | _lines(text, "rt_helper(int") | _lines(text, "Only used by")
                    | _lines(text, "left out with it"))
    for kept in ("rt_leaf(int", "rt_used(int", "rt_double(int", "~rt_counter()", "rt_kind<float>", "rt_start_up",
                 "rt_parallel_leaf(int", "RT_TWICE"):
        assert not gone & _lines(text, kept), kept
    # (codegen.c.module._left_out also drops the comment right above each span.)
    lines = text.splitlines()
    out = _left_out(lines, spans)
    assert {i + 1 for i in out} == gone | _lines(text, "Only used by") | _lines(text, "left out with it")


MACROS = """\
#define RT_UNUSED 7
/* Used by no one. */
#define RT_UNUSED_FN(x) ((x) + 1)
#define RT_TESTED 1
#define RT_UNUSED_IN_BODY 3
#ifdef RT_TESTED
static inline int rt_tested(void) { return RT_UNUSED_IN_BODY; }
#endif
#define RT_EXPANDS(T) static inline T rt_made_##T(T x) { return x; }
RT_EXPANDS(int)
#undef RT_EXPANDS
#ifndef RT_NEVER_DEFINED
#define RT_EMPTY_GROUP 1

#endif
#ifndef RT_DEFAULTED
#define RT_DEFAULTED 1
#endif
#ifdef RT_NEVER_DEFINED
#define RT_TWICE_DEFINED 1
#else
#define RT_TWICE_DEFINED 2
#endif
#ifndef __RT_TOOLKIT__
#define __RT_TOOLKIT__ 1
#endif
#ifndef __RT_SPELLED__
#define __RT_SPELLED__
#endif
#ifndef __CUDACC__
#define __CUDACC__
#endif
#ifndef RT_PER_COMPILER
#if defined(__clang__)
#define RT_PER_COMPILER 1
#else
#define RT_PER_COMPILER 2
#endif
#endif
#define RT_BY_USER 5
#define RT_USED_MACRO(x) rt_used_fn(x)
static inline int rt_used_fn(int x) { return x; }
extern "C" int rt_exported(int x) { return x; }
"""


def test_macros_comments_and_empty_groups_go_with_what_uses_them(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "cuda_runtime.h").write_text(MACROS)
    # A header the program includes from elsewhere spells a toolkit macro (in a comment: any
    # spelling keeps it).
    system = tmp_path / "sys"
    system.mkdir()
    (system / "other.h").write_text("/* __RT_SPELLED__ */\nint other_header;\n")
    # The program's own conditional names RT_BY_USER: it stays defined.
    program = ('#include "cuda_runtime.h"\n#include <other.h>\n#ifdef RT_BY_USER\nint x = 1;\n#endif\n'
               "int main() { return RT_USED_MACRO(2); }\n")
    for exports in (True, False):
        unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime, exports=exports,
                                      extra_dirs=(str(system),))
        assert unused is not None
        (_, spans), = unused.items()
        gone = {line for a, b in spans for line in range(a, b + 1)}
        want = set()
        # Macros nothing names, the comment above one, rt_tested (unused) and the macro only it
        # names, a macro whose expansions are all unused with its #undef, a group left empty.
        # (rt_tested's group is left empty: it goes; RT_TESTED, named by its #ifdef, stays. A
        # default definition's own #ifndef does not use it; a macro left out goes from the branch
        # the parse did not take too, as does one defined per compiler inside its #ifndef. A
        # toolkit name (__X__) stays where a header the program includes spells it, nvcc's
        # predefined __CUDACC__ always.)
        for dropped in ("RT_UNUSED 7", "Used by no one", "RT_UNUSED_FN", "rt_tested(void)", "RT_UNUSED_IN_BODY 3",
                        "RT_EXPANDS", "RT_NEVER_DEFINED", "RT_EMPTY_GROUP", "#ifdef RT_TESTED", "#endif", "#else",
                        "RT_DEFAULTED", "RT_TWICE_DEFINED", "__RT_TOOLKIT__", "RT_PER_COMPILER", "#if defined(__clang__)"):
            want |= _lines(MACROS, dropped)
        lines = MACROS.splitlines()
        want -= {lines.index(f"#ifndef {kept}") + 3 for kept in ("__RT_SPELLED__", "__CUDACC__")}  # their #endif
        if not exports:
            want |= _lines(MACROS, "rt_exported")
        assert gone == want, (exports, sorted(gone ^ want))
        # Named by a conditional of the runtime, by the program, used by main: they stay.
        for kept in ("#define RT_TESTED", "RT_BY_USER", "__RT_SPELLED__", "__CUDACC__", "RT_USED_MACRO", "rt_used_fn(int"):
            assert not gone & _lines(MACROS, kept), kept


HOOKS = """\
#define POLYPY_RT_HOOKED(installed, ...) __VA_ARGS__
static void (*rt_hook)(void) = 0;
static inline void rt_call_hook(void) { if (rt_hook) rt_hook(); }
static inline void rt_waits(void) {}
static inline int rt_copy(int x) {
  POLYPY_RT_HOOKED(rt_waits, rt_call_hook());
  POLYPY_RT_HOOKED(rt_waits, { if (rt_hook) return -1; });  /* a block */
  return x;
}
static inline void rt_start_streams(void) { rt_hook = &rt_waits; }
#ifdef __cplusplus
static inline int rt_in_team(void) { return 0; }
#else
#define rt_in_team() 0
#endif
"""


def test_a_hooked_statement_stays_only_with_what_installs_its_hook(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "cuda_runtime.h").write_text(HOOKS)
    hooked = _lines(HOOKS, "  POLYPY_RT_HOOKED(")
    for streams in (False, True):
        program = '#include "cuda_runtime.h"\nint main() { %s return rt_copy(1); }\n' % (
            "rt_start_streams();" if streams else "")
        unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime, exports=False)
        assert unused is not None
        gone = {line for _, spans in unused.items() for a, b in spans for line in range(a, b + 1)}
        # Without what installs the hook: its statements, what only they use (the macro too),
        # and a function left out with its C spelling (a macro in the branch not taken).
        lost = hooked | _lines(HOOKS, "rt_call_hook(void)") | _lines(HOOKS, "#define POLYPY_RT_HOOKED")
        assert not gone & _lines(HOOKS, "rt_copy(int"), streams
        if streams:
            assert not gone & lost, sorted(gone & lost)
        else:
            assert lost <= gone, sorted(lost - gone)
            assert _lines(HOOKS, "rt_in_team") | _lines(HOOKS, "__cplusplus") <= gone
            # A file linked with others: another object may install the hook.
            linked = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime, exports=True)
            assert linked is not None
            assert not {line for _, spans in linked.items() for a, b in spans for line in range(a, b + 1)} & lost


SIZED = """\
#include <stddef.h>
#include <string.h>
#define POLYPY_RT_LARGE(...) __VA_ARGS__
static inline void rt_fill_large(void* d, const void* s, size_t n) { memcpy(d, s, n); }
static inline void rt_fill(void* d, const void* s, size_t n) {
  POLYPY_RT_LARGE(if (n >= 4096) return rt_fill_large(d, s, n););
  memcpy(d, s, n);
}
static inline int cudaMemcpy(void* d, const void* s, size_t n, int kind) { (void)kind; rt_fill(d, s, n); return 0; }
static inline int cudaMemcpy2D(void* d, const void* s, size_t n) { return cudaMemcpy(d, s, n, 0); }
"""


def test_large_size_paths_stay_only_where_a_call_may_reach_them(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "cuda_runtime.h").write_text(SIZED)
    large = _lines(SIZED, "  POLYPY_RT_LARGE(") | _lines(SIZED, "rt_fill_large(void*") | \
        _lines(SIZED, "#define POLYPY_RT_LARGE")
    body = "int main(int argc, char** argv) {\n  (void)argv;\n%s\n  return 0;\n}\n"
    cases = {
        # Every size known below the bound (frontend.copy_sizes): constants, a local's straight-line value.
        "cudaMemcpy(a, b, 100 * sizeof(float), 0);": False,
        "const int nx = 10; size_t bytes = (size_t)nx * 7 * sizeof(float);\n  cudaMemcpy(a, b, bytes, 0);": False,
        # A size read at run time, at the bound, written in a branch, reaching the copy another way,
        # or the function's address taken: the large path stays.
        "cudaMemcpy(a, b, (size_t)argc, 0);": True,
        "cudaMemcpy(a, b, 256 << 10, 0);": True,
        "size_t n = 16; if (argc > 2) n = 1 << 20;\n  cudaMemcpy(a, b, n, 0);": True,
        "cudaMemcpy(a, b, 16, 0); cudaMemcpy2D(a, b, 16);": True,
        "int (*f)(void*, const void*, size_t, int) = cudaMemcpy; f(a, b, 16, 0);": True,
        "#define TWO(n) cudaMemcpy(a, b, 16, 0); cudaMemcpy(a, b, n, 0)\n  TWO((size_t)argc);": True,
        # (a host function template: the size a parameter)
        "template <class T> void put(T* d, size_t n) { cudaMemcpy(d, b, n * sizeof(T), 0); }\n"
        "put(a, 4);": True,
    }
    for call, stays in cases.items():
        before, _, call = call.rpartition("\n") if call.startswith("template") else ("", "", call)
        program = '#include "cuda_runtime.h"\nstatic char a[1 << 20], b[1 << 20];\n' + before + "\n" + body % ("  " + call)
        unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime, exports=False)
        assert unused is not None
        gone = {line for _, spans in unused.items() for a, b in spans for line in range(a, b + 1)}
        assert not gone & _lines(SIZED, "rt_fill(void*"), call
        if stays:
            assert not gone & large, (call, sorted(gone & large))
        else:
            assert large <= gone, (call, sorted(large - gone))


LANGUAGES = """\
/* An include guard: the runtime is pasted once. */
#ifndef RT_H
#define RT_H
#include <stddef.h>
#include <assert.h>
#ifdef __cplusplus
#define RT_STATE inline
#else
#define RT_STATE static inline
#endif
RT_STATE int rt_f(void) { return 1; }
#ifndef __cplusplus
#include <stdbool.h>
#endif
#ifdef __cplusplus
static inline bool rt_g(void) { return true; }
#endif
#include <stddef.h> /* again */
#include <assert.h> /* again: NDEBUG is read again */
#endif /* RT_H */
"""


def test_the_c_branches_of_the_runtime_go(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "cuda_runtime.h").write_text(LANGUAGES)
    program = '#include "cuda_runtime.h"\nint main() { return rt_f() + rt_g(); }\n'
    unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime)
    assert unused is not None
    gone = {line for _, spans in unused.items() for a, b in spans for line in range(a, b + 1)}
    # A translated program is C++: each `#ifdef __cplusplus` group leaves its C++ branch alone;
    # the runtime is pasted once: its include guard goes (with the comment above it), and a
    # system header's second inclusion under the same conditions (not <assert.h>'s).
    assert gone == _lines(LANGUAGES, "stddef.h> /* again") | _lines(LANGUAGES, "RT_H") | _lines(LANGUAGES, "include guard") | _lines(LANGUAGES, "__cplusplus") | _lines(LANGUAGES, "#else") | _lines(LANGUAGES, "#endif") | \
        _lines(LANGUAGES, "static inline\n") | _lines(LANGUAGES, "RT_STATE static") | _lines(LANGUAGES, "stdbool")


LIBRARY = """\
#include <vector>
#pragma push_macro("RT_ATTR")
#undef RT_ATTR
#include <mutex>
#pragma pop_macro("RT_ATTR")
#include <stdio.h>
static inline int rt_c(void) { return 1; }
"""


def test_the_cpp_library_headers_nothing_uses_go(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "cuda_runtime.h").write_text(LIBRARY)
    # The program uses std::vector, brought by the runtime's <vector>; nothing uses <mutex>.
    program = '#include "cuda_runtime.h"\nint main() { std::vector<int> v(3); return rt_c() + (int)v.size(); }\n'
    unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime)
    assert unused is not None
    gone = {line for _, spans in unused.items() for a, b in spans for line in range(a, b + 1)}
    assert gone == _lines(LIBRARY, "<mutex>") | _lines(LIBRARY, "RT_ATTR")  # (a push and pop of nothing)
    # A template of the program's that spells std: its dependent names name no declaration yet.
    program = ('#include "cuda_runtime.h"\ntemplate <class T> int n(const T& v) { return (int)std::size(v); }\n'
               'int main() { return rt_c(); }\n')
    unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime)
    assert unused is not None
    gone = {line for _, spans in unused.items() for a, b in spans for line in range(a, b + 1)}
    assert not gone & (_lines(LIBRARY, "<vector>") | _lines(LIBRARY, "<mutex>"))


LISTS = """\
/* The codes:
 * a list macro. */
#define RT_CODES(X) \\
  X(rt_ok, 0) \\
  X(rt_bad, 1) /* used */ \\
  X(rt_worse, 2) \\
  X(rt_last, 9)
#define RT_ENUMERATOR(name, value) name = value,
typedef enum rt_code { RT_CODES(RT_ENUMERATOR) } rt_code_t;
#define RT_NAMES(X) \\
  X(rt_red, 0) \\
  X(rt_green, 1)
#define RT_COLOR(name, value) name = value,
enum rt_color { RT_NAMES(RT_COLOR) };
#define RT_CASE(name, value) case name: return #name;
static inline const char* rt_color_name(int c) { switch (c) { RT_NAMES(RT_CASE) } return "?"; }
static inline int rt_fails(void) {
  // a comment on its own line
  return rt_bad; /* after code: stays */
}
#define RT_CONTINUED(x) \\
  (x) \\
  /* the macro's last line */
int rt_after = RT_CONTINUED(1);
"""


def test_comments_and_unused_entries_of_list_macros_go(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "cuda_runtime.h").write_text(LISTS)
    program = '#include "cuda_runtime.h"\nint main() { return rt_fails() + rt_worse + (int)*rt_color_name(1) + rt_after; }\n'
    for comments in (True, False):
        unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime, comments=comments)
        assert unused is not None
        gone = {line for _, spans in unused.items() for a, b in spans for line in range(a, b + 1)}
        # RT_CODES is used only by the enum that declares its names: the entries nothing names go
        # (rt_ok), not the last (the enum's largest value). RT_NAMES is also used by a switch: whole.
        want = _lines(LISTS, "X(rt_ok")
        if not comments:
            want |= _lines(LISTS, "The codes") | _lines(LISTS, "a list macro") | _lines(LISTS, "on its own line")
        assert gone == want, (comments, sorted(gone ^ want))
        for kept in ("X(rt_bad", "X(rt_worse", "X(rt_last", "X(rt_red", "X(rt_green", "after code", "last line"):
            assert not gone & _lines(LISTS, kept), kept


def test_jacobi_solver_gets_the_memory_functions_and_no_graphs(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    source = pathlib.Path(__file__).parent.parent / "samples" / "programs" / "jacobi_solver.cu"
    out = tmp_path / "jacobi.cpp"
    assert main(["translate", str(source), "-o", str(out)]) == 0
    text = out.read_text()
    assert "cudaMalloc(" in text and "cudaMemset(" in text and "cudaMemcpy(" in text
    for unused in ("cudaGraphInstantiate(", "cudaStreamCreate(", "cudaCreateTextureObject(", "cudaMallocPitch("):
        assert unused not in text, unused
    assert "float polypy_expf(float x) {" not in text  # the kernel prelude's exp: unused here
    # 5,021 lines with the whole runtime and prelude, 1,025 with comments, 705 without them; the
    # default stream's waits for created streams (parts/queues.h's hooks) and a team of one add ~35;
    # the checks of cudaMemcpy/cudaMemset's arguments at the call (an allocation's range) ~25.
    # Hooks installed by no part the program uses: ~40 fewer; the C branches of `#ifdef __cplusplus`:
    # ~15; include guards, repeated includes, blank lines, the C++ library's headers: ~60 (664).
    # The launchers' worker loop in the prelude's polypy_run_blocks, no dispatcher for a kernel's
    # only version: ~30 fewer (635). Its copies, fills and allocations all of a size known below
    # 256 KiB: no large-size paths (POLYPY_RT_LARGE: population, all cores, huge pages), ~85 fewer (549).
    # <initializer_list> and <new>, which nvcc's headers bring, where the C++ library has them: 6 more.
    # The x86-64 branch of the prelude's saturating conversions (an `#if`/`#else` the slicer keeps
    # when no conversion is used) and the launch check's grid x limit: 7 more (565).
    assert len(text.splitlines()) < 568
    for large in ("POLYPY_RT_LARGE", "polypy_rt_fill_large", "polypy_rt_huge_block", "polypy_rt_populate"):
        assert large not in text, large
    assert text.count("polypy_run_blocks<") == 2 and "_launch_b" not in text
    # No comment of the runtime's, no error code the program cannot meet, no toolkit keyword
    # macro no header spells, no team branch in launchers no merged host loop calls.
    assert "The last error, as CUDA keeps it" not in text and "X(cudaErrorNotReady" not in text
    assert "X(cudaErrorMemoryAllocation" in text and "#define __launch_bounds__" not in text
    assert "#define __CUDACC__" in text and "if (polypy_rt_in_team())" not in text and "__cplusplus" not in text
    assert "#include <atomic>" not in text and "#include <thread>" not in text  # for streams only
    # No stream, pool, graph allocation or merged host loop: none of the hooks they install
    # (POLYPY_RT_HOOKED statements), the last error never redirected.
    for hook in ("POLYPY_RT_HOOKED", "polypy_rt_legacy_wait", "polypy_rt_free_hooks", "polypy_rt_team_flag",
                 "polypy_rt_error_redirect", "polypy_rt_in_team"):
        assert hook not in text, hook
    # One file, main included: no other objects call the runtime's C entry points (or the
    # emulator's texture fetch); a file compiled with -c keeps the entry points.
    assert "POLYPY_RT_C_ENTRY(cudaError_t, cudaMalloc" not in text and "polypy_tex_value" not in text
    part = tmp_path / "jacobi_c.cpp"
    assert main(["translate", "-c", str(source), "-o", str(part)]) == 0
    assert "POLYPY_RT_C_ENTRY(cudaError_t, cudaMalloc" in part.read_text()
    # (and the hooks: another object of the program may use streams)
    assert "POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());" in part.read_text()
    assert "polypy_rt_fill_large(void* dst" in part.read_text()  # (another object's copies: any size)
    _build_and_run(tmp_path, out, "jacobi 100x70, 200 iterations\nsum = 778.3144\n")


PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add_one(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += expf(0.0f);
}

int main()
{
    const int n = 1000;
    float* d;
    cudaMalloc(&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, s);
    cudaGraph_t g = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    add_one<<<(n + 255) / 256, 256, 0, s>>>(d, n);
    add_one<<<(n + 255) / 256, 256, 0, s>>>(d, n);
    cudaStreamEndCapture(s, &g);
    cudaGraphExec_t e = nullptr;
    cudaGraphInstantiate(&e, g, 0);
    cudaGraphLaunch(e, s);
    cudaGraphLaunch(e, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = -1.0f;
    cudaEventElapsedTime(&ms, a, b);
    float h[n];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("%g %g %s %s\n", h[0], h[n - 1], ms >= 0.0f ? "timed" : "untimed", cudaGetErrorString(cudaGetLastError()));
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    cudaFree(d);
    return 0;
}
"""


def _translated(tmp_path: pathlib.Path, name: str, source: str) -> tuple[pathlib.Path, str]:
    """``source`` written to ``tmp_path/name.cu`` and translated: the C++ file and its text."""
    (tmp_path / f"{name}.cu").write_text(source)
    out = tmp_path / f"{name}.cpp"
    assert main(["translate", str(tmp_path / f"{name}.cu"), "-o", str(out)]) == 0
    return out, out.read_text()


def test_a_program_using_streams_events_and_graphs_gets_them(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    out, text = _translated(tmp_path, "graphs", PROGRAM)
    for used in ("cudaStreamCreate(", "cudaEventElapsedTime(", "cudaGraphInstantiate(", "cudaStreamBeginCapture("):
        assert used in text, used
    assert "cudaCreateTextureObject(" not in text
    # The streams' hooks: the default stream's copies wait for them, their errors go to the issuer.
    assert "POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());" in text
    assert "*polypy_rt_error_redirect()" in text and "polypy_rt_pool_forgets" not in text
    assert "X(cudaErrorNotReady" in text  # cudaGetErrorString: every error code
    assert "float polypy_expf(float x) {" in text  # the kernel's expf
    _build_and_run(tmp_path, out, "4 4 timed no error\n")


LARGE = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void twice(float* x, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}

int main(int argc, char** argv)
{
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : (size_t)3 << 20;  /* 12 MiB: known only at run time */
    size_t bytes = n * sizeof(float);
    float* h = (float*)malloc(bytes);
    for (size_t i = 0; i < n; ++i) h[i] = (float)(i % 7);
    float* d;
    cudaMalloc(&d, bytes);
    cudaMemset(d, 0, bytes);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    twice<<<(unsigned)((n + 255) / 256), 256>>>(d, n);
    cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += h[i];
    printf("%zu %.1f %g\n", n, sum, h[n - 1]);
    cudaFree(d);
    free(h);
    return 0;
}
"""


def test_a_program_copying_sizes_known_at_run_time_gets_the_large_copies(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    out, text = _translated(tmp_path, "large", LARGE)
    for large in ("POLYPY_RT_LARGE(if (count >= POLYPY_RT_POPULATE_BYTES)", "polypy_rt_fill_large(void* dst",
                  "POLYPY_RT_LARGE(return polypy_rt_huge_block(rounded););", "polypy_rt_populate(char* d"):
        assert large in text, large
    n = 3 << 20
    want = sum(2.0 * (i % 7) for i in range(n))
    _build_and_run(tmp_path, out, f"{n} {want:.1f} {2.0 * ((n - 1) % 7):g}\n")


def _build_and_run(tmp_path: pathlib.Path, source: pathlib.Path, want_start: str) -> None:
    exe = tmp_path / "program"
    build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", "-Wall", str(source), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning" not in build.stderr, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(want_start), run.stdout


BRACED = r"""
#include <cstdio>
#include <cuda_runtime.h>

struct Acc { int n; };

__global__ void add(int* x, int by) { x[threadIdx.x] += by; }

int main()
{
    int* d;
    cudaMalloc(&d, 4 * sizeof(int));
    cudaMemset(d, 0, 4 * sizeof(int));
    for (int by : {1, 20, 300}) add<<<1, 4>>>(d, by);
    int h[4];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    alignas(Acc) unsigned char raw[sizeof(Acc)];
    Acc* a = new (raw) Acc{h[0] + h[3]};
    printf("%d %d\n", h[1], a->n);
    cudaFree(d);
    return 0;
}
"""


def test_a_range_for_over_a_braced_list_and_a_placement_new_compile(tmp_path: pathlib.Path) -> None:
    # nvcc's host headers bring <initializer_list> and <new>; the slice used to drop the runtime's
    # C++ headers that no name the program spells came through, and g++ rejected the range-for.
    need_compiler(cpp=True)
    out, text = _translated(tmp_path, "braced", BRACED)
    assert "#include <initializer_list>" in text
    _build_and_run(tmp_path, out, "321 642\n")
