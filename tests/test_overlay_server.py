"""A real server's datadir on overlayfs (issue 58): MariaDB 10.11, the host's mariadbd,
its datadir an overlay mounted in its own mount namespace (devtools/overlay_mariadb.py),
the lower layer a datadir bootstrapped by mariadb-install-db (with a MyISAM table, w.old).
`mysqlio top --json` and `mysqlio verify --json` trace it together while it runs a small
load: a CREATE TABLE (a new file, made in the upper layer), INSERTs into it (InnoDB:
the .ibd, ibdata1's doublewrite, the redo log, the binlog) and into w.old, whose files
the server first opens for writing then: overlayfs copies them up mid-trace, to a new
upper inode that holds their page cache while their requests are counted on the overlay
inode. Each file must be one row, named as the server names it, its write bytes those of
the server's own performance_schema (file_summary_by_instance), and verify must agree.
The server is quiet at both edges (as in tests/test_verify.py's exact test), so the
comparison is to the byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_verify import _quiet

from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.overlay_mariadb import OverlayMariaDB
from mysqlio.devtools.traced import FileTotals, TopCollector, attached_line

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

ROW = "REPEAT('x', 4000)"
INNODB_ROWS = 400  # ~1.6 MB into w/t.ibd: judged by verify (> 1 MiB)
MYISAM_ROWS = 300  # ~1.2 MB into w/old.MYD
WINDOW_S = 14.0  # as tests/test_verify.py's exact test: room to quiesce
# no index: MyISAM writes index blocks from its key cache with no performance_schema
# instrument (measured on a plain 10.11: 304 blocks of 1 KiB uncounted for 300 INSERTs);
# the .MYI gets only its header, which is counted
BOOTSTRAP = "CREATE DATABASE w;\nCREATE TABLE w.old (v VARCHAR(4000)) ENGINE=MyISAM;\n"


@pytest.fixture(scope="module")
def server() -> Iterator[OverlayMariaDB]:
    # innodb_max_dirty_pages_pct=1: pages written during the load; 16 MiB of redo: copied
    # up at start (a whole-file copy)
    extra = {"innodb_stats_auto_recalc": "OFF", "innodb_max_dirty_pages_pct": "1"}
    with OverlayMariaDB(MariaDBOptions(redo_log_mb=16, extra=extra), bootstrap_sql=BOOTSTRAP) as db:
        yield db


def _inserts(table: str, rows: int) -> str:
    return ";".join([f"INSERT INTO {table} (v) VALUES ({ROW})"] * rows)


def test_one_row_per_file_as_performance_schema(bpf_ready: None, server: OverlayMariaDB) -> None:
    db = server
    old = [f"{db.datadir}/w/old.{ext}" for ext in ("MYD", "MYI")]
    assert all(os.path.isfile(f"{db.lower}/w/old.{ext}") for ext in ("MYD", "MYI"))
    assert not os.path.exists(f"{db.upper}/w/old.MYD"), "w.old untouched since the bootstrap"
    _quiet(db)
    top = TopCollector(db.pid, 0.3)
    verify = None
    try:
        top.wait_until(0)  # attached
        verify = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "verify", "-p", str(db.pid), "-d", str(WINDOW_S), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert verify.stderr is not None
        assert attached_line(verify.stderr).startswith("mysqlio: comparing")
        started = time.monotonic()
        time.sleep(0.5)  # verify's first edge
        before = db.file_io_summary()
        db.sql("CREATE TABLE w.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(4000)) ENGINE=InnoDB")
        db.sql(_inserts("w.t", INNODB_ROWS))
        db.sql(_inserts("w.old", MYISAM_ROWS))
        _quiet(db)
        after = db.file_io_summary()
        quiet_at = time.monotonic() - started
        assert quiet_at < WINDOW_S - 0.5, f"quiesced only {quiet_at:.1f}s into a {WINDOW_S}s window"
        out, err = verify.communicate(timeout=60)
        top.wait_until(time.time() + 0.3)
    finally:
        if verify is not None and verify.poll() is None:
            verify.kill()
            verify.wait()
        assert top.stop() == 0, top.stderr()
    assert verify.returncode == 0, err

    # copied up mid-trace: the upper file is another inode than the lower one
    for ext in ("MYD", "MYI"):
        assert os.stat(f"{db.upper}/w/old.{ext}").st_ino != os.stat(f"{db.lower}/w/old.{ext}").st_ino
    assert os.path.isfile(f"{db.upper}/w/t.ibd") and not os.path.exists(f"{db.lower}/w/t.ibd")

    totals = FileTotals()
    identities: dict[str, set[tuple[str, int]]] = {}
    for obj in top.intervals:
        totals.add(obj)
        paths = [f["path"] for f in obj["files"]]
        assert len(paths) == len(set(paths)), f"a file twice in one interval: {sorted(paths)}"
        for f in obj["files"]:
            identities.setdefault(f["path"], set()).add((f["dev"], f["ino"]))
    assert totals.lost_events == 0
    # one file, one row, all along: one identity per name (the overlay file's), one name per identity
    assert all(len(ids) == 1 for ids in identities.values()), identities
    assert len({i for ids in identities.values() for i in ids}) == len(identities), identities
    mounts = Path(f"/proc/{db.pid}/mountinfo").read_text().splitlines()
    (overlay_dev,) = [m.split()[2] for m in mounts if m.split()[4] == db.datadir]
    in_datadir = {p: ids for p, ids in identities.items() if p.startswith(db.datadir + "/")}
    assert {dev for ids in in_datadir.values() for dev, _ in ids} == {overlay_dev}, in_datadir
    layers = os.path.dirname(db.upper) + "/"
    assert not [p for p in totals.totals if p.startswith(layers) or p.startswith("<")], sorted(totals.totals)
    # the server's names: performance_schema's, under the datadir it was given
    delta = {
        p: (a[0] - before.get(p, (0, 0, 0, 0))[0], a[2] - before.get(p, (0, 0, 0, 0))[2]) for p, a in after.items()
    }
    written = {p for p, (w, _) in delta.items() if w}
    assert {*old, f"{db.datadir}/w/t.ibd", f"{db.datadir}/ibdata1"} <= written, sorted(written)
    table = []
    for path in sorted(written | {p for p, c in totals.totals.items() if c["write_bytes"] and p in after}):
        got = totals.totals.get(path, {"write_bytes": 0, "dirtied_bytes": 0})
        name = path.removeprefix(db.datadir + "/")
        table.append(
            f"{name}: pfs {delta[path][0]} top {got['write_bytes']} (page cache dirtied {got['dirtied_bytes']})"
        )
        assert got["write_bytes"] == delta[path][0], path
        assert not totals.deleted[path], path
    # written without a performance_schema row: the redo log only (MariaDB 10.11 does not
    # instrument it), as the server names it
    rowless = {p for p, c in totals.totals.items() if c["write_bytes"] and p not in after}
    assert rowless == {f"{db.datadir}/ib_logfile0"}, rowless
    # MyISAM writes through the page cache: dirtied on the upper inode, counted on the row
    for path in old:
        assert totals.totals[path]["dirtied_bytes"] > 0, path
    print("\n" + "\n".join(table))

    result = json.loads(out)
    assert result["lost_events"] == 0
    assert result["verdict"]["state"] == "agree", result["verdict"]
    rows = {(r["path"], r["op"]): r for r in result["files"]}
    assert len(rows) == len(result["files"]), "one verify row per file and direction"
    assert not [p for p, _ in rows if p.startswith(layers)], sorted(rows)
    judged = {r["name"] for r in result["files"] if r["judged"]}
    assert {"w/t.ibd", "w/old.MYD", "ibdata1"} <= judged, judged
    for r in result["files"]:
        if r["pfs_bytes"] is not None:  # quiet at both edges: exact
            assert (r["pfs_edge_bytes"], r["difference_bytes"]) == (0, 0), r
    for path in written:  # both windows hold the whole load: the same bytes
        assert rows[(path, "write")]["mysqlio_bytes"] == totals.totals[path]["write_bytes"], path
    print(f"quiet {quiet_at:.1f}s into verify's window; verify: {result['verdict']['text']}")
