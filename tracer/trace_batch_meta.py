"""The custom metadata of a trace batch (trace.py), parsed: server samples, device
samples, gap notes, lost counts, numbers. Damage is dropped or reported as damaged, never raised."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any


def float_or_none(raw: bytes | None) -> float | None:
    """A float of batch metadata; None when absent or damaged."""
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def status_samples(raw: bytes) -> list[dict[str, Any]]:
    """Server status samples of a batch; damaged ones are dropped, never raised."""
    try:
        samples = json.loads(raw)
    except ValueError:
        return []
    return [s for s in samples if isinstance(s, dict)] if isinstance(samples, list) else []


# a device's counters in a sample, and the owners its bytes are split by (devices.OWNER_NAMES)
_DEVICE_COUNTERS = ("read_bytes", "read_requests", "write_bytes", "write_requests")
_DEVICE_OWNERS = ("server_files", "server_direct", "filesystem", "other")
_MAX_COUNT = 1 << 62  # larger is damage, not I/O


def _count(value: Any) -> int | None:
    """A counter of a sample: an int in [0, 2^62), else None (damaged)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_COUNT:
        return value
    return None


def lost_by_counter(raw: bytes) -> dict[str, int] | None:
    """A batch's `lost_by` (lost events by the counter that lost them), or None when it
    is damaged: not a JSON object of counts."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return _counts(value.items())


def _counts(named: Iterable[tuple[str, Any]]) -> dict[str, int] | None:
    """Named counters checked by `_count`; None when any of them is damaged."""
    counts: dict[str, int] = {}
    for name, raw in named:
        count = _count(raw)
        if count is None:
            return None
        counts[name] = count
    return counts


def _small_number(text: str, limit: int) -> bool:
    return 0 < len(text) <= 8 and text.isascii() and text.isdigit() and int(text) < limit


def _seconds(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _device(obj: Any) -> dict[str, Any] | None:
    """One device of a sample, checked; None when damaged."""
    if not isinstance(obj, dict):
        return None
    name, dev = obj.get("name"), obj.get("dev")
    if not isinstance(name, str) or not name or not isinstance(dev, str):
        return None
    major, sep, minor = dev.partition(":")
    if not (sep and _small_number(major, 1 << 12) and _small_number(minor, 1 << 20)):
        return None
    out: dict[str, Any] = {"dev": f"{int(major)}:{int(minor)}", "name": name}
    counters = _counts((key, obj.get(key)) for key in _DEVICE_COUNTERS)
    if counters is None:
        return None
    out.update(counters)
    for key in ("write_by", "read_by"):
        split = obj.get(key)
        if not isinstance(split, dict):
            return None
        checked = _counts((owner, split.get(owner, 0)) for owner in _DEVICE_OWNERS)
        if checked is None:
            return None
        out[key] = checked
    return out


def device_sample(raw: bytes) -> dict[str, Any] | None:
    """A batch's block-device sample: {"t", "interval_s", "devices"}; damaged devices
    are dropped, a damaged sample is None, never raised."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # also bad UTF-8
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("devices"), list):
        return None
    t, interval = _seconds(obj.get("t")), _seconds(obj.get("interval_s"))
    if t is None or interval is None:
        return None
    devices = [d for d in (_device(x) for x in obj["devices"]) if d is not None]
    return {"t": t, "interval_s": interval, "devices": devices}


def gap_note(raw: bytes) -> dict[str, Any]:
    """A gap note, checked: a damaged one is reported as such, never raised."""
    try:
        obj = json.loads(raw)
        return {
            "from_t": float(obj["from_t"]),
            "to_t": float(obj["to_t"]),
            "old_pid": int(obj["old_pid"]),
            "new_pid": int(obj["new_pid"]),
        }
    except (ValueError, KeyError, TypeError):
        return {"from_t": None, "to_t": None, "old_pid": None, "new_pid": None, "damaged": True}
