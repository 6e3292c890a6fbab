"""The syscall hook: per-syscall tracepoints when tracefs has them, raw sys_enter/sys_exit
otherwise; both count exactly, and only the per-syscall one spares the other syscalls."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_exact_iogen import assert_exact

from mysqlio import doctor, syscall_hook
from traced import bpf_fdinfo, read_json_line, run_iogen_traced, start_top, stop_top

BPF_PROG_TYPE_TRACEPOINT = 5
BPF_PROG_TYPE_TRACING = 26  # tp_btf
BPF_ENABLE_STATS = 32
SYS_BPF = {"x86_64": 321, "aarch64": 280}
BUSY_SYSCALLS = 200_000


def fake_tracefs(base: Path, leave_out: str | None = None) -> Path:
    for _, event in syscall_hook.attachments():
        if event != leave_out:
            (base / "events" / "syscalls" / event).mkdir(parents=True, exist_ok=True)
    return base


def test_choose_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(syscall_hook.HOOK_ENV, raising=False)
    full = fake_tracefs(tmp_path / "full")
    partial = fake_tracefs(tmp_path / "partial", leave_out="sys_exit_pwritev2")
    assert syscall_hook.choose_hook((str(full),)) == "tracepoints"
    assert syscall_hook.tracefs_events_dir((str(partial), str(full))) == str(full / "events" / "syscalls")
    # one missing event: the raw pair, which sees every syscall
    assert syscall_hook.choose_hook((str(partial),)) == "raw"
    assert syscall_hook.choose_hook((str(tmp_path / "none"),)) == "raw"
    monkeypatch.setenv(syscall_hook.HOOK_ENV, "raw")
    assert syscall_hook.choose_hook((str(full),)) == "raw"
    # every enter has its exit; no syscall is attached twice
    enters = [e for _, e in syscall_hook.attachments() if e.startswith("sys_enter_")]
    exits = [e for _, e in syscall_hook.attachments() if e.startswith("sys_exit_")]
    assert len(set(enters)) == len(enters) == len(exits) == len(syscall_hook.traced_syscalls())
    assert {e.removeprefix("sys_enter_") for e in enters} == {e.removeprefix("sys_exit_") for e in exits}


def test_doctor_names_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(syscall_hook.HOOK_ENV, raising=False)
    good = doctor.check_syscall_hook((str(fake_tracefs(tmp_path / "t")),))
    assert good.status == "ok" and good.value == "tracepoints" and "16 I/O syscalls" in good.detail
    bare = doctor.check_syscall_hook((str(tmp_path / "absent"),))
    assert bare.status == "warn" and bare.value == "raw" and "mount -t tracefs" in bare.fix
    assert not bare.required  # the raw pair works, at a cost to every syscall


def prog_fdinfo(pid: int) -> list[dict[str, str]]:
    """fdinfo of each BPF program fd the process holds."""
    return [info for info in bpf_fdinfo(pid) if "prog_type" in info]


@pytest.fixture
def bpf_run_stats() -> Iterator[None]:
    """Run-time statistics of every BPF program, for as long as the fd is held
    (BPF_ENABLE_STATS: switched off again when it closes, even if the test dies)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(4)  # union bpf_attr { __u32 type = BPF_STATS_RUN_TIME (0) }
    fd = libc.syscall(SYS_BPF[platform.machine()], BPF_ENABLE_STATS, attr, ctypes.sizeof(attr))
    if fd < 0:
        pytest.fail(f"BPF_ENABLE_STATS: {os.strerror(ctypes.get_errno())}")
    yield
    os.close(fd)


BUSY = f"""
import os, sys
sys.stdin.readline()
for _ in range({BUSY_SYSCALLS}):
    os.getppid()
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.bpf
@pytest.mark.parametrize("hook", ["tracepoints", "raw"])
def test_hook_programs_and_their_runs(
    bpf_ready: None, bpf_run_stats: None, hook: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """top loads the programs of the hook asked for; 200k getppid() calls of the
    traced process run the raw pair 400k times, and the per-syscall tracepoints
    (attached to I/O syscalls only) a small fraction of that."""
    monkeypatch.setenv(syscall_hook.HOOK_ENV, hook)
    busy = subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    top = start_top(busy.pid, 0.5)
    try:
        assert top.stdout is not None and busy.stdin is not None and busy.stdout is not None
        read_json_line(top.stdout, 30, "mysqlio top")  # attached
        progs = prog_fdinfo(top.pid)
        types = [int(p["prog_type"]) for p in progs]
        runs_before = sum(int(p.get("run_cnt", 0)) for p in progs)
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline().strip() == "done"
        runs = sum(int(p.get("run_cnt", 0)) for p in prog_fdinfo(top.pid)) - runs_before
        busy.stdin.write("end\n")
        busy.stdin.flush()
        busy.wait(timeout=30)
    finally:
        busy.kill()
        stop_top(top)
    if hook == "tracepoints":
        # enter programs for 1, 3 and 4 arguments and one exit; io_uring's two on tp_btf
        assert types.count(BPF_PROG_TYPE_TRACEPOINT) == 4 and types.count(BPF_PROG_TYPE_TRACING) == 2, types
        assert runs < BUSY_SYSCALLS // 4, runs
    else:
        assert types.count(BPF_PROG_TYPE_TRACEPOINT) == 0 and types.count(BPF_PROG_TYPE_TRACING) == 4, types
        assert runs >= 2 * BUSY_SYSCALLS, runs


@pytest.mark.bpf
def test_raw_hook_counts_exactly(bpf_ready: None, iogen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback hook gives the same exact per-file counts on every iogen path."""
    monkeypatch.setenv(syscall_hook.HOOK_ENV, "raw")
    run = run_iogen_traced(str(iogen), str(tmp_path), [])
    assert len(run.expected["files"]) >= 15
    assert_exact(run, tmp_path)
