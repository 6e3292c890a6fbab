"""`mysqlio demo -n N` runs non-interactively, shows its periodic burst, and leaves
nothing behind."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import psutil
import pytest

from mysqlio.devtools.demo import BURST_PERIOD_S, BURST_SCHEMA, BURST_TABLE, FIRST_BURST_DELAY_S
from mysqlio.devtools.workload import PeriodicBulkWriter

BURST_EVENT = PeriodicBulkWriter.event  # the event's name (the writer's default)

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

INTERVAL_S = 0.5
COUNT = 44  # 22 s: the first run within FIRST_BURST_DELAY_S, then three more periods and a margin


def _sandbox_dirs() -> set[str]:
    return set(glob.glob("/tmp/mysqlio-mariadb-*"))


def _servers() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "mariadbd"}


def test_demo_shows_the_periodic_burst_and_cleans_up(bpf_ready: None) -> None:
    before_dirs = _sandbox_dirs()
    proc = subprocess.run(
        [sys.executable, "-m", "mysqlio", "demo", "-n", str(COUNT), "-i", str(INTERVAL_S), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"every {BURST_PERIOD_S} s an event rewrites {BURST_SCHEMA}.{BURST_TABLE}" in proc.stderr
    intervals = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(intervals) == COUNT
    kinds = {f["kind"] for obj in intervals for f in obj["files"] if f["write_bytes"]}
    assert {"redo", "binlog", "myisam"} <= kinds

    suffix = f"/{BURST_SCHEMA}/{BURST_TABLE}.MYD"
    shown = [
        (obj["time"], t)
        for obj in intervals
        for t in obj["bursts"]
        if t["file"].endswith(suffix) and t["metric"] == "write"
    ]
    # (failed once in a fresh CI run, never here: what top did show, to tell why next time)
    seen = sorted({(t["file"].rsplit("/", 1)[-1], t["metric"]) for obj in intervals for t in obj["bursts"]})
    writes = [
        (round(obj["time"] - intervals[0]["time"], 1), f["write_ops"])
        for obj in intervals
        for f in obj["files"]
        if f["path"].endswith(suffix) and f["write_ops"]
    ]
    assert shown, (
        f"the demo's top never showed the periodic burst; trains shown: {seen}; "
        f"{BURST_TABLE}.MYD writes (s after top's first interval, ops): {writes}; stderr:\n{proc.stderr[-3000:]}"
    )
    first_time, first = shown[0]
    last_time, last = shown[-1]
    print(f"\ndemo: {first['explanation']} shown {first_time - intervals[0]['time']:.1f} s after top started")
    # the first run comes at most FIRST_BURST_DELAY_S after top starts; three runs make a train
    assert first_time - intervals[0]["time"] <= FIRST_BURST_DELAY_S + 3 * BURST_PERIOD_S
    assert last_time == intervals[-1]["time"]  # and it stays
    assert abs(last["period_s"] / BURST_PERIOD_S - 1) <= 0.05, last
    assert (
        last["explanation"].startswith(f"{BURST_TABLE}.MYD · ") and f"every {BURST_PERIOD_S} s" in last["explanation"]
    )
    # the demo's top runs with --mysql: the job is named after its event, from the first time it shows
    event = f"event {BURST_SCHEMA}.{BURST_EVENT} (every {BURST_PERIOD_S} s, writes {BURST_SCHEMA}.{BURST_TABLE})"
    assert {t["explanation"].split(" → ")[1] for _, t in shown} == {event}
    assert all(obj["server"]["error"] is None for obj in intervals[1:]), "the server's status did not answer"

    # its own server and temp dir are gone (other sandboxes may come and go meanwhile on a
    # shared machine: the demo's are known by its pid and by the paths top showed)
    (pid,) = {int(m[1]) for m in re.finditer(r"^mysqlio demo: MariaDB \S+ pid (\d+);", proc.stderr, re.M)}
    assert pid not in _servers(), "demo left its mariadbd running"
    (base,) = {m[0] for f in intervals[-1]["files"] if (m := re.match(r"/tmp/mysqlio-mariadb-[^/]+", f["path"]))}
    assert base not in before_dirs and not os.path.exists(base), "demo left its temp dir"
