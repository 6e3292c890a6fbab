"""The in-kernel aggregator: load mysqlio.bpf.o for one pid and drain its counts.

Each `drain()` swaps the active stats map (stats_a <-> stats_b) in the
one-slot map-in-map. The kernel waits for an RCU grace period on that update,
so when it returns no program still writes the old map, which is then read and
emptied: counts are never lost between read and reset.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from mysqlio import bpf_types as bt
from mysqlio.libbpf import BpfObject

DEFAULT_OBJECT = Path(__file__).parent / "bpf" / "mysqlio.bpf.o"


def bpf_object_path() -> str:
    return os.environ.get("MYSQLIO_BPF_OBJECT", str(DEFAULT_OBJECT))


@dataclass(frozen=True)
class FileIdentity:
    """A file as the kernel knows it: device (userspace st_dev encoding) and inode."""

    dev: int
    ino: int

    @classmethod
    def from_kernel(cls, kdev: int, ino: int) -> FileIdentity:
        # the kernel's dev_t is major << 20 | minor; stat() encodes it differently
        return cls(os.makedev(kdev >> 20, kdev & 0xFFFFF), ino)

    def kernel_key(self) -> bt.FileId:
        kdev = (os.major(self.dev) << 20) | os.minor(self.dev)
        return bt.FileId(ino=self.ino, dev=kdev)


@dataclass(frozen=True)
class OpCount:
    """What one (file, op, api) row of the kernel map held for an interval."""

    file: FileIdentity
    tid: int
    op: bt.Op
    api: bt.Api
    bytes: int
    ops: int
    errors: int


@dataclass(frozen=True)
class KernelName:
    """A file's path as walked from its dentry in the kernel."""

    path: str
    complete: bool
    deleted: bool


class IoProbe:
    """Attach the probes to one process and read what it did, interval by interval."""

    def __init__(self, pid: int, object_path: str | None = None, record_ring_bytes: int = 0) -> None:
        """record_ring_bytes > 0 also streams one event per request through a
        ring buffer of that size (a power of two, multiple of the page size)."""
        self.pid = pid
        self._obj = BpfObject(object_path or bpf_object_path())
        self._check_layout()
        self._obj.set_rodata("targ_tgid", ctypes.c_uint32(pid))
        if record_ring_bytes:
            self._obj.set_rodata("targ_record", ctypes.c_bool(True))
            self._obj.set_max_entries("events", record_ring_bytes)
        self._obj.load()
        self._obj.attach_all()
        self._slot = self._obj.map("stats_slot")
        self._maps = [self._obj.map("stats_a"), self._obj.map("stats_b")]
        self._active = 0
        self._names = self._obj.map("names")
        self._threads = self._obj.map("threads")

    def _check_layout(self) -> None:
        """Fail loudly if probes/mysqlio.h and bpf_types.py disagree."""
        expected = {
            "stats_a": (bt.FileOpKey, bt.FileOpStats),
            "names": (bt.FileId, bt.FileName),
            "threads": (ctypes.c_uint32, bt.ThreadName),
        }
        for name, (key_t, value_t) in expected.items():
            m = self._obj.map(name)
            if (m.key_size, m.value_size) != (ctypes.sizeof(key_t), ctypes.sizeof(value_t)):
                raise AssertionError(f"map {name}: BPF and Python layouts differ")

    def drain(self) -> list[OpCount]:
        """Everything counted since the previous drain."""
        full = self._maps[self._active]
        self._active ^= 1
        # returns after a grace period: no program writes `full` any more
        self._slot.update(ctypes.c_uint32(0), ctypes.c_uint32(self._maps[self._active].fd))
        return [_op_count(k, v) for k, v in full.drain(bt.FileOpKey, bt.FileOpStats)]

    def drops(self) -> bt.DropCounters:
        """Cumulative counts of what the kernel side could not account."""
        return self._obj.read_bss("drops", bt.DropCounters)

    def kernel_name(self, file: FileIdentity) -> KernelName | None:
        raw = bt.FileName()
        if not self._names.lookup(file.kernel_key(), raw):
            return None
        return _kernel_name(raw)

    def events_map_fd(self) -> int:
        return self._obj.map("events").fd

    def thread_name(self, tid: int) -> str | None:
        """The thread's name when it last started a row (it may have exited since)."""
        raw = bt.ThreadName()
        if not self._threads.lookup(ctypes.c_uint32(tid), raw):
            return None
        return raw.comm.decode(errors="replace")

    def forget_name(self, file: FileIdentity) -> None:
        """Let the kernel walk the file's path again at its next request."""
        self._names.delete(file.kernel_key())

    def close(self) -> None:
        self._obj.close()

    def __enter__(self) -> IoProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _op_count(key: bt.FileOpKey, value: bt.FileOpStats) -> OpCount:
    return OpCount(
        file=FileIdentity.from_kernel(key.dev, key.ino),
        tid=key.tid,
        op=bt.Op(key.op),
        api=bt.Api(key.api),
        bytes=value.bytes,
        ops=value.ops,
        errors=value.errors,
    )


def _kernel_name(raw: bt.FileName) -> KernelName:
    depth = min(raw.depth, bt.PATH_DEPTH)
    parts = [bytes(raw.comps[i]).split(b"\0", 1)[0].decode(errors="surrogateescape") for i in range(depth)]
    joined = "/".join(reversed(parts))
    path = "/" + joined if raw.complete else ".../" + joined
    return KernelName(path=path, complete=bool(raw.complete), deleted=raw.nlink == 0)
