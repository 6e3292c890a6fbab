"""Human units for byte counts and rates."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(n: float) -> str:
    """1536 -> '1.5KiB'; exact below 1 KiB."""
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_rate(n: float) -> str:
    """Operations per second: 3 significant digits, k/M above 1000."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    if n >= 100 or n == int(n):
        return f"{n:.0f}"
    return f"{n:.1f}"


def human_duration_ns(ns: float | None) -> str:
    """A latency: '85µs', '12.3ms', '1.20s'; '-' when there is none."""
    if ns is None:
        return "-"
    if ns < 1000:
        return f"{ns:.0f}ns"
    if ns < 1_000_000:
        return f"{ns / 1000:.0f}µs" if ns >= 100_000 else f"{ns / 1000:.1f}µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.0f}ms" if ns >= 100_000_000 else f"{ns / 1_000_000:.1f}ms"
    return f"{ns / 1_000_000_000:.2f}s"


def printable(text: str) -> str:
    """A file name made safe for a terminal: control characters and undecodable
    bytes become visible escapes, so a hostile name cannot move the cursor."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif 0xDC80 <= code <= 0xDCFF:  # surrogateescape'd byte
            out.append(f"\\x{code - 0xDC00:02x}")
        else:
            out.append(ch)
    return "".join(out)
