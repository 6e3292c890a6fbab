"""Snapshot tests of the screen: pure rendering into an 80- and a 160-column console."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from mysqlio.abi import Api, Op
from mysqlio.latency import Histogram, bucket_of
from mysqlio.model import FileActivity, Interval, ThreadActivity
from mysqlio.probe import FileIdentity, OpCount
from mysqlio.render import Header, render_screen, sparkline
from mysqlio.view import FADE_INTERVALS, ScreenState

SNAPSHOTS = Path(__file__).parent / "snapshots"
DATADIR = "/var/lib/mysql"


def _file(ino: int, name: str, kind: str, wbytes: int, wops: int, syncs: int = 0, tid: int = 100) -> FileActivity:
    f = FileActivity(file=FileIdentity(2049, ino), path=f"{DATADIR}/{name}", kind=kind)
    for op, count, nbytes in ((Op.WRITE, wops, wbytes), (Op.FDATASYNC, syncs, 0)):
        if count:
            row = OpCount(f.file, tid, op, Api.IO_URING, nbytes, count, 0)
            f.add(row)
            f.threads.setdefault(tid, ThreadActivity(tid=tid, name="mariadbd")).add(row)
    return f


def _interval(files: list[FileActivity], lost: int = 0) -> Interval:
    return Interval(time=0.0, interval_s=1.0, pid=4242, lost_events=lost, drops={}, files=files)


def _with_latency(f: FileActivity, write_ns: list[int], sync_ns: list[int]) -> FileActivity:
    for cls, values in (("write", write_ns), ("sync", sync_ns)):
        if values:
            f.latency[cls] = _hist(values)
    return f


def _hist(values: list[int]) -> Histogram:
    hist = Histogram(sum_ns=sum(values), max_ns=max(values))
    np.add.at(hist.counts, bucket_of(np.array(values, dtype=np.uint64)), 1)
    return hist


def _screen(width: int, lost: int = 0, latency: bool = False) -> str:
    state = ScreenState(latency=latency)
    base = [
        _file(11, "ib_logfile0", "redo", 1_400_000, 213, 213),
        _file(12, "sbtest/sbtest1.ibd", "table", 1_048_576, 64, 1),
        _file(13, "ibdata1", "system", 1_048_576, 64, 1),
        _file(14, "mysql-bin.000001", "binlog", 167_000, 210, 210),
        _file(15, "sbtest/#sql-ib51-2938.ibd\x1b[2J", "alter", 4096, 1),
    ]
    for _ in range(3):
        rows = state.update(_interval(base))
    _with_latency(base[0], [], [180_000] * 200 + [38_000_000] * 13)  # redo: fdatasync p99 38 ms
    _with_latency(base[1], [95_000] * 64, [2_100_000])
    _with_latency(base[3], [9_000] * 210, [450_000] * 210)
    rows = state.update(_interval(base[:4], lost))  # the alter table went quiet: it fades
    header = Header(
        4242, "MariaDB 10.11.19", 4.0, 1.0, 3.6e6, 0.0, 425, lost, "file", "write", DATADIR, latency=latency
    )
    console = Console(width=width, force_terminal=True, color_system=None, record=True, legacy_windows=False)
    console.print(render_screen(header, rows, width))
    return console.export_text()


@pytest.mark.parametrize("width", [80, 160])
def test_screen_snapshot(width: int) -> None:
    text = _screen(width)
    snap = SNAPSHOTS / f"top_{width}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()
    assert max(len(line) for line in text.splitlines()) <= width


@pytest.mark.parametrize("width", [80, 160])
def test_screen_with_latency_snapshot(width: int) -> None:
    text = _screen(width, latency=True)
    snap = SNAPSHOTS / f"top_latency_{width}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()
    assert max(len(line) for line in text.splitlines()) <= width
    redo = next(line for line in text.splitlines() if "ib_logfile0" in line)
    # 13 of 213 syncs took 38 ms: above the 99th percentile's rank, so p99 shows them
    assert "38.0ms" in redo, redo


def test_latency_sort_puts_the_slowest_syncs_first() -> None:
    state = ScreenState(sort="slat", latency=True)
    fast = _with_latency(_file(1, "a.ibd", "table", 100, 1, 1), [], [1_000_000])
    slow = _with_latency(_file(2, "b.ibd", "table", 100, 1, 1), [], [50_000_000])
    rows = state.update(_interval([fast, slow]))
    assert [r.label for r in rows] == [f"{DATADIR}/b.ibd", f"{DATADIR}/a.ibd"]


def test_hostile_file_name_cannot_reach_the_terminal() -> None:
    text = _screen(160)
    assert "\x1b" not in text
    assert "\\x1b[2J" in text


def test_quiet_rows_fade_then_go() -> None:
    state = ScreenState()
    state.update(_interval([_file(1, "a", "table", 100, 1), _file(2, "b", "table", 100, 1)]))
    for n in range(1, FADE_INTERVALS + 1):
        rows = state.update(_interval([_file(1, "a", "table", 100, 1)]))
        assert [r.quiet_for for r in rows] == [0, n]
    rows = state.update(_interval([_file(1, "a", "table", 100, 1)]))
    assert [r.label for r in rows] == [f"{DATADIR}/a"]


def test_group_by_kind_and_thread_sum_rates() -> None:
    files = [_file(1, "a.ibd", "table", 100, 1, tid=7), _file(2, "b.ibd", "table", 50, 2, tid=8)]
    by_kind = ScreenState(group="kind").update(_interval(files))
    assert [(r.label, r.write_bps, r.write_ops_ps) for r in by_kind] == [("table", 150.0, 3.0)]
    by_thread = ScreenState(group="thread").update(_interval(files))
    assert sorted((r.label, r.write_bps) for r in by_thread) == [("mariadbd [7]", 100.0), ("mariadbd [8]", 50.0)]


def test_sort_by_sync() -> None:
    files = [_file(1, "a", "table", 900, 1, syncs=1), _file(2, "b", "redo", 10, 1, syncs=50)]
    rows = ScreenState(sort="sync").update(_interval(files))
    assert [r.kind for r in rows] == ["redo", "table"]


def test_sparkline_scales_to_peak() -> None:
    assert sparkline([0.0, 1.0, 2.0, 4.0], 6) == "   ▃▅█"
    assert sparkline([], 3) == "   "
