"""`mysqlio verify` against a real MariaDB: per-file bytes of mysqlio against the
server's performance_schema.file_summary_by_instance.

Under sysbench load the window's edges cut through running I/O, so each edge
reads performance_schema just before and just after mysqlio's drain and the
difference must lie within that bracket (±) plus LOAD_TOLERANCE. Measured on
this machine (2 cores, io_uring backend, 5 s windows): data files 0 bytes off,
the binlog within its ± every time; LOAD_TOLERANCE = 1 % (the value of
test_pfs_crosscheck.py) leaves room only for asynchronous writes in flight at an
edge, which performance_schema counts at submission and mysqlio at completion.
The tool itself allows 2 % (verify.TOLERANCE): real disks keep more in flight.

When the server is idle at both edges (quiesced as in test_pfs_crosscheck.py,
innodb_stats_auto_recalc=OFF for the same reason), the ± is 0 and every file
performance_schema has a row for must agree to the byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import attached_line
from mysqlio.verify.compare import TOLERANCE
from mysqlio.verify.lost import LIMIT_VARIABLE, LostInstances, lost_warning, read_instances
from mysqlio.verify.pfs import LOST_STATUS, status_value

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

MYSQLIO = [sys.executable, "-m", "mysqlio"]
TABLES = 2
LOAD_TOLERANCE = 0.01  # beyond the edge bracket; never loosen
EXPECTED = {"ibdata1", "mysql-bin.000001", *(f"sbtest/sbtest{i}.ibd" for i in range(1, TABLES + 1))}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[MariaDB, Sysbench]]:
    # innodb_max_dirty_pages_pct=1: pages are written during a few seconds of load
    # (by default MariaDB flushes this small load only at shutdown)
    extra = {"innodb_stats_auto_recalc": "OFF", "innodb_max_dirty_pages_pct": "1"}
    with MariaDB(MariaDBOptions(extra=extra)) as db:
        bench = Sysbench(db, tables=TABLES, table_size=10000, threads=2)
        try:
            bench.prepare()
            yield db, bench
        finally:
            bench.stop()


def _verify(pid: int, seconds: float, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*MYSQLIO, "verify", "-p", str(pid), "-d", str(seconds), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _by_name(result: dict[str, Any], op: str = "write") -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in result["files"] if f["op"] == op}


def test_json_under_load(bpf_ready: None, server: tuple[MariaDB, Sysbench]) -> None:
    db, bench = server
    bench.start(9)
    try:
        time.sleep(1.0)
        proc = _verify(db.pid, 5, "--json")
        out, err = proc.communicate(timeout=60)
    finally:
        bench.wait(timeout_s=60)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert out.count("\n") == 1  # one object
    assert result["pid"] == db.pid and result["connection"] == db.socket
    assert 5.0 <= result["window_s"] < 6.5
    assert result["lost_events"] == 0
    assert result["tolerance_pct"] == 100 * TOLERANCE
    assert result["verdict"]["state"] == "agree", result["verdict"]
    rows = _by_name(result)
    assert {name for name, r in rows.items() if r["judged"]} >= EXPECTED, sorted(rows)
    table = []
    for name in sorted(EXPECTED):
        r = rows[name]
        table.append(f"{name}: pfs {r['pfs_bytes']} ±{r['pfs_edge_bytes']} mysqlio {r['mysqlio_bytes']}")
        assert r["agrees"] is True
        excess = abs(r["difference_bytes"]) - r["pfs_edge_bytes"]
        assert excess <= LOAD_TOLERANCE * r["pfs_bytes"], r
    print("\n" + "\n".join(table))
    # every judged row: the verdict is what the rows say
    judged = [r for r in result["files"] if r["judged"]]
    assert result["verdict"]["judged"] == len(judged) == result["verdict"]["agreeing"]
    # MariaDB has no performance_schema row for the redo log: shown against Innodb_os_log_written,
    # which counts the redo generated; the file gets at least that (whole blocks rewritten)
    redo = result["redo"]
    assert redo is not None and rows["ib_logfile0"]["pfs_bytes"] is None
    assert redo["mysqlio_bytes"] >= redo["status_bytes"] - redo["status_edge_bytes"] > 0
    # 10.11 writes its redo log with system calls: nothing memory-mapped, nothing left out
    # (11.8's mapped redo log: tests/test_foreign_servers.py)
    assert result["mapped"] == [] and result["mapped_note"] is None


def test_text_under_load(bpf_ready: None, server: tuple[MariaDB, Sysbench]) -> None:
    db, bench = server
    bench.start(7)
    try:
        time.sleep(1.0)
        proc = _verify(db.pid, 4)
        out, err = proc.communicate(timeout=60)
    finally:
        bench.wait(timeout_s=60)
    assert proc.returncode == 0, out + err
    assert err.strip() == "mysqlio: comparing with performance_schema for 4 s ..."
    lines = out.splitlines()
    assert lines[0].startswith(f"mysqlio verify: pid {db.pid} (mariadbd")
    for name in EXPECTED:
        row = next((line for line in lines if line.split()[1:2] == [name]), None)
        assert row is not None and row.startswith("write ") and row.endswith("ok"), out
    assert any(line.startswith("agreement: ") and " rows with more than 1 MiB agree" in line for line in lines), out
    assert any(line.startswith("why small differences are expected: ") for line in lines), out
    assert any(line.startswith("redo log, not in performance_schema: ") for line in lines), out
    assert not any(line.startswith("not compared: ") for line in lines), out


def _quiet(db: MariaDB) -> None:
    """wait_clean(), then performance_schema unchanged for 1 s (see test_pfs_crosscheck.py)."""
    for _ in range(5):
        db.wait_clean()
        first = db.file_io_summary()
        time.sleep(1.0)
        if db.file_io_summary() == first:
            return
    raise AssertionError("server keeps writing after wait_clean()")


def test_exact_when_quiet_at_both_edges(bpf_ready: None, server: tuple[MariaDB, Sysbench]) -> None:
    db, bench = server
    window_s = 14.0
    _quiet(db)
    proc = _verify(db.pid, window_s, "--json")
    assert proc.stderr is not None
    try:
        assert attached_line(proc.stderr).startswith("mysqlio: comparing")  # probes attached: the window starts
        started = time.monotonic()
        time.sleep(0.5)  # the first edge (two performance_schema reads around a drain)
        bench.start(3)
        bench.wait(timeout_s=60)
        _quiet(db)
        quiet_at = time.monotonic() - started
        assert quiet_at < window_s - 0.5, f"quiesced only {quiet_at:.1f}s into a {window_s}s window"
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["verdict"]["state"] == "agree"
    rows = _by_name(result)
    assert {name for name, r in rows.items() if r["judged"]} >= EXPECTED
    compared = [r for r in result["files"] if r["pfs_bytes"] is not None]
    assert len(compared) >= len(EXPECTED)
    print(f"\nquiet {quiet_at:.1f}s into the window; exact for {[r['name'] + ' ' + r['op'] for r in compared]}")
    for r in compared:  # every file with a performance_schema row, judged or not, reads or writes
        assert (r["pfs_edge_bytes"], r["difference_bytes"]) == (0, 0), r
    assert result["redo"]["status_edge_bytes"] == 0


def test_create_index_loses_an_instance_with_room_to_spare(server: tuple[MariaDB, Sysbench]) -> None:
    """MariaDB 10.11 counts a lost file instance for a CREATE INDEX though performance_schema
    has room (mysqlio.verify.lost): read from the live server, verify's note does not blame
    performance_schema_max_file_instances for it. No BPF: the server's side only (about 1 s)."""
    db, _ = server
    conn = pymysql.connect(unix_socket=db.socket, user="root", autocommit=True)
    try:
        before = status_value(conn, LOST_STATUS)
        assert before is not None
        db.sql("CREATE TABLE sbtest.lost_probe (id INT PRIMARY KEY, k INT) ENGINE=InnoDB")
        db.sql("INSERT INTO sbtest.lost_probe VALUES (1, 1), (2, 2)")
        assert status_value(conn, LOST_STATUS) == before  # a table and its rows lose nothing
        db.sql("CREATE INDEX k_1 ON sbtest.lost_probe (k)")
        after = status_value(conn, LOST_STATUS)
        in_use, limit = read_instances(conn)
        # the table's file keeps its row
        rows = db.sql("SELECT COUNT(*) FROM performance_schema.file_instances WHERE FILE_NAME LIKE '%/lost_probe.ibd'")
    finally:
        conn.close()
        db.sql("DROP TABLE IF EXISTS sbtest.lost_probe")
    assert after == before + 1
    assert rows == [("1",)]
    assert in_use is not None and limit is not None
    lost = LostInstances(before, after, in_use, limit)
    assert not lost.at_limit()
    note = lost_warning(lost, ["error.log"])
    assert note is not None and "not for want of room" in note and f"raise {LIMIT_VARIABLE}" not in note
