"""Files of a server on overlayfs (a container image's layers, a datadir on an overlay
mount): one file, two identities. Its requests are counted on the overlay inode (the
`struct file` the server holds: the overlay's anonymous device, the number `stat` gives),
its page cache (pages dirtied, written back) on the real inode of the layer that holds it:
the upper layer's once it has been written (a lower file is copied up first, under a new
inode number; the overlay keeps showing the lower one's). This maps a real (upper) inode to
the overlay file it backs, so that both are one row, named as the server names it.

Joined here, in userspace, not in the probe: the page-cache hooks see only the real inode,
which has no pointer back to its overlay inode, and the overlay's own structures (the real
file behind `file->private_data`, a `struct file *` up to 6.12 and a `struct ovl_file` from
6.13; `struct ovl_inode`'s layers) move across 5.10-7.2 and are in the overlay module's BTF,
absent when the module is loaded after the probe. /proc/PID/fd names the overlay file
anyway, so its name needs this alias in any case.

The real inode is found by path: the overlay mount's `upperdir=` (its mount options in
/proc/PID/mountinfo, as the mounter gave it) joined with the file's path inside the overlay,
stat'ed through the server's root (a mount made in its namespace) then ours (a container
runtime's, made on the host). A path there is taken only when it holds a regular file of
another filesystem that the overlay shows under the same inode number, or that records
its copy-up origin (the overlay then shows the origin's number). A relative `upperdir=`
cannot be placed; a file never seen by a name (opened and closed between two reads of
/proc, its name not walked) is not joined: its page-cache row stays "<dev M:m inode N>".
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from .layout import to_server_path
from .mountinfo import MountWatch
from .probe import FileIdentity

_MAX_ALIASES = 100_000
# set on an upper file at copy-up (trusted.*; user.* on mounts with userxattr)
_ORIGIN_XATTRS = ("trusted.overlay.origin", "user.overlay.origin")


@dataclass(frozen=True)
class OverlayMount:
    dev: int  # st_dev of its files
    root: str  # the directory of the overlay that is mounted there
    point: str  # where, in the server's mount namespace
    upper: str  # upperdir=, as the mounter gave it ("" when read-only: no upper layer)
    lowers: tuple[str, ...]  # lowerdir= (':'-separated) and lowerdir+= (new mount API)


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def overlay_mounts(pid: int) -> list[OverlayMount]:
    """The overlay mounts of the process's mount namespace (/proc/PID/mountinfo)."""
    try:
        with open(f"/proc/{pid}/mountinfo", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 4 or fields[dash + 1] != "overlay":
            continue
        major, _, minor = fields[2].partition(":")
        # mount options are escaped (octal) where they hold ',', '=', blanks or '\'
        options = [opt.partition("=")[::2] for opt in fields[dash + 3].split(",")]
        upper = next((_unescape(v) for k, v in options if k == "upperdir"), "")
        lowers = [_unescape(p) for k, v in options if k == "lowerdir" for p in v.split(":")]
        lowers += [_unescape(v) for k, v in options if k == "lowerdir+"]
        mounts.append(
            OverlayMount(
                dev=os.makedev(int(major), int(minor)),
                root=_unescape(fields[3]),
                point=_unescape(fields[4]),
                upper=upper,
                lowers=tuple(lowers),
            )
        )
    return mounts


@dataclass(frozen=True)
class _Alias:
    file: FileIdentity  # the overlay file
    upper: str  # the upper layer's path that held its real inode, here
    server_path: str  # its name, as the server names it


class OverlayAliases:
    """Real (upper layer) identity -> the overlay file's identity and the server's name of
    it, learnt from the names of the server's overlay files."""

    def __init__(self, pid: int, root: str) -> None:
        self._pid = pid
        self._root = root  # layout.host_root: where the server's root is, here ("" = ours)
        self.mounts: list[OverlayMount] = []
        self._devs: set[int] = set()
        self._overlay_of: dict[FileIdentity, _Alias] = {}  # real -> its overlay file
        self._real_of: dict[FileIdentity, FileIdentity] = {}  # overlay file -> real
        self._checked: set[FileIdentity] = set()  # aliases checked in this interval
        self._mounts_watch = MountWatch(pid)

    def refresh(self) -> None:
        """Read the server's overlay mounts again (at a read of its open files) when its
        mount table changed since (a scan for a new file at 20,000 open fds read it each time)."""
        if not self._mounts_watch.changed():
            return
        self.mounts = overlay_mounts(self._pid)
        self._devs = {m.dev for m in self.mounts if m.upper}

    def on_overlay(self, file: FileIdentity) -> bool:
        return file.dev in self._devs

    def learn(self, file: FileIdentity, path: str) -> None:
        """`file`, named `path` here: when it is an overlay file with an upper inode, that
        inode is joined to it. (Once found, an upper inode stays: a copy-up happens once.)"""
        if file.dev not in self._devs or file in self._real_of:
            return
        server_path = to_server_path(path, self._root)
        found = self._upper_inode(file, server_path)
        if found is None:
            return  # still only in a lower layer: its pages are the lower inode's, read only
        real, upper = found
        if real in self._overlay_of:
            self._forget(real)  # its inode number now another file's
        self._overlay_of[real] = _Alias(file, upper, server_path)
        self._real_of[file] = real
        self._checked.add(real)
        while len(self._overlay_of) > _MAX_ALIASES:
            self._forget(next(iter(self._overlay_of)))

    def overlay_of(self, real: FileIdentity) -> FileIdentity | None:
        """The overlay file whose upper inode `real` is; its upper path checked to still
        hold it once an interval (a file deleted or renamed since, its inode number perhaps
        reused by another, is not joined to the old one)."""
        alias = self._overlay_of.get(real)
        if alias is None:
            return None
        if real not in self._checked:
            self._checked.add(real)
            try:
                st = os.stat(alias.upper, follow_symlinks=False)
            except OSError:
                st = None
            if st is None or (st.st_dev, st.st_ino) != (real.dev, real.ino):
                self._forget(real)
                return None
        return alias.file

    def server_name(self, file: FileIdentity) -> str | None:
        """The server's name of an overlay file joined to its upper inode, while its upper
        path holds that inode: a file closed, whose name the probe walked long ago, is still
        named when its pages are written back."""
        real = self._real_of.get(file)
        if real is None or self.overlay_of(real) != file:
            return None
        return self._overlay_of[real].server_path

    def shows(self, file: FileIdentity, path: str) -> bool:
        """Whether the overlay shows `file` at `path` (here), by its layers: an overlay
        mounted in the server's namespace only cannot be stat'ed here. In the upper layer
        (joined), or only in a lower one, under an upper layer that hides nothing above it."""
        if file.dev not in self._devs:
            return False
        self.learn(file, path)
        server_path = to_server_path(path, self._root)
        if self.server_name(file) == server_path:
            return True
        mount = self._mount_of(file, server_path)
        if mount is None or not mount.upper.startswith("/"):
            return False
        inside = mount.root.rstrip("/") + server_path[len(mount.point.rstrip("/")) :]
        for upper in self._layer_dirs(mount.upper):
            if not _hides_nothing(upper, inside):
                return False
            for lower in mount.lowers:
                for lower_dir in self._layer_dirs(lower):
                    try:
                        st = os.stat(lower_dir + inside, follow_symlinks=False)
                    except OSError:
                        continue
                    return stat.S_ISREG(st.st_mode) and st.st_dev != file.dev and st.st_ino == file.ino
            return False
        return False

    def _layer_dirs(self, layer: str) -> list[str]:
        """A layer's directory, through the server's root then ours: where it is one."""
        if not layer.startswith("/"):
            return []
        path = layer.rstrip("/")
        return [d for d in dict.fromkeys([f"/proc/{self._pid}/root{path}", path]) if os.path.isdir(d)][:1]

    def real_files(self) -> list[FileIdentity]:
        return list(self._overlay_of)

    def new_interval(self) -> None:
        self._checked = set()

    def _forget(self, real: FileIdentity) -> None:
        alias = self._overlay_of.pop(real)
        self._real_of.pop(alias.file, None)

    def _mount_of(self, file: FileIdentity, server_path: str) -> OverlayMount | None:
        best: OverlayMount | None = None
        for m in self.mounts:
            point = m.point.rstrip("/")
            inside = m.dev == file.dev and server_path.startswith(point + "/")
            if inside and (best is None or len(point) > len(best.point.rstrip("/"))):
                best = m
        return best

    def _upper_inode(self, file: FileIdentity, server_path: str) -> tuple[FileIdentity, str] | None:
        best = self._mount_of(file, server_path)
        if best is None:
            return None
        inside = best.root.rstrip("/") + server_path[len(best.point.rstrip("/")) :]
        for candidate, st in self._layer_files(best.upper, inside, file):
            # a file made in the upper layer shows its own number; one copied up, its origin's
            if st.st_ino == file.ino or (_has_origin(candidate) and self._in_lower(best, inside, file)):
                return FileIdentity(st.st_dev, st.st_ino), candidate
        return None

    def _in_lower(self, mount: OverlayMount, inside: str, file: FileIdentity) -> bool:
        return any(st.st_ino == file.ino for lower in mount.lowers for _, st in self._layer_files(lower, inside, file))

    def _layer_files(self, layer: str, inside: str, file: FileIdentity) -> Iterator[tuple[str, os.stat_result]]:
        """The regular files at `inside` of a layer directory (not the overlay's own), stat'ed
        through the server's root, then ours."""
        if not layer.startswith("/"):
            return  # relative to the mounter's directory then, unknown here
        path = layer.rstrip("/") + inside
        for candidate in dict.fromkeys([f"/proc/{self._pid}/root{path}", path]):
            try:
                st = os.stat(candidate, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_dev != file.dev:
                yield candidate, st


def _has_origin(path: str) -> bool:
    for name in _ORIGIN_XATTRS:
        try:
            os.getxattr(path, name, follow_symlinks=False)
            return True
        except OSError:
            continue
    return False


_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")


def _hides_nothing(upper: str, inside: str) -> bool:
    """Nothing in the upper layer hides a lower file at `inside`: no entry there (a whiteout,
    a file), nor at its directories but plain, not opaque, ones."""
    at = upper
    for part in [p for p in inside.split("/") if p]:
        at = f"{at}/{part}"
        try:
            st = os.stat(at, follow_symlinks=False)
        except FileNotFoundError:
            return True  # not in the upper layer from here down
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        for name in _OPAQUE_XATTRS:
            try:
                if os.getxattr(at, name, follow_symlinks=False) == b"y":
                    return False
            except OSError:
                continue
    return False  # `inside` itself is a directory in the upper layer
