"""Doctor's view of what the kernel's BPF can do, probed, and what each fallback costs."""

from __future__ import annotations

import platform

from . import kernel_features
from .doctor_check import Check
from .errors import BpfError
from .kernel_features import KernelFeatures


def kernel_feature_checks(features: KernelFeatures | Exception) -> list[Check]:
    """What the kernel's BPF can do, probed, and the fallback where it cannot:
    none of these stops the eBPF backend; each says what a fallback costs."""
    if isinstance(features, Exception):
        return [Check("BPF features", "fail", f"cannot probe the kernel: {features}", "see the lines above")]

    def feature(name: str, have: bool, detail_ok: str, detail_missing: str, fix: str = "") -> Check:
        if have:
            return Check(name, "ok", detail_ok, value="yes")
        return Check(name, "warn", detail_missing, fix, value="fallback")

    # record's event slots (probes/mysqlio.bpf.c): x86-64 objects, programs with compare-and-swap
    event_slots_possible = features.atomics and platform.machine() == "x86_64"
    checks = [
        feature(
            "task BTF",
            features.task_btf,
            "bpf_get_current_task_btf: the fd table read with plain loads",
            "no bpf_get_current_task_btf (Linux 5.11): the fd table read with CO-RE probe reads instead",
        ),
        feature(
            "task registers",
            features.task_pt_regs,
            "bpf_task_pt_regs: syscall arguments read at exit; enter programs run only to time requests",
            "no bpf_task_pt_regs (Linux 5.15): every traced syscall also runs an enter program to keep its "
            "arguments, even when requests are not timed",
        ),
        feature(
            "BTF casts",
            features.rdonly_cast,
            "bpf_rdonly_cast: a request's file (inode, super block) read with plain loads",
            "no bpf_rdonly_cast (Linux 6.2): a request's file read with probe reads (a little slower; nothing lost)",
        ),
        feature(
            "BPF atomics",
            features.atomics,
            "compare-and-swap: latency maxima exact under concurrent updates",
            "no BPF compare-and-swap (Linux 5.12): programs built without it are loaded; a latency maximum can "
            "miss a larger value written at the same instant by another CPU",
        ),
        feature(
            "BPF ring buffer",
            features.ringbuf,
            "record streams events through a BPF ring buffer, or on x86-64 with BPF atomics its own event slots",
            "no BPF ring buffer (Linux 5.8): `mysqlio record` runs only with x86-64's event slots (BPF atomics)"
            if event_slots_possible
            else "no BPF ring buffer (Linux 5.8): `mysqlio record` cannot run here; top and exporter can",
            "" if event_slots_possible else "record with --backend stap, or a kernel with the BPF ring buffer",
        ),
    ]
    if features.uring_complete_req_arg is not None:
        checks.append(Check("io_uring counts", "ok", "io_uring_complete names the request", value="yes"))
    elif features.uring_complete_by_user_data:
        checks.append(
            Check(
                "io_uring counts",
                "warn",
                "io_uring_complete names no request (before Linux 5.15): completions matched to their submission "
                "by ring and user_data; not counted: a request in flight when tracing starts, and one refused "
                "while being prepared (e.g. EBADF), which never reaches the submission tracepoint",
                value="fallback",
            )
        )
    else:
        checks.append(
            Check(
                "io_uring counts",
                "warn",
                "no io_uring tracepoint names the request: io_uring requests are NOT counted on this kernel",
                "a kernel with io_uring tracepoints that carry the request (5.15+), or MariaDB with libaio "
                "(innodb_linux_aio=aio)",
                value="no",
            )
        )
    if features.uring_submit is not None:
        tracepoint, _ = features.uring_submit
        checks.append(
            Check("io_uring latency", "ok", f"{tracepoint}: io_uring requests are timed from submission", value="yes")
        )
    else:
        checks.append(
            Check(
                "io_uring latency",
                "warn",
                "no io_uring submission tracepoint with the request: io_uring requests are counted, not timed",
                "syscall and libaio latency work here",
                value="no",
            )
        )
    return checks


def probe_kernel_features() -> KernelFeatures | Exception:
    try:
        return kernel_features.probe()
    except (OSError, BpfError, ValueError) as exc:
        return exc
