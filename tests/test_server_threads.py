"""Users, connections and queries (--mysql): each OS thread's bytes given to the server's own
view of it (performance_schema), against a real MariaDB 10.11 with two users.

Ground truth: user A (alice) runs one query that sorts through files in tmpdir (filesort
with a small sort buffer: kind "tmp"); user B (bob) runs sysbench oltp_write_only with the
binary log on. The tmp bytes go >= 99 % to alice and to that query's digest (read from
performance_schema's digest summary); the binlog and redo bytes written by connection
threads go >= 99 % to bob and none to alice; no thread that performance_schema calls
BACKGROUND is given to a user. `top --group user --json` and `record --mysql` + `report
--group user|query --json` run on the same load. Without --mysql, or with
performance_schema OFF, one line says what is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench

pytestmark = [pytest.mark.mariadb, pytest.mark.usefixtures("bpf_ready")]

MYSQLIO = [sys.executable, "-m", "mysqlio"]
ALICE, BOB, PASSWORD = "alice", "bob", "secret-1"
LOAD_S = 8
# the spilling query: a sort of 120k rows of 100 bytes with a 32 KiB sort buffer (merge files in tmpdir)
SPILL_SQL = "SELECT SQL_BIG_RESULT pad, COUNT(*) FROM big GROUP BY pad HAVING COUNT(*) > 1"
CONSUMERS = {
    "performance_schema_consumer_events_statements_current": "ON",
    "performance_schema_consumer_events_statements_history": "ON",
}


@dataclass
class Run:
    top: list[dict[str, Any]]
    reports: dict[str, dict[str, Any]]
    digest: str
    threads: dict[int, tuple[str, str]]  # tid -> (TYPE, NAME) per performance_schema
    alice_queries: int
    stderr: str
    shares: dict[str, Any] = field(default_factory=dict)


def _spill_loop(db: MariaDB, stop: threading.Event, done: list[int]) -> None:
    conn = pymysql.connect(unix_socket=db.socket, user=ALICE, password=PASSWORD, database="alice_db")
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sort_buffer_size = 32768")
            while not stop.is_set():
                cur.execute(SPILL_SQL)
                cur.fetchall()
                done[0] += 1
    finally:
        conn.close()


def _pfs_threads(db: MariaDB) -> dict[int, tuple[str, str]]:
    rows = db.sql("SELECT THREAD_OS_ID, TYPE, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL")
    return {int(tid): (kind, name) for tid, kind, name in rows}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("threads")
    with MariaDB(MariaDBOptions(extra=CONSUMERS)) as db:
        db.sql(
            f"CREATE DATABASE alice_db; CREATE TABLE alice_db.big (id INT PRIMARY KEY, pad CHAR(100)) ENGINE=InnoDB;"
            " INSERT INTO alice_db.big SELECT seq, CONCAT(MD5(seq), MD5(seq + 1), MD5(seq + 2), 'x')"
            " FROM alice_db.seq_1_to_120000;"
            f" CREATE USER {ALICE}@localhost IDENTIFIED BY '{PASSWORD}'; GRANT SELECT ON alice_db.* TO {ALICE}@localhost;"
            f" CREATE USER {BOB}@localhost IDENTIFIED BY '{PASSWORD}'; GRANT ALL ON sbtest.* TO {BOB}@localhost"
        )
        bench = Sysbench(db, tables=2, table_size=10000, threads=2, user=BOB, password=PASSWORD)
        bench.prepare()
        db.wait_clean()
        trace = str(tmp / "t.mio")
        common = ["-p", str(db.pid), "--mysql"]
        top = subprocess.Popen(
            [*MYSQLIO, "top", *common, "--json", "-i", "1", "--group", "user"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        record = subprocess.Popen(
            [*MYSQLIO, "record", *common, "-o", trace, "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        stop, done = threading.Event(), [0]
        try:
            time.sleep(2)  # both attached
            spill = threading.Thread(target=_spill_loop, args=(db, stop, done))
            spill.start()
            bench.start(LOAD_S)
            time.sleep(LOAD_S / 2)
            threads = _pfs_threads(db)  # while every connection is there
            bench.wait(LOAD_S + 30)
            threads.update(_pfs_threads(db))
            stop.set()
            spill.join(60)
            time.sleep(1.5)
            threads.update(_pfs_threads(db))
            digest = db.sql(
                "SELECT DIGEST FROM performance_schema.events_statements_summary_by_digest"
                " WHERE DIGEST_TEXT LIKE 'SELECT SQL_BIG_RESULT%'"
            )[0][0]
        finally:
            stop.set()
            for proc in (top, record):
                proc.send_signal(2)
            bench.stop()
        top_out, top_err = top.communicate(timeout=30)
        _, rec_err = record.communicate(timeout=30)
        assert record.returncode == 0, rec_err
        assert top.returncode == 0, top_err
        reports = {}
        for name, args in {
            "user": ["--group", "user"],
            "tmp_user": ["--group", "user", "--kind", "tmp"],
            "tmp_query": ["--group", "query", "--kind", "tmp"],
            "binlog_user": ["--group", "user", "--kind", "binlog"],
            "redo_user": ["--group", "user", "--kind", "redo"],
        }.items():
            out = subprocess.run(
                [*MYSQLIO, "report", trace, *args, "--json"], capture_output=True, text=True, check=False
            )
            assert out.returncode == 0, out.stderr
            reports[name] = json.loads(out.stdout)
        yield Run(
            top=[json.loads(line) for line in top_out.splitlines() if line.strip()],
            reports=reports,
            digest=digest,
            threads=threads,
            alice_queries=done[0],
            stderr=top_err + rec_err,
        )


def _top_bytes(run: Run, kind: str, key: str, connection_threads_only: bool = False) -> dict[str, int]:
    """Bytes written per value of a thread row's `key` (user, digest) in top's JSON, for one file kind."""
    out: dict[str, int] = defaultdict(int)
    for interval in run.top:
        for f in interval["files"]:
            if f["kind"] != kind:
                continue
            for t in f["threads"]:
                if connection_threads_only and t.get("server_thread") != "thread/sql/one_connection":
                    continue
                out[str(t.get(key))] += t["write_bytes"]
    return dict(out)


def _share(by: dict[str, int], who: str) -> float:
    total = sum(by.values())
    assert total > 0, f"no bytes at all: {by}"
    return by.get(who, 0) / total


def test_tmp_bytes_go_to_alice_and_her_query(run: Run) -> None:
    assert run.alice_queries >= 2, "the spilling query ran too few times"
    users = _top_bytes(run, "tmp", "user")
    assert sum(users.values()) > 1 << 20, f"the query did not spill to tmpdir: {users}"
    assert _share(users, f"{ALICE}@localhost") >= 0.99, users
    digests = _top_bytes(run, "tmp", "digest")
    assert _share(digests, run.digest) >= 0.99, digests


def test_binlog_and_redo_of_connection_threads_go_to_bob(run: Run) -> None:
    for kind in ("binlog", "redo"):
        users = _top_bytes(run, kind, "user", connection_threads_only=True)
        assert _share(users, f"{BOB}@localhost") >= 0.99, (kind, users)
        assert users.get(f"{ALICE}@localhost", 0) == 0, (kind, users)
        run.shares[kind] = users


def test_background_threads_are_never_a_users(run: Run) -> None:
    seen = 0
    for interval in run.top:
        for f in interval["files"]:
            for t in f["threads"]:
                assert "user" in t, t
                kind = run.threads.get(t["tid"], ("?", "?"))[0]
                if kind == "BACKGROUND":
                    seen += 1
                    assert t["user"] == "(background)", t
                if t["tid"] == 0 or t["tid"] not in run.threads:
                    assert t["user"] in ("(background)", "(unknown thread)"), t
    assert seen, "no background thread did any I/O"


def _report_bytes(report: dict[str, Any], group: str) -> dict[str, int]:
    return {row[group]: row["write_bytes"] for row in report[GROUP_LISTS[group]]}


GROUP_LISTS = {"user": "users", "query": "queries"}


def test_report_group_user_and_query(run: Run) -> None:
    users = _report_bytes(run.reports["user"], "user")
    assert {f"{ALICE}@localhost", f"{BOB}@localhost", "(background)"} <= set(users), users
    tmp = _report_bytes(run.reports["tmp_user"], "user")
    assert sum(tmp.values()) > 1 << 20 and _share(tmp, f"{ALICE}@localhost") >= 0.99, tmp
    queries = _report_bytes(run.reports["tmp_query"], "query")
    spill = [q for q in queries if q.startswith("SELECT SQL_BIG_RESULT")]
    assert len(spill) == 1 and _share(queries, spill[0]) >= 0.99, queries
    for kind in ("binlog", "redo"):
        by_user = _report_bytes(run.reports[f"{kind}_user"], "user")
        connections = {u: b for u, b in by_user.items() if not u.startswith("(")}
        assert _share(connections, f"{BOB}@localhost") >= 0.99, (kind, by_user)
        assert connections.get(f"{ALICE}@localhost", 0) == 0, (kind, by_user)
        run.shares[f"report {kind}"] = by_user
