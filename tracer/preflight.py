"""Checks run before loading probes, each failing with one actionable line."""

from __future__ import annotations

import os

from . import lockdown
from .errors import UserError

CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39
BTF_PATH = "/sys/kernel/btf/vmlinux"


def effective_caps() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def has_bpf_privileges(caps: int | None = None) -> bool:
    """root, or CAP_BPF + CAP_PERFMON (kernel >= 5.8), or CAP_SYS_ADMIN."""
    caps = effective_caps() if caps is None else caps
    if caps & (1 << CAP_SYS_ADMIN):
        return True
    return bool(caps & (1 << CAP_BPF)) and bool(caps & (1 << CAP_PERFMON))


def check_bpf_environment() -> None:
    if not has_bpf_privileges():
        raise UserError("tracing needs root (or CAP_BPF and CAP_PERFMON): run with sudo")
    if not os.path.exists(BTF_PATH):
        raise UserError(
            f"this kernel exposes no BTF ({BTF_PATH} is missing); the eBPF backend needs CONFIG_DEBUG_INFO_BTF"
        )
    # the probes read kernel memory with helpers that lockdown=confidentiality withholds:
    # said before the load, which would fail on the first of them
    if lockdown.read_lockdown().level == "confidentiality":
        raise UserError(f"{lockdown.BPF_REFUSED}; {lockdown.BPF_REFUSED_FIX}")
