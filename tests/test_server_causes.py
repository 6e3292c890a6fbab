"""A train's cause from what the server says (--mysql): the pure parts. The settings and
events are constructed here; tests/test_server_causes_mariadb.py reads them from a real
server and checks the names end to end."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mysqlio.bursts.detect import detect
from mysqlio.bursts.explain import explain
from mysqlio.bursts.live import BurstTracker, banner_order
from mysqlio.bursts.server_causes import server_cause, table_of
from mysqlio.bursts.train import Series, Train
from mysqlio.render import Header, render_screen
from mysqlio.server_status import ServerStatus
from mysqlio.server_timers import (
    ServerEvent,
    ServerFacts,
    event_tables,
    facts_in_samples,
    interval_seconds,
)

SNAPSHOTS = Path(__file__).parent / "snapshots"
DATADIR = "/var/lib/mysql"
DEMO_BODY = (
    "BEGIN DELETE FROM mysqlio_demo.bulk_load; INSERT INTO mysqlio_demo.bulk_load "
    "SELECT seq, REPEAT('x', 1000) FROM mysqlio_demo.seq_1_to_4000; END"
)
MARIADB_DEFAULTS = {
    "version": "10.11.14-MariaDB",
    "datadir": DATADIR + "/",
    "innodb_flush_log_at_trx_commit": "1",
    "innodb_flush_log_at_timeout": "1",
    "innodb_io_capacity": "200",
    "innodb_io_capacity_max": "2000",
    "innodb_adaptive_flushing": "ON",
    "innodb_adaptive_flushing_lwm": "10.000000",
    "innodb_max_dirty_pages_pct": "90.000000",
    "innodb_max_dirty_pages_pct_lwm": "0.000000",
    "innodb_doublewrite": "ON",
    "aria_checkpoint_interval": "30",
    "event_scheduler": "ON",
    "sync_binlog": "0",
    "flush_time": "0",
}


def _facts(events: tuple[ServerEvent, ...] = (), **settings: str) -> ServerFacts:
    return ServerFacts({**MARIADB_DEFAULTS, **settings}, events)


DEMO_EVENT = ServerEvent(
    "mysqlio_demo", "bulk_load_every_n_s", 5.0, *event_tables(DEMO_BODY, "mysqlio_demo")
)  # fmt: skip


def _train(path: str, kind: str, metric: str, period: float, **kw: Any) -> Train:
    fields: dict[str, Any] = dict(
        file=path, kind=kind, metric=metric, period_s=period, period_spread_s=0.01, bursts=6, missed=0,
        bytes_per_burst=0, ops_per_burst=1, typical_request_size=None, share_of_file_bytes=None,
        share_of_file_syncs=None, confidence=0.9, first_s=0.0, last_s=5 * period,
    )  # fmt: skip
    fields.update(kw)
    if metric == "sync":
        fields.setdefault("sync_call", "fdatasync")
    return Train(**fields)


# ----------------------------------------------------------------- reading the events


@pytest.mark.parametrize(
    ("value", "unit", "seconds"),
    [
        ("5", "SECOND", 5.0),
        ("2", "MINUTE", 120.0),
        ("1", "HOUR", 3600.0),
        ("1", "DAY", 86400.0),
        ("1", "WEEK", 604800.0),
        ("1:30", "MINUTE_SECOND", 90.0),
        ("'1 02:00:05'", "DAY_SECOND", 86400 + 7205.0),
        ("2:05", "HOUR_SECOND", 125.0),  # missing leading parts are the leftmost ones
        ("1", "MONTH", None),
        ("1", "YEAR", None),
        ("", "SECOND", None),
        ("0", "SECOND", None),
        ("5", "FORTNIGHT", None),
    ],
)
def test_interval_seconds(value: str, unit: str, seconds: float | None) -> None:
    assert interval_seconds(value, unit) == seconds


def test_event_tables_of_the_demo_job() -> None:
    assert event_tables(DEMO_BODY, "mysqlio_demo") == (
        ("mysqlio_demo.bulk_load",),
        ("mysqlio_demo.seq_1_to_4000",),
    )


def test_event_tables_quoting_comments_strings_and_keywords() -> None:
    body = """BEGIN
      -- UPDATE commented.out SET x = 1
      /* INSERT INTO hidden.t VALUES (1) */
      INSERT LOW_PRIORITY IGNORE INTO `my db`.`we``ird` (a) VALUES ('FROM fake.t');
      UPDATE counters c JOIN other.src s ON c.id = s.id SET c.n = s.n;
      DELETE QUICK FROM log WHERE ts < NOW() - INTERVAL 1 DAY;
      TRUNCATE TABLE staging;
      REPLACE INTO s2.t2 SELECT * FROM (SELECT 1) AS d, DUAL;
      CREATE TABLE IF NOT EXISTS made (a INT);
      SELECT COUNT(*) INTO @n FROM log;
    END"""
    written, read = event_tables(body, "app")
    assert written == ("my db.we`ird", "app.counters", "app.log", "app.staging", "s2.t2", "app.made")
    assert read == ("other.src",)


def test_table_of_a_file() -> None:
    assert table_of(f"{DATADIR}/mysqlio_demo/bulk_load.MYD", DATADIR) == "mysqlio_demo.bulk_load"
    assert table_of(f"{DATADIR}/shop/orders#P#p2023.ibd", DATADIR) == "shop.orders"
    assert table_of(f"{DATADIR}/my@0020db/t.ibd", DATADIR) == "my db.t"
    assert table_of(f"{DATADIR}/aria_log.00000001", DATADIR) is None
    assert table_of(f"{DATADIR}/ibdata1", DATADIR) is None
    # the file is elsewhere than the datadir the server gives (a symlink): its own directories
    assert table_of("/data/real/mysqlio_demo/bulk_load.MYD", DATADIR) == "mysqlio_demo.bulk_load"


def test_facts_travel_through_json_and_a_traces_samples() -> None:
    facts = _facts((DEMO_EVENT,))
    assert ServerFacts.from_json(facts.to_json()) == facts
    assert ServerFacts.from_json({"variables": 3}) is None
    assert ServerFacts.from_json(None) is None
    first = ServerStatus(time=1.0, facts=facts, facts_new=True).to_json()
    later = ServerStatus(time=2.0, facts=facts, facts_new=False).to_json()
    assert "facts" in first and "facts" not in later  # stored once, and when they change
    assert facts_in_samples([first, later]) == facts
    assert facts_in_samples([later]) is None  # a trace recorded without them: generic timers


# ----------------------------------------------------------------- matching


MYD = f"{DATADIR}/mysqlio_demo/bulk_load.MYD"


def test_the_demo_job_is_named_after_its_event() -> None:
    t = _train(MYD, "myisam", "write", 5.02, bytes_per_burst=4_048_000, ops_per_burst=31, typical_request_size=130_580)
    assert explain(t) == "bulk_load.MYD · 31 × 128 KiB writes · every 5 s → unknown"  # without --mysql
    assert explain(t, _facts((DEMO_EVENT,))) == (
        "bulk_load.MYD · 31 × 128 KiB writes · every 5 s → "
        "event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load)"
    )
    myi = _train(MYD[:-1] + "I", "myisam", "sync", 5.0)
    assert explain(myi, _facts((DEMO_EVENT,))).endswith(
        "→ event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load)"
    )


def test_what_does_not_name_the_event() -> None:
    t = _train(MYD, "myisam", "write", 5.0, bytes_per_burst=4_048_000)
    assert server_cause(t, _facts((DEMO_EVENT,), event_scheduler="OFF")) is None  # the scheduler runs nothing
    assert server_cause(_train(MYD, "myisam", "write", 6.0), _facts((DEMO_EVENT,))) is None  # another period
    assert server_cause(_train(MYD, "myisam", "write", 5.8), _facts((DEMO_EVENT,))) is None  # 16 % off: out
    other = f"{DATADIR}/mysqlio_demo/seq_1_to_4000.MYD"  # read by the event, not written
    assert server_cause(_train(other, "myisam", "write", 5.0), _facts((DEMO_EVENT,))) is None
    never = ServerEvent("mysqlio_demo", "monthly", None, ("mysqlio_demo.bulk_load",))
    assert server_cause(_train(MYD, "myisam", "write", 5.0), _facts((never,))) is None


def test_the_events_other_files_aria_log_and_binlog() -> None:
    facts = _facts((DEMO_EVENT, ServerEvent("x", "idle_reader", 5.0, (), ("x.t",))))
    aria = _train(f"{DATADIR}/aria_log.00000001", "aria", "sync", 5.0)
    assert explain(aria, facts) == (
        "aria_log.00000001 fdatasync every 5 s → events mysqlio_demo.bulk_load_every_n_s, x.idle_reader "
        "(every 5 s): the scheduler records each run in mysql.event"
    )
    binlog = _train(f"{DATADIR}/mysql-bin.000001", "binlog", "write", 5.0, bytes_per_burst=600, ops_per_burst=2)
    assert explain(binlog, facts).endswith(
        "→ event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load): its statements"
    )
    # the redo log: only events that write InnoDB tables (the demo's is MyISAM)
    redo = _train(f"{DATADIR}/ib_logfile0", "redo", "write", 5.0, bytes_per_burst=60_000, ops_per_burst=3)
    assert server_cause(redo, facts) is None
    innodb = ServerEvent("shop", "totals", 5.0, ("shop.totals", "shop.log"), ("shop.orders",))
    engines = {"shop.totals": "InnoDB", "shop.log": "MyISAM", "mysqlio_demo.bulk_load": "MyISAM"}
    with_innodb = ServerFacts(facts.variables, (*facts.events, innodb), None, engines)
    assert explain(redo, with_innodb).endswith(
        "→ event shop.totals (every 5 s, writes shop.totals): its InnoDB changes"
    )
    assert ServerFacts.from_json(with_innodb.to_json()) == with_innodb


REDO = f"{DATADIR}/ib_logfile0"


def test_redo_sync_once_a_second() -> None:
    t = _train(REDO, "redo", "sync", 1.0, metronome=True)
    generic = "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2"
    assert explain(t) == generic
    assert explain(t, _facts(innodb_flush_log_at_trx_commit="2")) == (
        "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2: the redo log is synced "
        "every innodb_flush_log_at_timeout=1 s, not at commit"
    )
    assert explain(t, _facts(innodb_flush_log_at_trx_commit="1")) == (
        "ib_logfile0 fdatasync once a second → InnoDB's background redo flush every "
        "innodb_flush_log_at_timeout=1 s (innodb_flush_log_at_trx_commit=1 also syncs at commit)"
    )
    # a 3 s timeout: the 1 s train is not that setting, and the generic guess is not said either
    slow = _facts(innodb_flush_log_at_trx_commit="2", innodb_flush_log_at_timeout="3")
    assert explain(t, slow) == "ib_logfile0 fdatasync once a second → unknown"
    t3 = _train(REDO, "redo", "sync", 3.05)
    assert "every innodb_flush_log_at_timeout=3 s, not at commit" in explain(t3, slow)
    write0 = _train(REDO, "redo", "write", 1.0, bytes_per_burst=20_000)
    assert explain(write0, _facts(innodb_flush_log_at_trx_commit="0")).endswith(
        "→ innodb_flush_log_at_trx_commit=0: the redo log is written and synced every innodb_flush_log_at_timeout=1 s"
    )
    wb = _train(REDO, "redo", "writeback", 1.0, bytes_per_burst=20_000, writeback_by="fdatasync")
    assert explain(wb, _facts(innodb_flush_log_at_trx_commit="2")).endswith("→ innodb_flush_log_at_trx_commit=2: "
        "the redo log is synced every innodb_flush_log_at_timeout=1 s, not at commit")  # fmt: skip


def test_page_flushing_once_a_second_quotes_the_flushing_settings() -> None:
    t = _train(f"{DATADIR}/sbtest/sbtest1.ibd", "table", "sync", 1.0)
    assert explain(t, _facts(innodb_max_dirty_pages_pct="0.000000")) == (
        "sbtest1.ibd fdatasync once a second → the page cleaner's 1 s loop: innodb_io_capacity=200 pages/s "
        "(max 2000); adaptive flushing ON from 10% of the redo log; dirty pages max 0%, lwm 0%"
    )
    w = _train(f"{DATADIR}/ibdata1", "system", "write", 1.0, bytes_per_burst=1 << 20, ops_per_burst=64,
               typical_request_size=16384)  # fmt: skip
    assert explain(w, _facts(innodb_adaptive_flushing="OFF", version="5.5.62")) == (
        "ibdata1 · 64 × 16 KiB writes · once a second → page flush (the InnoDB master thread's 1 s loop: "
        "innodb_io_capacity=200 pages/s (max 2000); adaptive flushing OFF; dirty pages max 90%, lwm 0%)"
    )
    # the kernel flusher's own timer stays the kernel's
    fl = _train(f"{DATADIR}/ibdata1", "system", "writeback", 5.0, bytes_per_burst=1 << 20,
                writeback_by="flusher_periodic")  # fmt: skip
    assert explain(fl, _facts()) == explain(fl)


def test_aria_checkpoint_and_myisam_flush_time_from_the_servers_values() -> None:
    aria = _train(f"{DATADIR}/aria_log.00000001", "aria", "sync", 20.0)
    assert explain(aria, _facts(aria_checkpoint_interval="20")).endswith(
        "→ Aria checkpoint, aria_checkpoint_interval=20 s"
    )
    at30 = _train(f"{DATADIR}/aria_log.00000001", "aria", "sync", 30.0)
    assert explain(at30) == "aria_log.00000001 fdatasync every 30 s → Aria checkpoint, every 30 s"
    # the server has checkpoints off (0) or at 20 s: a 30 s train is no checkpoint
    assert explain(at30, _facts(aria_checkpoint_interval="0")).endswith("→ unknown")
    assert explain(at30, _facts(aria_checkpoint_interval="20")).endswith("→ unknown")
    myi = _train(f"{DATADIR}/shop/t.MYI", "myisam", "write", 60.0, bytes_per_burst=1024)
    assert explain(myi, _facts(flush_time="60")).endswith(
        "→ flush_time=60 s: MyISAM tables are closed and flushed every 60 s"
    )
    assert explain(myi, _facts()).endswith("→ unknown")  # flush_time=0: never


def test_detect_explains_with_the_facts() -> None:
    import numpy as np

    written, writes = np.zeros(40), np.zeros(40)
    written[2::5], writes[2::5] = 4_048_000, 31
    series = Series(MYD, "myisam", 1.0, 0.0, written, writes)
    (t,) = detect(series, facts=_facts((DEMO_EVENT,)))
    assert t.explanation.endswith("→ event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load)")
    (t,) = detect(series)
    assert t.explanation.endswith("→ unknown")


# ----------------------------------------------------------------- the banner


def test_banner_order_bytes_per_period_first() -> None:
    aria = _train(f"{DATADIR}/aria_log.00000001", "aria", "write", 5.0, bytes_per_burst=4096, confidence=0.99)
    myd = _train(MYD, "myisam", "write", 5.0, bytes_per_burst=4_048_000, confidence=0.6)
    sync1 = _train(REDO, "redo", "sync", 1.0, ops_per_burst=1, confidence=0.99)
    sync3 = _train(f"{DATADIR}/ibdata1", "system", "sync", 1.0, ops_per_burst=3, confidence=0.5)
    assert banner_order([sync1, aria, sync3, myd]) == [myd, aria, sync3, sync1]
    # the disk's spike of the MyISAM writes (rounded up to pages: more bytes) comes after them
    spike = _train(MYD, "myisam", "writeback", 5.0, bytes_per_burst=4_050_944, twin="write", confidence=0.99)
    myd.twin = "writeback"
    assert banner_order([spike, aria, myd]) == [myd, spike, aria]


def _demo_second(t: int) -> list[dict[str, Any]]:
    """One second of the demo: the redo log steady; every 5 s the job's MyISAM table (4 MiB
    in 31 writes, an fdatasync), its .MYI header, the scheduler's Aria record (4 KiB)."""
    files = [
        {"path": REDO, "kind": "redo", "write_bytes": 300_000, "write_ops": 200, "sync_ops": 200, "fdatasync_ops": 200}
    ]
    if t % 5 == 2:
        files += [
            {"path": MYD, "kind": "myisam", "write_bytes": 4_048_000, "write_ops": 31, "sync_ops": 1,
             "fdatasync_ops": 1},
            {"path": MYD[:-1] + "I", "kind": "myisam", "write_bytes": 1024, "write_ops": 1, "sync_ops": 1,
             "fdatasync_ops": 1},
            {"path": f"{DATADIR}/aria_log.00000001", "kind": "aria", "write_bytes": 4096, "write_ops": 1,
             "sync_ops": 1, "fdatasync_ops": 1},
        ]  # fmt: skip
    return files


class _Interval:
    """What the tracker's feed() reads of a model.Interval (with --mysql: the server's status)."""

    def __init__(self, t: float, files: list[dict[str, Any]], server: ServerStatus | None) -> None:
        self.time, self.interval_s, self.files, self.server = t, 1.0, files, server


def test_live_banner_names_the_event_and_leads_with_the_largest_train() -> None:
    plain, named = BurstTracker(), BurstTracker()
    facts = _facts((DEMO_EVENT,))
    for t in range(1, 61):
        plain.feed(_Interval(float(t), _demo_second(t), None))
        # the facts come with the first sample only (later samples carry them in memory)
        named.feed(_Interval(float(t), _demo_second(t), ServerStatus(time=t, facts=facts if t == 1 else None)))
    assert named.facts == facts
    trains = named.active_trains()
    assert {os.path.basename(t.file) for t in trains} >= {"bulk_load.MYD", "aria_log.00000001"}
    banner = named.banner() or ""
    assert banner.startswith(
        "periodic: bulk_load.MYD · 31 × 128 KiB writes · every 5 s → "
        "event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load)  (+"
    ), banner
    assert (plain.banner() or "").startswith("periodic: bulk_load.MYD · 31 × 128 KiB writes · every 5 s → unknown")
    # the snapshot: the banner on the screen of `top`
    header = Header(4242, "MariaDB 10.11.14", 60.0, 1.0, 4.3e6, 0.0, 203, 0, "file", "write", DATADIR, banner=banner)
    console = Console(width=100, force_terminal=True, color_system=None, record=True, legacy_windows=False)
    console.print(render_screen(header, [], 100, 12))
    text = console.export_text()
    snap = SNAPSHOTS / "top_banner_event_100.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()
