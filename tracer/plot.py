"""Plot a trace: bytes written per second, stacked by kind (or by the busiest
files, MySQL's recycled redo files as one layer as on the live screen), the bytes
the kernel wrote back from the page cache beside them (traces that have them),
syncs per second on a second axis and optional bursts marked.

matplotlib's Agg canvas, no pyplot (no global state, no display needed);
matplotlib is imported only when a figure is drawn.
`.png` and `.svg` are written as such; `.html` is a self-contained page with
the SVG inline. `plot_series()` computes the data; `render_figure()` draws it.
"""

from __future__ import annotations

import html
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from .abi import Op
from .bursts.detect import detect
from .bursts.fold import FOLDED_KEY, folded_label, redo_dir
from .bursts.render import burst_spans
from .bursts.series import SeriesBuilder
from .bursts.train import Train
from .errors import UserError
from .filters import Filters
from .model import COUNTER_FIELDS
from .server_timers import facts_in_samples
from .trace import TraceMeta, TraceReader, open_private
from .trace_counts import SecondRows, SecondSeries, count
from .trace_events import Decoder, Events
from .units import printable, shorten, utc_time

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = (".png", ".svg", ".html")
BY = ("kind", "file")
_SYNC_COLUMNS = [COUNTER_FIELDS.index(f"{call}_ops") for call in ("fsync", "fdatasync", "sync_file_range", "msync")]
_WRITEBACK_COLUMN = COUNTER_FIELDS.index("writeback_bytes")

Burst = tuple[float, float, str]  # (start_s, end_s, label), seconds since the trace start


@dataclass
class PlotSeries:
    """Per-second series of a trace, ready to draw."""

    meta: TraceMeta
    by: str  # "kind" or "file"
    seconds: np.ndarray  # int64, every second from the first to the last event
    labels: list[str]  # one per stacked layer, busiest first
    write_bytes: np.ndarray  # (len(labels), len(seconds)) bytes written in each second
    sync_ops: np.ndarray  # (len(seconds),) fsync + fdatasync + sync_file_range + msync in each second
    # (len(seconds),) page-cache bytes the kernel wrote back to the device in each second
    writeback_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    truncated: bool = False
    trains: list[Train] = field(default_factory=list)  # periodic bursts found in the trace


def _write_bytes(key: np.ndarray, size: int, ev: Events) -> np.ndarray:
    return count(key, size, ev)[:, :1]


class _FileLayers:
    """Each event's layer by file: its path, but the files of MySQL's redo directory one
    layer, as on the live screen (bursts.fold): InnoDB recycles its 32 files by renaming
    them, so each name holds a few seconds of the redo log, and a layer each would split
    one steady stream into short slivers spread over the top layers and "other files"."""

    def __init__(self) -> None:
        self.keys: list[str] = []  # layer id -> a path, or FOLDED_KEY + the redo directory
        self._index: dict[str, int] = {}
        self._layer_of = np.zeros(0, np.int64)  # path id -> layer id; -1: not seen yet
        self.files: dict[int, set[tuple[int, int]]] = {}  # folded layer -> the (dev, ino) written

    def ids(self, ev: Events, dec: Decoder) -> np.ndarray:
        size = len(dec.paths.values)
        if len(self._layer_of) < size:
            self._layer_of = np.concatenate([self._layer_of, np.full(size - len(self._layer_of), -1, np.int64)])
        todo = self._layer_of[ev.path] < 0
        if todo.any():
            paths, first = np.unique(ev.path[todo], return_index=True)
            kinds = ev.kind[np.flatnonzero(todo)[first]]  # a path's kind never changes
            for pid, kid in zip(paths.tolist(), kinds.tolist(), strict=True):
                path = dec.paths.values[pid]
                directory = redo_dir(path, dec.kinds.values[kid])
                key = path if directory is None else FOLDED_KEY + directory
                layer = self._index.get(key)
                if layer is None:
                    layer = self._index[key] = len(self.keys)
                    self.keys.append(key)
                    if directory is not None:
                        self.files[layer] = set()
                self._layer_of[pid] = layer
        layers = self._layer_of[ev.path]
        if self.files:  # the files each folded layer wrote (a renamed file is one, under each name)
            written = np.isin(layers, list(self.files)) & ev.ok & (ev.op == int(Op.WRITE)) & (ev.nbytes > 0)
            for layer, dev, ino in zip(
                layers[written].tolist(), ev.dev[written].tolist(), ev.ino[written].tolist(), strict=True
            ):
                self.files[layer].add((dev, ino))
        return layers

    def label(self, layer: int, datadir: str | None, width: int) -> str:
        key = self.keys[layer]
        if layer not in self.files:
            return shorten(key, datadir, width)
        # "#innodb_redo (32 files)", as the live screen's row
        return folded_label(shorten(key.removeprefix(FOLDED_KEY), datadir, width - 12), len(self.files[layer]))


def plot_series(reader: TraceReader, by: str = "kind", top: int = 8, filters: Filters | None = None) -> PlotSeries:
    """Read the trace once: write bytes per (second, kind or file), syncs per second.
    Layers beyond the `top` busiest are summed into one "other" layer."""
    if by not in BY:
        raise ValueError(f"unknown grouping {by}")
    dec = Decoder(filters)
    rows = SecondRows(1)
    totals = SecondSeries()
    burst_series = SeriesBuilder()
    files = _FileLayers()
    for batch in reader.batches():
        ev = dec.decode(batch)
        if not len(ev):
            continue
        sec = ev.sec
        if by == "kind":
            rows.add(sec, ev.kind, max(1, len(dec.kinds.values)), _write_bytes, ev)
        else:
            layers = files.ids(ev, dec)  # (which may add layers)
            rows.add(sec, layers, max(1, len(files.keys)), _write_bytes, ev)
        totals.add(sec, ev)
        burst_series.add(ev, dec)
        if rows.rows > 1_000_000:
            rows.compact()
    base, per_sec = totals.array()
    if not len(per_sec):
        raise UserError(
            f"{reader.path}: nothing to plot (no events{' match the filters' if dec.filters.active() else ''})"
        )
    n_ids = len(dec.kinds.values) if by == "kind" else len(files.keys)
    sec, ids, wbytes = rows.compact()
    nsec = len(per_sec)
    per_id = np.bincount(ids, weights=wbytes[:, 0], minlength=n_ids)
    busiest = [int(i) for i in np.argsort(-per_id, kind="stable") if per_id[i] > 0]
    shown, rest = busiest[:top], busiest[top:]
    layer_of = np.full(n_ids, -1, np.int64)
    layer_of[shown] = np.arange(len(shown))
    if by == "kind":
        labels = [shorten(dec.kinds.values[i], reader.meta.datadir, 40) for i in shown]
    else:
        labels = [files.label(i, reader.meta.datadir, 40) for i in shown]
    if rest:
        layer_of[rest] = len(shown)
        labels.append(f"{len(rest)} other {'kinds' if by == 'kind' else 'files'}")
    matrix = np.zeros((len(labels), nsec), np.int64)
    keep = (layer_of[ids] >= 0) & (sec - base < nsec)
    np.add.at(matrix, (layer_of[ids][keep], (sec - base)[keep]), wbytes[keep, 0])
    syncs = per_sec[:, _SYNC_COLUMNS].sum(axis=1)
    return PlotSeries(
        meta=reader.meta,
        by=by,
        seconds=np.arange(base, base + nsec, dtype=np.int64),
        labels=labels,
        write_bytes=matrix,
        sync_ops=syncs,
        writeback_bytes=per_sec[:, _WRITEBACK_COLUMN].copy(),
        truncated=reader.truncated,
        trains=detect(burst_series.series(dec), facts=facts_in_samples(reader.server_status)),
    )


def _rate_unit(peak: float) -> tuple[float, str]:
    for scale, unit in ((1 << 30, "GiB/s"), (1 << 20, "MiB/s"), (1 << 10, "KiB/s")):
        if peak >= scale:
            return float(scale), unit
    return 1.0, "B/s"


def render_figure(series: PlotSeries, bursts: Sequence[Burst] | None = None, title: str | None = None) -> Figure:
    """The figure: stacked write bytes per second, syncs per second on the right axis,
    each burst (start_s, end_s, label) shaded and labelled."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # imported here: slow, and only plots need it
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 5.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = np.append(series.seconds, series.seconds[-1] + 1).astype(np.float64)  # step edges
    peak = float(series.write_bytes.sum(axis=0).max()) if series.write_bytes.size else 0.0
    writeback = series.writeback_bytes if series.writeback_bytes.any() else None
    if writeback is not None:
        peak = max(peak, float(writeback.max()))
    scale, unit = _rate_unit(peak)
    layers = [np.append(row, row[-1]) / scale for row in series.write_bytes]
    colors = [f"C{i % 10}" for i in range(len(layers))]
    if layers:
        ax.stackplot(x, layers, labels=series.labels, colors=colors, step="post", alpha=0.85, linewidth=0)
    if writeback is not None:  # beside the writes: what the kernel wrote of them to the device, and when
        ax.plot(
            x,
            np.append(writeback, writeback[-1]) / scale,
            drawstyle="steps-post",
            color="darkblue",
            linestyle="--",
            linewidth=1.2,
            label="written back (page cache → device)",
        )
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(bottom=0, top=(peak / scale) * 1.08 if peak > 0 else 1)
    ax.set_xlabel(f"seconds since the start of the trace ({utc_time(series.meta.start_wall)})")
    ax.set_ylabel(f"written{', written back' if writeback is not None else ''} ({unit})")
    ax.grid(True, axis="y", alpha=0.3)

    ax2 = ax.twinx()
    syncs = np.append(series.sync_ops, series.sync_ops[-1]).astype(np.float64)
    ax2.plot(x, syncs, drawstyle="steps-post", color="black", linewidth=1.0, label="syncs/s (right axis)")
    ax2.set_ylabel("syncs per second (fsync + fdatasync + sync_file_range + msync)")
    ax2.set_ylim(bottom=0, top=max(1.0, float(syncs.max()) * 1.15))

    labelled = 0
    for i, (start, end, label) in enumerate(bursts or ()):
        ax.axvspan(start, end, color="red", alpha=0.12, linewidth=0, zorder=0, label="burst" if i == 0 else None)
        if not label:
            continue
        # a line each: trains that start together (InnoDB's 1 s flushes of several files) overlap
        labelled += 1
        ax.annotate(
            printable(label),
            xy=(start, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, 8 - 10 * labelled),
            textcoords="offset points",
            va="top",
            fontsize=8,
            color="darkred",
        )

    m = series.meta
    server = " ".join(printable(s) for s in (m.server_version,) if s) or "mysqld"
    what = "Bytes written (and written back)" if writeback is not None else "Bytes written"
    default = f"{what} per second by {series.by}, and syncs: {server} pid {m.pid} on {printable(m.host)}"
    if series.truncated:
        default += " (trace cut short)"
    ax.set_title(title or default, fontsize=11)
    handles, labels = ax.get_legend_handles_labels()
    handles2, labels2 = ax2.get_legend_handles_labels()
    # busiest layer at the top of the legend, as it is stacked at the bottom of the plot
    fig.legend(  # outside the axes, right of the sync axis: constrained layout makes room
        handles2 + handles[::-1],
        labels2 + labels[::-1],
        loc="outside right upper",
        fontsize=8,
        title=series.by,
        title_fontsize=8,
        frameon=False,
    )
    return fig


def _open_output(out: str) -> BinaryIO:
    if os.path.splitext(out)[1].lower() not in FORMATS:
        raise UserError(f"cannot plot to {out}: the name must end in {', '.join(FORMATS)}")
    return open_private(out, "plot")


def _write(fig: Figure, f: BinaryIO, out: str) -> None:
    ext = os.path.splitext(out)[1].lower()
    try:
        if ext == ".png":
            fig.savefig(f, format="png", metadata={"Software": None})
        elif ext == ".svg":
            fig.savefig(f, format="svg", metadata={"Date": None})
        else:
            svg = io.BytesIO()
            fig.savefig(svg, format="svg", metadata={"Date": None})
            body = svg.getvalue().decode("utf-8")
            body = body[body.index("<svg") :]  # drop the XML prolog and doctype
            title = html.escape(fig.axes[0].get_title())
            page = (
                "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
                f"<title>{title}</title></head>\n<body style='margin:1em'>\n{body}\n</body></html>\n"
            )
            f.write(page.encode("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write plot {out}: {exc.strerror or exc}") from None


def plot_trace(
    reader: TraceReader,
    out: str,
    by: str = "kind",
    top: int = 8,
    bursts: Sequence[Burst] | None = None,
    filters: Filters | None = None,
    title: str | None = None,
) -> PlotSeries:
    """Read, draw and save in one call; returns the series drawn. The output is
    opened before matplotlib is loaded, so a bad name fails fast."""
    if os.path.splitext(out)[1].lower() not in FORMATS:  # before reading the whole trace
        raise UserError(f"cannot plot to {out}: the name must end in {', '.join(FORMATS)}")
    series = plot_series(reader, by, top, filters)
    f = _open_output(out)
    try:
        spans = bursts if bursts is not None else burst_spans(series.trains)
        _write(render_figure(series, spans, title), f, out)
    finally:
        f.close()
    return series
