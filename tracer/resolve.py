"""Turn a kernel file identity (dev, inode) into the path a DBA recognises.

Order of trust: the traced process's own open fds (/proc/PID/fd, exact and
current), then the path the kernel walked from the dentry at the first request
(checked against the disk: if that name now holds another inode, the file was
renamed or deleted, and its directory is searched for the inode).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from mysqlio.probe import FileIdentity, KernelName

DELETED_SUFFIX = " (deleted)"
_REFRESH_MIN_S = 0.5  # a burst of unknown files triggers one /proc scan, not many
_DIR_SCAN_LIMIT = 100_000


@dataclass(frozen=True)
class ResolvedPath:
    path: str
    deleted: bool
    source: str  # "fd", "kernel", "kernel+dir", "unknown"


class FileResolver:
    """Cache of identity -> path for one process, refreshed from /proc on demand."""

    def __init__(self, pid: int, kernel_name: Callable[[FileIdentity], KernelName | None]) -> None:
        self.pid = pid
        self._kernel_name = kernel_name
        self._open: dict[FileIdentity, ResolvedPath] = {}
        self._closed: dict[FileIdentity, ResolvedPath] = {}
        self._last_scan = 0.0

    def scan_fds(self) -> None:
        """Read every open fd of the process: identity -> current path."""
        fd_dir = f"/proc/{self.pid}/fd"
        found: dict[FileIdentity, ResolvedPath] = {}
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            fds = []
        for fd in fds:
            entry = f"{fd_dir}/{fd}"
            try:
                st = os.stat(entry)
                target = os.readlink(entry)
            except OSError:
                continue  # closed meanwhile
            if not target.startswith("/"):
                continue  # socket:[..], pipe:[..], anon_inode:..
            deleted = target.endswith(DELETED_SUFFIX)
            if deleted:
                target = target[: -len(DELETED_SUFFIX)]
            found[FileIdentity(st.st_dev, st.st_ino)] = ResolvedPath(target, deleted, "fd")
        self._open = found
        self._last_scan = time.monotonic()

    def resolve(self, file: FileIdentity) -> ResolvedPath:
        hit = self._open.get(file)
        if hit is None and time.monotonic() - self._last_scan >= _REFRESH_MIN_S:
            self.scan_fds()
            hit = self._open.get(file)
        if hit is not None:
            self._closed.pop(file, None)
            return hit
        cached = self._closed.get(file)
        if cached is not None:
            return cached
        resolved = self._from_kernel(file)
        if resolved.source != "unknown":
            self._closed[file] = resolved
        return resolved

    def _from_kernel(self, file: FileIdentity) -> ResolvedPath:
        name = self._kernel_name(file)
        if name is None:
            return ResolvedPath(f"<dev {os.major(file.dev)}:{os.minor(file.dev)} inode {file.ino}>", False, "unknown")
        if not name.complete or name.deleted:
            return ResolvedPath(name.path, name.deleted, "kernel")
        if _is_same_file(name.path, file):
            return ResolvedPath(name.path, False, "kernel")
        moved = _find_in_dir(os.path.dirname(name.path), file)
        if moved is not None:
            return ResolvedPath(moved, False, "kernel+dir")
        return ResolvedPath(name.path, True, "kernel")

    def forget_closed(self) -> None:
        """Drop cached names of closed files (their inode numbers may be reused)."""
        self._closed.clear()


def _is_same_file(path: str, file: FileIdentity) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (file.dev, file.ino)


def _find_in_dir(directory: str, file: FileIdentity) -> str | None:
    """The file's new name after a rename within its directory, if any."""
    try:
        with os.scandir(directory) as entries:
            for n, entry in enumerate(entries):
                if n >= _DIR_SCAN_LIMIT:
                    return None
                if entry.inode() == file.ino and _is_same_file(entry.path, file):
                    return entry.path
    except OSError:
        return None
    return None
