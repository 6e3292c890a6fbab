"""Block devices over one interval: what each device completed, and whose bytes they were.

The probe keeps cumulative counters per (disk, direction, owner) (`probe.DeviceCount`);
`DeviceDeltas` turns two successive readings into one `DeviceActivity` per device that
did anything. Owner.DEVICE is the device's own view (bytes and requests completed, after
merging: the kernel's counters, `disk_stat.py`); the other owners split the bios queued to it:
the traced server's files (their page cache), its direct I/O, the filesystem (journal,
metadata) and everything else. Write amplification is the device's bytes written over the
server's share of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import abi
from .abi import Dir, Owner
from .probe import DeviceCount, dev_from_kernel, dev_label

# how JSON, the exporter and the screen name each owner of a device's bytes
OWNER_NAMES = {
    Owner.SERVER_FILE: "server_files",
    Owner.SERVER_DIRECT: "server_direct",
    Owner.FS: "filesystem",
    Owner.OTHER: "other",
}


def device_name(dev: int) -> str:
    """The kernel's name of a disk ("loop0", "vda"), or "major:minor" when /sys does not say."""
    try:
        return os.path.basename(os.readlink(f"/sys/dev/block/{dev_label(dev)}"))
    except OSError:
        return dev_label(dev)


@dataclass
class DeviceActivity:
    """One disk over one interval."""

    dev: int  # st_dev encoding
    name: str
    read_bytes: int = 0
    read_requests: int = 0
    write_bytes: int = 0
    write_requests: int = 0
    # bytes of the bios queued, by owner name (OWNER_NAMES), per direction
    write_by: dict[str, int] = field(default_factory=dict)
    read_by: dict[str, int] = field(default_factory=dict)

    @property
    def server_write_bytes(self) -> int:
        return self.write_by.get("server_files", 0) + self.write_by.get("server_direct", 0)

    @property
    def write_amplification(self) -> float | None:
        """Device bytes written per byte of the server's own writes reaching it."""
        server = self.server_write_bytes
        return self.write_bytes / server if server else None

    def add(self, count: DeviceCount, bytes_: int, n: int) -> None:
        if count.owner is Owner.DEVICE:
            if count.dir is Dir.WRITE:
                self.write_bytes += bytes_
                self.write_requests += n
            else:
                self.read_bytes += bytes_
                self.read_requests += n
            return
        split = self.write_by if count.dir is Dir.WRITE else self.read_by
        name = OWNER_NAMES[count.owner]
        split[name] = split.get(name, 0) + bytes_

    def merge(self, other: DeviceActivity) -> None:
        self.read_bytes += other.read_bytes
        self.read_requests += other.read_requests
        self.write_bytes += other.write_bytes
        self.write_requests += other.write_requests
        for mine, theirs in ((self.write_by, other.write_by), (self.read_by, other.read_by)):
            for name, value in theirs.items():
                mine[name] = mine.get(name, 0) + value

    def to_json(self) -> dict[str, Any]:
        amplification = self.write_amplification
        return {
            "dev": dev_label(self.dev),
            "name": self.name,
            "read_bytes": self.read_bytes,
            "read_requests": self.read_requests,
            "write_bytes": self.write_bytes,
            "write_requests": self.write_requests,
            "write_by": {name: self.write_by.get(name, 0) for name in OWNER_NAMES.values()},
            "read_by": {name: self.read_by.get(name, 0) for name in OWNER_NAMES.values()},
            "write_amplification": None if amplification is None else round(amplification, 3),
        }


class DeviceDeltas:
    """Successive cumulative readings -> the activity of each device in between."""

    def __init__(self, first: list[DeviceCount]) -> None:
        self._last = {_key(c): c for c in first}
        self._names: dict[int, str] = {}

    def take(self, now: list[DeviceCount]) -> list[DeviceActivity]:
        by_dev: dict[int, DeviceActivity] = {}
        for count in now:
            before = self._last.get(_key(count))
            bytes_ = count.bytes - (before.bytes if before else 0)
            n = count.count - (before.count if before else 0)
            if not bytes_ and not n:
                continue
            activity = by_dev.get(count.dev)
            if activity is None:
                name = self._names.get(count.dev)
                if name is None:
                    name = self._names[count.dev] = device_name(count.dev)
                activity = by_dev[count.dev] = DeviceActivity(dev=count.dev, name=name)
            activity.add(count, bytes_, n)
        self._last = {_key(c): c for c in now}
        return sorted(by_dev.values(), key=lambda d: (-(d.write_bytes + d.read_bytes), d.name))


def _key(count: DeviceCount) -> tuple[int, Dir, Owner]:
    return (count.dev, count.dir, count.owner)


def device_bios(words: Any) -> list[DeviceCount]:
    """The bios by device, direction and owner, from the per-CPU slots of `devslots`
    (struct dev_slot: the device, then bytes and counts as [dir][owner]); a device's
    slot may differ from one CPU to another."""
    cells = 2 * abi.DEV_OWNERS
    slots = np.frombuffer(words, np.uint64).reshape(-1, 1 + 2 * cells)
    devs = slots[:, 0]
    out = []
    for dev in np.unique(devs[devs != 0]).tolist():
        summed = slots[devs == dev, 1:].sum(axis=0, dtype=np.uint64)
        for d in (abi.Dir.READ, abi.Dir.WRITE):
            for owner in range(1, abi.DEV_OWNERS):
                at = d * abi.DEV_OWNERS + owner
                count = int(summed[cells + at])
                if count:
                    out.append(DeviceCount(dev_from_kernel(dev), d, abi.Owner(owner), int(summed[at]), count))
    return out
