"""`report`'s warm-up after each restart of a trace recorded with `record --follow`: a
second pass over the trace (only when it holds a restart gap) counting each table's disk
reads per second from the moment the new process was traced, fed to mysqlio.warmup's rule.

A trace does not hold the new server's start time: a warm-up here counts from when
tracing resumed (the gap's end), and the reads before it are not in the trace."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..filters import Filters
from ..model import COUNTER_FIELDS
from ..trace import TraceReader
from ..trace_counts import SecondRows, count
from ..trace_events import Decoder
from ..warmup import Warmup
from .groups import GroupKeys
from .model import PerSecond


@dataclass
class ReportWarmup:
    warmup: Warmup
    seconds: list[tuple[float, dict[str, int]]]  # (start of the second, disk read bytes per table)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.warmup.to_json(),
            "seconds": [{"t": round(t, 6), "tables": by} for t, by in self.seconds],
        }


def _per_second(path: str, filters: Filters) -> dict[int, dict[str, tuple[int, int]]]:
    """second -> table (or kind of a file that is no table's) -> (disk read, readahead) bytes."""
    reader = TraceReader(path)
    dec = Decoder(filters, reader.meta.region_maps())
    keys = GroupKeys("table", dec)
    rows = SecondRows(len(COUNTER_FIELDS))
    for batch in reader.batches():
        ev = dec.decode(batch)
        if len(ev):
            rows.add(ev.sec, keys.gids(ev), len(keys), count, ev)
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for sec, group_rows in PerSecond(*rows.compact(), keys.row):
        for row in group_rows:
            values = row.stats
            if values.disk_read_bytes:
                out.setdefault(sec, {})[row.label] = (int(values.disk_read_bytes), int(values.readahead_bytes))
    return out


def report_warmups(path: str, gaps: list[dict[str, Any]], filters: Filters, end_t: float) -> list[ReportWarmup]:
    """The warm-up after each restart gap (the trace's time: seconds since its start),
    each up to the next gap or `end_t`, the trace's end."""
    starts = [g for g in gaps if not g.get("damaged") and g.get("to_t") is not None]
    if not starts:
        return []
    by_second = _per_second(path, filters)
    found = []
    for i, gap in enumerate(starts):
        since = float(gap["to_t"])
        until = float(starts[i + 1]["from_t"]) if i + 1 < len(starts) else end_t
        w = Warmup(since=since, pid=int(gap["new_pid"]))
        seconds: list[tuple[float, dict[str, int]]] = []
        s = math.floor(since)
        while s < until:
            begin, end = max(float(s), since), min(float(s + 1), until)
            reads = by_second.get(s, {})
            w.feed(end, end - begin, [(name, n, ra) for name, (n, ra) in reads.items()])
            seconds.append((begin, {name: n for name, (n, _) in reads.items()}))
            s += 1
        found.append(ReportWarmup(w, seconds))
    return found
