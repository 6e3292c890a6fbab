"""`mysqlio exporter --all` with an Oracle MySQL 9.7 and a MariaDB 11.8 side by side, each in
its own root and mount + pid namespace (as two containers of one host): one exporter, each
server's series under its own `server` label, and each server's bytes written by kind
equal to its own performance_schema over a window quiet at both edges (test_mysql.py's
method: per instance, so MySQL's recycled redo files count once).

MariaDB 11.8's performance_schema has no row for its redo log (not instrumented), so its
redo is not compared; MySQL's is.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator

import pytest
from test_mysql import _delta, _instances, _quiet

from mysqlio.classify import Classifier
from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.rooted_mysql import RootedMySQL
from mysqlio.devtools.scrape import EXPORTER_INTERVAL_S, Metrics, free_port, scrape, wait_for
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import start_fleet_exporter
from mysqlio.layout import read_layout

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

LOAD_S = 3
TOLERANCE = 0.01  # per kind, relative; never loosen
MIN_BYTES = 64 << 10  # kinds compared: more than this written in the window
QUIET = {"innodb_stats_auto_recalc": "OFF"}

Server = RootedMySQL | RootedMariaDB


@pytest.fixture(scope="module")
def servers(server_roots: dict[str, str]) -> Iterator[list[tuple[Server, Sysbench]]]:
    with contextlib.ExitStack() as stack:
        out = []
        for db in (
            RootedMySQL(server_roots["sid-mysql"], MariaDBOptions(extra=QUIET)),
            RootedMariaDB(server_roots["trixie"], MariaDBOptions(extra=QUIET)),
        ):
            stack.enter_context(db)
            bench = Sysbench(db, tables=2, table_size=5000, threads=2)
            stack.callback(bench.stop)
            bench.prepare()
            out.append((db, bench))
        yield out


def _stamp(port: int, server: str) -> float:
    return scrape(port).value("mysqlio_last_sample_timestamp_seconds", server=server)


def _sampled_after(port: int, servers: list[str], t: float) -> Metrics:
    """A scrape holding everything each server did before time t: the first sample of each
    stamped after t may have drained just before t, the one after it cannot."""
    for server in servers:
        wait_for("a sample after t", lambda server=server: _stamp(port, server) > t)
        first = _stamp(port, server)
        wait_for("the next sample", lambda server=server, first=first: _stamp(port, server) > first)
    return scrape(port)


def _by_kind(m: Metrics, server: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, value in m.samples.get("mysqlio_write_bytes_total", []):
        if labels.get("server") == server:
            out[labels["kind"]] = out.get(labels["kind"], 0) + value
    return out


def test_one_exporter_two_servers_each_exact_by_kind(
    bpf_ready: None, servers: list[tuple[Server, Sysbench]], capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    exporter = start_fleet_exporter(port, EXPORTER_INTERVAL_S)
    try:
        # `server`: the datadir as each server names it (in its root), not the path here
        labels = {db.pid: db.server_path(db.datadir) for db, _ in servers}

        def both_traced() -> bool:
            up = {lab.get("server"): v for lab, v in scrape(port).samples.get("mysqlio_target_up", [])}
            return all(up.get(label) == 1 for label in labels.values())

        wait_for("both servers traced", both_traced, timeout_s=60)
        m = scrape(port)
        for pid, label in labels.items():
            assert m.value("mysqlio_target_pid", server=label) == pid
        before = {db.pid: _quiet(db) for db, _ in servers}
        m1 = _sampled_after(port, list(labels.values()), time.time())
        for _, bench in servers:
            bench.start(LOAD_S)
        for _, bench in servers:
            bench.wait(timeout_s=LOAD_S + 60)
        after = {db.pid: _quiet(db) for db, _ in servers}
        m2 = _sampled_after(port, list(labels.values()), time.time())
        for db, _ in servers:
            assert not _delta(after[db.pid], _instances(db)), f"{db.version()} wrote after the last snapshot"
        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=30)
        assert exporter.returncode == 0 and "Traceback" not in err, err
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()

    for db, _ in servers:
        label, mysql = labels[db.pid], isinstance(db, RootedMySQL)
        assert m2.value("mysqlio_lost_events_total", server=label) == 0
        classifier = Classifier(read_layout(db.pid))
        pfs: dict[str, int] = {}
        for path, wbytes, _ in _delta(before[db.pid], after[db.pid]).values():
            kind = classifier.kind(path)
            pfs[kind] = pfs.get(kind, 0) + wbytes
        start, end = _by_kind(m1, label), _by_kind(m2, label)
        exported = {k: int(v - start.get(k, 0)) for k, v in end.items() if v - start.get(k, 0)}
        compared = {k: w for k, w in pfs.items() if w > MIN_BYTES and (mysql or k != "redo")}
        with capsys.disabled():
            print(f"\n{db.version()} ({label}): write bytes by kind, performance_schema / exporter")
            for kind in sorted(pfs.keys() | exported.keys()):
                print(f"  {kind:14} {pfs.get(kind, 0):>12} {exported.get(kind, 0):>12}")
        assert {"table", "undo", "binlog"} <= compared.keys(), compared
        assert ("redo" in compared) == mysql and ("doublewrite" in compared) == mysql, compared
        off = {k: (w, exported.get(k, 0)) for k, w in compared.items() if abs(exported.get(k, 0) - w) > TOLERANCE * w}
        assert not off, f"{db.version()}: bytes by kind off by more than {TOLERANCE:.0%} (pfs, exporter): {off}"
        # nothing of this server under the other's label
        other = next(lab for pid, lab in labels.items() if pid != db.pid)
        assert not [
            lab["path"]
            for lab, _ in m2.samples.get("mysqlio_file_write_bytes_total", [])
            if lab["path"].startswith(db.datadir + "/") and lab.get("server") == other
        ]
