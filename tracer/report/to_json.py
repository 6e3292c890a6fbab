"""A `Report` as JSON (`report --json`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any, TextIO

from ..bursts.train import trains_json
from ..latency import SUB
from .model import GroupRow, Report, page_cache_counted

GROUP_LIST_KEYS = {
    "file": "files",
    "kind": "kinds",
    "table": "tables",
    "thread": "threads",
    "user": "users",
    "connection": "connections",
    "query": "queries",
}


def report_json(r: Report, per_second: bool = True, rows: bool = True) -> dict[str, Any]:
    """The report as one JSON object; `per_second=False` leaves out --per-second's
    rows, `rows=False` holds None in place of the groups' list (`write_report_json`
    streams both)."""
    out: dict[str, Any] = {
        "trace": r.trace,
        "meta": asdict(r.meta),
        "duration_s": round(r.duration_s, 6),
        "events": r.events,
        "events_in_trace": r.events_total,
        "lost_events": r.lost_events,
        "lost_by_reason": r.lost_by_reason,
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
    if r.warmups:  # after each restart (mysqlio.report.warmup)
        out["warmups"] = [w.to_json() for w in r.warmups]
    list_key = GROUP_LIST_KEYS[r.group]
    out[list_key] = [row.to_json(r.group) for row in r.rows] if rows else None
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
    if r.per_second is not None and per_second:
        out["per_second"] = list(_per_second_json(r))
    if not page_cache_counted(r.total):
        _no_hits(out)
    return out


def _no_hits(obj: Any) -> None:
    """Every cache_hit_bytes in the report's JSON null: no hit derived (page_cache_counted)."""
    if isinstance(obj, dict):
        if "cache_hit_bytes" in obj:
            obj["cache_hit_bytes"] = None
        for value in obj.values():
            _no_hits(value)
    elif isinstance(obj, list):
        for item in obj:
            _no_hits(item)


def _rows_json(r: Report) -> Iterator[dict[str, Any]]:
    counted = page_cache_counted(r.total)
    for row in r.rows:
        obj = row.to_json(r.group)
        if not counted:
            _no_hits(obj)
        yield obj


def _per_second_json(r: Report) -> Iterator[dict[str, Any]]:
    list_key = GROUP_LIST_KEYS[r.group]
    counted = page_cache_counted(r.total)
    for t, rows in r.per_second or []:
        second = {"t": t, list_key: [_second_row_json(row, r.group) for row in rows]}
        if not counted:
            _no_hits(second)
        yield second


def write_report_json(r: Report, out: TextIO, after: dict[str, Any] | None = None) -> None:
    """`report --json`: what `json.dumps(report_json(r) | after, indent=1)` and a
    newline would write, with --per-second's rows made and written one second at a
    time (an hour of a busy trace is a million rows: 3 GiB held whole), and the groups'
    rows one at a time too (100k files: a list and its text of 700 MiB held whole)."""
    list_key = GROUP_LIST_KEYS[r.group]
    obj = report_json(r, per_second=False, rows=False)
    items: list[tuple[str, Any]] = [(k, _rows_json(r) if k == list_key else v) for k, v in obj.items()]
    if r.per_second is not None:
        items.append(("per_second", _per_second_json(r)))
    items += list((after or {}).items())
    out.write("{")
    for i, (key, value) in enumerate(items):
        out.write(("," if i else "") + "\n " + json.dumps(key) + ": ")
        if isinstance(value, Iterator):
            _write_array(value, out)
        else:
            out.write(json.dumps(value, indent=1).replace("\n", "\n "))
    out.write("\n}\n")


def _write_array(items: Iterator[Any], out: TextIO) -> None:
    """A JSON array one item at a time, as json.dumps(indent=1) would lay it out one
    level down (the value of a key of the top object)."""
    empty = True
    for item in items:
        out.write(("[" if empty else ",") + "\n  " + json.dumps(item, indent=1).replace("\n", "\n  "))
        empty = False
    out.write("[]" if empty else "\n ]")


def _second_row_json(row: GroupRow, group: str) -> dict[str, Any]:
    obj = row.to_json(group)
    obj.pop("apis", None)
    return obj
