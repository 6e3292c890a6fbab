"""An Oracle MySQL 9.7 replica (devtools/mysql_replication.py: GTID auto-positioning from
a primary of the same sid root, both in their own mount and pid namespaces), sysbench on
the primary, mysqlio tracing the replica, as tests/test_replica_live.py does for MariaDB.

- the relay logs (`<host>-relay-bin.NNNNNN`) and their index are found and named
  relay_log / relay_index; MySQL keeps the connection metadata in tables, so there is no
  master.info or relay-log.info file;
- with `--mysql`, the relay log's writes come from the thread performance_schema names
  thread/sql/replica_io (OS name rpl_rca_io-N) and the applied transactions' binlog and
  redo from the applier (thread/sql/replica_worker, or replica_sql): the threads live in
  the replica's own pid namespace, so this also checks the THREAD_OS_ID mapping;
- `verify` on the replica under load agrees, the relay log among the judged rows.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_verify import LOAD_TOLERANCE, _verify

from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.mysql_replication import mysql_replica_pair, wait_caught_up
from mysqlio.devtools.rooted_mysql import RootedMySQL
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import FileTotals, read_json_line, start_top, stop_top

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

LOAD_S = 6
VERIFY_S = 4
RELAY_LOG = re.compile(r".*-relay-bin\.\d{6}")
IO_THREAD = "thread/sql/replica_io"
APPLIERS = ("thread/sql/replica_sql", "thread/sql/replica_worker")


@pytest.fixture(scope="module")
def pair(server_roots: dict[str, str]) -> Iterator[tuple[RootedMySQL, RootedMySQL, Sysbench]]:
    # innodb_max_dirty_pages_pct=1 on the replica: its table pages are written during the load
    replica_opts = MariaDBOptions(extra={"innodb_max_dirty_pages_pct": "1"})
    with mysql_replica_pair(server_roots["sid-mysql"], MariaDBOptions(), replica_opts) as (primary, replica):
        bench = Sysbench(primary, tables=2, table_size=5000, threads=2)
        try:
            bench.prepare()  # replicated: the replica creates the same tables
            wait_caught_up(primary, replica)
            yield primary, replica, bench
        finally:
            bench.stop()


def test_relay_logs_named_and_written_by_the_replica_threads(
    bpf_ready: None, pair: tuple[RootedMySQL, RootedMySQL, Sysbench], capsys: pytest.CaptureFixture[str]
) -> None:
    primary, replica, bench = pair
    top = start_top(replica.pid, interval_s=1.0, extra=["--mysql", "--group", "thread"])
    assert top.stdout is not None
    try:
        read_json_line(top.stdout, 30, "mysqlio top")
        bench.start(LOAD_S)
        bench.wait(timeout_s=LOAD_S + 60)
        wait_caught_up(primary, replica)
        objects, _ = stop_top(top)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    totals = FileTotals()
    by_thread: dict[str, dict[str, int]] = {}  # kind -> performance_schema thread name -> bytes written
    for obj in objects:
        totals.add(obj)
        for f in obj["files"]:
            for t in f["threads"]:
                name = t.get("server_thread") or "(none)"
                kind = by_thread.setdefault(f["kind"], {})
                kind[name] = kind.get(name, 0) + t["write_bytes"]
    assert totals.lost_events == 0
    files = totals.under(replica.datadir)
    relay = {p: c for p, c in files.items() if RELAY_LOG.fullmatch(p)}
    with capsys.disabled():
        print("\nMySQL replica, bytes written by kind and performance_schema thread:")
        for kind, threads in sorted(by_thread.items()):
            print(f"  {kind}: {threads}")
    assert relay and all(totals.kinds[p] == "relay_log" for p in relay), {p: totals.kinds[p] for p in relay}
    assert sum(c["write_bytes"] for c in relay.values()) > 100_000
    assert [totals.kinds[p] for p in files if p.endswith("-relay-bin.index")] in ([], ["relay_index"])
    assert not [p for p in files if p.endswith(("master.info", "relay-log.info"))]  # tables since 8.0
    relay_writers = by_thread["relay_log"]
    assert relay_writers.get(IO_THREAD, 0) == sum(relay_writers.values()), relay_writers
    applied = sum(n for name, n in by_thread["binlog"].items() if name in APPLIERS)
    assert applied == sum(by_thread["binlog"].values()) > 0, by_thread["binlog"]


def test_verify_on_the_replica_under_load(bpf_ready: None, pair: tuple[RootedMySQL, RootedMySQL, Sysbench]) -> None:
    primary, replica, bench = pair
    bench.start(VERIFY_S + 5)
    try:
        time.sleep(1.0)
        proc = _verify(replica.pid, VERIFY_S, "--json")
        out, err = proc.communicate(timeout=60)
    finally:
        bench.wait(timeout_s=60)
        wait_caught_up(primary, replica)
    assert proc.returncode == 0, out + err
    result: dict[str, Any] = json.loads(out)
    assert result["lost_events"] == 0 and result["verdict"]["state"] == "agree", result["verdict"]
    judged = {f["name"]: f for f in result["files"] if f["judged"] and f["op"] == "write"}
    assert [n for n in judged if RELAY_LOG.fullmatch(n)], sorted(judged)
    for r in judged.values():
        assert abs(r["difference_bytes"]) - r["pfs_edge_bytes"] <= LOAD_TOLERANCE * r["pfs_bytes"], r
