"""Doctor's kernel lockdown line: what the lockdown LSM's level leaves each backend."""

from __future__ import annotations

from . import lockdown
from .doctor_check import Check
from .lockdown import Lockdown

NAME = "kernel lockdown"


def check_lockdown(state: Lockdown) -> Check:
    """Required: at confidentiality the probes cannot load. (The SystemTap line says what
    integrity costs the fallback.)"""
    how = f" (securityfs is not mounted at {lockdown.SECURITYFS}: read from a private mount of it)"
    mounted = how if state.privately else ""
    if state.level is None:
        return Check(NAME, "skip", f"not known: {state.unknown}", required=True)
    if state.level == "confidentiality":
        return Check(NAME, "fail", lockdown.BPF_REFUSED + mounted, lockdown.BPF_REFUSED_FIX, True, state.level)
    if state.level == "integrity":
        detail = "integrity: BPF tracing works; unsigned kernel modules are refused (see SystemTap below)"
        return Check(NAME, "ok", detail + mounted, required=True, value=state.level)
    return Check(NAME, "ok", "none" + mounted, required=True, value=state.level)
