"""The kernel's lockdown level (the lockdown LSM) and what it forbids each backend.

/sys/kernel/security/lockdown reads e.g. "none [integrity] confidentiality". At
integrity (the Secure Boot default of several distributions) the kernel refuses
unsigned modules, so SystemTap's; BPF tracing still works. At confidentiality it also
refuses BPF programs the helpers that read kernel memory (bpf_probe_read_kernel & co.,
LOCKDOWN_BPF_READ_KERNEL), which mysqlio's probes call: the eBPF backend cannot load.
A running kernel's level can be raised (written to that file), never lowered.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LEVELS = ("none", "integrity", "confidentiality")
SECURITYFS = "/sys/kernel/security"
LOCKDOWN_FILE = SECURITYFS + "/lockdown"
SIG_ENFORCE = "/sys/module/module/parameters/sig_enforce"
MODULE_SIGNATURE = b"~Module signature appended~\n"  # the end of a signed module (scripts/sign-file)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE, CLONE_NEWNS = 0x4000, 0x40000, 0x20000

BPF_REFUSED = "kernel lockdown (confidentiality) forbids BPF reading kernel memory: mysqlio cannot trace on this boot"
BPF_REFUSED_FIX = (
    "boot without lockdown=confidentiality (a kernel built with LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY always"
    " has it): writing to securityfs only raises the level of a running kernel"
)


@dataclass(frozen=True)
class Lockdown:
    """level: none | integrity | confidentiality, or None when it cannot be read (unknown
    says why); privately: securityfs was not mounted, and was read from a private mount."""

    level: str | None
    unknown: str = ""
    privately: bool = False

    def at_least(self, level: str) -> bool:
        return self.level is not None and LEVELS.index(self.level) >= LEVELS.index(level)


def parse_level(text: str) -> str | None:
    """The bracketed level of the lockdown file's text, or None."""
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found and found.group(1) in LEVELS else None


def read_privately(path: str) -> str:
    """`path` read from a read-only securityfs mounted in a private mount namespace of a
    child process: nothing stays mounted. (A securityfs left mounted changes other tools:
    SystemTap, seeing lockdown there, then refuses to build modules without MOK keys.)
    Raises OSError with the errno of the step that failed."""
    # libc looked up here: the child of a process with threads must not take the loader's lock
    libc = ctypes.CDLL(None, use_errno=True)
    unshare, mount = libc.unshare, libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: syscalls only, then _exit
        os.close(r)
        try:
            if (
                unshare(CLONE_NEWNS) != 0
                or mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0
                or mount(b"securityfs", os.path.dirname(path).encode(), b"securityfs", flags, None) != 0
            ):
                os.write(w, b"E%d" % ctypes.get_errno())
            else:
                fd = os.open(path, os.O_RDONLY)
                os.write(w, b"T" + os.read(fd, 4096))
        except OSError as exc:
            os.write(w, b"E%d" % (exc.errno or 0))
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        answer = f.read()
    os.waitpid(pid, 0)
    if answer.startswith(b"T"):
        return answer[1:].decode(errors="replace")
    err = int(answer[1:] or b"0") if answer.startswith(b"E") else 0
    raise OSError(err, os.strerror(err) if err else "no answer from the child", path)


def securityfs_mounted(directory: str = SECURITYFS, mounts: str = "/proc/self/mounts") -> bool:
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return False
    return any(len(f := line.split()) > 2 and f[1] == directory and f[2] == "securityfs" for line in lines)


def read_lockdown(
    path: str = LOCKDOWN_FILE,
    private: Callable[[str], str] = read_privately,
    mounts: str = "/proc/self/mounts",
) -> Lockdown:
    """The kernel's lockdown level. Where securityfs is not mounted (a fresh machine may not
    have it), it is read from a private mount of it (read_privately)."""
    directory = os.path.dirname(path)
    privately = not securityfs_mounted(directory, mounts)
    try:
        text = private(path) if privately else Path(path).read_text()
    except FileNotFoundError:
        return Lockdown(None, f"{path} is absent: a kernel without the lockdown LSM", privately)
    except OSError as exc:
        if privately:
            why = "needs root" if exc.errno == errno.EPERM else exc.strerror
            return Lockdown(None, f"securityfs is not mounted at {directory} and mounting it failed ({why})")
        return Lockdown(None, f"{path}: {exc.strerror}")
    level = parse_level(text)
    if level is None:
        return Lockdown(None, f"{path} reads {text.strip()!r}", privately)
    return Lockdown(level, "", privately)


def module_signed(path: str | os.PathLike[str]) -> bool:
    """Whether a kernel module file carries a signature (whether the kernel trusts its
    key is the kernel's to say)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - len(MODULE_SIGNATURE), 0))
            return f.read() == MODULE_SIGNATURE
    except OSError:
        return False


def unsigned_modules_refused(state: Lockdown, sig_enforce: str = SIG_ENFORCE) -> str | None:
    """Why this kernel refuses an unsigned module (one clause), or None."""
    if state.at_least("integrity"):
        return f"kernel lockdown ({state.level}) refuses unsigned kernel modules"
    try:
        enforced = Path(sig_enforce).read_text().strip() == "Y"
    except OSError:
        enforced = False
    return "the kernel enforces module signatures (module.sig_enforce)" if enforced else None
