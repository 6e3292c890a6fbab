"""`build_report`: read a trace once and summarise it (a `Report`)."""

from __future__ import annotations

import math
import sys

import numpy as np

from ..bursts.detect import detect
from ..bursts.series import SeriesBuilder
from ..errors import UserError
from ..events import OP_NAMES
from ..filters import Filters
from ..model import COUNTER_FIELDS, GROUPS, SERVER_GROUPS
from ..server_threads import ThreadSample
from ..server_timers import facts_in_samples
from ..thread_attribution import Timeline
from ..trace import TraceReader
from ..trace_counts import Grow, SecondRows, SecondSeries, count
from ..trace_events import Decoder, Events
from .devices import device_samples, device_totals
from .groups import GroupAgg, GroupKeys
from .model import BusySecond, PerSecond, Report, Stats
from .warmup import report_warmups

_WRITE = OP_NAMES.index("write")

BUSIEST = 5
LATE_S = 3  # events may complete this many seconds out of order; older seconds are final
SETTLE_ROWS = 200_000  # (second, file) rows kept before the older seconds are settled
COMPACT_ROWS = 1_000_000  # (second, group) rows of --per-second before they are merged


def _write_bytes_of(key: np.ndarray, size: int, ev: Events) -> np.ndarray:
    w = ev.ok & (ev.op == _WRITE)
    return np.rint(np.bincount(key[w], weights=ev.nbytes[w], minlength=size)).astype(np.int64).reshape(size, 1)


def thread_timeline(path: str, group: str) -> Timeline:
    """The server's view of the threads that a trace recorded with --mysql holds (a first
    pass over the trace: a statement's span is known only once it ended)."""
    reader = TraceReader(path)
    for _ in reader.batches():
        pass
    samples = [s for s in (ThreadSample.from_json(obj) for obj in reader.server_threads) if s is not None]
    timeline = Timeline(connections=reader.meta.connections)
    timeline.add_all(samples)
    if not timeline.samples:
        why = timeline.last_error or "it was recorded without --mysql"
        raise UserError(f"--group {group}: {path} has no samples of the server's threads ({why})")
    if timeline.warning:  # what record said when the samples were taken
        print(f"mysqlio: warning: {timeline.warning}", file=sys.stderr)
    return timeline


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
    dec = Decoder(filters, reader.meta.region_maps())
    keys = GroupKeys(group, dec, thread_timeline(reader.path, group) if group in SERVER_GROUPS else None)
    kind_keys = keys if group == "kind" else GroupKeys("kind", dec)
    agg = GroupAgg()
    kind_agg = agg if group == "kind" else GroupAgg()
    series = SecondSeries()
    file_seconds = SecondRows(1)  # write bytes per (second, path id), for each second's top file
    top: dict[int, tuple[int, int]] = {}  # second -> (path id, bytes) of its top writer
    path_kind = Grow((), np.int64, -1)  # path id -> kind id (kinds come from the path)
    group_seconds = SecondRows(len(COUNTER_FIELDS)) if per_second else None
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
                    stats=Stats.of(per_sec[i]),
                    top_path=dec.paths.values[path_id] if path_id >= 0 else None,
                    top_kind=dec.kinds.values[int(path_kind.a[path_id])] if path_id >= 0 else None,
                    top_bytes=top_b,
                )
            )

    per_second_rows = PerSecond(*group_seconds.compact(), keys.row) if group_seconds is not None else None

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
        lost_by_reason=dict(reader.lost_by),
        truncated=reader.truncated,
        complete=reader.complete,
        rows=keys.rows(agg),
        kinds=kind_keys.rows(kind_agg),
        total=kind_agg.total(),
        busiest=busiest,
        per_second=per_second_rows,
        bursts=(
            detect(burst_series.series(dec), facts=facts_in_samples(reader.server_status))
            if burst_series is not None
            else None
        ),
        gaps=list(reader.gaps),
        warmups=report_warmups(reader.path, reader.gaps, filters, duration) if reader.gaps else [],
        server_status=list(reader.server_status),
        devices=device_totals(reader.devices, filters),
        device_samples=len(device_samples(reader.devices, filters)),
    )
