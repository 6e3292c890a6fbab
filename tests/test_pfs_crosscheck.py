"""Per-file write bytes of a live MariaDB: mysqlio against the server's own
performance_schema.file_summary_by_instance, for each InnoDB I/O backend.

The two sides must cover exactly the same writes, so the server is idle at
both edges of the window:

    quiesce -> snapshot S0 -> start top, first object (probes attached)
    -> snapshot S1 (== S0: nothing written around the attach)
    -> sysbench oltp_write_only -> quiesce (every dirty page flushed)
    -> snapshot S2 (== a snapshot 1 s later: idle) -> > 1 interval
    -> stop top (SIGINT: last partial interval) -> snapshot S3 (== S2)

and performance_schema's window is S1..S2.  One setting beyond the sandbox
defaults (log_bin, sync_binlog=1, performance_schema=ON) is needed for that:
innodb_stats_auto_recalc=OFF.  With it on, the background statistics thread
re-analyses the sbtest tables seconds after the load, i.e. after wait_clean()
(seen 2 s and 12 s later: one recalc per table per 10 s at most): it writes
redo and dirties pages of
mysql.innodb_{table,index}_stats, which a later flush could write inside an
edge of the window.  With it off, MariaDB 10.11 is idle after wait_clean()
(purge done, no dirty pages, LSN still): no performance_schema-counted write,
no redo, no dirty page for 15 s and more.  Purge is covered by wait_clean();
the buffer pool dump and binlog rotation do not happen (dump only at
shutdown, the binlog stays far below max_binlog_size).  The S0 == S1 and
S2 == S3 asserts and the 1 s stability check before each edge prove it on
every run.

Redo (ib_logfile0) is not compared: MariaDB's performance_schema does not
instrument the redo log at all (its file_summary_by_instance has no row for
it), so there is no reference number.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import FileTotals, read_json_line, start_top, stop_top

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

BACKENDS = ("io_uring", "aio", "pwrite")
MIN_BYTES = 1 << 20  # compare every file performance_schema saw more than this written to
TOLERANCE = 0.01  # relative; never loosen
INTERVAL_S = 1.0
LOAD_S = 3
TABLES = 3
TABLE_SIZE = 10000

PfsSummary = dict[str, tuple[int, int, int, int]]


def _delta(before: PfsSummary, after: PfsSummary) -> dict[str, tuple[int, int, int, int]]:
    """Per-path difference of two file_io_summary() snapshots (zero rows dropped)."""
    out = {}
    for path in before.keys() | after.keys():
        old = before.get(path, (0, 0, 0, 0))
        new = after.get(path, (0, 0, 0, 0))
        diff = (new[0] - old[0], new[1] - old[1], new[2] - old[2], new[3] - old[3])
        if any(diff):
            out[path] = diff
    return out


def _describe(delta: dict[str, tuple[int, int, int, int]]) -> str:
    return ", ".join(f"{p}: +{d[0]}B/{d[1]}w" for p, d in sorted(delta.items())) or "nothing"


def _quiet_snapshot(db: MariaDB, attempts: int = 5) -> PfsSummary:
    """wait_clean(), then a performance_schema snapshot that stays equal for 1 s."""
    moving = {}
    for _ in range(attempts):
        db.wait_clean()
        first = db.file_io_summary()
        time.sleep(1.0)
        second = db.file_io_summary()
        moving = _delta(first, second)
        if not moving:
            return second
    raise AssertionError(f"server keeps writing after wait_clean(): {_describe(moving)}")


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, MariaDB, Sysbench]]:
    backend = request.param
    options = MariaDBOptions(innodb_backend=backend, extra={"innodb_stats_auto_recalc": "OFF"})
    with MariaDB(options) as db:
        assert db.innodb_backend_in_use() == backend
        bench = Sysbench(db, tables=TABLES, table_size=TABLE_SIZE, threads=2)
        try:
            bench.prepare()
            yield backend, db, bench
        finally:
            bench.stop()


Row = tuple[str, int, int, int, int]  # name, pfs bytes, mysqlio bytes, pfs writes, mysqlio write_ops


def _table(rows: list[Row]) -> str:
    """Plain-text table; diff % is (mysqlio - pfs) / pfs."""
    width = max([len("path"), *(len(r[0]) for r in rows)])
    lines = [
        f"{'path':<{width}} {'pfs bytes':>12} {'mysqlio bytes':>14} {'diff %':>8} {'pfs ops':>8} {'mysqlio ops':>11}"
    ]
    for name, pfs, traced, pfs_ops, traced_ops in rows:
        pct = f"{100.0 * (traced - pfs) / pfs:+.3f}" if pfs else "n/a"
        lines.append(f"{name:<{width}} {pfs:>12} {traced:>14} {pct:>8} {pfs_ops:>8} {traced_ops:>11}")
    return "\n".join(lines)


def test_write_bytes_match_performance_schema(bpf_ready: None, server: tuple[str, MariaDB, Sysbench]) -> None:
    backend, db, bench = server
    started = time.monotonic()
    s0 = _quiet_snapshot(db)

    top = start_top(db.pid, interval_s=INTERVAL_S)
    assert top.stdout is not None
    totals = FileTotals()
    try:
        totals.add(read_json_line(top.stdout, 30, "mysqlio top"))  # probes attached
        s1 = db.file_io_summary()
        head = _delta(s0, s1)
        assert not head, f"writes around the attach, the window is not exact: {_describe(head)}"

        bench.start(LOAD_S)
        bench.wait(timeout_s=LOAD_S + 60)
        s2 = _quiet_snapshot(db)
        time.sleep(INTERVAL_S * 1.2)
        objects, _ = stop_top(top)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    for obj in objects:
        totals.add(obj)
    s3 = db.file_io_summary()

    pfs = _delta(s1, s2)
    compared = {p: d[0] for p, d in pfs.items() if d[0] > MIN_BYTES}

    def name(path: str) -> str:
        return str(Path(path).relative_to(db.datadir)) if path.startswith(db.datadir + "/") else path

    def row(path: str, label: str) -> Row:
        got = totals.totals.get(path, {})
        ref = pfs.get(path, (0, 0, 0, 0))
        return (label, ref[0], got.get("write_bytes", 0), ref[1], got.get("write_ops", 0))

    rows = [row(p, name(p)) for p in sorted(compared)]
    # for information: everything else either side saw written (redo has no performance_schema row)
    others = {p for p, d in pfs.items() if d[0]} | {p for p, c in totals.under(db.datadir).items() if c["write_bytes"]}
    rows += [row(p, name(p) + " (not compared)") for p in sorted(others - compared.keys())]
    print(f"\n[{backend}] {time.monotonic() - started:.1f}s from first snapshot, {totals.intervals} intervals of top")
    print(_table(rows))

    tail = _delta(s2, s3)
    assert not tail, f"writes after the last snapshot, the window is not exact: {_describe(tail)}"
    assert totals.lost_events == 0
    names = {name(p) for p in compared}
    expected = {"ibdata1", "mysql-bin.000001", *(f"sbtest/sbtest{i}.ibd" for i in range(1, TABLES + 1))}
    assert expected <= names, f"performance_schema saw < 1 MiB written to {sorted(expected - names)}"
    bad = [
        (name(p), want, totals.totals.get(p, {}).get("write_bytes", 0))
        for p, want in compared.items()
        if abs(totals.totals.get(p, {}).get("write_bytes", 0) - want) > TOLERANCE * want
    ]
    assert not bad, f"mysqlio write_bytes off by more than {TOLERANCE:.0%} from performance_schema: {bad}"
