"""Trains named by the server itself (--mysql), end to end on a real MariaDB.

One sandbox with innodb_flush_log_at_trx_commit=2 under a steady sysbench load (commits
do not sync the redo log; InnoDB syncs it once every innodb_flush_log_at_timeout = 1 s),
and the periodic job of the demo: a MariaDB event that rewrites a MyISAM table every
PERIOD_S s (devtools.workload.PeriodicBulkWriter). `top --json --mysql` watches it all
and `record --mysql` records the job's runs; the truths:

- the job's .MYD train is named after the event, with its period and table, both live
  (top) and in the trace (report, from the facts record stored with its status samples);
  it leads the banner (the most bytes per period; the job's Aria record of each run in
  mysql.event is 4 KiB);
- the redo log's 1 s fdatasync train in the trace is named after the server's
  innodb_flush_log_at_trx_commit=2 and innodb_flush_log_at_timeout;
- what the server said is what it has: the facts read back from the status samples hold
  the event with its interval and the tables its definition writes and reads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from mysqlio.bursts.live import banner_order
from mysqlio.bursts.train import Train
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import TopCollector, attached_line, report_json
from mysqlio.devtools.workload import PeriodicBulkWriter
from mysqlio.mysql_conn import ConnectionOptions, Connector
from mysqlio.server_status import BackgroundSampler, StatusSampler
from mysqlio.server_timers import REFRESH_S, facts_in_samples

PERIOD_S = 4
RUNS = 6
TOP_INTERVAL_S = 0.25
RATE = 150
SCHEMA, TABLE = "causes", "bulk"
ATTACH_S = 10  # the job's first run this long after CREATE EVENT
PAGE_CLEANER_S = 10.0


def _start_record(pid: int, trace: str) -> subprocess.Popen[str]:
    """`mysqlio record --mysql`, once it records (its notes about the server come first)."""
    rec = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", "record", "-p", str(pid), "-o", trace, "--mysql"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert rec.stderr is not None
    lines = [attached_line(rec.stderr)]
    while not lines[-1].startswith("mysqlio: recording pid") and len(lines) < 5:
        lines.append(attached_line(rec.stderr))
    assert lines[-1].startswith("mysqlio: recording pid"), lines
    return rec


@pytest.fixture(scope="module")
def run(bpf_ready: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("server_causes")
    trace, flushing_trace = str(work / "job.trace"), str(work / "page_cleaner.trace")
    options = MariaDBOptions(
        sync_binlog=1,
        redo_log_mb=256,
        extra={
            "innodb_flush_log_at_trx_commit": "2",
            "innodb_max_dirty_pages_pct": "90",  # the page cleaner idle: no page trains
            "innodb_max_dirty_pages_pct_lwm": "0",
        },
    )
    with MariaDB(options) as db:
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        writer = PeriodicBulkWriter(db, period_s=PERIOD_S, schema=SCHEMA, table=TABLE)
        top = None
        try:
            bench.prepare()
            writer.create_table()
            bench.start(600, rate=RATE)
            # the event exists before the tracers start (they read the events at start, then
            # every server_timers.REFRESH_S); its first run once both are attached
            first = writer.start(delay_s=ATTACH_S)
            top = TopCollector(db.pid, TOP_INTERVAL_S, ["--mysql"])
            top.wait_until(0, timeout_s=60)
            rec = _start_record(db.pid, trace)
            assert time.time() < first - 0.5, "the tracers took longer than ATTACH_S to attach"
            time.sleep(max(0.0, first + (RUNS - 1) * PERIOD_S + 1.5 - time.time()))
            rec.send_signal(signal.SIGINT)
            _, err = rec.communicate(timeout=60)
            assert rec.returncode == 0, err
            writer.stop()
            code = top.stop()
            assert code == 0, f"mysqlio top exited {code}: {top.stderr()}"
            truth = {
                "burst_bytes": writer.burst_bytes(),
                "burst_writes": writer.burst_writes(),
                "trx_commit": db.sql("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")[0][0],
            }
            # then the page cleaner flushes every second (mysql-io-paths.md, observed in
            # test_bursts_mariadb): recorded anew, so the trace's facts hold the new setting
            db.sql("SET GLOBAL innodb_max_dirty_pages_pct = 0")
            rec = _start_record(db.pid, flushing_trace)
            time.sleep(PAGE_CLEANER_S)
            rec.send_signal(signal.SIGINT)
            _, err = rec.communicate(timeout=60)
            assert rec.returncode == 0, err
            truth["flushing"] = dict(
                db.sql(
                    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME "
                    "IN ('INNODB_IO_CAPACITY', 'INNODB_IO_CAPACITY_MAX', 'INNODB_ADAPTIVE_FLUSHING', "
                    "'INNODB_ADAPTIVE_FLUSHING_LWM', 'INNODB_MAX_DIRTY_PAGES_PCT', 'INNODB_MAX_DIRTY_PAGES_PCT_LWM')"
                )
            )
        finally:
            if top is not None:
                top.stop()
            bench.stop()
        report = report_json(trace)
        return {
            "intervals": top.intervals,
            "report": report,
            "flushing_report": report_json(flushing_trace),
            "data_file": writer.data_file,
            "event": f"{SCHEMA}.{writer.event}",
            **truth,
        }


def _named(event: str) -> str:
    return f"event {event} (every {PERIOD_S} s, writes {SCHEMA}.{TABLE})"


@pytest.mark.bpf
@pytest.mark.mariadb
def test_the_server_facts_as_read(run: dict[str, Any]) -> None:
    facts = facts_in_samples(run["report"]["server_status"])
    assert facts is not None, "record --mysql stored no facts"
    assert facts.text("innodb_flush_log_at_trx_commit") == run["trx_commit"] == "2"
    assert facts.scheduler_on
    (event,) = [e for e in facts.events if e.qualified == run["event"]]
    assert event.interval_s == PERIOD_S
    assert event.writes == (f"{SCHEMA}.{TABLE}",)
    assert event.reads == (f"{SCHEMA}.seq_1_to_4000",)


@pytest.mark.bpf
@pytest.mark.mariadb
def test_top_names_the_job_after_its_event_and_leads_the_banner_with_it(run: dict[str, Any]) -> None:
    mine = [
        (obj, t)
        for obj in run["intervals"]
        for t in obj["bursts"]
        if t["file"] == run["data_file"] and t["metric"] == "write"
    ]
    assert mine, "top never showed the job's train"
    obj, last = mine[-1]
    assert last["bytes_per_burst"] == run["burst_bytes"] and last["ops_per_burst"] == run["burst_writes"]
    expected = f"{TABLE}.MYD · {run['burst_writes']} × 128 KiB writes · every {PERIOD_S} s → {_named(run['event'])}"
    assert last["explanation"] == expected
    # named so from the first interval that shows it (the writes per burst may be counted
    # before the burst has ended: the live figure, refreshed once it has)
    assert {t["explanation"].split(" → ")[1] for _, t in mine} == {_named(run["event"])}
    print(f"\ntop: {expected}; beside it: {[t['explanation'] for t in obj['bursts'] if t is not last]}")
    # the banner's first train, by the banner's own order, in every interval that shows the job
    for obj, _ in mine:
        trains = [Train(**{k: v for k, v in x.items() if k in Train.__dataclass_fields__}) for x in obj["bursts"]]
        first = banner_order(trains)[0]
        assert (first.file, first.metric) == (run["data_file"], "write"), [x.explanation for x in banner_order(trains)]


@pytest.mark.bpf
@pytest.mark.mariadb
def test_report_names_the_job_and_the_redo_sync_from_the_trace(run: dict[str, Any]) -> None:
    bursts = run["report"]["bursts"]
    print("\nreport: " + "\n        ".join(t["explanation"] for t in bursts))
    (job,) = [t for t in bursts if t["file"] == run["data_file"] and t["metric"] == "write"]
    assert job["bytes_per_burst"] == run["burst_bytes"] and job["bursts"] == RUNS
    assert job["explanation"].endswith(f"→ {_named(run['event'])}")
    # the redo log's syncs once a second, and the pages they write back (by fdatasync)
    redo = [t for t in bursts if os.path.basename(t["file"]) == "ib_logfile0"]
    assert {t["metric"] for t in redo} <= {"sync", "writeback"}, [t["explanation"] for t in bursts]
    (t,) = [t for t in redo if t["metric"] == "sync"]
    assert abs(t["period_s"] - 1) <= 0.05 and t["bursts"] >= (RUNS - 1) * PERIOD_S - 2, t
    why = (
        "innodb_flush_log_at_trx_commit=2: the redo log is synced every innodb_flush_log_at_timeout=1 s, not at commit"
    )
    assert t["explanation"] == f"ib_logfile0 fdatasync once a second → {why}"
    for wb in redo:
        assert wb["metric"] == "sync" or (wb["writeback_by"] == "fdatasync" and wb["explanation"].endswith(why)), wb


@pytest.mark.bpf
@pytest.mark.mariadb
def test_page_cleaner_once_a_second_named_with_the_servers_flushing_settings(run: dict[str, Any]) -> None:
    bursts = run["flushing_report"]["bursts"]
    print("\npage cleaner: " + "\n              ".join(t["explanation"] for t in bursts))
    v = run["flushing"]  # the server's own values, read apart from mysqlio
    assert v["INNODB_MAX_DIRTY_PAGES_PCT"].startswith("0")
    settings = (
        f"innodb_io_capacity={v['INNODB_IO_CAPACITY']} pages/s (max {v['INNODB_IO_CAPACITY_MAX']}); "
        f"adaptive flushing {v['INNODB_ADAPTIVE_FLUSHING']} from {float(v['INNODB_ADAPTIVE_FLUSHING_LWM']):g}% "
        f"of the redo log; dirty pages max {float(v['INNODB_MAX_DIRTY_PAGES_PCT']):g}%, "
        f"lwm {float(v['INNODB_MAX_DIRTY_PAGES_PCT_LWM']):g}%"
    )
    pages = [t for t in bursts if t["kind"] in ("system", "table") and t["metric"] == "sync"]
    assert "ibdata1" in {os.path.basename(t["file"]) for t in pages}, [t["explanation"] for t in bursts]
    for t in pages:
        assert abs(t["period_s"] - 1) <= 0.05, t
        assert t["explanation"] == (
            f"{os.path.basename(t['file'])} fdatasync once a second → the page cleaner's 1 s loop: {settings}"
        ), t


@pytest.mark.mariadb
def test_the_settings_and_events_are_read_again_every_refresh_period() -> None:
    """At the first sample, then only once REFRESH_S have passed on the sampler's clock (a
    clock of the test's, so no waiting); a sample gives them as new when they changed."""
    now = [1000.0]
    with MariaDB(MariaDBOptions()) as db:
        sampler = StatusSampler(Connector.resolve(ConnectionOptions(), db.pid), clock=lambda: now[0])
        try:
            first = sampler.sample()
            assert first.error is None and first.facts is not None and first.facts_new
            assert "facts" in first.to_json()
            assert first.facts.text("aria_checkpoint_interval") == "30"
            assert not [e for e in first.facts.events if e.schema == "refresh"]
            db.sql(
                "SET GLOBAL aria_checkpoint_interval = 20; SET GLOBAL event_scheduler = ON; "
                "CREATE DATABASE refresh; CREATE TABLE refresh.t (a INT) ENGINE=MyISAM; "
                "CREATE TABLE refresh.i (a INT) ENGINE=InnoDB; "
                "CREATE EVENT refresh.every_7_s ON SCHEDULE EVERY 7 SECOND DO INSERT INTO refresh.t VALUES (1); "
                "CREATE EVENT refresh.every_2_min ON SCHEDULE EVERY '2:05' MINUTE_SECOND "
                "DO UPDATE refresh.i SET a = a + 1"
            )
            now[0] += REFRESH_S - 1
            same = sampler.sample()
            assert same.facts is first.facts and not same.facts_new and "facts" not in same.to_json()
            now[0] += 1
            new = sampler.sample()
            assert new.facts_new and new.facts is not None and new.facts != first.facts
            assert new.facts.text("aria_checkpoint_interval") == "20" and new.facts.scheduler_on
            events = {e.name: e for e in new.facts.events if e.schema == "refresh"}
            assert [(e.name, e.interval_s, e.writes, e.reads) for e in events.values()] == [
                ("every_2_min", 125.0, ("refresh.i",), ()),
                ("every_7_s", 7.0, ("refresh.t",), ()),
            ]
            assert new.facts.engines == {"refresh.i": "InnoDB", "refresh.t": "MyISAM"}
            now[0] += REFRESH_S
            unchanged = sampler.sample()  # read again, nothing changed: not new
            assert unchanged.facts == new.facts and not unchanged.facts_new
        finally:
            sampler.close()
        # top's worker: read at start (open), and again after handing a sample over, never
        # while top waits for one
        background = BackgroundSampler(
            StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid), clock=lambda: now[0]), wait_s=5
        )
        try:
            a = background.take()
            assert a.facts is not None and a.facts_new and a.facts.text("aria_checkpoint_interval") == "20"
            db.sql("SET GLOBAL aria_checkpoint_interval = 25")
            now[0] += REFRESH_S
            b = background.take()  # handed over first, then the facts are read again
            assert b.facts is a.facts and not b.facts_new
            c = background.take()
            assert c.facts_new and c.facts is not None and c.facts.text("aria_checkpoint_interval") == "25"
        finally:
            background.close()
