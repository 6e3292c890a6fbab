"""Reads from the disk, per file (issue 61), traced by `mysqlio top --json` against ground
truth on a real block device (an ext4 on a loop device; never tmpfs, which has no disk):

iogen's coldread scenario writes and fsyncs a file, drops its pages, reads it whole cold
(buffered, sequential) and again warm; reads a second file with O_DIRECT (pread, then libaio,
then io_uring); reads a third one, dropped too, a page at a time at scattered offsets; and
reads with O_DIRECT (pread, then libaio one iocb a call) a preallocated file (fallocate:
unwritten extents) with a written range and a hole, of which only the written range comes
from the disk, once per read: the zeros are read from no disk.
top must give per file exactly the bytes read from the device for it (the cold read: the
file's size; the warm one: nothing; O_DIRECT: the bytes of its reads' bios, also counted as
direct; the scattered reads: the pages the file has cached after them, which the readahead
decides and iogen measures), the readahead's part no more than that, the page-cache hits
(mysqlio.cache_hits: the warm read's bytes; none for O_DIRECT), and the process's disk reads
(its files' sums) must equal the kernel's own /proc/PID/io read_bytes over iogen's reads.
The same through `mysqlio record` and `mysqlio report`. With `--no-page-cache` (top, and
record + report) no hit is derived (null), the rest stays exact, but an O_DIRECT read
counts what it returned (no bio program), the preallocated file's zeros included.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_pagecache import _traced_window
from test_record_pagecache import _recorded

from mysqlio import kernel_features
from mysqlio.cache_hits import hit_bytes
from mysqlio.devtools.loop_disk import LoopDisk, loop_ext4
from mysqlio.devtools.traced import (
    COUNTERS,
    FileTotals,
    assert_exact,
    end_iogen,
    read_json_line,
    report_json,
    start_iogen,
    start_top,
)
from mysqlio.report.build import build_report
from mysqlio.report.text import render_rows
from mysqlio.trace import TraceReader
from mysqlio.units import human_bytes


@pytest.fixture
def disk(bpf_ready: None) -> Any:
    # direct I/O to the image: its own page cache stays out; and the loop device's reads
    # of the image carry the upper file's pages again, which must not count twice
    with loop_ext4(64, direct_io=True) as d:
        yield d


def _device_read_by(intervals: list[dict[str, Any]], name: str) -> dict[str, int]:
    by: dict[str, int] = {}
    for obj in intervals:
        for d in obj["devices"]:
            if d["name"] == name:
                for owner, n in d["read_by"].items():
                    by[owner] = by.get(owner, 0) + n
    return by


def _thread_disk_reads(intervals: list[dict[str, Any]], path: str, tid: int) -> int:
    return sum(
        t["disk_read_bytes"]
        for obj in intervals
        for f in obj["files"]
        if f["path"] == path
        for t in f["threads"]
        if t["tid"] == tid
    )


@pytest.mark.parametrize("missing", ["", "-rdonly_cast"], ids=["plain-loads", "probe-reads"])
def test_coldread_disk_reads_exact(iogen: Path, disk: LoopDisk, monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    """Both ways the bio program reads a page (test_pagecache's parameters)."""
    if missing:
        monkeypatch.setenv(kernel_features.FEATURES_ENV, missing)
    run, _ = _traced_window(iogen, disk, ("coldread",))
    assert_exact(run, disk.mount)  # writes, writeback and each file's disk_read_bytes
    files = {Path(f["path"]).name: f for f in run.expected["files"]}
    cold, direct, scattered = files["coldread.dat"], files["coldread_direct.dat"], files["coldread_random.dat"]
    unwritten = files["coldread_unwritten.dat"]
    traced = run.traced.under(str(disk.mount))
    got_cold, got_direct, got_scattered = (traced[f["path"]] for f in (cold, direct, scattered))
    # read twice, from the disk once (iogen saw it uncached before, cached after): the warm
    # read added nothing, and was all hits
    assert got_cold["read_bytes"] == 2 * got_cold["disk_read_bytes"] == 2 * cold["disk_read_bytes"] > 0
    assert got_cold["direct_read_bytes"] == 0
    assert hit_bytes(got_cold["read_bytes"], got_cold["disk_read_bytes"]) == cold["disk_read_bytes"]
    # a buffered read that misses goes through the readahead (the device's read_ahead_kb is
    # not 0), which marks its bios: some of the cold read, if not all, is counted apart
    assert 0 < got_cold["readahead_bytes"] <= got_cold["disk_read_bytes"]
    # O_DIRECT (pread, libaio, io_uring): every byte from the disk, for the file; no hit
    assert got_direct["read_bytes"] == got_direct["disk_read_bytes"] == got_direct["direct_read_bytes"]
    assert got_direct["direct_read_bytes"] == direct["direct_read_bytes"] == direct["disk_read_bytes"] > 0
    assert got_direct["readahead_bytes"] == 0
    assert hit_bytes(got_direct["read_bytes"], got_direct["disk_read_bytes"]) == 0
    # O_DIRECT reads of unwritten extents and a hole (pread, libaio one iocb a call): their
    # zeros read nothing from the disk, the written pages between them are read each time
    got_unwritten = traced[unwritten["path"]]
    assert got_unwritten["direct_read_bytes"] == got_unwritten["disk_read_bytes"] == unwritten["direct_read_bytes"] > 0
    assert got_unwritten["read_bytes"] == unwritten["read_bytes"] > 4 * unwritten["direct_read_bytes"]
    # coldread_mapped.dat, faulted in from the disk through a mapping by iogen's own thread
    # (as a server's cold binary text): no read of a file it reads, so no row, named or not
    assert not [p for p in run.traced.totals if p.startswith("<") or p.endswith("/coldread_mapped.dat")]
    # ... and outside the page cache: on the device line, the server's direct I/O
    read_by = _device_read_by(run.intervals, disk.name)
    assert read_by["server_direct"] == direct["direct_read_bytes"] + unwritten["direct_read_bytes"], read_by
    # scattered cold pages: what the disk gave is what the file has cached (assert_exact);
    # what was asked came from the disk or was a hit
    scattered_hits = hit_bytes(got_scattered["read_bytes"], got_scattered["disk_read_bytes"])
    assert scattered_hits + got_scattered["disk_read_bytes"] >= scattered["read_bytes"] > 0
    assert 0 <= got_scattered["readahead_bytes"] <= got_scattered["disk_read_bytes"] > 0
    # each interval's JSON: the hits of its own counters
    for obj in run.intervals:
        for f in obj["files"]:
            assert f["cache_hit_bytes"] == hit_bytes(f["read_bytes"], f["disk_read_bytes"]), f["path"]
    # who read: iogen's own thread (single-threaded: tid = pid), every byte
    pid = run.expected["pid"]
    for f in (cold, direct, scattered, unwritten):
        assert _thread_disk_reads(run.intervals, f["path"], pid) == f["disk_read_bytes"], f["path"]
    # the process's disk reads, as the kernel counts them for it: the sum of its files'
    process_reads = sum(_thread_disk_reads(run.intervals, p, pid) for p in traced)
    assert process_reads == run.expected["proc_io_read_bytes"]
    print(
        f"coldread: {cold['disk_read_bytes']} B cold from disk ({got_cold['readahead_bytes']} B readahead), "
        f"warm 0; O_DIRECT {direct['direct_read_bytes']} B; scattered {scattered['read_bytes']} B asked, "
        f"{scattered['disk_read_bytes']} B from disk ({got_scattered['readahead_bytes']} B readahead), "
        f"{scattered_hits} B hits; O_DIRECT of unwritten extents: {unwritten['read_bytes']} B read, "
        f"{got_unwritten['direct_read_bytes']} B from disk; /proc/PID/io read_bytes {run.expected['proc_io_read_bytes']}"
    )


def test_coldread_recorded_exact(iogen: Path, disk: LoopDisk, tmp_path: Path) -> None:
    """The same through `mysqlio record` and `mysqlio report` (JSON, and the text's `disk rd`
    column): the reads' events carry their file, bytes and thread into the trace."""
    trace = tmp_path / "coldread.trace"  # not on the loop device
    expected, _ = _recorded(iogen, disk, trace, ("coldread",))
    report = report_json(str(trace))
    assert report["lost_events"] == 0 and report["complete"]
    got = {f["path"]: f for f in report["files"]}
    for want in expected["files"]:
        g = got[want["path"]]
        assert {c: g[c] for c in COUNTERS} == {c: want[c] for c in COUNTERS}, want["path"]
        assert g["disk_read_bytes"] == want["disk_read_bytes"], want["path"]
        assert g["direct_read_bytes"] == want["direct_read_bytes"], want["path"]
        assert 0 <= g["readahead_bytes"] <= g["disk_read_bytes"]
        assert g["cache_hit_bytes"] == hit_bytes(g["read_bytes"], g["disk_read_bytes"]), want["path"]
    (want_cold,) = [f for f in expected["files"] if f["path"].endswith("/coldread.dat")]
    assert got[want_cold["path"]]["cache_hit_bytes"] == want_cold["disk_read_bytes"]  # the warm read
    direct = sum(f["direct_read_bytes"] for f in expected["files"])
    (loop,) = [d for d in report["devices"] if d["name"] == disk.name]
    assert loop["read_by"]["server_direct"] == direct > 0
    by_thread = report_json(str(trace), "--group", "thread", "--match", str(disk.mount))
    (thread,) = by_thread["threads"]
    assert thread["tid"] == expected["pid"]
    assert thread["disk_read_bytes"] == expected["proc_io_read_bytes"]  # O_DIRECT's included
    # the text report's column, on the cold file's line
    rows = render_rows(build_report(TraceReader(str(trace))).rows, "file", 200, page_cache=True)
    console = Console(width=200, color_system=None, record=True, file=io.StringIO())
    console.print(rows)
    lines = console.export_text().splitlines()
    end = lines[0].index("disk rd") + len("disk rd")  # right-justified: ends where its title does
    (cold,) = [line for line in lines if line.rstrip().endswith("/coldread.dat")]
    assert cold[end - 9 : end].strip() == human_bytes(want_cold["disk_read_bytes"]), lines


def _returned_direct(want: dict[str, Any]) -> int:
    """Without the bio program (--no-page-cache) an O_DIRECT read counts the bytes it returned,
    zeros of unwritten extents and holes included: a coldread file read with O_DIRECT is read
    only so, whole."""
    return int(want["read_bytes"]) if want["direct_read_bytes"] else 0


def test_no_hit_without_the_disk_reads(iogen: Path, disk: LoopDisk) -> None:
    """`top --no-page-cache`: buffered reads' disk bytes are not counted (O_DIRECT reads still
    are), so a page-cache hit cannot be told from a disk read: cache_hit_bytes is null for
    every file and thread, never the bytes read (which showed the cold file all hits)."""
    gen = start_iogen(str(iogen), str(disk.mount), ["--scenario", "coldread"])
    top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top = start_top(gen.pid, 0.5, ["--no-page-cache"])
        assert top.stdout is not None and top.stderr is not None
        first = read_json_line(top.stdout, 60, "mysqlio top")
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 240, "iogen run")
        time.sleep(1.0)
        top.send_signal(signal.SIGINT)
        out, err = top.communicate(timeout=60)
        assert top.returncode == 0, err
    finally:
        if top is not None and top.poll() is None:
            top.kill()
            top.wait()
        end_iogen(gen)
    intervals = [first] + [json.loads(line) for line in out.splitlines() if line.strip()]
    files = [f for o in intervals for f in o["files"] if f["path"].startswith(str(disk.mount))]
    assert files and all(f["cache_hit_bytes"] is None for f in files), files
    threads = [t for f in files for t in f["threads"]]
    assert threads and all(t["cache_hit_bytes"] is None for t in threads), threads
    traced = FileTotals()
    for obj in intervals:
        traced.add(obj)
    for want in expected["files"]:  # what is counted stays exact: the requests, O_DIRECT's bytes
        got = traced.totals[want["path"]]
        assert {c: got[c] for c in COUNTERS} == {c: want[c] for c in COUNTERS}, want["path"]
        assert got["direct_read_bytes"] == _returned_direct(want), want["path"]


def test_no_hit_recorded_without_the_disk_reads(iogen: Path, disk: LoopDisk, tmp_path: Path) -> None:
    """`record --no-page-cache`: the trace's O_DIRECT reads are disk reads, its buffered
    reads' disk bytes are not counted; `report` derives no hit (JSON null everywhere, no
    `hit %` nor page-cache column in the text), the rest exact."""
    trace = tmp_path / "coldread-nopc.trace"
    expected, _ = _recorded(iogen, disk, trace, ("coldread",), ("--no-page-cache",))
    report = report_json(str(trace), "--per-second")

    def hits(obj: Any) -> list[Any]:
        if isinstance(obj, dict):
            own = [obj["cache_hit_bytes"]] if "cache_hit_bytes" in obj else []
            return own + [h for v in obj.values() for h in hits(v)]
        return [h for v in obj for h in hits(v)] if isinstance(obj, list) else []

    found = hits(report)
    assert len(found) > 10 and set(found) == {None}, found
    got = {f["path"]: f for f in report["files"]}
    for want in expected["files"]:
        g = got[want["path"]]
        assert {c: g[c] for c in COUNTERS} == {c: want[c] for c in COUNTERS}, want["path"]
        assert g["direct_read_bytes"] == _returned_direct(want), want["path"]
    assert sum(g["direct_read_bytes"] for g in got.values()) > 0
    text = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", str(trace)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "hit %" not in text and "dirtied" not in text and "coldread.dat" in text, text
