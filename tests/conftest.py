"""Shared fixtures. BPF and MariaDB tests never skip: on a machine that cannot
run them they fail with the reason (CI sets MYSQLIO_REQUIRE_BPF=1 and runs as root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
IOGEN = REPO / "tools" / "iogen"
# every server root of tools/server_roots.py: MariaDB 10.5 and 11.8, Oracle MySQL 9.7
SERVER_ROOTS = ("bullseye", "trixie", "sid-mysql")
ROOTS_TIMEOUT_S = 600
# `make check`, the inner loop (lint, the unit tests and one BPF smoke in a few minutes),
# runs `-m "not slow"`. Slow: a test that loads BPF, needs a server root or iogen, compiles
# a SystemTap module (test_stap's `compiled`, about a minute), runs a guest, or is one of the
# unit tests measured over 2 s here (`pytest --durations`).
SLOW_FIXTURES = frozenset({"bpf_ready", "server_roots", "iogen", "compiled"})
SLOW_MODULES = frozenset(
    {
        "test_kernel_matrix",
        "test_lockdown_guest",
        "test_stap_live",
        "test_soak",
        "test_bench_smoke",
        "test_dist",
        "test_docker_podman",
        "test_startup_reads",
    }
)
SLOW_UNIT_TESTS = frozenset(
    {
        "tests/test_stap.py::test_hot_paths_lock_nothing_before_their_filters",  # 72 s
        "tests/test_bursts.py::test_detection_table",  # 43 s
        "tests/test_output.py::test_a_signal_during_a_blocked_write_cuts_no_line",  # 31 s
        "tests/test_fuzz_traces.py::test_mutated_real_trace",  # 16 s
        "tests/test_resolve_fds.py::test_a_reused_fd_number_never_names_another_inode",  # 10 s
        "tests/test_server_status.py::test_status_under_load",  # 9 s
        "tests/test_sandbox.py::test_backend_load_and_cleanup",  # 6 s each backend
        "tests/test_matrix_judge.py::test_a_hung_tracer_says_so_with_its_stacks",  # 4 s
        "tests/test_fuzz_traces.py::test_random_bytes",  # 4 s
    }
)


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


@pytest.fixture(scope="session")
def server_roots() -> dict[str, str]:
    """Every server root, built in parallel when the cache is empty (about 2 minutes here,
    each debootstrap mostly waiting on the network): name -> root directory."""
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, str(REPO / "tools" / "server_roots.py"), "--json", *SERVER_ROOTS],
        capture_output=True,
        text=True,
        timeout=ROOTS_TIMEOUT_S,
        check=False,
    )
    if res.returncode != 0:
        pytest.fail(f"tools/server_roots.py failed:\n{res.stderr}")
    print(f"\nserver roots ready in {time.monotonic() - started:.1f}s")
    return dict(json.loads(res.stdout))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests (SLOW_*), which `make check` leaves out."""
    for item in items:
        module = item.module.__name__ if isinstance(item, pytest.Function) and item.module is not None else ""
        if (
            SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or module in SLOW_MODULES
            or item.nodeid.split("[")[0] in SLOW_UNIT_TESTS
        ):
            item.add_marker(pytest.mark.slow)


def _params(session: pytest.Session, module: str, name: str) -> tuple[str, ...]:
    """The values of parameter `name` among the selected tests of `module`."""
    return tuple(
        sorted(
            {
                item.callspec.params[name]
                for item in session.items
                if item.module is not None
                and item.module.__name__ == module
                and hasattr(item, "callspec")
                and name in item.callspec.params
            }
        )
    )


def _module(session: pytest.Session, name: str) -> Any:
    return next((i.module for i in session.items if i.module is not None and i.module.__name__ == name), None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the emulated guests' runs now, in tests/guest_lane.py's background lane, in the
    order the tests ask for them (the kernel matrix, the lockdown guest, the SystemTap
    guests), and the SystemTap module builds in two more threads (about 10 min of compiles
    and root builds that would otherwise wait in test_stap_live's setup)."""
    if os.geteuid() != 0 or session.config.option.collectonly:
        return
    if matrix := _params(session, "test_kernel_matrix", "alias"):
        _module(session, "test_kernel_matrix").start_guests(matrix)
    if lockdown := _module(session, "test_lockdown_guest"):
        lockdown.start_guests()
    if stap := _params(session, "test_stap_live", "live"):
        _module(session, "test_stap_live").start_guests(stap)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The guests still queued are dropped (after a whole run there are none)."""
    import guest_lane

    guest_lane.cancel_pending()
