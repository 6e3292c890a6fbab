"""A program's counters read in one bpf(BPF_OBJ_GET_INFO_BY_FD) call (top reads the
skipped runs of every program each second) agree with what the kernel prints in the
program's fdinfo: the offsets into struct bpf_prog_info are right on this kernel.

The programs run on every process's syscalls (the pid filter is inside them), so any
other process on the machine moves the counters between two reads: the fdinfo is read
between two calls and must lie between them (seen failing on exact equality when another
test ran beside it). A wrong offset reads another field: far outside."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench_server import bpf_stats_enabled

from mysqlio.libbpf import program_counters


@pytest.fixture
def bpf_stats() -> Iterator[None]:
    with bpf_stats_enabled():
        yield


def fdinfo(fd: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            fields[key] = int(value)
    return fields


def test_counters_match_the_fdinfo(bpf_ready: None, bpf_stats: None, tmp_path: Path) -> None:
    from mysqlio import bpf_probe

    fd = os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with bpf_probe.BpfProbe(os.getpid(), page_cache=False, timed=False) as probe:
            for _ in range(50):
                os.pwrite(fd, b"x", 0)
            ran = 0
            for name, prog_fd in probe._prog_fds.items():  # the programs it loaded
                before = program_counters(prog_fd)
                info = fdinfo(prog_fd)
                after = program_counters(prog_fd)
                assert before.run_cnt <= info["run_cnt"] <= after.run_cnt, name
                assert before.run_time_ns <= info["run_time_ns"] <= after.run_time_ns, name
                assert before.recursion_misses <= info.get("recursion_misses", 0) <= after.recursion_misses, name
                ran += before.run_cnt
    finally:
        os.close(fd)
    assert ran >= 50
