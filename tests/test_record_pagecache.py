"""The page cache through `mysqlio record` and `mysqlio report`, against ground truth on a
real block device (an ext4 on a loop device; tmpfs has no writeback):

- iogen's page-cache scenarios state per file the bytes it wrote, the page-cache bytes it
  dirtied, the bytes written back and what caused it (fsync, fdatasync, msync) and its msync
  requests; the report of the recorded trace must give exactly those, with no event lost;
- the report's device section (the recorder's per-batch device samples, summed) must give
  the loop device's own counters (/sys/block/loopN/stat) over the recording: bytes and
  requests written and read; iogen's written-back bytes are the server's share of the
  device's writes, the rest the filesystem's.

The window: the device is synced and quiet before the recorder attaches; iogen starts
once it has, and the recorder stops only after a sync and a quiet second, so every byte
the scenarios sent to the device is inside it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.loop_disk import DeviceStat, LoopDisk, device_stat, dirty_expire, loop_ext4
from mysqlio.devtools.traced import (
    COUNTERS,
    PAGE_CACHE_COUNTERS,
    end_iogen,
    read_json_line,
    report_json,
    start_iogen,
    start_record,
)
from mysqlio.trace import TraceReader

pytestmark = pytest.mark.bpf

SCENARIOS = ("pc_fsync", "pc_mmap", "pc_small")


@pytest.fixture
def disk(bpf_ready: None) -> Any:
    # the loop device reads and writes its image with O_DIRECT: the image's own page cache
    # stays out of the way
    with loop_ext4(64, direct_io=True) as d:
        yield d


def _sync(disk: LoopDisk) -> None:
    subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)


def _recorded(
    iogen: Path, disk: LoopDisk, trace: Path, scenarios: tuple[str, ...] = SCENARIOS, extra: tuple[str, ...] = ()
) -> tuple[dict[str, Any], DeviceStat]:
    """iogen's scenarios under `mysqlio record` (and its `extra` arguments): (iogen's JSON,
    the device's stat delta over the recording)."""
    _sync(disk)
    time.sleep(0.5)
    args = [a for s in scenarios for a in ("--scenario", s)]
    gen = start_iogen(str(iogen), str(disk.mount), args)
    rec = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        rec = start_record(gen.pid, str(trace), extra)  # returns once the probes are attached
        before = device_stat(disk.name)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 240, "iogen run")
        # what the scenarios left (the journal's commit) reaches the device inside the window
        _sync(disk)
        time.sleep(1.0)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, f"record exited {rec.returncode}: {err}"
        after = device_stat(disk.name)
    finally:
        if rec is not None and rec.poll() is None:
            rec.kill()
            rec.wait()
        end_iogen(gen)
    return expected, after - before


def test_record_page_cache_exact_and_device_agrees(iogen: Path, disk: LoopDisk, tmp_path: Path) -> None:
    trace = tmp_path / "pc.trace"  # not on the loop device: its writes are not the device's
    expected, device = _recorded(iogen, disk, trace)
    report = report_json(str(trace))
    assert report["lost_events"] == 0 and report["complete"]

    prefix = str(disk.mount) + "/"
    got = {f["path"]: f for f in report["files"] if f["path"].startswith(prefix)}
    want = {f["path"]: f for f in expected["files"]}
    assert sorted(got) == sorted(want), "files recorded differ from files written"
    assert {Path(p).name for p in want} == {f"{s}.dat" for s in SCENARIOS}
    for path, w in want.items():
        g = got[path]
        assert {c: g[c] for c in COUNTERS} == {c: w[c] for c in COUNTERS}, path
        assert {c: g[c] for c in PAGE_CACHE_COUNTERS} == {c: w[c] for c in PAGE_CACHE_COUNTERS}, path
        assert g["writeback_by"] == w["writeback_by"], path
        print(
            f"{Path(path).name}: dirtied {g['dirtied_bytes']} written back {g['writeback_bytes']} "
            f"by {g['writeback_by']} msync {g['msync_ops']} (iogen: {w['dirtied_bytes']} {w['writeback_bytes']} "
            f"{w['writeback_by']} {w['msync_ops']})"
        )
    # the page cache is the kernel's doing: no API of its own among the file's requests
    assert all("kernel" not in f["apis"] for f in got.values())

    # the loop device, as the recorder's samples saw it, against its own counters
    (loop,) = [d for d in report["devices"] if d["name"] == disk.name]
    print(
        f"{disk.name}: report {loop['write_bytes']} B in {loop['write_requests']} writes, "
        f"{loop['read_bytes']} B in {loop['read_requests']} reads, by owner {loop['write_by']}, "
        f"amplification {loop['write_amplification']}; /sys/block stat {device.bytes_written} B in "
        f"{device.writes} writes, {device.bytes_read} B in {device.reads} reads"
    )
    assert loop["write_bytes"] == device.sectors_written * 512 > 0
    assert loop["read_bytes"] == device.bytes_read
    assert loop["write_requests"] == device.writes > 0 and loop["read_requests"] == device.reads
    written_back = sum(f["writeback_bytes"] for f in want.values())
    assert sum(loop["write_by"].values()) == loop["write_bytes"]
    assert loop["write_by"]["server_files"] == written_back
    assert loop["write_by"]["server_direct"] == 0 and loop["write_by"]["other"] == 0
    assert loop["write_by"]["filesystem"] == loop["write_bytes"] - written_back > 0
    assert loop["write_amplification"] == round(loop["write_bytes"] / written_back, 3)

    # one sample per batch that saw the devices do something, in order, inside the trace
    reader = TraceReader(str(trace))
    list(reader.batches())
    times = [s["t"] for s in reader.devices]
    assert times and times == sorted(times) and report["device_samples"] == len(times)
    assert times[-1] <= report["duration_s"]


def test_record_names_the_kernels_writeback(iogen: Path, disk: LoopDisk, tmp_path: Path) -> None:
    """Dirty pages left alone are written back by the kernel's periodic flusher (dirty_expire
    shortened to 1 s for the test, restored after): tid 0 in the trace, "[kernel]" in the
    report by thread, the bytes still the file's and the cause the flusher's. (A sync(2) of
    the whole machine while iogen waits, by another test, would write them back first, with
    the cause "sync": tests sync their own filesystem only, `sync -f`.)"""
    trace = tmp_path / "flusher.trace"
    with dirty_expire(100, 50):
        expected, device = _recorded(iogen, disk, trace, ("pc_flusher",))
    (want,) = expected["files"]
    pages = 16 * 4096
    assert want["writeback_by"] == {"flusher_periodic": pages}
    by_file = report_json(str(trace))
    assert by_file["lost_events"] == 0
    (got,) = [f for f in by_file["files"] if f["path"] == want["path"]]
    counters = (*COUNTERS, *PAGE_CACHE_COUNTERS)
    assert {c: got[c] for c in counters} == {c: want[c] for c in counters}
    assert got["writeback_by"] == want["writeback_by"]
    by_thread = report_json(str(trace), "--group", "thread", "--match", str(disk.mount))
    threads = {t["name"]: t for t in by_thread["threads"]}
    assert sorted(threads) == ["[kernel]", "iogen"]
    kernel = threads["[kernel]"]
    assert kernel["tid"] == 0 and kernel["writeback_by"] == got["writeback_by"]
    assert kernel["write_ops"] == kernel["dirtied_bytes"] == kernel["sync_ops"] == 0 and kernel["apis"] == []
    assert threads["iogen"]["dirtied_bytes"] == pages and threads["iogen"]["writeback_bytes"] == 0
    (loop,) = [d for d in by_file["devices"] if d["name"] == disk.name]
    assert loop["write_bytes"] == device.bytes_written and loop["write_by"]["server_files"] == pages
