"""bpf() map calls that no ordinary task can preempt, where a preempted one blinds the probes.

While a task is inside a bpf() map call (lookup, update, delete, batch), the kernel holds its
CPU's bpf_prog_active (bpf_disable_instrumentation), and trace_call_bpf() skips every program
on a perf tracepoint or kprobe of that CPU: the per-syscall tracepoints' programs among them,
uncounted on 6.1 (measured; newer kernels may count them as recursion_misses). A call lasts
microseconds, but where the kernel itself can be preempted (PREEMPT_RT, full, lazy) the task
can be switched out mid-call, migration disabled, and then every task the CPU runs meanwhile
goes untraced. Measured on Debian 12's 6.1-rt under emulation and load (issue 57): the
tracers' drains were switched out inside their map calls (mostly batch lookup-and-deletes),
and the 68 of 8,880 pwrite64s top and record missed, with nothing counted lost, were exactly
those that ran while their CPU's bpf_prog_active was held; with this, none. The tp_btf programs (the raw
sys_enter/sys_exit hook, page cache, io_uring) have per-program recursion counters instead and
are not affected.

So on such a kernel each map call of this process runs under SCHED_FIFO (the lowest real-time
priority): no ordinary task can preempt it, only real-time ones (interrupt threads, which make
no syscalls); the thread's own policy is back as the call returns. Other processes' bpf() map
calls can still blind the probes this way.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

# "1" / "0": always / never (to measure what it changes); else by the kernel's preemption
ENV = "MYSQLIO_FIFO_MAP_CALLS"
# libbpf's wrappers of the bpf() commands that hold bpf_prog_active (get_next_key does not)
MAP_CALLS = (
    "bpf_map_lookup_elem",
    "bpf_map_update_elem",
    "bpf_map_delete_elem",
    "bpf_map_lookup_batch",
    "bpf_map_lookup_and_delete_batch",
)
# the models where a task can be switched out inside the kernel (doctor_kernel.preemption_model)
PREEMPTIBLE = ("full", "lazy", "rt")
ORDINARY = (os.SCHED_OTHER, os.SCHED_BATCH, os.SCHED_IDLE)

_state = threading.local()  # each thread's own policy: sched_setscheduler(0) is per thread
_off: list[str] = []  # why the calls stay preemptible, once known (e.g. no CAP_SYS_NICE)
_installed: set[int] = set()


def wanted(model: str | None, env: Mapping[str, str] = os.environ) -> bool:
    """Whether map calls should run unpreempted: forced by ENV, else on a preemptible
    kernel or one whose model cannot be read."""
    forced = env.get(ENV)
    if forced in ("0", "1"):
        return forced == "1"
    return model is None or model in PREEMPTIBLE


def unpreempted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, called under SCHED_FIFO priority 1 by a thread of an ordinary policy."""
    fifo, ordinary = os.sched_param(1), os.sched_param(0)

    def call(*args: Any) -> Any:
        policy = getattr(_state, "policy", None)
        if policy is None:
            policy = _state.policy = os.sched_getscheduler(0)
        if _off or policy not in ORDINARY:  # already real-time: nothing to do
            return fn(*args)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, fifo)
        except OSError as exc:
            _off.append(exc.strerror or str(exc))
            print(
                f"mysqlio: cannot run BPF map calls under SCHED_FIFO ({_off[0]}): on this preemptible kernel "
                "a call switched out midway hides the traced process's syscalls from the probes meanwhile",
                file=sys.stderr,
            )
            return fn(*args)
        try:
            return fn(*args)
        finally:
            os.sched_setscheduler(0, policy, ordinary)

    return call


def install() -> bool:
    """install_into the loaded libbpf, by this kernel's preemption model."""
    from .doctor_kernel import preemption_model
    from .libbpf import lib

    return install_into(lib(), preemption_model())


def install_into(lib: Any, model: str | None) -> bool:
    """Wrap libbpf's map calls (attributes of the loaded library, looked up at each call)
    when wanted(model); once a process. Returns whether they are wrapped."""
    if id(lib) in _installed:
        return True
    if not wanted(model):
        return False
    for name in MAP_CALLS:
        setattr(lib, name, unpreempted(getattr(lib, name)))
    _installed.add(id(lib))
    return True
