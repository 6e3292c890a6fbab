"""The tracing backends, eBPF (bpf_probe) and SystemTap (stap_probe): which can run here,
the one --backend chooses (auto prefers eBPF), and the `probe.Probe` of the chosen one.
The only module that knows both.
"""

from __future__ import annotations

import os
import platform
import shutil
import threading
from pathlib import Path

from . import lockdown, preflight
from .bpf_probe import BpfProbe
from .errors import UserError
from .probe import Probe
from .stap_modules import Prebuilt, prebuilt_module
from .stap_probe import StapProbe

BACKENDS = ("auto", "bpf", "stap")

# modules given with --stap-module, by mode (set by select_backend, used by open_probe)
_prebuilt: dict[str, Prebuilt] = {}


def stap_problem(release: str | None = None, prebuilt: bool = False, signed: bool = False) -> str | None:
    """Why the SystemTap backend cannot run on this machine (one line), or None. prebuilt: a
    module built elsewhere (--stap-module) runs with staprun alone: no stap, no headers;
    signed: that module carries a signature (the kernel then judges its key)."""
    release = release or platform.release()
    machine = platform.machine()
    if machine != "x86_64":
        return f"the SystemTap scripts support x86_64 only, this machine is {machine}"
    if not prebuilt and shutil.which("stap") is None:
        return (
            "the SystemTap backend needs stap, which is not installed "
            f"(RHEL/CentOS: yum install systemtap kernel-devel-{release}; "
            f"Debian/Ubuntu: apt-get install systemtap linux-headers-{release}; "
            "or run a module built elsewhere with 'mysqlio stap-build': --stap-module)"
        )
    if shutil.which("staprun") is None:
        return "the SystemTap backend needs staprun (package systemtap-runtime), which is not installed"
    if not os.path.exists("/proc/modules"):
        return "this kernel cannot load modules (no /proc/modules); SystemTap needs loadable kernel modules"
    try:
        disabled = Path("/proc/sys/kernel/modules_disabled").read_text().strip() == "1"
    except OSError:
        disabled = False
    if disabled:
        return "this kernel refuses new modules (kernel.modules_disabled=1); SystemTap needs to load one"
    # before the headers: with them, the module built would still be refused
    refused = None if signed else lockdown.unsigned_modules_refused(lockdown.read_lockdown())
    if refused:
        return (
            f"{refused}, and SystemTap's are unsigned: it cannot load them unless they are signed with a key "
            "the kernel trusts (enrolled with MOK; see docs/systemtap.md)"
        )
    if not prebuilt and not os.path.isdir(f"/lib/modules/{release}/build"):
        return (
            f"SystemTap needs the headers of the running kernel {release} (/lib/modules/{release}/build "
            f"is missing): install kernel-devel-{release} (RHEL/CentOS) or linux-headers-{release} (Debian/Ubuntu), "
            "or build the module on another host with 'mysqlio stap-build' and pass it with --stap-module"
        )
    if os.geteuid() != 0:
        return "the SystemTap backend needs root (it loads a kernel module): run with sudo"
    return None


def check_stap_environment() -> None:
    problem = stap_problem()
    if problem:
        raise UserError(problem)


def bpf_problem() -> str | None:
    try:
        preflight.check_bpf_environment()
    except UserError as exc:
        return str(exc)
    return None


def select_backend(requested: str, prebuilt: str | None = None, mode: str = "top") -> str:
    """The backend for --backend bpf|stap|auto ("bpf" or "stap"), checked; auto prefers eBPF.
    prebuilt (--stap-module DIR_OR_KO): the stap backend with that module for `mode`, run by
    staprun alone."""
    if prebuilt is not None:
        if requested == "bpf":
            raise UserError("--stap-module runs a SystemTap module: use it with --backend stap (or auto)")
        if requested not in ("stap", "auto"):
            raise UserError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
        module = prebuilt_module(prebuilt, mode)
        problem = stap_problem(prebuilt=True, signed=lockdown.module_signed(module.module))
        if problem:
            raise UserError(problem)
        _prebuilt[mode] = module
        return "stap"
    if requested == "bpf":
        preflight.check_bpf_environment()
        return "bpf"
    if requested == "stap":
        check_stap_environment()
        return "stap"
    if requested != "auto":
        raise UserError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    no_bpf = bpf_problem()
    if no_bpf is None:
        return "bpf"
    no_stap = stap_problem()
    if no_stap is None:
        return "stap"
    raise UserError(f"no tracing backend can run here: eBPF: {no_bpf}; SystemTap: {no_stap}")


# the page cache, writeback and devices (eBPF), on unless a command's --no-page-cache
_page_cache = [True]


def set_page_cache(on: bool) -> None:
    """Whether the probes opened from now on count the page cache (eBPF only)."""
    _page_cache[0] = on


def open_probe(
    backend: str,
    pid: int,
    record_ring_bytes: int = 0,
    stop: threading.Event | None = None,
    timed: bool = True,
    connections: bool = False,
) -> Probe:
    """The probe of a selected backend ("bpf" | "stap") for top (record_ring_bytes 0) or record;
    timed: requests timed from the start (else from the probe's start_timing(): top without
    --latency, where eBPF then runs no enter programs); connections: eBPF keys rows and
    events by the connection each thread served (--mysql; SystemTap does not)."""
    if backend == "stap":
        mode = "record" if record_ring_bytes else "top"
        prebuilt = _prebuilt.get(mode)
        return StapProbe.start(pid, mode, stop=stop, module=prebuilt.module if prebuilt is not None else None)
    return BpfProbe(
        pid, record_ring_bytes=record_ring_bytes, page_cache=_page_cache[0], timed=timed, connections=connections
    )
