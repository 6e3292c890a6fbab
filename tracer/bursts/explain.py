"""The cause of a train, in one line: "ibdata1 · 80 × 1 MiB writes · every 10 s → ...",
"ibdata1: 80 MiB written back every 10.0 s by fsync → ..."

The timers are those of docs "Periodic behaviour that shows up as bursts", and the
kernel flusher's (vm.dirty_writeback_centisecs, vm.dirty_expire_centisecs); any
other period is "unknown" (a writeback train says only what made the kernel write)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..units import human_bytes, printable
from .fold import folded_label
from .server_causes import generic_ok, server_cause
from .train import Train

if TYPE_CHECKING:
    from ..server_timers import ServerFacts

EXPLAIN_TOL = 0.15  # a known timer matches within +-15 % of its period

_PAGES = frozenset({"system", "doublewrite", "table", "undo", "dictionary"})  # dictionary: MySQL's mysql.ibd
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


# what made the kernel write a file's pages back (model.WRITEBACK_CAUSES), as "by ..." says it
WRITEBACK_BY_TEXT = {
    "fsync": "fsync",
    "fdatasync": "fdatasync",
    "sync_file_range": "sync_file_range",
    "msync": "msync",
    "write": "O_SYNC / O_DSYNC writes",
    "server_other": "another call of the server",
    "flusher_periodic": "the kernel flusher (dirty_expire)",
    "flusher_background": "the kernel flusher (dirty_background)",
    "memory": "memory reclaim",
    "sync": "sync(2) / syncfs(2)",
    "other": "another process",
}
_SYNC_BY = frozenset({"fsync", "fdatasync", "sync_file_range", "msync"})  # the server's sync timers apply
_WRITE_BY = frozenset({"write", "server_other"})  # ... its write timers
DIRTY_WRITEBACK_S = 5.0  # vm.dirty_writeback_centisecs (default 500): the flusher wakes up
DIRTY_EXPIRE_S = 30.0  # vm.dirty_expire_centisecs (default 3000): pages this old are written back
# (lo, hi, why) of the periodic flusher's writeback: it wakes every 5 s and writes back what is
# older than 30 s, so a file written steadily is written back every 30 to 35 s
_FLUSHER_TIMERS = [
    (
        DIRTY_WRITEBACK_S * (1 - EXPLAIN_TOL),
        DIRTY_WRITEBACK_S * (1 + EXPLAIN_TOL),
        "the flusher's wake-up, vm.dirty_writeback_centisecs (5 s)",
    ),
    (
        DIRTY_EXPIRE_S * (1 - EXPLAIN_TOL),
        (DIRTY_EXPIRE_S + DIRTY_WRITEBACK_S) * (1 + EXPLAIN_TOL),
        "pages older than vm.dirty_expire_centisecs (30 s), at the flusher's next wake-up (every 5 s)",
    ),
]


def _what(kind: str, metric: str, request_size: int | None, region: str = "") -> str | None:
    """What a write burst of this kind of file is, from the file alone (or, for ibdata1, the
    region its writes went to: ibdata_regions, read from the tablespace itself)."""
    if metric != "write":
        return None
    if region == "doublewrite":
        return "doublewrite batches"  # every page flush batch is written here first
    if region:
        return f"{region} pages"
    if kind == "doublewrite" or (kind == "system" and request_size and request_size > PAGE):
        return "doublewrite flush"  # batches of pages: ibdata1 holds the doublewrite buffer (<= 8.0.19, MariaDB)
    if kind == "system" and not request_size:
        return "doublewrite or page flush"
    if kind in _PAGES:
        return "page flush"
    return None


def _why(kind: str, metric: str, period_s: float, facts: ServerFacts | None = None) -> str | None:
    """The known timer of this kind of file at this period (with the server's facts: only
    those its settings do not contradict, server_causes.generic_ok)."""
    if not generic_ok(kind, metric, facts):
        return None
    for kinds, m, period, text in _TIMERS:
        if kind in kinds and metric == m and abs(period_s - period) <= EXPLAIN_TOL * period:
            return text
    return None


def cause(
    kind: str,
    metric: str,
    period_s: float,
    request_size: int | None = None,
    facts: ServerFacts | None = None,
    server_why: str | None = None,
    region: str = "",
) -> str:
    """What and why, as far as the facts go; "unknown" otherwise. `server_why`: the
    server's own cause (server_causes.server_cause), before any generic timer."""
    what = _what(kind, metric, request_size, region)
    why = server_why or _why(kind, metric, period_s, facts)
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


def writeback_why(kind: str, by: str | None, period_s: float, facts: ServerFacts | None = None) -> str | None:
    """Why the kernel writes a file back at this period: the flusher's timers, or the
    server's timer of the sync (or write) that made it write; None: no known timer."""
    if by == "flusher_periodic":
        return next((why for lo, hi, why in _FLUSHER_TIMERS if lo <= period_s <= hi), None)
    if by in _SYNC_BY:
        return _why(kind, "sync", period_s, facts)
    if by in _WRITE_BY:
        return _why(kind, "write", period_s, facts)
    return None


def human_period(period_s: float) -> str:
    if abs(period_s - 1.0) <= 0.05:
        return "once a second"
    shown = f"{period_s:.0f}" if period_s >= 10 else f"{round(period_s, 1):g}"
    return f"every {shown} s"


def explain(t: Train, facts: ServerFacts | None = None) -> str:
    """One line: file · what · how often → cause (or "unknown"). With the server's
    facts (--mysql), what the server says comes first (server_causes)."""
    name = printable(os.path.basename(t.file) or t.file)
    if t.files is not None:  # MySQL's redo directory, its files one series: "#innodb_redo (5 files)"
        name = folded_label(name, t.files)
    # a region of ibdata1 is a file of its own for the detector: "…/ibdata1 · doublewrite"
    region = name.rsplit(" · ", 1)[1] if " · " in name and t.kind == "system" else ""
    server_why = server_cause(t, facts) if facts is not None else None
    if t.metric == "writeback":
        what = f"{name}: {human_size(t.bytes_per_burst)} written back every {t.period_s:.1f} s"
        if t.writeback_by:
            what += f" by {WRITEBACK_BY_TEXT.get(t.writeback_by, t.writeback_by)}"
        if t.twin == "write":
            what += ", the disk's spike of its writes"
        why = server_why or writeback_why(t.kind, t.writeback_by, t.period_s, facts)
        return f"{what} → {why}" if why else what
    if t.metric == "sync":
        what = f"{name} {t.sync_call} {human_period(t.period_s)}"
    else:
        size = f"{human_size(t.typical_request_size)} writes" if t.typical_request_size else "writes"
        count = f"{t.ops_per_burst} × " if t.ops_per_burst > 1 else ""
        what = f"{name} · {count}{size} · {human_period(t.period_s)}"
        if region:  # "ibdata1 · doublewrite: 80 × 1 MiB every 10 s"
            size = human_size(t.typical_request_size) if t.typical_request_size else "writes"
            what = f"{name}: {count}{size} {human_period(t.period_s)}"
    why = cause(t.kind, t.metric, t.period_s, t.typical_request_size, facts, server_why, region)
    return f"{what} → {why}"
