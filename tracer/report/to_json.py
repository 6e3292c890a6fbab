"""A `Report` as JSON (`report --json`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..bursts.train import trains_json
from ..latency import SUB
from .model import GroupRow, Report

GROUP_LIST_KEYS = {
    "file": "files",
    "kind": "kinds",
    "table": "tables",
    "thread": "threads",
    "user": "users",
    "connection": "connections",
    "query": "queries",
}


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
        # block devices: bytes and requests they completed, writes split by owner
        "devices": [d.to_json() for d in r.devices],
        "device_samples": r.device_samples,
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


def _second_row_json(row: GroupRow, group: str) -> dict[str, Any]:
    obj = row.to_json(group)
    obj.pop("apis", None)
    return obj
