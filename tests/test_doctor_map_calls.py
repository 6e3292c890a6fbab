"""Doctor's "map calls" line: on a preemptible kernel mysqlio runs libbpf's map calls under
SCHED_FIFO (mysqlio.unpreempted); doctor says so, and warns with the fix where the kernel
refuses it. The refusal is real here: CAP_SYS_NICE dropped with setpriv, the preemptible
model forced by MYSQLIO_FIFO_MAP_CALLS=1 (this host's kernel is not preemptible). The RT
kernel's own line is asserted on the kernel matrix's 6.1-rt guest (tests/test_kernel_matrix.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mysqlio import unpreempted
from mysqlio.doctor_map_calls import cgroup_rt_runtime, check_map_calls, fifo_refusal, rt_runtime_us

NO_SYS_NICE = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"]


def test_not_needed_where_the_kernel_cannot_preempt() -> None:
    for model in ("none", "voluntary"):
        check = check_map_calls(model, "Operation not permitted", 0, env={})
        assert (check.status, check.value) == ("ok", "not needed"), check


@pytest.mark.parametrize("model", unpreempted.PREEMPTIBLE)
def test_a_preemptible_kernel_says_so(model: str) -> None:
    ok = check_map_calls(model, None, 950000, env={})
    assert (ok.status, ok.value) == ("ok", "fifo") and f"kernel {model} (preemptible)" in ok.detail, ok
    assert "SCHED_FIFO" in ok.detail
    refused = check_map_calls(model, "Operation not permitted", 950000, env={})
    assert (refused.status, refused.required, refused.value) == ("warn", False, "refused"), refused
    assert "(Operation not permitted)" in refused.detail and "CAP_SYS_NICE" in refused.fix
    starved = check_map_calls(model, None, 0, env={})
    assert (starved.status, starved.required) == ("warn", False) and "sched_rt_runtime_us" in starved.fix, starved
    assert check_map_calls(model, None, -1, env={}).status == "ok"  # -1: no RT throttling
    off = check_map_calls(model, None, 950000, env={unpreempted.ENV: "0"})
    assert (off.status, off.value) == ("warn", "preemptible") and unpreempted.ENV in off.fix, off


def test_a_cgroup_without_budget_is_named() -> None:
    group = ("/sys/fs/cgroup/cpu/x/cpu.rt_runtime_us", 0)
    starved = check_map_calls("rt", "Operation not permitted", 950000, group, env={})
    assert (starved.status, starved.required, starved.value) == ("warn", False, "no rt budget"), starved
    assert f"({group[0]} = 0): SCHED_FIFO refused (Operation not permitted)" in starved.detail
    assert group[0] in starved.fix and "CAP_SYS_NICE" not in starved.fix
    assert check_map_calls("rt", None, 950000, (group[0], 10000), env={}).value == "fifo"


def test_the_cgroup_budget_is_found(tmp_path: Path) -> None:
    (tmp_path / "cpu" / "db").mkdir(parents=True)
    (tmp_path / "cpu" / "db" / "cpu.rt_runtime_us").write_text("0\n")
    (tmp_path / "cgroup").write_text("4:memory:/x\n1:cpu:/db\n0::/db\n")
    found = cgroup_rt_runtime(str(tmp_path / "cgroup"), str(tmp_path))
    assert found == (f"{tmp_path}/cpu/db/cpu.rt_runtime_us", 0)
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup").write_text("0::/\n")
    assert cgroup_rt_runtime(str(tmp_path / "v2" / "cgroup"), str(tmp_path / "v2")) is None


def test_refused_in_a_cgroup_without_rt_budget() -> None:
    """A child of this process's cpu cgroup (RT group scheduling gives it no real-time time):
    a process moved there is refused SCHED_FIFO, root as it is, and the line names the file."""
    own = cgroup_rt_runtime()
    assert own is not None, "no cpu.rt_runtime_us for this process: the kernel lacks RT group scheduling"
    child = Path(own[0]).parent / f"mysqlio-test-{os.getpid()}"
    child.mkdir()
    try:
        assert rt_runtime_us(str(child / "cpu.rt_runtime_us")) == 0
        code = (
            "import json; from mysqlio.doctor_map_calls import *; "
            "r, g = fifo_refusal(), cgroup_rt_runtime(); c = check_map_calls('rt', r, rt_runtime_us(), g, env={}); "
            "print(json.dumps([r, g, c.status, c.value, c.fix]))"
        )
        moved = f'echo $$ > {child}/cgroup.procs && exec "$0" -c "$1"'
        proc = subprocess.run(["sh", "-c", moved, sys.executable, code], capture_output=True, text=True, timeout=60)
    finally:
        child.rmdir()
    assert proc.returncode == 0, proc.stderr[-2000:]
    refusal, group, status, value, fix = json.loads(proc.stdout)
    assert refusal == "Operation not permitted"
    assert group == [str(child / "cpu.rt_runtime_us"), 0]
    assert (status, value) == ("warn", "no rt budget") and str(child) in fix


def test_an_unknown_model_is_treated_as_preemptible() -> None:
    assert check_map_calls(None, None, 950000, env={}).value == "fifo"


def test_the_budget_is_read(tmp_path: Path) -> None:
    (tmp_path / "rt").write_text("0\n")
    assert rt_runtime_us(str(tmp_path / "rt")) == 0
    assert rt_runtime_us(str(tmp_path / "none")) is None
    assert isinstance(rt_runtime_us(), int)  # this kernel has the sysctl


def test_root_may_use_sched_fifo_here() -> None:
    """As root (CAP_SYS_NICE) the attempt succeeds and leaves the thread's policy as it was."""
    assert os.geteuid() == 0, "run as root (CI does)"
    before = os.sched_getscheduler(0)
    assert fifo_refusal() is None
    assert os.sched_getscheduler(0) == before


@pytest.mark.bpf
def test_doctor_warns_without_cap_sys_nice(bpf_ready: None) -> None:
    """The whole doctor, CAP_SYS_NICE dropped, map calls forced under SCHED_FIFO: the line
    warns with the kernel's own error and the fix; the eBPF backend still runs (as top does,
    with its own warning), so doctor exits 0."""
    env = {**os.environ, unpreempted.ENV: "1"}
    proc = subprocess.run(
        [*NO_SYS_NICE, sys.executable, "-m", "mysqlio", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    result = json.loads(proc.stdout)
    line = next(c for c in result["checks"] if c["name"] == "map calls")
    assert (line["status"], line["value"]) == ("warn", "refused"), line
    assert "(Operation not permitted)" in line["detail"] and "CAP_SYS_NICE" in line["fix"], line
    assert (proc.returncode, result["exit_code"], result["ebpf_ready"]) == (0, 0, True), proc.stderr[-2000:]
    # nothing else failed: the probes loaded and counted the test write without CAP_SYS_NICE
    others = [c for c in result["checks"] if c["required"] and c["status"] == "fail" and c["name"] != "map calls"]
    assert not others, others
