"""The capabilities mysqlio needs short of full root, each with the work that needs it.

contrib/kubernetes/daemonset.yaml grants exactly these (tests/test_kubernetes.py checks
that the two agree) and doctor names the missing ones (doctor_deploy). CAP_SYS_ADMIN is
not among them: it stands in for CAP_BPF + CAP_PERFMON on kernels before 5.8, and would
only mount tracefs, which the DaemonSet mounts from the host instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import preflight


@dataclass(frozen=True)
class Needed:
    name: str  # as Kubernetes and capsh spell it, without CAP_
    number: int  # linux/capability.h
    why: str


NEEDED = (
    Needed("BPF", preflight.CAP_BPF, "load the probes and read their maps (preflight)"),
    Needed("PERFMON", preflight.CAP_PERFMON, "attach the probes to tracepoints and kprobes (preflight)"),
    Needed("SYS_PTRACE", 19, "read the server's /proc/PID/fd, maps and /proc/PID/root (target.check_readable)"),
    Needed("DAC_READ_SEARCH", 2, "read option files and runtime state only their owner may read (layout)"),
    Needed("SYS_NICE", 23, "run BPF map calls under SCHED_FIFO on a preemptible kernel (unpreempted)"),
    # libbpf >= 1.0 raises RLIMIT_MEMLOCK before loading where BPF memory is not
    # charged to the memory cgroup (kernels before 5.11, e.g. Debian 11's 5.10)
    Needed("SYS_RESOURCE", 24, "raise RLIMIT_MEMLOCK for the probes' maps on kernels before 5.11 (libbpf)"),
)


def missing(caps: int) -> list[Needed]:
    """The needed capabilities not in the effective set `caps`."""
    return [c for c in NEEDED if not caps & (1 << c.number)]
