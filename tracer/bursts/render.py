"""Trains drawn: a rich table for `report`, shaded spans for `plot`."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from ..units import human_bytes
from .train import Train


def render_trains(trains: Sequence[Train], width: int = 120) -> Table:
    """A rich table: one line per train (for `report`)."""

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    for title, w in (("period", 8), ("±", 6), ("bursts", 6), ("per burst", 10), ("share", 6), ("conf", 5)):
        table.add_column(title, justify="right", no_wrap=True, width=w)
    table.add_column("file · what · how often → cause", overflow="fold", min_width=max(20, width - 46))
    for t in trains:
        per = (
            f"{t.ops_per_burst} sync{'s' * (t.ops_per_burst != 1)}"
            if t.metric == "sync"
            else human_bytes(t.bytes_per_burst)
        )
        share = t.share_of_file_syncs if t.metric == "sync" else t.share_of_file_bytes
        table.add_row(
            f"{t.period_s:.2f}s",
            f"{t.period_spread_s:.2f}s",
            str(t.bursts),
            per,
            "-" if share is None else f"{100 * share:.0f}%",
            f"{t.confidence:.2f}",
            Text(t.explanation),
        )
    return table


def burst_spans(
    trains: Sequence[Train], metrics: Sequence[str] = ("write",), limit: int = 3
) -> list[tuple[float, float, str]]:
    """(start_s, end_s, label) of the bursts of the `limit` most confident trains of
    these metrics (syncs are a line of their own in a plot), for plot.render_figure;
    only a train's first burst carries its label."""
    spans = []
    chosen = sorted((t for t in trains if t.metric in metrics), key=lambda t: -t.confidence)[:limit]
    for t in chosen:
        for i, b in enumerate(t.members):
            spans.append((b.start_s, b.start_s + max(b.duration_s, 0.2), t.explanation if i == 0 else ""))
    return spans
