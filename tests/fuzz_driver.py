"""Fuzz driver: seeded mutants of the samples through ``polypy translate`` and ``polypy grad``.

    python tests/fuzz_driver.py --count 10000 --seed 1 --jobs 2 [--out DIR] [--time-budget S]
    python tests/fuzz_driver.py --seed 1 --only 4711          # one mutant again, verbose

Every mutant must meet the CLI's contract (DESIGN.md, "Contracts users rely on"): exit 0 with the
output file written, or exit 1 with ``file:line:col: error: message``, the source line and a caret
on stderr, no traceback and no output file. Anything else is a failure of one class:

    traceback   an uncaught exception or an "internal error" (a polypy bug)
    signal      killed by a signal (a crash in libclang or llvmlite, say)
    hang        still running after --timeout seconds, and again in a fresh process given
                ``HANG_RECHECK`` times as long (a command that then finishes was only slow on a
                loaded machine: it is counted under ``slow`` and judged by how it finished)
    partial     an output file (or a temporary one) left behind after a non-zero exit
    unlocated   an error without file:line:col, or without the source line and caret
    other       any other exit status, or exit 0 without the output file

Mutant ``i`` of seed ``s`` is a pure function of (s, i): a source file from samples/ and
samples/programs/, then one mutation (byte flips, token edits, truncation, long lines, deep
nesting, long expressions, non-UTF-8 bytes, C++ constructs, lines spliced from another sample).
Each runs through ``translate -o`` and, for a kernel sample (whose kernel name is known), through
``grad --kernel K -o``.

Speed: the commands run in long-lived worker processes that call ``polypy.driver.cli.main`` in
process (stdout and stderr captured at the file-descriptor level, so libclang's output is caught
too); a worker killed by a signal or past the time limit is replaced. Each failure is run again
in a fresh ``python -m polypy.driver.cli`` process, whose verdict is the one counted (a failure
only the long-lived worker shows is counted as ``inprocess-only``). Failing mutants are written
to the output directory, one file per command, with the command, its status and its stderr.

The mutations are tests/fuzz_mutations.py. This module has no ``test_`` functions; tests/test_fuzz.py runs a few hundred mutants of it.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import pathlib
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Callable, Iterable, Iterator

from fuzz_mutations import MUTATIONS, Mutant, load_sources, make_mutant

CLASSES = ("traceback", "signal", "hang", "partial", "unlocated", "other", "inprocess-only")
DEFAULT_TIMEOUT = 60.0
WORKER_RECYCLE = 250  # commands a worker runs before it is replaced (bounds leaks and caches)


# --------------------------------------------------------------------------- the contract

@dataclasses.dataclass
class Outcome:
    argv: list[str]
    rc: int | None          # None: timed out
    stderr: str
    leftovers: list[str]    # output (or temporary) files present after the command
    output_written: bool
    empty_input: bool = False  # an empty file has no line to show under an error

    @property
    def verdict(self) -> str:
        """'ok' or the failure class (see the module docstring)."""
        return classify(self)


_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: \S")
_CARET = re.compile(r"^[ \t]*\^$")


def classify(o: Outcome) -> str:
    if o.rc is None:
        return "hang"
    if o.rc < 0:
        return "signal"
    if "Traceback (most recent call last)" in o.stderr or "internal error" in o.stderr:
        return "traceback"
    if o.rc == 0:
        return "ok" if o.output_written else "other"
    if o.leftovers:
        return "partial"
    if o.rc != 1:
        return "other"
    lines = o.stderr.splitlines()
    for i, line in enumerate(lines):
        if " error: " in line or line.startswith("error:"):
            if not _LOCATED.match(line):
                return "unlocated"
            if (i + 2 >= len(lines) or not _CARET.match(lines[i + 2])) and not o.empty_input:
                return "unlocated"
            return "ok"
    return "unlocated"


def commands_for(mutant: Mutant, path: str, out_dir: str) -> list[list[str]]:
    """The CLI argument lists a mutant runs through."""
    cmds = [["translate", path, "-o", os.path.join(out_dir, "out.cpp")]]
    if mutant.source.kernel is not None:
        cmds.append(["grad", path, "--kernel", mutant.source.kernel, "-o", os.path.join(out_dir, "out_grad.cu")])
    return cmds


def _output_of(argv: list[str]) -> str:
    return argv[argv.index("-o") + 1]


def _leftovers(out_dir: str, source_name: str) -> list[str]:
    return sorted(f for f in os.listdir(out_dir) if f != source_name)


# --------------------------------------------------------------------------- running commands

def child_env(scratch: str) -> dict[str, str]:
    """The environment of polypy's processes: compiled-code cache under the scratch directory
    (unless one is set already, as the test suite does)."""
    env = dict(os.environ)
    env.setdefault("POLYPY_CACHE_DIR", os.path.join(scratch, "cache"))
    return env


def run_fresh(argv: list[str], timeout: float, cwd: str) -> tuple[int | None, str]:
    """``python -m polypy.driver.cli ARGV`` in a new process: (exit status or None, stderr)."""
    try:
        p = subprocess.run([sys.executable, "-m", "polypy.driver.cli", *argv], cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout,
                           env=child_env(os.path.dirname(os.path.abspath(cwd))))  # cwd: a directory in scratch
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr or b""
        return None, err.decode("utf-8", "replace")
    return p.returncode, p.stderr.decode("utf-8", "replace")


def _worker_main() -> int:
    """A worker: JSON requests on stdin, JSON answers on the original stdout; fds 1 and 2 go to a
    file while a command runs so that everything it prints (libclang included) is captured."""
    from polypy.driver.cli import main

    reply = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    capture = tempfile.TemporaryFile()
    for line in sys.stdin:
        request = json.loads(line)
        capture.seek(0)
        capture.truncate()
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(capture.fileno(), 1)
        os.dup2(capture.fileno(), 2)
        try:
            rc = main(request["argv"])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the real CLI would print and die of
            traceback.print_exc()
            rc = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        capture.seek(0)
        text = capture.read().decode("utf-8", "replace")
        reply.write(json.dumps({"rc": rc, "stderr": text}) + "\n")
    return 0


class Worker:
    """A long-lived ``fuzz_driver.py --worker`` process."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.used = 0

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--worker"], cwd=self.cwd,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=child_env(self.cwd), text=True, bufsize=1)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, argv: list[str], timeout: float, cwd: str) -> tuple[int | None, str]:
        """Run one command (``cwd`` is unused: the paths in ``argv`` are absolute)."""
        if self.proc is None or self.used >= WORKER_RECYCLE:
            self.stop()
            self.proc, self.used = self._start(), 0
        self.used += 1
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps({"argv": argv}) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            self.stop()
            return None, ""
        line = proc.stdout.readline()
        if not line:  # died while running the command
            rc = proc.wait()
            self.proc = None
            return (rc if rc < 0 else -999), ""
        answer = json.loads(line)
        return answer["rc"], answer["stderr"]


def run_mutant(mutant: Mutant, run: Callable[[list[str], float, str], tuple[int | None, str]], work: str,
               timeout: float) -> list[Outcome]:
    """Every command of ``mutant``, each in a clean directory ``work`` holding only the mutant."""
    outcomes = []
    name = "mutant.cu"
    path = os.path.join(work, name)
    for argv in commands_for(mutant, path, work):
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        pathlib.Path(path).write_bytes(mutant.data)
        rc, err = run(argv, timeout, work)
        left = _leftovers(work, name)
        written = os.path.exists(_output_of(argv))
        outcomes.append(Outcome(argv, rc, err, left, written, not mutant.data))
    return outcomes


# --------------------------------------------------------------------------- the campaign

@dataclasses.dataclass
class Failure:
    mutant: Mutant
    outcome: Outcome
    verdict: str      # confirmed in a fresh process
    file: str = ""    # where the reproducer was written

    def signature(self) -> str:
        """A grouping key for triage: the exception and the innermost polypy frame."""
        return signature(self.verdict, self.outcome.stderr)


def signature(verdict: str, stderr: str) -> str:
    if verdict == "traceback" and "RecursionError" in stderr:
        # Deep nesting: wherever the stack runs out, it is one root cause (reported as such).
        return "traceback: RecursionError (deep or long source construct)"
    if verdict != "traceback":
        first = next((ln for ln in stderr.splitlines() if "error" in ln), "")
        message = re.sub(r"^.*?error: ", "", first)
        message = re.sub(r"\d+", "N", re.sub(r"/\S+", "PATH", re.sub(r"'[^']*'", "'X'", message)))
        return f"{verdict}: {message[:100]}"
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', stderr)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b|^\w+:", ln)), "")
    own = [f for f in frames if "/site-packages/" not in f[0] or "/polypy" in f[0]]
    where = own[-1] if own else (frames[-1] if frames else ("?", "?", "?"))
    rel = re.sub(r"^.*?/(polypy|frontend|gpu2cpu|autodiff|codegen)/", r"\1/", where[0])
    return f"traceback: {last.split(':')[0]} at {rel}:{where[1]} in {where[2]}"


@dataclasses.dataclass
class Report:
    mutants: int = 0
    commands: int = 0
    passed: int = 0     # commands meeting the contract
    seconds: float = 0.0
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: list[Failure] = dataclasses.field(default_factory=list)
    slow: list[str] = dataclasses.field(default_factory=list)  # past --timeout, finished when rechecked

    def summary(self) -> str:
        failed = self.commands - self.passed
        lines = [f"{self.mutants} mutants, {self.commands} commands in {self.seconds:.0f} s "
                 f"({self.mutants / max(self.seconds, 1e-9):.1f} mutants/s): {self.passed} passed, {failed} failed"]
        lines.append("  " + ", ".join(f"{c} {self.counts[c]}" for c in CLASSES))
        if self.slow:
            lines.append(f"  slow (past --timeout, finished within {HANG_RECHECK}x): {len(self.slow)}: "
                         + " ".join(self.slow[:10]))
        groups = collections.Counter(f.signature() for f in self.failures)
        for sig, count in groups.most_common():
            example = next(f for f in self.failures if f.signature() == sig)
            lines.append(f"  {count:5d}  {sig}   e.g. {example.file or example.mutant.label}")
        return "\n".join(lines)


def _shorten(text: str, width: int = 300) -> str:
    """Long lines cut to ``width`` characters, for the saved reports."""
    return "\n".join(ln if len(ln) <= width else ln[:width] + f" [... {len(ln) - width} more]"
                     for ln in text.splitlines())


def _save(out: pathlib.Path, failure: Failure) -> str:
    d = out / failure.verdict
    d.mkdir(parents=True, exist_ok=True)
    cmd = failure.outcome.argv[0]
    base = d / f"{failure.mutant.label}-{cmd}"
    base.with_suffix(".cu").write_bytes(failure.mutant.data)
    argv = [a if a != failure.outcome.argv[1] else base.with_suffix(".cu").name for a in failure.outcome.argv]
    argv = [a if not a.startswith("/") else os.path.basename(a) for a in argv]
    base.with_suffix(".txt").write_text(
        f"polypy {' '.join(argv)}\nsource: {failure.mutant.source.name}  mutation: {failure.mutant.kind}\n"
        f"class: {failure.verdict}  exit status: {failure.outcome.rc}  leftovers: {failure.outcome.leftovers}\n\n"
        f"{_shorten(failure.outcome.stderr)}", encoding="utf-8")
    return str(base.with_suffix(".cu"))


# A command past --timeout runs again with this many times the limit before it counts as a hang:
# wall time on a shared machine (the fuzz run beside test suites) says little about a program
# that finishes (a 400,000-character line of `;` took 20 s of CPU and 220 s of wall time at load 13).
HANG_RECHECK = 10


def confirm(mutant: Mutant, outcome: Outcome, work: str, timeout: float) -> Outcome:
    """Run one failing command again in a fresh process, in a clean directory (a command that
    timed out gets ``HANG_RECHECK`` times as long)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    pathlib.Path(work, "mutant.cu").write_bytes(mutant.data)
    rc, err = run_fresh(outcome.argv, timeout * (HANG_RECHECK if outcome.rc is None else 1), work)
    return Outcome(outcome.argv, rc, err, _leftovers(work, "mutant.cu"), os.path.exists(_output_of(outcome.argv)),
                   outcome.empty_input)


def fuzz(*, seed: int, count: int, jobs: int = 1, timeout: float = DEFAULT_TIMEOUT, out: pathlib.Path | None = None,
         time_budget: float | None = None, indices: Iterable[int] | None = None, kinds: Iterable[str] | None = None,
         progress: Callable[[str], None] | None = None, scratch: pathlib.Path | None = None,
         workers: list[Worker] | None = None) -> Report:
    """Run mutants ``indices`` (default ``range(count)``) of ``seed`` with ``jobs`` workers, in a
    new directory under ``scratch`` (default: the system's temporary directory). ``workers``: the
    caller's long-lived workers (one per job, left running for its next campaign: a campaign per
    mutation kind then pays for one worker's start, as one long campaign does); default: new
    ones, stopped at the end."""
    sources = load_sources()
    kinds = None if kinds is None else tuple(kinds)
    todo: Iterator[int] = iter(list(indices) if indices is not None else range(count))
    lock = threading.Lock()
    report = Report()
    start = time.monotonic()
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="polypy-fuzz-work-", dir=scratch)

    def next_index() -> int | None:
        with lock:
            if time_budget is not None and time.monotonic() - start > time_budget:
                return None
            return next(todo, None)

    def loop(k: int) -> None:
        worker = workers[k] if workers is not None else Worker(scratch)
        work = os.path.join(scratch, f"w{k}")
        try:
            while (i := next_index()) is not None:
                mutant = make_mutant(seed, i, sources, kinds)
                outcomes = run_mutant(mutant, worker.run, work, timeout)
                found: list[Failure] = []
                slow: list[str] = []
                for o in outcomes:
                    if o.verdict == "ok":
                        continue
                    fresh = confirm(mutant, o, work + "-confirm", timeout)
                    if o.rc is None and fresh.rc is not None:
                        slow.append(mutant.label)  # finished given more time: judged by its outcome
                        if fresh.verdict == "ok":
                            continue
                    verdict = fresh.verdict if fresh.verdict != "ok" else "inprocess-only"
                    found.append(Failure(mutant, fresh if fresh.verdict != "ok" else o, verdict))
                with lock:
                    report.slow.extend(slow)
                    slow.clear()
                    report.mutants += 1
                    report.commands += len(outcomes)
                    report.passed += len(outcomes) - len(found)
                    for f in found:
                        report.counts[f.verdict] += 1
                        if out is not None:
                            f.file = _save(out, f)
                        report.failures.append(f)
                        if progress:
                            progress(f"FAIL {f.verdict:10s} {mutant.label} {f.outcome.argv[0]}: {f.signature()}")
                    if progress and report.mutants % 100 == 0:
                        progress(f"... {report.mutants} mutants, {report.commands - report.passed} failed, "
                                 f"{time.monotonic() - start:.0f} s")
        finally:
            if workers is None:
                worker.stop()

    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            loop(k)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            errors.append(exc)

    if workers is not None and len(workers) < max(1, jobs):
        raise ValueError(f"{jobs} jobs need as many workers, got {len(workers)}")
    threads = [threading.Thread(target=guarded, args=(k,), daemon=True) for k in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    report.seconds = time.monotonic() - start
    shutil.rmtree(scratch, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1000, help="mutants to run (indices 0..count-1)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per command before 'hang'")
    p.add_argument("--time-budget", type=float, default=None, metavar="S",
                   help="stop starting new mutants after S seconds (the report says how many ran)")
    p.add_argument("--out", default=None, help="where failing mutants go (default: a new temporary directory)")
    p.add_argument("--only", type=int, action="append", default=None, metavar="INDEX",
                   help="run only this mutant (repeatable); with --show its text is printed")
    p.add_argument("--kinds", default=None, help=f"comma-separated mutations (default all: {','.join(MUTATIONS)})")
    p.add_argument("--show", action="store_true", help="print the first 2000 bytes of each --only mutant")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker_main()
    kinds = args.kinds.split(",") if args.kinds else None
    if args.show and args.only:
        for i in args.only:
            m = make_mutant(args.seed, i, load_sources(), kinds)
            print(f"== {m.label} (grad kernel: {m.source.kernel})")
            sys.stdout.write(m.data[:2000].decode("utf-8", "replace") + "\n")
    out = pathlib.Path(args.out) if args.out else pathlib.Path(tempfile.mkdtemp(prefix="polypy-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"failing mutants go to {out}", flush=True)
    report = fuzz(seed=args.seed, count=args.count, jobs=args.jobs, timeout=args.timeout, out=out,
                  time_budget=args.time_budget, indices=args.only, kinds=kinds,
                  progress=lambda s: print(s, flush=True))
    print(report.summary())
    (out / "summary.txt").write_text(report.summary() + "\n", encoding="utf-8")
    return 0 if report.commands == report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
