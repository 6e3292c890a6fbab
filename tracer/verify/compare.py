"""The comparison of `mysqlio verify`: per file and direction, mysqlio's bytes against
performance_schema's with the edges' allowance, the redo log's reference figure, the
memory-mapped files left out, and the verdict."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from ..mapped_files import FIX
from ..units import printable
from .pfs import REDO_STATUS, FileIo, follow_renames, summary_delta
from .window import Window

MIN_BYTES = 1 << 20  # judge only files with more than this in the window
TOLERANCE = 0.02  # relative, beyond the edge allowance; see tests/test_verify.py for the measured spread
MAPPED_ROW_NOTE = "memory-mapped: writes without a system call, not counted by mysqlio; not compared"


@dataclass
class Comparison:
    """One file and direction."""

    path: str
    name: str  # relative to the datadir when under it
    kind: str
    op: str  # "write" | "read"
    pfs_bytes: int | None  # None: performance_schema has no row for this file
    pfs_edge_bytes: int
    mysqlio_bytes: int
    pfs_ops: int | None
    mysqlio_ops: int
    judged: bool = False
    agrees: bool | None = None
    note: str = ""

    @property
    def difference(self) -> int | None:
        return None if self.pfs_bytes is None else self.mysqlio_bytes - self.pfs_bytes

    @property
    def difference_pct(self) -> float | None:
        if self.pfs_bytes is None or self.difference is None or not self.pfs_bytes:
            return None
        return 100.0 * self.difference / self.pfs_bytes

    def to_json(self) -> dict[str, Any]:
        pct = self.difference_pct
        return {
            "path": self.path,
            "name": self.name,
            "kind": self.kind,
            "op": self.op,
            "pfs_bytes": self.pfs_bytes,
            "pfs_edge_bytes": self.pfs_edge_bytes,
            "mysqlio_bytes": self.mysqlio_bytes,
            "difference_bytes": self.difference,
            "difference_pct": None if pct is None else round(pct, 4),
            "pfs_ops": self.pfs_ops,
            "mysqlio_ops": self.mysqlio_ops,
            "judged": self.judged,
            "agrees": self.agrees,
            "note": self.note,
        }


def _judge(row: Comparison, min_bytes: int, tolerance: float) -> None:
    if row.pfs_bytes is None or row.pfs_bytes <= min_bytes:
        return
    row.judged = True
    excess = max(0, abs(row.mysqlio_bytes - row.pfs_bytes) - row.pfs_edge_bytes)
    row.agrees = excess <= tolerance * row.pfs_bytes


def _bracket(inner: int, outer: int) -> tuple[int, int]:
    """Middle of [inner, outer] (rounded down) and the distance to its far end."""
    low, high = min(inner, outer), max(inner, outer)
    middle = low + (high - low) // 2
    return middle, high - middle


def relative_to_datadir(path: str, datadir: str | None) -> str:
    """`path` relative to the datadir when under it."""
    return os.path.relpath(path, datadir) if datadir and path.startswith(datadir.rstrip("/") + "/") else path


def compare(
    window: Window,
    datadir: str | None,
    kind_of: Callable[[str], str],
    min_bytes: int = MIN_BYTES,
    tolerance: float = TOLERANCE,
    mapped: Collection[str] = (),
) -> list[Comparison]:
    """One Comparison per file and direction that either side saw bytes or requests for.
    Files in `mapped` (written through a shared mapping, see mysqlio.mapped_files) are
    never judged: mysqlio cannot count their writes."""
    (s0a, s0b), (s1a, s1b) = window.start, window.end
    # a file renamed in the window (MySQL's redo files) counted from under its end name
    start_b = follow_renames(s0b.files, s0b.instances, s1a.instances)
    start_a = follow_renames(s0a.files, s0a.instances, s1b.instances)
    inner = summary_delta(start_b, s1a.files)
    outer = summary_delta(start_a, s1b.files)
    with_row = start_a.keys() | start_b.keys() | s1a.files.keys() | s1b.files.keys()
    gone = (start_a.keys() | start_b.keys()) - (s1a.files.keys() & s1b.files.keys())
    paths = inner.keys() | outer.keys() | window.traced.keys()

    rows: list[Comparison] = []
    for path in sorted(paths):
        traced = window.traced.get(path)
        ours = traced.io if traced else FileIo()
        kind = traced.kind if traced else kind_of(path)
        pin, pout = inner.get(path, FileIo()), outer.get(path, FileIo())
        for op in ("write", "read"):
            ob, oo = getattr(ours, f"{op}_bytes"), getattr(ours, f"{op}_ops")
            ib, ob_outer = getattr(pin, f"{op}_bytes"), getattr(pout, f"{op}_bytes")
            if not (ob or oo or ib or ob_outer or getattr(pout, f"{op}_ops")):
                continue
            note = MAPPED_ROW_NOTE if path in mapped else ""
            pfs_bytes: int | None
            if path not in with_row:
                pfs_bytes, edge, pfs_ops = None, 0, None
                note = note or "no performance_schema row: not instrumented"
            else:
                pfs_bytes, edge = _bracket(ib, ob_outer)
                pfs_ops = _bracket(getattr(pin, f"{op}_ops"), getattr(pout, f"{op}_ops"))[0]
                if path in gone:
                    note = note or "performance_schema dropped its row during the window (file deleted?)"
                    pfs_bytes = None
            if not note and traced is not None and traced.deleted:
                note = "deleted"
            row = Comparison(
                path, relative_to_datadir(path, datadir), kind, op, pfs_bytes, edge, ob, pfs_ops, oo, note=note
            )
            if path not in mapped:
                _judge(row, min_bytes, tolerance)
            rows.append(row)
    rows.sort(key=lambda r: (not r.judged, r.op != "write", -(r.pfs_bytes or r.mysqlio_bytes), r.name))
    return rows


@dataclass(frozen=True)
class MappedFile:
    """A server file written through a shared, writable memory mapping: not compared."""

    path: str
    name: str  # relative to the datadir when under it
    kind: str
    mapped_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "kind": self.kind, "mapped_bytes": self.mapped_bytes}


def mapped_statement(files: list[MappedFile]) -> str | None:
    """What verify says of memory-mapped files (None when there are none)."""
    if not files:
        return None
    names = ", ".join(f"{printable(f.name)} ({f.kind})" for f in files)
    one = len(files) == 1
    text = (
        f"not compared: {names} {'is' if one else 'are'} memory-mapped shared and writable; the server writes "
        f"{'it' if one else 'them'} by storing into the mapping and the kernel writes the pages back, with no "
        "system call, so mysqlio counts none of those writes: verify claims neither agreement nor difference "
        f"for {'it' if one else 'them'}"
    )
    if any(f.kind == "redo" for f in files):
        text += f"; to compare the redo log, {FIX}"
    return text


@dataclass
class RedoReference:
    """The redo log has no performance_schema row in MariaDB: for reference, the bytes
    mysqlio saw written to it next to the redo the server generated (Innodb_os_log_written).
    Not a check: the log is written in whole blocks, so a commit that adds a few
    hundred bytes rewrites the last partial block and the file receives more."""

    status_bytes: int
    status_edge_bytes: int
    mysqlio_bytes: int
    files: list[str]

    @property
    def ratio(self) -> float | None:
        return self.mysqlio_bytes / self.status_bytes if self.status_bytes else None

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "status_variable": REDO_STATUS,
            "status_bytes": self.status_bytes,
            "status_edge_bytes": self.status_edge_bytes,
            "mysqlio_bytes": self.mysqlio_bytes,
            "ratio": None if ratio is None else round(ratio, 4),
            "files": self.files,
        }


def redo_reference(window: Window, rows: list[Comparison], mapped: Collection[MappedFile] = ()) -> RedoReference | None:
    """Only when the server has the counter, mysqlio saw a redo file written and
    performance_schema has no row for it (MySQL and MariaDB 10.5 instrument the redo
    log: compared above), and no redo file is memory-mapped (mysqlio sees none of its writes)."""
    values = [r.redo_written for r in (*window.start, *window.end)]
    redo = [t for t in window.traced.values() if t.kind == "redo" and t.io.write_bytes]
    if any(v is None for v in values) or not redo or any(f.kind == "redo" for f in mapped):
        return None
    if any(r.kind == "redo" and r.pfs_bytes is not None for r in rows):
        return None
    a0, b0, a1, b1 = (int(v) for v in values)  # type: ignore[arg-type]
    middle, edge = _bracket(a1 - b0, b1 - a0)
    return RedoReference(middle, edge, sum(t.io.write_bytes for t in redo), sorted(t.path for t in redo))


@dataclass
class Verdict:
    state: str  # "agree" | "differ" | "inconclusive"
    judged: int
    agreeing: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "judged": self.judged, "agreeing": self.agreeing, "text": self.text}


def verdict(
    rows: list[Comparison], lost_events: int, min_bytes: int, tolerance: float, mapped: Iterable[str] = ()
) -> Verdict:
    """`mapped`: names of memory-mapped files, said to be left out."""
    judged = [r for r in rows if r.judged]
    agreeing = [r for r in judged if r.agrees]
    limit = f"more than {min_bytes / (1 << 20):g} MiB"
    left_out = ", ".join(printable(name) for name in mapped)
    if left_out:
        left_out = f"; not compared: {left_out} (memory-mapped)"
    if lost_events:
        return Verdict(
            "inconclusive",
            len(judged),
            len(agreeing),
            f"inconclusive: mysqlio lost {lost_events} events in the window, its counts are low",
        )
    if not judged:
        return Verdict(
            "inconclusive",
            0,
            0,
            f"inconclusive: no file had {limit} written or read in the window; use a longer -d{left_out}",
        )
    if len(agreeing) == len(judged):
        return Verdict(
            "agree",
            len(judged),
            len(agreeing),
            f"agreement: {len(judged)} of {len(judged)} rows with {limit} agree "
            f"(difference within ± plus {tolerance:.0%}){left_out}",
        )
    bad = ", ".join(f"{r.name} ({r.op})" for r in judged if not r.agrees)
    return Verdict(
        "differ",
        len(judged),
        len(agreeing),
        f"DIFFERENCE: {len(judged) - len(agreeing)} of {len(judged)} rows with {limit} differ by more "
        f"than ± plus {tolerance:.0%}: {bad}{left_out}",
    )
