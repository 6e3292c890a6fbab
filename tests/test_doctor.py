"""mysqlio doctor: the real checks on this machine (as root and as nobody), against
real sandbox MariaDB servers, and the check functions one by one with crafted input."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_syscall_hook import in_private_ns

from mysqlio import (
    doctor_check,
    doctor_error_log,
    doctor_features,
    doctor_kernel,
    doctor_probe,
    doctor_render,
    doctor_server,
    doctor_settings,
    doctor_tools,
    preflight,
    syscall_hook,
)
from mysqlio.bpf_probe import bpf_object_path
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.doctor_check import Check
from mysqlio.doctor_error_log import KernelAioEvidence
from mysqlio.doctor_settings import ServerOptions
from mysqlio.errors import UserError
from mysqlio.kernel_features import KernelFeatures

MYSQLIO = [sys.executable, "-m", "mysqlio"]
NOBODY = "65534"


def run_doctor(*args: str, user: str | None = None, tracefs: str = "inherit") -> subprocess.CompletedProcess[str]:
    """doctor in a private mount namespace (tracefs there as test_syscall_hook.NS_PRELUDE
    sets it up): a tracefs doctor mounts is never left on the host."""
    cmd = [*MYSQLIO, "doctor", *args]
    if user is not None:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to drop root"
        cmd = [setpriv, f"--reuid={user}", f"--regid={user}", "--clear-groups", "--inh-caps=-all", *cmd]
    return subprocess.run(in_private_ns(cmd, tracefs), capture_output=True, text=True, timeout=120, check=False)


def doctor_json(
    *args: str, user: str | None = None, tracefs: str = "inherit"
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], int]:
    """The JSON object, its checks by name, and the exit code; stderr must be empty."""
    proc = run_doctor("--json", *args, user=user, tracefs=tracefs)
    assert proc.stderr == "", proc.stderr
    report = json.loads(proc.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert len(by_name) == len(report["checks"]), "check names must be unique"
    return report, by_name, proc.returncode


def assert_well_formed(report: dict[str, Any], code: int) -> None:
    for check in report["checks"]:
        assert check["status"] in doctor_check.STATUSES, check
        assert check["section"] in doctor_check.SECTIONS, check
        assert check["detail"], check
        if check["status"] == "fail" or (check["status"] == "warn" and check["section"] != "server"):
            assert check["fix"], f"{check['name']} fails without a fix"
    required_failed = [c["name"] for c in report["checks"] if c["required"] and c["status"] == "fail"]
    assert report["ebpf_ready"] == (not required_failed)
    assert code == report["exit_code"] == (1 if required_failed else 0)


@pytest.fixture(scope="module")
def sleeper() -> Iterator[int]:
    """A process that is not a server, as a deterministic -p target (other servers may run here)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


def tracefs_events(*events: str) -> dict[str, bool]:
    """Which category/event directories tracefs has, looked at where libbpf would
    (mounted there first, in a private mount namespace, if nothing is)."""
    code = (
        "import json, os, sys\n"
        "from mysqlio import syscall_hook\n"
        "path = syscall_hook.find_tracefs().path\n"
        "print(json.dumps({e: os.path.isdir(os.path.join(path, 'events', e)) for e in sys.argv[1:]}))\n"
    )
    proc = subprocess.run(
        in_private_ns([sys.executable, "-c", code, *events]), capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def libbpf_soname_version() -> str:
    """major.minor of the libbpf.so.1 the dynamic linker maps (its file name, e.g. libbpf.so.1.1.2)."""
    ctypes.CDLL("libbpf.so.1")
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libbpf.so" in line}
    assert len(paths) == 1, paths
    match = re.search(r"libbpf\.so\.(\d+)\.(\d+)", os.path.realpath(paths.pop()))
    assert match, paths
    return f"{match[1]}.{match[2]}"


# ---- the whole command on this machine ----------------------------------------------


def test_root_everything_needed_works(bpf_ready: None, sleeper: int) -> None:
    report, checks, code = doctor_json("-p", str(sleeper))
    assert_well_formed(report, code)
    assert code == 0 and report["ebpf_ready"] is True and report["backend"] == "bpf"
    assert checks["privileges"]["status"] == "ok" and checks["privileges"]["detail"] == "root"
    assert checks["kernel"]["value"] == os.uname().release
    assert checks["BTF"]["status"] == "ok" and checks["BTF"]["value"] == preflight.BTF_PATH
    assert checks["BPF JIT"]["value"] == Path(doctor_kernel.JIT_PATH).read_text().strip()
    assert checks["libbpf"]["status"] == "ok"
    assert checks["libbpf"]["value"] == libbpf_soname_version()
    assert checks["libbpf"]["value"].startswith("1.")
    # the tracepoints exist in tracefs too (a second, independent source)
    in_tracefs = tracefs_events(
        "raw_syscalls/sys_enter", "raw_syscalls/sys_exit", "io_uring/io_uring_complete", "io_uring/io_uring_submit_req"
    )
    assert all(in_tracefs.values()), in_tracefs
    assert checks["syscall tracepoints"]["status"] == "ok"
    assert checks["io_uring tracepoints"]["status"] == "ok"
    # tracefs found or mounted (in doctor's namespace), and the per-syscall hook
    assert checks["tracefs"]["status"] == "ok" and checks["tracefs"]["value"] in syscall_hook.TRACEFS_DIRS
    assert checks["syscall hook"]["status"] == "ok" and checks["syscall hook"]["value"] == "tracepoints"
    assert checks["BPF object"]["value"] == bpf_object_path()
    attach = checks["probe attach"]
    assert attach["status"] == "ok", attach
    assert f"{doctor_probe.TEST_WRITE_BYTES}-byte test write and its fsync exactly" in attach["detail"]
    required = {c["name"] for c in report["checks"] if c["required"]}
    assert required == {
        "privileges",
        "kernel lockdown",
        "BTF",
        "libbpf",
        "syscall tracepoints",
        "io_uring tracepoints",
        "BPF object",
        "probe attach",
    }
    # a process that is not a server: said, and not a failure
    assert checks["server"]["status"] == "warn" and "'sleep'" in checks["server"]["detail"]


def test_unprivileged_fails_with_a_fix(sleeper: int) -> None:
    report, checks, code = doctor_json("-p", str(sleeper), user=NOBODY)
    assert_well_formed(report, code)
    assert code == 1 and report["ebpf_ready"] is False
    privileges = checks["privileges"]
    assert privileges["status"] == "fail" and privileges["required"]
    assert "uid 65534" in privileges["detail"] and "run as root" in privileges["fix"]
    assert checks["probe attach"]["status"] == "skip"
    assert checks["probe attach"]["detail"] == "not tried: privileges failed"
    # what needs no privilege is still checked
    assert checks["BTF"]["status"] == "ok" and checks["syscall tracepoints"]["status"] == "ok"

    text = run_doctor("-p", str(sleeper), user=NOBODY)
    assert text.returncode == 1 and text.stderr == ""
    assert re.search(r"^FAIL +privileges +uid 65534", text.stdout, re.M), text.stdout
    assert "fix: run as root" in text.stdout
    assert "eBPF backend: not usable (privileges)" in text.stdout


@pytest.mark.parametrize(
    ("tracefs", "where", "how"),
    [
        ("fresh", syscall_hook.TRACEFS, ", was not mounted: mounted by mysqlio just now"),
        ("debugfs", syscall_hook.DEBUGFS_TRACING, " (under debugfs, where libbpf looks first), found mounted"),
    ],
)
def test_doctor_reports_tracefs(bpf_ready: None, sleeper: int, tracefs: str, where: str, how: str) -> None:
    """On a fresh machine doctor mounts tracefs where libbpf looks (as top would) and says
    so in its report, not on stderr; with debugfs mounted it uses tracefs under it."""
    report, checks, code = doctor_json("-p", str(sleeper), tracefs=tracefs)
    assert_well_formed(report, code)
    assert code == 0
    found = checks["tracefs"]
    assert found["status"] == "ok" and found["value"] == where and found["detail"] == where + how
    assert checks["syscall hook"]["status"] == "ok" and checks["syscall hook"]["value"] == "tracepoints"
    assert checks["probe attach"]["status"] == "ok", checks["probe attach"]

    text = run_doctor("-p", str(sleeper), tracefs=tracefs)
    assert text.returncode == 0 and text.stderr == ""
    assert re.search(rf"^ok +tracefs +{re.escape(where)}", text.stdout, re.M), text.stdout
    assert re.search(r"^ok +syscall hook +per-syscall tracepoints on 17 I/O syscalls", text.stdout, re.M)


def test_doctor_cannot_mount_tracefs(sleeper: int) -> None:
    """nobody on a fresh machine: tracefs cannot be mounted; said, with the fix, not required."""
    report, checks, code = doctor_json("-p", str(sleeper), user=NOBODY, tracefs="fresh")
    assert_well_formed(report, code)
    found, hook = checks["tracefs"], checks["syscall hook"]
    assert found["status"] == "warn" and "CAP_SYS_ADMIN" in found["detail"] and not found["required"]
    assert "mount -t tracefs nodev /sys/kernel/tracing" in found["fix"]
    assert hook["status"] == "warn" and hook["value"] == "raw" and not hook["required"]


def test_nonexistent_pid_is_a_required_failure() -> None:
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    proc = run_doctor("--json", "-p", str(pid))
    report = json.loads(proc.stdout)
    server = next(c for c in report["checks"] if c["name"] == "server")
    assert server == {
        "name": "server",
        "status": "fail",
        "detail": f"no process with pid {pid}",
        "fix": "check the pid (pgrep -a 'mysqld|mariadbd')",
        "required": True,
        "value": None,
        "section": "server",
    }
    assert proc.returncode == 1 and proc.stderr == ""


# ---- against real servers ------------------------------------------------------------------

SETTINGS = {  # doctor's name -> the server variable
    "innodb_flush_method": "@@innodb_flush_method",
    "innodb_use_native_aio": "@@innodb_use_native_aio",
    "innodb_flush_log_at_trx_commit": "@@innodb_flush_log_at_trx_commit",
    "sync_binlog": "@@sync_binlog",
    "performance_schema": "@@performance_schema",
}


def server_values(db: MariaDB) -> dict[str, str]:
    """What the server itself says, in doctor's spelling (booleans ON / OFF)."""
    row = db.sql("SELECT " + ", ".join(SETTINGS.values()))[0]
    values = dict(zip(SETTINGS, row, strict=True))
    for name in doctor_settings.BOOLEAN_SETTINGS:
        values[name] = {"1": "ON", "0": "OFF"}[values[name]]
    return values


@pytest.fixture(scope="module")
def uring_db() -> Iterator[MariaDB]:
    """io_uring, binlog synced at each commit, settings given in my.cnf."""
    opts = MariaDBOptions(
        innodb_backend="io_uring",
        extra={"innodb_flush_method": "fsync", "innodb_flush_log_at_trx_commit": "2"},
    )
    with MariaDB(opts) as db:
        yield db


@pytest.fixture(scope="module")
def pwrite_db() -> Iterator[MariaDB]:
    """Simulated AIO, no binlog, no performance_schema, the rest left at the defaults."""
    with MariaDB(MariaDBOptions(innodb_backend="pwrite", log_bin=False, performance_schema=False)) as db:
        yield db


def assert_server_facts(db: MariaDB, checks: dict[str, dict[str, Any]]) -> None:
    assert checks["server"]["status"] == "ok" and checks["server"]["value"] == str(db.pid)
    version = re.match(r"\d+\.\d+\.\d+-MariaDB", db.version())
    assert version and checks["version"]["value"] == version[0]  # the binary's; SELECT VERSION() adds suffixes
    assert checks["datadir"]["value"] == db.datadir
    assert checks["option files"]["detail"] == db.config_file
    assert checks["error log"]["value"] == db.error_log
    aio = checks["InnoDB AIO"]
    assert aio["status"] == "ok", aio
    assert aio["value"] == db.innodb_backend_in_use()
    for name, value in server_values(db).items():
        assert checks[name]["value"] == value, (name, checks[name], value)


def test_io_uring_server(bpf_ready: None, uring_db: MariaDB) -> None:
    report, checks, code = doctor_json("-p", str(uring_db.pid))
    assert_well_formed(report, code)
    assert code == 0
    assert_server_facts(uring_db, checks)
    assert checks["InnoDB AIO"]["value"] == "io_uring"
    assert "'InnoDB: Using io_uring'" in checks["InnoDB AIO"]["detail"]
    assert "1 io_uring instance(s) and 0 libaio ring(s)" in checks["InnoDB AIO"]["detail"]
    assert checks["innodb_flush_method"]["detail"].startswith("fsync (configured)")
    assert checks["innodb_flush_log_at_trx_commit"]["detail"].startswith("2 (configured)")
    assert checks["sync_binlog"]["detail"].startswith("1 (configured)")
    assert checks["performance_schema"]["status"] == "ok"


def test_thread_id_names_its_server(uring_db: MariaDB) -> None:
    tids = sorted(int(t) for t in os.listdir(f"/proc/{uring_db.pid}/task") if int(t) != uring_db.pid)
    assert tids, "mariadbd runs threads"
    pid, check = doctor_server.find_target(tids[0])
    assert pid == uring_db.pid and check.value == str(uring_db.pid)


def test_io_uring_server_text(bpf_ready: None, uring_db: MariaDB) -> None:
    proc = run_doctor("-p", str(uring_db.pid))
    assert proc.returncode == 0 and proc.stderr == ""
    out = proc.stdout
    for title in ("Kernel and eBPF backend", "Build tools and SystemTap fallback", f"Server (pid {uring_db.pid})"):
        assert f"\n{title}\n" in f"\n{out}", title
    names = [*doctor_settings.SETTING_NOTES, "privileges", "BTF", "probe attach", "libbpf", "InnoDB AIO", "error log"]
    for name in names:
        assert re.search(rf"^(ok|WARN|FAIL|skip) +{re.escape(name)} ", out, re.M), name
    assert out.rstrip().endswith("eBPF backend: ready (--backend auto uses eBPF).")
    assert all(line == line.rstrip() and len(line) <= 120 for line in out.splitlines())


def test_simulated_aio_server_with_defaults(pwrite_db: MariaDB) -> None:
    _, checks, _ = doctor_json("-p", str(pwrite_db.pid))
    assert_server_facts(pwrite_db, checks)
    assert checks["InnoDB AIO"]["value"] == "pwrite"
    assert "innodb_use_native_aio=OFF" in checks["InnoDB AIO"]["detail"]
    assert "0 io_uring instance(s) and 0 libaio ring(s)" in checks["InnoDB AIO"]["detail"]
    # not in my.cnf: doctor's defaults of MariaDB 10.11 equal what the server runs with
    assert checks["innodb_flush_method"]["detail"].startswith("O_DIRECT (default)")
    assert checks["innodb_flush_log_at_trx_commit"]["detail"].startswith("1 (default)")
    assert checks["sync_binlog"]["detail"].startswith("0 (default)")
    assert checks["sync_binlog"]["detail"].endswith("(the binary log is off)")
    ps = checks["performance_schema"]
    assert ps["status"] == "warn" and ps["value"] == "OFF" and "mysqlio verify" in ps["fix"]


def test_server_seen_unprivileged(pwrite_db: MariaDB) -> None:
    """nobody cannot read the server's files: every server line says so, nothing breaks."""
    report, checks, code = doctor_json("-p", str(pwrite_db.pid), user=NOBODY)
    assert_well_formed(report, code)
    assert code == 1
    assert checks["server"]["status"] == "ok" and checks["server"]["value"] == str(pwrite_db.pid)
    for name in ("version", "datadir", "error log", "InnoDB AIO", *SETTINGS):
        assert checks[name]["status"] == "warn" and checks[name]["value"] is None, checks[name]
        assert "root" in checks[name]["fix"] or "log_error" in checks[name]["fix"], checks[name]
    assert checks["option files"]["detail"] == f"read: none; cannot read: {pwrite_db.config_file}"


# ---- check functions with crafted input ------------------------------------------------------

CAP_BPF_PERFMON = (1 << preflight.CAP_BPF) | (1 << preflight.CAP_PERFMON)


@pytest.mark.parametrize(
    ("caps", "euid", "status", "detail"),
    [
        (0, 65534, "fail", "uid 65534 without CAP_BPF + CAP_PERFMON (effective capabilities 0x0)"),
        (
            1 << preflight.CAP_BPF,
            1000,
            "fail",
            "uid 1000 without CAP_BPF + CAP_PERFMON (effective capabilities 0x8000000000)",
        ),
        (CAP_BPF_PERFMON, 1000, "ok", "uid 1000 with CAP_BPF and CAP_PERFMON"),
        (1 << preflight.CAP_SYS_ADMIN, 1000, "ok", "uid 1000 with CAP_SYS_ADMIN"),
        ((1 << 41) - 1, 0, "ok", "root"),
    ],
)
def test_check_privileges(caps: int, euid: int, status: str, detail: str) -> None:
    check = doctor_kernel.check_privileges(caps, euid)
    assert (check.status, check.detail, check.required) == (status, detail, True)
    assert bool(check.fix) == (status == "fail")


def test_check_kernel_is_informational() -> None:
    """The release is shown, never judged: features are probed (vendor kernels backport)."""
    for release in ("4.18.0-553.el8_10.x86_64", "5.10.0-28-amd64", "6.1.0-18-amd64"):
        assert doctor_kernel.check_kernel(release) == Check("kernel", "ok", f"Linux {release}", value=release)


FULL = KernelFeatures(True, True, True, 1, ("io_uring_submit_req", 0), task_pt_regs=True, rdonly_cast=True)
# as Debian 11's 5.10 answered the probes in the kernel matrix
DEBIAN_5_10 = KernelFeatures(False, False, True, None, ("io_uring_submit_sqe", 1), True)


def test_kernel_feature_checks_say_each_fallback() -> None:
    full = {c.name: c for c in doctor_features.kernel_feature_checks(FULL)}
    assert all(c.status == "ok" and c.value == "yes" and not c.required for c in full.values())
    assert full["io_uring latency"].detail.startswith("io_uring_submit_req:")
    old = {c.name: c for c in doctor_features.kernel_feature_checks(DEBIAN_5_10)}
    assert {n: c.status for n, c in old.items()} == {
        "task BTF": "warn",
        "task registers": "warn",
        "BTF casts": "warn",
        "BPF atomics": "warn",
        "BPF ring buffer": "ok",
        "io_uring counts": "warn",
        "io_uring latency": "ok",
    }
    assert "ring and user_data" in old["io_uring counts"].detail
    assert not any(c.required for c in old.values())
    none = {
        c.name: c
        for c in doctor_features.kernel_feature_checks(
            replace(DEBIAN_5_10, uring_complete_by_user_data=False, uring_submit=None, ringbuf=False)
        )
    }
    assert none["io_uring counts"].value == "no" and "NOT counted" in none["io_uring counts"].detail
    assert none["io_uring latency"].value == "no"
    assert "record" in none["BPF ring buffer"].detail and "stap" in none["BPF ring buffer"].fix
    failed = doctor_features.kernel_feature_checks(OSError(1, "Operation not permitted"))
    assert [c.status for c in failed] == ["fail"]
    assert doctor_kernel.check_kernel("5.11.0").status == "ok"


def test_check_btf_missing(tmp_path: Path) -> None:
    check = doctor_kernel.check_btf(str(tmp_path / "vmlinux"))
    assert check.status == "fail" and check.required and "CONFIG_DEBUG_INFO_BTF" in check.detail
    assert "--backend stap" in check.fix


@pytest.mark.parametrize(("text", "status"), [("0", "warn"), ("1", "ok"), ("2", "ok")])
def test_check_jit(tmp_path: Path, text: str, status: str) -> None:
    path = tmp_path / "bpf_jit_enable"
    path.write_text(text + "\n")
    check = doctor_kernel.check_jit(str(path))
    assert (check.status, check.value) == (status, text)
    assert ("net.core.bpf_jit_enable=1" in check.fix) == (status == "warn")
    assert doctor_kernel.check_jit(str(tmp_path / "absent")).status == "ok"


@pytest.mark.parametrize("text", ["0", "1", "2"])
def test_check_io_uring_sysctl(tmp_path: Path, text: str) -> None:
    """Even 2 (no io_uring for anyone) is a note: a server then does its I/O otherwise, traced."""
    path = tmp_path / "io_uring_disabled"
    path.write_text(text + "\n")
    check = doctor_kernel.check_io_uring_sysctl(str(path))
    assert (check.status, check.value) == ("ok", text)
    assert check.detail.startswith("no (") == (text == "2")


def test_btf_lookup_on_this_kernel() -> None:
    names = ["btf_trace_sys_enter", "btf_trace_io_uring_complete", "btf_trace_mysqlio_no_such_event"]
    assert doctor_kernel.btf_types_present(names) == {
        "btf_trace_sys_enter": True,
        "btf_trace_io_uring_complete": True,
        "btf_trace_mysqlio_no_such_event": False,
    }
    with pytest.raises(OSError):
        doctor_kernel.btf_types_present(names, "/nonexistent/vmlinux")


def test_check_tracepoints_names_what_is_missing() -> None:
    found = {"btf_trace_sys_enter": True, "btf_trace_sys_exit": False}
    check = doctor_kernel.check_tracepoints("syscall", doctor_kernel.SYSCALL_TRACEPOINTS, found, "newer kernel")
    assert check.status == "fail" and check.required and check.fix == "newer kernel"
    assert check.detail == "missing from the kernel's BTF: sys_exit (present: sys_enter)"
    failed = doctor_kernel.check_tracepoints("syscall", doctor_kernel.SYSCALL_TRACEPOINTS, OSError(2, "gone"), "x")
    assert failed.status == "fail" and "cannot read the kernel's BTF" in failed.detail


def test_check_libbpf() -> None:
    def raises() -> tuple[int, int] | None:
        raise OSError("libbpf.so.1: cannot open shared object file")

    assert doctor_kernel.check_libbpf(lambda: (1, 4)).value == "1.4"
    old = doctor_kernel.check_libbpf(lambda: (0, 5))
    assert old.status == "fail" and old.detail == "libbpf.so.1 is 0.5; mysqlio needs >= 0.6"
    older = doctor_kernel.check_libbpf(lambda: None)
    assert older.status == "fail" and "older than 0.6" in older.detail
    missing = doctor_kernel.check_libbpf(raises)
    assert missing.status == "fail" and "libbpf1" in missing.fix
    assert doctor_kernel.check_libbpf().value == libbpf_soname_version()


def test_check_probe_attach_outcomes() -> None:
    blocked = doctor_probe.check_probe_attach([Check("BTF", "fail", "missing", "x", required=True)])
    assert (blocked.status, blocked.detail) == ("skip", "not tried: BTF failed")
    assert doctor_probe.check_probe_attach([], lambda: (4096, 4096, 1, 12.0)).status == "ok"
    miscount = doctor_probe.check_probe_attach([], lambda: (4096, 4100, 1, 12.0))
    assert miscount.status == "fail" and "counted as 4100 bytes and 1 fsyncs" in miscount.detail

    def stale_object() -> tuple[int, int, int, float]:
        raise KeyError("lat_a")

    stale = doctor_probe.check_probe_attach([], stale_object)
    assert (stale.status, stale.detail, stale.fix) == (
        "fail",
        "KeyError: 'lat_a'",
        "rebuild the BPF object from this source tree: make setup",
    )


def test_check_bpf_object_missing(tmp_path: Path) -> None:
    check = doctor_probe.check_bpf_object(str(tmp_path / "mysqlio.bpf.o"))
    assert check.status == "fail" and "make setup" in check.fix


def test_build_tools_only_matter_without_the_object() -> None:
    def absent(name: str) -> str | None:
        return None

    assert doctor_tools.check_build_tool("clang", True, absent).status == "skip"
    missing = doctor_tools.check_build_tool("clang", False, absent)
    assert missing.status == "warn" and "apt-get install clang" in missing.fix
    clang = doctor_tools.check_build_tool("clang", True)
    assert clang.status == "ok" and clang.value and re.fullmatch(r"\d+\.\d+\.\d+", clang.value)


def test_check_stap() -> None:
    assert doctor_tools.check_stap(True, lambda: None).status == "ok"
    assert doctor_tools.check_stap(True, lambda: "no headers").status == "skip"
    alone = doctor_tools.check_stap(False, lambda: "install linux-headers")
    assert alone.status == "warn" and alone.fix == "install linux-headers"


LOG = b"""\
2024-05-01 10:00:00 0 [Note] Starting MariaDB 10.11.6-MariaDB source revision x as process 100
2024-05-01 10:00:00 0 [Note] InnoDB: Using io_uring
2024-05-01 10:00:09 0 [Note] /usr/sbin/mariadbd: Shutdown complete
2024-05-02 09:00:00 0 [Note] Starting MariaDB 10.11.6-MariaDB source revision x as process 2001
2024-05-02 09:00:00 0 [Note] InnoDB: Using Linux native AIO
2024-05-02 09:00:01 0 [Note] /usr/sbin/mariadbd: ready for connections.
2024-05-02 09:05:00 0 [Note] Starting MariaDB 10.11.6-MariaDB source revision x as process 2002
2024-05-02 09:05:00 0 [Note] InnoDB: Using io_uring
2024-05-02 09:05:00 0 [ERROR] InnoDB: Unable to lock ./ibdata1 error: 11
"""


def test_current_run_is_the_servers_own() -> None:
    run, how = doctor_error_log.current_run(LOG, 2001)
    assert how == "this run (process 2001)"
    assert doctor_error_log.aio_from_log(run) == ("aio", "InnoDB: Using Linux native AIO")
    # pid 200 is not pid 2001, and an unknown pid falls back to the last run
    run, how = doctor_error_log.current_run(LOG, 200)
    assert how.startswith("the last run") and doctor_error_log.aio_from_log(run)[0] == "io_uring"
    assert doctor_error_log.current_run(b"no start here\n", 1)[1].startswith("the whole log")


@pytest.mark.parametrize(
    ("line", "backend"),
    [
        (b"2022-11-21 18:44:03 0 [Note] InnoDB: Using liburing", "io_uring"),
        (b"2024-05-02 09:00:00 0 [Note] InnoDB: Using io_uring", "io_uring"),
        (b"2019-01-01 10:00:00 0 [Note] InnoDB: Using Linux native AIO", "aio"),
        (b"2023-03-22T18:12:46.814133Z 1 [Warning] [MY-012654] [InnoDB] Linux Native AIO disabled.", "pwrite"),
        (
            b"2022-06-01 0:00:00 0 [Warning] InnoDB: liburing disabled: falling back to innodb_use_native_aio=OFF",
            "pwrite",
        ),
        (b"2024-05-02 09:00:00 0 [Note] InnoDB: Completed initialization of buffer pool", None),
    ],
)
def test_aio_from_log_lines(line: bytes, backend: str | None) -> None:
    assert doctor_error_log.aio_from_log(b"x as process 1\n" + line + b"\n")[0] == backend


def test_kernel_evidence_parsers() -> None:
    maps = (
        "7f0000000000-7f0000001000 rw-s 00000000 00:10 5 /[aio] (deleted)\n"
        "7f0000002000-7f0000003000 rw-s 00000000 00:10 6 /[aio] (deleted)\n"
        "7f0000004000-7f0000005000 r-xp 00000000 fe:00 7 /usr/lib/x86_64-linux-gnu/libaio.so.1.0.2\n"
    )
    assert doctor_error_log.aio_rings(maps) == 2
    assert doctor_error_log.io_uring_instances(["anon_inode:[io_uring]", "anon_inode:[eventfd]", "/x/ibdata1"]) == 1
    assert KernelAioEvidence(1, 0).backend() == "io_uring"
    assert KernelAioEvidence(0, 3).backend() == "aio"
    assert KernelAioEvidence(0, 0).backend() == "pwrite"
    assert KernelAioEvidence(1, 1).backend() is None
    assert KernelAioEvidence(None, 0).backend() is None


def test_check_aio_backend_cross_checks() -> None:
    agree = doctor_error_log.check_aio_backend("io_uring", "InnoDB: Using io_uring", KernelAioEvidence(1, 0), None)
    assert (agree.status, agree.value) == ("ok", "io_uring")
    clash = doctor_error_log.check_aio_backend("io_uring", "InnoDB: Using io_uring", KernelAioEvidence(0, 2), None)
    assert clash.status == "warn" and "looks like aio" in clash.detail
    # MySQL 8 logs nothing at the default verbosity: the kernel's view decides
    mysql = doctor_error_log.check_aio_backend(None, None, KernelAioEvidence(0, 5), None, "no AIO line")
    assert (mysql.status, mysql.value) == ("ok", "aio")
    off = doctor_error_log.check_aio_backend(None, None, KernelAioEvidence(None, None), "OFF", "no readable error log")
    assert (off.status, off.value) == ("ok", "pwrite")
    unknown = doctor_error_log.check_aio_backend(
        None, None, KernelAioEvidence(None, None), None, "no readable error log"
    )
    assert unknown.status == "warn" and unknown.value is None and unknown.fix


@pytest.mark.parametrize(
    ("option", "version", "default"),
    [
        ("innodb_flush_method", "10.11.6-MariaDB", "O_DIRECT"),
        ("innodb_flush_method", "10.5.23-MariaDB", "fsync"),
        ("innodb_flush_method", "8.0.36", "fsync"),
        ("innodb_flush_method", "8.4.0", "O_DIRECT"),
        ("sync_binlog", "8.0.36", "1"),
        ("sync_binlog", "10.11.6-MariaDB", "0"),
        ("performance_schema", "8.0.36", "ON"),
        ("performance_schema", "11.4.2-MariaDB", "OFF"),
        ("innodb_flush_method", None, None),
    ],
)
def test_server_defaults(option: str, version: str | None, default: str | None) -> None:
    assert doctor_settings.server_default(option, version) == default


def test_check_setting() -> None:
    opts = ServerOptions({"innodb_use_native_aio": "0", "sync_binlog": "100"}, {"sync_binlog"}, [])
    assert doctor_settings.check_setting("innodb_use_native_aio", opts, "10.11.6-MariaDB").value == "OFF"
    assert doctor_settings.check_setting("sync_binlog", opts, None).detail.startswith("100 (configured)")
    assert doctor_settings.check_setting("innodb_flush_method", opts, None).detail.startswith(
        "not set: the default of this server version"
    )
    hidden = ServerOptions({"sync_binlog": "1"}, {"sync_binlog"}, ["/etc/mysql/my.cnf"])
    assert doctor_settings.check_setting("sync_binlog", hidden, None).value == "1"  # from the command line
    blind = doctor_settings.check_setting("innodb_flush_method", hidden, None)
    assert (blind.status, blind.detail) == ("warn", "unknown: cannot read /etc/mysql/my.cnf")


def test_find_target_without_a_server(sleeper: int) -> None:
    def none_running() -> int:
        raise UserError("no running mysqld or mariadbd found; give its pid with -p PID")

    def several() -> int:
        raise UserError("several servers are running, choose one with -p PID: 1 (a), 2 (b)")

    pid, skipped = doctor_server.find_target(None, none_running)
    assert pid is None and (skipped.status, skipped.required) == ("skip", False)
    assert doctor_server.server_checks(None, none_running) == [skipped]
    pid, check = doctor_server.find_target(None, several)
    assert pid is None and check.status == "warn" and "-p PID" in check.fix
    pid, check = doctor_server.find_target(None, lambda: sleeper)  # found, but not a server
    assert pid is None and check.status == "warn" and check.required is False


def test_exit_code_counts_required_failures_only() -> None:
    info = Check("BPF JIT", "warn", "off", "sysctl")
    assert doctor_check.exit_code([info, Check("x", "fail", "y", "z", required=False)]) == 0
    assert doctor_check.exit_code([info, Check("BTF", "fail", "missing", "fix", required=True)]) == 1
    assert doctor_check.exit_code([Check("probe attach", "skip", "not tried", required=True)]) == 0
    with pytest.raises(ValueError):
        Check("x", "bad", "y")


def test_render_text() -> None:
    checks = [
        Check("privileges", "fail", "uid 1000 without CAP_BPF", "run as root", required=True),
        Check("BPF JIT", "ok", "on", value="1"),
        Check("SystemTap", "skip", "not installed", section="tools"),
        Check("server", "ok", "mariadbd, pid 42", value="42", section="server"),
        Check("InnoDB AIO", "warn", "log says '[Note] InnoDB: [bold]x[/bold]'", "set log_error", section="server"),
    ]
    text = doctor_render.format_text(checks, width=80)
    lines = text.splitlines()
    assert lines[0] == "Kernel and eBPF backend"
    assert re.match(r"FAIL privileges +uid 1000 without CAP_BPF$", lines[1])
    assert re.match(r" +fix: run as root$", lines[2])
    assert "Build tools and SystemTap fallback" in lines and "Server (pid 42)" in lines
    assert re.search(r"^skip SystemTap +not installed$", text, re.M)
    # text from files is shown as is, never read as rich markup
    assert "log says '[Note] InnoDB: [bold]x[/bold]'" in text and "fix: set log_error" in text
    assert " ".join(text.split()).endswith(" " + doctor_render.verdict(checks))
    assert doctor_render.verdict(checks).startswith(
        "eBPF backend: not usable (privileges); no tracing backend can run here"
    )
    assert all(len(line) <= 80 for line in lines)
    for check in checks:
        assert check.name in text
