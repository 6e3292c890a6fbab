"""MariaDB of other Debian releases, each in its own root and mount + pid namespace
(what a container looks like from the host), traced from the host.

tools/server_roots.py builds (or finds in /var/cache/mysqlio/roots) a Debian 11
`bullseye` root with MariaDB 10.5 and a Debian 13 `trixie` root with MariaDB
11.8; mysqlio.sandbox.RootedMariaDB starts a throwaway server in it. For each:

- mysqlio finds the layout through /proc/PID/root and reports host paths that
  exist, every file of the right kind (11.8's binlog GTID index `*.idx`
  included);
- per-file write bytes equal performance_schema's over a window quiet at both
  edges, for every file performance_schema counts writes to, the method of
  test_pfs_crosscheck.py (S0 == S1 around the attach, S2 == S3 after the load);
- MariaDB 10.5 instruments its redo log in performance_schema: ib_logfile0 is
  compared like any file. MariaDB 11.8 maps it (innodb_log_file_mmap=ON): no
  system call writes it, and `mysqlio top` (stderr, every JSON line) and
  `mysqlio doctor` say so; 10.5 gets no such note.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_pfs_crosscheck import _delta, _describe, _quiet_snapshot, _table

from mysqlio import mapped_files
from mysqlio.layout import read_layout, realpath_in_root
from mysqlio.probe import FileIdentity, KernelName
from mysqlio.resolve import FileResolver, ResolvedPath
from mysqlio.sandbox import MariaDBOptions, RootedMariaDB, Sysbench
from traced import FileTotals, read_json_line, start_top, stop_top

REPO = Path(__file__).resolve().parent.parent
SUITES = {"bullseye": "10.5.", "trixie": "11.8."}
ROOTS_TIMEOUT_S = 600
INTERVAL_S = 1.0
LOAD_S = 3
TABLES = 2
TABLE_SIZE = 10000
MMAP_NOTE = "the redo log (ib_logfile0) is memory-mapped"

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
    # no kind of their own in mysqlio.kinds: table definitions, db.opt, the buffer pool dump
    (r"data/\w+/\w+\.frm|data/\w+/db\.opt|data/ib_buffer_pool", "other"),
]


def expected_kind(relative: str) -> str | None:
    return next((kind for rx, kind in EXPECTED_KINDS if re.fullmatch(rx, relative)), None)


@pytest.fixture(scope="module")
def roots() -> dict[str, str]:
    """Both roots, built in parallel when the cache is empty (about 2 minutes here)."""
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, str(REPO / "tools" / "server_roots.py"), "--json", *SUITES],
        capture_output=True,
        text=True,
        timeout=ROOTS_TIMEOUT_S,
        check=False,
    )
    assert res.returncode == 0, f"tools/server_roots.py failed:\n{res.stderr}"
    print(f"\nroots ready in {time.monotonic() - started:.1f}s")
    return json.loads(res.stdout)


@pytest.fixture(params=list(SUITES))
def server(request: pytest.FixtureRequest, roots: dict[str, str]) -> Iterator[tuple[str, RootedMariaDB, Sysbench]]:
    suite = request.param
    options = MariaDBOptions(extra={"innodb_stats_auto_recalc": "OFF"})  # see test_pfs_crosscheck.py
    db = RootedMariaDB(roots[suite], options)
    db.start()
    try:
        bench = Sysbench(db, tables=TABLES, table_size=TABLE_SIZE, threads=2)
        try:
            bench.prepare()
            yield suite, db, bench
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
        assert not any(os.path.basename(p) == "ib_logfile0" for p in traced)  # nothing claimed for it
        assert (doctor["status"], doctor["value"]) == ("warn", "mmap"), doctor
        assert "ib_logfile0 mapped shared" in str(doctor["detail"]), doctor
        assert "(memory-mapped)" in str(doctor["detail"]), doctor
    else:
        assert "memory-mapped" not in err and json_notes == {()}
        assert (doctor["status"], doctor["value"]) == ("ok", "syscalls"), doctor


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
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import server_roots
    finally:
        sys.path.remove(str(REPO / "tools"))
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
