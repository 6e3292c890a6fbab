"""The kernel ABI of the BPF programs: the constants, enums and structs of probes/mysqlio.h.

Generated from the header by tools/gen_abi.py (make abi): do not edit. mysqlio.abi_check
compares the structs with the BPF object's BTF when it is loaded."""

from __future__ import annotations

import ctypes
import enum
from typing import Any

MAX_FILE_OPS = 16384
STATS_CELLS = 16384
STATS_CELL_PROBES = 8
MAX_NAMES = 16384
MAX_THREADS = 16384
INFLIGHT_BITS = 14
INFLIGHT_SLOTS = 16384
COMM_LEN = 16
MAX_IOCBS = 64
MAX_IOVECS = 16
MAX_PENDING = 65536
MAX_AIO_EVENTS = 256
MAX_LAT_ROWS = 4096
PATH_DEPTH = 8
NAME_LEN = 48
MAX_SERVER_FILES = 16384
MAX_FLUSHERS = 1024
DEV_SLOT_BITS = 6
DEV_SLOTS = 64
DEV_PROBES = 4
DEV_OWNERS = 5
MAX_VMA_DEPTH = 48
DEFAULT_PAGE_SHIFT = 12
MAX_REGION_FILES = 4
MAX_REGION_RANGES = 8
MAX_REGION_SLOTS = 32
MAX_CONN_THREADS = 16384
LAT_SUB_BITS = 3
LAT_SUB = 8
LAT_MIN_EXP = 8
LAT_SLOTS = 256
LATENCY_UNKNOWN = 0xFFFFFFFFFFFFFFFF
SLOT_BYTES = 64


class Op(enum.IntEnum):
    WRITE = 0
    READ = 1
    FSYNC = 2
    FDATASYNC = 3
    SYNC_FILE_RANGE = 4
    MSYNC = 5
    DIRTY = 6
    WRITEBACK = 7
    DISK_READ = 8
    READAHEAD = 9
    DIRECT_READ = 10


class Api(enum.IntEnum):
    SYSCALL = 0
    LIBAIO = 1
    IO_URING = 2
    KERNEL = 3


class By(enum.IntEnum):
    NONE = 0
    FSYNC = 1
    FDATASYNC = 2
    SYNC_FILE_RANGE = 3
    MSYNC = 4
    WRITE = 5
    SERVER_OTHER = 6
    FLUSHER_PERIODIC = 7
    FLUSHER_BACKGROUND = 8
    MEMORY = 9
    SYNC = 10
    OTHER = 11


class Owner(enum.IntEnum):
    DEVICE = 0
    SERVER_FILE = 1
    SERVER_DIRECT = 2
    FS = 3
    OTHER = 4


class Dir(enum.IntEnum):
    READ = 0
    WRITE = 1


class Region(enum.IntEnum):
    NONE = 0
    SYSTEM = 1
    DOUBLEWRITE = 2
    CHANGE_BUFFER = 3
    TRX_SYS = 4
    DICTIONARY = 5


class Cell(enum.IntEnum):
    FREE = 0
    BUSY = 1
    READY = 2


class Struct(ctypes.Structure):
    """A struct of the header, with its fields by name."""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name, *_ in self._fields_}


class RegionTable(Struct):
    """struct region_table"""

    _fields_ = [
        ("ino", ctypes.c_uint64 * MAX_REGION_FILES),
        ("dev", ctypes.c_uint32 * MAX_REGION_FILES),
        ("nranges", ctypes.c_uint32 * MAX_REGION_FILES),
        ("start", ctypes.c_uint64 * MAX_REGION_SLOTS),
        ("end", ctypes.c_uint64 * MAX_REGION_SLOTS),
        ("region", ctypes.c_uint8 * MAX_REGION_SLOTS),
    ]


class Control(Struct):
    """struct mio_control"""

    _fields_ = [
        ("timed", ctypes.c_uint32),
        ("cells_half", ctypes.c_uint32),
        ("cells_mask", ctypes.c_uint32),
        ("region_dev", ctypes.c_uint32 * MAX_REGION_FILES),
        ("tgid", ctypes.c_uint32),
        ("region_ino", ctypes.c_uint64 * MAX_REGION_FILES),
    ]


class ConnState(Struct):
    """struct conn_state"""

    _fields_ = [
        ("conn", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("first_ns", ctypes.c_uint64),
    ]


class FileOpKey(Struct):
    """struct file_op_key"""

    _fields_ = [
        ("ino", ctypes.c_uint64),
        ("dev", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("api", ctypes.c_uint8),
        ("by", ctypes.c_uint8),
        ("region", ctypes.c_uint8),
        ("conn", ctypes.c_uint32),
    ]


class StatsCell(Struct):
    """struct stats_cell"""

    _fields_ = [
        ("ino", ctypes.c_uint64),
        ("dev", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("api", ctypes.c_uint8),
        ("by", ctypes.c_uint8),
        ("region", ctypes.c_uint8),
        ("conn", ctypes.c_uint32),
        ("bytes", ctypes.c_uint64),
        ("ops", ctypes.c_uint64),
        ("errors", ctypes.c_uint64),
        ("state", ctypes.c_uint64),
        ("pad", ctypes.c_uint64),
    ]


class ThreadName(Struct):
    """struct thread_name"""

    _fields_ = [
        ("comm", ctypes.c_char * COMM_LEN),
    ]


class FileOpStats(Struct):
    """struct file_op_stats"""

    _fields_ = [
        ("bytes", ctypes.c_uint64),
        ("ops", ctypes.c_uint64),
        ("errors", ctypes.c_uint64),
    ]


class FileId(Struct):
    """struct file_id"""

    _fields_ = [
        ("ino", ctypes.c_uint64),
        ("dev", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
    ]


class DevSlot(Struct):
    """struct dev_slot"""

    _fields_ = [
        ("dev", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64 * DEV_OWNERS * 2),
        ("count", ctypes.c_uint64 * DEV_OWNERS * 2),
    ]


class FileName(Struct):
    """struct file_name"""

    _fields_ = [
        ("comps", ctypes.c_char * NAME_LEN * PATH_DEPTH),
        ("depth", ctypes.c_uint32),
        ("complete", ctypes.c_uint32),
        ("nlink", ctypes.c_uint32),
        ("mode", ctypes.c_uint32),
    ]


class LatKey(Struct):
    """struct lat_key"""

    _fields_ = [
        ("ino", ctypes.c_uint64),
        ("dev", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("api", ctypes.c_uint8),
        ("pad", ctypes.c_uint16),
    ]


class LatHist(Struct):
    """struct lat_hist"""

    _fields_ = [
        ("sum_ns", ctypes.c_uint64),
        ("max_ns", ctypes.c_uint64),
        ("slots", ctypes.c_uint32 * LAT_SLOTS),
    ]


class Event(Struct):
    """struct mio_event"""

    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("latency_ns", ctypes.c_uint64),
        ("ino", ctypes.c_uint64),
        ("offset", ctypes.c_int64),
        ("result", ctypes.c_int64),
        ("dev", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("api", ctypes.c_uint8),
        ("by", ctypes.c_uint8),
        ("pad", ctypes.c_uint8),
        ("conn", ctypes.c_uint32),
    ]


class SlotPos(Struct):
    """struct mio_slot_pos"""

    _fields_ = [
        ("pos", ctypes.c_uint64),
        ("pad", ctypes.c_uint64 * 7),
    ]


class PendingIo(Struct):
    """struct pending_io"""

    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("ino", ctypes.c_uint64),
        ("offset", ctypes.c_int64),
        ("dev", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("op", ctypes.c_uint8),
        ("by", ctypes.c_uint8),
        ("region", ctypes.c_uint8),
        ("direct", ctypes.c_uint8),
        ("conn", ctypes.c_uint32),
    ]


class DropCounters(Struct):
    """struct drop_counters"""

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
        ("dev_full", ctypes.c_uint64),
        ("msync_no_file", ctypes.c_uint64),
        ("events_contended", ctypes.c_uint64),
        ("conn_full", ctypes.c_uint64),
    ]


# the structs by their C name (for the BTF check)
STRUCTS: dict[str, type[Struct]] = {
    "region_table": RegionTable,
    "mio_control": Control,
    "conn_state": ConnState,
    "file_op_key": FileOpKey,
    "stats_cell": StatsCell,
    "thread_name": ThreadName,
    "file_op_stats": FileOpStats,
    "file_id": FileId,
    "dev_slot": DevSlot,
    "file_name": FileName,
    "lat_key": LatKey,
    "lat_hist": LatHist,
    "mio_event": Event,
    "mio_slot_pos": SlotPos,
    "pending_io": PendingIo,
    "drop_counters": DropCounters,
}
