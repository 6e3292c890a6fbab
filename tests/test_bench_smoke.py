"""The benchmark suite keeps working: one short pair of each scenario (numbers are not judged).

It runs in a private mount namespace: on a machine without tracefs, the tracefs mysqlio
and the benchmark mount for the per-syscall tracepoints (and bpftrace) stay there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_syscall_hook import in_private_ns

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]
REPO = Path(__file__).resolve().parent.parent


def test_bench_smoke(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    proc = subprocess.run(
        in_private_ns([sys.executable, str(REPO / "tools" / "bench.py"), "--smoke", "--out", str(out)]),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = out.read_text()
    for scenario in (
        "record @",
        "top @",
        "startup",
        "report",
        "in-kernel cost: top",
        "in-kernel cost: top-raw",
        "under strace",
        "under bpftrace",
        "under top-raw",
        "pwrite64 flat out (1 thread, tmpfs) under record-raw",
    ):
        assert scenario in table, f"{scenario!r} missing from the benchmark table"
