"""Oracle MySQL 9.7 off its default I/O paths, traced from the host: mysqlio against MySQL's
own performance_schema and InnoDB's own counters (issue 56).

ONE server runs with both non-default settings at once, cheaper than a server each, and it
still takes both code paths tests/test_mysql.py's defaults (O_DIRECT + libaio) do not:
- innodb_use_native_aio=OFF: InnoDB's simulated AIO. The page cleaner queues page writes and
  the `ib_io_wr-N` threads make them with pwrite64: no io_submit anywhere, every data-page
  byte seen as a plain syscall (on the defaults the page cleaner calls io_submit);
- innodb_flush_method=fsync: no O_DIRECT; every InnoDB file is written through the page
  cache and made durable by an explicit sync (fdatasync while innodb_use_fdatasync=ON, the
  9.7 default), so syncs are the durable half of the I/O and are checked per file.
The redo log and the binlog take the same path under either setting (buffered pwrite/write
then a sync), so they are the control: the same exact figures as in test_mysql.

Ground truth for syncs. performance_schema's COUNT_MISC mixes syncs with open, close,
create, rename, delete, stat and chsize (9.7 renames and reopens its redo files several
times a second), so it is not a sync count. The exact one is per event: with the consumers
events_waits_current + events_waits_history_long on, every instrumented file operation (of a
thread with history on: every thread by default) is a row with its OPERATION ('sync' for InnoDB's os_file_flush and the binlog's
mysql_file_sync), its file instance and its bytes. The ring is emptied when the window
starts and read when it ends; it is complete when it did not wrap (fewer rows than its size)
and its per-instance 'write' rows equal file_summary_by_instance's COUNT_WRITE deltas. Per
kind there is a second, independent truth: Innodb_os_log_fsyncs (redo syncs) and
Innodb_data_fsyncs (every InnoDB sync, redo included), counted by InnoDB around the syscall.

The window is test_mysql's (quiet edges, sysbench between, `top` and `record` attached):
its helpers are imported, as test_mysql imports from test_server_status.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from test_mysql import (
    MIN_BYTES,
    REDO_MB,
    TABLE_SIZE,
    TABLES,
    TOLERANCE,
    Instances,
    Key,
    Window,
    _assert_redo_rows_named,
    _assert_writes_by_kind,
    _delta,
    _kind_of,
    _quiet_window,
    _renamed,
)

from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mysql import RootedMySQL
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import report_json

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

# rows of events_waits_history_long (176 bytes each: 35 MB); a window here had 10,000 to
# 40,000 file events. A window with more fails (the ring wrapped), never passes on a partial history
HISTORY_ROWS = 200_000
INNODB_KINDS = frozenset({"redo", "doublewrite", "system", "dictionary", "undo", "table", "temp"})
PAGE_KINDS = frozenset({"table", "undo"})  # written by InnoDB's AIO (simulated here), not synchronously
# InnoDB's files (under the default innodb_flush_method its data and doublewrite files are O_DIRECT)
INNODB_FILE = re.compile(r"data/(.*\.ibd|undo_\d{3}|ibdata\d+|#ib_\d+_\d+\.b?dblwr|#innodb_redo/#ib_redo\d+(_tmp)?)")
STATUS = ("Innodb_data_fsyncs", "Innodb_os_log_fsyncs")
PFS_LOST = (
    "Performance_schema_locker_lost",
    "Performance_schema_file_instances_lost",
    "Performance_schema_file_handles_lost",
)


def _status(db: RootedMySQL, names: tuple[str, ...]) -> dict[str, int]:
    quoted = ", ".join(f"'{n}'" for n in names)
    return {name: int(value) for name, value in db.sql(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({quoted})")}


@dataclass
class Edges:
    """The window's ground truth for syncs, taken at its edges (test_mysql's EdgeHook): the
    history emptied and InnoDB's counters read when it starts; when it ends, the history's
    writes and syncs per file instance, the counters again, each instance's inode."""

    db: RootedMySQL
    status: dict[str, dict[str, int]] = field(default_factory=dict)  # "start"/"end" -> name -> value
    rows: int = 0  # in the history at the end
    ops: dict[Key, dict[str, int]] = field(default_factory=dict)  # instance -> operation -> events
    inodes: dict[Key, int] = field(default_factory=dict)

    def __call__(self, edge: str, snapshot: Instances) -> None:
        if edge == "start":
            self.db.sql("TRUNCATE TABLE performance_schema.events_waits_history_long")
            self.status["start"] = _status(self.db, STATUS)
            return
        self.status["end"] = _status(self.db, STATUS)
        self.rows = int(self.db.sql("SELECT COUNT(*) FROM performance_schema.events_waits_history_long")[0][0])
        self.ops = {}
        for instance, event, op, n in self.db.sql(
            "SELECT OBJECT_INSTANCE_BEGIN, EVENT_NAME, OPERATION, COUNT(*) "
            "FROM performance_schema.events_waits_history_long "
            "WHERE EVENT_NAME LIKE 'wait/io/file/%' AND OPERATION IN ('write', 'sync') GROUP BY 1, 2, 3"
        ):
            self.ops.setdefault((int(instance), event), {})[op] = int(n)
        # by inode, not name: a redo file's rows in top may carry a name it had earlier
        self.inodes = {}
        for key, (path, _, _) in snapshot.items():
            with contextlib.suppress(FileNotFoundError):  # a file deleted since: no row to match
                self.inodes[key] = os.stat(path).st_ino

    def delta(self, name: str) -> int:
        return self.status["end"][name] - self.status["start"][name]


@dataclass
class Traced:
    db: RootedMySQL
    window: Window
    report: dict[str, Any]
    edges: Edges


@pytest.fixture(scope="module")
def traced(bpf_ready: None, server_roots: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    """One server with innodb_use_native_aio=OFF and innodb_flush_method=fsync, one traced
    window over sysbench (test_mysql's), the syncs' ground truth read at its edges."""
    extra = {
        "innodb_flush_method": "fsync",
        # as test_mysql: quiet edges, pages written during a few seconds of load
        "innodb_stats_auto_recalc": "OFF",
        "innodb_max_dirty_pages_pct": "1",
        "performance_schema_consumer_events_waits_current": "ON",  # history_long is fed through it
        "performance_schema_consumer_events_waits_history_long": "ON",
        "performance_schema_events_waits_history_long_size": str(HISTORY_ROWS),
    }
    options = MariaDBOptions(innodb_backend="pwrite", redo_log_mb=REDO_MB, extra=extra)  # pwrite: native AIO off
    with RootedMySQL(server_roots["sid-mysql"], options) as db:
        assert db.version().startswith("9.7."), db.version()
        settings = db.sql("SELECT @@innodb_use_native_aio, @@innodb_flush_method, @@innodb_redo_log_capacity")
        assert settings == [("0", "fsync", str(REDO_MB << 20))]
        # only file I/O into the history (idle, socket and table waits would crowd it out)
        db.sql(
            "UPDATE performance_schema.setup_instruments SET ENABLED = 'NO' "
            "WHERE (NAME LIKE 'wait/%' OR NAME = 'idle') AND NAME NOT LIKE 'wait/io/file/%'"
        )
        bench = Sysbench(db, tables=TABLES, table_size=TABLE_SIZE, threads=2)
        try:
            bench.prepare()
            edges = Edges(db)
            window, trace = _quiet_window(db, bench, tmp_path_factory.mktemp("mysql-variants"), edges)
            yield Traced(db, window, report_json(trace), edges)
        finally:
            bench.stop()


def _by_inode(t: Traced) -> dict[int, dict[str, Any]]:
    """top's counters per file under the base directory, summed by inode over the window."""
    prefix = t.db.base_dir + "/"
    out: dict[int, dict[str, Any]] = {}
    for obj in t.window.objects:
        for f in obj["files"]:
            if f["path"].startswith(prefix):
                row = out.setdefault(f["ino"], {"path": f["path"], "kind": f["kind"]})
                for c in ("write_bytes", "write_ops", "sync_ops", "fsync_ops", "fdatasync_ops"):
                    row[c] = row.get(c, 0) + f[c]
    return out


def test_settings_in_effect_and_no_io_submit(traced: Traced) -> None:
    """No InnoDB file is open with O_DIRECT (the default opens them so); mysqlio saw every
    request as a plain syscall, none through libaio (io_submit) or io_uring; and the data
    pages (tables, undo) were written by the simulated-AIO threads, `ib_io_wr-N` (on the
    defaults the page cleaner submits them with io_submit)."""
    db = traced.db
    assert db.sql("SELECT @@innodb_use_native_aio, @@innodb_flush_method") == [("0", "fsync")]
    opened = {}
    for fd in os.listdir(f"/proc/{db.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{db.pid}/fd/{fd}")
            with open(f"/proc/{db.pid}/fdinfo/{fd}") as info:
                flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # closed meanwhile
        if target.startswith(db.base_dir + "/") and INNODB_FILE.fullmatch(os.path.relpath(target, db.base_dir)):
            opened[os.path.relpath(target, db.base_dir)] = bool(flags & os.O_DIRECT)
    assert {"data/sbtest/sbtest1.ibd", "data/undo_001", "data/ibdata1"} <= opened.keys(), sorted(opened)
    direct = sorted(path for path, on in opened.items() if on)
    assert not direct, f"open with O_DIRECT under innodb_flush_method=fsync: {direct}"

    apis: dict[str, set[str]] = {}
    page_writers: dict[str, int] = {}
    for obj in traced.window.objects:
        for f in obj["files"]:
            for t in f["threads"]:
                apis.setdefault(f["kind"], set()).update(t["apis"])
                if f["kind"] in PAGE_KINDS and t["write_bytes"]:
                    name = re.sub(r"-\d+$", "", t["name"])
                    page_writers[name] = page_writers.get(name, 0) + t["write_bytes"]
    aio = {kind: sorted(a - {"syscall"}) for kind, a in apis.items() if a - {"syscall"}}
    assert not aio, f"requests not made as plain syscalls with innodb_use_native_aio=OFF: {aio}"
    assert apis.keys() >= PAGE_KINDS, apis
    assert page_writers and set(page_writers) == {"ib_io_wr"}, f"data pages written by {page_writers}"
    assert {k["kind"]: k["apis"] for k in traced.report["kinds"] if set(k["apis"]) - {"syscall"}} == {}


def test_writes_by_kind_and_file_match_performance_schema(traced: Traced, capsys: pytest.CaptureFixture[str]) -> None:
    """Per kind (redo summed over every redo file, recycled ones included) mysqlio's write
    bytes within 1 % of performance_schema's in top and in `report`, 0 lost; per file (redo
    files included, matched by inode) write bytes and requests within 1 % for every file
    performance_schema saw more than MIN_BYTES written to."""
    db, window = traced.db, traced.window
    _assert_redo_rows_named(window)
    assert window.totals.lost_events == 0
    renamed = _renamed(window.s1, window.s2)
    heading = f"innodb_use_native_aio=OFF, innodb_flush_method=fsync, {len(renamed)} redo renames in the window"
    by_kind = _assert_writes_by_kind(db, window, traced.report, capsys, heading)
    assert {"redo", "doublewrite", "undo", "table", "binlog"} <= {k for k, (w, _) in by_kind.items() if w}, by_kind
    assert renamed, "no redo file was recycled in the window: the test does not cover renames"

    seen = _by_inode(traced)
    files = {k: v for k, v in _delta(window.s1, window.s2).items() if v[1] > MIN_BYTES}
    lines, bad = [], []
    for key, (path, wbytes, writes) in sorted(files.items(), key=lambda kv: kv[1][0]):
        got = seen.get(traced.edges.inodes.get(key, -1), {})
        got_bytes, got_ops = got.get("write_bytes", 0), got.get("write_ops", 0)
        name = os.path.relpath(path, db.datadir)
        lines.append(f"  {name:<28} {wbytes:>10} {got_bytes:>10} {writes:>7} {got_ops:>7}")
        if abs(got_bytes - wbytes) > TOLERANCE * wbytes or abs(got_ops - writes) > TOLERANCE * writes:
            bad.append((name, wbytes, got_bytes, writes, got_ops))
    with capsys.disabled():
        print("write bytes and requests per file over MIN_BYTES:")
        print(f"  {'file':<28} {'pfs bytes':>10} {'mysqlio':>10} {'pfs ops':>7} {'mysqlio':>7}")
        print("\n".join(lines))
    names = {os.path.relpath(path, db.datadir) for path, _, _ in files.values()}
    assert {"sbtest/sbtest1.ibd", "sbtest/sbtest2.ibd", "undo_001", "mysql-bin.000002"} <= names, names
    assert any(n.startswith("#innodb_redo/") for n in names), names
    assert not bad, (
        f"per-file writes off by more than {TOLERANCE:.0%} (file, pfs bytes, mysqlio, pfs ops, mysqlio): {bad}"
    )


def test_syncs_match_performance_schema_and_innodb(traced: Traced, capsys: pytest.CaptureFixture[str]) -> None:
    """Syncs, exact: per file, mysqlio's against performance_schema's 'sync' events of the
    window (a history shown complete: it did not wrap and its writes are file_summary's);
    per kind, top's and report's against those events, redo against Innodb_os_log_fsyncs
    and every InnoDB kind together against Innodb_data_fsyncs. InnoDB's syncs are the call
    innodb_use_fdatasync names, and only that one."""
    db, window, edges = traced.db, traced.window, traced.edges
    lost = _status(db, PFS_LOST)
    assert not any(lost.values()), f"performance_schema lost events, instances or handles: {lost}"
    assert edges.rows < HISTORY_ROWS, f"events_waits_history_long wrapped ({edges.rows} rows): raise HISTORY_ROWS"
    pfs = _delta(window.s1, window.s2)
    writes = {key: n for key, (_, _, n) in pfs.items() if n}
    history_writes = {key: ops["write"] for key, ops in edges.ops.items() if ops.get("write")}
    assert history_writes == writes, "the history's writes per file are not file_summary_by_instance's"

    # per file: every file either side saw synced, by inode
    seen = _by_inode(traced)
    names = {key: path for key, (path, _, _) in window.s2.items()}
    unknown = [key for key, ops in edges.ops.items() if ops.get("sync") and key not in edges.inodes]
    assert not unknown, f"synced instances with no file now: {unknown}"
    want = {edges.inodes[key]: ops["sync"] for key, ops in edges.ops.items() if ops.get("sync")}
    got = {ino: row["sync_ops"] for ino, row in seen.items() if row["sync_ops"]}
    path_of = {edges.inodes[key]: names[key] for key in edges.ops if key in edges.inodes}
    path_of.update({ino: row["path"] for ino, row in seen.items()})
    bad = [(os.path.relpath(path_of[i], db.datadir), want.get(i, 0), got.get(i, 0)) for i in want.keys() | got.keys()]
    bad = [b for b in bad if b[1] != b[2]]
    assert not bad, f"syncs per file (file, pfs, mysqlio): {sorted(bad)}"

    # per kind: the history, top, report; InnoDB's own counters
    totals = window.totals
    kinds: dict[str, list[int]] = {}
    for key, ops in edges.ops.items():
        if ops.get("sync"):
            kinds.setdefault(_kind_of(db, totals, names[key]), [0, 0, 0])[0] += ops["sync"]
    for path, counts in totals.under(db.base_dir).items():
        if counts["sync_ops"]:
            kinds.setdefault(totals.kinds[path], [0, 0, 0])[1] += counts["sync_ops"]
    for row in traced.report["kinds"]:
        if row["sync_ops"]:
            kinds.setdefault(row["kind"], [0, 0, 0])[2] += row["sync_ops"]
    redo, innodb = edges.delta("Innodb_os_log_fsyncs"), edges.delta("Innodb_data_fsyncs")
    # the call InnoDB syncs with: fdatasync when innodb_use_fdatasync is on, else fsync
    call, other = (
        ("fdatasync_ops", "fsync_ops")
        if db.sql("SELECT @@innodb_use_fdatasync") == [("1",)]
        else ("fsync_ops", "fdatasync_ops")
    )
    with capsys.disabled():
        print(f"\nsyncs by kind ({edges.rows} rows in the history):")
        print(f"  {'kind':<12} {'pfs':>6} {'top':>6} {'report':>6}")
        for kind, (p, t, r) in sorted(kinds.items()):
            print(f"  {kind:<12} {p:>6} {t:>6} {r:>6}")
        print(
            f"  Innodb_os_log_fsyncs +{redo}, Innodb_data_fsyncs +{innodb}; InnoDB syncs by {call.removesuffix('_ops')}"
        )
    assert {"redo", "doublewrite", "binlog"} <= kinds.keys(), kinds
    assert kinds.keys() & PAGE_KINDS, f"no table or undo file was synced in the window: {kinds}"
    off = {kind: counts for kind, counts in kinds.items() if len(set(counts)) != 1}
    assert not off, f"syncs by kind differ (pfs, top, report): {off}"
    assert kinds["redo"][1] == redo, (kinds["redo"], redo)
    assert sum(c[1] for kind, c in kinds.items() if kind in INNODB_KINDS) == innodb, (kinds, innodb)

    wrong = [
        (row["path"], row[call], row[other]) for row in seen.values() if row["kind"] in INNODB_KINDS and row[other]
    ]
    assert not wrong, f"InnoDB files synced with {other.removesuffix('_ops')} (file, {call}, {other}): {wrong}"
