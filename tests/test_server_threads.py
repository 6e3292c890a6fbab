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

from mysqlio.devtools import two_users
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.traced import assert_one_line_error
from mysqlio.devtools.two_users import ALICE, BOB
from mysqlio.mysql_conn import ConnectionOptions, Connector
from mysqlio.server_threads import PREPARED, ThreadSample
from mysqlio.thread_attribution import NO_STATEMENT
from mysqlio.thread_sampler import ThreadSampler

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb, pytest.mark.usefixtures("bpf_ready")]

MYSQLIO = [sys.executable, "-m", "mysqlio"]
LOAD_S = 8


@dataclass
class Run:
    top: list[dict[str, Any]]
    reports: dict[str, dict[str, Any]]
    digest: str
    threads: dict[int, tuple[str, str]]  # tid -> (TYPE, NAME) per performance_schema
    alice_queries: int
    samples: list[ThreadSample]  # taken by the test itself under the load
    costs_ms: list[float]  # how long each of those took
    stderr: str
    shares: dict[str, Any] = field(default_factory=dict)


def _pfs_threads(db: MariaDB) -> dict[int, tuple[str, str]]:
    rows = db.sql("SELECT THREAD_OS_ID, TYPE, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL")
    return {int(tid): (kind, name) for tid, kind, name in rows}


def _json_line(line: str) -> dict[str, Any]:
    try:
        obj: dict[str, Any] = json.loads(line)
    except ValueError as exc:
        at = exc.pos if isinstance(exc, json.JSONDecodeError) else 0
        raise AssertionError(
            f"top --json wrote a bad line ({exc}): ...{line[max(0, at - 200) : at + 200]!r}..."
        ) from None
    return obj


def _sample_directly(db: MariaDB, count: int = 8) -> tuple[list[ThreadSample], list[float]]:
    """ThreadSampler's own samples at 4 Hz under the load, and what each cost (ms)."""
    sampler = ThreadSampler.open(Connector.resolve(ConnectionOptions(socket=db.socket, user="root"), db.pid))
    samples, costs = [], []
    try:
        assert sampler.problems() == [], sampler.problems()
        for _ in range(count):
            start = time.perf_counter()
            samples.append(sampler.sample())
            costs.append(1000 * (time.perf_counter() - start))
            time.sleep(0.25)
    finally:
        sampler.close()
    return samples, costs


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("threads")
    with MariaDB(two_users.options()) as db:
        bench = two_users.setup(db)
        db.wait_clean()
        trace = str(tmp / "t.mio")
        common = ["-p", str(db.pid), "--mysql"]
        top = subprocess.Popen(
            [*MYSQLIO, "top", *common, "--json", "-i", "1", "--group", "user"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # read as it comes: a full pipe would block top's writes (and a SIGINT then cuts a
        # line short: a limit of top's output, not of what is tested here)
        top_lines: list[str] = []
        reader = threading.Thread(target=lambda: top_lines.extend(top.stdout or ()), daemon=True)
        reader.start()
        record = subprocess.Popen(
            [*MYSQLIO, "record", *common, "-o", trace, "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        spill = None
        try:
            time.sleep(2)  # both attached
            spill = two_users.Spiller(db)
            bench.start(LOAD_S)
            time.sleep(LOAD_S / 2)
            threads = _pfs_threads(db)  # while every connection is there
            samples, costs = _sample_directly(db)
            bench.wait(LOAD_S + 30)
            threads.update(_pfs_threads(db))
            queries = spill.stop()
            time.sleep(1.5)
            threads.update(_pfs_threads(db))
            digest = db.sql(
                "SELECT DIGEST FROM performance_schema.events_statements_summary_by_digest"
                " WHERE DIGEST_TEXT LIKE 'SELECT SQL_BIG_RESULT%'"
            )[0][0]
        finally:
            if spill is not None:
                spill.stop()
            for proc in (top, record):
                proc.send_signal(2)
            bench.stop()
        top.wait(30)
        reader.join(30)
        top_err = top.stderr.read() if top.stderr else ""
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
            top=[_json_line(line) for line in top_lines if line.strip()],
            reports=reports,
            digest=digest,
            threads=threads,
            alice_queries=queries,
            samples=samples,
            costs_ms=costs,
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
    run.shares["top tmp by user"] = users
    # a query is keyed by its normalised text, the same while it runs (no digest yet) and after
    queries = _top_bytes(run, "tmp", "query_key")
    keys = {
        t["query_key"]
        for i in run.top
        for f in i["files"]
        for t in f["threads"]
        if t.get("digest") == run.digest and t["write_bytes"]
    }
    assert len(keys) == 1, keys
    assert _share(queries, keys.pop()) >= 0.99, queries
    run.shares["top tmp by query"] = queries


def test_binlog_and_redo_of_connection_threads_go_to_bob(run: Run) -> None:
    for kind in ("binlog", "redo"):
        users = _top_bytes(run, kind, "user", connection_threads_only=True)
        assert _share(users, f"{BOB}@localhost") >= 0.99, (kind, users)
        assert users.get(f"{ALICE}@localhost", 0) == 0, (kind, users)
        run.shares[f"top {kind} by user, connection threads"] = users
        run.shares[f"top {kind} by user, all threads"] = _top_bytes(run, kind, "user")
    # sysbench sends prepared statements, whose executions have no text in MariaDB 10.11's pfs.
    # Query attribution is sampled (4 Hz, the last 10 statements of a thread in its history):
    # an interval in which none of a thread's statements was seen is "(no statement)" —
    # unknown, never another query (seen: 1.8 % of bob's redo in one CI run). A statement
    # sampled before its command was dispatched (statement/abstract/new_packet) is not one yet:
    # it takes the name its history row gives it, or none (it was "(new_packet)": 5.8 % of bob's
    # redo in one CI run)
    queries = _top_bytes(run, "redo", "query", connection_threads_only=True)
    assert set(queries) <= {PREPARED, NO_STATEMENT}, queries
    assert _share(queries, PREPARED) >= 0.95, queries


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
    run.shares["report tmp by user"] = tmp
    run.shares["report tmp by query"] = queries
    for kind in ("binlog", "redo"):
        by_user = _report_bytes(run.reports[f"{kind}_user"], "user")
        connections = {u: b for u, b in by_user.items() if not u.startswith("(")}
        assert _share(connections, f"{BOB}@localhost") >= 0.99, (kind, by_user)
        assert connections.get(f"{ALICE}@localhost", 0) == 0, (kind, by_user)
        run.shares[f"report {kind}"] = by_user


def test_samples_name_alice_bob_and_the_background(run: Run) -> None:
    """The sampler's own view under the load: alice's sort running (its text and, once one
    has ended, its digest), bob's connections, the page cleaner as a background thread.
    What each sample cost is printed (pytest -s): a few ms."""
    assert all(s.error is None for s in run.samples), [s.error for s in run.samples]
    threads = {t.tid: t for s in run.samples for t in s.threads or ()}
    users = {t.user for t in threads.values() if not t.background}
    assert {ALICE, BOB} <= users, users
    assert any(t.background and t.name == "thread/innodb/page_cleaner_thread" for t in threads.values())
    assert not any(t.user for t in threads.values() if t.background)
    spill = [st for s in run.samples for st in s.statements if st.text.startswith("SELECT SQL_BIG_RESULT")]
    assert spill and {st.digest for st in spill} <= {run.digest, None} and run.digest in {st.digest for st in spill}
    # a statement still named statement/abstract/new_packet is not yet anything
    assert not [st for s in run.samples for st in s.statements if st.text == "(new_packet)"]
    costs = sorted(run.costs_ms)
    print(f"\nThreadSampler.sample() under load: median {costs[len(costs) // 2]:.1f} ms, max {costs[-1]:.1f} ms")
    print(f"shares: {json.dumps(run.shares)}")


@pytest.fixture(scope="module")
def pfs_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MariaDB, str]]:
    tmp = tmp_path_factory.mktemp("pfs_off")
    with MariaDB(MariaDBOptions(performance_schema=False)) as db:
        trace = str(tmp / "plain.mio")
        subprocess.run([*MYSQLIO, "record", "-p", str(db.pid), "-o", trace, "-d", "1", "-q"], check=True, timeout=60)
        yield db, trace


def test_group_user_without_mysql_is_a_usage_error(pfs_off: tuple[MariaDB, str]) -> None:
    db, trace = pfs_off
    top = subprocess.run(
        [*MYSQLIO, "top", "-p", str(db.pid), "--json", "-n", "1", "--group", "user"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_one_line_error(top, "--group user needs --mysql")
    report = subprocess.run([*MYSQLIO, "report", trace, "--group", "query"], capture_output=True, text=True)
    assert_one_line_error(report, "--group query", "no samples of the server's threads", "without --mysql")


def test_performance_schema_off_is_said_in_one_line(pfs_off: tuple[MariaDB, str]) -> None:
    """--mysql on a server with performance_schema=OFF: one line says so, the files are
    still traced, and thread rows carry no user."""
    db, _ = pfs_off
    top = subprocess.run(
        [*MYSQLIO, "top", "-p", str(db.pid), "--json", "-i", "0.5", "-n", "2", "--group", "user", "--mysql"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert top.returncode == 0, top.stderr
    said = [line for line in top.stderr.splitlines() if "performance_schema" in line]
    assert said == [
        "mysqlio: --group user needs performance_schema=ON with its thread and statement consumers: "
        "the server has performance_schema=OFF"
    ], top.stderr
    intervals = [json.loads(line) for line in top.stdout.splitlines()]
    assert len(intervals) == 2 and all("server" in i for i in intervals)
    assert all("user" not in t for i in intervals for f in i["files"] for t in f["threads"])


def test_statement_consumers_off_still_give_users(tmp_path_factory: pytest.TempPathFactory) -> None:
    """MariaDB 10.11 with performance_schema=ON and its default consumers (statements off):
    one line says queries need the consumer; users and connections still come, and no
    thread's rows are given a statement."""
    with MariaDB(MariaDBOptions()) as db:
        db.sql("CREATE DATABASE w; CREATE TABLE w.t (a INT) ENGINE=InnoDB")
        top = subprocess.Popen(
            [*MYSQLIO, "top", "-p", str(db.pid), "--json", "-i", "1", "-n", "3", "--group", "query", "--mysql"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        # a connection that stays longer than a sampling period (a shorter one is never listed)
        conn = pymysql.connect(unix_socket=db.socket, user="root", database="w", autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("INSERT INTO t SELECT seq FROM seq_1_to_1000")
            time.sleep(0.6)
        finally:
            conn.close()
        out, err = top.communicate(timeout=60)
    assert top.returncode == 0, err
    said = [line for line in err.splitlines() if "performance_schema" in line]
    assert len(said) == 1 and "events_statements_current consumer is off" in said[0], err
    rows = [t for line in out.splitlines() for f in json.loads(line)["files"] for t in f["threads"]]
    writers = [t for t in rows if t["write_bytes"] and t["user"] == "root@localhost"]
    assert writers, rows  # the INSERT's redo and binlog writes
    assert {t["query"] for t in rows} <= {"(no statement)", "(background)", "(unknown thread)"}, rows
