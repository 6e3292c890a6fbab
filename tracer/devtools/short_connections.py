"""Users on short connections, as web applications connect (tests of --group user):
carol inserts rows into a MyISAM table, dave writes `SELECT ... INTO OUTFILE` files, each
through a new connection every time (connect, one statement, `CONNECTION_S` more, close),
the two loops side by side. With the server's thread cache (on by
default), a cached OS thread serves carol's connection, then dave's, then carol's again.
erin's one statement, an outfile too, began before the tracers attached and waits on a
table lock until after: her thread reads no socket while they trace it.

Ground truth: every write to carol's table's data file (`carol_db.t`'s .MYD) is carol's
thread's, and the file only grows by them (fixed-length rows, appended); every byte of
dave's outfiles is his and of erin's outfile hers (the server writes an outfile from the
connection's own thread); the files say how many bytes each holds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pymysql

from ..filters import Filters
from ..report.build import build_report
from ..report.to_json import report_json as report_to_json
from ..trace import TraceReader
from .mariadb import MariaDB
from .traced import report_json

CAROL, DAVE, ERIN, PASSWORD = "carol", "dave", "erin", "short-1"
CONNECTION_S = 0.5  # each connection lives this long after its statement
ROWS = 40  # carol's rows per connection (fixed-length rows of ROW_BYTES: appended to the .MYD)
ROW_BYTES = 255
OUTFILE_ROWS = 2000  # dave's rows per outfile


def setup(db: MariaDB) -> str:
    """carol (INSERT on carol_db) and dave (FILE, SELECT on carol_db.src); the directory
    (as the server names it) where dave's outfiles go, which the server may write."""
    outdir = db.server_path(os.path.join(db.tmpdir, "outfiles"))
    host_dir = db.host_path(outdir)
    os.mkdir(host_dir)
    os.chmod(host_dir, 0o1777)
    digits = ", ".join(f"({d})" for d in range(10))
    db.sql(
        "CREATE DATABASE carol_db;"
        " CREATE TABLE carol_db.t (id INT NOT NULL, pad CHAR(250) NOT NULL) ENGINE=MyISAM ROW_FORMAT=FIXED;"
        " CREATE TABLE carol_db.src (id INT PRIMARY KEY, pad CHAR(100)) ENGINE=InnoDB;"
        " CREATE TABLE carol_db.erin_src (id INT PRIMARY KEY, pad CHAR(100)) ENGINE=InnoDB;"
        f" CREATE TABLE carol_db.digits (d INT) ENGINE=InnoDB; INSERT INTO carol_db.digits VALUES {digits};"
        " INSERT INTO carol_db.src SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d, REPEAT('d', 100)"
        " FROM carol_db.digits a, carol_db.digits b, carol_db.digits c, carol_db.digits e;"
        f" INSERT INTO carol_db.erin_src SELECT id, pad FROM carol_db.src LIMIT {OUTFILE_ROWS}"
    )
    db.create_user(CAROL, PASSWORD, grants=("INSERT, SELECT ON carol_db.*",))
    db.create_user(DAVE, PASSWORD, grants=("SELECT ON carol_db.*", "FILE ON *.*"))
    db.create_user(ERIN, PASSWORD, grants=("SELECT ON carol_db.*", "FILE ON *.*"))
    return outdir


@dataclass
class _Loop:
    connections: int = 0
    error: BaseException | None = None
    files: list[str] = field(default_factory=list)  # dave's outfiles, as the server names them


class ShortConnections:
    """carol's and dave's loops of short connections, until stop()."""

    def __init__(self, db: MariaDB, outdir: str) -> None:
        self._db = db
        self._outdir = outdir
        self._stop = threading.Event()
        self.carol, self.dave = _Loop(), _Loop()
        self._threads = [
            threading.Thread(target=self._run, args=(CAROL, self.carol), name=CAROL, daemon=True),
            threading.Thread(target=self._run, args=(DAVE, self.dave), name=DAVE, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _statement(self, user: str, loop: _Loop) -> str:
        if user == CAROL:
            rows = ", ".join(f"({loop.connections}, REPEAT('c', 250))" for _ in range(ROWS))
            return f"INSERT INTO carol_db.t VALUES {rows}"
        path = f"{self._outdir}/dave_{loop.connections}.txt"
        loop.files.append(path)
        return f"SELECT id, pad FROM carol_db.src LIMIT {OUTFILE_ROWS} INTO OUTFILE '{path}'"

    def _run(self, user: str, loop: _Loop) -> None:
        try:
            while not self._stop.is_set():
                conn = pymysql.connect(unix_socket=self._db.socket, user=user, password=PASSWORD, autocommit=True)
                try:
                    with conn.cursor() as cur:
                        cur.execute(self._statement(user, loop))
                    # the connection lives on, as an application's request does: longer than
                    # the samples of performance_schema are apart (a connection that ends
                    # between two is never named: "(unknown connection)"), the last one too
                    time.sleep(CONNECTION_S)
                finally:
                    conn.close()
                loop.connections += 1
        except BaseException as exc:  # reported by stop()
            loop.error = exc

    def stop(self, timeout_s: float = 30) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        for user, loop in ((CAROL, self.carol), (DAVE, self.dave)):
            if loop.error is not None:
                raise RuntimeError(f"{user}'s connections failed: {loop.error}")

    def outfile_bytes(self) -> int:
        """What dave's outfiles hold (the bytes the server wrote to them)."""
        return sum(os.path.getsize(self._db.host_path(path)) for path in self.dave.files)


class LockedOutfile:
    """erin's outfile statement, waiting on root's write lock of its table until release()."""

    def __init__(self, db: MariaDB, outdir: str) -> None:
        self._db = db
        self.path = f"{outdir}/erin.txt"
        self._root = pymysql.connect(unix_socket=db.socket, user="root", autocommit=True)
        with self._root.cursor() as cur:
            cur.execute("LOCK TABLES carol_db.erin_src WRITE")
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=ERIN, daemon=True)
        self._thread.start()
        self._wait_blocked()

    def _run(self) -> None:
        try:
            conn = pymysql.connect(unix_socket=self._db.socket, user=ERIN, password=PASSWORD, autocommit=True)
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SELECT id, pad FROM carol_db.erin_src INTO OUTFILE '{self.path}'")
            finally:
                conn.close()
        except BaseException as exc:  # reported by release()
            self.error = exc

    def _wait_blocked(self, timeout_s: float = 30) -> None:
        """Until her statement waits on the lock (inside it: no more socket reads)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._root.cursor() as cur:
                cur.execute(
                    f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{ERIN}' AND STATE LIKE '%lock%'"
                )
                (count,) = cur.fetchone() or (0,)
            if count:
                return
            if self.error is not None:
                raise RuntimeError(f"erin's statement failed: {self.error}")
            time.sleep(0.05)
        raise RuntimeError("erin's statement never waited on the table lock")

    def release(self, timeout_s: float = 30) -> int:
        """Unlock: her outfile is written; its bytes."""
        with self._root.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        self._thread.join(timeout_s)
        self._root.close()
        if self.error is not None:
            raise RuntimeError(f"erin's statement failed: {self.error}")
        return os.path.getsize(self._db.host_path(self.path))


@dataclass
class TracedRun:
    """What `top --mysql --group user` and `record --mysql` + `report --group user` gave each
    user of each file set, and what those files say."""

    top: dict[str, dict[str, int]]  # file set -> user -> write bytes
    report: dict[str, dict[str, int]]
    truth: dict[str, int]  # file set -> bytes written (the files' growth)
    trace: str  # record's
    connections: dict[str, int]  # user -> connections made
    stderr: str


# the file sets: the regular expression of their paths (report --match), and the paths' test
FILE_SETS = {
    "carol .MYD": r"/carol_db/t\.MYD$",
    "dave outfiles": r"/outfiles/dave_\d+\.txt$",
    "erin outfile": r"/outfiles/erin\.txt$",
    "binlog": r"-bin\.\d+$",
}
# whose each file set is
OWNERS = {"carol .MYD": CAROL, "dave outfiles": DAVE, "erin outfile": ERIN, "binlog": CAROL}
SEED_WAIT_S = 2.5  # after the attach: a sample, top's next interval and record's next flush


def _attached(proc: subprocess.Popen[str], prefix: str) -> None:
    """Past the lines said before the probes are attached (notes, tracefs)."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    while line and not line.startswith(prefix):
        if not line.startswith("mysqlio: ") or "Traceback" in line:
            raise AssertionError(f"{prefix}...: {line}")
        line = proc.stderr.readline()
    if not line.startswith(prefix):
        raise AssertionError(f"no line {prefix!r} before the end of stderr")


def _top_bytes(intervals: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {name: defaultdict(int) for name in FILE_SETS}
    for interval in intervals:
        for f in interval["files"]:
            for name, pattern in FILE_SETS.items():
                if re.search(pattern, f["path"]):
                    for t in f["threads"]:
                        out[name][str(t.get("user"))] += t["write_bytes"]
    return {name: dict(by) for name, by in out.items()}


def _report_bytes(trace: str) -> dict[str, dict[str, int]]:
    """Write bytes per user of each file set, as `report --group user --json --match` gives
    them: the command for the first set, the same code in this process for the others
    (a second each saved)."""
    out = {}
    for name, pattern in FILE_SETS.items():
        if not out:
            users = report_json(trace, "--group", "user", f"--match={pattern}")["users"]
        else:
            filters = Filters(match=re.compile(pattern))
            users = report_to_json(build_report(TraceReader(trace), "user", filters))["users"]
        out[name] = {u["user"]: u["write_bytes"] for u in users}
    return out


def trace_short_connections(db: MariaDB, trace: str, load_s: float) -> TracedRun:
    """erin's statement waiting, top and record attached, then erin's outfile and carol's
    and dave's short connections for load_s, all within what both traced."""
    outdir = setup(db)
    myd = os.path.join(db.datadir, "carol_db", "t.MYD")
    erin = LockedOutfile(db, outdir)
    mysqlio = [sys.executable, "-m", "mysqlio"]
    pid = ["-p", str(db.pid), "--mysql"]
    top = subprocess.Popen(
        [*mysqlio, "top", *pid, "--json", "-i", "1", "--group", "user"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    record = subprocess.Popen([*mysqlio, "record", *pid, "-o", trace], stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(top.stdout or ()), daemon=True)
    reader.start()
    load = None
    try:
        _attached(top, "mysqlio: tracing pid")
        _attached(record, "mysqlio: recording pid")
        time.sleep(SEED_WAIT_S)
        truth = {"erin outfile": erin.release()}
        before = os.path.getsize(myd)
        load = ShortConnections(db, outdir)
        time.sleep(load_s)
        load.stop()
        truth["carol .MYD"] = os.path.getsize(myd) - before
        truth["dave outfiles"] = load.outfile_bytes()
        time.sleep(1.5)  # a whole interval of top after the last write
    finally:
        if load is not None:
            load.stop()
        for proc in (top, record):
            proc.send_signal(signal.SIGINT)
    _, top_err = top.communicate(timeout=60)
    _, record_err = record.communicate(timeout=60)
    reader.join(30)
    if top.returncode or record.returncode:
        raise AssertionError(f"top exited {top.returncode}, record {record.returncode}: {top_err}{record_err}")
    intervals = [json.loads(line) for line in lines if line.strip()]
    return TracedRun(
        top=_top_bytes(intervals),
        report=_report_bytes(trace),
        truth=truth,
        trace=trace,
        connections={CAROL: load.carol.connections, DAVE: load.dave.connections},
        stderr=top_err + record_err,
    )


def assert_each_byte_to_its_user(run: TracedRun) -> None:
    """Each file set's bytes, in top and in the report: exactly what the files say where they
    say it (all but the binlog), >= 99 % to their user, <= 1 % to anyone else ("(unknown
    connection)" included)."""
    for source, by_set in (("top", run.top), ("report", run.report)):
        for name, user in OWNERS.items():
            by_user = by_set[name]
            total = sum(by_user.values())
            assert total > 0, (source, name, by_set)
            if name in run.truth:
                assert total == run.truth[name], (source, name, by_user, run.truth[name])
            own = by_user.get(f"{user}@localhost", 0)
            assert own >= 0.99 * total, (source, name, by_user)
            assert total - own <= 0.01 * total, (source, name, by_user)


def print_run(title: str, run: TracedRun) -> None:
    print(f"\n{title}: connections {run.connections}; bytes written (the files') {run.truth}")
    for source, by_set in (("top", run.top), ("report", run.report)):
        for name, by_user in by_set.items():
            print(f"  {source:6} {name:14} {by_user}")
