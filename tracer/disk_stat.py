"""What each disk completed, as the kernel counts it for iostat: /sys/dev/block/M:m/stat.

The device's own view in `devices` (Owner.DEVICE): requests and bytes read and written as
the device completed them, after merging. The kernel keeps these counters for every disk
whatever is traced, so no BPF program counts them again (issue 19: a program on
block_rq_complete ran for every request of every device, and was seen one request short
of these counters on a busy device).
Fields: the kernel's Documentation/admin-guide/iostats.rst; sectors are 512 bytes on
every device.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .abi import Dir, Owner
from .probe import DeviceCount, dev_label

SECTOR_BYTES = 512
SYS_BLOCK = Path("/sys/block")


@dataclass(frozen=True)
class DiskStat:
    """The first fields of a disk's stat file: cumulative since the disk appeared."""

    reads: int
    read_bytes: int
    writes: int
    write_bytes: int

    @classmethod
    def parse(cls, text: str) -> DiskStat:
        fields = [int(v) for v in text.split()]
        if len(fields) < 7:
            raise ValueError(f"a block stat line has at least 7 fields, not {len(fields)}")
        return cls(fields[0], fields[2] * SECTOR_BYTES, fields[4], fields[6] * SECTOR_BYTES)

    def covers(self, earlier: DiskStat) -> bool:
        """Whether these counters can follow `earlier` (else the disk was made anew)."""
        return self.reads >= earlier.reads and self.writes >= earlier.writes


ZERO = DiskStat(0, 0, 0, 0)


def read_disk_stat(dev: int) -> DiskStat | None:
    """A disk's counters (dev: st_dev encoding), None when /sys has no such disk."""
    try:
        return DiskStat.parse(Path(f"/sys/dev/block/{dev_label(dev)}/stat").read_text())
    except (OSError, ValueError):
        return None


def all_disks() -> dict[int, DiskStat]:
    """Every disk's counters now, by st_dev."""
    out = {}
    try:
        disks = list(SYS_BLOCK.iterdir())
    except OSError:
        return {}
    for disk in disks:
        try:
            major, minor = (disk / "dev").read_text().split(":")
            out[os.makedev(int(major), int(minor))] = DiskStat.parse((disk / "stat").read_text())
        except (OSError, ValueError):
            continue  # removed meanwhile
    return out


class DiskCounters:
    """Each disk's completed requests and bytes since this object was made (tracing started)."""

    def __init__(self) -> None:
        self._start = all_disks()

    def since_start(self, devs: Iterable[int]) -> list[DeviceCount]:
        """Cumulative Owner.DEVICE counts of these disks (st_dev); a disk made after the
        start counts from zero, one made anew under the same number from its new start."""
        out = []
        for dev in sorted(set(devs)):
            now = read_disk_stat(dev)
            if now is None:
                continue
            start = self._start.get(dev, ZERO)
            if not now.covers(start):
                start = self._start[dev] = ZERO
            out.append(
                DeviceCount(dev, Dir.READ, Owner.DEVICE, now.read_bytes - start.read_bytes, now.reads - start.reads)
            )
            out.append(
                DeviceCount(
                    dev, Dir.WRITE, Owner.DEVICE, now.write_bytes - start.write_bytes, now.writes - start.writes
                )
            )
        return out
