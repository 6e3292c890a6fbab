"""Doctor's error-log forensics: the running server's part of its error log, the InnoDB
AIO backend it names, cross-checked with what the kernel shows of the process."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .doctor_check import Check
from .units import human_bytes, printable

LOG_SCAN_BYTES = 64 << 20  # of an error log's end: a run's start is searched there


# Error-log lines naming InnoDB's I/O implementation, in the words of MariaDB 10.x/11.x and
# MySQL 5.7/8.x. Values are the names mysqlio.devtools.mariadb uses: io_uring, aio (libaio), pwrite
# (simulated AIO: threads doing synchronous pread/pwrite). The last match of a run wins.
AIO_LOG_LINES = (
    ("InnoDB: Using io_uring", "io_uring"),  # MariaDB >= 10.11.12 (innodb_linux_aio)
    ("InnoDB: Using liburing", "io_uring"),  # MariaDB 10.6 - 11.x built with liburing
    ("InnoDB: Using Linux native AIO", "aio"),
    ("Linux Native AIO disabled", "pwrite"),  # native AIO requested but unusable
    ("falling back to innodb_use_native_aio=OFF", "pwrite"),  # MariaDB: io_uring unusable
)
AIO_NAMES = {
    "io_uring": "io_uring",
    "aio": "Linux native AIO (libaio)",
    "pwrite": "simulated AIO (threads doing pread/pwrite)",
}
# Start of a run: "Starting MariaDB 10.11.6-MariaDB ... as process 1234",
# "mysqld (mysqld 8.0.36) starting as process 1234".
_RUN_START = re.compile(rb"(?:Starting MariaDB|starting as process)[^\n]*")


def current_run(log: bytes, ns_pid: int | None) -> tuple[bytes, str]:
    """The part of an error log written by the running server, and how it was found.

    The run starts at the last line saying "... as process <pid>" with the server's
    pid as it sees it (its own pid namespace) and ends where another start begins
    (say a second mysqld that failed to start on the same datadir); without such a
    line, the last run in the log is taken."""
    starts = list(_RUN_START.finditer(log))
    if ns_pid is not None:
        own = [i for i, m in enumerate(starts) if re.search(rb"as process %d\b" % ns_pid, m[0])]
        if own:
            i = own[-1]
            end = starts[i + 1].start() if i + 1 < len(starts) else len(log)
            return log[starts[i].start() : end], f"this run (process {ns_pid})"
    if starts:
        return log[starts[-1].start() :], "the last run in the log (no start line names this process)"
    return log, "the whole log (no start line found: rotated since?)"


def aio_from_log(run_log: bytes) -> tuple[str | None, str | None]:
    """(backend, the line that says so) from an error log's run; (None, None) if silent."""
    found: tuple[str | None, str | None] = (None, None)
    for raw in run_log.splitlines():
        line = raw.decode(errors="replace")
        for needle, backend in AIO_LOG_LINES:
            at = line.find(needle)
            if at >= 0:  # the message without the timestamp and level before it
                found = (backend, line[at:].strip())
    return found


def aio_rings(maps_text: str) -> int:
    """libaio contexts (io_setup) of a process: each maps its ring as "/[aio] (deleted)"."""
    return sum(1 for line in maps_text.splitlines() if line.rstrip().endswith("/[aio] (deleted)"))


def io_uring_instances(fd_targets: Iterable[str]) -> int:
    return sum(1 for target in fd_targets if target == "anon_inode:[io_uring]")


@dataclass
class KernelAioEvidence:
    """What the kernel shows of a process's asynchronous I/O (None: unreadable)."""

    io_uring: int | None
    aio: int | None

    def backend(self) -> str | None:
        if self.io_uring is None or self.aio is None:
            return None
        if self.io_uring and not self.aio:
            return "io_uring"
        if self.aio and not self.io_uring:
            return "aio"
        if not self.io_uring and not self.aio:
            return "pwrite"
        return None  # both: cannot tell


def kernel_aio_evidence(pid: int) -> KernelAioEvidence:
    uring: int | None = None
    aio: int | None = None
    try:
        targets = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        uring = io_uring_instances(targets)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps") as f:
            aio = aio_rings(f.read())
    except OSError:
        pass
    return KernelAioEvidence(uring, aio)


def check_aio_backend(
    log_backend: str | None,
    log_line: str | None,
    evidence: KernelAioEvidence,
    native_aio: str | None,
    log_problem: str | None = None,
) -> Check:
    """InnoDB's I/O implementation: the error log first, the kernel's view as a cross-check.

    native_aio: innodb_use_native_aio as set ("ON" / "OFF") or None (default ON)."""
    seen = evidence.backend()
    kernel = (
        f"the process holds {evidence.io_uring} io_uring instance(s) and {evidence.aio} libaio ring(s)"
        if evidence.io_uring is not None and evidence.aio is not None
        else "the process's fd table and memory maps are unreadable"
    )
    note = "; mysqlio traces all three backends"
    if log_backend:
        detail = f"{AIO_NAMES[log_backend]}: error log says {printable(log_line or '')!r}; {kernel}"
        if seen is not None and seen != log_backend:
            return Check(
                "InnoDB AIO",
                "warn",
                detail + f", which looks like {seen}",
                "the log may belong to an older run: check log_error",
                value=log_backend,
                section="server",
            )
        return Check("InnoDB AIO", "ok", detail + note, value=log_backend, section="server")
    why = log_problem or "the error log names no AIO backend for this run"
    if seen in ("io_uring", "aio"):
        return Check("InnoDB AIO", "ok", f"{AIO_NAMES[seen]}: {kernel} ({why})", value=seen, section="server")
    if seen == "pwrite" or native_aio == "OFF":
        reasons = ["innodb_use_native_aio=OFF"] if native_aio == "OFF" else []
        reasons += [kernel] if seen == "pwrite" else []
        detail = f"{AIO_NAMES['pwrite']}: {'; '.join(reasons)} ({why})"
        return Check("InnoDB AIO", "ok", detail + note, value="pwrite", section="server")
    return Check(
        "InnoDB AIO",
        "warn",
        f"unknown: {why}, and {kernel}",
        "run doctor as root, or point log_error at a file so its start-up lines can be read",
        section="server",
    )


def ns_pid(pid: int) -> int | None:
    """The server's pid in its own pid namespace (what its error log prints)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return pid


def read_tail(path: str, limit: int = LOG_SCAN_BYTES) -> bytes:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
            f.readline()  # resume at a line start
        return f.read()


def error_log_location(pid: int, configured: str | None) -> tuple[str | None, str | None, str]:
    """(where to read it from here, the path to show, or why there is none).

    mysqld points its stderr at the error log (freopen), so /proc/PID/fd/2 opens it
    even in another mount namespace; when stderr is a pipe or the journal, the
    configured log_error file is tried."""
    fd2 = f"/proc/{pid}/fd/2"
    try:
        target = os.readlink(fd2)
        if os.path.isfile(fd2):
            return fd2, target.removesuffix(" (deleted)"), ""
        why = f"stderr is {target}, not a file (systemd journal or a pipe?)"
    except OSError as exc:
        why = f"cannot read {fd2}: {exc.strerror} (run as root)"
    if configured and os.path.isfile(configured):  # a path here, also for a server in another root
        return configured, configured, ""
    return None, None, why


def check_error_log(shown: str | None, readable_from: str | None, why: str) -> Check:
    if readable_from and shown:
        try:
            size = f" ({human_bytes(os.path.getsize(readable_from))})"
        except OSError:  # the server just exited
            size = ""
        return Check("error log", "ok", printable(shown) + size, value=shown, section="server")
    return Check(
        "error log",
        "warn",
        why,
        "set log_error = /path/to/error.log in [mysqld] so its start-up lines can be read "
        "(or look for 'InnoDB: Using' in journalctl -u mariadb / mysql)",
        section="server",
    )
