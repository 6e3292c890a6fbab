"""Pure rendering: screen data in, a rich renderable out (snapshot-tested)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .kinds import KIND_WIDTH
from .units import counts_by_name, human_bytes, human_duration_ns, human_rate, printable, shorten
from .view import DeviceRate, ScreenRow, main_causes

SPARK = "▁▂▃▄▅▆▇█"
WIDE = 120  # from this width on, a sparkline column is shown (when the path keeps MIN_PATH)
MIN_PATH = 40
PAGE_CACHE_WIDE = 140  # from this width on, the syscall view has the page cache's columns too


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
    warmup: str | None = None  # the warm-up after a restart (mysqlio.warmup_view.warmup_line)
    latency: bool = False
    server_status: str | None = None  # the server's counters (--mysql), one line
    view: str = "syscalls"  # or "page cache" (view.VIEWS)
    # the page cache counted (eBPF with its hooks): its totals and the devices' lines
    page_cache: bool = False
    dirtied_bps: float = 0.0
    wback_bps: float = 0.0
    wback_by: dict[str, int] = field(default_factory=dict)  # bytes written back, by cause
    devices: tuple[DeviceRate, ...] = ()
    lost_by: dict[str, int] = field(default_factory=dict)  # lost_events by the counter that lost them


def sparkline(values: list[float], width: int) -> str:
    """The last `width` values as block characters scaled to their maximum."""
    values = values[-width:]
    peak = max(values, default=0.0)
    if peak <= 0:
        return " " * (width - len(values)) + SPARK[0] * len(values)
    chars = [SPARK[min(len(SPARK) - 1, int(v / peak * (len(SPARK) - 1) + 0.5))] if v > 0 else " " for v in values]
    return " " * (width - len(values)) + "".join(chars)


def render_screen_header(h: Header, width: int = 160) -> Text:
    full = width >= NARROW
    text = Text()
    text.append(f"mysqlio top  pid {h.pid}  {printable(h.server)}", style="bold")
    text.append(f"  up {_duration(h.elapsed_s)}  every {h.interval_s:g}s\n")
    text.append(f"write {human_bytes(h.write_bps)}/s  read {human_bytes(h.read_bps)}/s  sync {human_rate(h.sync_ps)}/s")
    text.append("  lost ")
    text.append(str(h.lost_events), style="bold red" if h.lost_events else "green")
    if h.lost_events and h.lost_by and full:
        text.append(f" ({counts_by_name(h.lost_by)})", style="red")
    shown = ("  page cache view" if full else "") if h.view == "page cache" else ("  latency" if h.latency else "")
    text.append(f"  group {h.group}  sort {h.sort}{shown}", style="dim")
    if h.page_cache:
        wback = "written back" if full else "wback"
        text.append(f"\npage cache  dirtied {human_bytes(h.dirtied_bps)}/s  {wback} {human_bytes(h.wback_bps)}/s")
        if h.wback_bps:
            text.append(f"  by {main_causes(h.wback_by, 3 if full else 2)}")
    elif h.view == "page cache":
        text.append("\npage cache: not counted here (SystemTap, or a kernel without its hooks)", style="yellow")
    return text


def _percent(fraction: float) -> str:
    return f"{round(100 * fraction)}%" if fraction >= 0.005 else "<1%"


def device_line(d: DeviceRate, full: bool = True) -> str:
    """A device's interval: "loop0   W 12.3MiB/s 230 req/s (server 80%, fs 15%, other 5%)  R 0B/s
    0 req/s  amplification 1.25". The shares are of the bios queued to it; `full` off: shorter
    (no read split, "amp"), for 80 columns."""
    shares = (", " if full else " ").join(f"{owner} {_percent(f)}" for owner, f in d.write_share)
    per_s = " req/s" if full else "/s"
    line = f"{printable(d.name):<7} W {human_bytes(d.write_bps)}/s {human_rate(d.write_rps)}{per_s}"
    if shares:
        line += f" ({shares})"
    if full or d.read_bps or d.read_rps:
        line += f"  R {human_bytes(d.read_bps)}/s {human_rate(d.read_rps)}{per_s}"
        if full and d.read_share:
            line += " (" + ", ".join(f"{owner} {_percent(f)}" for owner, f in d.read_share) + ")"
    if d.amplification is not None:
        line += f"  {'amplification' if full else 'amp'} {d.amplification:.2f}"
    return line


def render_device(d: DeviceRate, width: int) -> Text:
    """One line per busy device, full from NARROW columns."""
    return Text(device_line(d, width >= NARROW), no_wrap=True, overflow="ellipsis")


NARROW = 100
Column = tuple[str, int, int, Callable[[ScreenRow], str]]
_WRITE: Column = ("write/s", 9, 0, lambda r: human_bytes(r.write_bps))
_SYNC: Column = ("sync/s", 6, 0, lambda r: human_rate(r.sync_ps))  # fsync, fdatasync, sync_file_range, msync
# (header, width, the terminal width from which it is shown, cell) per numeric column
_COLUMNS: list[Column] = [
    _WRITE,
    ("wops/s", 6, 0, lambda r: human_rate(r.write_ops_ps)),
    ("avg wr", 8, NARROW, lambda r: human_bytes(r.avg_write) if r.avg_write else "-"),
    _SYNC,
    ("read/s", 9, 0, lambda r: human_bytes(r.read_bps)),
    ("rops/s", 6, NARROW, lambda r: human_rate(r.read_ops_ps)),
]
# the page cache: bytes that went clean -> dirty, and that the kernel wrote back to the device
_DIRTY: Column = ("dirty/s", 9, 0, lambda r: human_bytes(r.dirtied_bps))
_WBACK: Column = ("wback/s", 9, 0, lambda r: human_bytes(r.wback_bps))
# the page-cache view (key p): what the kernel did with the files' pages, and why
_PAGE_CACHE_COLUMNS: list[Column] = [
    (*_WRITE[:2], NARROW, _WRITE[3]),
    (*_SYNC[:2], NARROW, _SYNC[3]),
    _DIRTY,
    _WBACK,
    ("written back by", 24, 0, lambda r: r.wback_causes if r.wback_bps else "-"),
    # what was read from the device for the files (readahead, O_DIRECT included), and the
    # share of their buffered reads the page cache gave (mysqlio.cache_hits)
    ("disk rd/s", 9, NARROW, lambda r: human_bytes(r.disk_read_bps)),
    ("hit %", 5, NARROW, lambda r: "-" if r.cache_hit is None else f"{100 * r.cache_hit:.0f}%"),
]
_LEFT = {"written back by"}


def _latency_cell(cls: str, stat: str) -> Callable[[ScreenRow], str]:
    def cell(r: ScreenRow) -> str:
        summary = r.latency.get(cls)
        return human_duration_ns(summary[stat]) if summary else "-"

    return cell


# shown with --latency or the `l` key: p99 always, p50 and max from NARROW columns
_LATENCY_COLUMNS: list[Column] = [
    ("wr p50", 7, NARROW, _latency_cell("write", "p50_ns")),
    ("wr p99", 7, 0, _latency_cell("write", "p99_ns")),
    ("wr max", 7, NARROW, _latency_cell("write", "max_ns")),
    ("sy p50", 7, NARROW, _latency_cell("sync", "p50_ns")),
    ("sy p99", 7, 0, _latency_cell("sync", "p99_ns")),
    ("sy max", 7, NARROW, _latency_cell("sync", "max_ns")),
]


def _columns(width: int, latency: bool, view: str = "syscalls", page_cache: bool = True) -> list[Column]:
    if view == "page cache":
        return [c for c in _PAGE_CACHE_COLUMNS if width >= c[2]]
    columns = [c for c in _COLUMNS if width >= c[2]]
    if latency:
        # latency replaces the read columns and the average write size
        columns = [c for c in columns if c[0] not in ("avg wr", "read/s", "rops/s")]
        columns += [c for c in _LATENCY_COLUMNS if width >= c[2]]
    if page_cache and width >= PAGE_CACHE_WIDE:
        columns += [_DIRTY, _WBACK]
    return columns


def render_table(
    rows: list[ScreenRow],
    width: int,
    datadir: str | None = None,
    group: str = "file",
    latency: bool = False,
    view: str = "syscalls",
    page_cache: bool = True,
    interval_s: float = 1.0,
) -> Table:
    """The per-row table, columns chosen to fit `width` terminal columns."""
    columns = _columns(width, latency, view, page_cache)
    used = KIND_WIDTH + sum(c[1] for c in columns) + len(columns) + 2
    spark_width = min(60, width - used - 2 - MIN_PATH) if width >= WIDE and (not latency or view != "syscalls") else 0
    spark_width = spark_width if spark_width >= 10 else 0
    wback = view == "page cache"
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    table.add_column("kind", no_wrap=True, width=KIND_WIDTH)
    for title, col_width, _, _ in columns:
        table.add_column(title, justify="left" if title in _LEFT else "right", no_wrap=True, width=col_width)
    if spark_width:
        what = "wback" if wback else "writes"
        table.add_column(f"{what}, last {spark_width * interval_s:.0f} s", no_wrap=True, width=spark_width)
    used += spark_width + (1 if spark_width else 0)
    name_width = max(10, width - used - 1)
    table.add_column("path" if group == "file" else group, no_wrap=True, width=name_width)
    for row in rows:
        cells = [Text(row.kind)]
        cells += [Text(cell(row)) for _, _, _, cell in columns]
        if spark_width:
            history = row.wback_history if wback else row.history
            cells.append(Text(sparkline(history, spark_width), style="cyan"))
        label = shorten(row.label, datadir, name_width) if group == "file" else printable(row.label)[:name_width]
        cells.append(Text(label))
        table.add_row(*cells, style=_fade(row.quiet_for))
    return table


def render_screen(header: Header, rows: list[ScreenRow], width: int, height: int | None = None) -> Group:
    """Header, optional burst banner, and as many rows as the height allows."""
    parts: list[Text | Table] = [render_screen_header(header, width)]
    if header.page_cache:
        parts += [render_device(d, width) for d in header.devices]
    if header.server_status:
        parts.append(Text(printable(header.server_status), style="cyan"))
    if header.banner:
        parts.append(Text(printable(header.banner), style="bold yellow"))
    if header.warmup:
        parts.append(Text(printable(header.warmup), style="bold green"))
    if height is not None:
        lines = sum(1 + p.plain.count("\n") for p in parts if isinstance(p, Text))
        rows = rows[: max(1, height - lines - 2)]
    table = render_table(
        rows,
        width,
        header.datadir,
        header.group,
        header.latency,
        header.view,
        header.page_cache,
        header.interval_s,
    )
    return Group(*parts, table)


def _fade(quiet_for: int) -> str:
    if quiet_for == 0:
        return ""
    return "dim" if quiet_for < 3 else "dim italic"


def _duration(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds))
