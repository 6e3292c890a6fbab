"""`report --latency`: latency over time of the slowest files of a trace.

The report (one pass) finds each file's write and sync p99; this second pass
over the trace builds, for the few slowest (file, class) pairs only, one
latency histogram per second, so a DBA sees *when* fsync on ib_logfile0 was
slow, not only that its p99 was. Memory: the non-empty (second, pair, bucket)
cells only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi import LATENCY_UNKNOWN
from ..filters import Filters
from ..latency import CLASSES, NBUCKETS, bucket_of, percentile
from ..trace import TraceReader
from ..trace_counts import latency_class
from ..trace_events import Decoder
from .model import GroupRow

SLOWEST = 3  # (file, class) pairs followed over time
MIN_REQUESTS = 10  # a pair with fewer requests is not called slow on its p99


@dataclass(frozen=True)
class SlowPair:
    path: str
    cls: str  # "write" | "sync" | "read"
    p99_ns: int


@dataclass
class SecondLatency:
    t: int  # seconds since the start of the trace
    cells: list[dict[str, int] | None]  # per SlowPair: count, p50_ns, p99_ns, max_ns


@dataclass
class LatencyTimeline:
    pairs: list[SlowPair]
    seconds: list[SecondLatency]

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [{"path": p.path, "op": p.cls, "p99_ns": p.p99_ns} for p in self.pairs],
            "seconds": [{"t": s.t, "latency": s.cells} for s in self.seconds],
        }


def slowest_pairs(rows: list[GroupRow], n: int = SLOWEST) -> list[SlowPair]:
    """The n (file, class) pairs of a per-file report with the highest p99,
    among those with at least MIN_REQUESTS requests."""
    found = []
    for row in rows:
        for cls in ("write", "sync"):
            lat = row.stats.latency.get(cls)
            requests = row.stats.write_ops if cls == "write" else row.stats.sync_ops
            if lat and lat.get("p99") is not None and requests >= MIN_REQUESTS:
                found.append(SlowPair(row.label, cls, int(lat["p99"])))
    return sorted(found, key=lambda p: (-p.p99_ns, p.path, p.cls))[:n]


def latency_over_time(reader: TraceReader, pairs: list[SlowPair], filters: Filters | None = None) -> LatencyTimeline:
    """Per-second latency of each pair, from a second read of the trace."""
    if not pairs:
        return LatencyTimeline(pairs, [])
    dec = Decoder(filters)
    wanted = {(p.path, CLASSES.index(p.cls)): i for i, p in enumerate(pairs)}
    cells: dict[tuple[int, int], np.ndarray] = {}  # (second, pair) -> histogram
    maxima: dict[tuple[int, int], int] = {}
    for batch in reader.batches():
        ev = dec.decode(batch)
        if not len(ev):
            continue
        ok = ev.ok & (ev.latency != LATENCY_UNKNOWN)
        cls = latency_class(ev.op)
        # pair index of each event, -1 for the others
        path_pair = np.full((len(dec.paths.values), len(CLASSES)), -1, np.int64)
        for (path, c), i in wanted.items():
            pid = dec.paths.ids.get(path)
            if pid is not None:
                path_pair[pid, c] = i
        pair = np.where(ok, path_pair[ev.path, cls], -1)
        sel = pair >= 0
        if not sel.any():
            continue
        sec, pair, lat = ev.sec[sel], pair[sel], ev.latency[sel]
        key = (sec * len(pairs) + pair) * NBUCKETS + bucket_of(lat)
        uniq, counts = np.unique(key, return_counts=True)
        for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
            cell_key = divmod(k // NBUCKETS, len(pairs))
            hist = cells.get(cell_key)
            if hist is None:
                hist = cells[cell_key] = np.zeros(NBUCKETS, np.int64)
            hist[k % NBUCKETS] += c
        cell, inverse = np.unique(sec * len(pairs) + pair, return_inverse=True)
        batch_max = np.zeros(len(cell), np.uint64)
        np.maximum.at(batch_max, inverse, lat)
        for c, v in zip(cell.tolist(), batch_max.tolist(), strict=True):
            cell_key = divmod(c, len(pairs))
            if v > maxima.get(cell_key, -1):
                maxima[cell_key] = int(v)
    seconds = []
    for s in sorted({s for s, _ in cells}):
        row: list[dict[str, int] | None] = []
        for i in range(len(pairs)):
            hist = cells.get((s, i))
            if hist is None:
                row.append(None)
                continue
            mx = maxima[(s, i)]
            row.append(
                {
                    "count": int(hist.sum()),
                    "p50_ns": percentile(hist, 50, mx) or 0,
                    "p99_ns": percentile(hist, 99, mx) or 0,
                    "max_ns": mx,
                }
            )
        seconds.append(SecondLatency(s, row))
    return LatencyTimeline(pairs, seconds)
