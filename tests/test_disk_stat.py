"""The devices' own view: the kernel's per-disk counters, counted from the start of tracing.
Against a real device (ext4 on a loop device) in tests/test_pagecache.py and
tests/test_record_pagecache.py, which require them equal to /sys/block over their window."""

from __future__ import annotations

import os

import pytest

from mysqlio import disk_stat
from mysqlio.abi import Dir, Owner
from mysqlio.disk_stat import DiskCounters, DiskStat

# the 17 fields of Linux 5.5+ (reads, merged, sectors, ms, writes, merged, sectors, ms, in flight, ...)
LINE = (
    "     100        5     2000       30      200        7     4000       50        0       60       80 0 0 0 0 10 5\n"
)


def test_parse_reads_requests_and_sectors() -> None:
    assert DiskStat.parse(LINE) == DiskStat(reads=100, read_bytes=2000 * 512, writes=200, write_bytes=4000 * 512)


def test_a_short_line_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 7 fields"):
        DiskStat.parse("1 2 3")


def test_every_disk_of_this_machine_is_read() -> None:
    disks = disk_stat.all_disks()
    names = os.listdir("/sys/block")
    assert len(disks) == len(names) > 0
    for dev in disks:
        assert disk_stat.read_disk_stat(dev) is not None


def test_counts_run_from_the_start_and_a_disk_made_anew_from_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = os.makedev(7, 0)
    readings = {dev: DiskStat(10, 5120, 20, 40960)}
    monkeypatch.setattr(disk_stat, "all_disks", lambda: dict(readings))
    monkeypatch.setattr(disk_stat, "read_disk_stat", lambda d: readings.get(d))
    counters = DiskCounters()
    readings[dev] = DiskStat(13, 6656, 25, 45056)
    got = {(c.dir, c.owner): (c.bytes, c.count) for c in counters.since_start([dev, dev])}
    assert got == {(Dir.READ, Owner.DEVICE): (1536, 3), (Dir.WRITE, Owner.DEVICE): (4096, 5)}
    # detached and made again under the same number: its counters restarted below the start
    readings[dev] = DiskStat(1, 512, 2, 8192)
    got = {(c.dir, c.owner): (c.bytes, c.count) for c in counters.since_start([dev])}
    assert got == {(Dir.READ, Owner.DEVICE): (512, 1), (Dir.WRITE, Owner.DEVICE): (8192, 2)}
    # a disk /sys no longer has is left out
    assert counters.since_start([os.makedev(7, 9)]) == []
