"""The result of `mysqlio verify`, as one JSON object or as text."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from ..root_paths import shown_path
from ..units import printable
from .compare import MIN_BYTES, TOLERANCE, Comparison, MappedFile, RedoReference, Verdict, mapped_statement
from .pfs import REDO_STATUS
from .window import Window

EXPLANATION = (
    "Each edge reads performance_schema just before and just after mysqlio's drain; what the server did "
    "in between can fall on either side, hence ±. Beyond that, requests in flight at an edge differ: "
    "performance_schema counts InnoDB's asynchronous writes when submitted, mysqlio counts io_uring "
    "requests when they complete. performance_schema has no row for files it does not instrument "
    "(MariaDB 10.11, 11.8: the redo log) and drops the row of a deleted file."
)


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


def shown_names(
    rows: list[Comparison], mapped: list[MappedFile], redo: RedoReference | None, root: str
) -> tuple[list[Comparison], list[MappedFile], RedoReference | None]:
    """The result's paths as the server names them (root_paths.shown_path of the server's
    root here, layout.host_root): names relative to the datadir stay."""
    rows = [replace(r, path=shown_path(r.path, root), name=shown_path(r.name, root)) for r in rows]
    mapped = [replace(f, path=shown_path(f.path, root), name=shown_path(f.name, root)) for f in mapped]
    if redo is not None:
        redo = replace(redo, files=[shown_path(p, root) for p in redo.files])
    return rows, mapped, redo


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
