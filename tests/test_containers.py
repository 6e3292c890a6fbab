"""Two pods, one server each, traced by one `exporter --all` (issue 58).

Two MariaDB 11.8 servers run by crun (a real OCI runtime) from bundles written here,
shaped like two pods of one Kubernetes namespace: the same Debian root, each with its own
host directory bind-mounted at /var/lib/mysql (so both name their datadir
/var/lib/mysql/data), cgroups at kubelet's cgroupfs-driver paths, containerd's CRI
annotations. `container_identity` names each from files only; the exporter keeps them
apart by their pod labels, each server's bytes written per file equal to its own
performance_schema over a window quiet at both edges (test_exporter_mysql_mariadb.py's
method, per file); one is restarted in a new container (new id, same pod) and its series
go on, the bytes written after the restart exact again.

Both pods start mariadbd as a Debian/Ubuntu image does, without --defaults-file: it reads
the root's /etc/mysql/my.cnf, an absolute link to /etc/alternatives/my.cnf (dpkg's
alternative, to /etc/mysql/mariadb.cnf), which includes mariadb.conf.d/, where crun mounts
the pod's own settings. What mysqlio reads from that chain (option values, layout,
doctor, `top --mysql`) is what each server says it runs with; the host's own chain (its
MariaDB's, no pod file) gives other values, which the test checks it would tell apart.

Two servers alike in everything but their mount namespace (iogen named mariadbd, each in
`unshare --mount` with its own directory at the same datadir) get two sets of series, the
second's `server` naming its mount namespace, with one warning.

MariaDB 11.8 does not instrument its redo log in performance_schema: ib_logfile0 is not
compared. The cgroup shapes of the other runtimes (systemd driver, CRI-O) are checked on
their path strings: no such runtime runs here (docker and podman run in
test_docker_podman.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_mysql import Instances, _delta, _quiet

from mysqlio.container_identity import container_identity, from_cgroup, from_cgroup_path
from mysqlio.devtools.crun_mariadb import POD_CNF, CrunMariaDB, Pod
from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.processes import find_binary
from mysqlio.devtools.scrape import EXPORTER_INTERVAL_S, Metrics, free_port, scrape, wait_for
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import attached_line, read_json_line, report_json, start_fleet_exporter
from mysqlio.follow import identity_of
from mysqlio.layout import read_layout, read_options
from mysqlio.option_files import merge_options

NAMESPACE = "mysqlio-test"
PODS = ("mariadb-0", "mariadb-1")
LOAD_S = 1
TOLERANCE = 0.01  # per file, relative; never loosen
MIN_BYTES = 64 << 10  # files compared: more than this written in the window
QUIET = {"innodb_stats_auto_recalc": "OFF"}
# each pod's own value in its file, seen by `top --mysql` (SHOW GLOBAL VARIABLES): which
# server it reached; 1 page/s off the default 200
IO_CAPACITY = 201
DATADIR = "/var/lib/mysql/data"  # as each server names it
# every file of both servers exported (the default 20 would drop some when the restarted
# server reads its system tables)
EXPORTER_OPTIONS = ("--top-files", "200")

IOGEN = ("--scenario", "write", "--scenario", "sync")
Served = tuple[CrunMariaDB, Sysbench]


def test_cgroup_shapes() -> None:
    """Each runtime's cgroup path: (runtime, container id, pod UID). The ids and UIDs are
    built here; what is checked is where each shape puts them."""
    cid, uid = os.urandom(32).hex(), "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    systemd_uid = uid.replace("-", "_")
    shapes = {
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{systemd_uid}.slice/cri-containerd-{cid}.scope": (
            "containerd",
            cid,
            uid,
        ),
        f"/kubepods.slice/kubepods-pod{systemd_uid}.slice/crio-{cid}.scope": ("cri-o", cid, uid),
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{systemd_uid}.slice/docker-{cid}.scope": (
            "docker",
            cid,
            uid,
        ),
        f"/kubepods/burstable/pod{uid}/{cid}": ("", cid, uid),
        f"/kubepods/pod{uid}/{cid}": ("", cid, uid),
        f"/system.slice/docker-{cid}.scope": ("docker", cid, ""),
        f"/docker/{cid}": ("docker", cid, ""),
        f"/machine.slice/libpod-{cid}.scope": ("podman", cid, ""),
        f"/libpod_parent/libpod-{cid}": ("podman", cid, ""),  # podman --cgroup-manager=cgroupfs
        # CRI-O's monitor, a user session, the root: no container
        f"/kubepods.slice/kubepods-pod{systemd_uid}.slice/crio-conmon-{cid}.scope": ("", "", ""),
        "/user.slice/user-1000.slice/session-3.scope": ("", "", ""),
        "/": ("", "", ""),
    }
    assert {path: from_cgroup_path(path) for path in shapes} == shapes
    # a cgroup v1 file: the first hierarchy whose path names a container
    v1 = f"12:pids:/kubepods/besteffort/pod{uid}/{cid}\n1:name=systemd:/\n0::/\n"
    assert from_cgroup(v1) == ("", cid, uid)


def _sandboxed(mariadbd: Path, host_dir: Path, datadir: Path) -> subprocess.Popen[str]:
    """iogen named mariadbd in a mount namespace of its own where host_dir is mounted at
    datadir, its cwd (its datadir to the layout): no container, the same datadir as any
    other such sandbox."""
    script = 'mount --bind "$1" "$2" && cd "$2" && d=$2 b=$3 && shift 3 && exec "$b" --dir "$d" --wait "$@"'
    proc = subprocess.Popen(
        [find_binary("unshare"), "--mount", "sh", "-c", script, "sh", *map(str, (host_dir, datadir, mariadbd)), *IOGEN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert read_json_line(proc.stdout, 10, "sandboxed iogen").get("ready") is True
    return proc


@pytest.mark.bpf
def test_two_sandboxes_alike_are_told_apart_by_mount_namespace(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """Two servers with the same name and datadir, in no container, each in its own mount
    namespace: two series sets, the second found labelled with its mount namespace, said
    in a warning; each one's bytes written per file are its own (iogen's ground truth)."""
    root = Path(os.path.realpath(tmp_path))
    mariadbd, datadir = root / "bin" / "mariadbd", root / "data"
    mariadbd.parent.mkdir()
    shutil.copy(iogen, mariadbd)
    datadir.mkdir()
    hosts = [root / "host-a", root / "host-b"]
    for d in hosts:
        d.mkdir()
    port = free_port()
    exporter = start_fleet_exporter(port, EXPORTER_INTERVAL_S, EXPORTER_OPTIONS)
    procs: list[subprocess.Popen[str]] = []
    try:
        procs = [_sandboxed(mariadbd, d, datadir) for d in hosts]
        mnt = {p.pid: os.stat(f"/proc/{p.pid}/ns/mnt").st_ino for p in procs}
        assert len(set(mnt.values())) == 2

        def labels_by_pid() -> dict[int, str]:
            """The sandboxes traced (attached: up), by pid."""
            m = scrape(port)
            up = {lab["server"] for lab, v in m.samples.get("mysqlio_target_up", []) if v == 1}
            return {
                int(v): lab["server"]
                for lab, v in m.samples.get("mysqlio_target_pid", [])
                if lab["server"].startswith(str(datadir)) and lab["server"] in up
            }

        wait_for("both sandboxes traced", lambda: set(labels_by_pid()) == set(mnt), timeout_s=60)
        labels = labels_by_pid()
        # one keeps the datadir; the other (whichever the scan found second) has its namespace
        assert sorted(labels.values()) == sorted(
            [str(datadir), f"{datadir} (mnt:[{mnt[next(p for p in mnt if labels[p] != str(datadir))]}])"]
        ), labels
        expected = {}
        for proc, host in zip(procs, hosts, strict=True):
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            truth = read_json_line(proc.stdout, 30, "iogen run")["files"]
            assert truth and all(f["path"].startswith(f"{datadir}/") for f in truth), truth
            expected[labels[proc.pid]] = {f["path"]: f["write_bytes"] for f in truth if f["write_bytes"]}
            assert any(host.iterdir())  # its files went to its own host directory
        t = time.time()
        for label in labels.values():
            wait_for(
                "a sample after the runs",
                lambda label=label: scrape(port).value("mysqlio_last_sample_timestamp_seconds", server=label) > t,
            )
        time.sleep(2 * EXPORTER_INTERVAL_S)
        m = scrape(port)
        for label, truth in expected.items():
            assert m.by_path("mysqlio_file_write_bytes_total", server=label) == truth, label
        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=30)
        assert exporter.returncode == 0 and "Traceback" not in err, err
        assert err.count(" are both mariadbd with datadir ") == 1, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()


@pytest.fixture(scope="module")
def pods(server_roots: dict[str, str]) -> Iterator[list[Served]]:
    try:
        find_binary("crun")
    except Exception as exc:  # fail, never skip: make setup installs crun
        pytest.fail(f"crun is not installed (make setup): {exc}")
    with contextlib.ExitStack() as stack:
        out = []
        for i, name in enumerate(PODS):
            settings = MariaDBOptions(server_id=i + 1, extra={**QUIET, "innodb_io_capacity": str(IO_CAPACITY + i)})
            db = CrunMariaDB(server_roots["trixie"], Pod(NAMESPACE, name), settings, image_defaults=True)
            stack.enter_context(db)
            # different loads: one pod's bytes under the other's labels would not match
            bench = Sysbench(db, tables=1, table_size=2000 * (i + 1), threads=1)
            stack.callback(bench.stop)
            bench.prepare()
            out.append((db, bench))
        yield out


@pytest.mark.mariadb
def test_container_identity_from_files(pods: list[Served]) -> None:
    ours = container_identity("self")  # (the test may itself run in a container: not asserted)
    assert ours.mnt_ns == os.stat("/proc/self/ns/mnt").st_ino
    seen = []
    for db, _ in pods:
        found = container_identity(db.pid)
        assert (found.runtime, found.container_id, found.pod_uid) == ("crun", db.container_id, db.pod.uid)
        assert (found.namespace, found.pod, found.container) == (NAMESPACE, db.pod.name, db.pod.container)
        assert found.describe() == f"k8s {NAMESPACE}/{db.pod.name}/{db.pod.container}"
        # its own mount and pid namespaces (as /proc says), our network namespace (none asked)
        for kind in ("mnt", "pid", "net"):
            assert getattr(found, f"{kind}_ns") == os.stat(f"/proc/{db.pid}/ns/{kind}").st_ino
        assert found.mnt_ns != ours.mnt_ns and found.pid_ns != ours.pid_ns and found.net_ns == ours.net_ns
        identity = identity_of(db.pid)
        assert identity is not None and identity.datadir == DATADIR, identity
        assert identity.place == ("k8s", NAMESPACE, db.pod.name, db.pod.container)
        seen.append(identity)
    assert seen[0] != seen[1] and seen[0].container.mnt_ns != seen[1].container.mnt_ns


def _server_instances(db: CrunMariaDB, instances: Instances) -> Instances:
    """performance_schema's rows under the server's own paths (as the exporter's labels)."""
    return {
        key: (os.path.normpath(os.path.join(DATADIR, db.server_path(path))), b, n)
        for key, (path, b, n) in instances.items()
    }


def _labels(db: CrunMariaDB) -> dict[str, str]:
    return {"server": DATADIR, "namespace": NAMESPACE, "pod": db.pod.name, "container": db.pod.container}


def _stamp(port: int, db: CrunMariaDB) -> float:
    return scrape(port).value("mysqlio_last_sample_timestamp_seconds", **_labels(db))


def _sampled_after(port: int, dbs: list[CrunMariaDB], t: float) -> Metrics:
    """A scrape holding everything each server did before time t (see
    test_exporter_mysql_mariadb._sampled_after)."""
    for db in dbs:
        wait_for("a sample after t", lambda db=db: _stamp(port, db) > t)
        first = _stamp(port, db)
        wait_for("the next sample", lambda db=db, first=first: _stamp(port, db) > first)
    return scrape(port)


def _quiet_all(dbs: list[CrunMariaDB]) -> dict[str, Instances]:
    """test_mysql._quiet of every server, side by side (each waits a second of silence)."""
    with ThreadPoolExecutor(len(dbs)) as pool:
        return dict(zip([db.pod.name for db in dbs], pool.map(_quiet, dbs), strict=True))


def _window(port: int, pods: list[Served]) -> dict[str, tuple[dict[str, int], dict[str, float]]]:
    """A window quiet at both edges with sysbench in it: per pod, (performance_schema's
    bytes written per file, the exporter's) over the window."""
    dbs = [db for db, _ in pods]
    before = _quiet_all(dbs)
    m1 = _sampled_after(port, dbs, time.time())
    for _, bench in pods:
        bench.start(LOAD_S)
    for _, bench in pods:
        bench.wait(timeout_s=LOAD_S + 60)
    after = _quiet_all(dbs)
    m2 = _sampled_after(port, dbs, time.time())
    out = {}
    for db in dbs:
        name = db.pod.name
        assert m2.value("mysqlio_lost_events_total", **_labels(db)) == 0
        pfs: dict[str, int] = {}
        for path, wbytes, _ in _delta(_server_instances(db, before[name]), _server_instances(db, after[name])).values():
            pfs[path] = pfs.get(path, 0) + wbytes
        start = m1.by_path("mysqlio_file_write_bytes_total", **_labels(db))
        end = m2.by_path("mysqlio_file_write_bytes_total", **_labels(db))
        out[name] = (pfs, {p: v - start.get(p, 0) for p, v in end.items() if v - start.get(p, 0)})
    return out


def _assert_exact(
    window: dict[str, tuple[dict[str, int], dict[str, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    for name, (pfs, exported) in window.items():
        compared = {p: w for p, w in pfs.items() if w > MIN_BYTES}
        with capsys.disabled():
            print(f"\n{name}: write bytes per file, performance_schema / exporter")
            for path in sorted(pfs.keys() | exported.keys()):
                print(f"  {path:48} {pfs.get(path, 0):>12} {int(exported.get(path, 0)):>12}")
        assert any(p.endswith("/sbtest1.ibd") for p in compared) and any("mysql-bin." in p for p in compared), compared
        assert all(p.startswith(DATADIR + "/") for p in exported), exported  # no /proc/PID/root
        off = {p: (w, exported.get(p, 0)) for p, w in compared.items() if abs(exported.get(p, 0) - w) > TOLERANCE * w}
        assert not off, f"{name}: bytes per file off by more than {TOLERANCE:.0%} (pfs, exporter): {off}"


@pytest.mark.bpf
@pytest.mark.mariadb
def test_exporter_keeps_two_pods_apart_and_follows_a_restart(
    bpf_ready: None, pods: list[Served], capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    exporter = start_fleet_exporter(port, EXPORTER_INTERVAL_S, EXPORTER_OPTIONS)
    try:

        def traced(db: CrunMariaDB) -> bool:
            up = [
                v for lab, v in scrape(port).samples.get("mysqlio_target_pid", []) if lab.items() >= _labels(db).items()
            ]
            return up == [db.pid]

        wait_for("both pods traced", lambda: all(traced(db) for db, _ in pods), timeout_s=60)
        _assert_exact(_window(port, pods), capsys)

        # kubelet restarts the second pod's container: a new container id and pid, same names
        db = pods[1][0]
        old_pid, old_id = db.pid, db.container_id
        before = scrape(port).by_path("mysqlio_file_write_bytes_total", **_labels(db))
        db.restart()
        assert (db.pid, db.container_id) != (old_pid, old_id) and container_identity(
            db.pid
        ).container_id == db.container_id
        wait_for("the restarted pod traced", lambda: traced(db), timeout_s=60)
        m = scrape(port)
        assert m.value("mysqlio_target_restarts_total", **_labels(db)) == 1
        assert m.value("mysqlio_target_up", **_labels(db)) == 1
        # the same series (labels), not restarted from 0
        after = m.by_path("mysqlio_file_write_bytes_total", **_labels(db))
        assert before and all(after.get(path, 0) >= value for path, value in before.items()), (before, after)
        _assert_exact(_window(port, pods[1:]), capsys)  # its bytes since, exact under the same labels

        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=30)
        assert exporter.returncode == 0 and "Traceback" not in err, err
        assert " are both " not in err, err  # told apart by their pods, not by a mount namespace
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()


# what the server runs with, as mysqlio's option names
_TRUTH = (
    "SELECT @@datadir AS datadir, @@socket AS socket, @@server_id AS server_id, @@log_bin_basename AS log_bin, "
    "@@log_error AS log_error, @@innodb_io_capacity AS innodb_io_capacity"
)


def _same_file(a: str, b: str) -> bool:
    return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)


@pytest.mark.bpf
@pytest.mark.mariadb
def test_the_images_symlinked_my_cnf_is_read_in_the_pod(bpf_ready: None, pods: list[Served]) -> None:
    """Each pod's settings reach its server only through the root's symlinked my.cnf and
    the pod's file in its include dir (after the restart too): mysqlio's option values,
    layout, doctor and `top --mysql` equal what the server says it runs with."""
    root = pods[0][0].root
    # Debian's chain, as its packages left it (mysql-common's link, dpkg's alternative)
    assert os.readlink(f"{root}/etc/mysql/my.cnf") == "/etc/alternatives/my.cnf"
    assert os.readlink(f"{root}/etc/alternatives/my.cnf") == "/etc/mysql/mariadb.cnf", "rebuild the root"
    image_cnf = f"{root}/etc/mysql/mariadb.cnf"
    for db, _ in pods:
        truth = db.sql_named(_TRUTH)[0]
        truth["datadir"] = os.path.normpath(truth["datadir"])
        assert truth["datadir"] == DATADIR and truth["server_id"] == str(db.options.server_id), truth
        cmdline = Path(f"/proc/{db.pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        assert not [a for a in cmdline if a.startswith("--defaults-file")], cmdline
        lay = read_layout(db.pid)
        merged = read_options(db.pid, lay.version)
        assert merged is not None
        assert {name: merged.values.get(name) for name in truth} == truth
        assert merged.files.files[0] == "/etc/mysql/my.cnf" and merged.files.files[-1] == POD_CNF, merged.files.files
        # the link followed in the pod's root: its mariadb.cnf, not the host's
        assert _same_file(merged.files.real("/etc/mysql/my.cnf"), image_cnf)
        # the host's own files (its MariaDB's chain, no pod file) give none of these values:
        # a read of them instead would show
        host = merge_options(cmdline, version=lay.version, exe=cmdline[0])
        assert all(host.values.get(name) != value for name, value in truth.items()), host.values
        if os.path.exists("/etc/alternatives/my.cnf"):  # the host's MariaDB: the trap is there
            # the kernel follows the absolute link from our root, to the host's file
            assert not _same_file(f"/proc/{db.pid}/root/etc/mysql/my.cnf", image_cnf)
        # the layout: the server's files under its root as read here
        assert (lay.datadir, lay.log_bin_basename, lay.log_error) == tuple(
            lay.root + truth[name] for name in ("datadir", "log_bin", "log_error")
        ), lay
        assert lay.option_files[-1] == lay.root + POD_CNF, lay.option_files

    db = pods[1][0]  # the restarted one (test_exporter_keeps_two_pods_apart_and_follows_a_restart)
    truth = db.sql_named(_TRUTH)[0]
    doctor = _mysqlio("doctor", "--pod", f"{NAMESPACE}/{db.pod.name}", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"] if c["section"] == "server"}
    assert checks["datadir"]["value"] == DATADIR and checks["error log"]["value"] == truth["log_error"], checks
    files = checks["option files"]["detail"].split(", ")
    assert files[0] == "/etc/mysql/my.cnf" and files[-1] == POD_CNF, files
    # sync_binlog and performance_schema: the pod file's values, not the server's defaults
    assert checks["sync_binlog"]["detail"].startswith(f"{db.options.sync_binlog} (configured)"), checks
    assert checks["performance_schema"]["detail"].startswith("ON (configured)"), checks
    top = _mysqlio("top", "--pod", f"{NAMESPACE}/{db.pod.name}", "--mysql", "--json", "-n", "1", "-i", "0.3")
    assert top.returncode == 0, top.stderr
    server = json.loads(top.stdout.splitlines()[0])["server"]
    assert server["error"] is None, server
    variables = server["facts"]["variables"]
    assert variables["innodb_io_capacity"] == truth["innodb_io_capacity"] == str(IO_CAPACITY + 1), variables


@pytest.mark.bpf
@pytest.mark.mariadb
def test_top_names_the_container(bpf_ready: None, pods: list[Served]) -> None:
    """`top --json` carries the container (its identity as read here), the line that
    starts tracing names the pod. `verify`, beside it under a second of load, names the
    files as top does: the server's own paths, never /proc/PID/root/..."""
    db, bench = pods[0]
    verify = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", "verify", "-p", str(db.pid), "-d", "2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert verify.stderr is not None
        attached = attached_line(verify.stderr)
        assert attached.startswith("mysqlio: comparing with performance_schema"), attached
        bench.start(LOAD_S)
        res = _mysqlio("top", "-p", str(db.pid), "--json", "-n", "1", "-i", "0.3")
        bench.wait(timeout_s=LOAD_S + 60)
        verify_out, verify_err = verify.communicate(timeout=60)
    finally:
        if verify.poll() is None:
            verify.kill()
            verify.wait()
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout.splitlines()[0])
    assert line["pid"] == db.pid and line["container"] == container_identity(db.pid).to_json()
    assert line["container"]["id"] == db.container_id and line["container"]["pod"] == db.pod.name
    assert f"(mariadbd in k8s {NAMESPACE}/{db.pod.name}/{db.pod.container})" in res.stderr, res.stderr
    # verify: 0 agree, 1 differ or too little to judge in 2 s; either way one JSON object
    assert verify.returncode in (0, 1) and "Traceback" not in verify_err, verify_err
    result = json.loads(verify_out)
    assert os.path.samefile(result["connection"], db.socket), result["connection"]  # this pod's server
    named = [(r["path"], r["name"], r["note"]) for r in result["files"]]
    named += [(f["path"], f["name"], "") for f in result["mapped"]]
    assert any(path == f"{DATADIR}/ib_logfile0" for path, _, _ in named), named
    for path, name, note in named:
        assert path.startswith("/") and not path.startswith("/proc/"), path
        if path.startswith(DATADIR + "/"):
            assert name == path.removeprefix(DATADIR + "/"), (path, name)
            assert "deleted" in note or os.path.exists(_host_file(db, path)), (path, note)
    assert result["redo"] is None or result["redo"]["files"] == [f"{DATADIR}/ib_logfile0"], result["redo"]


def _mysqlio(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mysqlio", *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )


def _host_file(db: CrunMariaDB, path: str) -> str:
    """Where a file the server names `path` (under its /var/lib/mysql) lies on the host."""
    # the server's own name, no /proc/PID/root (its error log, a note of which may fall in a
    # window, is beside the datadir)
    assert path.startswith(CrunMariaDB.MOUNT + "/"), path
    return db.host_path(path)


@pytest.mark.bpf
@pytest.mark.mariadb
def test_selectors_and_the_servers_own_paths(bpf_ready: None, pods: list[Served], tmp_path: Path) -> None:
    """--pod and --container select the pod's server (top, record, exporter -p's single
    mode, doctor) as -p does; every path shown is the server's own name for a file whose
    host copy is the file traced; exporter -p carries the pod's labels as --all does."""
    (db, bench), other = pods[1], pods[0][0]
    cid, trace_file = db.container_id[:12], str(tmp_path / "t.trace")
    port = free_port()
    cli = [sys.executable, "-m", "mysqlio"]
    exporter = subprocess.Popen(
        [*cli, "exporter", "--container", cid, "-i", "0.5", "--listen", f"127.0.0.1:{port}", *EXPORTER_OPTIONS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    # top and record run until the load is over (stopped with SIGINT, as by Ctrl-C): on a
    # loaded machine the three attaches can outlast a fixed -n or -d window
    top = subprocess.Popen([*cli, "top", "--pod", f"{NAMESPACE}/{db.pod.name}", "--json", "-i", "0.5"], **pipes)
    record = subprocess.Popen([*cli, "record", "--container", db.container_id, "-o", trace_file], **pipes)
    try:
        labels = {"namespace": NAMESPACE, "pod": db.pod.name, "container": db.pod.container}
        for proc, said in (
            (exporter, "mysqlio: exporting pid"),
            (top, "mysqlio: tracing pid"),
            (record, "mysqlio: recording pid"),
        ):
            assert proc.stderr is not None
            line = attached_line(proc.stderr)
            assert line.startswith(f"{said} {db.pid} "), line
        assert scrape(port).value("mysqlio_target_pid", **labels) == db.pid
        bench.start(LOAD_S)
        bench.wait(timeout_s=LOAD_S + 60)
        t = time.time()
        wait_for("a sample after the load", lambda: scrape(port).value("mysqlio_last_sample_timestamp_seconds") > t)
        m = scrape(port)
        # every sample: the pod's labels; the files: the server's names
        assert all(lab.items() >= labels.items() for samples in m.samples.values() for lab, _ in samples)
        written = m.by_path("mysqlio_file_write_bytes_total")
        info = m.samples["mysqlio_target_info"][0][0]
        assert info["datadir"] == DATADIR, info
        for proc in (top, record):
            proc.send_signal(signal.SIGINT)
        top_out, top_err = top.communicate(timeout=60)
        _, record_err = record.communicate(timeout=60)
    finally:
        for proc in (top, record):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=30)
    assert exporter.returncode == 0 and "Traceback" not in err, err
    assert top.returncode == 0 and record.returncode == 0, (top_err, record_err)
    lines = [json.loads(line) for line in top_out.splitlines()]
    assert {line["pid"] for line in lines} == {db.pid}
    shown = [f for line in lines for f in line["files"]]
    trace = report_json(trace_file)
    assert trace["meta"]["pid"] == db.pid and trace["meta"]["datadir"] == DATADIR, trace["meta"]
    assert all(r["path"] == DATADIR + "/ibdata1" for r in trace["meta"]["regions"]), trace["meta"]["regions"]
    for files in (shown, trace["files"]):
        # its redo log among them (each commit's); each the server's name of the very file
        # traced (its inode, read on the host), not the other pod's file of the same name
        assert any(f["path"] == f"{DATADIR}/ib_logfile0" for f in files), files
        for f in files:
            if not f["deleted"]:
                st = os.stat(_host_file(db, f["path"]))
                assert (f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino) == (f["dev"], f["ino"]), f
    assert f"{DATADIR}/ib_logfile0" in written, written
    assert all(os.path.exists(_host_file(db, p)) for p in written), written
    redo = f"{DATADIR}/ib_logfile0"  # the same name in the other pod: another file
    assert os.stat(_host_file(db, redo)).st_ino != os.stat(_host_file(other, redo)).st_ino
    doctor = _mysqlio("doctor", "--pod", f"{NAMESPACE}/{db.pod.name}", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"] if c["section"] == "server"}
    assert checks["server"]["value"] == str(db.pid) and checks["datadir"]["value"] == DATADIR, checks
    for args in (("--pod", f"{NAMESPACE}/nope"), ("--container", "f" * 64)):
        res = _mysqlio("top", *args, "--json", "-n", "1")
        assert res.returncode != 0 and res.stderr.count("\n") == 1 and "no mysqld or mariadbd in" in res.stderr
        assert f"pid {db.pid} (k8s {NAMESPACE}/{db.pod.name}/{db.pod.container}" in res.stderr, res.stderr
