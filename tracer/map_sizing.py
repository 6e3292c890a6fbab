"""Size the probes' per-file kernel tables from the traced server before load.

probes/mysqlio.h fixes them near 16k entries; a server with tens of thousands of files
open writes to more distinct files in one interval than that (issue 60). Before load,
each table gets room for the files the server may hold (its open-files limit and the fds
it holds now, from /proc) and the threads it runs, within a stated memory budget: when the
budget cannot buy it all, the costliest table is halved first, and never below the size
compiled into the object. What still does not fit is counted as lost (stats_full) and
drained early, mid-interval, by mysqlio.early_drain.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from . import abi
from .errors import BpfError

BUDGET_ENV = "MYSQLIO_MAP_BUDGET_MIB"
BUDGET_MIB = 128  # the default: the growth above the compiled sizes
# (file, thread, op, api) rows per file the stats maps make room for: a file's writes
# and syncs by a few threads in one interval
ROWS_PER_FILE = 4
# the open-files limit trusted as a count of files (a container's default is 2^20)
FILES_MOST = 1 << 20
# a preallocated hash element's fixed cost: struct htab_elem (48 bytes on 64-bit, an LRU
# node included) and its share of the buckets (16 bytes each, one per entry)
ENTRY_OVERHEAD = 64


@dataclass(frozen=True)
class Table:
    """One kernel table: its maps (resized alike), its entries, and bytes per entry."""

    maps: tuple[str, ...]
    entries: int
    entry_bytes: int
    least: int  # the size compiled into the object

    @property
    def bytes(self) -> int:
        return len(self.maps) * self.entries * self.entry_bytes


@dataclass(frozen=True)
class MapSizes:
    """The chosen sizes: what the server needed, the budget, the tables."""

    files: int  # files the server may hold (open-files limit or fds held)
    threads: int
    held: int  # fds the server holds at start: what one burst can touch without warning
    stats_wanted: int  # stats rows the files call for, before the budget
    budget_bytes: int
    tables: dict[str, Table]

    def extra_bytes(self) -> int:
        """Memory above what the compiled sizes take."""
        return sum((t.entries - t.least) * t.entry_bytes * len(t.maps) for t in self.tables.values())

    def stats_rows(self) -> int:
        return self.tables["stats"].entries

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "threads": self.threads,
            "held": self.held,
            "budget_mib": self.budget_bytes >> 20,
            "stats_wanted": self.stats_wanted,
            "extra_mib": round(self.extra_bytes() / (1 << 20), 1),
            "entries": {name: t.entries for name, t in self.tables.items()},
        }


def _entry(key: Any, value: Any) -> int:
    return ENTRY_OVERHEAD + _round8(ctypes.sizeof(key)) + _round8(ctypes.sizeof(value))


def _round8(n: int) -> int:
    return (n + 7) & ~7


def _pow2_at_least(n: int, least: int) -> int:
    return max(least, 1 << max(0, n - 1).bit_length())


def budget_bytes() -> int:
    """The memory budget for the tables' growth (MYSQLIO_MAP_BUDGET_MIB, default BUDGET_MIB)."""
    text = os.environ.get(BUDGET_ENV, str(BUDGET_MIB))
    if not text.isdigit() or not 0 <= int(text) <= 1 << 16:
        raise BpfError(f"{BUDGET_ENV}={text}: give a whole number of MiB from 0 to 65536")
    return int(text) << 20


def server_files(pid: int, held: int | None = None) -> int:
    """The files the process may hold: its open-files soft limit (capped at FILES_MOST),
    or the fds it holds now if more (`held`: already counted, held_files); 0 when /proc
    does not say."""
    limit = 0
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    soft = line.split()[3]
                    limit = FILES_MOST if soft == "unlimited" else min(int(soft), FILES_MOST)
        if held is None:
            held = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError, IndexError):
        return limit
    return max(limit, held)


def held_files(pid: int) -> int:
    """The fds the process holds now (0 when /proc does not say)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def server_threads(pid: int) -> int:
    """The threads the process runs now (0 when /proc does not say)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def plan(files: int, threads: int, budget: int, held: int | None = None) -> MapSizes:
    """Sizes for `files` files and `threads` threads: each table a power of two, at least
    its compiled size; over budget, the costliest table above its compiled size halves."""
    tables = {
        "stats": Table(
            ("stats_a", "stats_b"),
            _pow2_at_least(ROWS_PER_FILE * files, abi.MAX_FILE_OPS),
            _entry(abi.FileOpKey, abi.FileOpStats),
            abi.MAX_FILE_OPS,
        ),
        "names": Table(
            ("names",), _pow2_at_least(files, abi.MAX_NAMES), _entry(abi.FileId, abi.FileName), abi.MAX_NAMES
        ),
        "server_files": Table(
            ("server_files",),
            _pow2_at_least(files, abi.MAX_SERVER_FILES),
            _entry(abi.FileId, ctypes.c_uint8),
            abi.MAX_SERVER_FILES,
        ),
        # a thread's name and connection: threads come and go, twice those running now
        "threads": Table(
            ("threads",),
            _pow2_at_least(2 * threads, abi.MAX_THREADS),
            _entry(ctypes.c_uint32, abi.ThreadName),
            abi.MAX_THREADS,
        ),
        "conns": Table(
            ("conns",),
            _pow2_at_least(2 * threads, abi.MAX_CONN_THREADS),
            _entry(ctypes.c_uint32, abi.ConnState),
            abi.MAX_CONN_THREADS,
        ),
    }
    wanted = tables["stats"].entries
    held = files if held is None else held
    sizes = MapSizes(files, threads, held, wanted, budget, tables)
    while sizes.extra_bytes() > budget:
        name = max(
            (n for n, t in tables.items() if t.entries > t.least),
            key=lambda n: (tables[n].entries - tables[n].least) * tables[n].entry_bytes * len(tables[n].maps),
        )
        t = tables[name]
        tables[name] = Table(t.maps, t.entries // 2, t.entry_bytes, t.least)
        sizes = MapSizes(files, threads, held, wanted, budget, tables)
    return sizes


def apply(obj: Any, pid: int) -> MapSizes:
    """Before load: size the object's (a libbpf.BpfObject) tables for process pid."""
    held = held_files(pid)  # /proc/PID/fd listed once: 20,000 entries take a while
    sizes = plan(server_files(pid, held), server_threads(pid), budget_bytes(), held=held)
    for table in sizes.tables.values():
        for name in table.maps:
            obj.set_max_entries(name, table.entries)
    return sizes
