"""The server's thread ids as the probes see them (`--mysql`).

performance_schema's THREAD_OS_ID is what the server's gettid() returned: the tid in the
server's own pid namespace. The probes see the tids of the namespace mysqlio runs in (the
host's). They differ when the server runs in a pid namespace of its own (a container, the
test sandboxes started with `unshare --pid`); nothing would match and every thread would
be "(unknown thread)". `/proc/<pid>/task/<tid>/status` says both: its `NSpid:` line lists
the tid in our namespace first, then in each nested namespace, the innermost (the
server's) last.

`HostTids` maps a server tid to ours for one traced process. In our own namespace the map
is the identity (found once, from /proc/<pid>/ns/pid), and only the task list is read, to
know which tids are the process's threads. In another namespace, the map is built from the
tasks' NSpid lines; a task's line is read once, when it first appears. The tasks are
listed again only when a server tid is not in the map (a new thread), at most every
`RESCAN_S`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from pathlib import Path

RESCAN_S = 0.25  # the tasks are listed at most this often (the sampler runs at 4 Hz)


def parse_nspid(status: str) -> tuple[int, ...]:
    """The tids of a task's `NSpid:` line (ours first, the innermost namespace's last);
    () when there is none (kernels before 4.1) or it is damaged."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            try:
                return tuple(int(field) for field in line.split()[1:])
            except ValueError:
                return ()
    return ()


def read_nspid(task_dir: Path) -> tuple[int, ...]:
    """parse_nspid of one task's status; () when the task is gone."""
    try:
        return parse_nspid((task_dir / "status").read_text())
    except OSError:
        return ()


def same_pid_namespace(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether the process's pid namespace is the one /proc shows (ours): its tids are ours.
    Where the namespace link cannot be read, its main thread's NSpid says it (one field)."""
    try:
        return os.readlink(proc / str(pid) / "ns" / "pid") == os.readlink(proc / "self" / "ns" / "pid")
    except OSError:
        return len(read_nspid(proc / str(pid) / "task" / str(pid))) <= 1


class HostTids:
    """Server tid (THREAD_OS_ID) -> our tid, for the threads of process `pid`."""

    def __init__(self, pid: int, proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic) -> None:
        self.pid = pid
        self._tasks = proc / str(pid) / "task"
        self._clock = clock
        self.same_namespace = same_pid_namespace(pid, proc)
        self._ns_of: dict[int, int | None] = {}  # our tid -> the server's (None: unknown), each task listed
        self._host: dict[int, int] = {}  # the server's tid -> ours
        self._next_scan = float("-inf")
        self.rescanned = False  # the last to_host() listed the tasks: its misses are real
        self.gone = False  # the last listing found no process

    def to_host(self, tids: Collection[int]) -> dict[int, int]:
        """Our tid of each of `tids` that is a thread of the process now (as far as the
        last listing knows); the tasks are listed again first if one is missing."""
        self.rescanned = False
        if any(t not in self._host for t in tids) and self._clock() >= self._next_scan:
            self._rescan()
        return {t: self._host[t] for t in tids if t in self._host}

    def _rescan(self) -> None:
        self._next_scan = self._clock() + RESCAN_S
        self.rescanned = True
        try:
            tasks = [int(name) for name in os.listdir(self._tasks)]
        except OSError:  # gone (a restart under --follow): nothing maps, nothing to warn of
            self.gone = True
            self._ns_of, self._host = {}, {}
            return
        self.gone = False
        old = self._ns_of
        # a task's status is read once: when it first shows up
        self._ns_of = {t: old[t] if t in old else self._server_tid(t) for t in tasks}
        self._host = {ns: tid for tid, ns in self._ns_of.items() if ns is not None}

    def _server_tid(self, tid: int) -> int | None:
        if self.same_namespace:
            return tid
        nspid = read_nspid(self._tasks / str(tid))
        return nspid[-1] if nspid else None
