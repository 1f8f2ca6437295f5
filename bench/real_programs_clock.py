"""The clocks of the programs ``bench/real_programs.py`` runs: ``time()`` pinned to a constant
(``Program.fixed_time``), and CPU time instead of wall time (``--cpu-time``, issue 37).

On a shared, loaded machine a program's wall time depends on what else runs: PolyBench's
JACOBI2D (about 6 ms of work) printed anything from 6 to 15 ms between two runs a minute apart,
and the table's ratios below 1 were that noise. With one OpenMP thread the process's CPU time
is the time of its one computing thread, and other processes change it far less (they still
share the caches and the memory bus). Two ways of reading it, one per kind of timing:

- times a program prints of itself (PolyBench's ``gettimeofday`` timer, our OpenMP ports'
  ``omp_get_wtime``): a preloaded shim of ours (``LD_PRELOAD``) answers both calls with the
  process's CPU time, so the printed differences are CPU seconds. Nothing else reads that
  shim's clock: ``clock_gettime`` is left alone (polypy's runtime times its copies with it);
- whole-program times: the CPU time (user + system) of the finished child process, from
  ``getrusage(RUSAGE_CHILDREN)`` before and after it.

Only with one thread: the CPU time of several threads is their sum (and counts their waiting
where they spin), not a time to compare with a wall time."""
from __future__ import annotations

import pathlib
import resource
import subprocess
from typing import Mapping

# Program.fixed_time: time() returns this constant (lavaMD and particlefilter seed rand() from it)
FIXED_TIME_SHIM = """#include <time.h>
time_t time(time_t *t) { if (t) *t = (time_t)%d; return (time_t)%d; }
"""

CPU_CLOCK_SHIM = r"""#include <time.h>
#include <sys/time.h>
/* bench/real_programs_clock.py: the process's CPU time for the timers programs print with */
int gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec t;
    (void)tz;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    tv->tv_sec = t.tv_sec;
    tv->tv_usec = t.tv_nsec / 1000;
    return 0;
}
double omp_get_wtime(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
"""


def shim_library(work: pathlib.Path, stem: str, source: str, cc: str) -> pathlib.Path:
    """``source`` compiled by ``cc`` into ``work/lib<stem>.so`` (once, for every run of a
    program); raises ``RuntimeError`` with the compiler's message when it does not build."""
    library = work / f"lib{stem}.so"
    if not library.exists():
        (work / f"{stem}.c").write_text(source)
        r = subprocess.run([cc, "-shared", "-fPIC", "-O2", f"{stem}.c", "-o", library.name], cwd=work,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError((r.stderr or r.stdout).strip())
    return library


def with_preload(env: Mapping[str, str], library: pathlib.Path) -> dict[str, str]:
    """``env`` with ``library`` added to its ``LD_PRELOAD`` (the fixed-time shim may be there)."""
    preload = env.get("LD_PRELOAD", "")
    return {**env, "LD_PRELOAD": f"{preload}:{library}" if preload else str(library)}


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
