"""Whether a file's name still holds it, without a `stat` per file per interval (issue 60).

The resolver checks the name of each open file once an interval (a file renamed while open,
MySQL's redo files): at 19,000 active files those `stat`s were ~110 ms of the fold's ~440
an interval (in process, names on tmpfs).
Here the directories on a checked name's path are watched with inotify (its parent for
the names in it, every directory up to / for its own rename or removal) *before* the name
is checked; from then on the name can stop holding the file only through an event the
kernel queues synchronously: the name unlinked (IN_DELETE) or renamed away (IN_MOVED_FROM),
another file renamed onto it (IN_MOVED_TO; a name that exists cannot be created again), or
a directory on its path renamed or removed (IN_MOVE_SELF, IN_DELETE_SELF on its own
watch). `poll()` reads the events (at each interval, before the checks), and a name any
event touched is checked by `stat` again. What inotify cannot tell, or lost, makes every
name be checked again: the queue overflowed, a watch went away (a directory removed or
unmounted), a directory moved. A directory that cannot be watched (no inotify, the watch
limit reached) leaves its names checked by `stat` every interval, as before.

A mount over a directory on the path is not watched for: it changes what the name opens
here, not the name the process's fd has (/proc/PID/fd still says it), which is the name
the resolver shows either way (a failed `stat` there only read /proc again, found the same
name and stopped checking it: `FileResolver._unverifiable`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import weakref

from .probe import FileIdentity

IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
# a name in the directory changed: that name is checked again
_NAME_EVENTS = IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE
# the directory itself, or the queue: every name is checked again
_RESET_EVENTS = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_Q_OVERFLOW | IN_IGNORED
_MASK = _NAME_EVENTS | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
_MOST_NAMES = 1 << 18  # names held as checked; past it they are forgotten (checked again)

try:  # the C library of this process (loaded by Python, also when frozen: make dist)
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    _libc.inotify_init1.argtypes = [ctypes.c_int]
    _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
except (OSError, AttributeError):  # no inotify: every name is checked by stat
    _libc = None


class NameWatch:
    """Names checked to hold a file, kept valid by inotify on their directories (above)."""

    def __init__(self) -> None:
        self._fd = -1  # the inotify instance, made at the first watch
        self._failed = False  # none could be made: every name is checked by stat
        self._dirs: dict[str, int] = {}  # directory -> its watch (-1: could not be watched)
        self._wd_dirs: dict[int, list[str]] = {}  # a watch -> the directories (names) it is for
        self._names: dict[str, FileIdentity] = {}  # name -> the file it held when checked
        self._closer: weakref.finalize | None = None

    def fresh(self, path: str, file: FileIdentity) -> bool:
        """`path` was checked to hold `file` while watched, and nothing touched it since
        the last `poll()`."""
        return self._names.get(path) == file

    def watch(self, path: str) -> bool:
        """Watch the directories of `path` (to be called before its name is checked);
        False when one of them cannot be (the name is then checked every time)."""
        directory = os.path.dirname(path)
        ok = True
        while True:
            wd = self._dirs.get(directory)
            if wd is None:
                wd = self._dirs[directory] = self._add(directory)
                if wd >= 0:
                    self._wd_dirs.setdefault(wd, []).append(directory)
            ok &= wd >= 0
            parent = os.path.dirname(directory)
            if parent == directory:
                return ok
            directory = parent

    def checked(self, path: str, file: FileIdentity) -> None:
        """`path` held `file` at a check made after `watch(path)` said True."""
        if len(self._names) >= _MOST_NAMES:
            self._names.clear()
        self._names[path] = file

    def poll(self) -> None:
        """Read the events queued since the last poll: the names they touch are no longer
        fresh (all of them, for what inotify cannot tell)."""
        if self._fd < 0:
            return
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._reset()
                return
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + size].rstrip(b"\0")
                at += _EVENT.size + size
                if mask & _RESET_EVENTS:
                    self._reset()
                    return
                if mask & _NAME_EVENTS:
                    leaf = os.fsdecode(name)
                    for directory in self._wd_dirs.get(wd, ()):
                        self._names.pop(os.path.join(directory, leaf), None)

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
            self._closer = None
        self._fd = -1

    def _reset(self) -> None:
        """Every name checked again, every directory watched again (a fresh instance: the
        old one's directories may have moved)."""
        self.close()
        self._dirs.clear()
        self._wd_dirs.clear()
        self._names.clear()

    def _add(self, directory: str) -> int:
        if _libc is None:
            return -1
        if self._fd < 0 and not self._failed:
            fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                self._failed = True  # e.g. max_user_instances reached
                return -1
            self._fd = fd
            self._closer = weakref.finalize(self, _close, fd)
        if self._fd < 0:
            return -1
        # -1 (e.g. max_user_watches reached, or no such directory): its names stat'ed each time
        return int(_libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK))


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
