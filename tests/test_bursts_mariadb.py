"""Periodic bursts on a real MariaDB: one server under a steady sysbench load, traced
by one `mysqlio top --json` throughout and by one `mysqlio record` per phase.

Phases, in order (the load never changes: oltp_write_only at a constant rate):

1. steady — the negative case. innodb_flush_log_at_trx_commit=1 and sync_binlog=1:
   every group commit writes and fdatasyncs the redo log and the binlog, ~150 times a
   second, as the transactions come (a stream, not a timer). innodb_max_dirty_pages_pct
   is 90 with its low-water mark 0, and the buffer pool holds all the data: MariaDB
   10.5+'s page cleaner then sleeps (mysql-io-paths.md, observed) and no data file is
   written at all. The InnoDB master thread still wakes once a second, but any redo
   sync it adds is one among ~150 in that second. So nothing here is periodic at
   the scale of bursts, and the truth is: no train, live or in the trace.
2. job — the positive case: a MariaDB event rewrites a MyISAM table every PERIOD_S s
   (`mysqlio.devtools.workload.PeriodicBulkWriter`: 4000 rows, ~3.9 MiB in 128 KiB writes to
   its .MYD, at whole seconds). `top` must show the .MYD train with the period within
   ±5 % within three periods of CREATE EVENT, and the trace must give the same train
   with the exact bytes and writes per burst (the table's DATA_LENGTH; one write per
   read_buffer_size). The same job also writes, at the same period, the .MYI header,
   one fdatasync of each of .MYD and .MYI, and the scheduler's LAST_EXECUTED row in
   mysql.event (Aria: aria_log write + fdatasync): trains there are true, and are
   the only other ones allowed.
3. trx2 — SET GLOBAL innodb_flush_log_at_trx_commit=2: commits no longer sync the redo
   log; the master thread's once-a-second flush does (documented, observed). The
   trace must show that 1 s fdatasync train on ib_logfile0, named as such. (Not asked
   of `top`: its baseline for the redo log's syncs is still the ~150 a second before,
   over its last 30 s of intervals, so one sync a second is no burst to it yet.)
4. page cleaner — back to trx_commit=1, then innodb_max_dirty_pages_pct=0: the page
   cleaner now flushes every second (a doublewrite batch into ibdata1, the pages into
   the .ibd files, each file fdatasynced in every pass: observed). A steady load then *does* make
   a real 1 s train of syncs on the data files; the trace must show it, named after
   the 1 s flush loop, and no sync train on the redo log (synced per commit again)
   nor any train on the binlog. The redo log's writes do swell once a second: just
   before each flush, one commit's write carries ~144 KiB instead of 4-8 KiB
   (observed, 10.11), so the trace's 0.1 s bins may show a 1 s write train there.

`top` runs at 0.25 s: a train is established on its third burst, and the period fitted
to three onsets quantized to intervals r is off by at most r / (2 P) — 3 % here, 6 %
at 0.5 s, which could fail the ±5 % by chance of phase alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mysqlio.bursts.series import trains_from_trace
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import TopCollector, attached_line, report_json
from mysqlio.devtools.workload import PeriodicBulkWriter
from mysqlio.events import EVENT_DTYPE
from mysqlio.trace import FileInfo, TraceMeta, TraceReader, TraceWriter

PERIOD_S = 4  # the job's period (the event scheduler's are whole seconds)
RUNS = 6  # runs of the job in its phase
TOP_INTERVAL_S = 0.25
RATE = 150  # sysbench transactions per second, 2 threads
STEADY_S = 20.0
ONE_SECOND_PHASE_S = 10.0
TOLERANCE = 0.05  # period
PERIODS_TO_DETECT = 3


class Recording:
    """`mysqlio record` for the length of a `with` block."""

    def __init__(self, pid: int, trace: str) -> None:
        self.pid, self.trace = pid, trace
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Recording:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "record", "-p", str(self.pid), "-o", self.trace],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        first = attached_line(self.proc.stderr)
        assert first.startswith("mysqlio: recording pid"), first
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            # once in a CI run record did not end within 60 s of SIGINT: its threads' stacks
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(
                f"mysqlio record did not end within 60 s of SIGINT; its stacks:\n{err[-6000:]}"
            ) from None
        if exc[0] is None:
            assert self.proc.returncode == 0, f"mysqlio record exited {self.proc.returncode}: {err}"


@dataclass
class Phase:
    start: float  # unix times
    end: float
    intervals: list[dict[str, Any]]  # top's, in [start, end]
    trace_bursts: list[dict[str, Any]]  # report --json's bursts section


@dataclass
class Scenario:
    datadir: str
    job_file: str
    job_created: float  # unix time just before CREATE EVENT
    burst_bytes: int  # ground truth per run: the table's DATA_LENGTH
    burst_writes: int  # ... and ceil(DATA_LENGTH / read_buffer_size)
    phases: dict[str, Phase] = field(default_factory=dict)


@pytest.fixture(scope="module")
def scenario(bpf_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    work = tmp_path_factory.mktemp("bursts_mariadb")
    options = MariaDBOptions(
        sync_binlog=1,
        redo_log_mb=256,  # no checkpoint-age flushing during the run (~1 MB/s of redo)
        extra={
            "innodb_flush_log_at_trx_commit": "1",
            "innodb_max_dirty_pages_pct": "90",
            "innodb_max_dirty_pages_pct_lwm": "0",
        },
    )
    with MariaDB(options) as db:
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        writer = PeriodicBulkWriter(db, period_s=PERIOD_S, schema="bursts", table="periodic")
        top = None
        phases: dict[str, Phase] = {}
        created: list[float] = []

        def phase(name: str, seconds: float, begin: Callable[[], Any] = lambda: None, end: Any = None) -> None:
            """Record while `begin` runs and for `seconds` after it (after the float it
            returns, a unix time, if it does), then `end`; then report on the trace."""
            assert top is not None
            trace = str(work / f"{name}.trace")
            with Recording(db.pid, trace):
                t_start = time.time()
                since = begin()
                t_end = (since if isinstance(since, float) else time.time()) + seconds
                time.sleep(max(0.0, t_end - time.time()))
                top.wait_until(t_end)
            if end is not None:
                end()
            phases[name] = Phase(t_start, t_end, top.between(t_start, t_end), report_json(trace).get("bursts", []))

        def create_event() -> float:
            created.append(time.time())
            return writer.start(delay_s=1)  # the first run's time

        try:
            bench.prepare()
            writer.create_table()
            bench.start(600, rate=RATE)
            top = TopCollector(db.pid, TOP_INTERVAL_S)
            top.wait_until(0)  # probes attached
            t_top = top.intervals[0]["time"]
            phase("steady", STEADY_S)
            phases["steady"].intervals = top.between(t_top, phases["steady"].end)  # from top's first interval
            # RUNS runs: the last one (RUNS - 1) periods after the first; stop half a period
            # later. One second was too short once in a fresh CI run: top had not seen the
            # last run yet (the scheduler's run and top's 0.25 s interval both lag under load);
            # the next run is still a whole half period away.
            phase("job", (RUNS - 1) * PERIOD_S + PERIOD_S / 2, create_event, writer.stop)
            burst_bytes, burst_writes = writer.burst_bytes(), writer.burst_writes()
            phase("trx2", ONE_SECOND_PHASE_S, lambda: db.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 2"))
            db.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 1")
            phase("page_cleaner", ONE_SECOND_PHASE_S, lambda: db.sql("SET GLOBAL innodb_max_dirty_pages_pct = 0"))
            code = top.stop()
            assert code == 0, f"mysqlio top exited {code}: {top.stderr()}"
        finally:
            if top is not None:
                top.stop()
            bench.stop()
        s = Scenario(db.datadir, writer.data_file, created[0], burst_bytes, burst_writes, phases)
    _print_table(s)
    return s


def _name(path: str) -> str:
    return os.path.basename(path)


def _print_table(s: Scenario) -> None:
    """What was detected, per phase: live (top; when it first showed the train, after
    CREATE EVENT or the phase's start) and from the phase's trace (report)."""
    rows = [("phase", "source", "file", "metric", "period", "bursts", "bytes/burst", "writes/burst", "shown after")]
    for name, ph in s.phases.items():
        live: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}
        for obj in ph.intervals:
            for t in obj["bursts"]:
                if t["last_s"] < ph.start:
                    continue  # a train of the phase before, not expired yet
                key = (t["file"], t["metric"])
                live[key] = (t, live[key][1] if key in live else obj["time"])
        since = s.job_created if name == "job" else ph.start
        rows += [_row(name, "top", t, f"{first - since:.2f} s") for t, first in (live[k] for k in sorted(live))]
        rows += [_row(name, "report", t, "-") for t in ph.trace_bursts]
        if not live and not ph.trace_bursts:
            rows.append((name, "top+report", "(no train)", "", "", "", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"\nperiodic bursts on MariaDB (job: every {PERIOD_S} s, {s.burst_bytes} B in {s.burst_writes} writes a run)")
    for r in rows:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _row(phase: str, source: str, t: dict[str, Any], after: str) -> tuple[str, ...]:
    per = str(t["bytes_per_burst"]) if t["metric"] == "write" else f"{t['ops_per_burst']} syncs"
    return (phase, source, _name(t["file"]), t["metric"], f"{t['period_s']:.3f}", str(t["bursts"]), per,
            str(t["ops_per_burst"]) if t["metric"] == "write" else "", after)  # fmt: skip


# ----------------------------------------------------------------- the negative case


@pytest.mark.bpf
@pytest.mark.mariadb
def test_steady_load_has_no_periodic_train(scenario: Scenario) -> None:
    steady = scenario.phases["steady"]
    assert len(steady.intervals) >= STEADY_S / TOP_INTERVAL_S * 0.9  # top really watched it
    written = {f["kind"] for obj in steady.intervals for f in obj["files"] if f["write_bytes"]}
    assert {"redo", "binlog"} <= written, written  # the load really ran
    live = {t["explanation"] for obj in steady.intervals for t in obj["bursts"]}
    assert not live, live
    assert steady.trace_bursts == [], [t["explanation"] for t in steady.trace_bursts]


# ----------------------------------------------------------------- the periodic job


def _job_trains(trains: list[dict[str, Any]], s: Scenario) -> list[dict[str, Any]]:
    return [t for t in trains if t["file"] == s.job_file and t["metric"] == "write"]


def _the_job_train(trains: list[dict[str, Any]], s: Scenario) -> dict[str, Any]:
    """The one write train on the job's file. Once (a fresh CI run) a trace had none, and
    a bare unpack said no more: when there is not exactly one, say which trains there were."""
    mine = _job_trains(trains, s)
    assert len(mine) == 1, [(x["explanation"], x["onsets_s"]) for x in trains]
    return mine[0]


def _by_the_job(path: str, s: Scenario) -> bool:
    """Files the job itself writes each run (see the module's docstring)."""
    table = s.job_file[: -len(".MYD")]
    return path in (f"{table}.MYD", f"{table}.MYI") or (
        os.path.dirname(path) == s.datadir and _name(path).startswith("aria_log.")
    )


@pytest.mark.bpf
@pytest.mark.mariadb
def test_job_train_live_within_three_periods(scenario: Scenario) -> None:
    s = scenario
    job = s.phases["job"]
    established, first_train = None, {}
    for obj in job.intervals:
        mine = [t for t in _job_trains(obj["bursts"], s) if abs(t["period_s"] / PERIOD_S - 1) <= TOLERANCE]
        if mine and established is None:
            established = obj["time"]
            first_train = mine[0]
        others = [t["explanation"] for t in obj["bursts"] if not _by_the_job(t["file"], s)]
        assert not others, others  # nothing else turned periodic
    assert established is not None, "top never showed the job's train"
    print(f"\ntop: {first_train['explanation']} — {established - s.job_created:.2f} s after CREATE EVENT")
    assert established - s.job_created <= PERIODS_TO_DETECT * PERIOD_S
    assert first_train["bursts"] == 3 and first_train["bytes_per_burst"] == s.burst_bytes
    # once established it stays, and its period stays within the tolerance
    after = [obj for obj in job.intervals if obj["time"] >= established]
    for obj in after:
        t = _the_job_train(obj["bursts"], s)
        assert abs(t["period_s"] / PERIOD_S - 1) <= TOLERANCE, t
    last = _the_job_train(after[-1]["bursts"], s)
    assert last["bursts"] == RUNS and last["missed"] == 0, (last, s.phases["job"].end - s.job_created)
    assert last["bytes_per_burst"] == s.burst_bytes and last["ops_per_burst"] == s.burst_writes
    assert last["explanation"] == f"periodic.MYD · {s.burst_writes} × 128 KiB writes · every {PERIOD_S} s → unknown"


@pytest.mark.bpf
@pytest.mark.mariadb
def test_job_train_in_the_trace(scenario: Scenario) -> None:
    s = scenario
    trains = s.phases["job"].trace_bursts
    t = _the_job_train(trains, s)
    assert abs(t["period_s"] / PERIOD_S - 1) <= TOLERANCE, t
    assert t["bursts"] == RUNS and t["missed"] == 0
    assert t["bytes_per_burst"] == s.burst_bytes and t["ops_per_burst"] == s.burst_writes
    assert t["share_of_file_bytes"] == 1.0  # the file is written by the job only
    # each burst at a run of the event: whole seconds after the first one
    assert all(abs((b - t["onsets_s"][0]) - i * PERIOD_S) <= 1.0 for i, b in enumerate(t["onsets_s"]))
    others = [x["explanation"] for x in trains if not _by_the_job(x["file"], s)]
    assert not others, others


# ----------------------------------------------------------------- once-a-second timers of a steady load


@pytest.mark.bpf
@pytest.mark.mariadb
def test_trx_commit_2_redo_sync_train_named(scenario: Scenario) -> None:
    trains = scenario.phases["trx2"].trace_bursts
    redo = [t for t in trains if _name(t["file"]) == "ib_logfile0"]
    assert [t["metric"] for t in redo] == ["sync"], [t["explanation"] for t in trains]
    (t,) = redo
    assert abs(t["period_s"] - 1) <= TOLERANCE and t["bursts"] >= ONE_SECOND_PHASE_S - 2
    assert t["explanation"] == "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2"


@pytest.mark.bpf
@pytest.mark.mariadb
def test_page_cleaner_second_loop_named(scenario: Scenario) -> None:
    trains = scenario.phases["page_cleaner"].trace_bursts
    log = [t for t in trains if t["kind"] == "binlog" or (t["kind"] == "redo" and t["metric"] != "write")]
    assert not log, [t["explanation"] for t in trains]
    for t in trains:
        if t["kind"] == "redo":  # the redo write that comes before each flush (module docstring)
            assert abs(t["period_s"] - 1) <= TOLERANCE, t
    pages = [t for t in trains if t["kind"] in ("system", "table") and t["metric"] == "sync"]
    assert "ibdata1" in {_name(t["file"]) for t in pages}, [t["explanation"] for t in trains]
    for t in pages:
        assert abs(t["period_s"] - 1) <= TOLERANCE, t
        assert t["explanation"] == (
            f"{_name(t['file'])} fdatasync once a second → after the page flush of a 1 s loop: "
            "the 5.5 master thread or the 5.6+ page cleaner"
        ), t


# ----------------------------------------------------------------- the job alone, in a trace's bins


KDEV = (259 << 20) | 2
START_NS = 10**12


def _job_trace(path: Path, period: int, phase: float, runs: int) -> None:
    """What the job phase's trace holds: `runs` runs of the job, `period` s apart
    give or take the scheduler's few ms, each 31 writes (4,048,000 B) within ~35 ms
    starting `phase` s into the trace's second, in a file nothing else writes."""
    jitter = np.random.default_rng(period * 1000 + runs).uniform(-0.005, 0.005, runs)
    w = TraceWriter(str(path), TraceMeta("h", "k", 1, None, "x", "/d", 1e9, START_NS, "test"))
    for k in range(runs):
        e = np.zeros(31, EVENT_DTYPE)
        t0 = phase + k * period + jitter[k]
        e["ts_ns"] = START_NS + np.rint((t0 + np.arange(31) * 0.0011) * 1e9).astype(np.int64)
        e["dev"], e["ino"], e["op"], e["tid"], e["latency_ns"] = KDEV, 1, 0, 7, 1000
        e["result"] = 131072
        e["result"][-1] = 4_048_000 - 30 * 131072
        w.write(e, {(KDEV, 1): FileInfo("/d/bursts/periodic.MYD", "myisam", None, False)}, {7: "mariadbd"}, 0)
    w.close(0, end_wall=1e9 + phase + runs * period)


@pytest.mark.parametrize("period", [3, 4, 5, 6, 8])
def test_a_job_alone_in_its_file_is_a_train_at_any_length(period: int, tmp_path: Path) -> None:
    """A train for every number of runs from three on, whatever the phase of the runs
    in the trace's bins: 0.97 s and 0.985 s put each run's ~35 ms across a second's
    edge. (In 1 s bins a run across an edge filled two: six runs at 4 s then left
    half the file's bins busy, and a fresh CI run's job phase had no write train.
    Before that, the chance test of long chains counted the chain's own bursts as
    still to come: six runs at 3 or 4 s, and seven at 3 s, looked like chance.)"""
    for phase in (0.01, 0.3, 0.97, 0.985):
        for n in range(3, 16):
            trace = tmp_path / f"job-{phase}-{n}.trace"
            _job_trace(trace, period, phase, n)
            trains = trains_from_trace(TraceReader(str(trace)))
            got = [(t.metric, t.bursts, t.missed, t.bytes_per_burst, t.ops_per_burst) for t in trains]
            assert got == [("write", n, 0, 4_048_000, 31)], (phase, n, [t.explanation for t in trains])
            assert abs(trains[0].period_s / period - 1) <= TOLERANCE, (phase, n, trains[0].period_s)


def test_periodic_writer_rejects_what_the_event_scheduler_cannot_do() -> None:
    db = MariaDB()  # not started: the checks come first
    for bad in ({"period_s": 0}, {"period_s": 2.5}, {"rows": 0}, {"row_bytes": 20000}, {"table": "t; DROP"}):
        with pytest.raises(ValueError):
            PeriodicBulkWriter(db, **bad)  # type: ignore[arg-type]
    writer = PeriodicBulkWriter(db, period_s=5, schema="s", table="t")
    assert writer.describe() == "every 5 s an event rewrites s.t (MyISAM, 4000 rows of 1000B)"
