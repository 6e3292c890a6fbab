"""SystemTap's processes: the staprun command that loads a compiled module for one pid,
and `StapProcess`, its output parsed into protocol records on a thread (stap_protocol), its
stderr kept for the error message; `ReplaySource` gives the records of a captured run
instead. The helpers every stap process uses (die with mysqlio, the telling line of a log)
are here too.
"""

from __future__ import annotations

import contextlib
import ctypes
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Protocol

from . import stap_protocol as proto
from .errors import StapError

RECORD_BUFFER_MB = 64  # staprun -b: kernel-to-user buffer of the record script
LOG_LINES = 40  # of stap's messages, kept for the error
_PR_SET_PDEATHSIG = 1


def staprun_command(module: Path, pid: int, mode: str) -> list[str]:
    """staprun loading a compiled module for one process: -x sets target(), -R gives the
    module a unique name (two mysqlio can trace at once)."""
    cmd = [shutil.which("staprun") or "staprun", "-R", "-x", str(pid)]
    if mode == "record":
        cmd += ["-b", str(RECORD_BUFFER_MB)]
    cmd.append(str(module))
    return cmd


def telling(log: Iterable[str]) -> str:
    """The line of stap's messages that says what went wrong: the first error, else the last line."""
    lines = [ln.strip() for ln in log if ln.strip()]
    errors = [ln for ln in lines if re.match(r"(ERROR:|semantic error:|parse error:|\S+: error: )", ln)]
    return (errors[:1] or lines[-1:] or ["no message"])[0]


def die_with_parent() -> None:
    """In the child before exec: stop stap (it unloads its module) when mysqlio dies, even by kill -9."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class RecordSource(Protocol):
    def request_mark(self, again: bool = False) -> None: ...

    def get(self, timeout: float | None) -> proto.Record | None:
        """The next record; None at the end of the stream. Raises queue.Empty when
        nothing came within timeout (0: do not wait)."""
        ...

    def close(self) -> None: ...


class ReplaySource:
    """The lines of a captured run; a requested mark is simply the next one in them."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)

    def request_mark(self, again: bool = False) -> None:
        pass

    def get(self, timeout: float | None) -> proto.Record | None:
        for line in self._lines:
            if line.strip():
                return proto.parse_line(line)
        return None

    def close(self) -> None:
        pass


_END = object()


class StapProcess:
    """staprun running a module: its lines parsed on a thread, its stderr kept for errors."""

    def __init__(self, cmd: list[str], stop: threading.Event | None = None, mode: str = "top") -> None:
        self.cmd = cmd
        self.mode = mode
        self._stop = stop
        self._queue: queue.Queue[object] = queue.Queue()
        self._log: deque[str] = deque(maxlen=LOG_LINES)
        self.skipped_probes = 0
        self.transport_failures = 0
        self.procfs_dir: str | None = None  # /proc/systemtap/MODULE, once the module said hello
        self._parity = 0  # top: the aggregate the next flip retires
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C goes to mysqlio, which stops stap cleanly
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            raise StapError(f"cannot run staprun: {exc.strerror or exc}") from None
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_stdout, args=(self._proc.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self._proc.stderr,), daemon=True),
        ]
        for t in self._readers:
            t.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read_stdout(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace")
            if not line.strip():
                continue
            try:
                self._queue.put(proto.parse_line(line))
            except proto.ProtocolError as exc:
                self._queue.put(exc)
                break
        self._queue.put(_END)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            self._log.append(line)
            skipped = re.search(r"skipped probes: (\d+)", line)
            if skipped:
                self.skipped_probes = int(skipped.group(1))
            failures = re.search(r"There were (\d+) transport failures", line)
            if failures:
                self.transport_failures = int(failures.group(1))

    @property
    def log(self) -> str:
        return "\n".join(self._log)

    def failure(self, what: str) -> StapError:
        """An error naming the most telling line stap printed."""
        return StapError(f"{what}: {telling(self._log)}", self.log)

    def request_mark(self, again: bool = False) -> None:
        """top: `flip` (requests go to the other aggregate), then the flush of the retired one
        (flush0, flush1 in turn); again: that flush once more, no flip. record: `flush` (a mark)."""
        if self.procfs_dir is None:
            return
        if self.mode != "top":
            self._write_procfs("flush")
        elif again:
            self._write_procfs(f"flush{self._parity ^ 1}")
        else:
            self._write_procfs("flip")
            self._write_procfs(f"flush{self._parity}")
            self._parity ^= 1

    def _write_procfs(self, name: str) -> None:
        path = f"{self.procfs_dir}/{name}"
        deadline = time.monotonic() + 2.0  # the procfs files appear as the module finishes loading
        while True:
            try:
                with open(path, "w") as f:
                    f.write("1\n")
                return
            except FileNotFoundError:
                if self._proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                self._wait_exit(2.0)
                raise self.failure("the SystemTap module is gone") from None
            except OSError as exc:
                self._wait_exit(2.0)
                raise self.failure(f"cannot ask the SystemTap module for an interval ({exc.strerror})") from None

    def get(self, timeout: float | None) -> proto.Record | None:
        if timeout == 0:
            item = self._queue.get(block=False)
        else:
            # in steps, so that a stop request (signal) ends a long wait (compilation)
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                step = 0.2 if deadline is None else min(0.2, max(0.001, deadline - time.monotonic()))
                try:
                    item = self._queue.get(timeout=step)
                    break
                except queue.Empty:
                    stopped = self._stop is not None and self._stop.is_set()
                    if stopped or (deadline is not None and time.monotonic() >= deadline):
                        raise
        if item is _END:
            self._queue.put(_END)  # every later get sees the end too
            self._wait_exit(5.0)
            if self._proc.returncode not in (0, None):
                raise self.failure(f"SystemTap stopped (staprun exit status {self._proc.returncode})")
            return None
        if isinstance(item, proto.ProtocolError):
            raise StapError(f"unexpected output from stap: {item}", self.log)
        return item  # type: ignore[return-value]

    def _wait_exit(self, timeout_s: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout_s)
        for t in self._readers:
            t.join(timeout_s)

    def close(self) -> None:
        """SIGINT: staprun has the end probes run, unloads the module and exits."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.terminate()
                try:
                    self._proc.wait(30)
                except subprocess.TimeoutExpired:
                    print(
                        f"mysqlio: staprun (pid {self._proc.pid}) does not exit; its module may stay loaded",
                        file=sys.stderr,
                    )
        for t in self._readers:
            t.join(5)
