"""A recorded trace's record batches as numpy arrays (`Events`), with strings
(paths, kinds, tables, threads) mapped to ids that stay the same from batch to
batch, and the filters applied (`Decoder`). What `report`, `plot` and the burst
detector read a trace through."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .abi import Op, Region
from .errors import UserError
from .events import API_NAMES, BY_NAMES, OP_NAMES
from .filters import Filters
from .ibdata_regions import RegionMap, region_name

_MAX_TRACE_S = 366 * 86400.0  # a year of recording


class Strings:
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

    def add(self, s: str) -> int:
        """The id of a string that no batch holds (a name made here)."""
        return self._id(s)

    def _id(self, s: str | None) -> int:
        s = "" if s is None else s
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.values)
            self.values.append(s)
        return i


@dataclass
class Events:
    """One batch's events (after filtering), as numpy arrays with global string ids."""

    t: np.ndarray  # float64 seconds since start
    op: np.ndarray  # int64 index into OP_NAMES
    api: np.ndarray  # int64 index into API_NAMES
    by: np.ndarray  # int64 index into BY_NAMES (writeback events' cause; 0 "none" else)
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
    region: np.ndarray  # int64 abi.Region of the event's first byte (0 NONE: not a region file, or no offset)
    conn: np.ndarray  # uint32 the connection its thread served (the probes' socket inode; 0 none)

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

    def __init__(self, filters: Filters | None = None, regions: dict[tuple[int, int], RegionMap] | None = None) -> None:
        self.filters = filters or Filters()
        self.regions = regions or {}  # (st_dev, ino) -> the file's regions (TraceMeta.region_maps)
        self.paths = Strings()
        self.kinds = Strings()
        self.tables = Strings()
        self.threads = Strings()
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
        by_d = col("by")
        by = _fixed_lookup(by_d.dictionary, BY_NAMES)[_np(by_d.indices)]
        bad = (op < 0) | (api < 0) | (by < 0)
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
            by=by,
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
            region=self._regions(op, _np(col("dev")), _np(col("ino")), _np(col("offset"))),
            conn=_np(col("conn")),
        )
        if keep is not None and not keep.all():
            ev = Events(**{name: value[keep] for name, value in vars(ev).items()})
        return ev

    def region_paths(self, ev: Events) -> np.ndarray:
        """Each event's path id; for an event in a region of its file, the id of the name
        "path · region" instead (the burst detector takes a region as a file of its own)."""
        if not ev.region.any():
            return ev.path
        out = ev.path.copy()
        has = np.flatnonzero(ev.region)
        pairs = ev.path[has] * len(Region) + ev.region[has]
        for pair in np.unique(pairs).tolist():
            name = f"{self.paths.values[pair // len(Region)]} · {region_name(pair % len(Region))}"
            out[has[pairs == pair]] = self.paths.add(name)
        return out

    def _regions(self, op: np.ndarray, dev: np.ndarray, ino: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """Each event's region: that of its first byte, for the reads and writes of a
        region file (as the kernel does it for `top`); NONE for everything else."""
        region = np.zeros(len(op), np.int64)
        for (d, i), regions in self.regions.items():
            mine = (dev == d) & (ino == i) & ((op == int(Op.WRITE)) | (op == int(Op.READ))) & (offset >= 0)
            if not mine.any():
                continue
            region[mine] = int(Region.SYSTEM)
            for r in regions.ranges:
                region[mine & (offset >= r.start) & (offset < r.end)] = int(r.region)
        return region

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
