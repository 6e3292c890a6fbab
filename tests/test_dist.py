"""The single-file build (`make dist`): dist/mysqlio in Debian 11, 12 and sid roots, none of
which has Python, traced exactly.

`make dist` builds the file (nothing when it is fresh), while tools/dist_roots.py makes the
Debian 12 root if missing (the other two are the server roots the suite already has). In each
root, tools/matrix_guest.py's iogen scenarios on this machine's kernel, traced by the file's
top, record and exporter (record's trace reported by this checkout's Python), must all be
"exact" as tests/test_kernel_matrix.py judges them, and the tracers must have loaded no library
from the root or the host: only what the file carries (libbpf.so.1 and the C library among it).
The start-up figures (doctor's wall time; top's time until its probes are attached) go to
build/dist-matrix/startup.json.

Never skipped: a failed build, a root that cannot be made or a tracer that cannot run fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dist_roots
import pytest
from test_kernel_matrix import _explain, hooks_not_tracepoints, not_exact
from test_verify import _quiet

from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.traced import attached_line

REPO = Path(__file__).resolve().parent.parent
DIST = REPO / "dist" / "mysqlio"
BUILD_TIMEOUT_S = 1200
ATTACH_TIMEOUT_S = 120
VERIFY_WINDOW_S = 24.0  # 10,000 rows inserted, flushed and purged, then quiet, within it

pytestmark = pytest.mark.bpf


@pytest.fixture(scope="module")
def roots(bpf_ready: None, server_roots: dict[str, str]) -> dict[str, str]:
    """dist/mysqlio built, and the three roots: name -> directory."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        bookworm = pool.submit(dist_roots.ensure_root, "bookworm")  # mostly waits on the network
        made = subprocess.run(
            "make dist && make -C tools iogen-static",
            shell=True,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        build_s = time.monotonic() - started
        try:
            bookworm_root = bookworm.result(timeout=BUILD_TIMEOUT_S)
        except (RuntimeError, OSError) as exc:
            pytest.fail(f"the Debian 12 root: {exc}")
    if made.returncode != 0:
        pytest.fail(
            f"make dist or make -C tools iogen-static failed (exit {made.returncode}):\n{(made.stderr or made.stdout)[-3000:]}"
        )
    print(f"\nmake dist: {build_s:.1f} s; {DIST.stat().st_size} bytes")
    return {"bullseye": server_roots["bullseye"], "bookworm": bookworm_root, "sid": server_roots["sid-mysql"]}


def _package_version(root: str, package: str) -> str:
    """PACKAGE's installed version in ROOT, from its dpkg database ("" when not installed)."""
    status = Path(root, "var/lib/dpkg/status").read_text(errors="replace")
    for block in status.split("\n\n"):
        if re.search(rf"^Package: {re.escape(package)}$", block, re.M) and "\nStatus: install ok installed" in block:
            found = re.search(r"^Version: (\S+)$", block, re.M)
            return found[1] if found else "?"
    return ""


def test_dist_is_one_static_file(roots: dict[str, str]) -> None:
    """No program interpreter and no shared library needed; no matplotlib; the roots have no
    Python and (but sid) no libbpf.so.1, and Debian 11's C library is older than the build host's."""
    headers = subprocess.run(["readelf", "-ldW", str(DIST)], capture_output=True, text=True, check=True).stdout
    assert "INTERP" not in headers and "(NEEDED)" not in headers, headers[-2000:]
    for name, root in roots.items():
        assert not list(Path(root).glob("usr/bin/python3*")), f"the {name} root has a Python"
        print(f"{name}: libc6 {_package_version(root, 'libc6')}, libbpf1 {_package_version(root, 'libbpf1') or 'none'}")
    # matplotlib is left out: plot says so in one line
    plot = subprocess.run(
        [str(DIST), "plot", str(DIST), "-o", os.devnull], capture_output=True, text=True, timeout=120, check=False
    )
    assert plot.returncode != 0 and plot.stderr.strip().splitlines() == [
        "mysqlio: plot needs matplotlib, which this mysqlio lacks: pip install mysqlio (or matplotlib)"
    ], plot.stderr[-2000:]
    # the build host's C library is newer than Debian 11's: without its own, the file could not start there
    host = tuple(int(n) for n in (os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0").split()[1].split(".")[:2])
    bullseye = _package_version(roots["bullseye"], "libc6")
    assert bullseye.startswith("2.31-"), bullseye
    assert host > (2, 31), host


@pytest.mark.parametrize("name", list(dist_roots.ROOTS))
def test_dist_exact_in_root(roots: dict[str, str], name: str) -> None:
    rc, result, stderr = dist_roots.run_matrix(name, roots[name])
    assert result, f"matrix_guest.py wrote no result (exit {rc}):\n{stderr[-3000:]}"
    assert set(result.get("ebpf", {})) == {"top", "record", "exporter"}, result.get("ebpf")
    bad = not_exact(result)
    assert not bad, _explain(result, bad)
    raw = hooks_not_tracepoints(result)
    assert not raw, raw
    for mode, run in result["ebpf"].items():
        libraries = run.get("libraries", [])
        libbpf = [p for p in libraries if os.path.basename(p).startswith("libbpf.so")]
        assert len(libbpf) == 1 and "/_MEI" in libbpf[0], f"{mode}: libbpf mapped: {libbpf}"
        libc = [p for p in libraries if os.path.basename(p) == "libc.so.6"]
        assert len(libc) == 1 and "/staticx-" in libc[0], f"{mode}: C library mapped: {libc}"
        # everything mapped came out of the file: unpacked by PyInstaller (_MEI*) or staticx
        foreign = [p for p in libraries if not re.search(r"/(_MEI\w+|staticx-\w+)/", p)]
        assert not foreign, f"{mode} in the {name} root loaded libraries not of the file: {foreign}"
    _check_doctor(result["doctor"])


def _check_doctor(run: dict[str, Any]) -> None:
    """doctor as the file runs it in a root: exit 0, the eBPF backend ready, every required
    check ok, its libbpf and BPF object the file's own, its test write counted exactly."""
    doctor = run["json"]
    assert doctor is not None, run
    assert (run["returncode"], doctor["exit_code"], doctor["ebpf_ready"]) == (0, 0, True), run
    assert doctor["backend"] == "bpf", doctor["backend"]
    checks = {c["name"]: c for c in doctor["checks"]}
    failed = [c for c in doctor["checks"] if c["required"] and c["status"] != "ok"]
    assert not failed, failed
    assert "carried by this executable" in checks["libbpf"]["detail"], checks["libbpf"]
    assert "/_MEI" in checks["BPF object"]["detail"], checks["BPF object"]
    assert "counted a 4096-byte test write and its fsync exactly" in checks["probe attach"]["detail"], checks
    assert checks["syscall hook"]["status"] == "ok", checks["syscall hook"]
    assert checks["preemption"]["status"] in ("ok", "warn"), checks["preemption"]


class _ServerInRoot(RootedMariaDB):
    """The root's own MariaDB started inside a dist_roots.root_namespace() (nsenter into it, a
    pid namespace of its own): on that "host" the server and the file share the root, as
    when the file is copied onto a machine that runs the packaged server."""

    def __init__(self, root: str, holder: int, options: MariaDBOptions) -> None:
        super().__init__(root, options)
        self.holder = holder

    def _command(self, argv: list[str]) -> list[str]:
        inside = ["/usr/bin/unshare", "--pid", "--fork", "--kill-child", "/usr/bin/env", "-i", f"PATH={self._PATH}"]
        return ["nsenter", f"--mount=/proc/{self.holder}/ns/mnt", *inside, "HOME=/", *argv]


def test_dist_verify_in_root(roots: dict[str, str]) -> None:
    """verify needs a server with performance_schema: the Debian 11 root's own MariaDB 10.5,
    run in the same root as the file. Quiet at both edges of the window, rows inserted within
    it: every file performance_schema counts agrees to the byte (as tests/test_verify.py
    judges the host's server), the table's file and the redo log judged (over 1 MiB each).
    10.5 purges even an insert's undo log, lazily: quiet (RootedMariaDB.wait_clean's wait for
    purge) takes it about 13 s, hence the window's length."""
    started = time.monotonic()
    # pages flushed at once, not at 10.5's default 200 a second: quiet again within the window
    extra = {"innodb_stats_auto_recalc": "OFF", "innodb_io_capacity": "5000", "innodb_io_capacity_max": "10000"}
    root = roots["bullseye"]
    with (
        dist_roots.root_namespace(root, [DIST], [tempfile.gettempdir()]) as holder,
        _ServerInRoot(root, holder, MariaDBOptions(extra=extra)) as db,
    ):
        db.sql("CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=InnoDB")
        _quiet(db)
        argv = dist_roots.in_root_argv(holder, DIST.name)
        proc = subprocess.Popen(
            [*argv, "verify", "-p", str(db.pid), "-d", str(VERIFY_WINDOW_S), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        try:
            said = attached_line(proc.stderr)
            assert said.startswith("mysqlio: comparing"), said + proc.stderr.read()[-2000:]
            window = time.monotonic()
            time.sleep(0.5)  # the first edge
            db.sql(
                "INSERT INTO d.t WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 10000) "
                "SELECT n, REPEAT('x', 200) FROM s"
            )
            _quiet(db)
            quiet_at = time.monotonic() - window
            assert quiet_at < VERIFY_WINDOW_S - 0.5, f"quiet only {quiet_at:.1f} s into the window"
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        datadir = db.server_path(db.datadir)
    assert proc.returncode == 0, out + err
    result = json.loads(out)
    assert result["verdict"]["state"] == "agree", result["verdict"]
    assert result["server"].startswith("mariadbd 10.5."), result["server"]
    judged = {(r["name"], r["op"]) for r in result["files"] if r["judged"]}
    assert judged >= {("d/t.ibd", "write"), ("ib_logfile0", "write")}, judged
    table = next(r for r in result["files"] if r["name"] == "d/t.ibd" and r["op"] == "write")
    assert table["path"] == f"{datadir}/d/t.ibd", table  # the root is the file's own: no prefix
    compared = [r for r in result["files"] if r["pfs_bytes"] is not None]
    for r in compared:  # every file with a performance_schema row, reads and writes
        assert (r["pfs_edge_bytes"], r["difference_bytes"]) == (0, 0), r
    print(
        f"\nverify in the Debian 11 root: {len(compared)} rows exact, {table['mysqlio_bytes']} bytes to d/t.ibd; "
        f"quiet {quiet_at:.1f} s into the window; "
        f"{time.monotonic() - started:.1f} s in all",
        file=sys.stderr,
    )


def test_dist_startup(roots: dict[str, str]) -> None:
    """In the Debian 11 root: doctor's wall time, and top's time until its probes are attached
    (its banner on stderr) on a process of this host."""
    with dist_roots.root_namespace(roots["bullseye"], [DIST], [tempfile.gettempdir()]) as holder:
        figures = _startup(dist_roots.in_root_argv(holder, DIST.name))
    dist_roots.RESULTS.mkdir(parents=True, exist_ok=True)
    (dist_roots.RESULTS / "startup.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"\ndist/mysqlio start-up in the Debian 11 root: {figures}", file=sys.stderr)


def _startup(prefix: list[str]) -> dict[str, object]:
    started = time.monotonic()
    doctor = subprocess.run([*prefix, "doctor", "--json"], capture_output=True, text=True, timeout=300, check=False)
    doctor_s = time.monotonic() - started
    checks = json.loads(doctor.stdout)["checks"]
    assert any(c["name"] == "libbpf" and c["status"] == "ok" for c in checks), doctor.stdout[-2000:]
    target = subprocess.Popen(["sleep", "300"])
    banner = f"mysqlio: tracing pid {target.pid} "
    attached = threading.Event()
    said: list[str] = []
    try:
        started = time.monotonic()
        top = subprocess.Popen(
            [*prefix, "top", "-p", str(target.pid), "--json", "-i", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

        def read() -> None:
            assert top.stderr is not None
            for line in top.stderr:
                said.append(line)
                if line.startswith(banner):
                    attached.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        ok = attached.wait(ATTACH_TIMEOUT_S)
        attach_s = time.monotonic() - started
        top.send_signal(signal.SIGINT)
        try:
            top.wait(timeout=60)
        except subprocess.TimeoutExpired:
            top.kill()
            top.wait()
        reader.join(10)
        assert ok, f"top did not attach within {ATTACH_TIMEOUT_S} s:\n{''.join(said)[-2000:]}"
    finally:
        target.kill()
        target.wait()
    return {
        "bytes": DIST.stat().st_size,
        "doctor_s": round(doctor_s, 2),
        "top_attached_s": round(attach_s, 2),
        "root": "bullseye",
        "host_load_1m": round(os.getloadavg()[0], 1),
    }
