"""Child processes of the sandboxes: started in their own session, killed with their
parent, waited for with a deadline; the binaries found in PATH or the sbin dirs."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
TAIL_LINES = 20


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In the child before exec: send it `sig` when the process that started it dies,
    so even a kill -9 of the test or demo leaves no server behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def find_binary(name: str) -> str:
    """Return the absolute path of a MariaDB/sysbench binary or raise."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])
    path = shutil.which(name, path=search)
    if path is None:
        raise RuntimeError(
            f"{name!r} not found (looked in PATH, /usr/sbin, /usr/bin); "
            "install it, e.g. apt-get install mariadb-server mariadb-client sysbench"
        )
    return path


def tail(path: str, lines: int = TAIL_LINES) -> str:
    """Last `lines` lines of a text file ('' if unreadable)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_or_kill(proc: subprocess.Popen[Any], timeout_s: float, group: bool) -> None:
    """Wait for `proc`; SIGKILL it (or its process group) after `timeout_s`."""
    try:
        proc.wait(timeout=timeout_s)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def run_logged(cmd: list[str], log_path: str, timeout_s: float) -> int:
    """Run `cmd` in its own session with output to `log_path`; kill all on timeout."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        wait_or_kill(proc, 0, group=True)
        raise
    finally:
        if proc.poll() is None:  # KeyboardInterrupt etc.: no orphans
            wait_or_kill(proc, 0, group=True)
    return proc.returncode
