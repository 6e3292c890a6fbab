"""doctor's checks of what a DaemonSet lacks, each provoked for real: doctor's checks run
in a pid namespace of their own (`unshare --pid`, as a pod without hostPID), with
capabilities dropped (`setpriv`), with tracefs, /sys/kernel/btf and /run hidden under
empty mounts (a pod that mounts none of them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mysqlio import capabilities, preflight
from mysqlio.container_identity import container_identity
from mysqlio.devtools.processes import find_binary
from mysqlio.doctor_deploy import (
    PROC_PID_INIT_INO,
    check_btf,
    check_host_pid,
    check_runtime_state,
    check_tracefs,
    deploy_checks,
)

# doctor's deploy checks, as JSON, in whatever namespace runs this
CHECKS = (
    "import json, dataclasses; from mysqlio.doctor_deploy import deploy_checks; "
    "print(json.dumps({c.name: dataclasses.asdict(c) for c in deploy_checks()}))"
)
HIDDEN = ("/sys/kernel/tracing", "/sys/kernel/debug", "/sys/kernel/btf", "/run")


def _checks(*wrap: str, script: str = "") -> dict[str, dict[str, str]]:
    """The deploy checks run by a child in its own pid (and mount) namespace."""
    unshare = [find_binary("unshare"), "--pid", "--fork", "--mount-proc"]
    inner = [*wrap, sys.executable, "-c", CHECKS]
    argv = [*unshare, "sh", "-c", f'{script} exec "$@"', "sh", *inner] if script else [*unshare, *inner]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


def test_the_section_only_in_a_container() -> None:
    """Shown in a pid namespace of our own or a container, not on the host."""
    ours = os.stat("/proc/self/ns/pid").st_ino
    on_host = ours == PROC_PID_INIT_INO and not container_identity("self").in_container
    assert (deploy_checks() == []) == on_host
    assert check_host_pid().status == ("ok" if ours == PROC_PID_INIT_INO else "fail")


def test_a_pod_without_host_pid_or_capabilities() -> None:
    dropped = ("SYS_PTRACE", "SYS_NICE")
    drop = ",".join(f"-{c.lower()}" for c in dropped)
    checks = _checks(find_binary("setpriv"), "--bounding-set", drop, "--inh-caps", drop)
    pid = checks["host pid namespace"]
    assert pid["status"] == "fail" and pid["fix"].startswith("in the DaemonSet's pod spec: hostPID: true"), pid
    # missing: what was dropped and what this machine's root lacks already (its CapEff)
    ours = preflight.effective_caps()
    expected = [c.name for c in capabilities.NEEDED if c.name in dropped or not ours & (1 << c.number)]
    caps = checks["capabilities"]
    assert caps["status"] == "fail" and caps["detail"].startswith(f"missing {', '.join(expected)}: "), caps
    assert (
        caps["fix"] == f"securityContext.capabilities.add: [{', '.join(expected)}] (docker/podman: --cap-add for each)"
    )
    # the mounts are ours, seen from its pid namespace: as here
    here = {"tracefs": check_tracefs(), "kernel BTF": check_btf(), "runtime state": check_runtime_state()}
    for name, check in here.items():
        assert (checks[name]["status"], checks[name]["detail"]) == (check.status, check.detail), checks[name]


def test_a_pod_without_the_host_mounts() -> None:
    script = "".join(f"mount -t tmpfs none {path} && " for path in HIDDEN)
    checks = _checks(script=script)
    assert checks["tracefs"]["status"] == "warn" and "/sys/kernel/tracing" in checks["tracefs"]["fix"]
    assert checks["kernel BTF"]["status"] == "fail" and "/sys/kernel/btf" in checks["kernel BTF"]["fix"]
    state = checks["runtime state"]
    assert state["status"] == "warn" and "/run/containerd" in state["fix"], state
    assert all(c["section"] == "deploy" and "\n" not in c["detail"] for c in checks.values())
