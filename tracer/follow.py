"""Follow a server across restarts: when the traced mysqld exits, find the next
process that is "the same server" (same name, same datadir, same container) and
return its pid.

Used by `exporter` (always, unless --no-follow) and by `top --follow` /
`record --follow`; it knows nothing of probes or output.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from . import target
from .container_identity import ContainerIdentity, container_identity
from .errors import TargetGone
from .layout import ServerLayout, read_layout, to_server_path

POLL_S = 0.5  # how often /proc is scanned while waiting for the next server
# ... in the first FAST_FOR_S of the wait: a restarted server reads its buffer pool back
# within a second of its start (a fast poll reads /proc's list and the new processes' names)
FAST_POLL_S = 0.01
FAST_FOR_S = 60.0
YOUNG_S = 2.0  # processes this young are looked at by every fast poll
CHDIR_POLL_S = 0.01  # a server found by its options' datadir: until it chdir()s there
CHDIR_WAIT_S = 10.0


@dataclass(frozen=True)
class ServerIdentity:
    """What makes two processes the same server. The datadir when the layout knows it
    (mysqld / mariadbd), as the server names it (in a container: its own path, not one
    through /proc/PID/root, which changes with the pid); otherwise, for any other process,
    its exact command line. And where it runs (`place`): its container's names, else its
    container id (ContainerIdentity.key), else the root directory it is chrooted to; ()
    on the host. The mount namespace is not part of it: a server's is new at every start
    under systemd's PrivateTmp and the like (exporter_fleet uses it only to tell apart
    two servers that are otherwise the same)."""

    name: str
    datadir: str | None
    cmdline: tuple[str, ...]
    place: tuple[str, ...] = ()
    container: ContainerIdentity = field(default_factory=ContainerIdentity, compare=False)

    def describe(self) -> str:
        where = f" in {self.container.describe()}" if self.container.in_container else ""
        if self.datadir:
            return f"{self.name} with datadir {self.datadir}{where}"
        command = " ".join(self.cmdline)
        return f"{self.name} started as {command if len(command) <= 80 else command[:79] + '…'!r}{where}"


def identity_of(pid: int) -> ServerIdentity | None:
    """The identity of a running process, or None once it has gone (or is a zombie)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        name, cmdline = proc.name(), tuple(proc.cmdline())
    except psutil.Error:
        return None
    # a server only chdir()s to its datadir once it has started: until then the
    # layout names the launcher's cwd (ServerFollower also matches configured_datadir)
    layout = read_layout(pid)
    datadir = _server_datadir(layout)
    container = container_identity(pid)
    place = container.key()
    if not place and layout.root and not layout.root.startswith("/proc/"):
        place = ("root", layout.root)  # chrooted here: its directory stays across restarts
    return ServerIdentity(name, datadir, cmdline, place, container)


def _server_datadir(layout: ServerLayout) -> str | None:
    return to_server_path(os.path.normpath(layout.datadir), layout.root) if layout.datadir else None


def configured_datadir(pid: int) -> str | None:
    """The datadir the server's options give (as identity_of names it), whatever its
    working directory: what a server just started will chdir() to."""
    return _server_datadir(read_layout(pid, cwd_first=False))


class ServerFollower:
    """Remembers the traced server and finds it again after it restarted.

    `pid` is the process traced now; `wait_for_restart` moves it to the next one.
    `taken` (exporter --all): pids traced by others, never taken for a restart of this one
    (another server of the same identity, told apart by its mount namespace)."""

    def __init__(self, pid: int, taken: Callable[[], set[int]] | None = None) -> None:
        identity = identity_of(pid)
        if identity is None:
            raise ProcessLookupError(f"process {pid} is not running")
        self.identity = identity
        self.pid = pid
        self._started = _create_time(pid)
        self._taken = taken

    def _matches(self, pid: int) -> bool:
        if pid == self.pid and _create_time(pid) == self._started:
            return False  # the process we traced, still there (or a zombie not yet reaped)
        found = identity_of(pid)
        if found is None or found.name != self.identity.name or found.place != self.identity.place:
            return False
        if self.identity.datadir is not None:
            return self.identity.datadir in (found.datadir, configured_datadir(pid))
        return found.cmdline == self.identity.cmdline

    def wait_for_chdir(self, stop: threading.Event, timeout_s: float = CHDIR_WAIT_S) -> None:
        """Until the process followed works in its datadir (a server found by its options
        before it chdir()s there: its layout is read from its working directory), it
        exits, `stop` is set or timeout_s passes."""
        if self.identity.datadir is None:
            return
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and time.monotonic() < deadline:
            found = identity_of(self.pid)
            if found is None or found.datadir == self.identity.datadir:
                return
            stop.wait(CHDIR_POLL_S)

    def find_restarted(self, skip: frozenset[int] = frozenset()) -> int | None:
        """The newest running process that is the same server (not the one traced), if
        any; the pids in `skip` are not looked at."""
        candidates: list[tuple[float, int]] = []
        taken = self._taken() if self._taken is not None else set()
        comm = self.identity.name[:15]  # the kernel's name is cut to 15 bytes
        for pid in _pids() - skip:
            if pid in taken or _comm(pid) != comm:
                continue  # cheap filter before psutil and the layout
            try:
                proc = psutil.Process(pid)
                name, created = proc.name(), proc.create_time()
            except psutil.Error:
                continue
            if name == self.identity.name and self._matches(pid):
                candidates.append((created, pid))
        return max(candidates)[1] if candidates else None

    def wait_for_restart(self, stop: threading.Event, timeout_s: float | None = None) -> int | None:
        """Poll every FAST_POLL_S (after FAST_FOR_S: POLL_S) until the same server runs
        again under a new process; return its pid (and follow it from now on). None when
        `stop` is set or after timeout_s."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        fast_until = time.monotonic() + FAST_FOR_S
        # the fast polls look at the processes started in the last YOUNG_S (a restart's
        # fork, perhaps forked before the wait began, which may exec the server later),
        # a full scan every POLL_S at the others
        older = _older_than(YOUNG_S)
        next_full = 0.0
        while not stop.is_set():
            pid = None
            # while the traced process runs, another of the same identity is not a restart
            if self._gone():
                full = time.monotonic() >= next_full
                next_full = time.monotonic() + POLL_S if full else next_full
                pid = self.find_restarted(frozenset() if full else older)
            if pid is not None:
                self.pid = pid
                self._started = _create_time(pid)
                return pid
            poll = FAST_POLL_S if time.monotonic() < fast_until else POLL_S
            wait = poll if deadline is None else min(poll, deadline - time.monotonic())
            if wait <= 0:
                return None
            stop.wait(wait)
        return None

    def _gone(self) -> bool:
        return _create_time(self.pid) != self._started or not target.is_alive(self.pid)


def trace_following(
    pid: int,
    follow: bool,
    stop: threading.Event,
    trace_once: Callable[[int], int],
    on_restart: Callable[[int, int], None] | None = None,
    taken: Callable[[], set[int]] | None = None,
    found: Callable[[int], None] | None = None,
) -> int:
    """Run trace_once(pid) until it returns; when it raises TargetGone and `follow`
    is on, wait for the server to come back and trace the new process (never one of
    `taken`'s pids). Returns trace_once's exit code, or 0 when stopped while waiting.
    found(new_pid) is called as soon as the new process is found, perhaps before it
    chdir()s to its datadir (a kept probe re-targeted: mysqlio.kept_probe); on_restart
    and trace_once once it has."""
    try:
        follower = ServerFollower(pid, taken) if follow else None
    except ProcessLookupError:
        raise TargetGone(f"process {pid} has exited") from None
    while True:
        try:
            return trace_once(pid)
        except TargetGone:
            if follower is None:
                raise
        print(f"mysqlio: pid {pid} exited; waiting for the next {follower.identity.describe()}", file=sys.stderr)
        new_pid = follower.wait_for_restart(stop)
        if new_pid is None:
            return 0
        if found is not None:
            found(new_pid)
        follower.wait_for_chdir(stop)
        print(f"mysqlio: {follower.identity.name} restarted as pid {new_pid}; tracing it", file=sys.stderr)
        if on_restart is not None:
            on_restart(pid, new_pid)
        pid = new_pid


def _pids() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def _older_than(seconds: float) -> frozenset[int]:
    """The processes started more than `seconds` ago."""
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    older = set()
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # starttime, in clock ticks since boot: the 20th field after the command name
        if int(stat[stat.rindex(b")") + 2 :].split()[19]) / _TICKS < now - seconds:
            older.add(pid)
    return frozenset(older)


_TICKS = os.sysconf("SC_CLK_TCK")


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n").decode(errors="replace")
    except OSError:
        return None


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None
