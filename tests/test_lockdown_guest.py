"""Kernel lockdown and io_uring's refusal on a real kernel: doctor, the backend choice and
`top`'s refusals, in ONE guest boot on Debian 13's 6.12 (the lockdown LSM built in, level
none at boot), raised stage by stage by tools/lockdown_guest.py: as booted, then with
kernel.io_uring_disabled = 2, then lockdown=integrity, then confidentiality (never lowered).

Each claim of doctor's is held against the kernel's own answer in the same stage:
io_uring_setup(2) refused with EPERM once the sysctl is 2; an unsigned copy of the kernel's
own dummy.ko loaded at none and refused with EPERM at integrity, where the signed original
still loads; the eBPF probes, loaded past the preflight at confidentiality, refused by the
verifier. Fetched with headers, so SystemTap's checks pass until lockdown (they do not
compile anything). 167 s here with the boot, on 2 cores loaded by other guests (load 9-11);
the commands run in forked children of the guest script, sparing a 20-30 s interpreter start each.

Never skipped: without root, the BPF object, qemu or the registry, it fails.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import guest_lane
import pytest
from guest import first_kernel_report, guest_failure_text, run_in_guest
from kernels import KernelFetchError, ensure_kernel

from mysqlio import lockdown

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "build" / "lockdown"
ALIAS = "6.12"  # Debian 13: CONFIG_SECURITY_LOCKDOWN_LSM=y, "lockdown" in CONFIG_LSM, level none unless forced
GUEST_TIMEOUT_S = 900

pytestmark = pytest.mark.bpf


def checks_of(stage: dict[str, Any]) -> dict[str, dict[str, Any]]:
    report = stage["doctor"]["json"]
    assert report is not None, f"doctor printed no JSON:\n{stage['doctor']['stdout']}\n{stage['doctor']['stderr']}"
    return {c["name"]: c for c in report["checks"]}


def failed_required(stage: dict[str, Any]) -> set[str]:
    return {c["name"] for c in stage["doctor"]["json"]["checks"] if c["required"] and c["status"] == "fail"}


def assert_one_line_refusal(run: dict[str, Any], start: str) -> None:
    """The CLI refused with exit 2 and one line on stderr (no traceback), starting so."""
    lines = run["stderr"].strip().splitlines()
    assert run["returncode"] == 2 and len(lines) == 1, run
    assert lines[0].startswith(start), lines[0]


def assert_ready(stage: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """doctor: exit 0, --backend auto would use eBPF, the probes counted its test write exactly."""
    checks = checks_of(stage)
    report = stage["doctor"]["json"]
    assert stage["doctor"]["returncode"] == 0 and report["ebpf_ready"] and report["backend"] == "bpf", report
    assert stage["doctor"]["stderr"] == ""
    assert checks["probe attach"]["status"] == "ok" and "exactly" in checks["probe attach"]["detail"]
    assert stage["choices"]["auto"] == "bpf" and stage["choices"]["bpf"] == "bpf"
    return checks


def guest_run() -> dict[str, Any]:
    """Boot, raise the stages, keep the log: the guest script's result. Runs in
    tests/guest_lane.py's background lane from the start of the session."""
    try:
        kernel = ensure_kernel(ALIAS, headers=True)
    except KernelFetchError as e:
        pytest.fail(f"cannot fetch Debian's {ALIAS} kernel: {e}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{kernel.release}.json"
    out.unlink(missing_ok=True)
    res = run_in_guest(
        kernel,
        [".venv/bin/python", "tools/lockdown_guest.py", "--out", str(out)],
        timeout_s=GUEST_TIMEOUT_S,
        rwdirs=[RESULTS],
        cwd=REPO,
    )
    (RESULTS / f"{kernel.release}.log").write_text(res.output)
    print(f"lockdown guest on {kernel.release}: {res.seconds:.0f} s, exit {res.returncode}")
    assert res.returncode == 0 and out.exists(), guest_failure_text(res.output)
    report = first_kernel_report(res.vng_output)
    assert not report, f"{kernel.release}: the kernel reported a problem on its console:\n{report}"
    result = json.loads(out.read_text())
    assert result["kernel"] == kernel.release
    return result


def start_guests() -> None:
    """conftest's hook: the guest run, queued in the background lane."""
    guest_lane.submit("lockdown", guest_run)


@pytest.fixture(scope="module")
def lockdown_run(bpf_ready: None) -> dict[str, Any]:
    return guest_lane.result("lockdown", guest_run)


def test_no_lockdown(lockdown_run: dict[str, Any]) -> None:
    stage = lockdown_run["stages"]["none"]
    assert stage["io_uring_setup"] == 0 and stage["unsigned_module"] == 0  # the kernel allows both
    checks = assert_ready(stage)
    locked = checks["kernel lockdown"]
    assert (locked["status"], locked["value"]) == ("ok", "none")
    # where the guest has no securityfs mounted, doctor reads a private mount of it
    privately = "read from a private mount of it" in locked["detail"]
    assert privately is not lockdown_run["securityfs_mounted_at_boot"], locked
    assert checks["SystemTap"]["status"] == "ok", checks["SystemTap"]
    assert stage["choices"]["stap"] == "stap"


def test_io_uring_disabled(lockdown_run: dict[str, Any]) -> None:
    """A server cannot use io_uring: a note, eBPF ready, auto picks eBPF."""
    stage = lockdown_run["stages"]["io_uring_off"]
    assert stage["io_uring_setup"] == -errno.EPERM
    checks = assert_ready(stage)
    allowed = checks["io_uring allowed"]
    assert (allowed["status"], allowed["value"]) == ("ok", "2"), allowed
    assert allowed["detail"].startswith("no (kernel.io_uring_disabled = 2): MariaDB uses libaio")
    assert checks["io_uring tracepoints"]["status"] == "ok"
    flagged = [c for c in stage["doctor"]["json"]["checks"] if "uring" in c["name"] and c["status"] in ("warn", "fail")]
    assert not flagged, flagged


def test_integrity(lockdown_run: dict[str, Any]) -> None:
    """eBPF works; SystemTap's unsigned modules are refused: marked unusable, --backend stap refuses."""
    stage = lockdown_run["stages"]["integrity"]
    assert stage["lockdown"] == "none [integrity] confidentiality"
    assert stage["unsigned_module"] == -errno.EPERM and stage["signed_module"] == 0
    checks = assert_ready(stage)
    assert (checks["kernel lockdown"]["status"], checks["kernel lockdown"]["value"]) == ("ok", "integrity")
    refused = "kernel lockdown (integrity) refuses unsigned kernel modules"
    stap = checks["SystemTap"]
    assert stap["status"] == "skip" and stap["detail"].startswith(f"not usable ({refused}"), stap
    assert stage["choices"]["stap"].startswith(f"error: {refused}")
    assert_one_line_refusal(stage["top_stap"], f"mysqlio: {refused}")


def test_confidentiality(lockdown_run: dict[str, Any]) -> None:
    """Nothing can trace: doctor names lockdown alone, top exits with one line."""
    stage = lockdown_run["stages"]["confidentiality"]
    assert stage["lockdown"] == "none integrity [confidentiality]"
    # the kernel's own refusal: the probes' first program reading kernel memory
    assert stage["bpf_refusal"] != "loaded" and "probe_read" in stage["bpf_refusal"], stage["bpf_refusal"]
    checks = checks_of(stage)
    report = stage["doctor"]["json"]
    assert stage["doctor"]["returncode"] == 1 and not report["ebpf_ready"] and report["backend"] is None
    assert stage["doctor"]["stderr"] == ""
    assert failed_required(stage) == {"kernel lockdown"}
    locked = checks["kernel lockdown"]
    assert locked["detail"].startswith(lockdown.BPF_REFUSED) and locked["fix"] == lockdown.BPF_REFUSED_FIX
    assert (checks["probe attach"]["status"], checks["probe attach"]["detail"]) == (
        "skip",
        "not tried: kernel lockdown failed",
    )
    stap = checks["SystemTap"]
    assert (
        stap["status"] == "warn" and "kernel lockdown (confidentiality) refuses unsigned kernel modules" in stap["fix"]
    )
    nothing = (
        f"mysqlio: no tracing backend can run here: eBPF: {lockdown.BPF_REFUSED}; {lockdown.BPF_REFUSED_FIX}; "
        "SystemTap: kernel lockdown (confidentiality) refuses unsigned kernel modules"
    )
    assert stage["choices"]["auto"].startswith("error: " + nothing.removeprefix("mysqlio: "))
    assert_one_line_refusal(stage["top_auto"], nothing)
    assert stage["choices"]["bpf"] == f"error: {lockdown.BPF_REFUSED}; {lockdown.BPF_REFUSED_FIX}"
