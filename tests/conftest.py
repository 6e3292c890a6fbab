"""Shared fixtures. BPF and MariaDB tests never skip: on a machine that cannot
run them they fail with the reason (CI sets MYSQLIO_REQUIRE_BPF=1 and runs as root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IOGEN = REPO / "tools" / "iogen"


@pytest.fixture(scope="session")
def bpf_ready() -> None:
    """Fail (not skip) when this machine cannot load the probes."""
    from mysqlio import preflight
    from mysqlio.bpf_probe import bpf_object_path

    problems = []
    if not preflight.has_bpf_privileges():
        problems.append("not root / no CAP_BPF+CAP_PERFMON")
    if not os.path.exists(preflight.BTF_PATH):
        problems.append("kernel has no BTF")
    if not os.path.exists(bpf_object_path()):
        problems.append(f"{bpf_object_path()} not built (make setup)")
    if problems:
        pytest.fail("BPF tests cannot run here: " + "; ".join(problems))


@pytest.fixture(scope="session")
def iogen() -> Path:
    if not os.access(IOGEN, os.X_OK):
        pytest.fail(f"{IOGEN} is not built (make setup)")
    return IOGEN
