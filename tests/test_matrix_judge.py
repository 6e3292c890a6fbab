"""The kernel matrix's verdicts (tools/matrix_guest.py judge): losses make every cell differ,
except runs the kernel skipped that the tracer counted as all its losses."""

from __future__ import annotations

import subprocess
from typing import Any

from matrix_guest import Scenarios, Tracer, judge


def _tracer(got_ops: int, lost: int, skipped: dict[str, int]) -> Tracer:
    t = Tracer("top", subprocess.Popen(["true"]))
    t.proc.wait()
    t.status = "ran"
    row: dict[str, Any] = {"write_ops": 10, "write_bytes": 40960}
    t.want = {"/s/write_a.dat": dict(row), "/s/pwrite_a.dat": dict(row)}
    t.got = {"/s/write_a.dat": {**row, "write_ops": got_ops}, "/s/pwrite_a.dat": dict(row)}
    t.lost = {"lost_events": lost}
    t.extra["skipped_by_program"] = skipped
    return t


SCENARIOS = Scenarios(run=["write", "pwrite"], files={"write": ["write_a.dat"], "pwrite": ["pwrite_a.dat"]})


def test_exact_without_losses() -> None:
    t = _tracer(10, 0, {})
    judge(t, SCENARIOS)
    assert t.cells == {"write": "exact", "pwrite": "exact"}


def test_a_counted_skip_is_judged_on_the_files() -> None:
    t = _tracer(9, 1, {"handle_exit": 1})
    judge(t, SCENARIOS)
    assert t.cells["pwrite"] == "exact"
    assert t.cells["write"].startswith("skipped: write_a.dat: write_ops 9 (iogen 10)")
    assert "1 run(s) of handle_exit skipped by the kernel, counted as lost" in t.cells["write"]


def test_short_by_more_than_skipped_differs() -> None:
    t = _tracer(8, 1, {"handle_exit": 1})
    judge(t, SCENARIOS)
    assert t.cells["write"].startswith("differs: skipped runs 1")


def test_losses_other_than_the_skipped_runs_make_every_cell_differ() -> None:
    t = _tracer(9, 2, {"handle_exit": 1})
    judge(t, SCENARIOS)
    assert t.cells["pwrite"].startswith("differs: lost_events 2")
    assert t.cells["write"].startswith("differs: lost_events 2")


def test_device_counter_misses_are_not_event_runs() -> None:
    t = _tracer(9, 1, {"handle_rq_complete": 1})
    judge(t, SCENARIOS)
    assert t.cells["write"].startswith("differs: lost_events 1")


def test_a_truncated_trace_is_never_explained_by_skipped_runs() -> None:
    t = _tracer(9, 1, {"handle_exit": 1})
    t.lost["truncated"] = 1
    judge(t, SCENARIOS)
    assert t.cells["pwrite"].startswith("differs: lost_events 1; truncated 1")
