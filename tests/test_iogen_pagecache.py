"""iogen's page-cache scenarios (pc_*), without the tracer: each runs on a new ext4 on a
loop device, and its JSON must state exactly the expectations below; the kernel's own
counters must agree: the device wrote at least the expected writeback bytes
(/sys/block/loopN/stat; the journal and metadata add more) and /proc/vmstat's global
nr_dirtied and nr_written grew by at least the expected pages (other I/O on the machine
and the filesystem's metadata add more). Needs root: without it the test is skipped, or
fails when MYSQLIO_REQUIRE_BPF=1.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.loop_disk import device_stat, dirty_expire, loop_ext4, vm_stat

PG = os.sysconf("SC_PAGESIZE")


def _file(write_pages: int, dirtied_pages: int, by_pages: dict[str, int], **ops: int) -> dict[str, Any]:
    counts = {"fsync_ops": 0, "fdatasync_ops": 0, "sync_file_range_ops": 0, "msync_ops": 0, **ops}
    return {
        "deleted": False,
        "write_bytes": write_pages * PG,
        "write_ops": write_pages,
        "read_bytes": 0,
        "read_ops": 0,
        **counts,
        "sync_ops": sum(counts.values()),
        "errors": 0,
        "dirtied_bytes": dirtied_pages * PG,
        "writeback_bytes": sum(by_pages.values()) * PG,
        "writeback_by": {cause: pages * PG for cause, pages in by_pages.items()},
    }


EXPECTED: dict[str, dict[str, Any]] = {
    "pc_fsync": _file(16, 16, {"fsync": 16}, fsync_ops=1),
    "pc_small": {
        **_file(0, 1, {"fdatasync": 1}, fdatasync_ops=1),
        "write_bytes": 1000,  # 10 writes of 100 bytes into the first page
        "write_ops": 10,
    },
    "pc_sfr": _file(8, 8, {"sync_file_range": 8}, sync_file_range_ops=1),
    "pc_mmap": _file(64, 64 + 32, {"fsync": 64, "msync": 32}, fsync_ops=1, msync_ops=1),
    "pc_flusher": _file(16, 16, {"flusher_periodic": 16}),
}


@pytest.fixture(scope="module")
def root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("MYSQLIO_REQUIRE_BPF") == "1":
            pytest.fail("iogen page-cache tests need root (loop device, mount, /proc/sys/vm)")
        pytest.skip("needs root (loop device, mount, /proc/sys/vm)")


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_pagecache_scenario(root: None, iogen: Path, scenario: str) -> None:
    want = EXPECTED[scenario]
    # direct I/O to the image: its own page cache would count every page twice in vmstat
    flusher = dirty_expire(100, 50) if scenario == "pc_flusher" else contextlib.nullcontext()
    with loop_ext4(64, direct_io=True) as disk, flusher:
        subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
        disk0, vm0 = device_stat(disk.name), vm_stat()
        proc = subprocess.run(
            [str(iogen), "--dir", str(disk.mount), "--scenario", scenario],
            capture_output=True,
            text=True,
            timeout=180,
        )
        disk1, vm1 = device_stat(disk.name), vm_stat()
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout.splitlines()[-1])["files"]
    assert [f["path"] for f in files] == [str(disk.mount / f"{scenario}.dat")]
    got = {k: v for k, v in files[0].items() if k != "path"}
    assert got == want

    written = (disk1 - disk0).bytes_written
    dirtied = vm1["nr_dirtied"] - vm0["nr_dirtied"]
    flushed = vm1["nr_written"] - vm0["nr_written"]
    print(
        f"{scenario}: {disk.name} wrote {written} bytes (expected writeback {want['writeback_bytes']}); "
        f"vmstat nr_dirtied +{dirtied}, nr_written +{flushed} "
        f"(expected {want['dirtied_bytes'] // PG}, {want['writeback_bytes'] // PG} pages)"
    )
    assert written >= want["writeback_bytes"]
    assert dirtied >= want["dirtied_bytes"] // PG
    assert flushed >= want["writeback_bytes"] // PG
