"""The cause of a train, in one line: "ibdata1 · 80 × 1 MiB writes · every 10 s → ..."

The timers are those of docs "Periodic behaviour that shows up as bursts"; any
other period is "unknown"."""

from __future__ import annotations

import os

from ..units import human_bytes, printable
from .train import Train

EXPLAIN_TOL = 0.15  # a known timer matches within +-15 % of its period

_PAGES = frozenset({"system", "doublewrite", "table", "undo"})
PAGE = 16 << 10  # InnoDB's default page size

# (kinds, metric, period_s, why): the timers of docs "Periodic behaviour that shows up as bursts"
_TIMERS: list[tuple[frozenset[str], str, float, str]] = [
    (_PAGES, "write", 10.0, "InnoDB master thread's 10 s loop in 5.5, or a checkpoint"),
    (_PAGES, "sync", 10.0, "after the InnoDB master thread's 10 s flush in 5.5, or a checkpoint"),
    (_PAGES, "write", 1.0, "a 1 s loop: the 5.5 master thread or the 5.6+ page cleaner"),
    (_PAGES, "sync", 1.0, "after the page flush of a 1 s loop: the 5.5 master thread or the 5.6+ page cleaner"),
    (frozenset({"redo"}), "write", 10.0, "checkpoint after the InnoDB master thread's 10 s flush in 5.5"),
    (frozenset({"redo"}), "write", 7.0, "checkpoint of the 5.6/5.7 master thread, every 7 s when busy"),
    (frozenset({"redo"}), "sync", 1.0, "innodb_flush_log_at_trx_commit=2"),
    (frozenset({"aria"}), "write", 30.0, "Aria checkpoint, every 30 s"),
    (frozenset({"aria"}), "sync", 30.0, "Aria checkpoint, every 30 s"),
]


def _what(kind: str, metric: str, request_size: int | None) -> str | None:
    """What a write burst of this kind of file is, from the file alone."""
    if metric != "write":
        return None
    if kind == "doublewrite" or (kind == "system" and request_size and request_size > PAGE):
        return "doublewrite flush"  # batches of pages: ibdata1 holds the doublewrite buffer (<= 8.0.19, MariaDB)
    if kind == "system" and not request_size:
        return "doublewrite or page flush"
    if kind in _PAGES:
        return "page flush"
    return None


def _why(kind: str, metric: str, period_s: float) -> str | None:
    """The known timer of this kind of file at this period."""
    for kinds, m, period, text in _TIMERS:
        if kind in kinds and metric == m and abs(period_s - period) <= EXPLAIN_TOL * period:
            return text
    return None


def cause(kind: str, metric: str, period_s: float, request_size: int | None = None) -> str:
    """What and why, as far as the facts go; "unknown" otherwise."""
    what, why = _what(kind, metric, request_size), _why(kind, metric, period_s)
    if what and why:
        return f"{what} ({why})"
    if what:
        return f"{what} (period of no known timer)"
    return why or "unknown"


def human_size(n: float) -> str:
    """1048576 -> '1 MiB'; 1.5 KiB stays '1.5KiB' (units.human_bytes)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            if abs(v - round(v)) <= 0.02 * v:
                return f"{round(v)} {unit}"
            break
    return human_bytes(n)


def human_period(period_s: float) -> str:
    if abs(period_s - 1.0) <= 0.05:
        return "once a second"
    shown = f"{period_s:.0f}" if period_s >= 10 else f"{round(period_s, 1):g}"
    return f"every {shown} s"


def explain(t: Train) -> str:
    """One line: file · what · how often → cause (or "unknown")."""
    name = printable(os.path.basename(t.file) or t.file)
    if t.metric == "sync":
        what = f"{name} {t.sync_call} {human_period(t.period_s)}"
    else:
        size = f"{human_size(t.typical_request_size)} writes" if t.typical_request_size else "writes"
        count = f"{t.ops_per_burst} × " if t.ops_per_burst > 1 else ""
        what = f"{name} · {count}{size} · {human_period(t.period_s)}"
    return f"{what} → {cause(t.kind, t.metric, t.period_s, t.typical_request_size)}"
