"""Offline report of a recorded trace: totals per file / kind / table / thread,
latency percentiles, the busiest seconds, and an optional per-second table.

Everything is computed batch by batch with vectorised group-bys (numpy
bincount over dictionary indices), never per event in Python. Memory is
bounded by the number of groups and of seconds, not by the trace's length:
latencies go into a fixed log-linear histogram per group, and per-(second,
group) counters are kept only where they are the output (`--per-second`,
plots) or for the last few seconds (the top file of each second).

`build_report()` produces a `Report` (plain data); `report_json()` and
`render_report()` / `render_per_second()` turn it into JSON or rich renderables.
"""

from __future__ import annotations

import math
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from .bursts import SeriesBuilder, Train, detect, render_trains, trains_json
from .errors import UserError
from .events import API_NAMES, LATENCY_UNKNOWN, OP_NAMES
from .latency import ACCURACY_NOTE, CLASSES, NBUCKETS, SUB, bucket_of, percentile
from .model import COUNTER_FIELDS
from .render import shorten
from .trace import TraceMeta, TraceReader
from .units import human_bytes, printable

GROUPS = ("file", "kind", "table", "thread")
GROUP_LIST_KEYS = {"file": "files", "kind": "kinds", "table": "tables", "thread": "threads"}

# counter columns of every aggregate, in this order (the same as top's)
COUNTERS = COUNTER_FIELDS
_WRITE, _READ = OP_NAMES.index("write"), OP_NAMES.index("read")
_MAX_TRACE_S = 366 * 86400.0  # a year of recording
_NOPS = len(OP_NAMES)
_OP_COLUMN = {_WRITE: 1, _READ: 3, 2: 4, 3: 5, 4: 6}  # op index -> COUNTERS column of its ops
assert OP_NAMES[2:] == ("fsync", "fdatasync", "sync_file_range")

LAT_CLASSES = CLASSES
LATENCY_NOTE = ACCURACY_NOTE


# ----------------------------------------------------------------- decoding


class _Strings:
    """A global registry of strings (paths, kinds, ...) -> stable ids, fed by the
    dictionaries of successive batches. A trace's writer only appends to its
    dictionaries, so usually only the new tail is converted; a replaced
    dictionary is remapped whole."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.ids: dict[str, int] = {}
        self._dict: pa.Array | None = None
        self._lookup = np.zeros(0, np.int64)

    def lookup(self, dictionary: pa.Array) -> np.ndarray:
        """batch dictionary index -> global id."""
        old = self._dict
        if old is not None and len(dictionary) == len(old) and (dictionary is old or dictionary.equals(old)):
            return self._lookup
        start = 0
        if old is not None and len(dictionary) > len(old) and dictionary.slice(0, len(old)).equals(old):
            start = len(old)
        new = [self._id(s) for s in dictionary.slice(start).to_pylist()]
        base = self._lookup[:start] if start else np.zeros(0, np.int64)
        self._lookup = np.concatenate([base, np.asarray(new, np.int64)])
        self._dict = dictionary
        return self._lookup

    def _id(self, s: str | None) -> int:
        s = "" if s is None else s
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.values)
            self.values.append(s)
        return i


@dataclass(frozen=True)
class Filters:
    kinds: frozenset[str] = frozenset()
    match: re.Pattern[str] | None = None
    t_from: float | None = None
    t_to: float | None = None

    def active(self) -> bool:
        return bool(self.kinds or self.match or self.t_from is not None or self.t_to is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "kinds": sorted(self.kinds),
            "match": self.match.pattern if self.match else None,
            "from_s": self.t_from,
            "to_s": self.t_to,
        }


@dataclass
class Events:
    """One batch's events (after filtering), as numpy arrays with global string ids."""

    t: np.ndarray  # float64 seconds since start
    op: np.ndarray  # int64 index into OP_NAMES
    api: np.ndarray  # int64 index into API_NAMES
    nbytes: np.ndarray  # int64
    ok: np.ndarray  # bool: errno == 0
    latency: np.ndarray  # uint64 ns
    path: np.ndarray  # int64 ids into Decoder.paths
    kind: np.ndarray  # ids into Decoder.kinds
    table: np.ndarray  # ids into Decoder.tables, -1 = none
    tid: np.ndarray  # uint32
    thread: np.ndarray  # ids into Decoder.threads
    deleted: np.ndarray  # bool
    dev: np.ndarray  # uint64 st_dev
    ino: np.ndarray  # uint64

    def __len__(self) -> int:
        return len(self.t)

    @property
    def sec(self) -> np.ndarray:
        return np.floor(self.t).astype(np.int64)


def _np(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _fixed_lookup(dictionary: pa.Array, names: tuple[str, ...]) -> np.ndarray:
    return np.asarray([names.index(s) if s in names else -1 for s in dictionary.to_pylist()], np.int64)


class Decoder:
    """Turns record batches into `Events`, mapping dictionary indices to global ids
    and applying the filters (time range, kinds, path regex)."""

    def __init__(self, filters: Filters | None = None) -> None:
        self.filters = filters or Filters()
        self.paths = _Strings()
        self.kinds = _Strings()
        self.tables = _Strings()
        self.threads = _Strings()
        self._path_keep = np.zeros(0, np.bool_)  # regex result per global path id
        self.events_total = 0  # before filtering
        self.max_t = -math.inf  # over all events, before filtering

    def decode(self, batch: pa.RecordBatch) -> Events:
        n = batch.num_rows
        self.events_total += n
        col = batch.column
        t = _np(col("t"))
        # a damaged file can still decode; times outside any real trace mean damage
        if n and not (np.isfinite(t).all() and t.min() > -1.0 and t.max() < _MAX_TRACE_S):
            raise UserError("the trace holds impossible event times: the file is damaged")
        if n:
            self.max_t = max(self.max_t, float(t.max()))
        path_d = col("path")
        kind_d = col("kind")
        path = self.paths.lookup(path_d.dictionary)[_np(path_d.indices)]
        kind = self.kinds.lookup(kind_d.dictionary)[_np(kind_d.indices)]
        keep = self._keep(t, path, kind)
        op_d, api_d = col("op"), col("api")
        op = _fixed_lookup(op_d.dictionary, OP_NAMES)[_np(op_d.indices)]
        api = _fixed_lookup(api_d.dictionary, API_NAMES)[_np(api_d.indices)]
        bad = (op < 0) | (api < 0)
        if bad.any():
            keep = ~bad if keep is None else keep & ~bad
        table_d = col("table")
        table_idx = _np(pc.fill_null(table_d.indices, -1)).astype(np.int64)
        tables = self.tables.lookup(table_d.dictionary)
        table = np.where(table_idx >= 0, tables[np.maximum(table_idx, 0)] if len(tables) else -1, -1)
        thread_d = col("thread")
        ev = Events(
            t=t,
            op=op,
            api=api,
            nbytes=_np(col("bytes")),
            ok=_np(col("errno")) == 0,
            latency=_np(col("latency_ns")),
            path=path,
            kind=kind,
            table=table,
            tid=_np(col("tid")),
            thread=self.threads.lookup(thread_d.dictionary)[_np(thread_d.indices)],
            deleted=_np(col("deleted")),
            dev=_np(col("dev")),
            ino=_np(col("ino")),
        )
        if keep is not None and not keep.all():
            ev = Events(**{name: value[keep] for name, value in vars(ev).items()})
        return ev

    def _keep(self, t: np.ndarray, path: np.ndarray, kind: np.ndarray) -> np.ndarray | None:
        f = self.filters
        keep: np.ndarray | None = None

        def both(mask: np.ndarray) -> None:
            nonlocal keep
            keep = mask if keep is None else keep & mask

        if f.t_from is not None:
            both(t >= f.t_from)
        if f.t_to is not None:
            both(t < f.t_to)
        if f.kinds:
            kind_ok = np.asarray([k in f.kinds for k in self.kinds.values], np.bool_)
            both(kind_ok[kind])
        if f.match is not None:
            known = len(self._path_keep)
            if known < len(self.paths.values):
                more = [bool(f.match.search(p)) for p in self.paths.values[known:]]
                self._path_keep = np.concatenate([self._path_keep, np.asarray(more, np.bool_)])
            both(self._path_keep[path])
        return keep


# ----------------------------------------------------------------- counting


def count(key: np.ndarray, size: int, ev: Events) -> np.ndarray:
    """(size, len(COUNTERS)) int64 counters of the events by key (0 <= key < size).
    A failed request counts in `errors`, not in bytes or ops."""
    out = np.zeros((size, len(COUNTERS)), np.int64)
    if not len(key):
        return out
    ok = ev.ok
    k = key[ok] * _NOPS + ev.op[ok]
    ops = np.bincount(k, minlength=size * _NOPS).reshape(size, _NOPS)
    nbytes = np.rint(np.bincount(k, weights=ev.nbytes[ok], minlength=size * _NOPS)).astype(np.int64)
    nbytes = nbytes.reshape(size, _NOPS)
    out[:, 0] = nbytes[:, _WRITE]
    out[:, 2] = nbytes[:, _READ]
    for op, column in _OP_COLUMN.items():
        out[:, column] = ops[:, op]
    out[:, 7] = np.bincount(key[~ok], minlength=size)
    return out


def _dense_unique(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique values of keys in [0, size) and each key's index among them."""
    if size <= max(4 * len(keys), 1 << 16):
        present = np.flatnonzero(np.bincount(keys, minlength=size))
        lookup = np.zeros(size, np.int64)
        lookup[present] = np.arange(len(present))
        return present, lookup[keys]
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, inverse


class _Grow:
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


class GroupAgg:
    """Counters, API use and latency histograms per group id."""

    def __init__(self) -> None:
        self.n = 0
        self._counts = _Grow((len(COUNTERS),), np.int64)
        self._apis = _Grow((len(API_NAMES),), np.bool_, False)
        self._hist = _Grow((len(LAT_CLASSES), NBUCKETS), np.int64)
        self._max = _Grow((len(LAT_CLASSES),), np.uint64)

    def add(self, gid: np.ndarray, size: int, ev: Events) -> None:
        self.n = max(self.n, size)
        counts = self._counts.ensure(size)
        counts[:size] += count(gid, size, ev)
        ok = ev.ok
        g_ok = gid[ok]
        used = np.bincount(g_ok * len(API_NAMES) + ev.api[ok], minlength=size * len(API_NAMES))
        self._apis.ensure(size)[:size] |= used.reshape(size, len(API_NAMES)) > 0
        timed = ok & (ev.latency != LATENCY_UNKNOWN)
        op = ev.op[timed]
        cls = np.where(op == _WRITE, 0, np.where(op == _READ, 2, 1))
        lat = ev.latency[timed]
        flat = gid[timed] * len(LAT_CLASSES) + cls
        hist = self._hist.ensure(size).reshape(-1)
        hkey = flat * NBUCKETS + bucket_of(lat)
        nbins = size * len(LAT_CLASSES) * NBUCKETS
        if nbins <= 4 * len(hkey) + (1 << 16):
            hist[:nbins] += np.bincount(hkey, minlength=nbins)
        else:
            uniq, cnt = np.unique(hkey, return_counts=True)
            hist[uniq] += cnt
        np.maximum.at(self._max.ensure(size).reshape(-1), flat, lat)

    def counts(self) -> np.ndarray:
        return self._counts.ensure(self.n)[: self.n]

    def stats(self, g: int) -> Stats:
        hist = self._hist.a[g]
        mx = self._max.a[g]
        return Stats(
            counters=[int(v) for v in self._counts.a[g]],
            apis=[API_NAMES[i] for i in np.flatnonzero(self._apis.a[g])],
            latency={
                cls: _latency(hist[i], int(mx[i]))
                for i, cls in enumerate(LAT_CLASSES)
                if cls != "read" or hist[i].any()
            },
        )

    def total(self) -> Stats:
        n = self.n
        hist = self._hist.ensure(n)[:n].sum(axis=0)
        mx = self._max.ensure(n)[:n].max(axis=0) if n else np.zeros(len(LAT_CLASSES), np.uint64)
        return Stats(
            counters=[int(v) for v in self.counts().sum(axis=0)],
            apis=[API_NAMES[i] for i in np.flatnonzero(self._apis.ensure(n)[:n].any(axis=0))],
            latency={cls: _latency(hist[i], int(mx[i])) for i, cls in enumerate(LAT_CLASSES)},
        )


def _latency(hist: np.ndarray, maximum: int) -> dict[str, int] | None:
    if not hist.any():
        return None
    return {"p50": percentile(hist, 50, maximum), "p99": percentile(hist, 99, maximum), "max": maximum}


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
        uniq, inverse = _dense_unique(key, span * id_count)
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


def _write_bytes_of(key: np.ndarray, size: int, ev: Events) -> np.ndarray:
    w = ev.ok & (ev.op == _WRITE)
    return np.rint(np.bincount(key[w], weights=ev.nbytes[w], minlength=size)).astype(np.int64).reshape(size, 1)


class SecondSeries:
    """Dense counters per second (all groups together)."""

    def __init__(self) -> None:
        self.base: int | None = None
        self._a = np.zeros((0, len(COUNTERS)), np.int64)

    def add(self, sec: np.ndarray, ev: Events) -> None:
        if not len(sec):
            return
        lo, hi = int(sec.min()), int(sec.max())
        if self.base is None:
            self.base = lo
        if lo < self.base:
            self._a = np.concatenate([np.zeros((self.base - lo, len(COUNTERS)), np.int64), self._a])
            self.base = lo
        need = hi - self.base + 1
        if need > len(self._a):
            grown = np.zeros((max(need, 2 * len(self._a)), len(COUNTERS)), np.int64)
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


# ----------------------------------------------------------------- the report


@dataclass
class Stats:
    counters: list[int]  # in COUNTERS order
    apis: list[str] = field(default_factory=list)
    latency: dict[str, dict[str, int] | None] = field(default_factory=dict)

    def __getattr__(self, name: str) -> int:
        try:
            return self.counters[COUNTERS.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    @property
    def sync_ops(self) -> int:
        return self.counters[4] + self.counters[5] + self.counters[6]

    def counters_json(self) -> dict[str, Any]:
        c = dict(zip(COUNTERS, self.counters, strict=True))
        out: dict[str, Any] = {k: c[k] for k in ("write_bytes", "write_ops", "read_bytes", "read_ops")}
        out["sync_ops"] = self.sync_ops
        out.update({k: c[k] for k in COUNTERS[4:]})
        return out

    def to_json(self) -> dict[str, Any]:
        out = self.counters_json()
        out["apis"] = self.apis
        for cls in LAT_CLASSES:
            if cls in self.latency:
                out[f"{cls}_latency_ns"] = self.latency[cls]
        return out


@dataclass
class Row:
    """One group of the report: a file, kind, table or thread."""

    label: str  # path, kind, table (or kind when not a table) or "name [tid]"
    kind: str
    stats: Stats
    table: str | None = None
    deleted: bool = False
    dev: int | None = None
    ino: int | None = None
    tid: int | None = None
    thread: str | None = None

    def to_json(self, group: str) -> dict[str, Any]:
        if group == "file":
            head: dict[str, Any] = {
                "path": self.label,
                "kind": self.kind,
                "table": self.table,
                "deleted": self.deleted,
                "dev": None if self.dev is None else f"{_major(self.dev)}:{_minor(self.dev)}",
                "ino": self.ino,
            }
        elif group == "kind":
            head = {"kind": self.label}
        elif group == "thread":
            head = {"tid": self.tid, "name": self.thread}
        else:
            head = {"name": self.label, "kind": self.kind, "table": self.table}
        return {**head, **self.stats.to_json()}


def _major(dev: int) -> int:
    return ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFF)


def _minor(dev: int) -> int:
    return (dev & 0xFF) | ((dev >> 12) & ~0xFF)


@dataclass
class BusySecond:
    t: int
    stats: Stats
    top_path: str | None
    top_kind: str | None
    top_bytes: int


@dataclass
class Report:
    trace: str
    meta: TraceMeta
    group: str
    filters: Filters
    events_total: int  # in the trace (what was read of it)
    events: int  # after the filters
    duration_s: float
    lost_events: int
    truncated: bool
    complete: bool
    rows: list[Row]
    kinds: list[Row]
    total: Stats
    busiest: list[BusySecond]
    per_second: list[tuple[int, list[Row]]] | None = None
    bursts: list[Train] | None = None  # periodic bursts (mysqlio.bursts), None: not looked for
    gaps: list[dict[str, Any]] = field(default_factory=list)  # server restarts (record --follow)
    server_status: list[dict[str, Any]] = field(default_factory=list)  # record --mysql samples


def _busiest_key(r: Row) -> tuple[int, int, int, str]:
    s = r.stats
    return (-s.write_bytes, -s.read_bytes, -s.sync_ops, r.label)


class _GroupKeys:
    """Group ids of a batch's events for one grouping, and each group's label and attributes."""

    def __init__(self, group: str, dec: Decoder) -> None:
        self.group = group
        self.dec = dec
        self.ids: dict[Any, int] = {}
        self.keys: list[Any] = []
        # attributes of the last event seen in each group
        self._attr = {name: _Grow((), np.int64, -1) for name in ("path", "kind", "table", "deleted", "dev", "ino")}
        self._attr["tid"] = _Grow((), np.int64, -1)
        self._attr["thread"] = _Grow((), np.int64, -1)

    def __len__(self) -> int:
        return len(self.keys)

    def gids(self, ev: Events) -> np.ndarray:
        if self.group == "file":
            raw, size = ev.path, len(self.dec.paths.values)
        elif self.group == "kind":
            raw, size = ev.kind, len(self.dec.kinds.values)
        elif self.group == "table":
            nt = len(self.dec.tables.values)
            raw, size = np.where(ev.table >= 0, ev.table, nt + ev.kind), nt + len(self.dec.kinds.values)
        else:
            raw, size = ev.tid.astype(np.int64), None
        if size is None:
            uniq, inverse = np.unique(raw, return_inverse=True)
        else:
            uniq, inverse = _dense_unique(raw, size)
        local = np.asarray([self._gid(self._key(int(u))) for u in uniq], np.int64)
        gid = local[inverse] if len(uniq) else np.zeros(0, np.int64)
        self._remember(gid, ev)
        return gid

    def _key(self, raw: int) -> Any:
        if self.group == "file":
            return self.dec.paths.values[raw]
        if self.group == "kind":
            return self.dec.kinds.values[raw]
        if self.group == "table":
            nt = len(self.dec.tables.values)
            return self.dec.tables.values[raw] if raw < nt else self.dec.kinds.values[raw - nt]
        return raw  # tid

    def _gid(self, key: Any) -> int:
        g = self.ids.get(key)
        if g is None:
            g = self.ids[key] = len(self.keys)
            self.keys.append(key)
        return g

    def _remember(self, gid: np.ndarray, ev: Events) -> None:
        if not len(gid):
            return
        last = np.full(len(self.keys), -1, np.int64)
        np.maximum.at(last, gid, np.arange(len(gid)))
        seen = np.flatnonzero(last >= 0)
        at = last[seen]
        for name, source in (
            ("path", ev.path),
            ("kind", ev.kind),
            ("table", ev.table),
            ("deleted", ev.deleted),
            ("dev", ev.dev),
            ("ino", ev.ino),
            ("tid", ev.tid),
            ("thread", ev.thread),
        ):
            self._attr[name].ensure(len(self.keys))[seen] = source[at].astype(np.int64)

    def row(self, g: int, stats: Stats) -> Row:
        attr = {name: int(grow.a[g]) for name, grow in self._attr.items()}
        dec = self.dec
        kind = dec.kinds.values[attr["kind"]] if attr["kind"] >= 0 else "other"
        table = dec.tables.values[attr["table"]] if attr["table"] >= 0 else None
        if self.group == "file":
            return Row(
                label=self.keys[g],
                kind=kind,
                stats=stats,
                table=table,
                deleted=bool(attr["deleted"] > 0),
                dev=attr["dev"],
                ino=attr["ino"],
            )
        if self.group == "kind":
            return Row(label=self.keys[g], kind=self.keys[g], stats=stats)
        if self.group == "table":
            return Row(label=self.keys[g], kind=kind, stats=stats, table=table)
        name = dec.threads.values[attr["thread"]] if attr["thread"] >= 0 else "?"
        return Row(label=f"{name} [{self.keys[g]}]", kind="thread", stats=stats, tid=self.keys[g], thread=name)

    def rows(self, agg: GroupAgg) -> list[Row]:
        rows = []
        counts = agg.counts()
        for g in range(len(self.keys)):
            if g < len(counts) and counts[g].any():
                rows.append(self.row(g, agg.stats(g)))
        return sorted(rows, key=_busiest_key)


BUSIEST = 5
LATE_S = 3  # events may complete this many seconds out of order; older seconds are final
SETTLE_ROWS = 200_000  # (second, file) rows kept before the older seconds are settled
COMPACT_ROWS = 1_000_000  # (second, group) rows of --per-second before they are merged


def build_report(
    reader: TraceReader,
    group: str = "file",
    filters: Filters | None = None,
    per_second: bool = False,
    bursts: bool = True,
) -> Report:
    """Read the whole trace once and summarise it."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group}")
    filters = filters or Filters()
    dec = Decoder(filters)
    keys = _GroupKeys(group, dec)
    kind_keys = keys if group == "kind" else _GroupKeys("kind", dec)
    agg = GroupAgg()
    kind_agg = agg if group == "kind" else GroupAgg()
    series = SecondSeries()
    file_seconds = SecondRows(1)  # write bytes per (second, path id), for each second's top file
    top: dict[int, tuple[int, int]] = {}  # second -> (path id, bytes) of its top writer
    path_kind = _Grow((), np.int64, -1)  # path id -> kind id (kinds come from the path)
    group_seconds = SecondRows(len(COUNTERS)) if per_second else None
    burst_series = SeriesBuilder() if bursts else None
    events = 0

    def settle(limit: int) -> None:
        sec, ids, wbytes = file_seconds.take_before(limit)
        wb = wbytes[:, 0]
        order = np.lexsort((-wb, sec))
        first = np.ones(len(order), np.bool_)
        first[1:] = sec[order][1:] != sec[order][:-1]
        best = order[first]
        for s, i, b in zip(sec[best].tolist(), ids[best].tolist(), wb[best].tolist(), strict=True):
            if b > top.get(s, (-1, 0))[1]:  # a second settled twice (very late events): keep the larger
                top[s] = (i, b)

    for batch in reader.batches():
        ev = dec.decode(batch)
        if not len(ev):
            continue
        events += len(ev)
        if burst_series is not None:
            burst_series.add(ev, dec)
        sec = ev.sec
        gid = keys.gids(ev)
        agg.add(gid, len(keys), ev)
        if kind_keys is not keys:
            kind_agg.add(kind_keys.gids(ev), len(kind_keys), ev)
        series.add(sec, ev)
        path_kind.ensure(len(dec.paths.values))[ev.path] = ev.kind
        file_seconds.add(sec, ev.path, max(1, len(dec.paths.values)), _write_bytes_of, ev)
        if group_seconds is not None:
            group_seconds.add(sec, gid, len(keys), count, ev)
            if group_seconds.rows > COMPACT_ROWS:
                group_seconds.compact()
        if file_seconds.rows > SETTLE_ROWS:
            settle(int(sec.max()) - LATE_S)
    settle(np.iinfo(np.int64).max)

    base, per_sec = series.array()
    busiest = []
    if len(per_sec):
        order = np.lexsort((np.arange(len(per_sec)), -per_sec[:, 0]))[:BUSIEST]
        for i in order.tolist():
            if per_sec[i, 0] <= 0:
                continue
            s = base + i
            path_id, top_b = top.get(s, (-1, 0))
            busiest.append(
                BusySecond(
                    t=s,
                    stats=Stats(counters=[int(v) for v in per_sec[i]]),
                    top_path=dec.paths.values[path_id] if path_id >= 0 else None,
                    top_kind=dec.kinds.values[int(path_kind.a[path_id])] if path_id >= 0 else None,
                    top_bytes=top_b,
                )
            )

    per_second_rows = None
    if group_seconds is not None:
        per_second_rows = []
        sec, ids, values = group_seconds.compact()
        starts = np.flatnonzero(np.diff(sec, prepend=np.int64(-(2**62)))).tolist()
        for start, end in zip(starts, [*starts[1:], len(sec)][: len(starts)], strict=True):
            rows = [keys.row(int(ids[j]), Stats(counters=[int(v) for v in values[j]])) for j in range(start, end)]
            per_second_rows.append((int(sec[start]), sorted(rows, key=_busiest_key)))

    meta = reader.meta
    if reader.complete and reader.end_wall is not None:
        duration = max(0.0, reader.end_wall - meta.start_wall)
    else:
        duration = max(0.0, dec.max_t) if dec.max_t > -math.inf else 0.0
    return Report(
        trace=reader.path,
        meta=meta,
        group=group,
        filters=filters,
        events_total=dec.events_total,
        events=events,
        duration_s=duration,
        lost_events=reader.lost_total,
        truncated=reader.truncated,
        complete=reader.complete,
        rows=keys.rows(agg),
        kinds=kind_keys.rows(kind_agg),
        total=kind_agg.total(),
        busiest=busiest,
        per_second=per_second_rows,
        bursts=detect(burst_series.series(dec)) if burst_series is not None else None,
        gaps=list(reader.gaps),
        server_status=list(reader.server_status),
    )


# ----------------------------------------------------------------- JSON


def report_json(r: Report) -> dict[str, Any]:
    out: dict[str, Any] = {
        "trace": r.trace,
        "meta": asdict(r.meta),
        "duration_s": round(r.duration_s, 6),
        "events": r.events,
        "events_in_trace": r.events_total,
        "lost_events": r.lost_events,
        "truncated": r.truncated,
        "complete": r.complete,
        "filters": r.filters.to_json(),
        "group": r.group,
        "latency_histogram": {"buckets_per_power_of_two": SUB, "max_relative_error": 1 / (2 * SUB)},
        "gaps": r.gaps,
        "server_status": r.server_status,
        "totals": r.total.to_json(),
    }
    list_key = GROUP_LIST_KEYS[r.group]
    out[list_key] = [row.to_json(r.group) for row in r.rows]
    if r.group != "kind":
        out["kinds"] = [row.to_json("kind") for row in r.kinds]
    out["busiest_seconds"] = [
        {
            "t": b.t,
            **b.stats.counters_json(),
            "top_file": None
            if b.top_path is None
            else {"path": b.top_path, "kind": b.top_kind, "write_bytes": b.top_bytes},
        }
        for b in r.busiest
    ]
    if r.bursts is not None:
        out["bursts"] = trains_json(r.bursts)
    if r.per_second is not None:
        out["per_second"] = [
            {"t": t, list_key: [_second_row_json(row, r.group) for row in rows]} for t, rows in r.per_second
        ]
    return out


def _second_row_json(row: Row, group: str) -> dict[str, Any]:
    obj = row.to_json(group)
    obj.pop("apis", None)
    return obj


# ----------------------------------------------------------------- text


def human_ns(ns: float | None) -> str:
    """Latency with 3 significant digits: 850ns, 12.3µs, 1.50ms, 2.00s."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            v = ns / scale
            return f"{v:.0f}{unit}" if v >= 100 else f"{v:.1f}{unit}" if v >= 10 else f"{v:.2f}{unit}"
    return f"{ns:.0f}ns"


def human_count(n: int) -> str:
    return f"{n:,}"


def human_duration(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _lat(stats: Stats, cls: str, q: str) -> str:
    d = stats.latency.get(cls)
    return human_ns(d[q]) if d else "-"


# (title, width, priority (lower = kept first), cell)
_COLUMNS: list[tuple[str, int, int, Any]] = [
    ("written", 9, 0, lambda s: human_bytes(s.write_bytes)),
    ("wops", 8, 1, lambda s: human_count(s.write_ops)),
    ("avg wr", 8, 4, lambda s: human_bytes(s.write_bytes / s.write_ops) if s.write_ops else "-"),
    ("syncs", 7, 2, lambda s: human_count(s.sync_ops)),
    ("wr p50", 7, 6, lambda s: _lat(s, "write", "p50")),
    ("wr p99", 7, 3, lambda s: _lat(s, "write", "p99")),
    ("wr max", 7, 8, lambda s: _lat(s, "write", "max")),
    ("sync p50", 8, 7, lambda s: _lat(s, "sync", "p50")),
    ("sync p99", 8, 3, lambda s: _lat(s, "sync", "p99")),
    ("sync max", 8, 9, lambda s: _lat(s, "sync", "max")),
    ("read", 9, 5, lambda s: human_bytes(s.read_bytes)),
    ("rops", 8, 10, lambda s: human_count(s.read_ops)),
    ("err", 5, 2, lambda s: human_count(s.errors)),
]
KIND_WIDTH = 12
MIN_NAME = 24


def _fit(
    columns: list[tuple[str, int, int, Any]], width: int, fixed: int, reserve: int = MIN_NAME
) -> list[tuple[str, int, int, Any]]:
    """The columns (by priority) that fit `width` beside `fixed` columns, leaving
    `reserve` columns for a path."""
    chosen: list[tuple[str, int, int, Any]] = []
    used = fixed + reserve
    for col in sorted(columns, key=lambda c: c[2]):
        if used + col[1] + 1 <= width:
            chosen.append(col)
            used += col[1] + 1
    return [c for c in columns if c in chosen]


def _new_table() -> Table:
    return Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1, 0, 0))


def _heading(title: str) -> Text:
    return Text(title, style="bold")


def _label(row: Row, group: str, datadir: str | None, width: int) -> str:
    if group == "file":
        return shorten(row.label + (" (deleted)" if row.deleted else ""), datadir, width)
    return printable(row.label)[:width]


def _label_width(labels: list[str]) -> int:
    return min(32, max([len(x) for x in labels] + [5]))


def render_rows(
    rows: list[Row], group: str, width: int, datadir: str | None = None, total: Stats | None = None
) -> Table:
    """A summary table (one line per group) that fits `width` columns: files get
    their kind first and the path last (widest); other groups their name first."""
    table = _new_table()
    if group == "file":
        columns = _fit(_COLUMNS, width, KIND_WIDTH + 1)
        table.add_column("kind", no_wrap=True, width=KIND_WIDTH)
        name_width = max(10, width - KIND_WIDTH - 1 - sum(c[1] + 1 for c in columns) - 1)
    else:
        labels = [printable(r.label) for r in rows] + (["total"] if total is not None else [])
        name_width = _label_width(labels)
        columns = _fit(_COLUMNS, width, name_width + 1, reserve=0)
        table.add_column(group, no_wrap=True, width=name_width)
    for name, col_width, _, _ in columns:
        table.add_column(name, justify="right", no_wrap=True, width=col_width)
    if group == "file":
        table.add_column("path", no_wrap=True, width=name_width)
    for row in rows:
        numbers = [Text(cell(row.stats)) for _, _, _, cell in columns]
        label = Text(_label(row, group, datadir, name_width))
        table.add_row(*([Text(row.kind[:KIND_WIDTH]), *numbers, label] if group == "file" else [label, *numbers]))
    if total is not None:
        numbers = [Text(cell(total)) for _, _, _, cell in columns]
        cells = [Text(""), *numbers, Text("total")] if group == "file" else [Text("total"), *numbers]
        table.add_row(*cells, style="bold")
    return table


def render_busiest(r: Report, width: int) -> Table:
    table = _new_table()
    table.add_column("t (s)", justify="right", no_wrap=True, width=6)
    table.add_column("written", justify="right", no_wrap=True, width=9)
    table.add_column("wops", justify="right", no_wrap=True, width=8)
    table.add_column("syncs", justify="right", no_wrap=True, width=7)
    table.add_column("top file", justify="right", no_wrap=True, width=9)
    name_width = max(10, width - 6 - 9 - 8 - 7 - 9 - 5 - 1)
    table.add_column("", no_wrap=True, width=name_width)
    for b in r.busiest:
        table.add_row(
            str(b.t),
            human_bytes(b.stats.write_bytes),
            human_count(b.stats.write_ops),
            human_count(b.stats.sync_ops),
            human_bytes(b.top_bytes) if b.top_path else "-",
            shorten(b.top_path, r.meta.datadir, name_width) if b.top_path else "",
        )
    return table


def render_header(r: Report) -> Text:
    m = r.meta
    text = Text()
    text.append("mysqlio report  ", style="bold")
    text.append(printable(r.trace))
    server = "  ".join(printable(x) for x in (m.server_version, m.server_exe) if x) or "?"
    text.append(f"\nserver {server}  pid {m.pid}")
    if m.datadir:
        text.append(f"  datadir {printable(m.datadir)}")
    text.append(f"\nhost {printable(m.host)}  kernel {printable(m.kernel)}")
    text.append(f"\nrecorded by: {printable(m.command)}", style="dim")
    text.append(f"\nstart {_utc(m.start_wall)}  duration {human_duration(r.duration_s)}")
    text.append(f"  events {human_count(r.events_total)}  lost ")
    text.append(human_count(r.lost_events), style="bold red" if r.lost_events else "green")
    if r.truncated:
        text.append(
            "\ntrace cut short (recorder killed or still running): complete batches only",
            style="bold yellow",
        )
    elif not r.complete:
        text.append(
            "\ntrace not closed (still recording, or recorder killed): totals so far",
            style="bold yellow",
        )
    for gap in r.gaps:
        if gap.get("damaged"):
            text.append("\nthe server restarted (gap note damaged): not traced for a while", style="bold yellow")
            continue
        text.append(
            f"\nthe server restarted: pid {gap['old_pid']} → {gap['new_pid']}, not traced from "
            f"{gap['from_t']:.1f} s to {gap['to_t']:.1f} s ({gap['to_t'] - gap['from_t']:.1f} s)",
            style="bold yellow",
        )
    if r.lost_events:
        text.append(
            f"\n{human_count(r.lost_events)} events were lost while recording: totals are too low", style="bold red"
        )
    f = r.filters
    if f.active():
        parts = []
        if f.kinds:
            parts.append("kind " + ",".join(sorted(f.kinds)))
        if f.match:
            parts.append(f"path ~ {printable(f.match.pattern)!r}")
        if f.t_from is not None or f.t_to is not None:
            lo = f"{f.t_from:g}" if f.t_from is not None else "0"
            hi = f"{f.t_to:g}" if f.t_to is not None else "end"
            parts.append(f"seconds {lo} to {hi}")
        text.append(f"\nonly {'; '.join(parts)}: {human_count(r.events)} events")
    text.append(f"\n{LATENCY_NOTE}", style="dim")
    return text


def render_report(r: Report, width: int, limit: int = 0) -> Group:
    """Header, the per-group table (at most `limit` rows when > 0), the per-kind
    table with totals, and the busiest seconds."""
    parts: list[RenderableType] = [render_header(r), Text("")]
    rows = r.rows[:limit] if limit > 0 else r.rows
    if not r.rows:
        parts.append(Text("no events" + (" match the filters" if r.filters.active() else " in this trace")))
        return Group(*parts)
    if r.group != "kind":
        parts += [_heading(f"Per {r.group}"), render_rows(rows, r.group, width, r.meta.datadir)]
        if len(rows) < len(r.rows):
            parts.append(Text(f"… {len(r.rows) - len(rows)} more (--limit 0 shows all)", style="dim"))
        parts.append(Text(""))
    parts += [_heading("Per kind"), render_rows(r.kinds, "kind", width, total=r.total)]
    if r.busiest:
        parts += [Text(""), _heading("Busiest seconds (by bytes written)"), render_busiest(r, width)]
    if r.bursts:
        parts += [Text(""), _heading("Periodic bursts"), render_trains(r.bursts, width)]
    if r.server_status:
        parts += [Text(""), _heading("Server counters (record --mysql): peaks"), render_status_peaks(r)]
    return Group(*parts)


# (label, "gauges" | "rates", field, format) of the peaks shown from record --mysql samples
_STATUS_PEAKS: list[tuple[str, str, str, Any]] = [
    ("dirty pages", "gauges", "dirty_pages", lambda v: f"{v:,.0f}"),
    ("checkpoint age", "gauges", "checkpoint_age_bytes", human_bytes),
    ("redo written", "rates", "redo_written_bytes", lambda v: f"{human_bytes(v)}/s"),
    ("data written", "rates", "data_written_bytes", lambda v: f"{human_bytes(v)}/s"),
    ("pages flushed", "rates", "pages_flushed", lambda v: f"{v:,.0f}/s"),
    ("binlog commits", "rates", "binlog_commits", lambda v: f"{v:,.0f}/s"),
]


def render_status_peaks(r: Report) -> Table:
    """The highest value of each server counter and the second it was seen."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    for title in ("counter", "peak", "at second"):
        table.add_column(title, justify="left" if title == "counter" else "right", no_wrap=True)
    for label, section, name, fmt in _STATUS_PEAKS:
        seen = [
            (float(s[section][name]), float(s["time"]))
            for s in r.server_status
            if isinstance(s.get(section), dict) and isinstance(s[section].get(name), (int, float))
        ]
        if seen:
            value, at = max(seen)
            table.add_row(label, fmt(value), f"{at - r.meta.start_wall:.0f}")
    errors = sum(1 for s in r.server_status if s.get("error"))
    table.caption = f"{len(r.server_status)} samples" + (f", {errors} without an answer" if errors else "")
    return table


def print_report(
    r: Report, limit: int = 0, per_second: bool = False, file: TextIO | None = None, timeline: Any = None
) -> None:
    """Print the text report: terminal width and colours on a terminal; else 120
    columns of plain text without trailing blanks."""
    out = file or sys.stdout
    tty = out.isatty()
    console = Console(
        file=out, highlight=False, width=None if tty else 120, color_system="auto" if tty else None, soft_wrap=False
    )
    parts: list[RenderableType] = [render_report(r, console.width, limit)]
    if per_second and r.per_second is not None:
        parts += [Text(""), _heading("Per second"), render_per_second(r, console.width)]
    if timeline is not None:  # mysqlio.latency_report.LatencyTimeline
        from .latency_report import render_timeline

        heading = "Latency over time of the slowest files (p99, requests)"
        body: RenderableType = (
            render_timeline(timeline, r, console.width)
            if timeline.pairs
            else Text("no file has enough requests with latency")
        )
        parts += [Text(""), _heading(heading), body]
    if tty:
        console.print(Group(*parts))
        return
    with console.capture() as capture:
        console.print(Group(*parts))
    out.write("".join(line.rstrip() + "\n" for line in capture.get().splitlines()))


_SECOND_COLUMNS: list[tuple[str, int, int, Any]] = [
    ("written", 9, 0, lambda s: human_bytes(s.write_bytes)),
    ("wops", 8, 1, lambda s: human_count(s.write_ops)),
    ("syncs", 7, 2, lambda s: human_count(s.sync_ops)),
    ("read", 9, 3, lambda s: human_bytes(s.read_bytes)),
    ("rops", 8, 4, lambda s: human_count(s.read_ops)),
    ("err", 5, 3, lambda s: human_count(s.errors)),
]


def render_per_second(r: Report, width: int) -> Table:
    """The per-second table: one line per group active in each second, busiest first."""
    file_group = r.group == "file"
    labels = [printable(row.label) for _, rows in r.per_second or [] for row in rows]
    label_width = 0 if file_group else _label_width(labels)
    fixed = 7 + (KIND_WIDTH + 1 if file_group else label_width + 1)
    columns = _fit(_SECOND_COLUMNS, width, fixed, reserve=MIN_NAME if file_group else 0)
    table = _new_table()
    table.add_column("t (s)", justify="right", no_wrap=True, width=6)
    table.add_column("kind" if file_group else r.group, no_wrap=True, width=KIND_WIDTH if file_group else label_width)
    for name, col_width, _, _ in columns:
        table.add_column(name, justify="right", no_wrap=True, width=col_width)
    name_width = max(10, width - fixed - sum(c[1] + 1 for c in columns) - 1)
    if file_group:
        table.add_column("path", no_wrap=True, width=name_width)
    for t, rows in r.per_second or []:
        for row in rows:
            numbers = [Text(cell(row.stats)) for _, _, _, cell in columns]
            if file_group:
                cells = [Text(row.kind[:KIND_WIDTH]), *numbers, Text(_label(row, r.group, r.meta.datadir, name_width))]
            else:
                cells = [Text(_label(row, r.group, None, label_width)), *numbers]
            table.add_row(Text(str(t)), *cells)
    return table
