"""Per-group totals of a trace: each event's group id (a file, kind, table or
thread) and, per group, counters, APIs used and latency histograms."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..abi import LATENCY_UNKNOWN, Region
from ..events import API_NAMES
from ..ibdata_regions import region_name
from ..latency import CLASSES, MIDPOINT, NBUCKETS, bucket_of, percentile
from ..model import COUNTER_FIELDS, PAGE_CACHE_OPS, SERVER_GROUPS
from ..thread_attribution import Timeline
from ..trace_counts import Grow, count, dense_unique, latency_class
from ..trace_events import Decoder, Events
from .model import GroupRow, Stats, busiest_key

_NREGIONS = len(Region)
KERNEL_TID = 0  # session.KERNEL_TID: page-cache writeback of no thread of the server

# op codes from here on are the page cache's (abi.Op.DIRTY, WRITEBACK)
_FIRST_PAGE_CACHE_OP = min(int(op) for op in PAGE_CACHE_OPS)


class GroupAgg:
    """Counters, API use and latency histograms per group id.

    The same counters as model.aggregate's for `top`, counted another way: `top`
    folds the kernel's few hundred pre-counted rows per interval in Python, a trace
    holds every event (millions), counted here with numpy group-bys (`count`).

    Each batch is counted over its own groups only, and the histograms are kept sparse
    (LatencyRows): a trace of 100k files read in hundreds of batches costs time and
    memory in proportion to its events and files, not files x batches (issue 60)."""

    def __init__(self) -> None:
        self.n = 0
        self._counts = Grow((len(COUNTER_FIELDS),), np.int64)
        self._apis = Grow((len(API_NAMES),), np.bool_, False)
        self._hist = LatencyRows()
        self._max = Grow((len(CLASSES),), np.uint64)

    def add(self, gid: np.ndarray, size: int, ev: Events) -> None:
        self.n = max(self.n, size)
        present, local = dense_unique(gid, size)  # the batch's groups, and each event's among them
        counts = self._counts.ensure(size)
        counts[present] += count(local, len(present), ev)
        ok = ev.ok
        requests = ok & (ev.op < _FIRST_PAGE_CACHE_OP)  # page-cache events are no API's request
        napis = len(API_NAMES)
        used = np.bincount(local[requests] * napis + ev.api[requests], minlength=len(present) * napis)
        self._apis.ensure(size)[present] |= used.reshape(len(present), napis) > 0
        timed = ok & (ev.latency != LATENCY_UNKNOWN)
        cls = latency_class(ev.op[timed])
        lat = ev.latency[timed]
        flat = gid[timed] * len(CLASSES) + cls
        self._hist.add(flat, bucket_of(lat))
        np.maximum.at(self._max.ensure(size).reshape(-1), flat, lat)

    def counts(self) -> np.ndarray:
        return self._counts.ensure(self.n)[: self.n]

    def stats(self, g: int) -> Stats:
        p50, p99, seen = self._hist.percentiles(self.n)
        mx = self._max.ensure(self.n)[g]
        latency = {}
        for i, cls in enumerate(CLASSES):
            row = g * len(CLASSES) + i
            if seen[row]:
                top = int(mx[i])  # a percentile is never above the exact maximum
                latency[cls] = {"p50": min(int(p50[row]), top), "p99": min(int(p99[row]), top), "max": top}
            elif cls != "read":  # no read latency is shown where there were no reads
                latency[cls] = None
        return Stats.of(
            self._counts.a[g], apis=[API_NAMES[i] for i in np.flatnonzero(self._apis.a[g])], latency=latency
        )

    def total(self) -> Stats:
        n = self.n
        hist = self._hist.by_class()
        mx = self._max.ensure(n)[:n].max(axis=0) if n else np.zeros(len(CLASSES), np.uint64)
        return Stats.of(
            self.counts().sum(axis=0),
            apis=[API_NAMES[i] for i in np.flatnonzero(self._apis.ensure(n)[:n].any(axis=0))],
            latency={cls: _latency(hist[i], int(mx[i])) for i, cls in enumerate(CLASSES)},
        )


def _latency(hist: np.ndarray, maximum: int) -> dict[str, int] | None:
    if not hist.any():
        return None
    return {"p50": percentile(hist, 50, maximum), "p99": percentile(hist, 99, maximum), "max": maximum}


class LatencyRows:
    """Sparse latency histograms: a count per (row, bucket) seen, a row being a group's
    latency class (gid * len(CLASSES) + class). A file's requests fill a few of the
    NBUCKETS buckets: dense rows cost 9 KiB a file (900 MiB at 100k files)."""

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, np.ndarray]] = []  # (row * NBUCKETS + bucket, count)
        self._pending = 0
        self._compacted = 0
        self._percentiles: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, row: np.ndarray, bucket: np.ndarray) -> None:
        if not len(row):
            return
        keys, counts = np.unique(row * NBUCKETS + bucket, return_counts=True)
        self._chunks.append((keys, counts.astype(np.int64)))
        self._pending += len(keys)
        self._percentiles = None
        if self._pending > max(1 << 20, 2 * self._compacted):
            self._compact()

    def _compact(self) -> tuple[np.ndarray, np.ndarray]:
        """The (key, count) pairs, one per key, sorted by key."""
        if not self._chunks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(self._chunks) > 1:
            keys = np.concatenate([c[0] for c in self._chunks])
            uniq, inverse = np.unique(keys, return_inverse=True)
            summed = np.bincount(inverse, weights=np.concatenate([c[1] for c in self._chunks]), minlength=len(uniq))
            self._chunks = [(uniq, np.rint(summed).astype(np.int64))]
        self._compacted = len(self._chunks[0][0])
        self._pending = 0
        return self._chunks[0]

    def by_class(self) -> np.ndarray:
        """(len(CLASSES), NBUCKETS): every row's counts added up by class."""
        keys, counts = self._compact()
        per_class = (keys // NBUCKETS) % len(CLASSES) * NBUCKETS + keys % NBUCKETS
        summed = np.bincount(per_class, weights=counts, minlength=len(CLASSES) * NBUCKETS)
        return np.rint(summed).astype(np.int64).reshape(len(CLASSES), NBUCKETS)

    def percentiles(self, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """p50 and p99 (bucket midpoints, not yet capped by the maximum) of every row of
        `groups` groups, and whether the row has any latency; latency.percentile's
        nearest rank, for all rows at once."""
        if self._percentiles is None or self._percentiles[0] != groups:
            self._percentiles = (groups, *_row_percentiles(*self._compact(), groups * len(CLASSES)))
        return self._percentiles[1], self._percentiles[2], self._percentiles[3]


def _row_percentiles(keys: np.ndarray, counts: np.ndarray, nrows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p50 = np.zeros(nrows, np.int64)
    p99 = np.zeros(nrows, np.int64)
    seen = np.zeros(nrows, np.bool_)
    if not len(keys):
        return p50, p99, seen
    row, bucket = keys // NBUCKETS, keys % NBUCKETS
    starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
    rows = row[starts]
    cum = np.cumsum(counts)
    before = np.r_[0, cum[starts[1:] - 1]]  # the counts of the rows before each row
    total = np.add.reduceat(counts, starts)
    for q, out in ((50, p50), (99, p99)):
        rank = np.maximum(1, np.ceil(q / 100 * total)).astype(np.int64)
        # the first bucket of the row whose running count reaches the rank
        at = np.searchsorted(cum, before + rank)
        out[rows] = np.rint(MIDPOINT[bucket[at]]).astype(np.int64)
    seen[rows] = True
    return p50, p99, seen


class GroupKeys:
    """Group ids of a batch's events for one grouping, and each group's label and attributes."""

    def __init__(self, group: str, dec: Decoder, timeline: Timeline | None = None) -> None:
        self.group = group
        self.dec = dec
        self.timeline = timeline  # user, connection, query: the server's view of the threads
        self.labels: dict[str, str] = {}  # their keys' labels
        self.regions: dict[str, str] = {}  # file group: the keys that are a region of a file
        self.ids: dict[Any, int] = {}
        self.keys: list[Any] = []
        # attributes of the last event seen in each group
        self._attr = {name: Grow((), np.int64, -1) for name in ("path", "kind", "table", "deleted", "dev", "ino")}
        self._attr["tid"] = Grow((), np.int64, -1)
        self._attr["thread"] = Grow((), np.int64, -1)

    def __len__(self) -> int:
        return len(self.keys)

    def gids(self, ev: Events) -> np.ndarray:
        if self.group == "file":  # a file, or a region of it (ibdata1)
            raw, size = ev.path * _NREGIONS + ev.region, len(self.dec.paths.values) * _NREGIONS
        elif self.group == "kind":
            raw, size = ev.kind, len(self.dec.kinds.values)
        elif self.group == "table":
            nt = len(self.dec.tables.values)
            raw, size = np.where(ev.table >= 0, ev.table, nt + ev.kind), nt + len(self.dec.kinds.values)
        elif self.group in SERVER_GROUPS:
            return self._server_gids(ev)
        else:
            raw, size = ev.tid.astype(np.int64), None
        if size is None:
            uniq, inverse = np.unique(raw, return_inverse=True)
        else:
            uniq, inverse = dense_unique(raw, size)
        local = np.asarray([self._gid(self._key(int(u))) for u in uniq], np.int64)
        gid = local[inverse] if len(uniq) else np.zeros(0, np.int64)
        self._remember(gid, ev)
        return gid

    def _server_gids(self, ev: Events) -> np.ndarray:
        if self.timeline is None:
            raise ValueError(f"--group {self.group} needs the server's thread samples")
        codes, keys, labels = self.timeline.keys(ev.tid.astype(np.int64), ev.t, self.group, ev.conn)
        self.labels.update(zip(keys, labels, strict=True))
        local = np.asarray([self._gid(k) for k in keys], np.int64)
        gid = local[codes] if len(keys) else np.zeros(0, np.int64)
        self._remember(gid, ev)
        return gid

    def _key(self, raw: int) -> Any:
        if self.group == "file":
            path, region = self.dec.paths.values[raw // _NREGIONS], region_name(raw % _NREGIONS)
            if region:
                self.regions[f"{path} · {region}"] = region
                return f"{path} · {region}"
            return path
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
        # each group of the batch and its last event (not an array of every group: per batch)
        seen, from_end = np.unique(gid[::-1], return_index=True)
        at = len(gid) - 1 - from_end
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

    def row(self, g: int, stats: Stats) -> GroupRow:
        attr = {name: int(grow.a[g]) for name, grow in self._attr.items()}
        dec = self.dec
        kind = dec.kinds.values[attr["kind"]] if attr["kind"] >= 0 else "other"
        table = dec.tables.values[attr["table"]] if attr["table"] >= 0 else None
        if self.group == "file":
            return GroupRow(
                label=self.keys[g],
                kind=kind,
                stats=stats,
                table=table,
                deleted=bool(attr["deleted"] > 0),
                dev=attr["dev"],
                ino=attr["ino"],
                region=self.regions.get(self.keys[g], ""),
            )
        if self.group == "kind":
            return GroupRow(label=self.keys[g], kind=self.keys[g], stats=stats)
        if self.group == "table":
            return GroupRow(label=self.keys[g], kind=kind, stats=stats, table=table)
        if self.group in SERVER_GROUPS:
            return GroupRow(label=self.labels.get(self.keys[g], self.keys[g]), kind=self.group, stats=stats)
        name = dec.threads.values[attr["thread"]] if attr["thread"] >= 0 else "?"
        tid = self.keys[g]
        # tid 0: writeback the kernel did on its own, named "[kernel]" by the recorder
        label = name if tid == KERNEL_TID else f"{name} [{tid}]"
        return GroupRow(label=label, kind="thread", stats=stats, tid=tid, thread=name)

    def rows(self, agg: GroupAgg) -> list[GroupRow]:
        rows = []
        counts = agg.counts()
        for g in range(len(self.keys)):
            if g < len(counts) and counts[g].any():
                rows.append(self.row(g, agg.stats(g)))
        return sorted(rows, key=busiest_key)
