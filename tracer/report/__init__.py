"""Offline report of a recorded trace: totals per file / kind / table / thread,
latency percentiles, the page cache (dirtied, written back and why), the block
devices, the busiest seconds, and an optional per-second table.

Everything is computed batch by batch with vectorised group-bys (numpy
bincount over dictionary indices), never per event in Python. Memory is
bounded by the number of groups and of seconds, not by the trace's length:
latencies go into a fixed log-linear histogram per group, and per-(second,
group) counters are kept only where they are the output (`--per-second`,
plots) or for the last few seconds (the top file of each second).

The trace is read through `trace_events` (batches to numpy arrays, filters) and
counted with `trace_counts`, as `plot` and the burst detector read it. The modules:
- `build`: `build_report()`, one pass over the trace, produces a `Report`;
- `groups`: each event's group (file, kind, table, thread) and per-group totals;
- `devices`: the block devices' samples `record` stored per batch, summed per device;
- `model`: the `Report` and its rows, plain data (`PerSecond`: `--per-second`'s rows,
  made one second at a time);
- `to_json`: `report_json()`, the report as JSON, and `write_report_json()` (`--json`),
  which streams the per-second rows;
- `text`: rich renderables of the report and `print_report()`;
- `timeline`: `report --latency`, a second pass for the slowest files' latency per second.
"""
