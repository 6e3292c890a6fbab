"""Doctor's checks of what a container running mysqlio lacks (contrib/kubernetes's
DaemonSet, or `docker run`): each a line with the DaemonSet field that fixes it.

Run only when doctor itself is in a container or in a pid namespace of its own; on the
host the kernel section says the same things without the DaemonSet's fixes.

- the host's pid namespace: the initial one has a fixed inode number (PROC_PID_INIT_INO);
  in another (hostPID false), the servers of the host and of other pods are not in /proc;
- the capabilities of mysqlio.capabilities.NEEDED;
- tracefs (the per-syscall tracepoints' ids) and /sys/kernel/btf (the probes' CO-RE);
- the runtime's state under /run (container_identity: the pod names of each server).
"""

from __future__ import annotations

import os

from . import capabilities, preflight, syscall_hook
from .container_identity import RUN, container_identity, namespace_inode
from .doctor_check import Check

PROC_PID_INIT_INO = 0xEFFFFFFC  # include/linux/proc_ns.h: the initial pid namespace's inode
# where the runtimes keep the state container_identity reads (containerd, runc / CRI-O, crun)
RUNTIME_STATE = ("containerd", "runc", "crun")
SECTION = "deploy"


def in_container() -> bool:
    """Doctor runs in a container or a pid namespace of its own."""
    return namespace_inode("self", "pid") != PROC_PID_INIT_INO or container_identity("self").in_container


def deploy_checks(run: str = RUN) -> list[Check]:
    """The checks, or none on the host."""
    if not in_container():
        return []
    return [
        check_host_pid(),
        check_capabilities(preflight.effective_caps()),
        check_tracefs(),
        check_btf(),
        check_runtime_state(run),
    ]


def check_host_pid(inode: int | None = None) -> Check:
    inode = namespace_inode("self", "pid") if inode is None else inode
    if inode == PROC_PID_INIT_INO:
        return Check("host pid namespace", "ok", "the host's: every server is in /proc", section=SECTION)
    return Check(
        "host pid namespace",
        "fail",
        f"not the host's (pid:[{inode}]): servers on the host and in other pods are not in /proc, none can be traced",
        "in the DaemonSet's pod spec: hostPID: true (docker/podman: --pid=host)",
        section=SECTION,
    )


def check_capabilities(caps: int) -> Check:
    lacking = capabilities.missing(caps)
    if not lacking:
        names = ", ".join(c.name for c in capabilities.NEEDED)
        return Check("capabilities", "ok", names, section=SECTION)
    names = ", ".join(c.name for c in lacking)
    return Check(
        "capabilities",
        "fail" if any(c.name in ("BPF", "PERFMON", "SYS_PTRACE") for c in lacking) else "warn",
        f"missing {names}: " + "; ".join(f"{c.name} to {c.why}" for c in lacking),
        f"securityContext.capabilities.add: [{names}] (docker/podman: --cap-add for each)",
        section=SECTION,
    )


def check_tracefs(dirs: tuple[str, ...] = syscall_hook.TRACEFS_DIRS) -> Check:
    found = next((d for d in dirs if os.path.isdir(os.path.join(d, "events"))), None)
    if found:
        return Check("tracefs", "ok", f"{found} (the host's, mounted in)", section=SECTION)
    return Check(
        "tracefs",
        "warn",
        f"not mounted here ({', '.join(dirs)}): the probes fall back to the raw syscall hook, which runs for every syscall",
        "mount the host's /sys/kernel/tracing: a hostPath volume, readOnly, at /sys/kernel/tracing",
        section=SECTION,
    )


def check_btf(path: str = preflight.BTF_PATH) -> Check:
    if os.path.exists(path):
        return Check("kernel BTF", "ok", path, section=SECTION)
    return Check(
        "kernel BTF",
        "fail",
        f"{path} is not here: the probes cannot be loaded",
        "mount the host's /sys/kernel/btf: a hostPath volume, readOnly, at /sys/kernel/btf",
        section=SECTION,
    )


def check_runtime_state(run: str = RUN) -> Check:
    dirs = [os.path.join(run, d) for d in RUNTIME_STATE]
    readable = [d for d in dirs if os.path.isdir(d) and os.access(d, os.R_OK | os.X_OK)]
    if readable:
        return Check("runtime state", "ok", ", ".join(readable), section=SECTION)
    return Check(
        "runtime state",
        "warn",
        f"none of {', '.join(dirs)} is readable: servers are labelled by container id, without pod names",
        "mount the host's /run/containerd (CRI-O: /run/runc) as hostPath volumes, readOnly, at the same paths",
        section=SECTION,
    )
