"""The warm-up after a restart (issue 61): the settling rule (mysqlio.warmup) on arranged
intervals, its lines (mysqlio.warmup_view) against snapshots, and the acceptance test on
a real MariaDB restarted with a saved buffer pool, traced by `top --follow --json`
(test_mariadb_warmup_after_restart: the pool loaded at the server's start, traced from it;
Oracle MySQL 9.7's, on the same helpers, is tests/test_mysql.py::test_warmup_after_restart)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import TopCollector, interrupt, report_json
from mysqlio.host_tids import read_nspid
from mysqlio.model import FileActivity, FileIdentity
from mysqlio.render import Header, render_screen
from mysqlio.warmup import SETTLE_FRACTION, SETTLE_S, TOP_TABLES, Warmup, WarmupWatch, table_reads
from mysqlio.warmup_view import warmup_line, warmup_table

SNAPSHOTS = Path(__file__).parent / "snapshots"
MIB = 1 << 20
T0 = 1_000_000.0  # the server's start (unix time)


def _fed(rates_mib: list[float], seconds: float = 1.0, start_after: float = 2.0) -> Warmup:
    """A warm-up fed one interval per rate: sbtest1 reads 3/4 of it, sbtest2 1/4."""
    w = Warmup(since=T0, pid=7)
    t = T0 + start_after
    for rate in rates_mib:
        t += seconds
        total = int(rate * MIB * seconds)
        w.feed(t, seconds, [("sbtest.sbtest1", total - total // 4, total // 8), ("sbtest.sbtest2", total // 4, 0)])
    return w


def test_settles_after_the_quiet_time() -> None:
    # peak 40 MiB/s; 1 MiB/s is under 5 % of it (2 MiB/s): quiet from the 5th interval
    quiet_needed = int(SETTLE_S)
    w = _fed([10, 40, 20, 4] + [1] * (quiet_needed - 1))
    assert not w.settled and w.duration_s is None
    w.feed(w.end_t + 1, 1.0, [("sbtest.sbtest1", MIB, 0)])
    assert w.settled
    # from the start to the end of the last busy interval (the 4 MiB/s one: 10 % of the peak)
    assert w.duration_s == 2.0 + 4
    assert w.busy_bytes == (10 + 40 + 20 + 4) * MIB
    assert w.disk_read_bytes == (10 + 40 + 20 + 4 + quiet_needed) * MIB
    assert w.unseen_s == 2.0
    assert w.peak_bps == 40 * MIB
    # later reads add to the totals, not to the settled warm-up
    w.feed(w.end_t + 1, 1.0, [("sbtest.sbtest1", 100 * MIB, 0)])
    assert (w.settled, w.duration_s, w.busy_bytes) == (True, 6.0, 74 * MIB)


def test_a_busy_interval_restarts_the_quiet_time() -> None:
    w = _fed([40, 1, 1, 30, 1, 1])
    assert not w.settled  # quiet for 2 s only since the 30 MiB/s interval
    w.feed(w.end_t + 0.5, 0.5, [])
    assert not w.settled
    w.feed(w.end_t + 0.5, 0.5, [])
    assert w.settled and w.duration_s == 2.0 + 4  # the 30 MiB/s interval ended the warm-up


def test_no_reads_at_all_settles_at_once_with_nothing() -> None:
    w = _fed([0] * int(SETTLE_S))
    assert w.settled and w.duration_s == 0.0 and w.busy_bytes == 0


def test_the_fraction_is_of_the_peak() -> None:
    just_under = SETTLE_FRACTION * 100 * 0.99
    w = _fed([100] + [just_under] * int(SETTLE_S))
    assert w.settled
    w = _fed([100] + [SETTLE_FRACTION * 100] * int(SETTLE_S))
    assert not w.settled  # at the line is still busy


def test_per_table_totals_and_busiest_first() -> None:
    w = _fed([8, 8])
    (first, second) = w.busiest()
    assert (first.name, first.disk_read_bytes, first.readahead_bytes) == ("sbtest.sbtest1", 12 * MIB, 2 * MIB)
    assert (second.name, second.disk_read_bytes) == ("sbtest.sbtest2", 4 * MIB)
    assert first.last_bps == 6 * MIB
    obj = w.to_json()
    assert [t["table"] for t in obj["tables"]] == ["sbtest.sbtest1", "sbtest.sbtest2"]
    assert obj["disk_read_bytes"] == 16 * MIB and obj["settled"] is False and obj["duration_s"] is None


def _file(path: str, table: str | None, disk: int, readahead: int) -> FileActivity:
    return FileActivity(
        file=FileIdentity(1, hash(path) & 0xFFFF),
        path=path,
        kind="table" if table else "system",
        table=table,
        disk_read_bytes=disk,
        readahead_bytes=readahead,
    )


def test_table_reads_sum_a_tables_files() -> None:
    files = [
        _file("/d/sb/t1#P#p0.ibd", "sb.t1", 100, 10),
        _file("/d/sb/t1#P#p1.ibd", "sb.t1", 50, 0),
        _file("/d/ibdata1", None, 30, 30),
        _file("/d/sb/t2.ibd", "sb.t2", 0, 0),
    ]
    assert sorted(table_reads(files)) == [("sb.t1", 150, 10), ("system", 30, 30)]
    # top's JSON objects give the same
    as_json = [
        {"path": f.path, "table": f.table, "disk_read_bytes": f.disk_read_bytes, "readahead_bytes": 0} for f in files
    ]
    assert sorted(n for _, n, _ in table_reads(as_json)) == [30, 150]


def test_watch_counts_only_the_restarted_process() -> None:
    watch = WarmupWatch()
    files = [_file("/d/sb/t1.ibd", "sb.t1", 4096, 0)]
    assert watch.feed(5, T0 + 1, 1.0, files) is None  # no restart yet
    watch.restarted(6, T0)
    got = watch.feed(5, T0 + 2, 1.0, files)  # the old process's last interval
    assert got is not None and got.disk_read_bytes == 0
    got = watch.feed(6, T0 + 3, 1.0, files)
    assert got is not None and got.disk_read_bytes == 4096 and got.first_t == T0 + 2


def _snapshot(name: str, text: str) -> None:
    snap = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()


def test_lines_snapshot() -> None:
    settling = _fed([10, 40])
    settled = _fed([10, 40, 20, 4, 1, 1, 1])
    lines = [warmup_line(None) or "(none)", warmup_line(settling) or "", warmup_line(settled) or ""]
    _snapshot("warmup_lines.txt", "\n".join(lines) + "\n")
    assert "50.0MiB read from disk (40.0MiB/s now), settling" in lines[1]
    assert lines[2].startswith("warm-up took 6.0 s: 74.0MiB read from disk")


def test_report_table_snapshot() -> None:
    w = _fed([10, 40, 20, 4, 1, 1, 1, 1, 1, 1])
    seconds = [
        (T0 + 2 + i, {"sbtest.sbtest1": int(r * MIB * 3 / 4), "sbtest.sbtest2": int(r * MIB / 4)})
        for i, r in enumerate([10, 40, 20, 4, 1, 1, 1, 1, 1, 1])
    ]
    lines = warmup_table(w, seconds)
    _snapshot("warmup_report.txt", "\n".join(lines) + "\n")
    # the seconds shown stop SETTLE_S after the last busy one
    assert len(lines) == 3 + 4 + int(SETTLE_S) + 1


def test_screen_shows_the_line() -> None:
    from rich.console import Console

    header = Header(
        pid=7, server="mariadbd", elapsed_s=8.0, interval_s=1.0, write_bps=0, read_bps=0, sync_ps=0,
        lost_events=0, group="file", sort="write", warmup=warmup_line(_fed([10, 40])),
    )  # fmt: skip
    console = Console(width=160, force_terminal=True, color_system=None, record=True)
    console.print(render_screen(header, [], 160, 20))
    text = console.export_text()
    assert "warm-up since restart 4.0 s: 50.0MiB read from disk" in text, text


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_an_empty_interval_changes_nothing(bad: float) -> None:
    w = _fed([10])
    before = w.to_json()
    w.feed(T0 + 100, bad, [("x", 1, 0)])
    assert w.to_json() == before


# --- the acceptance tests: a server restarted with a saved buffer pool (MariaDB here, ---
# --- Oracle MySQL 9.7 in tests/test_mysql.py::test_warmup_after_restart, on these helpers) ---

TABLES = 3
TOLERANCE = 0.01  # the issue's: the server's own counters within 1 %
LOAD_S = 2  # oltp_read_only after the buffer pool load


def drop_from_page_cache(paths: Iterable[str]) -> None:
    """These files' pages out of the page cache (theirs only, not the machine's:
    POSIX_FADV_DONTNEED drops a file's clean pages)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_into_page_cache(paths: Iterable[str]) -> None:
    """These files read whole, by this process: their pages cached, so that a server that
    maps them (its binary, its libraries) faults none of them in from the disk. Such a read
    is in the kernel's count of the server's disk reads (/proc/PID/io) and in no file's row
    (the probes count a read bio for a file only inside a read of it)."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def mapped_files(pid: int) -> set[str]:
    """The regular files process pid maps (/proc/PID/maps): its binary, its libraries."""
    out = set()
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/") and os.path.isfile(fields[5].rstrip("\n")):
                out.add(fields[5].rstrip("\n"))
    return out


def linked_files(binary: str) -> set[str]:
    """A binary and the shared libraries the loader gives it (ldd)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return {binary} | {w for line in out.splitlines() for w in line.split() if w.startswith("/") and os.path.isfile(w)}


def _drop_page_cache(directory: str) -> Callable[[], None]:
    """Its files' pages out of the page cache (drop_from_page_cache)."""

    def drop() -> None:
        drop_from_page_cache(p for p in glob.glob(os.path.join(directory, "**"), recursive=True) if os.path.isfile(p))

    return drop


def _ibd_reads(db: MariaDB) -> dict[str, int]:
    """performance_schema's bytes read per sbtest .ibd file since the server's start."""
    prefix = f"{db.datadir}/sbtest/"
    return {p: r for p, (_, _, r, _) in db.file_io_summary().items() if p.startswith(prefix) and p.endswith(".ibd")}


def _datadir_reads(db: MariaDB) -> dict[str, int]:
    """performance_schema's bytes read per file of the datadir since the server's start."""
    prefix = f"{db.datadir}/"
    return {p: r for p, (_, _, r, _) in db.file_io_summary().items() if p.startswith(prefix)}


def _wait_for(what: str, ready: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.1)


def _thread_names(db: MariaDB) -> dict[int, str]:
    """Our tid -> performance_schema's thread NAME, for the server's running threads.
    THREAD_OS_ID is the tid in the server's own pid namespace (MySQL in its root has one):
    the last field of the task's NSpid line; ours is the first (the same tid on the host)."""
    by_os_id = {
        int(tid): name
        for tid, name in db.sql(
            "SELECT THREAD_OS_ID, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL"
        )
    }
    names = {}
    for task in Path(f"/proc/{db.pid}/task").iterdir():
        nspid = read_nspid(task)
        if nspid and nspid[-1] in by_os_id:
            names[nspid[0]] = by_os_id[nspid[-1]]
    return names


@dataclass
class RestartWindow:
    """What a traced restart gave: top's intervals of the new process (the window: from its
    start to the end), performance_schema's bytes read per sbtest .ibd file, per file of
    the datadir and Innodb_data_read since the server's start, the server's threads (our tid ->
    performance_schema's NAME) and `record --follow`'s trace."""

    old_pid: int
    intervals: list[dict[str, Any]]
    want: dict[str, int]
    data_read: int
    pfs: dict[str, int]  # performance_schema's bytes read of every file in the datadir
    thread_names: dict[int, str]
    trace: str


def _traced_restart(db: MariaDB, bench: Sysbench, trace: str) -> RestartWindow:
    """`top --follow --json` and `record --follow` on the server; it is restarted (the
    buffer pool dumped at shutdown, every page of it: dump_pct 100; its files' pages
    dropped) and loads the dumped pool at its start (innodb_buffer_pool_load_at_startup,
    as configured: the server's default); once loaded, oltp_read_only runs for LOAD_S;
    until the warm-up settles. Both trace the new process from a few ms after its start
    (their probes kept loaded and re-targeted: mysqlio.kept_probe), so the window is the
    new process's whole life, compared with the server's own counters since its start."""
    db.sql("SET GLOBAL innodb_buffer_pool_dump_pct = 100")
    top = TopCollector(db.pid, 0.5, ["--follow"])
    rec = Recorder(db.pid, trace)
    try:
        top.wait_until(0)
        rec.wait_for(f"mysqlio: recording pid {db.pid} ")
        old_pid = db.pid

        def while_down() -> None:
            assert Path(db.datadir, "ib_buffer_pool").stat().st_size > 0  # dumped at shutdown
            _drop_page_cache(db.datadir)()  # the files InnoDB does not read with O_DIRECT

        db.restart(while_down=while_down)
        _wait_for("top tracing the new server", lambda: any(o["pid"] == db.pid for o in top.intervals), 30)
        rec.wait_for(f"mysqlio: recording pid {db.pid} ")
        _wait_for(
            "the buffer pool load at start-up",
            lambda: "completed" in db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_load_status'")[0][1],
            60,
        )
        bench.start(LOAD_S, script="oltp_read_only")
        bench.wait(timeout_s=60)
        want, data_read, pfs = _ibd_reads(db), db.status("Innodb_data_read"), _datadir_reads(db)
        thread_names = _thread_names(db)
        _wait_for("the warm-up settling", lambda: _last_warmup(top)["settled"], 20)
    finally:
        assert top.stop() == 0, top.proc.stderr.read() if top.proc.stderr else ""
        assert rec.stop() == 0, rec.lines
    intervals = [o for o in top.intervals if o["pid"] == db.pid]
    return RestartWindow(old_pid, intervals, want, data_read, pfs, thread_names, trace)


def _check_busiest(listed: list[dict[str, Any]], per_table: dict[str, int], tolerance: float = 0.0) -> None:
    """A warm-up's tables (its TOP_TABLES busiest: from the start, the redo log, the system
    tablespace, MySQL's undo and dictionary may outrank the sbtest tables) are the busiest of
    top's intervals, each as many bytes (within `tolerance`, a fraction)."""
    got = {t["table"]: t["disk_read_bytes"] for t in listed}
    assert len(got) == min(TOP_TABLES, len(per_table)), (got, per_table)
    assert all(abs(per_table.get(name, 0) - n) <= tolerance * n for name, n in got.items()), (got, per_table)
    rest = max([n for name, n in per_table.items() if name not in got] or [0])
    assert min(got.values()) >= (1 - tolerance) * rest, (got, per_table)


def _check_warmup(db: MariaDB, w: RestartWindow, tables: int, reader: str, opener: str | None = None) -> str:
    """The acceptance, over the new process's whole life (traced from a few ms after its
    start): each table's disk reads in `top` equal to performance_schema's bytes read of its
    file (within TOLERANCE); every request seen: the bytes requested of the datadir's files
    that performance_schema instruments equal to its bytes read of them; Innodb_data_read
    between InnoDB's .ibd files' disk reads and those plus the system tablespace's; the
    sbtest files read from the disk by `reader` (performance_schema's thread NAME), but for
    what `opener` (the OS's name of a start-up thread, gone by the end) read opening the
    tablespaces, under 1 %; the
    warm-up settled with a duration, each table in it; the same warm-up in `report` of
    record's trace. A line of the figures.

    The server's counters count what it asked for: the kernel's readahead (disk reads beyond
    a buffered read, shown apart as readahead_bytes) is compared apart from them. MySQL
    opens a tablespace with a buffered read of its first KiB (uninstrumented) and of its
    page 0 (in performance_schema, not in Innodb_data_read), which bring a readahead of the
    next pages; its O_DIRECT reads of those pages then read them from the disk again.
    Innodb_data_read counts the pages read into the buffer pool, not InnoDB's start-up reads
    of the system tablespace (MariaDB 10.11: its doublewrite buffer, 2 MiB, read whole to
    recover torn pages) nor the redo log's: from the start it matches no file's reads."""
    assert db.pid != w.old_pid and w.intervals
    assert sum(o["lost_events"] for o in w.intervals) == 0
    disk: dict[str, int] = {}  # all of top's intervals of the new process: the warm-up's
    asked: dict[str, int] = {}  # readahead apart: the server's own reads
    readahead: dict[str, int] = {}
    requested: dict[str, int] = {}  # bytes the server asked for (read_bytes), disk or cache
    by_kind: dict[str, int] = {}
    for o in w.intervals:
        for f in o["files"]:
            path, n, ra = f["path"], f["disk_read_bytes"], f["readahead_bytes"]
            disk[path] = disk.get(path, 0) + n
            asked[path] = asked.get(path, 0) + n - ra
            readahead[path] = readahead.get(path, 0) + ra
            requested[path] = requested.get(path, 0) + f["read_bytes"]
            by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + n - ra
    want = w.want
    assert len(want) == tables and all(n > 0 for n in want.values()), want
    for path, n in want.items():  # each table's file: read from the disk, as much as the server says
        assert abs(asked.get(path, 0) - n) <= TOLERANCE * n, (path, asked.get(path), n)
    assert abs(sum(asked[p] for p in want) - sum(want.values())) <= TOLERANCE * sum(want.values())
    # nothing missed since the start: every instrumented file's reads, as many bytes
    pfs_total = sum(w.pfs.values())
    seen = sum(requested.get(p, 0) for p in w.pfs)
    missed = {Path(p).name: (requested.get(p, 0), n) for p, n in w.pfs.items() if requested.get(p, 0) < n}
    assert abs(seen - pfs_total) <= TOLERANCE * pfs_total, (seen, pfs_total, missed)
    # Innodb_data_read: the .ibd files' pages at least, the system tablespace's at most besides
    ibd = sum(n for p, n in asked.items() if p.endswith(".ibd"))
    system = by_kind.get("system", 0) + by_kind.get("doublewrite", 0)
    kinds = {k: n for k, n in by_kind.items() if n}
    assert ibd * (1 - TOLERANCE) <= w.data_read <= (ibd + system) * (1 + TOLERANCE), (ibd, system, w.data_read, kinds)
    others = {Path(p).name: n for p, n in asked.items() if n and p not in want}
    # the warm-up: each table in it, settled, with a duration
    warm = w.intervals[-1]["warmup"]
    assert warm["pid"] == db.pid and warm["settled"] and warm["duration_s"] > 0, warm
    assert warm["disk_read_bytes"] == sum(disk.values())
    per_table: dict[str, int] = {}  # table (else kind) -> disk reads, from top's intervals
    for o in w.intervals:
        for name, n, _ in table_reads(o["files"]):
            per_table[name] = per_table.get(name, 0) + n
    _check_busiest(warm["tables"], per_table)
    # who read: the buffer pool load's thread, none of sysbench's connections
    readers = _reading_threads(w.intervals, db)
    os_names = {
        t["tid"]: t["name"] for o in w.intervals for f in o["files"] for t in f["threads"] if t["tid"] in readers
    }
    by_name: dict[str, int] = {}  # performance_schema's NAME, or the OS's of a thread gone by then
    for tid, n in readers.items():
        name = w.thread_names.get(tid) or f"{os_names.get(tid)} (gone)"
        by_name[name] = by_name.get(name, 0) + n
    window_disk = sum(asked[p] + readahead[p] for p in want)
    allowed = {reader} | ({f"{opener} (gone)"} if opener else set())
    assert sum(readers.values()) == window_disk and set(by_name) <= allowed, (by_name, window_disk)
    assert by_name.get(reader, 0) >= (1 - TOLERANCE) * window_disk, by_name
    # the same warm-up in `record --follow`'s trace, by `report`
    report = report_json(w.trace)
    (gap,) = report["gaps"]
    (recorded,) = report["warmups"]
    assert (gap["new_pid"], recorded["pid"]) == (db.pid, db.pid) and recorded["settled"], recorded
    # within the 1 %: record and top each find the new process on their own, a few ms apart,
    # and a read in between is in one only (a fresh CI run: MySQL's binlog, 4 KiB of 88 MB)
    _check_busiest(recorded["tables"], per_table, TOLERANCE)
    text = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", w.trace], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert f"Warm-up after the restart (pid {db.pid})" in text and "warm-up took " in text, text
    tables_ra = {Path(p).name: readahead[p] for p in want}
    return (
        f"warm-up: took {warm['duration_s']} s, {warm['warmup_bytes']} B from disk (first {warm['unseen_s']} s "
        f"untraced); since the start, tables' disk reads {sum(asked[p] for p in want)} B (readahead apart: "
        f"{tables_ra}) = performance_schema {sum(want.values())} B; requested of the datadir's instrumented "
        f"files {seen} B, performance_schema {pfs_total} B; Innodb_data_read {w.data_read} B, .ibd files' "
        f"{ibd} B, system tablespace's {system} B; by kind {kinds}; readers {by_name}; report: took "
        f"{recorded['duration_s']} s from tracing resumed; other files' disk reads {others}\n"
        + text[text.index("Warm-up after") :]
    )


@pytest.mark.bpf
@pytest.mark.mariadb
def test_mariadb_warmup_after_restart(bpf_ready: None, tmp_path: Path) -> None:
    """Warm MariaDB's buffer pool with oltp_read_only, restart it (the pool dumped at
    shutdown, its files' pages dropped; loaded again at start-up) and run oltp_read_only
    under `top --follow --json`: each table's disk reads show in the warm-up, equal to
    performance_schema's bytes read of the table's file since the server's start, InnoDB's
    files' disk reads to Innodb_data_read (within 1 %), the buffer pool load's thread did
    the reads, and the warm-up settles with a duration (_traced_restart, _check_warmup).

    The server's default innodb_flush_method (O_DIRECT since MariaDB 10.6): every byte
    InnoDB reads is read from the disk. MariaDB loads the pool in a task of its InnoDB
    thread pool."""
    options = MariaDBOptions(
        log_bin=False,
        extra={
            "innodb_buffer_pool_dump_at_shutdown": "ON",
            "innodb_buffer_pool_load_at_startup": "ON",
            "innodb_buffer_pool_dump_pct": "100",
        },
    )
    with MariaDB(options) as db:
        assert db.sql("SELECT @@innodb_flush_method")[0][0] == "O_DIRECT"
        bench = Sysbench(db, tables=TABLES, table_size=20000, threads=2)
        bench.prepare()
        bench.start(2, script="oltp_read_only")
        bench.wait(timeout_s=60)
        window = _traced_restart(db, bench, str(tmp_path / "warmup.trace"))
    print("\n" + _check_warmup(db, window, TABLES, "thread/innodb/thread_pool_thread"))


class Recorder:
    """`mysqlio record --follow` in the background, its stderr lines read as they come."""

    def __init__(self, pid: int, trace: str) -> None:
        self.trace = trace
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "record", "--follow", "-p", str(pid), "-o", trace],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for(self, start: str, timeout_s: float = 30) -> None:
        _wait_for(
            f"record saying {start!r}", lambda: any(line.startswith(start) for line in list(self.lines)), timeout_s
        )

    def stop(self) -> int:
        return interrupt(self.proc, self._thread)


def _reading_threads(intervals: list[dict[str, Any]], db: MariaDB) -> dict[int, int]:
    """tid -> disk read bytes of the sbtest tables' .ibd files, in the new server's intervals
    so far (not their .frm: MariaDB's connection that opens a table reads it from the disk)."""
    by: dict[int, int] = {}
    for o in intervals:
        if o["pid"] != db.pid:
            continue
        for f in o["files"]:
            if f["path"].startswith(f"{db.datadir}/sbtest/") and f["path"].endswith(".ibd"):
                for t in f["threads"]:
                    if t["disk_read_bytes"]:
                        by[t["tid"]] = by.get(t["tid"], 0) + t["disk_read_bytes"]
    return by


def _last_warmup(top: TopCollector) -> dict[str, Any]:
    intervals = list(top.intervals)
    return (intervals[-1].get("warmup") if intervals else None) or {"settled": False}
