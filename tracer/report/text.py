"""A `Report` as text: rich renderables (pure functions of the report) and
`print_report`, which sizes them to the terminal or to 120 plain columns."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any, TextIO

from rich.cells import cell_len, set_cell_size
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..bursts.render import render_trains
from ..cache_hits import hit_ratio
from ..devices import DeviceActivity
from ..kinds import KIND_WIDTH
from ..latency import ACCURACY_NOTE
from ..model import WRITEBACK_CAUSES
from ..units import counts_by_name, human_bytes, human_duration_ns, printable, shorten, utc_time
from ..warmup_view import warmup_table
from .model import GroupRow, Report, Stats, page_cache_counted
from .timeline import LatencyTimeline


def human_count(n: int) -> str:
    return f"{n:,}"


def human_duration(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def _hit(stats: Stats) -> str:
    ratio = hit_ratio(stats.read_bytes, stats.disk_read_bytes, stats.direct_read_bytes)
    return "-" if ratio is None else f"{100 * ratio:.0f}%"


def _lat(stats: Stats, cls: str, q: str) -> str:
    d = stats.latency.get(cls)
    return human_duration_ns(d[q], significant=True) if d else "-"


# (title, width, priority (lower = kept first), cell)
_COLUMNS: list[tuple[str, int, int, Any]] = [
    ("written", 9, 0, lambda s: human_bytes(s.write_bytes)),
    ("wops", 8, 1, lambda s: human_count(s.write_ops)),
    ("avg wr", 8, 4, lambda s: human_bytes(s.write_bytes / s.write_ops) if s.write_ops else "-"),
    ("syncs", 7, 2, lambda s: human_count(s.sync_ops)),
    # the page cache (traces that have it): bytes gone clean -> dirty, written back to the device
    ("dirtied", 9, 5, lambda s: human_bytes(s.dirtied_bytes)),
    ("wback", 9, 4, lambda s: human_bytes(s.writeback_bytes)),
    ("wr p50", 7, 6, lambda s: _lat(s, "write", "p50")),
    ("wr p99", 7, 3, lambda s: _lat(s, "write", "p99")),
    ("wr max", 7, 8, lambda s: _lat(s, "write", "max")),
    ("sync p50", 8, 7, lambda s: _lat(s, "sync", "p50")),
    ("sync p99", 8, 3, lambda s: _lat(s, "sync", "p99")),
    ("sync max", 8, 9, lambda s: _lat(s, "sync", "max")),
    ("read", 9, 5, lambda s: human_bytes(s.read_bytes)),
    ("rops", 8, 10, lambda s: human_count(s.read_ops)),
    # the page cache: bytes its reads took from the device (readahead included)
    ("disk rd", 9, 6, lambda s: human_bytes(s.disk_read_bytes)),
    # the share of the buffered reads the page cache gave (mysqlio.cache_hits)
    ("hit %", 5, 7, lambda s: _hit(s)),
    ("err", 5, 2, lambda s: human_count(s.errors)),
]
MIN_NAME = 24
PAGE_CACHE_COLUMNS = frozenset({"dirtied", "wback", "disk rd", "hit %"})
# shown only where some row read from the disk (traces before it was counted have none)
DISK_READ_COLUMN = "disk rd"
DISK_READ_COLUMNS = frozenset({DISK_READ_COLUMN, "hit %"})


def has_page_cache(r: Report) -> bool:
    """Whether the trace was recorded with the page-cache hooks (report.model.page_cache_counted):
    its page-cache columns, hits among them; traces without them keep their columns."""
    return page_cache_counted(r.total)


def _columns(columns: list[tuple[str, int, int, Any]], page_cache: bool) -> list[tuple[str, int, int, Any]]:
    return columns if page_cache else [c for c in columns if c[0] not in PAGE_CACHE_COLUMNS]


def _fit(
    columns: list[tuple[str, int, int, Any]], width: int, fixed: int, reserve: int = MIN_NAME
) -> list[tuple[str, int, int, Any]]:
    """The columns (by priority) that fit `width` beside `fixed` columns, leaving
    `reserve` columns for a path."""
    chosen: list[tuple[str, int, int, Any]] = []
    used = fixed + reserve
    for col in sorted(columns, key=lambda c: c[2]):
        if used + col[1] + 1 <= width:
            chosen.append(col)
            used += col[1] + 1
    return [c for c in columns if c in chosen]


def _new_table() -> Table:
    return Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1, 0, 0))


def _heading(title: str) -> Text:
    return Text(title, style="bold")


def _label(row: GroupRow, group: str, datadir: str | None, width: int) -> str:
    if group == "file":
        return shorten(row.label + (" (deleted)" if row.deleted else ""), datadir, width)
    return printable(row.label)[:width]


def _label_width(labels: list[str]) -> int:
    return min(32, max([len(x) for x in labels] + [5]))


def render_rows(
    rows: list[GroupRow],
    group: str,
    width: int,
    datadir: str | None = None,
    total: Stats | None = None,
    page_cache: bool = False,
) -> Table:
    """A summary table (one line per group) that fits `width` columns: files get
    their kind first and the path last (widest); other groups their name first.
    `page_cache`: with the dirtied and written-back columns, where they fit (and the
    bytes read from the disk where any were)."""
    table = _new_table()
    all_columns = _columns(_COLUMNS, page_cache)
    if not (any(r.stats.disk_read_bytes for r in rows) or (total is not None and total.disk_read_bytes)):
        all_columns = [c for c in all_columns if c[0] not in DISK_READ_COLUMNS]
    if group == "file":
        columns = _fit(all_columns, width, KIND_WIDTH + 1)
        table.add_column("kind", no_wrap=True, width=KIND_WIDTH)
        name_width = max(10, width - KIND_WIDTH - 1 - sum(c[1] + 1 for c in columns) - 1)
    else:
        labels = [printable(r.label) for r in rows] + (["total"] if total is not None else [])
        name_width = _label_width(labels)
        columns = _fit(all_columns, width, name_width + 1, reserve=0)
        table.add_column(group, no_wrap=True, width=name_width)
    for name, col_width, _, _ in columns:
        table.add_column(name, justify="right", no_wrap=True, width=col_width)
    if group == "file":
        table.add_column("path", no_wrap=True, width=name_width)
    for row in rows:
        numbers = [Text(cell(row.stats)) for _, _, _, cell in columns]
        label = Text(_label(row, group, datadir, name_width))
        table.add_row(*([Text(row.kind), *numbers, label] if group == "file" else [label, *numbers]))
    if total is not None:
        numbers = [Text(cell(total)) for _, _, _, cell in columns]
        cells = [Text(""), *numbers, Text("total")] if group == "file" else [Text("total"), *numbers]
        table.add_row(*cells, style="bold")
    return table


def render_busiest(r: Report, width: int) -> Table:
    table = _new_table()
    table.add_column("t (s)", justify="right", no_wrap=True, width=6)
    table.add_column("written", justify="right", no_wrap=True, width=9)
    table.add_column("wops", justify="right", no_wrap=True, width=8)
    table.add_column("syncs", justify="right", no_wrap=True, width=7)
    table.add_column("top file", justify="right", no_wrap=True, width=9)
    name_width = max(10, width - 6 - 9 - 8 - 7 - 9 - 5 - 1)
    table.add_column("", no_wrap=True, width=name_width)
    for b in r.busiest:
        table.add_row(
            str(b.t),
            human_bytes(b.stats.write_bytes),
            human_count(b.stats.write_ops),
            human_count(b.stats.sync_ops),
            human_bytes(b.top_bytes) if b.top_path else "-",
            shorten(b.top_path, r.meta.datadir, name_width) if b.top_path else "",
        )
    return table


def _by_counter(lost_by: dict[str, int]) -> str:
    """The lost events' counters as ' (ringbuf_full 3, skipped_runs 2)'; '' for a trace
    recorded before they were kept."""
    return f" ({counts_by_name(lost_by)})" if lost_by else ""


def render_report_header(r: Report) -> Text:
    m = r.meta
    text = Text()
    text.append("mysqlio report  ", style="bold")
    text.append(printable(r.trace))
    server = "  ".join(printable(x) for x in (m.server_version, m.server_exe) if x) or "?"
    text.append(f"\nserver {server}  pid {m.pid}")
    if m.datadir:
        text.append(f"  datadir {printable(m.datadir)}")
    text.append(f"\nhost {printable(m.host)}  kernel {printable(m.kernel)}")
    text.append(f"\nrecorded by: {printable(m.command)}", style="dim")
    text.append(f"\nstart {utc_time(m.start_wall)}  duration {human_duration(r.duration_s)}")
    text.append(f"  events {human_count(r.events_total)}  lost ")
    text.append(human_count(r.lost_events), style="bold red" if r.lost_events else "green")
    if r.truncated:
        text.append(
            "\ntrace cut short (recorder killed or still running): complete batches only",
            style="bold yellow",
        )
    elif not r.complete:
        text.append(
            "\ntrace not closed (still recording, or recorder killed): totals so far",
            style="bold yellow",
        )
    for gap in r.gaps:
        if gap.get("damaged"):
            text.append("\nthe server restarted (gap note damaged): not traced for a while", style="bold yellow")
            continue
        text.append(
            f"\nthe server restarted: pid {gap['old_pid']} → {gap['new_pid']}, not traced from "
            f"{gap['from_t']:.1f} s to {gap['to_t']:.1f} s ({gap['to_t'] - gap['from_t']:.1f} s)",
            style="bold yellow",
        )
    if r.lost_events:
        text.append(
            f"\n{human_count(r.lost_events)} events were lost while recording{_by_counter(r.lost_by_reason)}: "
            "totals are too low",
            style="bold red",
        )
    f = r.filters
    if f.active():
        parts = []
        if f.kinds:
            parts.append("kind " + ",".join(sorted(f.kinds)))
        if f.match:
            parts.append(f"path ~ {printable(f.match.pattern)!r}")
        if f.t_from is not None or f.t_to is not None:
            lo = f"{f.t_from:g}" if f.t_from is not None else "0"
            hi = f"{f.t_to:g}" if f.t_to is not None else "end"
            parts.append(f"seconds {lo} to {hi}")
        text.append(f"\nonly {'; '.join(parts)}: {human_count(r.events)} events")
    text.append(f"\n{ACCURACY_NOTE}", style="dim")
    return text


def render_report(r: Report, width: int, limit: int = 0) -> Group:
    """Header, the per-group table (at most `limit` rows when > 0), the per-kind
    table with totals, and the busiest seconds."""
    parts: list[RenderableType] = [render_report_header(r), Text("")]
    rows = r.rows[:limit] if limit > 0 else r.rows
    if not r.rows:
        parts.append(Text("no events" + (" match the filters" if r.filters.active() else " in this trace")))
        return Group(*parts)
    page_cache = has_page_cache(r)
    if r.group != "kind":
        parts += [_heading(f"Per {r.group}"), render_rows(rows, r.group, width, r.meta.datadir, page_cache=page_cache)]
        if len(rows) < len(r.rows):
            parts.append(Text(f"… {len(r.rows) - len(rows)} more (--limit 0 shows all)", style="dim"))
        parts.append(Text(""))
    parts += [_heading("Per kind"), render_rows(r.kinds, "kind", width, total=r.total, page_cache=page_cache)]
    if page_cache:
        cached = [row for row in rows if row.stats.dirtied_bytes or row.stats.writeback_bytes]
        parts += [
            Text(""),
            _heading(f"Page cache per {r.group}: bytes dirtied, written back to the device, and why"),
            render_page_cache(cached, r.group, width, r.meta.datadir),
        ]
    if r.devices:
        parts += [Text(""), _heading(_devices_heading(r)), render_devices(r.devices, width)]
    if r.busiest:
        parts += [Text(""), _heading("Busiest seconds (by bytes written)"), render_busiest(r, width)]
    if r.bursts:
        parts += [Text(""), _heading("Periodic bursts"), render_trains(r.bursts, width)]
    if r.server_status:
        parts += [Text(""), _heading("Server counters (record --mysql): peaks"), render_status_peaks(r)]
    return Group(*parts)


# how the page-cache table names what made the kernel write a file's pages back
CAUSE_LABELS = {
    "fsync": "fsync",
    "fdatasync": "fdatasync",
    "sync_file_range": "sync_file_range",
    "msync": "msync",
    "write": "O_SYNC write",
    "server_other": "server other",
    "flusher_periodic": "flusher periodic",
    "flusher_background": "flusher background",
    "memory": "memory",
    "sync": "sync",
    "other": "other",
}
assert set(CAUSE_LABELS) == set(WRITEBACK_CAUSES)
CAUSES_NOTE = (
    "by the server's syncs and O_SYNC writes (server other: its other requests), the kernel's flusher: periodic "
    "(dirty_expire) or background (dirty_background), memory: reclaim, sync: sync(2) or syncfs"
)


def _causes(stats: Stats) -> str:
    """The causes of a group's written-back bytes, largest first: "fsync 1.0MiB, msync 8.0KiB"."""
    seen = sorted(
        ((n, cause) for cause, n in stats.writeback_by.items() if n and cause in CAUSE_LABELS),
        key=lambda x: (-x[0], WRITEBACK_CAUSES.index(x[1])),
    )
    return ", ".join(f"{CAUSE_LABELS[cause]} {human_bytes(n)}" for n, cause in seen)


def render_page_cache(rows: list[GroupRow], group: str, width: int, datadir: str | None = None) -> Group:
    """One line per group with page-cache bytes: dirtied, written back, and the causes
    of the writeback that are not zero (wrapped in their column), the path last."""
    table = _new_table()
    numbers = [("dirtied", lambda s: human_bytes(s.dirtied_bytes)), ("wback", lambda s: human_bytes(s.writeback_bytes))]
    if group == "file":
        fixed = KIND_WIDTH + 1 + 20
        causes_width = min(48, max(16, width - fixed - MIN_NAME - 2))
        name_width = max(10, width - fixed - causes_width - 2)
        table.add_column("kind", no_wrap=True, width=KIND_WIDTH)
    else:
        name_width = _label_width([printable(r.label) for r in rows])
        causes_width = max(16, width - name_width - 1 - 20 - 1)
        table.add_column(group, no_wrap=True, width=name_width)
    for title, _ in numbers:
        table.add_column(title, justify="right", no_wrap=True, width=9)
    table.add_column("written back by", width=causes_width, overflow="fold")
    if group == "file":
        table.add_column("path", no_wrap=True, width=name_width)
    for row in rows:
        cells = [Text(cell(row.stats)) for _, cell in numbers] + [Text(_causes(row.stats) or "-")]
        label = Text(_label(row, group, datadir, name_width))
        table.add_row(*([Text(row.kind), *cells, label] if group == "file" else [label, *cells]))
    return Group(table, Text(CAUSES_NOTE, style="dim"))


# (title, width, priority, cell) of the block-device table
_DEVICE_COLUMNS: list[tuple[str, int, int, Any]] = [
    ("written", 9, 0, lambda d: human_bytes(d.write_bytes)),
    ("wreqs", 8, 5, lambda d: human_count(d.write_requests)),
    ("read", 9, 6, lambda d: human_bytes(d.read_bytes)),
    ("rreqs", 8, 8, lambda d: human_count(d.read_requests)),
    ("srv files", 9, 2, lambda d: human_bytes(d.write_by.get("server_files", 0))),
    ("srv direct", 10, 4, lambda d: human_bytes(d.write_by.get("server_direct", 0))),
    ("filesystem", 10, 3, lambda d: human_bytes(d.write_by.get("filesystem", 0))),
    ("other", 9, 7, lambda d: human_bytes(d.write_by.get("other", 0))),
    ("w ampl", 6, 1, lambda d: "-" if d.write_amplification is None else f"{d.write_amplification:.2f}x"),
]
DEVICES_NOTE = (
    "as the devices completed them; writes by owner: srv files (the server's pages written back), srv direct "
    "(its O_DIRECT writes), filesystem (journal, metadata), other; w ampl: device bytes written per server byte"
)


def _devices_heading(r: Report) -> str:
    heading = f"Block devices ({human_count(r.device_samples)} samples"
    if r.filters.kinds or r.filters.match:
        heading += "; whole devices: --kind and --match do not apply"
    return heading + ")"


def render_devices(devices: list[DeviceActivity], width: int) -> Group:
    """One line per block device: bytes and requests both ways, the writes by owner, and
    the write amplification, in the columns that fit."""
    name_width = min(16, max([len(printable(d.name)) for d in devices] + [6]))
    columns = _fit(_DEVICE_COLUMNS, width, name_width + 1, reserve=0)
    table = _new_table()
    table.add_column("device", no_wrap=True, width=name_width)
    for title, col_width, _, _ in columns:
        table.add_column(title, justify="right", no_wrap=True, width=col_width)
    for d in devices:
        table.add_row(Text(printable(d.name)[:name_width]), *[Text(cell(d)) for _, _, _, cell in columns])
    return Group(table, Text(DEVICES_NOTE, style="dim"))


# (label, "gauges" | "rates", field, format) of the peaks shown from record --mysql samples
_STATUS_PEAKS: list[tuple[str, str, str, Any]] = [
    ("dirty pages", "gauges", "dirty_pages", lambda v: f"{v:,.0f}"),
    ("checkpoint age", "gauges", "checkpoint_age_bytes", human_bytes),
    ("redo written", "rates", "redo_written_bytes", lambda v: f"{human_bytes(v)}/s"),
    ("data written", "rates", "data_written_bytes", lambda v: f"{human_bytes(v)}/s"),
    ("pages flushed", "rates", "pages_flushed", lambda v: f"{v:,.0f}/s"),
    ("binlog commits", "rates", "binlog_commits", lambda v: f"{v:,.0f}/s"),
]


def render_status_peaks(r: Report) -> Table:
    """The highest value of each server counter and the second it was seen."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    for title in ("counter", "peak", "at second"):
        table.add_column(title, justify="left" if title == "counter" else "right", no_wrap=True)
    for label, section, name, fmt in _STATUS_PEAKS:
        seen = [
            (float(s[section][name]), float(s["time"]))
            for s in r.server_status
            if isinstance(s.get(section), dict) and isinstance(s[section].get(name), (int, float))
        ]
        if seen:
            value, at = max(seen)
            table.add_row(label, fmt(value), f"{at - r.meta.start_wall:.0f}")
    errors = sum(1 for s in r.server_status if s.get("error"))
    table.caption = f"{len(r.server_status)} samples" + (f", {errors} without an answer" if errors else "")
    return table


def print_report(
    r: Report,
    limit: int = 0,
    per_second: bool = False,
    file: TextIO | None = None,
    timeline: LatencyTimeline | None = None,
) -> None:
    """Print the text report: terminal width and colours on a terminal; else 120
    columns of plain text without trailing blanks."""
    out = file or sys.stdout
    tty = out.isatty()
    console = Console(
        file=out, highlight=False, width=None if tty else 120, color_system="auto" if tty else None, soft_wrap=False
    )
    parts: Iterable[RenderableType] = [render_report(r, console.width, limit)]
    for warm in r.warmups:  # after each restart: the reads from the disk per table and second
        heading = f"Warm-up after the restart (pid {warm.warmup.pid})"
        parts = chain(
            parts,
            [Text(""), _heading(heading), Text("\n".join(map(printable, warmup_table(warm.warmup, warm.seconds))))],
        )
    if per_second and r.per_second is not None:
        parts = chain(parts, [Text(""), _heading("Per second")], render_per_second(r, console.width))
    if timeline is not None:
        heading = "Latency over time of the slowest files (p99, requests)"
        body: RenderableType = (
            render_timeline(timeline, r, console.width)
            if timeline.pairs
            else Text("no file has enough requests with latency")
        )
        parts = chain(parts, [Text(""), _heading(heading), body])
    for part in parts:  # one at a time: the per-second tables are made as they are printed
        if tty:
            console.print(part)
            continue
        with console.capture() as capture:
            console.print(part)
        out.write("".join(line.rstrip() + "\n" for line in capture.get().splitlines()))


_SECOND_COLUMNS: list[tuple[str, int, int, Any]] = [
    ("written", 9, 0, lambda s: human_bytes(s.write_bytes)),
    ("wops", 8, 1, lambda s: human_count(s.write_ops)),
    ("syncs", 7, 2, lambda s: human_count(s.sync_ops)),
    ("dirtied", 9, 4, lambda s: human_bytes(s.dirtied_bytes)),
    ("wback", 9, 3, lambda s: human_bytes(s.writeback_bytes)),
    ("read", 9, 3, lambda s: human_bytes(s.read_bytes)),
    ("rops", 8, 4, lambda s: human_count(s.read_ops)),
    ("err", 5, 3, lambda s: human_count(s.errors)),
]


PER_SECOND_TABLE_ROWS = 2000  # rows of one table of the per-second section (its columns are fixed)


def _fixed_cell(text: str, width: int, right: bool) -> str:
    """text in a column of `width` cells as a rich table with that column's width
    prints it: padded on the side away from its justification, or cut with an
    ellipsis (the column's default overflow)."""
    size = cell_len(text)
    if size > width:
        return set_cell_size(text, width - 1) + "…"
    pad = " " * (width - size)
    return pad + text if right else text + pad


def render_per_second(r: Report, width: int, rows_per_table: int = PER_SECOND_TABLE_ROWS) -> Iterator[RenderableType]:
    """The per-second section: one line per group active in each second, busiest
    first. The header is a table without rows; the rows follow in blocks of
    `rows_per_table` lines, each laid out as that table lays out a row (every
    column's width is fixed, one blank between columns): an hour is a million
    rows, never all made at once, and a rich table's layout of each cell took
    about 1 ms a row (90 s of 105 for a 10-minute trace of 91k rows)."""
    file_group = r.group == "file"
    labels = r.per_second.labels() if r.per_second is not None and not file_group else []
    label_width = 0 if file_group else _label_width([printable(x) for x in labels])
    fixed = 7 + (KIND_WIDTH + 1 if file_group else label_width + 1)
    columns = _fit(_columns(_SECOND_COLUMNS, has_page_cache(r)), width, fixed, reserve=MIN_NAME if file_group else 0)
    name_width = max(10, width - fixed - sum(c[1] + 1 for c in columns) - 1)

    header = _new_table()
    header.add_column("t (s)", justify="right", no_wrap=True, width=6)
    header.add_column("kind" if file_group else r.group, no_wrap=True, width=KIND_WIDTH if file_group else label_width)
    for name, col_width, _, _ in columns:
        header.add_column(name, justify="right", no_wrap=True, width=col_width)
    if file_group:
        header.add_column("path", no_wrap=True, width=name_width)
    yield header

    lines: list[str] = []
    for t, rows in r.per_second or []:
        second = _fixed_cell(str(t), 6, right=True)
        for row in rows:
            numbers = [_fixed_cell(cell(row.stats), col_width, right=True) for _, col_width, _, cell in columns]
            if file_group:
                kind = _fixed_cell(row.kind[:KIND_WIDTH], KIND_WIDTH, right=False)
                path = _fixed_cell(_label(row, r.group, r.meta.datadir, name_width), name_width, right=False)
                cells = [second, kind, *numbers, path]
            else:
                cells = [
                    second,
                    _fixed_cell(_label(row, r.group, None, label_width), label_width, right=False),
                    *numbers,
                ]
            lines.append(" ".join(cells))
            if len(lines) == rows_per_table:
                yield Text("\n".join(lines), no_wrap=True, overflow="crop")
                lines = []
    if lines:
        yield Text("\n".join(lines), no_wrap=True, overflow="crop")


def render_timeline(timeline: LatencyTimeline, report: Report, width: int) -> Table:
    """One line per second: p99 (and request count) of each slow pair."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    table.add_column("second", justify="right", no_wrap=True)
    col_width = max(12, (width - 10) // max(1, len(timeline.pairs)) - 2)
    for p in timeline.pairs:
        name = shorten(p.path, report.meta.datadir, col_width)
        table.add_column(f"{name}\n{p.cls} p99", justify="right", no_wrap=True, max_width=col_width)
    for s in timeline.seconds:
        cells = [Text(str(s.t))]
        for cell in s.cells:
            cells.append(Text("-" if cell is None else f"{human_duration_ns(cell['p99_ns'])} ({cell['count']})"))
        table.add_row(*cells)
    return table
