"""MySQL's redo directory as one series for the burst detector (bursts.fold), and the causes
MySQL's own settings give its trains: the pure parts, on synthetic traces and facts.
tests/test_mysql.py checks them on a real MySQL 9.7.

MySQL >= 8.0.30 recycles its 32 redo files by renaming them every few seconds: a redo
sync once a second lands on a few beats of each file. The traces here are built the same
way (a file written and synced for 2 to 5 s, renamed from its spare name `_tmp` when it
becomes the current one, a few extra syncs when InnoDB moves on) and the truths are the
generator's own: when the timer synced, how many syncs and files there were."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mysqlio.bursts.explain import explain
from mysqlio.bursts.fold import folded_label, redo_dir
from mysqlio.bursts.live import BurstTracker
from mysqlio.bursts.series import trains_from_trace
from mysqlio.bursts.server_causes import server_cause
from mysqlio.bursts.train import Train
from mysqlio.events import EVENT_DTYPE
from mysqlio.report.build import build_report
from mysqlio.server_status import ServerStatus
from mysqlio.server_timers import VARIABLES, ServerFacts
from mysqlio.trace import FileInfo, TraceMeta, TraceReader, TraceWriter

DATADIR = "/var/lib/mysql"
REDO_DIR = f"{DATADIR}/#innodb_redo"
KDEV = (8 << 20) | 2
START = 50_000_000_000
SECONDS = 40
SYNC_AT = 0.45  # the timer's sync, this far into each second
# the seconds InnoDB moves on to the next redo file (irregular: as the load fills them)
SWITCHES = (3, 5, 9, 12, 16, 19, 21, 26, 30, 33, 37)
WRITE = 0
FDATASYNC = 3

# SHOW GLOBAL VARIABLES, where they matter here, of Oracle MySQL 9.7 with its defaults on 2
# CPUs with the binary log on (innodb_log_writer_threads is OFF below 32 CPUs then; as the
# sid-mysql root's server says) but innodb_flush_log_at_trx_commit=2, and of MariaDB 10.11
MYSQL_97 = {
    "version": "9.7.4-2",
    "datadir": DATADIR + "/",
    "innodb_flush_log_at_trx_commit": "2",
    "innodb_flush_log_at_timeout": "1",
    "innodb_log_writer_threads": "OFF",
    "innodb_page_cleaners": "1",
    "innodb_io_capacity": "200",
    "innodb_io_capacity_max": "2000",
    "event_scheduler": "ON",
    "sync_binlog": "1",
    "binlog_group_commit_sync_delay": "0",
    "binlog_group_commit_sync_no_delay_count": "0",
    "flush_time": "0",
}
MARIADB = {
    "version": "10.11.14-MariaDB",
    "datadir": DATADIR + "/",
    "innodb_flush_log_at_trx_commit": "2",
    "innodb_flush_log_at_timeout": "1",
    "innodb_page_cleaners": "1",  # as 10.5 shows it (and ignores it; 10.6+ has none)
    "innodb_io_capacity": "200",
    "sync_binlog": "1",
}


def _mysql(**settings: str) -> ServerFacts:
    return ServerFacts({**MYSQL_97, **settings})


def test_the_new_settings_are_read() -> None:
    for name in ("innodb_log_writer_threads", "innodb_page_cleaners", "binlog_group_commit_sync_delay"):
        assert name in VARIABLES
    assert _mysql().mariadb is False and ServerFacts(MARIADB).mariadb is True and ServerFacts().mariadb is None


# ----------------------------------------------------------------- the synthetic redo log


@dataclass
class RedoRun:
    """What the generator did: the truths."""

    timer_s: list[float] = field(default_factory=list)  # each timer sync
    syncs: int = 0  # all syncs, the timer's and those at each switch
    files: set[int] = field(default_factory=set)  # inodes that took any request


def _redo_seconds(
    directory: str, switch_ms: tuple[int, int] = (700, 900), seed: int = 5
) -> tuple[list[tuple[np.ndarray, dict[tuple[int, int], FileInfo]]], RedoRun]:
    """Per second: its events (steady 2 KiB writes, the timer's fdatasync at SYNC_AT + 0..20 ms,
    at a switch the new file's and the old one's syncs, `switch_ms` into the second) and
    each file's name then. From 700 ms on, a switch's syncs are two quiet 0.1 s bins from
    the timer's (one quiet bin would not split their bursts: bursts.find)."""
    rng = np.random.default_rng(seed)
    run = RedoRun()
    current, number = 0, 7  # the current file (ino 100 + current), its #ib_redoN
    out = []
    for second in range(SECONDS):
        base = START + second * 10**9
        ev = []
        if second in SWITCHES:
            old, current, number = current, current + 1, number + 1
            at = base + int(rng.integers(*switch_ms)) * 10**6  # as the load fills the file: no timer
            switch = np.zeros(3, EVENT_DTYPE)
            switch["ts_ns"], switch["ino"], switch["op"] = (
                at + np.arange(3) * 500_000,
                [100 + current, 100 + old, 100 + old],
                FDATASYNC,
            )
            ev.append(switch)
        writes = np.zeros(50, EVENT_DTYPE)
        writes["ts_ns"] = base + np.arange(50) * 20_000_000 + rng.integers(0, 1_000_000, 50)
        writes["ino"], writes["op"], writes["result"] = 100 + current, WRITE, 2048
        sync = np.zeros(1, EVENT_DTYPE)
        sync["ts_ns"] = base + int(SYNC_AT * 1e9) + int(rng.integers(0, 20_000_000))
        sync["ino"], sync["op"] = 100 + current, FDATASYNC
        ev += [writes, sync]
        run.timer_s.append((int(sync["ts_ns"][0]) - START) / 1e9)
        e = np.concatenate(ev)
        e = e[np.argsort(e["ts_ns"], kind="stable")]
        e["dev"], e["tid"], e["latency_ns"] = KDEV, 7, 1000
        is_sync = e["op"] == FDATASYNC
        run.syncs += int(is_sync.sum())
        run.files |= set(e["ino"].tolist())
        # the current file by its number, the next one still a spare (as InnoDB renames them)
        names = {
            (KDEV, 100 + current): f"{directory}/#ib_redo{number}",
            (KDEV, 101 + current): f"{directory}/#ib_redo{number + 1}_tmp",
        }
        if second in SWITCHES:
            names[(KDEV, 100 + current - 1)] = f"{directory}/#ib_redo{number - 1}"
        files = {key: FileInfo(path, "redo", None, False) for key, path in names.items()}
        out.append((e, files))
    return out, run


def _redo_trace(path: Path, directory: str, facts: ServerFacts | None = None) -> RedoRun:
    seconds, run = _redo_seconds(directory)
    w = TraceWriter(str(path), TraceMeta("h", "k", 1, None, "9.7.4-2", DATADIR, 1e9, START, "test"))
    for i, (events, files) in enumerate(seconds):
        status = [ServerStatus(time=1e9 + i, facts=facts, facts_new=True).to_json()] if facts and i == 0 else None
        w.write(events, files, {7: "ib_log_flush"}, 0, server_status=status)
    w.close(0, end_wall=1e9 + SECONDS)
    return run


def test_the_redo_directory_is_one_series_in_a_trace(tmp_path: Path) -> None:
    """The once-a-second sync on ever-changing files is one train of the directory, of
    every timer sync, labelled with how many files it spans; writes make none."""
    run = _redo_trace(tmp_path / "redo.trace", REDO_DIR)
    trains = trains_from_trace(TraceReader(str(tmp_path / "redo.trace")))
    assert [(t.file, t.kind, t.metric) for t in trains] == [(REDO_DIR, "redo", "sync")], [t.explanation for t in trains]
    (t,) = trains
    assert t.files == len(run.files) == len(SWITCHES) + 1  # the first file and one more at each switch
    assert abs(t.period_s - 1.0) <= 0.02 and t.bursts == SECONDS and t.missed == 0
    assert [round(b.start_s, 1) for b in t.members] == [round(x - x % 0.1, 1) for x in run.timer_s]
    assert t.ops_per_burst == 1 and t.share_of_file_syncs == pytest.approx(SECONDS / run.syncs)
    assert t.explanation == (
        f"{folded_label('#innodb_redo', t.files)} fdatasync once a second → innodb_flush_log_at_trx_commit=2"
    )
    obj = t.to_json()
    assert obj["file"] == REDO_DIR and obj["files"] == t.files and len(obj["onsets_s"]) == SECONDS


def test_files_of_another_directory_stay_apart(tmp_path: Path) -> None:
    """The same redo files anywhere but in #innodb_redo are files of their own: each has five
    beats of the timer at most, no train (what the detector saw before it folded them)."""
    trace = tmp_path / "apart.trace"
    _redo_trace(trace, f"{DATADIR}/redo_elsewhere")
    assert trains_from_trace(TraceReader(str(trace))) == []


def test_the_report_names_the_log_flusher_from_the_traces_facts(tmp_path: Path) -> None:
    trace = tmp_path / "facts.trace"
    _redo_trace(trace, REDO_DIR, _mysql(innodb_log_writer_threads="ON"))
    (t,) = build_report(TraceReader(str(trace))).bursts or []
    assert t.explanation.endswith(
        "→ innodb_flush_log_at_trx_commit=2: the redo log is synced by the log flusher thread every "
        "innodb_flush_log_at_timeout=1 s, not at commit"
    )
    assert t.explanation.startswith(f"#innodb_redo ({t.files} files) fdatasync once a second")


def test_the_live_tracker_folds_the_redo_files_too() -> None:
    """`top` at 0.25 s: the intervals' per-file rows, each under the name its file had at the
    interval's end (as top --json gives them); one train of the directory. The switches'
    syncs come in the timer's interval here: a switch one quiet interval before the next
    beat would open a burst that swallows that beat (the tracker closes a burst after two
    quiet intervals), and a few of those break a live train; `report`, in 0.1 s bins, is
    not affected (the test above)."""
    seconds, run = _redo_seconds(REDO_DIR, switch_ms=(480, 500))
    tracker = BurstTracker()
    tracker.set_facts(_mysql(innodb_log_writer_threads="ON"))
    for second, (events, files) in enumerate(seconds):
        for q in range(4):
            lo, hi = START + second * 10**9 + q * 250_000_000, START + second * 10**9 + (q + 1) * 250_000_000
            mine = events[(events["ts_ns"] >= lo) & (events["ts_ns"] < hi)]
            rows: list[dict[str, Any]] = []
            for ino in np.unique(mine["ino"]).tolist():
                e = mine[mine["ino"] == ino]
                w, s = e[e["op"] == WRITE], e[e["op"] == FDATASYNC]
                rows.append({
                    "path": files[(KDEV, ino)].path, "kind": "redo", "dev": "8:2", "ino": ino,
                    "write_bytes": int(w["result"].sum()), "write_ops": len(w), "sync_ops": len(s),
                    "fdatasync_ops": len(s),
                })  # fmt: skip
            tracker.update((hi - START) / 1e9, 0.25, rows)
    (t,) = tracker.active_trains()
    assert (t.file, t.kind, t.metric, t.sync_call) == (REDO_DIR, "redo", "sync", "fdatasync")
    assert t.files == len(run.files) and abs(t.period_s - 1.0) <= 0.05
    banner = tracker.banner() or ""
    assert banner == (
        f"periodic: #innodb_redo ({len(run.files)} files) fdatasync once a second → innodb_flush_log_at_trx_commit=2: "
        "the redo log is synced by the log flusher thread every innodb_flush_log_at_timeout=1 s, not at commit"
    )


def test_redo_dir_is_mysqls_directory_of_redo_files_only() -> None:
    assert redo_dir(f"{REDO_DIR}/#ib_redo7", "redo") == REDO_DIR
    assert redo_dir(f"{REDO_DIR}/#ib_redo8_tmp", "redo") == REDO_DIR
    assert redo_dir(f"{DATADIR}/ib_logfile0", "redo") is None  # MariaDB's, and MySQL's before 8.0.30
    assert redo_dir(f"{REDO_DIR}/#ib_redo7", "other") is None
    assert folded_label("#innodb_redo", 1) == "#innodb_redo (1 file)"


# ----------------------------------------------------------------- causes from MySQL's settings


def _train(metric: str, period: float, path: str = REDO_DIR, kind: str = "redo", **kw: Any) -> Train:
    fields: dict[str, Any] = dict(
        file=path, kind=kind, metric=metric, period_s=period, period_spread_s=0.01, bursts=9, missed=0,
        bytes_per_burst=0, ops_per_burst=1, typical_request_size=None, share_of_file_bytes=None,
        share_of_file_syncs=None, confidence=0.9, first_s=0.0, last_s=8 * period, sync_call="fdatasync",
        files=12 if path == REDO_DIR else None,
    )  # fmt: skip
    fields.update(kw)
    return Train(**fields)


FLUSHER = "the redo log is synced by the log flusher thread every innodb_flush_log_at_timeout={} s, not at commit"
MASTER = (
    "the redo log is synced by the InnoDB master thread's 1 s loop, not at commit "
    "(innodb_log_writer_threads=OFF: no log flusher thread)"
)


def test_the_log_flusher_with_log_writer_threads_on() -> None:
    """ON: the log flusher thread's timer is innodb_flush_log_at_timeout (trx_commit 0 or 2)."""
    on = _mysql(innodb_log_writer_threads="ON")
    assert explain(_train("sync", 1.02), on) == (
        "#innodb_redo (12 files) fdatasync once a second → innodb_flush_log_at_trx_commit=2: " + FLUSHER.format(1)
    )
    slow = _mysql(innodb_log_writer_threads="ON", innodb_flush_log_at_timeout="3")
    assert server_cause(_train("sync", 3.1), slow) == "innodb_flush_log_at_trx_commit=2: " + FLUSHER.format(3)
    assert explain(_train("sync", 1.0), slow).endswith("→ unknown")  # not that timer, no guess either
    zero = _mysql(innodb_log_writer_threads="ON", innodb_flush_log_at_trx_commit="0")
    assert server_cause(_train("sync", 1.0), zero) == "innodb_flush_log_at_trx_commit=0: " + FLUSHER.format(1)
    # the log writer writes as the buffer fills, on no timer; with trx_commit=1 the flusher
    # syncs when commits ask: no timer to name
    assert server_cause(_train("write", 1.0, bytes_per_burst=8192), zero) is None
    assert (
        server_cause(_train("sync", 1.0), _mysql(innodb_log_writer_threads="ON", innodb_flush_log_at_trx_commit="1"))
        is None
    )


def test_the_master_thread_with_log_writer_threads_off() -> None:
    """OFF (the default below 32 CPUs with the binary log on): no log thread; the master
    thread's 1 s loop writes and syncs the redo log, whatever innodb_flush_log_at_timeout says."""
    off = _mysql()
    assert server_cause(_train("sync", 1.0), off) == "innodb_flush_log_at_trx_commit=2: " + MASTER
    slow = _mysql(innodb_flush_log_at_timeout="3")
    assert server_cause(_train("sync", 1.0), slow) == "innodb_flush_log_at_trx_commit=2: " + MASTER
    assert server_cause(_train("sync", 3.0), slow) is None
    zero = _mysql(innodb_flush_log_at_trx_commit="0")
    assert server_cause(_train("write", 1.0, bytes_per_burst=8192), zero) == (
        "innodb_flush_log_at_trx_commit=0: the redo log is written and synced by the InnoDB master thread's 1 s loop "
        "(innodb_log_writer_threads=OFF: no log flusher thread)"
    )
    assert server_cause(_train("sync", 1.0), _mysql(innodb_flush_log_at_trx_commit="1")) == (
        "the InnoDB master thread's 1 s loop syncs what commits have not (innodb_flush_log_at_trx_commit=1 syncs "
        "at commit; innodb_log_writer_threads=OFF: no log flusher thread)"
    )
    # the pages the syncs write back, named by the same timer
    wb = _train("writeback", 1.0, bytes_per_burst=300_000, writeback_by="fdatasync")
    assert server_cause(wb, off) == "innodb_flush_log_at_trx_commit=2: " + MASTER


def test_no_mysql_thread_named_on_mariadb() -> None:
    """MariaDB has neither setting nor thread: its text stays the timer's, no thread named."""
    mariadb = ServerFacts(MARIADB)
    t = _train("sync", 1.0, path=f"{DATADIR}/ib_logfile0")
    assert explain(t, mariadb) == (
        "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2: the redo log is synced every "
        "innodb_flush_log_at_timeout=1 s, not at commit"
    )
    page = _train("sync", 1.0, path=f"{DATADIR}/ibdata1", kind="system")
    assert server_cause(page, mariadb) == "the page cleaner's 1 s loop: innodb_io_capacity=200 pages/s"
    binlog = _train("sync", 0.5, path=f"{DATADIR}/mysql-bin.000001", kind="binlog")
    assert server_cause(binlog, mariadb) is None


def test_mysqls_page_cleaners_are_quoted() -> None:
    """MySQL's page cleaners, by their number; its data dictionary (mysql.ibd) is flushed by
    them like any tablespace."""
    page = _train("write", 1.0, path=f"{DATADIR}/sbtest/sbtest1.ibd", kind="table", bytes_per_burst=1 << 20)
    loop = "the page cleaner's 1 s loop (innodb_page_cleaners=4): innodb_io_capacity=200 pages/s (max 2000)"
    assert server_cause(page, _mysql(innodb_page_cleaners="4")) == loop
    dictionary = _train("sync", 1.0, path=f"{DATADIR}/mysql.ibd", kind="dictionary")
    assert explain(dictionary, _mysql(innodb_page_cleaners="4")) == f"mysql.ibd fdatasync once a second → {loop}"
    assert explain(dictionary) == (
        "mysql.ibd fdatasync once a second → after the page flush of a 1 s loop: the 5.5 master thread or the "
        "5.6+ page cleaner"
    )


def test_binlog_group_commit_sync_delay_only_when_it_sets_the_period() -> None:
    """Each group waits binlog_group_commit_sync_delay before its sync with sync_binlog=1:
    under a steady load the binlog's syncs come at that period. Not a timer otherwise."""
    binlog = _train("sync", 0.52, path=f"{DATADIR}/mysql-bin.000002", kind="binlog")
    delayed = _mysql(binlog_group_commit_sync_delay="500000")
    assert explain(binlog, delayed) == (
        "mysql-bin.000002 fdatasync every 0.5 s → binlog group commit: each group waits "
        "binlog_group_commit_sync_delay=500000 µs before its sync"
    )
    assert server_cause(_train("sync", 1.0, path=binlog.file, kind="binlog"), delayed) is None  # another period
    assert server_cause(binlog, _mysql()) is None  # no delay
    assert server_cause(binlog, _mysql(binlog_group_commit_sync_delay="500000", sync_binlog="10")) is None
    count = _mysql(binlog_group_commit_sync_delay="500000", binlog_group_commit_sync_no_delay_count="20")
    assert server_cause(binlog, count) is None  # 20 commits may end the wait first
    written = _train("write", 0.5, path=binlog.file, kind="binlog", bytes_per_burst=4096)
    assert server_cause(written, delayed) is None  # its writes come at commit, before the wait


def test_the_facts_travel_with_the_new_settings() -> None:
    facts = _mysql(innodb_log_writer_threads="ON", binlog_group_commit_sync_delay="1000")
    assert ServerFacts.from_json(facts.to_json()) == facts
