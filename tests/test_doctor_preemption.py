"""Doctor's preemption line: the scheduler's model read from debugfs, the boot line or the
kernel config (the kernel matrix records the same reading for each guest kernel)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from mysqlio.doctor_kernel import (
    SCHED_PREEMPT,
    check_preemption,
    faultable_syscall_tracepoints,
    kernel_configs,
    preemption_model,
)


def _model(
    tmp_path: Path, shown: str | None = None, cmdline: str = "ro quiet", config: str | None = None
) -> str | None:
    if shown is not None:
        (tmp_path / "preempt").write_text(shown)
    (tmp_path / "cmdline").write_text(cmdline)
    configs = []
    if config is not None:
        (tmp_path / "config.gz").write_bytes(gzip.compress(config.encode()))
        configs.append(str(tmp_path / "config.gz"))
    return preemption_model(str(tmp_path / "preempt"), str(tmp_path / "cmdline"), configs or [str(tmp_path / "none")])


def test_debugfs_shows_the_dynamic_choice(tmp_path: Path) -> None:
    # as Debian sid's 7.2 shows it (it offers only these two)
    assert _model(tmp_path, shown="full (lazy) \n", cmdline="preempt=full") == "lazy"
    assert _model(tmp_path, shown="none (voluntary) full lazy\n") == "voluntary"


def test_the_boot_line_then_the_config(tmp_path: Path) -> None:
    dynamic = "CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT is not set\n"
    assert _model(tmp_path, cmdline="ro preempt=full quiet", config=dynamic) == "full"
    assert _model(tmp_path, config=dynamic) == "voluntary"
    assert _model(tmp_path, config="CONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPTION=y\n") == "lazy"
    assert _model(tmp_path, config="CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n") == "rt"
    assert _model(tmp_path, config="CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPTION=y\n") == "none"
    assert _model(tmp_path) is None


@pytest.mark.parametrize(("model", "status"), [("none", "ok"), ("voluntary", "ok"), ("lazy", "warn"), ("full", "warn")])
def test_the_verdict(model: str, status: str) -> None:
    check = check_preemption(model)
    assert check.status == status
    if status == "warn":
        assert "lost event" in check.detail and "docs/compatibility.md" in (check.fix or "")
        assert ("seen on Debian sid's 7.2" in check.detail) == (model == "lazy")
    assert check_preemption(None).status == "skip"


def test_this_kernel_is_read() -> None:
    """The real files of this machine give an answer where any of them is readable."""
    try:
        booted = "preempt=" in Path("/proc/cmdline").read_text()
    except OSError:
        booted = False
    readable = booted or any(os.access(p, os.R_OK) for p in (SCHED_PREEMPT, *kernel_configs()))
    assert (preemption_model() is not None) == readable


def test_an_rt_kernel_says_so_in_its_version(tmp_path: Path) -> None:
    """Debian's -rt kernels have no PREEMPT_DYNAMIC, and their config is not where a guest of
    the kernel matrix looks: the kernel's version names PREEMPT_RT."""
    none = str(tmp_path / "none")
    rt = "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)"
    assert preemption_model(none, none, [none], version=rt) == "rt"
    assert preemption_model(none, none, [none], version="#1 SMP PREEMPT_DYNAMIC Debian 6.1.176-1") is None


def test_preemptible_programs_need_faultable_tracepoints(tmp_path: Path) -> None:
    """Debian's 6.1-rt is rt, but its syscall tracepoints run their programs with preemption
    off (no skipped runs there); sid's 7.2 (faultable, lazy) can stop a task inside one."""
    assert check_preemption("rt", faultable=False).status == "ok"
    assert check_preemption("lazy", faultable=True).status == "warn"
    assert faultable_syscall_tracepoints(str(tmp_path / "no-btf")) is None
    # this machine's kernel (upstream's layout): faultable from 6.13
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    assert faultable_syscall_tracepoints() is ((major, minor) >= (6, 13))
