"""MariaDB of other Debian releases, each in its own root and mount + pid namespace
(what a container looks like from the host), traced from the host.

tools/server_roots.py builds (or finds in /var/cache/mysqlio/roots) a Debian 11
`bullseye` root with MariaDB 10.5 and a Debian 13 `trixie` root with MariaDB
11.8; mysqlio.devtools.rooted_mariadb.RootedMariaDB starts a throwaway server in it. For each:

- mysqlio finds the layout through /proc/PID/root and reports host paths that
  exist, every file of the right kind (11.8's binlog GTID index `*.idx`
  included);
- per-file write bytes equal performance_schema's over a window quiet at both
  edges, for every file performance_schema counts writes to, the method of
  test_pfs_crosscheck.py (S0 == S1 around the attach, S2 == S3 after the load);
- MariaDB 10.5 instruments its redo log in performance_schema: ib_logfile0 is
  compared like any file. MariaDB 11.8 maps it (innodb_log_file_mmap=ON): no
  system call writes it, and `mysqlio top` (stderr, every JSON line) and
  `mysqlio doctor` say so; 10.5 gets no such note;
- `mysqlio verify` matches performance_schema's names (the server's own paths,
  /srv/... inside its root) to the paths mysqlio reports, as tests/test_verify.py
  checks it against the host's 10.11: under sysbench, every file performance_schema
  counts within its edge bracket plus LOAD_TOLERANCE, exit 0; quiet at both edges,
  every one to the byte. 11.8's memory-mapped redo log is stated and never judged.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_pfs_crosscheck import _delta, _describe, _quiet_snapshot, _table
from test_verify import LOAD_TOLERANCE, _verify

from mysqlio import mapped_files
from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import FileTotals, attached_line, read_json_line, start_top, stop_top
from mysqlio.layout import read_layout, realpath_in_root
from mysqlio.probe import FileIdentity, KernelName
from mysqlio.resolve import FileResolver, ResolvedPath
from mysqlio.verify.compare import (
    MAPPED_ROW_NOTE,
    MIN_BYTES,
    TOLERANCE,
    MappedFile,
    compare,
    mapped_statement,
    redo_reference,
    verdict,
)
from mysqlio.verify.pfs import FileIo, instances_from_rows, rooted_paths, snapshot_of
from mysqlio.verify.window import Reading, TracedFile, Window

SUITES = {"bullseye": "10.5.", "trixie": "11.8."}
INTERVAL_S = 1.0
LOAD_S = 3
TABLES = 2
TABLE_SIZE = 10000
MMAP_NOTE = "the redo log (ib_logfile0) is memory-mapped"
VERIFY_S = 5  # as tests/test_verify.py
QUIET_WINDOW_S = 20.0  # 10.5 took 13 s to quiesce after 3 s of load here (purge)

# the kind of each file a server of the sandbox's layout writes, by its path under base_dir
EXPECTED_KINDS = [
    (r"data/ibdata1", "system"),
    (r"data/undo\d{3}", "undo"),
    (r"data/ib_logfile0", "redo"),
    (r"data/ibtmp1", "temp"),
    (r"data/(mysql|sbtest)/\w+\.ibd", "table"),
    (r"data/mysql-bin\.\d{6}", "binlog"),
    (r"data/mysql-bin\.\d{6}\.idx", "binlog_gtid_index"),
    (r"data/mysql-bin\.(index|~rec~)", "binlog_index"),  # ~rec~: the purge register of FLUSH BINARY LOGS
    (r"data/(aria_log\.\d{8}|aria_log_control|mysql/\w+\.MA[ID])", "aria"),
    (r"data/ddl_recovery\.log", "ddl_log"),
    (r"data/multi-master\.info", "replication_info"),
    (r"error\.log", "error_log"),
    (r"tmp/#\w+", "tmp"),
    (r"data/\w+/\w+\.(frm|par)|data/\w+/db\.opt", "table_definition"),
    (r"data/ib_buffer_pool(\.incomplete)?", "buffer_pool_dump"),
]


def expected_kind(relative: str) -> str | None:
    return next((kind for rx, kind in EXPECTED_KINDS if re.fullmatch(rx, relative)), None)


@pytest.fixture(scope="module")
def roots(server_roots: dict[str, str]) -> dict[str, str]:
    """Both MariaDB roots (conftest builds every server root at once)."""
    return {suite: server_roots[suite] for suite in SUITES}


@contextlib.contextmanager
def _rooted_server(root: str, extra: dict[str, str]) -> Iterator[tuple[RootedMariaDB, Sysbench]]:
    """A RootedMariaDB with sysbench's tables; on a normal exit, nothing left behind."""
    db = RootedMariaDB(root, MariaDBOptions(extra=extra))
    db.start()
    try:
        bench = Sysbench(db, tables=TABLES, table_size=TABLE_SIZE, threads=2)
        try:
            bench.prepare()
            yield db, bench
        finally:
            bench.stop()
    finally:
        db.stop()
    # nothing left behind: no process, no file, no mount
    for pid in (db.pid, db.unshare_pid):
        assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert not os.path.exists(db.base_dir)
    with open("/proc/self/mountinfo") as f:
        assert not [line for line in f if f" {db.root}/" in line or f" {db.root} " in line]


@pytest.fixture(params=list(SUITES))
def server(request: pytest.FixtureRequest, roots: dict[str, str]) -> Iterator[tuple[str, RootedMariaDB, Sysbench]]:
    # innodb_stats_auto_recalc=OFF: see test_pfs_crosscheck.py
    with _rooted_server(roots[request.param], {"innodb_stats_auto_recalc": "OFF"}) as (db, bench):
        yield request.param, db, bench


@pytest.fixture(scope="module", params=list(SUITES))
def busy_server(request: pytest.FixtureRequest, roots: dict[str, str]) -> Iterator[tuple[str, RootedMariaDB, Sysbench]]:
    """As test_verify.py's server: innodb_max_dirty_pages_pct=1 writes pages during a few
    seconds of load (by default they are flushed much later)."""
    extra = {"innodb_stats_auto_recalc": "OFF", "innodb_max_dirty_pages_pct": "1"}
    with _rooted_server(roots[request.param], extra) as (db, bench):
        yield request.param, db, bench


def _doctor(pid: int) -> dict[str, dict[str, object]]:
    res = subprocess.run(
        [sys.executable, "-m", "mysqlio", "doctor", "-p", str(pid), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.stdout, res.stderr
    return {c["name"]: c for c in json.loads(res.stdout)["checks"]}


@pytest.mark.bpf
@pytest.mark.mariadb
def test_traced_from_the_host(bpf_ready: None, server: tuple[str, RootedMariaDB, Sysbench]) -> None:
    suite, db, bench = server
    started = time.monotonic()
    version = db.version()
    assert version.startswith(SUITES[suite]), version
    # its own root and pid namespace: pid 1 there
    assert os.readlink(f"/proc/{db.pid}/root") == db.root
    nspid = next(line for line in Path(f"/proc/{db.pid}/status").read_text().splitlines() if line.startswith("NSpid:"))
    assert nspid.split()[1:] == [str(db.pid), "1"]
    assert db.server_path(db.datadir) != db.datadir  # the server names its files differently

    # the layout, read through /proc/PID/root, in paths here
    layout = read_layout(db.pid)
    assert layout.root == db.root
    assert layout.version and layout.version.startswith(SUITES[suite])
    assert layout.option_files == [db.config_file]
    assert layout.datadir == db.datadir
    assert layout.log_bin_basename == os.path.join(db.datadir, "mysql-bin")
    assert layout.log_bin_index == os.path.join(db.datadir, "mysql-bin.index")
    assert layout.log_error == db.error_log
    assert layout.tmpdir == [db.tmpdir]
    mapped = mapped_files.mapped_redo(db.pid, layout)
    assert mapped is not None
    assert [os.path.basename(f.path) for f in mapped] == (["ib_logfile0"] if suite == "trixie" else [])

    # the window of test_pfs_crosscheck.py: quiet at both edges
    s0 = _quiet_snapshot(db)
    top = start_top(db.pid, interval_s=INTERVAL_S)
    assert top.stdout is not None
    totals = FileTotals()
    try:
        first = read_json_line(top.stdout, 30, "mysqlio top")  # probes attached
        totals.add(first)
        s1 = db.file_io_summary()
        head = _delta(s0, s1)
        assert not head, f"writes around the attach, the window is not exact: {_describe(head)}"
        bench.start(LOAD_S)
        bench.wait(timeout_s=LOAD_S + 60)
        db.sql("FLUSH BINARY LOGS")  # the binlog index, and on 11.8 the closed binlog's GTID index, written
        s2 = _quiet_snapshot(db)
        time.sleep(INTERVAL_S * 1.2)
        objects, err = stop_top(top)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    for obj in objects:
        totals.add(obj)
    s3 = db.file_io_summary()
    tail = _delta(s2, s3)
    assert not tail, f"writes after the last snapshot, the window is not exact: {_describe(tail)}"
    assert totals.lost_events == 0

    pfs = _delta(s1, s2)
    written = {p: d for p, d in pfs.items() if d[0]}
    traced = {p: c for p, c in totals.totals.items() if c["write_bytes"]}

    def name(path: str) -> str:
        return os.path.relpath(path, db.base_dir) if path.startswith(db.base_dir + "/") else path

    rows = [
        (name(p), written.get(p, (0, 0))[0], traced.get(p, {}).get("write_bytes", 0), written.get(p, (0, 0))[1],
         traced.get(p, {}).get("write_ops", 0))
        for p in sorted(written.keys() | traced.keys())
    ]  # fmt: skip
    print(f"\n[{suite}: {version}] {time.monotonic() - started:.1f}s, {totals.intervals} intervals of top")
    print(_table(rows))

    # paths here, existing, of the right kind
    for path, kind in totals.kinds.items():
        assert path.startswith(db.base_dir + "/") or path == db.base_dir, f"not a path in the sandbox: {path}"
        assert totals.deleted[path] or os.path.exists(path), path
        assert kind == expected_kind(name(path)), f"{name(path)}: {kind}, want {expected_kind(name(path))}"
    names = {name(p) for p in written}
    must = {"ibdata1", *(f"sbtest/sbtest{i}.ibd" for i in range(1, TABLES + 1))}
    must |= {"ib_logfile0"} if suite == "bullseye" else set()  # 10.5 instruments its redo log
    assert {f"data/{n}" for n in must} <= names, sorted(names)
    assert any(re.fullmatch(r"data/mysql-bin\.\d{6}", n) for n in names), sorted(names)
    assert "data/mysql-bin.index" in names, sorted(names)
    if suite == "trixie":  # 11.4+: the binlog's GTID index, found, named and compared
        assert any(re.fullmatch(r"data/mysql-bin\.\d{6}\.idx", n) for n in names), sorted(names)

    # every file performance_schema counts writes to: the same bytes, to the byte
    bad = [(name(p), d[0], traced.get(p, {}).get("write_bytes", 0)) for p, d in written.items()]
    bad = [b for b in bad if b[1] != b[2]]
    assert not bad, f"mysqlio write_bytes differ from performance_schema: {bad}"
    # and mysqlio saw no write performance_schema has a row for but did not count
    with_row = s1.keys() | s2.keys()
    extra = [name(p) for p in traced if p in with_row and p not in written]
    assert not extra, f"written according to mysqlio only: {extra}"

    # the limit, stated where the redo log is mapped, and only there
    json_notes = {tuple(o.get("notes", ())) for o in [first, *objects]}
    doctor = _doctor(db.pid)["redo log"]
    if suite == "trixie":
        assert MMAP_NOTE in err, err
        assert json_notes == {(next(line for line in err.splitlines() if MMAP_NOTE in line)[len("mysqlio: note: ") :],)}
        assert "page-cache bytes dirtied" in err, err  # this kernel counts the page cache
        # no request carries it: its row, found from the maps, has page-cache bytes only
        redo = [c for p, c in totals.totals.items() if os.path.basename(p) == "ib_logfile0"]
        assert len(redo) == 1 and redo[0]["write_bytes"] == 0 and redo[0]["dirtied_bytes"] > 0, redo
        assert (doctor["status"], doctor["value"]) == ("ok", "mmap"), doctor
        assert "ib_logfile0 mapped shared" in str(doctor["detail"]), doctor
        assert "(memory-mapped)" in str(doctor["detail"]), doctor
    else:
        assert "memory-mapped" not in err and json_notes == {()}
        assert (doctor["status"], doctor["value"]) == ("ok", "syscalls"), doctor


# -- mysqlio verify ------------------------------------------------------------------


def _verify_expected(suite: str) -> set[str]:
    """Files each window must judge (more than 1 MiB written): ibdata1 and the binlog (its
    number varies), and 10.5's redo log, which its performance_schema counts. Which tables'
    pages the flushing writes in a 10 s window varies (a CI run judged sbtest1.ibd alone):
    _judged_a_table requires one of them."""
    return {"ibdata1", "binlog"} | ({"ib_logfile0"} if suite == "bullseye" else set())


def _judged_a_table(names: set[str]) -> bool:
    return any(f"sbtest/sbtest{i}.ibd" in names for i in range(1, TABLES + 1))


def _expected_name(name: str) -> str:
    return "binlog" if re.fullmatch(r"mysql-bin\.\d{6}", name) else name


def _check_paths(db: RootedMariaDB, result: dict[str, Any]) -> None:
    """performance_schema's names, the server's own (/srv/...), are given as paths here."""
    for r in result["files"]:
        assert r["path"].startswith(db.root + "/"), r
        assert r["pfs_bytes"] is None or not os.path.isabs(r["name"]), r  # counted files: under the datadir
    assert result["pid"] == db.pid
    assert result["connection"].endswith(db.server_path(db.socket)), result["connection"]


def _check_mapped(suite: str, result: dict[str, Any]) -> None:
    """11.8's redo log is memory-mapped: stated, no row judged, no redo reference; 10.5: compared."""
    rows = [r for r in result["files"] if r["name"] == "ib_logfile0"]
    if suite == "trixie":
        assert [(m["name"], m["kind"]) for m in result["mapped"]] == [("ib_logfile0", "redo")], result["mapped"]
        assert result["mapped_note"].startswith("not compared: ib_logfile0 (redo) is memory-mapped"), result
        assert "verify claims neither agreement nor difference for it" in result["mapped_note"]
        assert result["verdict"]["text"].endswith("; not compared: ib_logfile0 (memory-mapped)"), result["verdict"]
        assert all(not r["judged"] and r["agrees"] is None for r in rows), rows
        assert result["redo"] is None
    else:
        assert result["mapped"] == [] and result["mapped_note"] is None
        assert "not compared" not in result["verdict"]["text"]
        assert [r["op"] for r in rows if r["judged"] and r["agrees"]] == ["write"], rows


@pytest.mark.bpf
@pytest.mark.mariadb
def test_verify_under_load(bpf_ready: None, busy_server: tuple[str, RootedMariaDB, Sysbench]) -> None:
    """`mysqlio verify` as tests/test_verify.py runs it against the host's 10.11: edges cut
    through sysbench's load, so every file performance_schema counts is within its edge
    bracket (±) plus LOAD_TOLERANCE; exit 0 means every row with more than 1 MiB agrees."""
    suite, db, bench = busy_server
    started = time.monotonic()
    bench.start(VERIFY_S + 4)
    try:
        time.sleep(1.0)
        proc = _verify(db.pid, VERIFY_S, "--json")
        out, err = proc.communicate(timeout=60)
    finally:
        bench.wait(timeout_s=60)
    assert proc.returncode == 0, out + err
    result = json.loads(out)
    _check_paths(db, result)
    assert VERIFY_S <= result["window_s"] < VERIFY_S + 1.5
    assert result["lost_events"] == 0
    assert result["verdict"]["state"] == "agree", result["verdict"]
    judged = [r for r in result["files"] if r["judged"]]
    assert result["verdict"]["judged"] == len(judged) == result["verdict"]["agreeing"]
    written = {_expected_name(r["name"]) for r in judged if r["op"] == "write"}
    assert written >= _verify_expected(suite) and _judged_a_table(written), judged
    table = []
    for r in (r for r in result["files"] if r["pfs_bytes"] is not None):  # every file performance_schema counts
        table.append(f"{r['op']:<6}{r['name']:<20} pfs {r['pfs_bytes']:>11} ±{r['pfs_edge_bytes']:<8} "
                     f"mysqlio {r['mysqlio_bytes']:>11} {r['difference_pct'] or 0:+.3f}%")  # fmt: skip
        assert r["agrees"] is not False
        assert abs(r["difference_bytes"]) - r["pfs_edge_bytes"] <= LOAD_TOLERANCE * r["pfs_bytes"], r
    _check_mapped(suite, result)

    # the text form: the same rows marked ok, and the memory-mapped redo log stated
    bench.start(VERIFY_S + 3)
    try:
        time.sleep(1.0)
        proc = _verify(db.pid, VERIFY_S)
        out, err = proc.communicate(timeout=60)
    finally:
        bench.wait(timeout_s=60)
    assert proc.returncode == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"mysqlio verify: pid {db.pid} (mariadbd {SUITES[suite]}"), out
    rows = {_expected_name(line.split()[1]): line for line in lines if line.startswith("write ")}
    for name in _verify_expected(suite):
        assert name in rows and rows[name].endswith("ok"), out
    assert _judged_a_table({name for name, line in rows.items() if line.endswith("ok")}), out
    assert any(line.startswith("agreement: ") for line in lines), out
    said = [line for line in lines if line.startswith("not compared: ")]
    assert len(said) == (1 if suite == "trixie" else 0), out
    print(f"\n[{suite}] verify under load, {time.monotonic() - started:.1f}s\n" + "\n".join(table))


@pytest.mark.bpf
@pytest.mark.mariadb
def test_verify_exact_when_quiet_at_both_edges(
    bpf_ready: None, busy_server: tuple[str, RootedMariaDB, Sysbench]
) -> None:
    """As in tests/test_verify.py: quiet edges leave no ±, and every file performance_schema
    counts agrees to the byte, judged or not, reads and writes."""
    suite, db, bench = busy_server
    started = time.monotonic()
    _quiet_snapshot(db)
    proc = _verify(db.pid, QUIET_WINDOW_S, "--json")
    assert proc.stderr is not None
    try:
        assert attached_line(proc.stderr).startswith("mysqlio: comparing")  # probes attached: the window starts
        window_start = time.monotonic()
        time.sleep(0.5)  # the first edge
        bench.start(3)
        bench.wait(timeout_s=60)
        _quiet_snapshot(db)
        quiet_at = time.monotonic() - window_start
        assert quiet_at < QUIET_WINDOW_S - 0.5, f"quiesced only {quiet_at:.1f}s into a {QUIET_WINDOW_S}s window"
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result = json.loads(out)
    _check_paths(db, result)
    assert result["lost_events"] == 0
    assert result["verdict"]["state"] == "agree", result["verdict"]
    judged = {_expected_name(r["name"]) for r in result["files"] if r["judged"] and r["op"] == "write"}
    assert judged >= _verify_expected(suite) - {"binlog"}, judged  # 3 s of load: the binlog may stay below 1 MiB
    assert _judged_a_table(judged), judged
    compared = [r for r in result["files"] if r["pfs_bytes"] is not None]
    for r in compared:
        assert (r["pfs_edge_bytes"], r["difference_bytes"]) == (0, 0), r
    _check_mapped(suite, result)
    print(
        f"\n[{suite}] verify, quiet edges: {time.monotonic() - started:.1f}s, quiet {quiet_at:.1f}s into the window; "
        f"exact for {[r['name'] + ' ' + r['op'] for r in compared]}"
    )


# -- pure parts ----------------------------------------------------------------------

MAPS = """\
55d0c0a00000-55d0c0a8a000 r--p 00000000 fe:00 1059 /srv/root/usr/sbin/mariadbd
7776de000000-7776e4000000 rw-s 00000000 fe:00 10036569                   /srv/root/data/ib_logfile0
7776e4000000-7776e4001000 r--s 00000000 fe:00 10036570                   /srv/root/data/ro_mapped
7f770807a000-7f770809a000 rw-s 10000000 00:10 42712                      anon_inode:[io_uring]
7f20900d3000-7f20900f4000 rw-s 00000000 00:13 47732                      /[aio] (deleted)
7f2090000000-7f2090001000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)
7f2090100000-7f2090101000 rw-p 00000000 fe:00 999                        /srv/root/data/private_map
"""


def test_shared_writable_maps() -> None:
    assert mapped_files.shared_writable_maps(MAPS) == {"/srv/root/data/ib_logfile0": 0x6000000}


def test_redo_note_and_doctor_fields() -> None:
    redo = [mapped_files.MappedFile("/srv/root/data/ib_logfile0", "redo", 96 << 20)]
    note = mapped_files.redo_note(redo)
    assert note is not None and note.startswith(MMAP_NOTE)
    assert mapped_files.redo_note([]) is None
    log = b"2026-11-23 18:58:45 0 [Note] InnoDB: log sequence number 45538 (memory-mapped); transaction id 14\n"
    fields = mapped_files.doctor_check(redo, log)
    assert (fields["status"], fields["value"]) == ("warn", "mmap")
    assert "'InnoDB: log sequence number 45538 (memory-mapped); transaction id 14'" in fields["detail"]
    assert mapped_files.doctor_check([], log)["status"] == "warn"  # the log alone says so
    assert mapped_files.doctor_check([], b"InnoDB: log sequence number 1; transaction id 1\n")["status"] == "ok"
    assert mapped_files.doctor_check(None, None)["status"] == "skip"


def test_mirror_from_apt_sources(tmp_path: Path) -> None:
    import server_roots

    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    (tmp_path / "sources.list.d" / "other.list.disabled").write_text("deb http://elsewhere/debian bookworm main\n")
    assert server_roots.find_mirror(str(tmp_path), "bookworm") == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://one.example/debian bookworm main\n")
    assert server_roots.find_mirror(str(tmp_path), "bookworm") == "http://one.example/debian"
    assert server_roots.find_mirror(str(tmp_path / "none"), "bookworm") == server_roots.FALLBACK_MIRROR


def test_realpath_in_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "var/lib/mysql").mkdir(parents=True)
    (root / "etc").mkdir()
    os.symlink("/var/lib/mysql", root / "data")  # absolute: starts again at the root, not at ours
    os.symlink("../../../../..", root / "var/lib/up")  # '..' stops at the root
    os.symlink("/etc/loop", root / "etc/loop")
    assert realpath_in_root(str(root), "/data/ibdata1") == "/var/lib/mysql/ibdata1"
    assert realpath_in_root(str(root), "/var/lib/up/etc/./my.cnf") == "/etc/my.cnf"
    assert realpath_in_root(str(root), "/missing/x") == "/missing/x"
    assert realpath_in_root(str(root), "/etc/loop/x") == "/etc/loop/x"


def test_verify_names_through_the_root(tmp_path: Path) -> None:
    """performance_schema's names are the server's: absolute ones resolved inside its root,
    relative ones joined with its own datadir, both given as the paths mysqlio reports."""
    root = tmp_path / "root"
    (root / "var/lib/mysql/sbtest").mkdir(parents=True)
    os.symlink("/var/lib/mysql", root / "data")  # the configured datadir, a link inside the root
    here = rooted_paths(str(root), str(root))
    data = f"{root}/var/lib/mysql"
    rows = [
        ("/data/ibdata1", 10, 1, 0, 0, 1, "wait/io/file/innodb/innodb_data_file"),
        ("./undo001", 20, 2, 0, 0, 2, "wait/io/file/innodb/innodb_data_file"),
        ("sbtest/sbtest1.ibd", 30, 3, 5, 1, 3, "wait/io/file/innodb/innodb_data_file"),
        ("/data/sbtest/sbtest1.ibd", 1, 1, 0, 0, 4, "wait/io/file/sql/misc"),  # another instrument of the same file
        ("/usr/share/mariadb/charsets/Index.xml", 0, 0, 7, 1, 5, "wait/io/file/mysys/charset"),
    ]
    assert snapshot_of(instances_from_rows(rows, "/data", here)) == {
        f"{data}/ibdata1": FileIo(10, 1),
        f"{data}/undo001": FileIo(20, 2),
        f"{data}/sbtest/sbtest1.ibd": FileIo(31, 4, 5, 1),
        f"{root}/usr/share/mariadb/charsets/Index.xml": FileIo(0, 0, 7, 1),
    }
    # our own root: realpath here
    os.symlink(data, tmp_path / "link")
    assert rooted_paths("", "/proc/1/root")(f"{tmp_path}/link/ibdata1") == f"{data}/ibdata1"


def test_verify_leaves_a_mapped_file_out() -> None:
    """A memory-mapped file is never judged, whatever either side says, and is stated."""
    redo, data = "/r/data/ib_logfile0", "/r/data/ibdata1"
    quiet = Reading({redo: FileIo(), data: FileIo()}, 100)
    busy = Reading({redo: FileIo(8 << 20, 4), data: FileIo(4 << 20, 256)}, 100 + (9 << 20))
    traced = {
        data: TracedFile(data, "system", io=FileIo(4 << 20, 256)),
        redo: TracedFile(redo, "redo", io=FileIo(1 << 20, 1)),
    }
    window = Window((quiet, quiet), (busy, busy), traced, 5.0)
    mapped = [MappedFile(redo, "ib_logfile0", "redo", 96 << 20)]
    rows = compare(window, "/r/data", lambda _path: "other", mapped={redo})
    by_name = {r.name: r for r in rows}
    assert (by_name["ibdata1"].judged, by_name["ibdata1"].agrees) == (True, True)
    assert (by_name["ib_logfile0"].judged, by_name["ib_logfile0"].agrees) == (False, None)
    assert by_name["ib_logfile0"].note == MAPPED_ROW_NOTE
    assert redo_reference(window, rows, mapped) is None
    result = verdict(rows, 0, MIN_BYTES, TOLERANCE, ["ib_logfile0"])
    assert (result.state, result.judged) == ("agree", 1)
    assert result.text.endswith("; not compared: ib_logfile0 (memory-mapped)")
    note = mapped_statement(mapped)
    assert note is not None and note.startswith("not compared: ib_logfile0 (redo) is memory-mapped")
    assert note.endswith(mapped_files.FIX)
    assert mapped_statement([]) is None
    # not mapped: the same rows are judged, the redo log like any file performance_schema counts
    rows = compare(window, "/r/data", lambda _path: "other")
    assert {r.name: r.agrees for r in rows} == {"ibdata1": True, "ib_logfile0": False}


def test_resolver_keeps_the_name_of_a_file_closed_since_the_last_scan(tmp_path: Path) -> None:
    """A binlog closed by FLUSH BINARY LOGS in the interval its last writes are counted:
    the kernel may have no name for it (walked before the interval), /proc no fd."""
    kept, gone = tmp_path / "mysql-bin.000001", tmp_path / "mysql-bin.~rec~"
    fds = [os.open(path, os.O_CREAT | os.O_WRONLY) for path in (kept, gone)]
    resolver = FileResolver(os.getpid(), lambda _file: None)
    resolver.scan_fds()
    ids = [FileIdentity(st.st_dev, st.st_ino) for st in map(os.fstat, fds)]
    for fd in fds:
        os.close(fd)
    gone.unlink()  # its name cannot be checked any more: not used
    resolver.scan_fds()
    assert resolver.resolve(ids[0]) == ResolvedPath(os.path.realpath(kept), False, "fd")
    assert resolver.resolve(ids[1]).source == "unknown"


def test_resolver_completes_a_name_cut_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe keeps 8 path components; a server's cwd (its datadir) completes the rest."""
    deep = tmp_path.joinpath(*"abcdefghij")
    deep.mkdir(parents=True)
    file = deep / "t1.frm"
    file.write_text("x")
    real = os.path.realpath(file)
    monkeypatch.chdir(deep.parent.parent)  # the name's last 8 components reach above it
    cut = ".../" + "/".join(real.split("/")[-8:])
    st = os.stat(file)
    resolver = FileResolver(os.getpid(), lambda _file: KernelName(cut, complete=False, deleted=False))
    assert resolver.resolve(FileIdentity(st.st_dev, st.st_ino)) == ResolvedPath(real, False, "kernel+cwd")
    file.unlink()  # deleted since: named after its directory, marked deleted
    resolver = FileResolver(os.getpid(), lambda _file: KernelName(cut, complete=False, deleted=False))
    assert resolver.resolve(FileIdentity(st.st_dev, st.st_ino)) == ResolvedPath(real, True, "kernel+cwd")
    elsewhere = ".../" + "/".join(["x", *real.split("/")[-7:-1], "t2.frm"])
    resolver = FileResolver(os.getpid(), lambda _file: KernelName(elsewhere, complete=False, deleted=True))
    assert resolver.resolve(FileIdentity(st.st_dev, st.st_ino)).path == elsewhere  # nothing fits: as cut
