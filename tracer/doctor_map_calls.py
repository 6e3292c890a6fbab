"""Doctor's "map calls" line: on a preemptible kernel, whether this process may run libbpf's
map calls under SCHED_FIFO, as mysqlio.unpreempted does (a call switched out midway hides
the traced server's syscalls from the probes on that CPU meanwhile)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import unpreempted
from .doctor_check import Check

RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
CGROUP_ROOT = "/sys/fs/cgroup"
NAME = "map calls"


def fifo_refusal() -> str | None:
    """Why sched_setscheduler(SCHED_FIFO, 1) is refused to this thread (None: it is allowed,
    or the thread is real-time already); the thread's policy is back before this returns."""
    policy = os.sched_getscheduler(0)
    if policy not in unpreempted.ORDINARY:
        return None
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError as exc:
        return exc.strerror or str(exc)
    os.sched_setscheduler(0, policy, os.sched_param(0))
    return None


def rt_runtime_us(path: str = RT_RUNTIME) -> int | None:
    """kernel.sched_rt_runtime_us: real-time tasks' CPU time per period (-1: unlimited)."""
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def cgroup_rt_runtime(proc_cgroup: str = "/proc/self/cgroup", root: str = CGROUP_ROOT) -> tuple[str, int] | None:
    """This process's cpu cgroup's cpu.rt_runtime_us (RT group scheduling: a new group gets 0,
    and sched_setscheduler to a real-time policy is refused there, root or not): (file, value),
    None where the kernel has no such file. Looked for where cgroup v1's cpu controller or v2
    are usually mounted."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            mounts = [f"{root}/{controllers}", f"{root}/cpu", f"{root}/cpu,cpuacct"]
        elif controllers == "":
            mounts = [root, f"{root}/unified"]
        else:
            continue
        for mount in mounts:
            file = f"{mount}{path.rstrip('/')}/cpu.rt_runtime_us"
            budget = rt_runtime_us(file)
            if budget is not None:
                return file, budget
    return None


def check_map_calls(
    model: str | None,
    refusal: str | None,
    runtime_us: int | None,
    group: tuple[str, int] | None = None,
    env: Mapping[str, str] = os.environ,
) -> Check:
    """model: doctor_kernel.preemption_model(); refusal: fifo_refusal(); runtime_us:
    rt_runtime_us(); group: cgroup_rt_runtime()."""
    forced = env.get(unpreempted.ENV)
    if not unpreempted.wanted(model, env):
        if forced == "0" and model in unpreempted.PREEMPTIBLE:
            return Check(
                NAME,
                "warn",
                f"{model}: this kernel can switch the tracer out inside a bpf() map call, and "
                f"{unpreempted.ENV}=0 leaves them preemptible: the server's syscalls on that CPU go uncounted meanwhile",
                f"unset {unpreempted.ENV}",
                value="preemptible",
            )
        return Check(NAME, "ok", f"{model}: no task is switched out inside a bpf() map call", value="not needed")
    kernel = f"{model} (preemptible)" if model in unpreempted.PREEMPTIBLE else f"{model or 'unknown'}"
    why = (
        f"kernel {kernel}: a tracer switched out inside a bpf() map call would leave the probes skipped on "
        "its CPU meanwhile (the server's syscalls there uncounted), so mysqlio runs each map call under SCHED_FIFO"
    )
    if group is not None and group[1] == 0:
        return Check(
            NAME,
            "warn",
            f"{why}, but this process's cgroup gives real-time tasks no CPU time ({group[0]} = 0)"
            + (f": SCHED_FIFO refused ({refusal})" if refusal else ""),
            f"give the cgroup a real-time budget (e.g. echo 10000 > {group[0]}, its parents' first), "
            "or run mysqlio in one that has it",
            value="no rt budget",
        )
    if refusal is not None:
        return Check(
            NAME,
            "warn",
            f"{why}, which this process may not use ({refusal}): counts will miss requests under CPU contention",
            "run mysqlio as root with CAP_SYS_NICE (a container: --cap-add SYS_NICE), or raise RLIMIT_RTPRIO to 1 or more",
            value="refused",
        )
    if runtime_us == 0:
        return Check(
            NAME,
            "warn",
            f"{why}, but kernel.sched_rt_runtime_us = 0 gives real-time tasks no CPU time: each map call would stall",
            "sysctl kernel.sched_rt_runtime_us=950000 (the kernel's default)",
            value="no rt budget",
        )
    forced_note = f" ({unpreempted.ENV}=1)" if forced == "1" else ""
    return Check(NAME, "ok", f"{why} (priority 1; allowed here){forced_note}", value="fifo")
