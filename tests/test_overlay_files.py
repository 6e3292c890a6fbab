"""A server whose files are on overlayfs (issue 58): one row per file in `top --json` and
in `record` + `report`, named as the server names it, with its page cache on it.

An ext4 on a loop device holds an overlay's lower, upper and work directories; iogen runs
in a mount namespace of its own where the overlay is mounted (`unshare --mount`, as a
container runtime does), and writes there: a lower file opened O_TRUNC for writing, so
copied up (its upper inode has another number than the overlay shows) and written through
the page cache then fsync'd (pc_existing), small writes and an fdatasync to a new file
(pc_small), O_DIRECT (odirect); and reads a file left in the lower layer (read_existing).
Its requests are counted on the overlay inode, its pages dirtied and written back on the
upper inode: each file must be one row, under the overlay path, with exactly iogen's bytes
and requests, and the page-cache bytes iogen expects, which the loop device's own counters
(/sys/block/loopN/stat) and /proc/vmstat must allow, as in tests/test_iogen_pagecache.py.
(iogen cannot check its pages with cachestat there: on the overlay file it reads the
overlay inode's, always empty.)
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.loop_disk import LoopDisk, device_stat, loop_ext4, vm_stat
from mysqlio.devtools.traced import (
    COUNTERS,
    PAGE_CACHE_COUNTERS,
    FileTotals,
    TopCollector,
    end_iogen,
    read_json_line,
    report_json,
    run_iogen_recorded,
    run_iogen_traced,
    start_iogen,
)

pytestmark = pytest.mark.bpf

PG = os.sysconf("SC_PAGESIZE")
SCENARIOS = ("pc_existing", "pc_small", "odirect", "read_existing")
ARGS = [a for s in SCENARIOS for a in ("--scenario", s)]
LOWER_BYTES = {"pc_existing.dat": 3 * PG, "read_existing.dat": 5 * PG + 123}


@dataclass(frozen=True)
class Overlay:
    disk: LoopDisk
    lower: Path
    upper: Path
    merged: Path  # the overlay's mount point, in iogen's namespace only
    iogen: Path  # a script: iogen in a new mount namespace, with the overlay mounted


@pytest.fixture
def overlay(bpf_ready: None, iogen: Path, tmp_path: Path) -> Iterator[Overlay]:
    with loop_ext4(64, direct_io=True) as disk:
        lower, upper, work = (disk.mount / d for d in ("lower", "upper", "work"))
        for d in (lower, upper, work):
            d.mkdir()
        for name, size in LOWER_BYTES.items():
            (lower / name).write_bytes(os.urandom(size))
        merged = tmp_path / "merged"
        merged.mkdir()
        options = f"lowerdir={lower},upperdir={upper},workdir={work}"
        mount = f"mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(str(merged))}"
        inner = f'{mount} && exec {shlex.quote(str(iogen))} "$@"'
        script = tmp_path / "iogen-in-overlay"
        # unshare execs (no --fork): iogen keeps the pid the test started
        script.write_text(f'#!/bin/sh\nexec unshare --mount --propagation private sh -c {shlex.quote(inner)} sh "$@"\n')
        script.chmod(0o755)
        subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
        yield Overlay(disk, lower, upper, merged, script)


def _check_layers(ov: Overlay) -> None:
    """What the test is about happened: the lower file written was copied up (a new upper
    inode, of another number than the lower one), the file read was not."""
    copied = ov.upper / "pc_existing.dat"
    assert stat.S_ISREG(copied.stat().st_mode)
    assert copied.stat().st_ino != (ov.lower / "pc_existing.dat").stat().st_ino
    assert not (ov.upper / "read_existing.dat").exists()


def _check_files(files: dict[str, dict[str, Any]], expected: dict[str, Any], ov: Overlay) -> None:
    want = {f["path"]: f for f in expected["files"]}
    assert {Path(p).name for p in want} == {f"{s}.dat" for s in SCENARIOS}
    assert all(p.startswith(f"{ov.merged}/") for p in want)
    assert sorted(files) == sorted(want), "one row per file, named by the overlay path"
    assert not any(g["deleted"] for g in files.values()), "the files are there, in iogen's namespace"
    for path, w in want.items():
        g = files[path]
        assert {c: g[c] for c in COUNTERS} == {c: w[c] for c in COUNTERS}, path
        if "dirtied_bytes" in w:
            assert {c: g[c] for c in PAGE_CACHE_COUNTERS} == {c: w[c] for c in PAGE_CACHE_COUNTERS}, path
            assert {k: v for k, v in g["writeback_by"].items() if v} == {
                k: v for k, v in w["writeback_by"].items() if v
            }, path
        else:  # O_DIRECT, reads: no page of theirs dirtied or written back
            assert g["dirtied_bytes"] == g["writeback_bytes"] == 0, path
    assert want[f"{ov.merged}/read_existing.dat"]["read_bytes"] == LOWER_BYTES["read_existing.dat"]
    for path, g in sorted(files.items()):
        print(
            f"{Path(path).name}: write {g['write_bytes']} B / {g['write_ops']}, read {g['read_bytes']} B / "
            f"{g['read_ops']}, syncs {g['sync_ops']}, dirtied {g['dirtied_bytes']}, written back "
            f"{g['writeback_bytes']} {g['writeback_by']}"
        )


def _check_device(disk: LoopDisk, before: Any, vm0: dict[str, int], expected: dict[str, Any]) -> None:
    """The kernel's own counters allow iogen's page-cache expectations (they also hold the
    journal, the copy-up's metadata and other I/O on the machine: at least)."""
    written = device_stat(disk.name) - before
    vm1 = vm_stat()
    pc = [f for f in expected["files"] if "dirtied_bytes" in f]
    wb = sum(f["writeback_bytes"] for f in pc)
    direct = sum(f["write_bytes"] for f in expected["files"] if Path(f["path"]).name == "odirect.dat")
    assert written.bytes_written >= wb + direct > 0
    assert vm1["nr_dirtied"] - vm0["nr_dirtied"] >= sum(f["dirtied_bytes"] for f in pc) // PG
    assert vm1["nr_written"] - vm0["nr_written"] >= wb // PG
    print(
        f"{disk.name} wrote {written.bytes_written} B (iogen: written back {wb}, O_DIRECT {direct}); vmstat "
        f"nr_dirtied +{vm1['nr_dirtied'] - vm0['nr_dirtied']}, nr_written +{vm1['nr_written'] - vm0['nr_written']}"
    )


def test_top_one_row_per_overlay_file(overlay: Overlay) -> None:
    before, vm0 = device_stat(overlay.disk.name), vm_stat()
    run = run_iogen_traced(str(overlay.iogen), str(overlay.merged), ARGS)
    _check_device(overlay.disk, before, vm0, run.expected)
    _check_layers(overlay)
    assert run.traced.lost_events == 0
    files = {
        p: {**c, "writeback_by": run.traced.writeback_by[p], "deleted": run.traced.deleted[p]}
        for p, c in run.traced.under(str(overlay.merged)).items()
    }
    _check_files(files, run.expected, overlay)
    # no other row holds page-cache bytes (an unnamed upper inode, "<dev 7:N inode M>")
    stray = [p for p, c in run.traced.totals.items() if not p.startswith(f"{overlay.merged}/") and c["dirtied_bytes"]]
    assert not stray, stray


def test_record_report_one_row_per_overlay_file(overlay: Overlay, tmp_path: Path) -> None:
    trace = tmp_path / "ovl.trace"  # not on the loop device
    before, vm0 = device_stat(overlay.disk.name), vm_stat()
    expected = run_iogen_recorded(str(overlay.iogen), str(overlay.merged), ARGS, str(trace))
    _check_device(overlay.disk, before, vm0, expected)
    _check_layers(overlay)
    report = report_json(str(trace))
    assert report["lost_events"] == 0 and report["complete"]
    files = {f["path"]: f for f in report["files"] if f["path"].startswith(f"{overlay.merged}/")}
    _check_files(files, expected, overlay)
    stray = [f["path"] for f in report["files"] if f["path"] not in files and f["dirtied_bytes"]]
    assert not stray, stray
    # the loop device's writes, by owner: the server's files' writeback is iogen's page-cache
    # bytes, its direct I/O its O_DIRECT bytes (all of their bios, each counted once)
    (loop,) = [d for d in report["devices"] if d["name"] == overlay.disk.name]
    assert loop["write_by"]["server_files"] == sum(f["writeback_bytes"] for f in files.values()) > 0
    assert loop["write_by"]["server_direct"] == files[f"{overlay.merged}/odirect.dat"]["write_bytes"]
    print(f"{overlay.disk.name} in the report: writes by owner {loop['write_by']}")


def test_top_written_back_after_close(overlay: Overlay) -> None:
    """A file written, closed, and only then written back (a sync of its filesystem by
    another process): in that interval its only row is the upper inode's, which still
    goes to the file's row, named, with every page dirtied written back once, as many
    bytes as the upper file's blocks on the disk."""
    gen = start_iogen(str(overlay.iogen), str(overlay.merged), ["--scenario", "write"])
    top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top = TopCollector(gen.pid, 0.3)
        top.wait_until(0)  # attached
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 60, "iogen run")
        time.sleep(0.7)  # its requests' intervals are over
        synced = time.time()
        subprocess.run(["sync", "-f", str(overlay.disk.mount)], check=True, timeout=60)
        top.wait_until(time.time() + 0.3)
    finally:
        if top is not None:
            assert top.stop() == 0, top.stderr()
        end_iogen(gen)
    (want,) = expected["files"]
    path = want["path"]
    totals = FileTotals()
    for obj in top.intervals:
        totals.add(obj)
    assert totals.lost_events == 0
    got = totals.totals[path]
    assert {c: got[c] for c in COUNTERS} == {c: want[c] for c in COUNTERS}
    on_disk = (overlay.upper / "write.dat").stat().st_blocks * 512
    assert got["dirtied_bytes"] == got["writeback_bytes"] == on_disk == -(-want["write_bytes"] // PG) * PG
    assert sum(totals.writeback_by[path].values()) == got["writeback_bytes"]
    assert not totals.deleted[path]
    after = [f for obj in top.between(synced, time.time() + 60) for f in obj["files"] if f["writeback_bytes"]]
    assert [f["path"] for f in after] == [path] and not any(f["write_ops"] for f in after), after
    stray = [p for p, c in totals.totals.items() if p != path and (c["dirtied_bytes"] or c["writeback_bytes"])]
    assert not stray, stray
    print(
        f"write.dat: dirtied {got['dirtied_bytes']}, written back {got['writeback_bytes']} after close "
        f"{totals.writeback_by[path]}; upper file's blocks {on_disk} B"
    )
