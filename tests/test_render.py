"""Snapshot tests of the screen: pure rendering into an 80- and a 160-column console."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from mysqlio.abi import Api, By, Dir, Op, Owner
from mysqlio.devices import DeviceActivity
from mysqlio.kinds import KINDS
from mysqlio.latency import Histogram, bucket_of
from mysqlio.model import FileActivity, Interval, ThreadActivity
from mysqlio.probe import DeviceCount, FileIdentity, OpCount
from mysqlio.render import Header, device_line, render_screen, sparkline
from mysqlio.view import FADE_INTERVALS, ScreenState, device_rates, main_causes

SNAPSHOTS = Path(__file__).parent / "snapshots"
DATADIR = "/var/lib/mysql"


def _file(ino: int, name: str, kind: str, wbytes: int, wops: int, syncs: int = 0, tid: int = 100) -> FileActivity:
    f = FileActivity(file=FileIdentity(2049, ino), path=f"{DATADIR}/{name}", kind=kind)
    for op, count, nbytes in ((Op.WRITE, wops, wbytes), (Op.FDATASYNC, syncs, 0)):
        if count:
            _add(f, OpCount(f.file, tid, op, Api.IO_URING, nbytes, count, 0))
    return f


def _add(f: FileActivity, row: OpCount) -> None:
    f.add(row)
    name = "[kernel]" if row.tid == 0 else "mariadbd"
    f.threads.setdefault(row.tid, ThreadActivity(tid=row.tid, name=name)).add(row)


def _page_cache(f: FileActivity, dirtied: int, *written: tuple[By, int], msyncs: int = 0) -> FileActivity:
    """Page-cache rows: bytes dirtied by the server's thread, written back by cause (the
    flusher's as the kernel's thread, tid 0), msync requests."""
    if dirtied:
        _add(f, OpCount(f.file, 100, Op.DIRTY, Api.KERNEL, dirtied, 0, 0))
    for by, nbytes in written:
        tid = 0 if by in (By.FLUSHER_PERIODIC, By.FLUSHER_BACKGROUND) else 100
        _add(f, OpCount(f.file, tid, Op.WRITEBACK, Api.KERNEL, nbytes, 0, 0, by))
    if msyncs:
        _add(f, OpCount(f.file, 100, Op.MSYNC, Api.SYSCALL, 0, msyncs, 0))
    return f


def _interval(files: list[FileActivity], lost: int = 0, devices: list[DeviceActivity] | None = None) -> Interval:
    return Interval(time=0.0, interval_s=1.0, pid=4242, lost_events=lost, drops={}, files=files, devices=devices or [])


def _device(name: str, dev: int, write: tuple[int, int], read: tuple[int, int], **by: int) -> DeviceActivity:
    """write / read: (bytes, requests) the device completed; by: owner -> bytes of the bios queued (writes)."""
    d = DeviceActivity(dev=dev, name=name)
    d.add(DeviceCount(dev, Dir.WRITE, Owner.DEVICE, 0, 0), *write)
    d.add(DeviceCount(dev, Dir.READ, Owner.DEVICE, 0, 0), *read)
    for owner, nbytes in by.items():
        d.add(DeviceCount(dev, Dir.WRITE, Owner[owner.upper()], 0, 0), nbytes, 1)
    return d


# the server's disk: 3 MiB/s written, 80 % of it the server's pages, and an idle one
DEVICES = [
    _device("vdb", 0xFE10, (3_145_728, 230), (16_384, 4), server_file=2_516_582, fs=471_859, other=157_287),
    _device("vda", 0xFE00, (0, 0), (0, 0)),
]


def _with_latency(f: FileActivity, write_ns: list[int], sync_ns: list[int]) -> FileActivity:
    for cls, values in (("write", write_ns), ("sync", sync_ns)):
        if values:
            f.latency[cls] = _hist(values)
    return f


def _hist(values: list[int]) -> Histogram:
    hist = Histogram(sum_ns=sum(values), max_ns=max(values))
    np.add.at(hist.counts, bucket_of(np.array(values, dtype=np.uint64)), 1)
    return hist


def _base() -> list[FileActivity]:
    return [
        _page_cache(_file(11, "ib_logfile0", "redo", 1_400_000, 213, 213), 1_400_000, (By.FDATASYNC, 1_400_000)),
        _page_cache(
            _file(12, "sbtest/sbtest1.ibd", "table", 1_048_576, 64, 1),
            1_048_576,
            (By.FLUSHER_PERIODIC, 655_360),
            (By.FSYNC, 163_840),
        ),
        _page_cache(_file(13, "ibdata1", "system", 1_048_576, 64, 1), 1_048_576, (By.FSYNC, 1_048_576)),
        _page_cache(_file(14, "mysql-bin.000001", "binlog", 167_000, 210, 210), 172_032, (By.FDATASYNC, 172_032)),
        _file(16, "mysql-bin.000001.idx", "binlog_gtid_index", 8192, 2),  # the longest kind name: whole
        _file(15, "sbtest/#sql-ib51-2938.ibd\x1b[2J", "alter", 4096, 1),
    ]


def _screen(width: int, lost: int = 0, latency: bool = False, view: str = "syscalls", page_cache: bool = True) -> str:
    state = ScreenState(latency=latency, view=view)
    base = _base()
    for _ in range(3):
        rows = state.update(_interval(base))
    _with_latency(base[0], [], [180_000] * 200 + [38_000_000] * 13)  # redo: fdatasync p99 38 ms
    _with_latency(base[1], [95_000] * 64, [2_100_000])
    _with_latency(base[3], [9_000] * 210, [450_000] * 210)
    interval = _interval(base[:5], lost, DEVICES)
    rows = state.update(interval)  # the alter table went quiet: it fades
    wback_by: dict[str, int] = {}
    for f in interval.files:
        for cause, nbytes in f.writeback_by.items():
            wback_by[cause] = wback_by.get(cause, 0) + nbytes
    header = Header(
        4242, "MariaDB 10.11.19", 4.0, 1.0, 3.6e6, 0.0, 425, lost, "file", "write", DATADIR, latency=latency,
        view=view, page_cache=page_cache, dirtied_bps=sum(f.dirtied_bytes for f in interval.files),
        wback_bps=sum(f.writeback_bytes for f in interval.files), wback_by=wback_by,
        devices=tuple(device_rates(interval.devices, 1.0)),
    )  # fmt: skip
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
def test_screen_page_cache_view_snapshot(width: int) -> None:
    """Key p: what the kernel did with the files' pages (dirtied, written back, by what)."""
    text = _screen(width, view="page cache")
    snap = SNAPSHOTS / f"top_pagecache_{width}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()
    assert max(len(line) for line in text.splitlines()) <= width
    table = next(line for line in text.splitlines() if "sbtest1.ibd" in line)
    assert "flusher 80% / fsync 20%" in table, table
    assert "by fdatasync 46% / fsync 35%" in text


@pytest.mark.parametrize("width", [80, 160])
def test_every_kind_is_shown_whole(width: int) -> None:
    """The kind column fits the longest kind name of kinds.py, at 80 columns too (it cut
    table_definition, buffer_pool_dump and binlog_gtid_index to 12 characters)."""
    files = [_file(i, f"f{i}", kind, 100 * (i + 1), 1) for i, kind in enumerate(KINDS)]
    rows = ScreenState().update(_interval(files))
    header = Header(4242, "MySQL 9.7.4", 1.0, 1.0, 0.0, 0.0, 0, 0, "file", "write", DATADIR)
    console = Console(width=width, force_terminal=True, color_system=None, record=True, legacy_windows=False)
    console.print(render_screen(header, rows, width))
    text = console.export_text()
    shown = {line.split()[0]: line.split()[-1] for line in text.splitlines() if line.split()[-1:][0].startswith("f")}
    assert shown == {kind: f"f{i}" for i, kind in enumerate(KINDS)}
    assert max(len(line) for line in text.splitlines()) <= width


def test_wide_screen_has_page_cache_columns_and_devices() -> None:
    text = _screen(160)
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("kind"))
    assert "dirty/s" in head and "wback/s" in head
    redo = next(line for line in lines if "ib_logfile0" in line)
    assert redo.split()[7:9] == ["1.3MiB", "1.3MiB"], redo  # dirtied/s, wback/s
    vdb = next(line for line in lines if line.startswith("vdb"))
    assert vdb == "vdb     W 3.0MiB/s 230 req/s (server 80%, fs 15%, other 5%)  R 16.0KiB/s 4 req/s  amplification 1.25"
    assert not any(line.startswith("vda") for line in lines)  # idle: no line
    assert "page cache  dirtied 3.5MiB/s  written back 3.3MiB/s" in text


def test_no_page_cache_no_columns() -> None:
    """SystemTap (or a kernel without the hooks): no page-cache columns, no device lines,
    and the page-cache view says why it is empty."""
    text = _screen(160, page_cache=False)
    assert "dirty/s" not in text and "vdb" not in text and "page cache" not in text
    text = _screen(80, view="page cache", page_cache=False)
    assert "page cache: not counted here" in text


def test_main_causes() -> None:
    assert main_causes({}) == "-"
    assert main_causes({"fsync": 800, "flusher_periodic": 150, "flusher_background": 50}) == "fsync 80% / flusher 15% …"
    assert main_causes({"fsync": 800, "flusher_periodic": 200}) == "fsync 80% / flusher 20%"
    assert main_causes({"msync": 1}) == "msync 100%"
    assert main_causes({"sync_file_range": 3, "memory": 1}, most=3) == "sfr 75% / reclaim 25%"


def test_device_line_narrow_and_tiny_shares() -> None:
    d = _device("nvme0n1", 1, (10_485_760, 100), (0, 0), server_file=1_000_000, server_direct=1, fs=5_000_000)
    (rate,) = device_rates([d], 2.0)
    assert device_line(rate, full=False) == "nvme0n1 W 5.0MiB/s 50/s (fs 83% server 17% direct <1%)  amp 10.49"
    assert device_line(rate).endswith("  R 0B/s 0 req/s  amplification 10.49")


def test_sort_by_writeback_and_msync_is_a_sync() -> None:
    a = _page_cache(_file(1, "a", "table", 900, 1), 4096, (By.FSYNC, 4096))
    b = _page_cache(FileActivity(file=FileIdentity(2049, 2), path=f"{DATADIR}/ib_logfile0", kind="redo"),
                    65536, (By.MSYNC, 65536), msyncs=3)  # fmt: skip
    rows = ScreenState(sort="wback").update(_interval([a, b]))
    assert [r.kind for r in rows] == ["redo", "table"]
    assert (rows[0].write_bps, rows[0].sync_ps, rows[0].wback_causes) == (0.0, 3.0, "msync 100%")
    assert [r.kind for r in ScreenState(sort="dirty").update(_interval([a, b]))] == ["redo", "table"]
    # the kernel's writeback is a thread of its own
    by_thread = ScreenState(group="thread", sort="wback").update(_interval([_page_cache(
        _file(3, "c", "table", 0, 0), 8192, (By.FLUSHER_PERIODIC, 8192))]))  # fmt: skip
    assert [(r.label, r.wback_bps, r.dirtied_bps) for r in by_thread] == [
        ("[kernel] [0]", 8192.0, 0.0),
        ("mariadbd [100]", 0.0, 8192.0),
    ]


def test_switch_view() -> None:
    state = ScreenState()
    state.switch_view()
    assert state.view == "page cache"
    state.switch_view()
    assert state.view == "syscalls"


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


def test_devices_the_server_writes_to_come_first() -> None:
    busy_other = _device("vda", 1, (50_000_000, 900), (0, 0), other=50_000_000)
    server_disk = _device("vdb", 2, (8192, 2), (0, 0), server_file=8192)
    idle = _device("vdc", 3, (0, 0), (0, 0))
    assert [d.name for d in device_rates([busy_other, idle, server_disk], 1.0)] == ["vdb", "vda"]
    assert [d.name for d in device_rates([busy_other, server_disk], 1.0, most=1)] == ["vdb"]


def _user_screen(width: int, group: str) -> str:
    """Rows by the server's view of each thread (--mysql): bob's sysbench writes the redo
    log, binary log and tables, alice's sort its tmp file, the page cleaner the rest."""
    from mysqlio.thread_attribution import KERNEL_VIEW, ThreadView

    bob = ThreadView("bob@localhost", "conn 8 bob@localhost", "COMMIT", "d1", "k1", 8, "sbtest")
    alice = ThreadView("alice@localhost", "conn 7 alice@localhost", "SELECT SQL_BIG_RESULT `pad` , COUNT ( * ) …")
    cleaner = ThreadView("(background)", "page cleaner", "(background)")
    base = _base()[:4]
    base.append(_file(16, "../tmp/MYfd=58 (deleted)", "tmp", 9_437_184, 144, tid=200))
    base.append(_file(17, "sbtest/sbtest2.ibd", "table", 524_288, 32, tid=300))
    views = {100: bob, 200: alice, 300: cleaner, 0: KERNEL_VIEW}
    for f in base:
        for t in f.threads.values():
            t.server = views[t.tid]
    state = ScreenState(group=group)
    rows = state.update(_interval(base))
    header = Header(4242, "MariaDB 10.11.19", 4.0, 1.0, 13.2e6, 0.0, 425, 0, group, "write", DATADIR)
    console = Console(width=width, force_terminal=True, color_system=None, record=True, legacy_windows=False)
    console.print(render_screen(header, rows, width))
    return console.export_text()


@pytest.mark.parametrize(("width", "group"), [(80, "user"), (160, "user"), (160, "query")])
def test_screen_by_user_and_query_snapshot(width: int, group: str) -> None:
    text = _user_screen(width, group)
    snap = SNAPSHOTS / f"top_{group}_{width}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()
    assert max(len(line) for line in text.splitlines()) <= width


def test_lost_events_are_named_by_the_counter_that_lost_them() -> None:
    """The screen's lost count is the session's, and on a wide screen it says which
    counters lost the events (a latency-only drop is not a lost event)."""
    from mysqlio.render import render_screen_header

    state = ScreenState()
    base = _base()
    for drops in ({"ringbuf_full": 3, "lat_full": 9, "stats_full": 0}, {"ringbuf_full": 1, "skipped_runs": 2}):
        lost = sum(v for k, v in drops.items() if k != "lat_full")
        state.update(Interval(time=0.0, interval_s=1.0, pid=4242, lost_events=lost, drops=drops, files=base))
    assert state.lost_events == 6 and state.lost_by == {"ringbuf_full": 4, "skipped_runs": 2}
    header = Header(4242, "MariaDB 10.11.19", 2.0, 1.0, 0.0, 0.0, 0, state.lost_events, "file", "write",
                    lost_by=dict(state.lost_by))  # fmt: skip
    assert "  lost 6 (ringbuf_full 4, skipped_runs 2)  group" in render_screen_header(header, 160).plain
    assert "  lost 6  group" in render_screen_header(header, 80).plain


def test_mysql_redo_files_are_one_row_unless_unfolded() -> None:
    """MySQL's 32 redo files (#innodb_redo/#ib_redoN, recycled every few seconds) are one
    row of the file view, labelled with how many of them top has seen written; unfolded
    (--unfold-redo, key o) a row each. MariaDB's ib_logfile0 is not folded, nor other views."""
    redo = [_file(10 + n, f"#innodb_redo/#ib_redo{n}", "redo", 1000 * n, n) for n in (5, 6)]
    others = [_file(1, "ib_logfile0", "redo", 7, 1), _file(2, "t.ibd", "table", 100, 1)]
    state = ScreenState()
    rows = state.update(_interval([*redo, *others]))
    assert [(r.label, r.kind, r.write_bps, r.write_ops_ps) for r in rows] == [
        (f"{DATADIR}/#innodb_redo (2 files)", "redo", 11000.0, 11.0),
        (f"{DATADIR}/t.ibd", "table", 100.0, 1.0),
        (f"{DATADIR}/ib_logfile0", "redo", 7.0, 1.0),
    ]
    rows = state.update(_interval([_file(17, "#innodb_redo/#ib_redo7_tmp", "redo", 500, 1)]))
    assert rows[0].label == f"{DATADIR}/#innodb_redo (3 files)" and rows[0].write_bps == 500.0
    state.switch_redo_fold()
    rows = state.update(_interval(redo))
    assert sorted(r.label for r in rows) == [f"{DATADIR}/#innodb_redo/#ib_redo5", f"{DATADIR}/#innodb_redo/#ib_redo6"]
    by_kind = ScreenState(group="kind").update(_interval([*redo, *others]))
    assert [(r.label, r.write_bps) for r in by_kind] == [("redo", 11007.0), ("table", 100.0)]
