"""Bad input and unusable environments: one clear line on stderr, non-zero exit, no traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mysqlio.bpf_probe import STATS_CELLS_ENV
from mysqlio.devtools.traced import assert_one_line_error, read_json_line, start_top, without_tracefs_notice

MYSQLIO = [sys.executable, "-m", "mysqlio"]


def run_cli(
    *args: str, user: str | None = None, timeout: float = 30, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """mysqlio with args (as `user`; with `env` added to this environment)."""
    cmd = [*MYSQLIO, *args]
    if user is not None:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to drop root"
        cmd = [setpriv, f"--reuid={user}", f"--regid={user}", "--clear-groups", "--inh-caps=-all", *cmd]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False, env={**os.environ, **(env or {})}
    )


def _free_pid() -> int:
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def test_nonexistent_pid() -> None:
    pid = _free_pid()
    assert_one_line_error(run_cli("top", "-p", str(pid), "-n", "1"), "no process", str(pid))


@pytest.mark.parametrize("bad", ["abc", "-5", "0"])
def test_malformed_pid(bad: str) -> None:
    assert_one_line_error(run_cli("top", "-p", bad), "pid")


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "nan", "100000"])
def test_bad_interval(bad: str) -> None:
    assert_one_line_error(run_cli("top", "-p", str(os.getpid()), "-i", bad), "interval")


def test_bad_count() -> None:
    assert_one_line_error(run_cli("top", "-p", str(os.getpid()), "-n", "x"), "count")


def test_unknown_command() -> None:
    assert_one_line_error(run_cli("frobnicate"), "frobnicate")


def test_not_root(tmp_path: Path) -> None:
    # a process the unprivileged user may see: ourselves
    proc = run_cli("top", "-p", str(os.getpid()), "-n", "1", user="65534")
    assert_one_line_error(proc, "root")


def test_missing_bpf_object(bpf_ready: None, tmp_path: Path) -> None:
    proc = run_cli(
        "top", "-p", str(os.getpid()), "-n", "1", env={"MYSQLIO_BPF_OBJECT": str(tmp_path / "nothing.bpf.o")}
    )
    assert_one_line_error(proc, "make setup")


@pytest.mark.bpf
def test_bad_stats_cells_setting(bpf_ready: None) -> None:
    """A wrong MYSQLIO_STATS_CELLS (the stats table's test knob) is refused in one line."""
    proc = run_cli("top", "-p", str(os.getpid()), "-n", "1", env={STATS_CELLS_ENV: "3"})
    assert_one_line_error(proc, f"{STATS_CELLS_ENV}=3: give a power of two")


@pytest.mark.bpf
def test_pid_exits_mid_trace(bpf_ready: None) -> None:
    """Traced process exits: the last interval is printed, then one line and exit 4."""
    victim = subprocess.Popen(["sleep", "1.5"])
    top = start_top(victim.pid, interval_s=0.3)
    assert top.stdout is not None
    read_json_line(top.stdout, 30, "mysqlio top")
    victim.wait()
    deadline = time.monotonic() + 20
    while top.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert top.poll() is not None, "top kept running after its target exited"
    stderr = top.stderr.read() if top.stderr else ""
    assert top.returncode == 4
    errors = [line for line in without_tracefs_notice(stderr).splitlines() if "tracing pid" not in line]
    assert errors == [f"mysqlio: process {victim.pid} exited; stopped tracing"]


@pytest.mark.bpf
def test_json_count_prints_exactly_n_objects(bpf_ready: None) -> None:
    proc = run_cli("top", "-p", str(os.getpid()), "--json", "-i", "0.2", "-n", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        obj = json.loads(line)
        assert set(obj) >= {"time", "interval_s", "pid", "lost_events", "files"}
        assert obj["pid"] == os.getpid()
        assert 0.1 < obj["interval_s"] < 1.0


def test_stap_backend_without_stap_is_one_line(tmp_path: Path) -> None:
    """`top --backend stap` where stap is not installed: one line saying what is missing."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = {**os.environ, "PATH": str(bindir)}
    proc = subprocess.run(
        [*MYSQLIO, "top", "--backend", "stap", "-p", str(os.getpid()), "-n", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert_one_line_error(proc, "stap")


def test_unreadable_server_root_is_one_line(bpf_ready: None) -> None:
    """Root without CAP_SYS_PTRACE (what CAP_BPF + CAP_PERFMON alone give) cannot read another
    user's /proc/PID/fd and /proc/PID/root: one line naming the capability, before any probe
    is loaded, never a trace with the files unnamed or a container's option files read from
    the host. With the capability the same command traces."""
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed"
    other = subprocess.Popen([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"])
    try:
        deadline = time.monotonic() + 5
        while "Uid:\t65534" not in Path(f"/proc/{other.pid}/status").read_text():
            assert time.monotonic() < deadline, "setpriv did not drop to uid 65534"
            time.sleep(0.01)
        top = [*MYSQLIO, "top", "-p", str(other.pid), "--batch", "-i", "1", "-n", "1"]
        # root's capabilities after exec are its bounding set's
        proc = subprocess.run([setpriv, "--bounding-set=-sys_ptrace", *top], capture_output=True, text=True, timeout=30)
        assert_one_line_error(proc, "CAP_SYS_PTRACE", f"/proc/{other.pid}/root")
        assert proc.returncode == 2
        proc = subprocess.run(top, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and f"pid {other.pid}" in proc.stdout, proc.stderr
    finally:
        other.kill()
        other.wait()
