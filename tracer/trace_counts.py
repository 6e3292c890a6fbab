"""Vectorised counting of a trace's events: counters per key by numpy bincount
(`count`), sparse counters per (second, id) (`SecondRows`) and dense counters per
second (`SecondSeries`). The counters are model.COUNTER_FIELDS, as `top`'s."""

from __future__ import annotations

from typing import Any

import numpy as np

from .abi import By, Op
from .events import BY_NAMES, OP_NAMES
from .latency import CLASS_OF_OP, CLASSES
from .model import COUNTER_FIELDS, OP_COUNTERS, writeback_field
from .trace_events import Events

_NOPS = len(OP_NAMES)
assert all(OP_NAMES[op] == op.name.lower() for op in OP_COUNTERS)  # a trace's op index is the Op value
# (op, column of its bytes or -1, column of its requests)
_OP_COLUMNS = [
    (int(op), COUNTER_FIELDS.index(nbytes) if nbytes else -1, COUNTER_FIELDS.index(nops) if nops else -1)
    for op, (nbytes, nops) in OP_COUNTERS.items()
]
_ERRORS = COUNTER_FIELDS.index("errors")
_NBY = len(BY_NAMES)
# (cause code, column of its written-back bytes)
_BY_COLUMNS = [(int(by), COUNTER_FIELDS.index(writeback_field(by))) for by in By if by is not By.NONE]
# readahead and direct reads are read from the disk: their bytes count in both (model.Counts.add)
_DISK_READ = COUNTER_FIELDS.index("disk_read_bytes")
_LATENCY_CLASS = np.array([CLASSES.index(CLASS_OF_OP[op]) for op in sorted(CLASS_OF_OP)], np.int64)
assert len(_LATENCY_CLASS) == _NOPS


def latency_class(op: np.ndarray) -> np.ndarray:
    """Each event's latency class, an index into latency.CLASSES: write, sync (any
    of the three sync calls) or read."""
    return _LATENCY_CLASS[op]


def count(key: np.ndarray, size: int, ev: Events) -> np.ndarray:
    """(size, len(COUNTER_FIELDS)) int64 counters of the events by key (0 <= key < size).
    A failed request counts in `errors`, not in bytes or ops. (model.aggregate folds
    the kernel's rows of `top` into the same counters with the same OP_COUNTERS.)"""
    out = np.zeros((size, len(COUNTER_FIELDS)), np.int64)
    if not len(key):
        return out
    ok = ev.ok
    k = key[ok] * _NOPS + ev.op[ok]
    ops = np.bincount(k, minlength=size * _NOPS).reshape(size, _NOPS)
    nbytes = np.rint(np.bincount(k, weights=ev.nbytes[ok], minlength=size * _NOPS)).astype(np.int64)
    nbytes = nbytes.reshape(size, _NOPS)
    for op, bytes_column, ops_column in _OP_COLUMNS:
        if bytes_column >= 0:
            out[:, bytes_column] = nbytes[:, op]
        if ops_column >= 0:
            out[:, ops_column] = ops[:, op]
    out[:, _ERRORS] = np.bincount(key[~ok], minlength=size)
    out[:, _DISK_READ] += nbytes[:, int(Op.READAHEAD)] + nbytes[:, int(Op.DIRECT_READ)]
    wb = ok & (ev.op == int(Op.WRITEBACK))
    if wb.any():
        kb = key[wb] * _NBY + ev.by[wb]
        by_bytes = np.rint(np.bincount(kb, weights=ev.nbytes[wb], minlength=size * _NBY)).astype(np.int64)
        by_bytes = by_bytes.reshape(size, _NBY)
        for by, column in _BY_COLUMNS:
            out[:, column] = by_bytes[:, by]
    return out


def dense_unique(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique values of keys in [0, size) and each key's index among them."""
    if size <= max(4 * len(keys), 1 << 16):
        present = np.flatnonzero(np.bincount(keys, minlength=size))
        lookup = np.zeros(size, np.int64)
        lookup[present] = np.arange(len(present))
        return present, lookup[keys]
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, inverse


class Grow:
    """A numpy array whose first axis grows on demand."""

    def __init__(self, shape: tuple[int, ...], dtype: Any, fill: Any = 0) -> None:
        self.fill = fill
        self.a = np.full((16, *shape), fill, dtype)

    def ensure(self, n: int) -> np.ndarray:
        if n > len(self.a):
            bigger = np.full((max(n, 2 * len(self.a)), *self.a.shape[1:]), self.fill, self.a.dtype)
            bigger[: len(self.a)] = self.a
            self.a = bigger
        return self.a


class SecondRows:
    """Sparse counters per (second, id), kept as sorted chunks and compacted;
    `take_before(sec)` hands over (and forgets) the seconds before `sec`."""

    def __init__(self, ncols: int) -> None:
        self.ncols = ncols
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.rows = 0

    def add(self, sec: np.ndarray, ids: np.ndarray, id_count: int, values_of: Any, ev: Events) -> None:
        """values_of(key, size, ev) -> (size, ncols) sums, like `count`."""
        if not len(sec):
            return
        s0 = int(sec.min())
        span = int(sec.max()) - s0 + 1
        key = (sec - s0) * id_count + ids
        uniq, inverse = dense_unique(key, span * id_count)
        values = values_of(inverse, len(uniq), ev)
        self._chunks.append((uniq // id_count + s0, uniq % id_count, values))
        self.rows += len(uniq)

    def compact(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All rows, one per (second, id), sorted by second then id."""
        if not self._chunks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, self.ncols), np.int64)
        if len(self._chunks) > 1:
            sec = np.concatenate([c[0] for c in self._chunks])
            ids = np.concatenate([c[1] for c in self._chunks])
            values = np.concatenate([c[2] for c in self._chunks])
            width = int(ids.max()) + 1
            s0 = int(sec.min())
            uniq, inverse = np.unique((sec - s0) * width + ids, return_inverse=True)
            summed = np.zeros((len(uniq), self.ncols), np.int64)
            np.add.at(summed, inverse, values)
            self._chunks = [(uniq // width + s0, uniq % width, summed)]
            self.rows = len(uniq)
        return self._chunks[0]

    def take_before(self, sec_limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sec, ids, values = self.compact()
        cut = int(np.searchsorted(sec, sec_limit))
        self._chunks = [(sec[cut:], ids[cut:], values[cut:])] if cut < len(sec) else []
        self.rows = len(sec) - cut
        return sec[:cut], ids[:cut], values[:cut]


class SecondSeries:
    """Dense counters per second (all groups together)."""

    def __init__(self) -> None:
        self.base: int | None = None
        self._a = np.zeros((0, len(COUNTER_FIELDS)), np.int64)

    def add(self, sec: np.ndarray, ev: Events) -> None:
        if not len(sec):
            return
        lo, hi = int(sec.min()), int(sec.max())
        if self.base is None:
            self.base = lo
        if lo < self.base:
            self._a = np.concatenate([np.zeros((self.base - lo, len(COUNTER_FIELDS)), np.int64), self._a])
            self.base = lo
        need = hi - self.base + 1
        if need > len(self._a):
            grown = np.zeros((max(need, 2 * len(self._a)), len(COUNTER_FIELDS)), np.int64)
            grown[: len(self._a)] = self._a
            self._a = grown
        rel = sec - lo
        self._a[lo - self.base : hi - self.base + 1] += count(rel, hi - lo + 1, ev)

    def array(self) -> tuple[int, np.ndarray]:
        """(first second, counters per second from there), trailing empty seconds dropped."""
        if self.base is None:
            return 0, self._a[:0]
        nonzero = np.flatnonzero(self._a.any(axis=1))
        end = int(nonzero[-1]) + 1 if len(nonzero) else 0
        return self.base, self._a[:end]
