"""Turn a kernel file identity (dev, inode) into the path a DBA recognises.

Order of trust: the traced process's own open fds (/proc/PID/fd, exact; a name
read there is checked to still hold its inode once an interval, and /proc read
again when it does not: a file renamed while open), then the path the kernel
walked from the dentry at the first request (checked against the disk: if that
name now holds another inode, the file was renamed or deleted, and its
directory is searched for the inode; so is a name given in an earlier interval). A name the
probe cut short (".../a/b", deeper than its PATH_DEPTH components) is completed
from the process's working directory (mysqld's datadir) or root where their
components overlap, when the completed path holds that inode. A file the
kernel has no name for (its name was walked before the interval began) that was
open at an earlier /proc read keeps the name it had there, if it still holds it, or the
name it was given in this interval or the one before (`new_interval`).

A process in another root (chroot, container) has its files named by the kernel
as seen from the root of each file's mount namespace: under its root directory's
path here when its mount namespace is ours or a clone of it, else by its own
names. Either way the path given is one that opens the file here, checked by
inode where the file still exists (see mysqlio.layout.host_root). What is shown of it
(`shown`) is the server's own name when that path is under /proc/PID/root.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .layout import host_root, to_server_path
from .name_watch import NameWatch
from .overlay_files import OverlayAliases
from .probe import FileIdentity, KernelName, dev_label
from .root_paths import shown_path

DELETED_SUFFIX = " (deleted)"
_REFRESH_MIN_S = 0.5  # a burst of unknown files triggers one /proc scan, not many
_DIR_SCAN_LIMIT = 100_000
_WAS_OPEN_MAX = 10_000  # names of files seen open and closed since, kept for the kernel's gaps


@dataclass(frozen=True)
class ResolvedPath:
    path: str
    deleted: bool
    source: str  # "fd", "map", "kernel", "kernel+dir", "kernel+cwd", "kernel+overlay", "overlay", "unknown"


class FileResolver:
    """Cache of identity -> path for one process, refreshed from /proc on demand."""

    def __init__(
        self, pid: int, kernel_name: Callable[[FileIdentity], KernelName | None], server_names: bool = True
    ) -> None:
        self.pid = pid
        self._server_names = server_names  # shown(): the server's names (False: paths here, for verify)
        self._kernel_name = kernel_name
        self._open: dict[FileIdentity, ResolvedPath] = {}
        # names of files not open at the last /proc read, given in this interval and the one
        # before: for a request the kernel counted without walking its name again
        self._recent: dict[FileIdentity, ResolvedPath] = {}
        self._before: dict[FileIdentity, ResolvedPath] = {}
        self._was_open: dict[FileIdentity, ResolvedPath] = {}
        # open files whose name from the last /proc read was checked in this interval, and
        # those whose name cannot be stat'ed here at all (checked once, not every interval)
        self._checked: set[FileIdentity] = set()
        self._unverifiable: set[FileIdentity] = set()
        # names checked and watched since (inotify): not stat'ed again until touched (issue 60)
        self._names = NameWatch()
        self._last_scan = 0.0
        self._root = host_root(pid)  # "" when the process shares our root
        # a file on overlayfs: its page cache's (upper) inode joined to the overlay file
        self._overlay = OverlayAliases(pid, self._root)

    def _here(self, path: str, file: FileIdentity | None) -> str:
        """The kernel's name of a file of the process -> the path that opens it here."""
        root = self._root
        if not root:
            return path
        server = to_server_path(path, root)
        candidates = list(dict.fromkeys([root + server, f"/proc/{self.pid}/root{server}"]))
        if file is not None:
            for candidate in dict.fromkeys([path, *candidates]):
                if _is_same_file(candidate, file):
                    return candidate
        return path if server != path else candidates[0]

    def shown(self, path: str) -> str:
        """The path to display for a resolved path: never /proc/PID/root/... (a container's
        files by the server's own names, root_paths.shown_path)."""
        return shown_path(path, self._root) if self._server_names else path

    def scan_fds(self) -> None:
        """Read every open fd of the process: identity -> current path."""
        fd_dir = f"/proc/{self.pid}/fd"
        found: dict[FileIdentity, ResolvedPath] = {}
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            fds = []
        for fd in fds:
            pinned = _pinned_file(f"{fd_dir}/{fd}")
            if pinned is None:
                continue  # closed meanwhile
            target, st = pinned
            if not target.startswith("/"):
                continue  # socket:[..], pipe:[..], anon_inode:..
            deleted = target.endswith(DELETED_SUFFIX)
            if deleted:
                target = target[: -len(DELETED_SUFFIX)]
            identity = FileIdentity(st.st_dev, st.st_ino)
            found[identity] = ResolvedPath(self._here(target, None if deleted else identity), deleted, "fd")
        for identity, (target, deleted) in shared_mappings(self.pid).items():
            if identity not in found:  # a file written through a mapping, no fd (MariaDB 11.8's redo)
                found[identity] = ResolvedPath(self._here(target, None if deleted else identity), deleted, "map")
        for identity in self._open.keys() - found.keys():
            self._was_open[identity] = self._open[identity]
        self._unverifiable &= found.keys()
        for identity in found.keys() & self._was_open.keys():
            del self._was_open[identity]
        while len(self._was_open) > _WAS_OPEN_MAX:
            del self._was_open[next(iter(self._was_open))]
        self._open = found
        self._overlay.refresh()
        for identity, resolved in found.items():
            if not resolved.deleted:
                self._overlay.learn(identity, resolved.path)
        self._last_scan = time.monotonic()

    def open_files(self) -> list[FileIdentity]:
        """The files open or mapped shared at the last /proc read (and the upper inodes
        of those on overlayfs, which hold their pages)."""
        return [*self._open, *self._overlay.real_files()]

    def join_overlays(self, files: Iterable[FileIdentity]) -> dict[FileIdentity, FileIdentity]:
        """The files of an interval's rows that are the upper inodes of overlay files ->
        those overlay files (overlay_files.py): the overlay files are named first, which
        joins their upper inodes; an upper inode still unknown reads /proc again."""
        if not self._overlay.mounts:
            return {}
        distinct = set(files)
        for file in distinct:
            if self._overlay.on_overlay(file):
                resolved = self.resolve(file)  # a file open now has been learnt by scan_fds
                if resolved.source != "unknown":
                    # a closed one, named by the kernel: perhaps "deleted" only because its
                    # mount is in the server's namespace, not ours; the layers tell
                    self._overlay.learn(file, resolved.path)
        joined = {}
        for file in distinct:
            if self._overlay.on_overlay(file):
                continue
            alias = self._overlay.overlay_of(file)
            if alias is None and file not in self._open and time.monotonic() - self._last_scan >= _REFRESH_MIN_S:
                self.scan_fds()
                alias = self._overlay.overlay_of(file)
            if alias is not None:
                joined[file] = alias
        return joined

    def resolve(self, file: FileIdentity) -> ResolvedPath:
        hit = self._open.get(file)
        if hit is None and time.monotonic() - self._last_scan >= _REFRESH_MIN_S:
            self.scan_fds()
            hit = self._open.get(file)
        if hit is not None and file not in self._checked:
            hit = self._still_named(file, hit)
        if hit is not None:
            return hit
        name = self._kernel_name(file)
        if name is None:
            recent = self._recent.get(file) or self._before.get(file)
            if recent is not None:
                return self._still_there(file, recent)
        resolved = self._from_kernel(file, name)
        if resolved.source != "unknown":
            self._recent[file] = resolved
        return resolved

    def _still_named(self, file: FileIdentity, hit: ResolvedPath) -> ResolvedPath | None:
        """The name of an open file from the last /proc read, checked once an interval: a
        file renamed while open keeps its old name there (MySQL >= 8.0.30 renames its open
        redo files, `#ib_redoN_tmp` -> `#ib_redoN`, every few seconds under load). When the
        name no longer holds the file, /proc is read again; None when the file is not
        open any more. A name checked once is then kept by inotify (name_watch.py), and
        stat'ed again only after an event touched it."""
        self._checked.add(file)
        if hit.deleted or file in self._unverifiable or self._names.fresh(hit.path, file):
            return hit
        watched = self._names.watch(hit.path)  # before the check: a rename after it is an event
        if _is_same_file(hit.path, file):
            if watched:
                self._names.checked(hit.path, file)
            return hit
        self.scan_fds()
        now = self._open.get(file)
        if now is not None and now.path == hit.path and not now.deleted:
            self._unverifiable.add(file)  # the fd's name does not stat to it here (another mount namespace)
        return now

    def _still_there(self, file: FileIdentity, recent: ResolvedPath) -> ResolvedPath:
        """A name given in this interval or the one before, checked once an interval: the
        file may have been renamed since (MySQL renames a spare redo file, `#ib_redoN_tmp`
        -> `#ib_redoN`, after writing its header: the kernel walks no name again), so its
        directory is searched for the inode; not there, it was deleted."""
        if file in self._checked or recent.deleted or _is_same_file(recent.path, file):
            self._checked.add(file)
            return recent
        self._checked.add(file)
        moved = _find_in_dir(os.path.dirname(recent.path), file)
        resolved = ResolvedPath(moved, False, "kernel+dir") if moved else ResolvedPath(recent.path, True, recent.source)
        self._recent[file] = resolved
        return resolved

    def _from_kernel(self, file: FileIdentity, name: KernelName | None) -> ResolvedPath:
        last = self._was_open.get(file)
        if name is None and last is not None and (last.deleted or _is_same_file(last.path, file)):
            return last  # e.g. a binlog closed by a rotation: its last requests count under its name
        if name is None:
            joined = self._overlay.server_name(file)
            if joined is not None:  # an overlay file closed long ago: its upper layer names it
                return ResolvedPath(self._here(joined, None), False, "overlay")
            return ResolvedPath(f"<dev {dev_label(file.dev)} inode {file.ino}>", False, "unknown")
        if not name.complete:
            full = self._complete(name.path, None if name.deleted else file)
            deleted = name.deleted
            if full is None and not deleted:  # gone from that name since the walk: its directory then
                full = self._complete(name.path, None)
                moved = _find_in_dir(os.path.dirname(full), file) if full is not None else None
                if moved is not None:  # renamed (MySQL's spare redo files: `#ib_redoN_tmp` -> `#ib_redoN`)
                    return ResolvedPath(moved, False, "kernel+dir")
                deleted = True
            if full is None:
                return ResolvedPath(name.path, name.deleted, "kernel")
            return ResolvedPath(full, deleted, "kernel+cwd")
        path = self._here(name.path, None if name.deleted else file)
        if name.deleted:
            return ResolvedPath(path, True, "kernel")
        if _is_same_file(path, file):
            return ResolvedPath(path, False, "kernel")
        if self._overlay.shows(file, path):  # an overlay mounted in the server's namespace only
            return ResolvedPath(path, False, "kernel+overlay")
        moved = _find_in_dir(os.path.dirname(path), file)
        if moved is not None:
            return ResolvedPath(moved, False, "kernel+dir")
        return ResolvedPath(path, True, "kernel")

    def _complete(self, cut: str, file: FileIdentity | None) -> str | None:
        """The full path of a name cut short, ".../a/b": a directory the process uses
        (its cwd, its root) continued by the components it shares with the name's start;
        the path must hold `file`, or for a deleted file (None) its directory must exist."""
        tail = [c for c in cut.removeprefix(".../").split("/") if c]
        try:
            cwd = os.readlink(f"/proc/{self.pid}/cwd").removesuffix(DELETED_SUFFIX)
        except OSError:
            cwd = ""
        for anchor in dict.fromkeys(a for a in (cwd, self._root) if a.startswith("/")):
            comps = [c for c in anchor.split("/") if c]
            for i in range(len(comps) + 1):
                shared = comps[i:]
                if len(shared) < len(tail) and tail[: len(shared)] == shared:
                    path = self._here("/" + "/".join(comps[:i] + tail), file)
                    if _is_same_file(path, file) if file else os.path.isdir(os.path.dirname(path)):
                        return path
        return None

    def new_interval(self) -> None:
        """Names of closed files given before the last interval are dropped: the kernel's
        name, walked again, is taken from now on (the file may have been renamed, or its
        inode number reused), and the names kept stay two intervals' worth."""
        self._before, self._recent = self._recent, {}
        self._checked = set()
        self._names.poll()  # the names renamed or removed since: checked again
        self._overlay.new_interval()


_MAPS_LINE = re.compile(r"^[0-9a-f]+-[0-9a-f]+\s+\S{3}s\s+\S+\s+([0-9a-f]+):([0-9a-f]+)\s+(\d+)\s+(/.*)$")


def shared_mappings(pid: int) -> dict[FileIdentity, tuple[str, bool]]:
    """Files the process maps shared (/proc/PID/maps): identity -> (path, deleted)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            text = f.read()
    except OSError:
        return {}
    found: dict[FileIdentity, tuple[str, bool]] = {}
    for line in text.splitlines():
        m = _MAPS_LINE.match(line)
        if not m or m[3] == "0":
            continue
        path = m[4].rstrip()
        deleted = path.endswith(DELETED_SUFFIX)
        identity = FileIdentity(os.makedev(int(m[1], 16), int(m[2], 16)), int(m[3]))
        found[identity] = (path.removesuffix(DELETED_SUFFIX), deleted)
    return found


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


def _pinned_file(fd_link: str) -> tuple[str, os.stat_result] | None:
    """The name and inode of the file behind a /proc/PID/fd link, read from one file.

    The link is opened (O_PATH: no open of the file itself, no fsnotify event) and the
    name and inode are read from our own fd, which pins that file: a readlink and a
    stat of the link itself can each see a different file when the process closes the
    fd and opens another on the same number between them, even twice over (A, B, A),
    which lent a file's name to another's inode (CI on a fresh machine, stap on 6.1).
    """
    try:
        fd = os.open(fd_link, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
