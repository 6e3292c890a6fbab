"""Find and check the process to trace."""

from __future__ import annotations

import os
import select
import time

import psutil

from .errors import TargetGone, UserError

SERVER_NAMES = ("mysqld", "mariadbd")


def find_server() -> int:
    """The pid of the single running mysqld / mariadbd."""
    found = [p for p in psutil.process_iter(["pid", "name", "cmdline"]) if p.info["name"] in SERVER_NAMES]
    if len(found) == 1:
        return int(found[0].info["pid"])
    if not found:
        raise UserError("no running mysqld or mariadbd found; give its pid with -p PID")
    listing = ", ".join(f"{p.info['pid']} ({' '.join(p.info['cmdline'] or [p.info['name']])[:60]})" for p in found)
    raise UserError(f"several servers are running, choose one with -p PID: {listing}")


def check_pid(pid: int) -> None:
    """The pid must name a running process (any process can be traced)."""
    if pid <= 0:
        raise UserError(f"invalid pid {pid}")
    if not psutil.pid_exists(pid):
        raise UserError(f"no process with pid {pid}")
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            raise TargetGone(f"process {pid} has exited")
    except psutil.NoSuchProcess as exc:
        raise UserError(f"no process with pid {pid}") from exc


def check_readable(pid: int) -> None:
    """mysqlio names the server's files from /proc/PID/fd and reads its option files through
    /proc/PID/root; for another user's process both need ptrace read access (CAP_SYS_PTRACE).
    Without it, names would go missing and a containerised server's option files be read
    from the host's (the root link unreadable): one line instead."""
    try:
        os.listdir(f"/proc/{pid}/fd")
        os.stat(f"/proc/{pid}/root")
    except PermissionError as exc:
        raise UserError(
            f"cannot read process {pid}'s open files and root directory (/proc/{pid}/fd, /proc/{pid}/root): "
            "mysqlio needs CAP_SYS_PTRACE besides CAP_BPF and CAP_PERFMON (and CAP_DAC_READ_SEARCH for the "
            "server's option files); run as root"
        ) from exc
    except FileNotFoundError as exc:
        raise TargetGone(f"process {pid} has exited") from exc


def is_alive(pid: int) -> bool:
    """Whether the process runs (not gone, not a zombie). One read of /proc/PID/stat:
    record asks 20 times a second, and a psutil.Process costs two reads and ~50 us."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # the state follows the command name, which may hold ") " itself: after the last ')'
    state = stat[stat.rindex(b")") + 2 :][:1]
    return state not in (b"Z", b"X")


def process_name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return "?"


def tgid_of(pid: int) -> int:
    """Thread ids are accepted too: the probes filter on the thread group."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return pid


def thread_name(pid: int, tid: int) -> str:
    """A thread's current name (comm), or "?" once it has exited."""
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def started_at(pid: int) -> float | None:
    """When the process started (unix time), to the clock tick: psutil's create_time adds
    the boot time /proc/stat gives in whole seconds, up to a second off."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # starttime: clock ticks since boot
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME) + ticks / os.sysconf("SC_CLK_TCK")


class ExitWatch:
    """Tells at once, and cheaply, whether a process has exited: a pidfd turns readable
    when it does (one poll(2), no /proc read; --follow asks every EXIT_CHECK_S). Where
    the kernel has no pidfd (before 5.3) or the process is already gone: is_alive."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._poll: select.poll | None = None
        self._fd = -1
        try:
            self._fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            return
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)

    def gone(self) -> bool:
        if self._poll is None:
            return not is_alive(self.pid)
        return bool(self._poll.poll(0))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd, self._poll = -1, None


EXIT_CHECK_S = 0.02  # --follow: how soon the traced process's exit ends the interval
