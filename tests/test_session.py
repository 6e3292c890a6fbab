"""The sampling engine (mysqlio.session, mysqlio.sampling) with real probes and real files.

A traced child process writes files on command between two samples, so that each
sample sees exactly what the test made happen: a closed file's name follows a rename
and a reused inode (the resolver's names of closed files live one interval), and a
stop that arrives while a sample is being taken still gets what came after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.model import FileActivity, Interval
from mysqlio.sampling import IntervalSampler, StopFlag, run_loop
from mysqlio.session import open_session

pytestmark = pytest.mark.bpf

# reads one command a line, answers one line: "write PATH" (append 4 KiB, close; answers
# the inode), "mv OLD NEW", "rm PATH"
_CHILD = r"""
import os, sys
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "write":
        fd = os.open(args[0], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(fd, b"x" * 4096)
        ino = os.fstat(fd).st_ino
        os.close(fd)
        print(ino, flush=True)
    elif cmd == "mv":
        os.rename(args[0], args[1])
        print("ok", flush=True)
    elif cmd == "rm":
        os.unlink(args[0])
        print("ok", flush=True)
"""


class Child:
    """A process that does file I/O when told to, traced by the test."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def do(self, *words: str | Path) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def write(self, path: Path) -> int:
        return int(self.do("write", path))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def child() -> Iterator[Child]:
    c = Child()
    try:
        yield c
    finally:
        c.close()


def _by_inode(interval: Interval, ino: int) -> FileActivity:
    (found,) = [f for f in interval.files if f.file.ino == ino]
    return found


def test_closed_file_renamed_is_named_anew(bpf_ready: None, child: Child, tmp_path: Path) -> None:
    """A file written and closed, renamed, then written again: the second interval names it
    by its new name (the kernel walked it again), not the name it had when first seen."""
    with open_session("bpf", child.proc.pid) as session:
        sampler = IntervalSampler(session)
        ino = child.write(tmp_path / "before")
        assert _by_inode(sampler.sample(), ino).path == str(tmp_path / "before")
        child.do("mv", tmp_path / "before", tmp_path / "after")
        assert child.write(tmp_path / "after") == ino
        assert _by_inode(sampler.sample(), ino).path == str(tmp_path / "after")


def test_reused_inode_is_named_anew(bpf_ready: None, child: Child, tmp_path: Path) -> None:
    """A file written, closed and deleted; a new file that gets its inode (ext4 reuses a freed
    inode at once) is named by its own name in the next interval, not by the deleted one's."""
    with open_session("bpf", child.proc.pid) as session:
        sampler = IntervalSampler(session)
        ino = child.write(tmp_path / "old")
        assert _by_inode(sampler.sample(), ino).path == str(tmp_path / "old")
        child.do("rm", tmp_path / "old")
        for attempt in range(50):
            new = tmp_path / f"new{attempt}"
            if child.write(new) == ino:
                break
            child.do("rm", new)
        else:
            pytest.skip(f"this file system did not reuse inode {ino} (ext4 does)")
        reused = _by_inode(sampler.sample(), ino)
        assert (reused.path, reused.deleted) == (str(new), False)


class _SlowSample:
    """An IntervalSampler whose sample is slow: the child writes while it runs, and SIGINT
    arrives before it returns (as a Ctrl-C during a sample of a busy server)."""

    def __init__(self, sampler: IntervalSampler, child: Child, directory: Path) -> None:
        self._sampler = sampler
        self._child = child
        self._directory = directory
        self.pid = sampler.pid
        self.early = sampler.early  # run_loop starts and stops its mid-interval drains
        self.calls = 0

    def sample(self) -> Interval:
        interval = self._sampler.sample()
        self.calls += 1
        if self.calls == 1:
            self._child.write(self._directory / "late")  # after the drain, before the signal
            os.kill(os.getpid(), signal.SIGINT)
        return interval


class _Collect:
    quit = False

    def __init__(self) -> None:
        self.intervals: list[Interval] = []

    def emit(self, interval: Interval) -> None:
        self.intervals.append(interval)

    def wait(self, timeout_s: float) -> None:
        pass


def test_stop_during_a_sample_keeps_what_came_after_it(bpf_ready: None, child: Child, tmp_path: Path) -> None:
    """SIGINT while an interval is being sampled: the loop samples once more before it ends,
    so the requests made after the drain began are emitted too."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stop = StopFlag()
    stop.install()
    try:
        with open_session("bpf", child.proc.pid) as session:
            child.write(tmp_path / "early")
            slow = _SlowSample(IntervalSampler(session), child, tmp_path)
            sink = _Collect()
            assert run_loop(slow, sink, stop, interval_s=0.01) == 0  # type: ignore[arg-type]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    written = {Path(f.path).name: f.write_bytes for i in sink.intervals for f in i.files}
    assert written == {"early": 4096, "late": 4096}
