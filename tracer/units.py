"""Human units for byte counts, rates and latencies; paths and times for display."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(n: float) -> str:
    """1536 -> '1.5KiB'; exact below 1 KiB."""
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


def counts_by_name(counts: Mapping[str, int]) -> str:
    """{"skipped_runs": 2, "ringbuf_full": 1200} -> "ringbuf_full 1,200, skipped_runs 2":
    largest first (what lost events, by the counter that lost them)."""
    ranked = sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{name} {n:,}" for name, n in ranked)


def human_rate(n: float) -> str:
    """Operations per second: 3 significant digits, k/M above 1000."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    if n >= 100 or n == int(n):
        return f"{n:.0f}"
    return f"{n:.1f}"


def human_duration_ns(ns: float | None, significant: bool = False) -> str:
    """A latency: '85µs', '12.3ms', '1.20s'; '-' when there is none. With `significant`,
    three significant digits in every unit ('1.50ms', '12.3s'), as `report` shows them;
    without, at most one decimal below a second, to fit `top`'s narrow columns."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            v = ns / scale
            if unit == "s" and not significant:
                return f"{v:.2f}s"
            decimals = 0 if v >= 100 else 1 if v >= 10 or not significant else 2
            return f"{v:.{decimals}f}{unit}"
    return f"{ns:.0f}ns"


# what printable escapes: C0 and C1 controls, DEL, and bytes surrogateescape'd by a decode
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udcff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00 if code >= 0xDC80 else code:02x}"  # a surrogateescape'd byte: the byte


def printable(text: str) -> str:
    """A file name made safe for a terminal: control characters and undecodable
    bytes become visible escapes, so a hostile name cannot move the cursor. One
    regex (_UNSAFE) says what is escaped: a name with none is returned as it is
    (the exporter asks for every active file's name an interval: a loop over each
    character cost ~19 us a name, issue 60)."""
    return text if _UNSAFE.search(text) is None else _UNSAFE.sub(_escape, text)


def shorten(path: str, datadir: str | None, width: int) -> str:
    """Path relative to the datadir, cut from the left to fit width."""
    if datadir and path.startswith(datadir.rstrip("/") + "/"):
        path = path[len(datadir.rstrip("/")) + 1 :]
    path = printable(path)
    if len(path) > width > 1:
        return "…" + path[-(width - 1) :]
    return path


def utc_time(ts: float) -> str:
    """A wall-clock time for a header: '2026-01-31 12:00:00 UTC'."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
