"""The block devices of a trace: the samples `record` stored per batch (what each device
completed since the previous batch, its writes split by whose bios they were), summed per
device over the report's time range. A device's write amplification is its bytes written
over the server's own share of them (its files' pages written back, its direct I/O)."""

from __future__ import annotations

import os
from typing import Any

from ..devices import OWNER_NAMES, DeviceActivity
from ..filters import Filters

_OWNERS = frozenset(OWNER_NAMES.values())


def device_totals(samples: list[dict[str, Any]], filters: Filters | None = None) -> list[DeviceActivity]:
    """Per device, the sum of the samples (as `TraceReader.devices` checked them) whose
    interval overlaps the filters' time range; busiest first."""
    by_dev: dict[tuple[str, str], DeviceActivity] = {}
    for sample in device_samples(samples, filters):
        for d in sample["devices"]:
            key = (d["dev"], d["name"])
            total = by_dev.get(key)
            if total is None:
                major, _, minor = d["dev"].partition(":")
                total = by_dev[key] = DeviceActivity(dev=os.makedev(int(major), int(minor)), name=d["name"])
            total.merge(
                DeviceActivity(
                    dev=total.dev,
                    name=total.name,
                    read_bytes=d["read_bytes"],
                    read_requests=d["read_requests"],
                    write_bytes=d["write_bytes"],
                    write_requests=d["write_requests"],
                    write_by={k: v for k, v in d["write_by"].items() if k in _OWNERS and v},
                    read_by={k: v for k, v in d["read_by"].items() if k in _OWNERS and v},
                )
            )
    return sorted(by_dev.values(), key=lambda d: (-(d.write_bytes + d.read_bytes), d.name, d.dev))


def device_samples(samples: list[dict[str, Any]], filters: Filters | None = None) -> list[dict[str, Any]]:
    """The samples whose interval overlaps the filters' time range."""
    lo = filters.t_from if filters is not None else None
    hi = filters.t_to if filters is not None else None
    return [
        s
        for s in samples
        if not ((lo is not None and s["t"] <= lo) or (hi is not None and s["t"] - s["interval_s"] >= hi))
    ]
