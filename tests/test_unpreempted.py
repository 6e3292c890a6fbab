"""BPF map calls under SCHED_FIFO on a preemptible kernel (tracer/unpreempted.py).

A bpf() map call holds its CPU's bpf_prog_active, and a task switched out inside one hides
every other task's syscalls there from the per-syscall tracepoints' programs (issue 57,
measured on Debian 12's 6.1-rt; the kernel matrix's 6.1-rt guest runs the real thing). Here:
when the wrapper is on, that the call runs under SCHED_FIFO, the thread's own policy is back
after it (also when it raises), and libbpf's real map calls keep their results and errno.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest

from mysqlio import libbpf, unpreempted


@pytest.mark.parametrize(
    ("model", "env", "want"),
    [
        ("rt", {}, True),
        ("lazy", {}, True),
        ("full", {}, True),
        (None, {}, True),  # not known: wrapped
        ("voluntary", {}, False),
        ("none", {}, False),
        ("voluntary", {unpreempted.ENV: "1"}, True),
        ("rt", {unpreempted.ENV: "0"}, False),
        ("rt", {unpreempted.ENV: "yes"}, True),  # not 0/1: by the model
    ],
)
def test_wanted(model: str | None, env: dict[str, str], want: bool) -> None:
    assert unpreempted.wanted(model, env) is want


def in_thread(fn: Callable[[], Any]) -> Any:
    """fn's result in a fresh thread: each thread's policy is its own (and cached per thread)."""
    out: list[Any] = []
    th = threading.Thread(target=lambda: out.append(fn()))
    th.start()
    th.join(30)
    assert out, "the thread did not finish"
    return out[0]


def test_fifo_during_the_call_only() -> None:
    assert os.geteuid() == 0, "SCHED_FIFO needs CAP_SYS_NICE: run as root (CI does)"
    wrapped = unpreempted.unpreempted(lambda x: (x, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))

    def run() -> tuple[Any, int, int]:
        before = os.sched_getscheduler(0)
        result = wrapped(7)
        return result, before, os.sched_getscheduler(0)

    (value, during, prio), before, after = in_thread(run)
    assert (value, during, prio) == (7, os.SCHED_FIFO, 1)
    assert before == after == os.SCHED_OTHER


def test_policy_back_when_the_call_raises() -> None:
    def boom() -> None:
        raise ValueError("inside")

    wrapped = unpreempted.unpreempted(boom)

    def run() -> tuple[str, int]:
        try:
            wrapped()
        except ValueError as exc:
            return str(exc), os.sched_getscheduler(0)
        return "no exception", -1

    assert in_thread(run) == ("inside", os.SCHED_OTHER)


def test_a_batch_thread_gets_its_own_policy_back() -> None:
    wrapped = unpreempted.unpreempted(lambda: os.sched_getscheduler(0))

    def run() -> tuple[int, int]:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        return wrapped(), os.sched_getscheduler(0)

    assert in_thread(run) == (os.SCHED_FIFO, os.SCHED_BATCH)


def test_real_map_calls_keep_results_and_errno(bpf_ready: None) -> None:
    lib = libbpf.lib()
    fd = lib.bpf_map_create(2, b"unpreempted", 4, 8, 4, None)  # BPF_MAP_TYPE_ARRAY of 4 u64
    assert fd >= 0, os.strerror(ctypes.get_errno())
    try:
        calls = types.SimpleNamespace(**{n: getattr(lib, n) for n in unpreempted.MAP_CALLS})
        assert unpreempted.install_into(calls, "rt")
        assert calls.bpf_map_lookup_elem is not lib.bpf_map_lookup_elem

        def run() -> tuple[int, int, int, int]:
            key, value, out = ctypes.c_uint32(2), ctypes.c_uint64(0xABCDEF), ctypes.c_uint64()
            assert calls.bpf_map_update_elem(fd, ctypes.byref(key), ctypes.byref(value), 0) == 0
            assert calls.bpf_map_lookup_elem(fd, ctypes.byref(key), ctypes.byref(out)) == 0
            missing = ctypes.c_uint32(9)  # past max_entries: ENOENT, read after the policy is back
            rc = calls.bpf_map_lookup_elem(fd, ctypes.byref(missing), ctypes.byref(ctypes.c_uint64()))
            return out.value, rc, ctypes.get_errno(), os.sched_getscheduler(0)

        assert in_thread(run) == (0xABCDEF, -errno.ENOENT, errno.ENOENT, os.SCHED_OTHER)
    finally:
        os.close(fd)
