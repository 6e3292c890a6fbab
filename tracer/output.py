"""Non-interactive outputs of `top`: JSON lines and plain text (vmstat-like)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from . import json_files
from .model import Counts, FileActivity, Interval, no_hits
from .render import device_line
from .units import human_bytes, human_duration_ns, human_rate, printable
from .view import device_rates, group_key, main_causes

TEXT_HEADER = (
    f"{'time':8} {'kind':16} {'write/s':>10} {'wops/s':>7} {'read/s':>10} {'rops/s':>7} {'sync/s':>6} {'err':>4}  path"
)
# with the page cache counted: bytes dirtied and written back per second, and by what
PAGE_CACHE_HEADER = f" {'dirty/s':>10} {'wback/s':>10} {'written back by':24}"


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def write_whole(out: TextIO, text: str | Iterable[str]) -> None:
    """Write and flush `text` (or its pieces, in order) with the stop signals held back in
    this thread until it is out. When a write is blocked on a full pipe (a slow reader) and
    a signal interrupts it, CPython's buffered writer loses the rest of that write: a JSON
    line would be cut and the next one glued to it. Held back, the signal is handled once
    the write is done."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        for piece in [text] if isinstance(text, str) else text:
            out.write(piece)
        out.flush()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


_FILES_CHUNK = 1024  # files made into JSON at once: a line of 20,000 files is not held whole


def write_json(
    interval: Interval,
    out: TextIO,
    bursts: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
    container: dict[str, Any] | None = None,
    tables: dict[str, Any] | None = None,
    warmup: dict[str, Any] | None = None,
) -> None:
    """One JSON line; its files written a chunk at a time (the same bytes as one dump of
    the whole: at 20,000 files the whole held ~60 MiB of dicts and a 12 MiB string)."""
    obj = interval.to_json(files=False)
    if container:
        obj["container"] = container  # the server's container (container_identity.ContainerIdentity.to_json)
    if bursts is not None:
        obj["bursts"] = bursts  # the periodic bursts active now (mysqlio.bursts.Train.to_json)
    if tables:
        obj["tables"] = tables  # the kernel tables' sizes and budget (mysqlio.map_sizing.MapSizes.to_json)
    if warmup:
        obj["warmup"] = warmup  # the warm-up since the last restart (mysqlio.warmup.Warmup.to_json)
    if notes:
        obj["notes"] = notes  # what mysqlio cannot count here (mysqlio.mapped_files.redo_note)
    # "files" comes after numbers and the drops' names only: its first match is the key
    head, _, tail = json.dumps(obj, separators=(",", ":")).partition('"files":[]')
    write_whole(out, _json_line_pieces(head, interval.files, tail, interval.disk_reads))


def _json_line_pieces(head: str, files: list[FileActivity], tail: str, disk_reads: bool = True) -> Iterator[str]:
    """The line around its files, and the files' JSON a chunk at a time."""
    yield head + '"files":['
    for at in range(0, len(files), _FILES_CHUNK):
        if json_files.FAST and disk_reads:  # the same bytes, spelt out without the dicts
            chunk = "[" + ",".join(json_files.file_json(f) for f in files[at : at + _FILES_CHUNK]) + "]"
        else:
            files_json = [no_hits(f.to_json(), disk_reads) for f in files[at : at + _FILES_CHUNK]]
            chunk = json.dumps(files_json, separators=(",", ":"))
        yield ("," if at else "") + chunk[1:-1]
    yield "]" + tail + "\n"


LATENCY_HEADER = f" {'wr p50':>7} {'wr p99':>7} {'sy p50':>7} {'sy p99':>7}"


def _latency_cells(f: FileActivity) -> str:
    cells = []
    for cls in ("write", "sync"):
        summary = f.latency[cls].summary() if cls in f.latency else None
        for stat in ("p50_ns", "p99_ns"):
            cells.append(f"{human_duration_ns(summary[stat] if summary else None):>7}")
    return " " + " ".join(cells)


def _page_cache_cells(f: FileActivity, secs: float) -> str:
    causes = main_causes(f.writeback_by) if f.writeback_bytes else "-"
    return f" {human_bytes(f.dirtied_bytes / secs):>10} {human_bytes(f.writeback_bytes / secs):>10} {causes:24}"


def format_text(interval: Interval, latency: bool = False, page_cache: bool = False) -> str:
    """One summary line and one line per file; rates are per second; with
    `latency`, write and sync p50 / p99 of the requests completed in the interval;
    with `page_cache` (counted by the probe), bytes dirtied and written back and what
    wrote them back, then one line per busy block device. Syncs include msync."""
    secs = interval.interval_s or 1.0
    clock = time.strftime("%H:%M:%S", time.localtime(interval.time))
    total_w = sum(f.write_bytes for f in interval.files)
    total_r = sum(f.read_bytes for f in interval.files)
    total_s = sum(f.sync_ops for f in interval.files)
    summary = (
        f"{clock} pid {interval.pid}  write {human_bytes(total_w / secs)}/s  read {human_bytes(total_r / secs)}/s"
        f"  sync {human_rate(total_s / secs)}/s"
    )
    if page_cache:
        total_d = sum(f.dirtied_bytes for f in interval.files)
        total_b = sum(f.writeback_bytes for f in interval.files)
        summary += f"  dirtied {human_bytes(total_d / secs)}/s  written back {human_bytes(total_b / secs)}/s"
    extra = (LATENCY_HEADER if latency else "") + (PAGE_CACHE_HEADER if page_cache else "")
    lines = [
        summary + f"  files {len(interval.files)}  lost {interval.lost_events}",
        TEXT_HEADER.replace("  path", extra + "  path"),
    ]
    for f in interval.files:
        path = printable(f.path) + (f" · {f.region}" if f.region else "") + (" (deleted)" if f.deleted else "")
        lines.append(
            f"{clock:8} {f.kind:16} {human_bytes(f.write_bytes / secs):>10} {human_rate(f.write_ops / secs):>7} "
            f"{human_bytes(f.read_bytes / secs):>10} {human_rate(f.read_ops / secs):>7} "
            f"{human_rate(f.sync_ops / secs):>6} {f.errors:>4}{_latency_cells(f) if latency else ''}"
            f"{_page_cache_cells(f, secs) if page_cache else ''}  {path}"
        )
    devices = device_rates(interval.devices, secs, most=len(interval.devices)) if page_cache else []
    if devices:
        lines.append(
            f"{clock:8} devices (what each completed per second; whose bytes: server files, direct I/O, fs, other)"
        )
        lines += [f"{clock:8} {device_line(d)}" for d in devices]
    return "\n".join(lines) + "\n"


def format_groups(interval: Interval, group: str) -> str:
    """The interval's bytes by user, connection or query (the server's view of each
    thread, --mysql): one line per group, busiest writer first."""
    secs = interval.interval_s or 1.0
    clock = time.strftime("%H:%M:%S", time.localtime(interval.time))
    groups: dict[str, tuple[str, Counts]] = {}
    for f in interval.files:
        for key, label, counts in group_key(f, group):
            groups.setdefault(key, (label, Counts()))[1].merge(counts)
    lines = [f"{'time':8} {group:10} {'write/s':>10} {'wops/s':>7} {'read/s':>10} {'rops/s':>7} {'sync/s':>6}  {group}"]
    for label, c in sorted(groups.values(), key=lambda lc: (-lc[1].write_bytes, -lc[1].read_bytes, lc[0])):
        lines.append(
            f"{clock:8} {group:10} {human_bytes(c.write_bytes / secs):>10} {human_rate(c.write_ops / secs):>7} "
            f"{human_bytes(c.read_bytes / secs):>10} {human_rate(c.read_ops / secs):>7} "
            f"{human_rate(c.sync_ops / secs):>6}  {printable(label)}"
        )
    return "\n".join(lines) + "\n"


def write_text(interval: Interval, out: TextIO, latency: bool = False, page_cache: bool = False) -> None:
    write_whole(out, format_text(interval, latency, page_cache) + "\n")
