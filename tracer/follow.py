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
from .layout import read_layout, to_server_path

POLL_S = 0.5  # how often /proc is scanned while waiting for the next server


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
    # layout names the launcher's cwd, so a fresh server may match only a poll later
    layout = read_layout(pid)
    datadir = to_server_path(os.path.normpath(layout.datadir), layout.root) if layout.datadir else None
    container = container_identity(pid)
    place = container.key()
    if not place and layout.root and not layout.root.startswith("/proc/"):
        place = ("root", layout.root)  # chrooted here: its directory stays across restarts
    return ServerIdentity(name, datadir, cmdline, place, container)


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
            return found.datadir == self.identity.datadir
        return found.cmdline == self.identity.cmdline

    def find_restarted(self) -> int | None:
        """The newest running process that is the same server (not the one traced), if any."""
        candidates: list[tuple[float, int]] = []
        taken = self._taken() if self._taken is not None else set()
        for proc in psutil.process_iter(["name", "create_time"]):
            if proc.info["name"] != self.identity.name or proc.pid in taken:
                continue  # cheap filter before reading the layout
            if self._matches(proc.pid):
                candidates.append((proc.info["create_time"] or 0.0, proc.pid))
        return max(candidates)[1] if candidates else None

    def wait_for_restart(self, stop: threading.Event, timeout_s: float | None = None) -> int | None:
        """Poll every POLL_S until the same server runs again under a new process; return
        its pid (and follow it from now on). None when `stop` is set or after timeout_s."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not stop.is_set():
            # while the traced process runs, another of the same identity is not a restart
            pid = self.find_restarted() if self._gone() else None
            if pid is not None:
                self.pid = pid
                self._started = _create_time(pid)
                return pid
            wait = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
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
) -> int:
    """Run trace_once(pid) until it returns; when it raises TargetGone and `follow`
    is on, wait for the server to come back and trace the new process (never one of
    `taken`'s pids). Returns trace_once's exit code, or 0 when stopped while waiting."""
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
        print(f"mysqlio: {follower.identity.name} restarted as pid {new_pid}; tracing it", file=sys.stderr)
        if on_restart is not None:
            on_restart(pid, new_pid)
        pid = new_pid


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None
