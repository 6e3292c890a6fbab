"""A real replica: MariaDB 10.11 replicating from a primary over 127.0.0.1
(devtools/replication.py), sysbench on the primary, `mysqlio top` tracing the
replica's mariadbd.

On the replica, the relay logs, their index, relay-log.info and master.info must
be found, classified (relay_log, relay_index, replication_info) and exact against
the replica's own performance_schema.file_summary_by_instance: bytes and requests,
written and read, over a window idle at both edges (as in test_pfs_crosscheck.py:
stop the load, wait until the replica has applied everything the primary binlogged,
quiesce InnoDB, then the performance_schema snapshot must stay equal for 1 s).

Two settings beyond the sandbox defaults, on the replica only:
- max_relay_log_size=1M: the I/O thread rotates its relay log during the load,
  so the relay-log index is written inside the window (by default a relay log
  grows to max_binlog_size, 1 GiB, and the index is touched only at start);
- relay_log_purge=OFF: the SQL thread does not delete the relay logs it has
  applied; a deleted file loses its performance_schema row, and could not be
  compared (mysqlio counts it, as "(deleted)").
innodb_stats_auto_recalc=OFF on both, for the reason test_pfs_crosscheck.py gives.

MariaDB 10.11 names none of its threads (every /proc/PID/task/*/comm is
"mariadbd"), so the replica threads are told apart by performance_schema.threads:
the test maps THREAD_OS_ID -> NAME itself and checks that every relay-log write
comes from the thread named thread/sql/slave_io (it receives events from the
primary) and every relay-log read from thread/sql/slave_sql (it applies them), or,
with slave_parallel_threads=2, from a worker (thread/sql/rpl_parallel_thread) that
re-reads a transaction it retries; the workers then commit (write the redo log) and
the SQL thread does not.

Three modes: MASTER_USE_GTID=slave_pos, a binlog file and offset (MASTER_USE_GTID=no:
master.info is rewritten per event), and GTID with two parallel workers. `top --mysql`
must name each thread as performance_schema does. Last, `mysqlio verify` on the
replica under load agrees for the relay logs and master.info.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.replication import replica_pair, replica_status, wait_caught_up
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import read_json_line, start_top
from mysqlio.verify.pfs import FileIo, summary_delta

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

INTERVAL_S = 1.0
LOAD_S = 4
TABLES = 2
TABLE_SIZE = 5000
COMMON = {"innodb_stats_auto_recalc": "OFF"}
REPLICA = {**COMMON, "max_relay_log_size": "1M", "relay_log_purge": "OFF"}
REPLICATION_KINDS = ("relay_log", "relay_index", "replication_info")
IO_THREAD, SQL_THREAD = "thread/sql/slave_io", "thread/sql/slave_sql"
WORKER_THREAD = "thread/sql/rpl_parallel_thread"  # slave_parallel_threads > 0


@dataclass
class Pair:
    primary: MariaDB
    replica: MariaDB
    bench: Sysbench
    gtid: bool
    workers: int  # slave_parallel_threads


# mode -> (MASTER_USE_GTID=slave_pos, slave_parallel_threads)
MODES = {"gtid": (True, 0), "binlog_pos": (False, 0), "gtid_parallel": (True, 2)}


@pytest.fixture(params=MODES)
def pair(request: pytest.FixtureRequest) -> Iterator[Pair]:
    gtid, workers = MODES[request.param]
    primary_opts = MariaDBOptions(extra=COMMON)
    replica_opts = MariaDBOptions(log_bin=False, extra={**REPLICA, "slave_parallel_threads": str(workers)})
    with replica_pair(primary_opts, replica_opts, gtid=gtid) as (primary, replica):
        bench = Sysbench(primary, tables=TABLES, table_size=TABLE_SIZE, threads=2)
        try:
            bench.prepare()  # replicated: the replica creates the same tables
            wait_caught_up(primary, replica)
            yield Pair(primary, replica, bench, gtid, workers)
        finally:
            bench.stop()


def _snapshot(db: MariaDB) -> dict[str, FileIo]:
    return {path: FileIo(*counts) for path, counts in db.file_io_summary().items()}


def _quiet_snapshot(pair: Pair, attempts: int = 5) -> dict[str, FileIo]:
    """Replica caught up, both servers' InnoDB clean, then a replica snapshot equal for 1 s."""
    moving: dict[str, FileIo] = {}
    for _ in range(attempts):
        wait_caught_up(pair.primary, pair.replica)
        pair.primary.wait_clean()
        pair.replica.wait_clean()
        first = _snapshot(pair.replica)
        time.sleep(1.0)
        second = _snapshot(pair.replica)
        moving = summary_delta(first, second)
        if not moving:
            return second
    raise AssertionError(f"replica keeps doing I/O after catching up: {sorted(moving)}")


def _os_thread_names(db: MariaDB) -> dict[int, str]:
    """performance_schema.threads: THREAD_OS_ID -> NAME (background and replica threads)."""
    rows = db.sql("SELECT THREAD_OS_ID, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL")
    return {int(tid): name for tid, name in rows}


@dataclass
class Traced:
    """mysqlio's sums over the window, per file and per (file, thread)."""

    files: dict[str, FileIo] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    deleted: dict[str, bool] = field(default_factory=dict)
    by_thread: dict[str, dict[int, FileIo]] = field(default_factory=dict)
    thread_names: dict[int, str] = field(default_factory=dict)
    # tid -> (performance_schema NAME, connection label) as mysqlio's --mysql view gives them
    server_views: dict[int, set[tuple[str | None, str | None]]] = field(default_factory=dict)
    lost_events: int = 0

    def add(self, obj: dict[str, Any]) -> None:
        self.lost_events += obj["lost_events"]
        for f in obj["files"]:
            path = f["path"]
            self.kinds[path] = f["kind"]
            self.deleted[path] = f["deleted"]
            self.files[path] = self.files.get(path, FileIo()) + _io(f)
            threads = self.by_thread.setdefault(path, {})
            for t in f["threads"]:
                self.thread_names[t["tid"]] = t["name"]
                if _io(t):
                    view = (t.get("server_thread"), t.get("connection"))
                    self.server_views.setdefault(t["tid"], set()).add(view)
                threads[t["tid"]] = threads.get(t["tid"], FileIo()) + _io(t)


def _io(counts: dict[str, Any]) -> FileIo:
    return FileIo(counts["write_bytes"], counts["write_ops"], counts["read_bytes"], counts["read_ops"])


def test_replica_files_exact_and_named(bpf_ready: None, pair: Pair) -> None:
    replica = pair.replica
    datadir = replica.datadir
    s0 = _quiet_snapshot(pair)
    relay_before = sorted(n for n in os.listdir(datadir) if n.startswith("mysqld-relay-bin.0"))

    retried_before = replica.status("Slave_retried_transactions")
    top = start_top(replica.pid, interval_s=INTERVAL_S, extra=["--mysql"])
    assert top.stdout is not None
    traced = Traced()
    try:
        traced.add(read_json_line(top.stdout, 30, "mysqlio top"))  # probes attached
        # read every line as it comes: a JSON line with --mysql is ~12 KiB, a full pipe would
        # block top's loop for most of the window
        lines: list[str] = []
        stdout = top.stdout
        reader = threading.Thread(target=lambda: lines.extend(line for line in stdout if line.strip()), daemon=True)
        reader.start()
        s1 = _snapshot(replica)
        assert not summary_delta(s0, s1), "replica I/O around the attach: the window is not exact"
        pair.bench.start(LOAD_S)
        pair.bench.wait(timeout_s=LOAD_S + 60)
        s2 = _quiet_snapshot(pair)
        time.sleep(INTERVAL_S * 1.2)
        top.send_signal(signal.SIGINT)  # the last partial interval is printed
        top.wait(timeout=20)
        reader.join(timeout=20)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    assert top.returncode == 0, top.stderr.read() if top.stderr else ""
    for line in lines:
        traced.add(json.loads(line))
    s3 = _snapshot(replica)
    assert not summary_delta(s2, s3), "replica I/O after the last snapshot: the window is not exact"
    assert traced.lost_events == 0

    pfs = summary_delta(s1, s2)
    names = _os_thread_names(replica)
    io_tid = next(tid for tid, name in names.items() if name == IO_THREAD)
    sql_tid = next(tid for tid, name in names.items() if name == SQL_THREAD)
    workers = {tid for tid, name in names.items() if name == WORKER_THREAD}
    assert len(workers) == pair.workers, f"slave_parallel_threads={pair.workers}: {names}"
    retried = pair.replica.status("Slave_retried_transactions") - retried_before

    relay_logs = sorted(p for p in pfs if os.path.basename(p).startswith("mysqld-relay-bin.0"))
    master_info = os.path.join(datadir, "master.info")
    expected = {
        os.path.join(datadir, "mysqld-relay-bin.index"): "relay_index",
        os.path.join(datadir, "relay-log.info"): "replication_info",
        **({} if pair.gtid else {master_info: "replication_info"}),
        **dict.fromkeys(relay_logs, "relay_log"),
    }
    rows = []
    for path in sorted(expected):
        want, got = pfs.get(path, FileIo()), traced.files.get(path, FileIo())
        threads = {
            f"{names.get(tid, traced.thread_names.get(tid, '?'))} [{tid}]": io
            for tid, io in traced.by_thread.get(path, {}).items()
        }
        rows.append(f"{os.path.relpath(path, datadir):26} {traced.kinds.get(path, '-'):17} pfs {want} mysqlio {got}")
        rows.append(f"{'':26} by thread: {threads}")
    redo_by = traced.by_thread[os.path.join(datadir, "ib_logfile0")]
    redo = {f"{names.get(t, '?')} [{t}]": io for t, io in redo_by.items()}
    print(
        f"\nrelay logs before the window {relay_before}; replica status {_positions(replica)}; "
        f"{retried} transactions retried\n"
        + "\n".join(rows)
        + f"\nib_logfile0 by thread: {redo}"
        + f"\nmysqlio's server view: {traced.server_views}"
    )

    # the load rotated the relay log (max_relay_log_size=1M): several relay logs written in the window
    assert len(relay_logs) >= 2, f"relay logs written in the window: {relay_logs}"
    for path, kind in expected.items():
        assert path in pfs, f"performance_schema saw no I/O on {path} in the window"
        assert traced.kinds.get(path) == kind, f"{path}: kind {traced.kinds.get(path)!r}, want {kind!r}"
        got, want = traced.files[path], pfs[path]
        # A relay log the SQL thread has finished costs one read(2) more than performance_schema
        # counts: the server's read cache reads with MY_FULL_IO, so its last my_read() of the file
        # is a short read followed by a read that returns 0 (end of file): two system calls,
        # one performance_schema read (strace of thread/sql/slave_sql shows both). Bytes are exact.
        # With parallel replication a worker retrying a transaction (a conflict in optimistic
        # mode) re-reads its events from the relay log, and may end at the file's end the same way.
        finished = int(kind == "relay_log" and path != relay_logs[-1])
        worker_reads = sum(io.read_ops for tid, io in traced.by_thread.get(path, {}).items() if tid in workers)
        assert replace(got, read_ops=want.read_ops) == want, f"{path}: mysqlio {got} != pfs {want}"
        assert finished <= got.read_ops - want.read_ops <= finished + worker_reads, f"{path}: {got} / pfs {want}"
    if pair.gtid:  # the position is in mysql.gtid_slave_pos: master.info is not rewritten per event
        assert master_info not in pfs and not traced.files.get(master_info)
    # At each rotation the I/O thread writes the new relay log's name to a register file,
    # <relay log>.~rec~, then to the index, then deletes the register: performance_schema loses
    # its row with the file (nothing to compare), mysqlio shows it as deleted, same bytes as the index.
    index, register = os.path.join(datadir, "mysqld-relay-bin.index"), os.path.join(datadir, "mysqld-relay-bin.~rec~")
    assert register not in pfs and traced.kinds.get(register) == "relay_index" and traced.deleted[register]
    assert traced.files[register] == FileIo(pfs[index].write_bytes, pfs[index].write_ops, 0, 0)
    assert {tid for tid, io in traced.by_thread[register].items() if io} == {io_tid}
    # every replication file the server touched in the window was compared, nothing else got its kinds
    touched = {p for p, k in traced.kinds.items() if k in REPLICATION_KINDS and traced.files[p]}
    assert touched == {*expected, register}, sorted(touched ^ {*expected, register})

    # who did it: the I/O thread writes the relay logs, the SQL thread reads them
    for path in relay_logs:
        by = traced.by_thread[path]
        writers = {tid for tid, io in by.items() if io.write_ops}
        readers = {tid for tid, io in by.items() if io.read_ops}
        assert writers <= {io_tid}, f"{path} written by {[names.get(t, t) for t in writers]}"
        assert readers <= {sql_tid, *workers}, f"{path} read by {[names.get(t, t) for t in readers]}"
    written = sum(traced.by_thread[p].get(io_tid, FileIo()).write_bytes for p in relay_logs)
    read_by_sql = sum(traced.by_thread[p].get(sql_tid, FileIo()).read_bytes for p in relay_logs)
    read_by_workers = sum(traced.by_thread[p].get(t, FileIo()).read_bytes for p in relay_logs for t in workers)
    assert written == sum(pfs[p].write_bytes for p in relay_logs)
    assert read_by_sql + read_by_workers == sum(pfs[p].read_bytes for p in relay_logs)
    assert retried > 0 or read_by_workers == 0  # workers read the relay log only to retry
    if not pair.gtid:
        by = traced.by_thread[master_info]
        assert {tid for tid, io in by.items() if io} == {io_tid}  # the I/O thread's position
    # who applies: the SQL thread commits (its redo-log writes), or with parallel replication the
    # workers do and the SQL thread only hands them the events
    applier_redo = {tid: redo_by.get(tid, FileIo()).write_ops for tid in (sql_tid, *workers)}
    if workers:
        assert applier_redo[sql_tid] == 0 and sum(applier_redo.values()) > 0, redo
    else:
        assert applier_redo[sql_tid] > 0, redo
    # mysqlio's own naming (top --mysql: server_threads.py maps THREAD_OS_ID -> NAME the same way)
    for tid, views in traced.server_views.items():
        assert {name for name, _ in views} == {names.get(tid)}, f"thread {tid}: mysqlio {views}, pfs {names.get(tid)}"
    assert traced.server_views[io_tid] == {(IO_THREAD, "replica I/O")}
    assert traced.server_views[sql_tid] == {(SQL_THREAD, "replica SQL")}
    relay_info = traced.by_thread[os.path.join(datadir, "relay-log.info")]
    assert {tid for tid, io in relay_info.items() if io} == {sql_tid}  # the SQL thread's position


def _positions(replica: MariaDB) -> dict[str, str]:
    status = replica_status(replica)
    keys = ("Master_Log_File", "Read_Master_Log_Pos", "Exec_Master_Log_Pos", "Relay_Log_File", "Gtid_IO_Pos")
    return {k: status.get(k, "?") for k in keys}


@pytest.mark.parametrize("pair", ["binlog_pos"], indirect=True)
def test_verify_on_a_replica_under_load(bpf_ready: None, pair: Pair) -> None:
    """`mysqlio verify` on the replica while the primary is loaded: the relay logs (written
    and read) and master.info are judged and agree (within the edges' ± plus 2 %)."""
    pair.bench.start(9)
    try:
        time.sleep(1.0)
        proc = subprocess.run(
            [sys.executable, "-m", "mysqlio", "verify", "-p", str(pair.replica.pid), "-d", "5", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        pair.bench.wait(timeout_s=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    judged = [f for f in result["files"] if f["judged"]]
    print(
        "\n"
        + "\n".join(
            f"{f['name']} {f['op']} {f['kind']} pfs {f['pfs_bytes']} ±{f['pfs_edge_bytes']} "
            f"mysqlio {f['mysqlio_bytes']}"
            for f in judged
        )
    )
    assert result["verdict"]["state"] == "agree" and all(f["agrees"] for f in judged), result["verdict"]
    seen = {(f["kind"], f["op"]) for f in judged}
    assert {("relay_log", "write"), ("relay_log", "read"), ("replication_info", "write")} <= seen, seen
    assert "master.info" in {f["name"] for f in judged if f["kind"] == "replication_info"}
