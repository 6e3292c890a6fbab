"""A process's mount table (/proc/PID/mountinfo): where a path relative to the root of a
filesystem is, in the process's own mount namespace. The SystemTap scripts walk a file's
path up to its filesystem's root; this puts the mount point in front."""

from __future__ import annotations

import os
import re
import select
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mount:
    dev: int  # st_dev encoding
    root: str  # the directory of the filesystem that is mounted
    point: str  # where, in the process's mount namespace


def _unescape(field: bytes) -> str:
    raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)
    return raw.decode(errors="surrogateescape")


class MountTable:
    """/proc/PID/mountinfo: from a path relative to a filesystem's root to the
    process's absolute path."""

    def __init__(self, mounts: Iterable[Mount] = ()) -> None:
        self.mounts = list(mounts)

    @classmethod
    def parse(cls, text: bytes | str) -> MountTable:
        data = text.encode(errors="surrogateescape") if isinstance(text, str) else text
        mounts = []
        for line in data.splitlines():
            fields = line.split()
            if len(fields) < 5 or b":" not in fields[2]:
                continue
            major, _, minor = fields[2].partition(b":")
            try:
                dev = os.makedev(int(major), int(minor))
            except ValueError:
                continue
            mounts.append(Mount(dev, _unescape(fields[3]), _unescape(fields[4])))
        return cls(mounts)

    @classmethod
    def of_process(cls, pid: int) -> MountTable:
        try:
            with open(f"/proc/{pid}/mountinfo", "rb") as f:
                return cls.parse(f.read())
        except OSError:
            return cls()

    def absolute(self, dev: int, relative: str) -> str | None:
        """The path of `relative` (to the root of dev's filesystem), or None when no mount shows it."""
        in_fs = "/" + relative.strip("/")
        best: Mount | None = None
        for m in self.mounts:
            root = m.root.rstrip("/")
            if m.dev != dev or not (root == "" or in_fs == root or in_fs.startswith(root + "/")):
                continue
            if best is None or len(root) > len(best.root.rstrip("/")):
                best = m
        if best is None:
            return None
        rest = in_fs[len(best.root.rstrip("/")) :]
        return (best.point.rstrip("/") + rest) or "/"


class MountWatch:
    """Whether a process's mount table changed since the last look: the kernel flags an
    open /proc/PID/mountinfo (POLLPRI) at each mount or unmount in its namespace, so a
    reader need not read and parse the table at every scan of the process's fds."""

    def __init__(self, pid: int) -> None:
        self._poll = select.poll()
        try:
            # unbuffered: only polled, never read; closed with this object
            self._file: Any = open(f"/proc/{pid}/mountinfo", "rb", buffering=0)  # noqa: SIM115
            self._poll.register(self._file, select.POLLPRI)
        except OSError:
            self._file = None  # no /proc entry: every look says "changed" (the reader finds nothing)
        self._looked = False

    def changed(self) -> bool:
        """True the first time, and after any change to the table since the last call."""
        first, self._looked = not self._looked, True
        if self._file is None:
            return True
        return any(ev & (select.POLLPRI | select.POLLERR) for _, ev in self._poll.poll(0)) or first
