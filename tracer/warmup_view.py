"""How the warm-up after a restart (mysqlio.warmup) reads: one line for `top`'s screen and
text output, and the per-second table of `report` for a trace with a restart."""

from __future__ import annotations

from collections.abc import Sequence

from .units import human_bytes
from .warmup import SETTLE_FRACTION, SETTLE_S, Warmup

LINE_TABLES = 3  # busiest tables named on the screen's line


def _tables(w: Warmup, n: int) -> str:
    busiest = [t for t in w.busiest(n) if t.disk_read_bytes]
    return ", ".join(f"{t.name} {human_bytes(t.disk_read_bytes)}" for t in busiest)


def warmup_line(w: Warmup | None) -> str | None:
    """The screen's line: "warm-up since restart 12.0 s: 184.0MiB read from disk (62.1MiB/s
    now), settling · sbtest.sbtest1 46.0MiB, …", then "warm-up took 31.0 s: 512.0MiB read
    from disk · …". None before any restart."""
    if w is None:
        return None
    unseen = f" (first {w.unseen_s:.1f} s before tracing not counted)" if w.unseen_s >= 0.05 else ""
    tables = _tables(w, LINE_TABLES)
    tail = f" · {tables}" if tables else ""
    if w.settled:
        duration = w.duration_s or 0.0
        return f"warm-up took {duration:.1f} s: {human_bytes(w.busy_bytes)} read from disk{unseen}{tail}"
    now = sum(t.last_bps for t in w.tables.values())
    return (
        f"warm-up since restart {w.elapsed_s:.1f} s: {human_bytes(w.disk_read_bytes)} read from disk "
        f"({human_bytes(now)}/s now), settling{unseen}{tail}"
    )


def warmup_rule() -> str:
    """The settling rule, as the report states it."""
    return f"settled: disk reads below {SETTLE_FRACTION:.0%} of their peak rate for {SETTLE_S:.0f} s"


def warmup_table(w: Warmup, seconds: Sequence[tuple[float, dict[str, int]]], columns: int = LINE_TABLES) -> list[str]:
    """`report`'s warm-up: a summary line, then one line per second from the restart until
    it settled (seconds since the server started, all disk reads, the busiest tables')."""
    names = [t.name for t in w.busiest(columns) if t.disk_read_bytes]
    width = max([len(n) for n in names] + [9])
    if w.settled:
        head = f"warm-up took {w.duration_s or 0.0:.1f} s: {human_bytes(w.busy_bytes)} read from disk"
    else:
        head = f"warm-up not settled after {w.elapsed_s:.1f} s: {human_bytes(w.disk_read_bytes)} read from disk"
    lines = [head + f" ({warmup_rule()})"]
    if w.unseen_s >= 0.05:
        lines.append(f"the first {w.unseen_s:.1f} s after the start were not traced")
    lines.append(f"{'+s':>6} {'disk rd':>10} " + " ".join(f"{n:>{width}}" for n in names))
    end = w.busy_end_t if w.settled and w.busy_end_t is not None else None
    for t, by in seconds:
        if end is not None and t > end + SETTLE_S:
            break
        cells = " ".join(f"{human_bytes(by.get(n, 0)):>{width}}" for n in names)
        lines.append(f"{t - w.since:>6.0f} {human_bytes(sum(by.values())):>10} {cells}")
    return lines
