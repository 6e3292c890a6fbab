"""`mysqlio doctor`: what works on this machine, what does not, and the fix for each.

Every check is a small function returning a `Check`; the pure ones take their
inputs (capabilities, a file's text, an error log) as arguments so the tests can
feed them crafted cases. `run_checks()` gathers them in sections:

- **ebpf**: the kernel and what the eBPF backend needs. Checks marked `required`
  decide the exit code (0: the eBPF backend works here, 1: it does not). The
  last one loads and attaches the real probes to doctor's own pid and counts a
  test write; the others are informational (a "warn" there never fails). As
  `top` would, doctor mounts tracefs where libbpf looks if nothing is mounted
  there, and its tracefs line says so.
- **deploy**: only in a container (or a pid namespace of its own): what a DaemonSet
  must grant (hostPID, capabilities, tracefs, BTF, runtime state), doctor_deploy.
- **tools**: clang / bpftool (only to build probes/) and SystemTap (the fallback).
- **server**: the target mysqld / mariadbd, read from /proc and its files only:
  doctor never connects to the server and never runs its binary.

The checks live by section: doctor_kernel (prerequisites), doctor_features (BPF
features and their fallbacks), doctor_lockdown (the kernel's lockdown level),
doctor_io_uring (io_uring's tracepoint, needed only where a server can use io_uring),
doctor_map_calls (SCHED_FIFO for map calls on a preemptible kernel),
doctor_probe (the BPF object and a real attach),
doctor_tools, doctor_server (with doctor_error_log and doctor_settings); the
verdict is doctor_check's, the text doctor_render's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from . import syscall_hook
from .doctor_check import Check, doctor_json, ebpf_ready, exit_code
from .doctor_deploy import deploy_checks
from .doctor_features import kernel_feature_checks, probe_kernel_features
from .doctor_io_uring import server_needs_io_uring
from .doctor_kernel import (
    check_btf,
    check_io_uring_sysctl,
    check_jit,
    check_kernel,
    check_libbpf,
    check_preemption,
    check_privileges,
    check_syscall_hook,
    faultable_syscall_tracepoints,
    preemption_model,
    syscall_hook_checks,
    tracepoint_checks,
)
from .doctor_lockdown import check_lockdown
from .doctor_map_calls import cgroup_rt_runtime, check_map_calls, fifo_refusal, rt_runtime_us
from .doctor_probe import check_bpf_object, check_probe_attach
from .doctor_render import print_text
from .doctor_server import server_checks
from .doctor_tools import check_build_tool, check_stap
from .lockdown import read_lockdown


def system_checks() -> list[Check]:
    privileges = check_privileges()
    locked = check_lockdown(read_lockdown())
    btf = check_btf()
    libbpf = check_libbpf()
    if btf.status == "ok" and libbpf.status == "ok":
        tracepoints = tracepoint_checks()
    else:
        why = f"not checked: {'BTF' if btf.status != 'ok' else 'libbpf'} failed"
        tracepoints = [Check(f"{what} tracepoints", "skip", why, required=True) for what in ("syscall", "io_uring")]
    bpf_object = check_bpf_object()
    features = (
        kernel_feature_checks(probe_kernel_features())
        if btf.status == "ok" and libbpf.status == "ok" and privileges.status == "ok"
        else [Check("BPF features", "skip", "not checked: needs root, BTF and libbpf")]
    )
    checks = [
        privileges,
        check_kernel(),
        locked,
        btf,
        check_jit(),
        libbpf,
        *tracepoints,
        *features,
        *syscall_hook_checks(),
        bpf_object,
    ]
    checks.append(check_probe_attach([privileges, locked, btf, libbpf, *tracepoints, bpf_object]))
    # the hook as the attach left it: a refusal there moved the probes to the raw hook
    hook = next(i for i, c in enumerate(checks) if c.name == "syscall hook")
    checks[hook] = check_syscall_hook(syscall_hook.choose(quiet=True))
    checks.append(check_io_uring_sysctl())
    model = preemption_model()
    checks.append(check_preemption(model, faultable_syscall_tracepoints()))
    checks.append(check_map_calls(model, fifo_refusal(), rt_runtime_us(), cgroup_rt_runtime()))
    ebpf = ebpf_ready(checks)
    built = bpf_object.status == "ok"
    checks += [check_build_tool("clang", built), check_build_tool("bpftool", built), check_stap(ebpf)]
    return checks


def run_checks(pid: int | None = None) -> list[Check]:
    return server_needs_io_uring([*system_checks(), *deploy_checks(), *server_checks(pid)])


def run_doctor(args: Any) -> int:
    checks = run_checks(args.pid)
    if args.json:
        sys.stdout.write(json.dumps(doctor_json(checks), indent=1) + "\n")
    else:
        print_text(checks)
    return exit_code(checks)
