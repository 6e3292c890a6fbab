"""The stats table (probes/mysqlio.bpf.c, struct stats_cell): read and emptied through mmap.

The cas programs keep their rows in an open-addressed BPF array of one cache line per
row (a hash map row costs two to three cold lines per request; issue 19). The array has
two halves, and the programs write the one the control line names (struct mio_control);
each drain flips it, and the full half, which no program writes any more, is read here
from its shared mapping and its used cells are zeroed in place, without a syscall per
row.
"""

from __future__ import annotations

import mmap

import numpy as np

from . import abi
from .libbpf import BpfMap

CELL = np.dtype(abi.StatsCell)
# a row's key, the fields of struct file_op_key
KEY_FIELDS = ("ino", "dev", "tid", "op", "api", "by", "region", "conn")
CELL_ROWS_NONE = np.zeros(0, dtype=CELL)  # a kernel without the table
_KEY_AT = tuple(CELL.names.index(f) for f in KEY_FIELDS)
_BYTES_AT, _OPS_AT, _ERRORS_AT = (CELL.names.index(f) for f in ("bytes", "ops", "errors"))


# the cells of a half in use at first: 8 KiB, two pages (see StatsCells.fit)
CELLS_FIRST = 128
# cells per row once grown: a quarter of the cells used, so a row's probes seldom go far
CELLS_PER_ROW = 4


class StatsCells:
    """The cells of the BPF_F_MMAPABLE array of struct stats_cell: two halves of
    STATS_CELLS cells, of which the programs use the first `in_use` (the control
    line's cells_mask; at most `most`)."""

    def __init__(self, table: BpfMap, most: int = abi.STATS_CELLS) -> None:
        if table.max_entries != 2 * abi.STATS_CELLS:
            raise AssertionError(f"the stats table has {table.max_entries} cells, not 2 x {abi.STATS_CELLS}")
        size = table.max_entries * CELL.itemsize
        self._map = mmap.mmap(table.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.cells = np.frombuffer(self._map, dtype=CELL)
        self.most = most
        self.in_use = min(CELLS_FIRST, most)

    def fit(self, rows: int) -> bool:
        """Grow the cells in use for an interval of `rows` rows (True: grown; the
        control line's cells_mask is then to be written). The table is vmalloc'd
        memory, 4 KiB pages, and a row's cell is one more page for the TLB at each
        request: the fewer cells, the fewer pages (issue 19). It never shrinks, so
        the cells a program may still write are always within `in_use`."""
        want = CELLS_PER_ROW * rows
        if want <= self.in_use or self.in_use >= self.most:
            return False
        self.in_use = min(self.most, 1 << (want - 1).bit_length())
        return True

    def take(self, half: int) -> np.ndarray:
        """The rows held in `half` (a copy), their cells freed. The half must be
        quiescent: out of the control line since the kernel's RCU grace period."""
        first = half * abi.STATS_CELLS
        cells = self.cells[first : first + self.in_use]
        used = cells["state"] != abi.Cell.FREE
        rows = cells[used & (cells["state"] == abi.Cell.READY)]
        cells[used] = np.zeros(1, dtype=CELL)
        return rows

    def close(self) -> None:
        del self.cells  # the mapping cannot close while a view holds it
        self._map.close()


# a drained row: its key and counts, the cells' types (struct file_op_key, file_op_stats)
ROW = np.dtype([(f, CELL[f]) for f in (*KEY_FIELDS, "bytes", "ops", "errors")])
_KEY = np.dtype([(f, CELL[f]) for f in KEY_FIELDS])


def table(rows: np.ndarray, more: list[tuple[abi.FileOpKey, abi.FileOpStats]]) -> np.ndarray:
    """merged's rows as a ROW array (a key once, its rows added up, in the order of each
    key's first row): what top folds with numpy (mysqlio.fold)."""
    out = np.zeros(len(rows) + len(more), ROW)
    for f in ROW.names:
        out[f][: len(rows)] = rows[f]
    if more:
        out[len(rows) :] = [(*(getattr(k, f) for f in KEY_FIELDS), v.bytes, v.ops, v.errors) for k, v in more]
    keys = np.empty(len(out), _KEY)
    for f in KEY_FIELDS:
        keys[f] = out[f]
    _, first, inverse = np.unique(keys.view((np.void, _KEY.itemsize)), return_index=True, return_inverse=True)
    if len(first) == len(out):
        return out
    # two CPUs that make a row at once may each claim a cell for it; a row whose cells are
    # taken goes to the overflow hash map (`more`)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    merged_rows = out[first[order]]
    for f in ("bytes", "ops", "errors"):
        merged_rows[f] = 0
        np.add.at(merged_rows[f], rank[inverse.reshape(-1)], out[f])
    return merged_rows


def merged(rows: np.ndarray, more: list[tuple[abi.FileOpKey, abi.FileOpStats]]) -> dict[tuple[int, ...], list[int]]:
    """Counts (bytes, ops, errors) by key, adding up the rows of one key: two CPUs
    that make a row at once may each claim a cell for it, and a row whose cells are
    taken goes to the overflow hash map (`more`)."""
    out: dict[tuple[int, ...], list[int]] = {}
    for row in rows.tolist():  # tuples in CELL's field order
        _add(out, tuple(row[i] for i in _KEY_AT), row[_BYTES_AT], row[_OPS_AT], row[_ERRORS_AT])
    for key, value in more:
        _add(out, tuple(getattr(key, f) for f in KEY_FIELDS), value.bytes, value.ops, value.errors)
    return out


def _add(out: dict[tuple[int, ...], list[int]], key: tuple[int, ...], nbytes: int, ops: int, errors: int) -> None:
    counts = out.setdefault(key, [0, 0, 0])
    counts[0] += nbytes
    counts[1] += ops
    counts[2] += errors
