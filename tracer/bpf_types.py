"""ctypes mirrors of probes/mysqlio.h; the probe loader checks their sizes."""

from __future__ import annotations

import ctypes
import enum

PATH_DEPTH = 8
NAME_LEN = 48
LAT_SLOTS = 256


class Op(enum.IntEnum):
    WRITE = 0
    READ = 1
    FSYNC = 2
    FDATASYNC = 3
    SYNC_FILE_RANGE = 4


class Api(enum.IntEnum):
    SYSCALL = 0
    LIBAIO = 1
    IO_URING = 2


API_NAMES = {Api.SYSCALL: "syscall", Api.LIBAIO: "libaio", Api.IO_URING: "io_uring"}


class FileOpKey(ctypes.Structure):
    _fields_ = [
        ("ino", ctypes.c_uint64),
        ("dev", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("api", ctypes.c_uint8),
        ("pad", ctypes.c_uint16),
        ("pad2", ctypes.c_uint32),
    ]


class ThreadName(ctypes.Structure):
    _fields_ = [("comm", ctypes.c_char * 16)]


class FileOpStats(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint64), ("ops", ctypes.c_uint64), ("errors", ctypes.c_uint64)]


class FileId(ctypes.Structure):
    _fields_ = [("ino", ctypes.c_uint64), ("dev", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class FileName(ctypes.Structure):
    _fields_ = [
        ("comps", (ctypes.c_char * NAME_LEN) * PATH_DEPTH),
        ("depth", ctypes.c_uint32),
        ("complete", ctypes.c_uint32),
        ("nlink", ctypes.c_uint32),
        ("mode", ctypes.c_uint32),
    ]


class LatKey(ctypes.Structure):
    _fields_ = [
        ("ino", ctypes.c_uint64),
        ("dev", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("api", ctypes.c_uint8),
        ("pad", ctypes.c_uint16),
    ]


class LatHist(ctypes.Structure):
    _fields_ = [("sum_ns", ctypes.c_uint64), ("max_ns", ctypes.c_uint64), ("slots", ctypes.c_uint32 * LAT_SLOTS)]


class PendingIo(ctypes.Structure):
    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("ino", ctypes.c_uint64),
        ("offset", ctypes.c_int64),
        ("dev", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 7),
    ]


class DropCounters(ctypes.Structure):
    _fields_ = [
        ("stats_full", ctypes.c_uint64),
        ("inflight_full", ctypes.c_uint64),
        ("iocbs_truncated", ctypes.c_uint64),
        ("uring_no_file", ctypes.c_uint64),
        ("read_faults", ctypes.c_uint64),
        ("ringbuf_full", ctypes.c_uint64),
        ("pending_full", ctypes.c_uint64),
        ("unmatched", ctypes.c_uint64),
        ("lat_full", ctypes.c_uint64),
        ("lat_unmatched", ctypes.c_uint64),
    ]

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name, _ in self._fields_}
