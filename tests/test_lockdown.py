"""Kernel lockdown and io_uring's absence, as doctor and the backend choice read them: the
parts that take their inputs as arguments. On a real kernel, raised level by level, in
tests/test_lockdown_guest.py."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest

from mysqlio import doctor_kernel, lockdown, preflight
from mysqlio.doctor_check import Check, ebpf_ready
from mysqlio.doctor_io_uring import io_uring_unavailable, optional_io_uring, server_needs_io_uring
from mysqlio.doctor_lockdown import check_lockdown
from mysqlio.lockdown import Lockdown


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("[none] integrity confidentiality\n", "none"),
        ("none [integrity] confidentiality\n", "integrity"),
        ("none integrity [confidentiality]\n", "confidentiality"),
        ("none integrity confidentiality\n", None),
        ("[lockdown]\n", None),
    ],
)
def test_parse_level(text: str, level: str | None) -> None:
    assert lockdown.parse_level(text) == level


def _mounts(tmp_path: Path, directory: Path | None) -> str:
    path = tmp_path / "mounts"
    line = f"securityfs {directory} securityfs ro,nosuid,nodev,noexec 0 0\n" if directory else ""
    path.write_text("proc /proc proc rw 0 0\n" + line)
    return str(path)


def test_read_lockdown_privately_where_securityfs_is_not_mounted(tmp_path: Path) -> None:
    fs = tmp_path / "security"
    fs.mkdir()
    (fs / "lockdown").write_text("none [integrity] confidentiality\n")
    asked: list[str] = []

    def private(path: str) -> str:
        asked.append(path)
        return Path(path).read_text()

    state = lockdown.read_lockdown(str(fs / "lockdown"), private, _mounts(tmp_path, None))
    assert state == Lockdown("integrity", "", privately=True) and asked == [str(fs / "lockdown")]
    # mounted: read where it is
    state = lockdown.read_lockdown(str(fs / "lockdown"), private, _mounts(tmp_path, fs))
    assert state == Lockdown("integrity") and len(asked) == 1


def test_read_lockdown_says_why_not(tmp_path: Path) -> None:
    fs = tmp_path / "security"
    fs.mkdir()

    def refused(path: str) -> str:
        raise OSError(errno.EPERM, "Operation not permitted", path)

    state = lockdown.read_lockdown(str(fs / "lockdown"), refused, _mounts(tmp_path, None))
    assert state.level is None and state.unknown.endswith("and mounting it failed (needs root)")
    state = lockdown.read_lockdown(str(fs / "lockdown"), refused, _mounts(tmp_path, fs))
    assert state.level is None and "a kernel without the lockdown LSM" in state.unknown


def test_read_privately_leaves_nothing_mounted() -> None:
    """This kernel's level, read through a private mount: the same as a mount of our own
    gives, and afterwards securityfs is as mounted (or not) as before."""
    before = lockdown.securityfs_mounted()
    text = lockdown.read_privately(lockdown.LOCKDOWN_FILE)
    assert lockdown.securityfs_mounted() == before
    assert lockdown.parse_level(text) in lockdown.LEVELS
    # the same text through a mount made by mount(8) in a namespace of util-linux's unshare
    mounted = f"mountpoint -q {lockdown.SECURITYFS} || mount -t securityfs -o ro securityfs {lockdown.SECURITYFS}"
    shown = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{mounted} && cat {lockdown.LOCKDOWN_FILE}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == text


def test_module_signature(tmp_path: Path) -> None:
    signed, unsigned = tmp_path / "a.ko", tmp_path / "b.ko"
    signed.write_bytes(b"\x7fELF..." + b"\x00" * 12 + lockdown.MODULE_SIGNATURE)
    unsigned.write_bytes(b"\x7fELF...")
    assert lockdown.module_signed(signed) and not lockdown.module_signed(unsigned)
    assert not lockdown.module_signed(tmp_path / "absent.ko")


def test_unsigned_modules_refused(tmp_path: Path) -> None:
    enforce = tmp_path / "sig_enforce"
    enforce.write_text("N\n")
    assert lockdown.unsigned_modules_refused(Lockdown("none"), str(enforce)) is None
    assert lockdown.unsigned_modules_refused(Lockdown(None, "unknown"), str(enforce)) is None
    for level in ("integrity", "confidentiality"):
        said = lockdown.unsigned_modules_refused(Lockdown(level), str(enforce))
        assert said == f"kernel lockdown ({level}) refuses unsigned kernel modules"
    enforce.write_text("Y\n")
    assert "module.sig_enforce" in str(lockdown.unsigned_modules_refused(Lockdown("none"), str(enforce)))


def test_check_lockdown() -> None:
    none, integrity, confidentiality = (check_lockdown(Lockdown(level)) for level in lockdown.LEVELS)
    assert [c.status for c in (none, integrity, confidentiality)] == ["ok", "ok", "fail"]
    assert all(c.required for c in (none, integrity, confidentiality))
    assert "unsigned kernel modules are refused" in integrity.detail
    assert confidentiality.detail == lockdown.BPF_REFUSED and confidentiality.fix == lockdown.BPF_REFUSED_FIX
    unknown = check_lockdown(Lockdown(None, "securityfs is not mounted"))
    assert unknown.status == "skip" and ebpf_ready([unknown])
    privately = check_lockdown(Lockdown("none", privately=True))
    assert (
        privately.detail == "none (securityfs is not mounted at /sys/kernel/security: read from a private mount of it)"
    )


def missing_io_uring() -> Check:
    found = {"btf_trace_io_uring_complete": False}
    return doctor_kernel.check_tracepoints("io_uring", doctor_kernel.IO_URING_TRACEPOINTS, found, "a fix")


def test_io_uring_unavailable_on_this_kernel(tmp_path: Path) -> None:
    """This kernel has io_uring (its BTF's struct io_ring_ctx); the sysctl can still refuse it."""
    sysctl = tmp_path / "io_uring_disabled"
    for value, refused in (("0", False), ("1", False), ("2", True)):
        sysctl.write_text(value + "\n")
        assert (io_uring_unavailable(preflight.BTF_PATH, str(sysctl)) is not None) == refused
    assert io_uring_unavailable(preflight.BTF_PATH, str(tmp_path / "absent")) is None


def test_missing_io_uring_tracepoint_is_a_note() -> None:
    note = optional_io_uring(missing_io_uring(), "this kernel has no io_uring (no struct io_ring_ctx in its BTF)")
    assert (note.status, note.required, note.value) == ("ok", False, "not needed")
    assert note.detail.startswith("missing from the kernel's BTF: io_uring_complete (present: none); not needed")
    usable = optional_io_uring(missing_io_uring(), None)
    assert (usable.status, usable.required, usable.value) == ("warn", False, "missing")
    assert ebpf_ready([note, usable])


@pytest.mark.parametrize("uses", ["io_uring", "aio", None])
def test_missing_io_uring_tracepoint_fails_for_a_server_using_it(uses: str | None) -> None:
    note = optional_io_uring(missing_io_uring(), None)
    aio = Check("InnoDB AIO", "ok", "...", value=uses, section="server")
    checks = server_needs_io_uring([note, aio])
    judged = checks[0]
    assert ebpf_ready(checks) == (uses != "io_uring")
    if uses == "io_uring":
        assert judged.status == "fail" and judged.required
        assert judged.detail == (
            "missing from the kernel's BTF: io_uring_complete (present: none), and the server uses io_uring: "
            "its requests would not be counted"
        )
    else:
        assert judged == note
    # present: nothing to change, whatever the server uses
    present = Check("io_uring tracepoints", "ok", "io_uring_complete", required=True)
    assert server_needs_io_uring([present, aio])[0] == present
