"""Pure rendering: screen data in, a rich renderable out (snapshot-tested)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .units import human_bytes, human_duration_ns, human_rate, printable, shorten
from .view import ScreenRow

SPARK = "▁▂▃▄▅▆▇█"
WIDE = 120  # from this width on, a sparkline column is shown


@dataclass(frozen=True)
class Header:
    pid: int
    server: str  # e.g. "MariaDB 10.11.19" or the process name
    elapsed_s: float
    interval_s: float
    write_bps: float
    read_bps: float
    sync_ps: float
    lost_events: int
    group: str
    sort: str
    datadir: str | None = None
    banner: str | None = None
    latency: bool = False
    server_status: str | None = None  # the server's counters (--mysql), one line


def sparkline(values: list[float], width: int) -> str:
    """The last `width` values as block characters scaled to their maximum."""
    values = values[-width:]
    peak = max(values, default=0.0)
    if peak <= 0:
        return " " * (width - len(values)) + SPARK[0] * len(values)
    chars = [SPARK[min(len(SPARK) - 1, int(v / peak * (len(SPARK) - 1) + 0.5))] if v > 0 else " " for v in values]
    return " " * (width - len(values)) + "".join(chars)


def render_screen_header(h: Header) -> Text:
    text = Text()
    text.append(f"mysqlio top  pid {h.pid}  {printable(h.server)}", style="bold")
    text.append(f"  up {_duration(h.elapsed_s)}  every {h.interval_s:g}s\n")
    text.append(f"write {human_bytes(h.write_bps)}/s  read {human_bytes(h.read_bps)}/s  sync {human_rate(h.sync_ps)}/s")
    text.append("  lost ")
    text.append(str(h.lost_events), style="bold red" if h.lost_events else "green")
    text.append(f"  group {h.group}  sort {h.sort}" + ("  latency" if h.latency else ""), style="dim")
    return text


# (header, width, cell) per numeric column; "narrow" ones are kept below NARROW columns
_COLUMNS: list[tuple[str, int, bool, Callable[[ScreenRow], str]]] = [
    ("write/s", 9, True, lambda r: human_bytes(r.write_bps)),
    ("wops/s", 6, True, lambda r: human_rate(r.write_ops_ps)),
    ("avg wr", 8, False, lambda r: human_bytes(r.avg_write) if r.avg_write else "-"),
    ("sync/s", 6, True, lambda r: human_rate(r.sync_ps)),
    ("read/s", 9, True, lambda r: human_bytes(r.read_bps)),
    ("rops/s", 6, False, lambda r: human_rate(r.read_ops_ps)),
]


def _latency_cell(cls: str, stat: str) -> Callable[[ScreenRow], str]:
    def cell(r: ScreenRow) -> str:
        summary = r.latency.get(cls)
        return human_duration_ns(summary[stat]) if summary else "-"

    return cell


# shown with --latency or the `l` key: p99 always, p50 and max from NARROW columns
_LATENCY_COLUMNS: list[tuple[str, int, bool, Callable[[ScreenRow], str]]] = [
    ("wr p50", 7, False, _latency_cell("write", "p50_ns")),
    ("wr p99", 7, True, _latency_cell("write", "p99_ns")),
    ("wr max", 7, False, _latency_cell("write", "max_ns")),
    ("sy p50", 7, False, _latency_cell("sync", "p50_ns")),
    ("sy p99", 7, True, _latency_cell("sync", "p99_ns")),
    ("sy max", 7, False, _latency_cell("sync", "max_ns")),
]
KIND_WIDTH = 12
NARROW = 100


def _columns(width: int, latency: bool) -> list[tuple[str, int, bool, Callable[[ScreenRow], str]]]:
    columns = [c for c in _COLUMNS if width >= NARROW or c[2]]
    if not latency:
        return columns
    # latency replaces the read columns and the average write size
    columns = [c for c in columns if c[0] not in ("avg wr", "read/s", "rops/s")]
    columns += [c for c in _LATENCY_COLUMNS if width >= NARROW or c[2]]
    return columns


def render_table(
    rows: list[ScreenRow], width: int, datadir: str | None = None, group: str = "file", latency: bool = False
) -> Table:
    """The per-row table, columns chosen to fit `width` terminal columns."""
    columns = _columns(width, latency)
    spark_width = min(60, width - 100) if width >= WIDE and not latency else 0
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    table.add_column("kind", no_wrap=True, width=KIND_WIDTH)
    for title, col_width, _, _ in columns:
        table.add_column(title, justify="right", no_wrap=True, width=col_width)
    if spark_width:
        table.add_column("writes, last 60 s", no_wrap=True, width=spark_width)
    used = KIND_WIDTH + sum(c[1] for c in columns) + spark_width + len(columns) + 2 + (1 if spark_width else 0)
    name_width = max(10, width - used - 1)
    table.add_column("path" if group == "file" else group, no_wrap=True, width=name_width)
    for row in rows:
        cells = [Text(row.kind[:KIND_WIDTH])]
        cells += [Text(cell(row)) for _, _, _, cell in columns]
        if spark_width:
            cells.append(Text(sparkline(row.history, spark_width), style="cyan"))
        label = shorten(row.label, datadir, name_width) if group == "file" else printable(row.label)[:name_width]
        cells.append(Text(label))
        table.add_row(*cells, style=_fade(row.quiet_for))
    return table


def render_screen(header: Header, rows: list[ScreenRow], width: int, height: int | None = None) -> Group:
    """Header, optional burst banner, and as many rows as the height allows."""
    parts: list[Text | Table] = [render_screen_header(header)]
    if header.server_status:
        parts.append(Text(printable(header.server_status), style="cyan"))
    if header.banner:
        parts.append(Text(printable(header.banner), style="bold yellow"))
    if height is not None:
        rows = rows[: max(1, height - len(parts) - 3)]
    parts.append(render_table(rows, width, header.datadir, header.group, header.latency))
    return Group(*parts)


def _fade(quiet_for: int) -> str:
    if quiet_for == 0:
        return ""
    return "dim" if quiet_for < 3 else "dim italic"


def _duration(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds))
