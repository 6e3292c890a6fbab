"""Users (--mysql) of a server in a pid namespace of its own: Oracle MySQL 9.7 and MariaDB
11.8, each in its own root and pid namespace (RootedMySQL / RootedMariaDB, started with
`unshare --pid`), traced from the host.

performance_schema's THREAD_OS_ID is the tid inside the server's namespace; the probes see
the host's. mysqlio maps one to the other through the tasks' NSpid lines (host_tids.py);
before it did, every row of `top --mysql --group user` was "(unknown thread)" (MySQL 9.7
under sysbench: 100 %).

Ground truth: sysbench runs as its own user (sbuser) with sync_binlog=1, so the binlog is
written by the committing connection threads, sbuser's: >= 99 % of the binlog's write
bytes must go to sbuser and <= 1 % to "(unknown thread)", in `top --group user` and in
`report --group user` of a trace that `record --mysql` made of the same load. Threads
performance_schema calls BACKGROUND (page cleaner, ...) are named, not unknown. Pointed at
a process that is not the server, `--mysql` says in one warning line that it may have
reached another server.

Users on short connections with the thread cache on (its default), as
tests/test_users_short_connections.py on MariaDB 10.11: each byte to its own user (>= 99 %,
<= 1 % to anyone else), though one OS thread serves one user's connection, then another's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.rooted_mysql import RootedMySQL
from mysqlio.devtools.short_connections import assert_each_byte_to_its_user, print_run, trace_short_connections
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import attached_line, report_json, start_top
from mysqlio.thread_attribution import BACKGROUND, UNKNOWN

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

USER, PASSWORD = "sbuser", "sb-secret-1"
SBUSER = f"{USER}@localhost"
LOAD_S = 5
INTERVALS = 3
SERVERS = {"mysql-9.7": ("sid-mysql", RootedMySQL, "9.7."), "mariadb-11.8": ("trixie", RootedMariaDB, "11.8.")}
ANOTHER_SERVER = "--mysql may have reached another server"


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request: pytest.FixtureRequest, server_roots: dict[str, str]) -> Iterator[tuple[RootedMariaDB, Sysbench]]:
    suite, cls, version = SERVERS[request.param]
    # pages written during the load too (as tests/test_verify.py): the page cleaner has work;
    # outfiles under the base directory (/srv/mysqlio-*, as the server sees it)
    options = MariaDBOptions(
        extra={"innodb_stats_auto_recalc": "OFF", "innodb_max_dirty_pages_pct": "1", "secure_file_priv": "/srv"}
    )
    with cls(server_roots[suite], options) as db:
        assert db.version().startswith(version), db.version()
        db.create_user(USER, PASSWORD, grants=("ALL ON sbtest.*",))
        bench = Sysbench(db, tables=2, table_size=10000, threads=2, user=USER, password=PASSWORD)
        try:
            bench.prepare()
            yield db, bench
        finally:
            bench.stop()


def _started(proc: subprocess.Popen[str], prefix: str) -> None:
    """Past the lines said before the probes are attached (notes, performance_schema's limits)."""
    assert proc.stderr is not None
    line = attached_line(proc.stderr)
    while line and not line.startswith(prefix):
        assert line.startswith("mysqlio: ") and "Traceback" not in line, line
        line = attached_line(proc.stderr)
    assert line.startswith(prefix), line


def _finished(proc: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"mysqlio exited {proc.returncode}: {err}"
    return out, err


def _bytes_by(intervals: list[dict[str, Any]], key: str, kinds: set[str] | None = None) -> dict[str, int]:
    """Write bytes per value of the thread rows' `key` (user, connection), over `kinds` (None: all)."""
    out: dict[str, int] = defaultdict(int)
    for interval in intervals:
        for f in interval["files"]:
            if kinds is None or f["kind"] in kinds:
                for t in f["threads"]:
                    out[str(t.get(key))] += t["write_bytes"]
    return dict(out)


def _table(title: str, by: dict[str, int]) -> str:
    rows = sorted(by.items(), key=lambda kv: -kv[1])
    return f"{title}:\n" + "\n".join(f"  {who:40} {n:>12,}" for who, n in rows)


def _assert_binlog_is_sbusers(binlog: dict[str, int]) -> None:
    total = sum(binlog.values())
    assert total > 256 << 10, binlog  # ~1000 commits at least
    assert binlog.get(SBUSER, 0) >= 0.99 * total, binlog
    assert binlog.get(UNKNOWN, 0) <= 0.01 * total, binlog


def test_users_of_a_server_in_its_own_pid_namespace(
    bpf_ready: None, server: tuple[RootedMariaDB, Sysbench], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, bench = server
    with open(f"/proc/{db.pid}/status") as f:
        nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
    assert len(nspid) >= 2 and nspid[0] != nspid[-1], nspid  # its tids differ from ours
    db.wait_clean()
    trace = str(tmp_path / "t.mio")
    top = start_top(db.pid, 1.0, ["--mysql", "--group", "user", "-n", str(INTERVALS)])
    record = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", "record", "-p", str(db.pid), "-o", trace, "--mysql", "-d", str(LOAD_S + 1)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _started(top, "mysqlio: tracing pid")
        _started(record, "mysqlio: recording pid")
    except BaseException:
        top.kill()
        record.kill()
        raise
    bench.start(LOAD_S)  # its connections start after the tracers: new threads, mapped as they come
    out, top_err = _finished(top, INTERVALS + 30)  # -n and -d: both stop by themselves
    _, record_err = _finished(record, LOAD_S + 30)
    output = bench.wait(30)
    assert "transactions:" in output, output
    intervals = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(intervals) == INTERVALS, (len(intervals), top_err)
    for err in (top_err, record_err):
        assert ANOTHER_SERVER not in err, err
    assert not [n for i in intervals for n in i.get("notes", ()) if ANOTHER_SERVER in n]

    binlog = _bytes_by(intervals, "user", {"binlog"})
    users = _bytes_by(intervals, "user")
    connections = _bytes_by(intervals, "connection")
    reported = {r["user"]: r["write_bytes"] for r in report_json(trace, "--group", "user", "--kind", "binlog")["users"]}
    with capsys.disabled():
        print(f"\n{db.version()} in its own pid namespace (NSpid {' '.join(nspid)})")
        for title, by in (
            ("top: binlog by user", binlog),
            ("top: all files by user", users),
            ("top: all files by connection", connections),
            ("report of record --mysql: binlog by user", reported),
        ):
            print(_table(title, by))

    _assert_binlog_is_sbusers(binlog)
    _assert_binlog_is_sbusers(reported)
    # the server's own threads wrote (the page cleaner, at least) and are known by name
    assert users.get(BACKGROUND, 0) > 0, users
    assert [c for c in connections if not c.startswith(("(", "conn ", SBUSER))], connections


def test_another_servers_threads_are_said_once(
    bpf_ready: None, server: tuple[RootedMariaDB, Sysbench], tmp_path: Path
) -> None:
    """`--socket` of the server, `-p` of another process: one warning from top (stderr and
    the JSON lines' notes) and from record (stderr, and stored: report repeats it)."""
    db, _ = server
    other = subprocess.Popen(["sleep", "60"])
    trace = str(tmp_path / "other.mio")
    mysql = ["--socket", db.socket]
    try:
        top = start_top(other.pid, 0.5, [*mysql, "--group", "user", "-n", "2"])
        record = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "record", "-p", str(other.pid), "-o", trace, *mysql, "-d", "2", "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, top_err = _finished(top, 60)
        _, record_err = _finished(record, 60)
    finally:
        other.kill()
        other.wait()
    report = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", trace, "--group", "user", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    for err in (top_err, record_err, report.stderr):
        warnings = [line for line in err.splitlines() if ANOTHER_SERVER in line]
        assert len(warnings) == 1 and warnings[0].startswith("mysqlio: warning: "), err
    print(warnings[0])
    intervals = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert intervals and all(any(ANOTHER_SERVER in n for n in i.get("notes", ())) for i in intervals), intervals


SHORT_LOAD_S = 3.0


def test_short_connections_each_users_bytes_go_to_that_user(
    bpf_ready: None, server: tuple[RootedMariaDB, Sysbench], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = server
    run = trace_short_connections(db, str(tmp_path / "short.mio"), SHORT_LOAD_S)
    with capsys.disabled():
        print_run(f"{db.version()} in its own pid namespace, short connections", run)
    assert min(run.connections.values()) >= 3, run.connections
    assert_each_byte_to_its_user(run)
