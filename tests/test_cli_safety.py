"""Where ``-o`` writes: regular files are replaced atomically, anything else is written through.

Symlinks stay links (their target gets the text), FIFOs and devices are opened and written, the
input file is never overwritten, and a missing directory or a directory as output is a clean
error. Every path here is inside the test's temporary directory.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import stat
import threading
import time

import pytest

from polypy.driver.cli import main

SAXPY = pathlib.Path(__file__).resolve().parents[1] / "samples" / "saxpy.cu"


def _ir_text(tmp_path: pathlib.Path) -> str:
    """What ``translate --emit ir`` of saxpy writes to a fresh regular file."""
    out = tmp_path / "reference.ir"
    assert main(["translate", str(SAXPY), "--emit", "ir", "-o", str(out)]) == 0
    text = out.read_text()
    assert "kernel saxpy(" in text
    return text


def test_symlink_output_is_written_through_and_stays_a_link(tmp_path: pathlib.Path) -> None:
    expected = _ir_text(tmp_path)
    target = tmp_path / "target.ir"
    target.write_text("old contents\n")
    link = tmp_path / "link.ir"
    link.symlink_to(target)
    assert main(["translate", str(SAXPY), "--emit", "ir", "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == expected


def test_dangling_symlink_output_creates_its_target(tmp_path: pathlib.Path) -> None:
    expected = _ir_text(tmp_path)
    target = tmp_path / "new.ir"
    link = tmp_path / "link.ir"
    link.symlink_to(target)
    assert main(["translate", str(SAXPY), "--emit", "ir", "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_text() == expected


def test_fifo_output_is_written_through(tmp_path: pathlib.Path) -> None:
    expected = _ir_text(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # Opened non-blocking, the read end exists before polypy opens the FIFO for writing, so
    # neither side can block forever, whatever polypy does with the path.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    received: list[bytes] = []
    done = threading.Event()

    def reader() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:  # a writer is connected, no data yet
                time.sleep(0.005)
                continue
            if chunk:
                received.append(chunk)
            elif done.is_set():  # no writer any more, and polypy has returned
                return
            else:  # no writer yet
                time.sleep(0.005)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        code = main(["translate", str(SAXPY), "--emit", "ir", "-o", str(fifo)])
    finally:
        done.set()
        thread.join(timeout=30)
        os.close(fd)
    assert code == 0
    assert not thread.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert b"".join(received).decode() == expected


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink", "hardlink"])
def test_output_equal_to_the_input_is_refused(tmp_path: pathlib.Path, capsys, spelling: str) -> None:
    src = tmp_path / "saxpy.cu"
    shutil.copy(SAXPY, src)
    original = src.read_text()
    (tmp_path / "sub").mkdir()
    out = {
        "same": src,
        "dotted": tmp_path / "sub" / ".." / "saxpy.cu",
        "symlink": tmp_path / "alias.cu",
        "hardlink": tmp_path / "hard.cu",
    }[spelling]
    if spelling == "symlink":
        out.symlink_to(src)
    if spelling == "hardlink":
        os.link(src, out)
    for command in (["translate", str(src)], ["grad", str(src), "--kernel", "saxpy"]):
        assert main([*command, "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("polypy: error: ") and "is the input file" in err and "Traceback" not in err
        assert src.read_text() == original


def test_output_in_a_missing_directory_is_a_clean_error(tmp_path: pathlib.Path, capsys) -> None:
    out = tmp_path / "missing" / "saxpy.cpp"
    assert main(["translate", str(SAXPY), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"polypy: error: cannot write {out}: directory {out.parent} does not exist"
    assert not out.parent.exists()


def test_output_onto_a_directory_is_a_clean_error(tmp_path: pathlib.Path, capsys) -> None:
    (tmp_path / "d").mkdir()
    assert main(["translate", str(SAXPY), "-o", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"polypy: error: cannot write {tmp_path / 'd'}: it is a directory"
    assert (tmp_path / "d").is_dir() and list((tmp_path / "d").iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["d"]  # no temporary file left behind


def test_new_output_files_get_the_umask_mode(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "saxpy.ir"
    old = os.umask(0o027)
    try:
        assert main(["translate", str(SAXPY), "--emit", "ir", "-o", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


def test_an_existing_regular_output_is_replaced_keeping_its_mode(tmp_path: pathlib.Path) -> None:
    expected = _ir_text(tmp_path)
    out = tmp_path / "saxpy.ir"
    out.write_text("stale\n")
    out.chmod(0o604)
    assert main(["translate", str(SAXPY), "--emit", "ir", "-o", str(out)]) == 0
    assert out.read_text() == expected
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.ir", "saxpy.ir"]


def test_an_error_leaves_an_existing_output_untouched(tmp_path: pathlib.Path, capsys) -> None:
    out = tmp_path / "saxpy.cpp"
    out.write_text("keep me\n")
    assert main(["translate", str(SAXPY), "--kernel", "nope", "-o", str(out)]) == 1
    assert "no kernel named 'nope'" in capsys.readouterr().err
    assert out.read_text() == "keep me\n"
    assert [p.name for p in tmp_path.iterdir()] == ["saxpy.cpp"]
