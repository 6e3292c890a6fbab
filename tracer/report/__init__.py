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
