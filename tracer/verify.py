"""`mysqlio verify`: our per-file bytes against the server's own performance_schema.

Over a window of `-d` seconds, mysqlio traces the server while
performance_schema.file_summary_by_instance is read at both edges; per file
and direction the two byte counts are compared. Each edge reads
performance_schema twice, just before and just after mysqlio's drain, so what
the server did between those two reads is the edge's uncertainty: the
performance_schema figure printed is the middle of the range between the inner
window (after the first drain .. before the last) and the outer one (before ..
after), and `±` half its width. A file agrees when the difference minus that allowance is
within TOLERANCE of performance_schema's figure; only files with more than
MIN_BYTES in the window are judged.

performance_schema names files as the server sees them: relative names are
joined with the server's own datadir, and a server in its own root (chroot,
container) has its names resolved inside that root and given as the paths here
that mysqlio reports (`server_paths`, the mapping mysqlio.layout uses).

Known reasons for small differences, printed with the result:
- requests in flight at an edge: InnoDB's asynchronous writes count in
  performance_schema when submitted; mysqlio counts io_uring requests when they
  complete (libaio ones when submitted), so a page-cleaner batch in flight at one
  edge lands on different sides of it;
- performance_schema only knows instrumented files: MariaDB 10.11 and 11.8 do not
  instrument the redo log (10.5 does); when mysqlio sees it written, it is shown
  next to Innodb_os_log_written for reference; files past
  performance_schema_max_file_instances are lost (Performance_schema_file_instances_lost);
- a file deleted during the window loses its performance_schema row.

A file the server writes through a shared memory mapping (MariaDB 11.8's redo
log, innodb_log_file_mmap; see mysqlio.mapped_files) is never judged: no system
call carries its writes, so mysqlio cannot count them. verify names it, in the
text, the JSON ("mapped", "mapped_note") and the verdict, and claims neither
agreement nor difference for it.

When the server is idle at both edges the comparison is exact (tests/test_verify.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import pymysql

from . import target
from .errors import TargetGone, UserError
from .layout import host_root, realpath_in_root, to_server_path
from .model import Interval
from .mysql_conn import ConnectionOptions, Connector, error_text, query
from .units import printable

MIN_BYTES = 1 << 20  # judge only files with more than this in the window
TOLERANCE = 0.02  # relative, beyond the edge allowance; see tests/test_verify.py for the measured spread
VERIFY_TIMEOUT_S = 10.0  # file_summary_by_instance of a server with many tables takes a while
DRAIN_EVERY_S = 1.0  # the kernel maps are drained at least this often during the window
REDO_STATUS = "Innodb_os_log_written"
LOST_STATUS = "Performance_schema_file_instances_lost"
MAPPED_ROW_NOTE = "memory-mapped: writes without a system call, not counted by mysqlio; not compared"
_PFS_QUERY = (
    "SELECT FILE_NAME, SUM_NUMBER_OF_BYTES_WRITE, COUNT_WRITE, SUM_NUMBER_OF_BYTES_READ, COUNT_READ "
    "FROM performance_schema.file_summary_by_instance"
)

EXPLANATION = (
    "Each edge reads performance_schema just before and just after mysqlio's drain; what the server did "
    "in between can fall on either side, hence ±. Beyond that, requests in flight at an edge differ: "
    "performance_schema counts InnoDB's asynchronous writes when submitted, mysqlio counts io_uring "
    "requests when they complete. performance_schema has no row for files it does not instrument "
    "(MariaDB 10.11, 11.8: the redo log) and drops the row of a deleted file."
)


@dataclass(frozen=True)
class FileIo:
    """Bytes and requests of one file (either side)."""

    write_bytes: int = 0
    write_ops: int = 0
    read_bytes: int = 0
    read_ops: int = 0

    def __add__(self, other: FileIo) -> FileIo:
        return FileIo(
            self.write_bytes + other.write_bytes,
            self.write_ops + other.write_ops,
            self.read_bytes + other.read_bytes,
            self.read_ops + other.read_ops,
        )

    def __sub__(self, other: FileIo) -> FileIo:
        return FileIo(
            self.write_bytes - other.write_bytes,
            self.write_ops - other.write_ops,
            self.read_bytes - other.read_bytes,
            self.read_ops - other.read_ops,
        )

    def __bool__(self) -> bool:
        return any((self.write_bytes, self.write_ops, self.read_bytes, self.read_ops))


PfsSnapshot = dict[str, FileIo]  # canonical path -> counts since the file's instance was created


def summary_from_rows(
    rows: Iterable[tuple[Any, Any, Any, Any, Any]], datadir: str, canonical: Callable[[str], str] = os.path.normpath
) -> PfsSnapshot:
    """file_summary_by_instance rows (FILE_NAME, bytes written, writes, bytes read,
    reads) -> per path; relative names are relative to the datadir, rows of the
    same file (one per instrument) are summed."""
    out: PfsSnapshot = {}
    for name, wbytes, wcount, rbytes, rcount in rows:
        path = canonical(os.path.join(datadir, str(name)))
        out[path] = out.get(path, FileIo()) + FileIo(int(wbytes), int(wcount), int(rbytes), int(rcount))
    return out


def summary_delta(before: Mapping[str, FileIo], after: Mapping[str, FileIo]) -> dict[str, FileIo]:
    """Per-path difference of two snapshots (a path missing on one side counts 0; zero rows dropped)."""
    out = {}
    for path in before.keys() | after.keys():
        diff = after.get(path, FileIo()) - before.get(path, FileIo())
        if diff:
            out[path] = diff
    return out


def _once_per_name(resolve: Callable[[str], str]) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def canonical(path: str) -> str:
        found = cache.get(path)
        if found is None:
            found = cache[path] = resolve(path)
        return found

    return canonical


def rooted_paths(host: str, proc_root: str) -> Callable[[str], str]:
    """A server path -> the canonical path here, for a server whose root is the
    directory `host` here, readable through `proc_root` (its /proc/PID/root):
    symbolic links resolved inside that root, `host` prepended. "" for `host`:
    our own root, os.path.realpath. Once per name."""
    if not host:
        return _once_per_name(os.path.realpath)
    return _once_per_name(lambda path: host + realpath_in_root(proc_root, path))


def server_paths(pid: int) -> Callable[[str], str]:
    """The server's name for a file -> the path mysqlio reports for it.

    performance_schema names files as the server sees them, built from its
    configured (maybe symlinked) datadir; mysqlio's paths are canonical paths
    here. A server in another root (chroot, container) names its files inside
    that root: they are resolved there and given under the root's path here
    (mysqlio.layout.host_root), as read_layout() gives the server's layout."""
    return rooted_paths(host_root(pid), f"/proc/{pid}/root")


def read_file_summary(
    conn: pymysql.connections.Connection, datadir: str, canonical: Callable[[str], str]
) -> PfsSnapshot:
    rows = query(conn, _PFS_QUERY)
    return summary_from_rows(
        (
            (
                r["FILE_NAME"],
                r["SUM_NUMBER_OF_BYTES_WRITE"],
                r["COUNT_WRITE"],
                r["SUM_NUMBER_OF_BYTES_READ"],
                r["COUNT_READ"],
            )
            for r in rows
        ),
        datadir,
        canonical,
    )


def _status_value(conn: pymysql.connections.Connection, name: str) -> int | None:
    rows = query(conn, "SHOW GLOBAL STATUS WHERE Variable_name = %s", (name,))
    try:
        return int(rows[0]["Value"]) if rows else None
    except (TypeError, ValueError):
        return None


# -- the window ----------------------------------------------------------------


@dataclass
class Reading:
    """What the server said at one moment: per-file counts and the redo counter."""

    files: PfsSnapshot
    redo_written: int | None


@dataclass
class TracedFile:
    path: str
    kind: str
    deleted: bool = False
    io: FileIo = field(default_factory=FileIo)


@dataclass
class Window:
    """Both sides of one window; start/end edges are (before drain, after drain)."""

    start: tuple[Reading, Reading]
    end: tuple[Reading, Reading]
    traced: dict[str, TracedFile]
    seconds: float
    lost_events: int = 0
    intervals: int = 0


class Drainer(Protocol):
    """What verify needs of top's IntervalSampler: everything counted since the last call."""

    def sample(self) -> Interval: ...


def _add_interval(traced: dict[str, TracedFile], interval: Interval) -> int:
    for f in interval.files:
        row = traced.get(f.path)
        if row is None:
            row = traced[f.path] = TracedFile(f.path, f.kind)
        row.deleted = f.deleted
        row.io = row.io + FileIo(f.write_bytes, f.write_ops, f.read_bytes, f.read_ops)
    return int(interval.lost_events)


def measure_window(
    drainer: Drainer,
    read_server: Callable[[], Reading],
    duration_s: float,
    wait: Callable[[float], None] = time.sleep,
) -> Window:
    """Drain (discard) bracketed by two server readings, trace for `duration_s`
    draining every DRAIN_EVERY_S, then the last drain bracketed the same way."""
    s0a = read_server()
    drainer.sample()  # everything before the window
    s0b = read_server()
    started = time.monotonic()
    traced: dict[str, TracedFile] = {}
    lost = intervals = 0
    deadline = started + duration_s
    while True:
        left = deadline - time.monotonic()
        if left <= DRAIN_EVERY_S:
            break
        wait(DRAIN_EVERY_S)
        lost += _add_interval(traced, drainer.sample())
        intervals += 1
    wait(max(0.0, deadline - time.monotonic()))
    s1a = read_server()
    lost += _add_interval(traced, drainer.sample())
    s1b = read_server()
    return Window((s0a, s0b), (s1a, s1b), traced, time.monotonic() - started, lost, intervals + 1)


# -- the comparison --------------------------------------------------------------


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


def _under(path: str, datadir: str | None) -> str:
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
    inner = summary_delta(s0b.files, s1a.files)
    outer = summary_delta(s0a.files, s1b.files)
    with_row = s0a.files.keys() | s0b.files.keys() | s1a.files.keys() | s1b.files.keys()
    gone = (s0a.files.keys() | s0b.files.keys()) - (s1a.files.keys() & s1b.files.keys())
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
            row = Comparison(path, _under(path, datadir), kind, op, pfs_bytes, edge, ob, pfs_ops, oo, note=note)
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
        from .mapped_files import FIX

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


# -- output ----------------------------------------------------------------------


@dataclass
class VerifyResult:
    pid: int
    server: str
    endpoint: str
    window: Window
    rows: list[Comparison]
    redo: RedoReference | None
    verdict: Verdict
    warnings: list[str]
    mapped: list[MappedFile] = field(default_factory=list)
    min_bytes: int = MIN_BYTES
    tolerance: float = TOLERANCE

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "server": self.server,
            "connection": self.endpoint,
            "window_s": round(self.window.seconds, 6),
            "intervals": self.window.intervals,
            "lost_events": self.window.lost_events,
            "min_bytes": self.min_bytes,
            "tolerance_pct": round(100 * self.tolerance, 4),
            "verdict": self.verdict.to_json(),
            "files": [r.to_json() for r in self.rows],
            "redo": None if self.redo is None else self.redo.to_json(),
            "mapped": [f.to_json() for f in self.mapped],
            "mapped_note": mapped_statement(self.mapped),
            "warnings": self.warnings,
            "explanation": EXPLANATION,
        }


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}%"


def write_text(result: VerifyResult, out: TextIO, show_all: bool = False) -> None:
    w = result.window
    out.write(
        f"mysqlio verify: pid {result.pid} ({printable(result.server)}), {w.seconds:.1f} s window, "
        f"performance_schema.file_summary_by_instance via {printable(result.endpoint)}\n\n"
    )
    rows = [r for r in result.rows if show_all or r.judged or r.mysqlio_bytes > result.min_bytes]
    width = max([24, *(len(printable(r.name)) for r in rows)])
    out.write(f"{'op':<6}{'file':<{width}} {'performance_schema':>22} {'mysqlio':>14} {'difference':>12} {'%':>8}\n")
    for r in rows:
        pfs = (
            "-" if r.pfs_bytes is None else f"{r.pfs_bytes:,}" + (f" ±{r.pfs_edge_bytes:,}" if r.pfs_edge_bytes else "")
        )
        diff = "" if r.difference is None else f"{r.difference:+,}"
        mark = "" if not r.judged else ("  ok" if r.agrees else "  DIFFERS")
        note = f"  ({r.note})" if r.note else ""
        out.write(
            f"{r.op:<6}{printable(r.name):<{width}} {pfs:>22} {r.mysqlio_bytes:>14,} {diff:>12} {_pct(r.difference_pct):>8}{mark}{note}\n"
        )
    hidden = len(result.rows) - len(rows)
    if hidden:
        out.write(
            f"({hidden} more with at most {result.min_bytes / (1 << 20):g} MiB on both sides: --json lists them)\n"
        )
    if result.redo is not None:
        rd = result.redo
        edge = f" ±{rd.status_edge_bytes:,}" if rd.status_edge_bytes else ""
        ratio = f" ({rd.ratio:.2f}×)" if rd.ratio else ""
        out.write(
            f"\nredo log, not in performance_schema: mysqlio saw {rd.mysqlio_bytes:,} bytes written to it{ratio} "
            f"while the server generated {rd.status_bytes:,}{edge} bytes of redo ({REDO_STATUS}); "
            "not a check: the log is written in whole blocks, so each commit rewrites its last partial block\n"
        )
    statement = mapped_statement(result.mapped)
    if statement:
        out.write(f"\n{statement}\n")
    for warning in result.warnings:
        out.write(f"\nwarning: {warning}\n")
    out.write(f"\n{result.verdict.text}\n")
    out.write(f"why small differences are expected: {EXPLANATION}\n")
    out.flush()


# -- the command -----------------------------------------------------------------


def _check_performance_schema(conn: pymysql.connections.Connection, who: str) -> list[str]:
    """UserError when the table cannot be read; warnings when counts may be missing."""
    rows = query(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name = 'performance_schema'")
    if not rows or str(rows[0]["Value"]).upper() not in ("ON", "1"):
        raise UserError(
            "performance_schema is OFF on this server, so there is nothing to compare with; "
            "set performance_schema=ON in the [mysqld] section of its option file and restart it "
            "(it cannot be switched on at run time)"
        )
    try:
        query(conn, "SELECT FILE_NAME FROM performance_schema.file_summary_by_instance LIMIT 1")
    except pymysql.MySQLError as exc:
        raise UserError(
            f"{who} cannot read performance_schema.file_summary_by_instance: {error_text(exc)}; "
            "GRANT SELECT ON performance_schema.* to that user"
        ) from None
    warnings = []
    off = query(
        conn,
        "SELECT NAME FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/io/file/%' AND ENABLED = 'NO'",
    )
    if off:
        names = ", ".join(str(r["NAME"]) for r in off[:5]) + (", ..." if len(off) > 5 else "")
        warnings.append(
            f"{len(off)} file instruments are disabled in performance_schema.setup_instruments ({names}); their files count 0 there"
        )
    return warnings


def run_verify(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Exit 0 when every judged file agrees, 1 when one differs or nothing could be judged."""
    from . import mapped_files
    from .backend import open_probe, select_backend
    from .classify import Classifier
    from .layout import read_layout
    from .resolve import FileResolver
    from .top import IntervalSampler

    pid = args.pid if args.pid is not None else target.find_server()
    target.check_pid(pid)
    pid = target.tgid_of(pid)
    backend = select_backend(getattr(args, "backend", "auto"))  # before a password prompt
    connector = Connector.resolve(ConnectionOptions.from_args(args), pid, timeout_s=VERIFY_TIMEOUT_S)
    conn = connector.open()
    try:
        warnings = _check_performance_schema(conn, connector.user)
        lost_before = _status_value(conn, LOST_STATUS) or 0
        layout = read_layout(pid)
        here = server_paths(pid)  # performance_schema's names are the server's: its datadir, inside its root
        if layout.datadir:
            server_datadir, datadir = to_server_path(layout.datadir, layout.root), layout.datadir
        else:
            server_datadir = str(query(conn, "SELECT @@datadir AS d")[0]["d"]).rstrip("/") or "/"
            datadir = here(server_datadir)
        has_redo_counter = _status_value(conn, REDO_STATUS) is not None
        classifier = Classifier(layout)
        mapped = [
            MappedFile(f.path, _under(f.path, datadir), f.kind, f.mapped_bytes)
            for f in mapped_files.mapped_files(pid, classifier) or []
        ]

        def read_server() -> Reading:
            try:
                files = read_file_summary(conn, server_datadir, here)
                redo = _status_value(conn, REDO_STATUS) if has_redo_counter else None
            except pymysql.MySQLError as exc:
                raise UserError(f"lost the connection to {connector.describe()}: {error_text(exc)}") from None
            return Reading(files, redo)

        with open_probe(backend, pid) as probe:
            resolver = FileResolver(pid, probe.kernel_name)
            resolver.scan_fds()
            sampler = IntervalSampler(probe, resolver, classifier, pid)
            # on stderr in both modes: the probes are attached, the window starts now
            print(
                f"mysqlio: comparing with performance_schema for {args.duration:g} s ...", file=sys.stderr, flush=True
            )
            window = measure_window(sampler, read_server, args.duration)
        if not target.is_alive(pid):
            raise TargetGone(f"process {pid} exited during the window; nothing to compare")
        lost_after = _status_value(conn, LOST_STATUS) or 0
    finally:
        conn.close()
    mapped_paths = {f.path for f in mapped}
    rows = compare(window, datadir, classifier.kind, mapped=mapped_paths)
    rowless = [
        r.name
        for r in rows
        if r.pfs_bytes is None and r.kind != "redo" and r.mysqlio_bytes and r.path not in mapped_paths
    ]
    if lost_after and rowless:
        grew = f", {lost_after - lost_before} of them during the window" if lost_after > lost_before else ""
        warnings.append(
            f"{LOST_STATUS} = {lost_after}{grew}: performance_schema could not track some files, so "
            f"{', '.join(rowless[:5])} may have no row for that reason (performance_schema_max_file_instances)"
        )
    name = target.process_name(pid)
    result = VerifyResult(
        pid=pid,
        server=f"{name} {layout.version}" if layout.version else name,
        endpoint=connector.endpoint.describe(),
        window=window,
        rows=rows,
        redo=redo_reference(window, rows, mapped),
        verdict=verdict(rows, window.lost_events, MIN_BYTES, TOLERANCE, [f.name for f in mapped]),
        warnings=warnings,
        mapped=mapped,
    )
    if args.json:
        out.write(json.dumps(result.to_json()) + "\n")
        out.flush()
    else:
        write_text(result, out)
    return 0 if result.verdict.state == "agree" else 1
