"""The interactive screen of `top`: rich Live redrawn once per interval, keys, totals on exit."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import tty
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .bursts.live import BurstTracker
from .model import GROUPS, SERVER_GROUPS, Counts, Interval
from .render import Header, render_screen
from .units import human_bytes, printable
from .view import SORT_KEYS, ScreenRow, ScreenState, device_rates
from .warmup_view import warmup_line

ROWS_MADE = 200  # at least this many ScreenRows an interval (the screen shows ~40 of 20,000 files)
HELP = "q quit · s sort · g group · l latency · p page cache · r ibdata1 regions"


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Single keys without Enter; Ctrl-C still raises SIGINT."""
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


class LiveScreen:
    """A sink for intervals that draws the full-screen table and reads keys."""

    def __init__(
        self,
        state: ScreenState,
        pid: int,
        server: str,
        datadir: str | None,
        console: Console,
        page_cache: bool = False,
    ) -> None:
        self.state = state
        self.pid = pid
        self.server = server
        self.datadir = datadir
        self.console = console
        self.page_cache = page_cache  # the probe counts the page cache and devices
        self.quit = False
        self._rows: list[ScreenRow] = []
        self._last: Interval | None = None
        self._live = Live(console=console, screen=True, auto_refresh=False, transient=True)
        self.bursts = BurstTracker()  # periodic bursts of the files shown: the banner
        # what key g cycles through: user, connection and query only with the server's view (--mysql)
        self.groups: tuple[str, ...] = tuple(g for g in GROUPS if g not in SERVER_GROUPS)
        self.sampler: Any = None  # sampling.IntervalSampler: key r folds or splits ibdata1's regions
        self.probe: Any = None  # probe.Probe: key l starts timing requests if it was opened untimed
        self.warmup: Any = None  # warmup.WarmupWatch (top's): the warm-up after a restart, under the banner

    def __enter__(self) -> LiveScreen:
        self._live.__enter__()
        self._live.update(Text(f"mysqlio top: tracing pid {self.pid}, first update in one interval… ({HELP})"))
        self._live.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def emit(self, interval: Interval) -> None:
        self._last = interval
        if interval.server is not None and interval.server.facts is not None:
            self.bursts.set_facts(interval.server.facts)  # --mysql: trains named by the server
        self.bursts.update(
            interval.time, interval.interval_s, [f for f in interval.files if self.state.filters.keep(f)]
        )
        # ScreenRows made for the rows that can show (rendering cuts them to the height)
        self._rows = self.state.update(interval, most=self._most())
        if self.warmup is not None:
            self.warmup.feed(interval.pid, interval.time, interval.interval_s, interval.files)
        self._draw()

    def _most(self) -> int:
        """Rows to make ScreenRows for: more than the screen's height can show."""
        return max(ROWS_MADE, self.console.size.height)

    def _draw(self) -> None:
        if self._last is None:
            return
        secs = self._last.interval_s or 1.0
        wback_by: dict[str, int] = {}
        for f in self._last.files:
            for cause, nbytes in f.writeback_by.items():
                wback_by[cause] = wback_by.get(cause, 0) + nbytes
        header = Header(
            pid=self.pid,
            server=self.server,
            elapsed_s=self.state.elapsed_s,
            interval_s=round(secs, 2),
            write_bps=sum(f.write_bytes for f in self._last.files) / secs,
            read_bps=sum(f.read_bytes for f in self._last.files) / secs,
            sync_ps=sum(f.sync_ops for f in self._last.files) / secs,
            lost_events=self.state.lost_events,
            lost_by=dict(self.state.lost_by),
            group=self.state.group,
            sort=self.state.sort,
            datadir=self.datadir,
            banner=self.bursts.banner(),
            warmup=warmup_line(self.warmup.current) if self.warmup is not None else None,
            latency=self.state.latency,
            server_status=self._last.server.summary() if self._last.server is not None else None,
            view=self.state.view,
            page_cache=self.page_cache,
            dirtied_bps=sum(f.dirtied_bytes for f in self._last.files) / secs,
            wback_bps=sum(f.writeback_bytes for f in self._last.files) / secs,
            wback_by=wback_by,
            devices=tuple(device_rates(self._last.devices, secs)),
        )
        size = self.console.size
        self._live.update(render_screen(header, self._rows, size.width, size.height))
        self._live.refresh()

    def wait(self, timeout_s: float) -> None:
        """Sleep up to timeout_s, handling keys as they come."""
        fd = sys.stdin.fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
        if not ready:
            return
        key = os.read(fd, 1).decode(errors="ignore")
        if key in ("q", "Q"):
            self.quit = True
        elif key == "s":
            keys = list(SORT_KEYS)
            self.state.sort = keys[(keys.index(self.state.sort) + 1) % len(keys)]
            self._rows = self.state.rows(most=self._most())
            self._draw()
        elif key == "l":
            self.state.latency = not self.state.latency
            if self.state.latency and self.probe is not None:
                self.probe.start_timing()  # the columns fill from the next interval
            self._draw()
        elif key == "p":
            self.state.switch_view()
            self._draw()
        elif key == "o":  # MySQL's redo files: one row or one each, from the next interval on
            self.state.switch_redo_fold()
        elif key == "r" and self.sampler is not None:  # from the next interval on
            self.sampler.fold_regions = not self.sampler.fold_regions
            self.state.regroup(self.state.group)
        elif key == "g":
            at = self.groups.index(self.state.group) if self.state.group in self.groups else -1
            self.state.regroup(self.groups[(at + 1) % len(self.groups)])


TOTALS_MOST = 100  # the files in the exit table; the rest summed in one row


def render_totals(state: ScreenState, datadir: str | None, page_cache: bool = False, most: int = TOTALS_MOST) -> Table:
    """Whole-session totals per file, printed when top exits (with the page cache's bytes
    when it was counted): the `most` busiest files, the others summed in a last row (at
    19,000 files a row each took 12-17 s of CPU to print, issue 60)."""
    table = Table(title=f"mysqlio: session totals over {state.elapsed_s:.1f} s", box=None, header_style="bold")
    titles = ["kind", "written", "wops", "syncs", "read", "rops"] + (["dirtied", "wback"] if page_cache else [])
    for title in titles:
        table.add_column(title, justify="left" if title == "kind" else "right", no_wrap=True, min_width=len(title))
    # a long path wraps rather than squeezing the numbers
    table.add_column("path", overflow="fold", ratio=1)
    ordered = sorted(
        state.totals.values(), key=lambda t: (-t[2].write_bytes, -t[2].writeback_bytes, -t[2].read_bytes, t[0])
    )
    rest = Counts()
    for _, _, c in ordered[most:]:
        rest.merge(c)
    shown_rows = ordered[:most]
    if len(ordered) > most:
        shown_rows.append(("", "", rest))
    for path, kind, c in shown_rows:
        if not path:  # the files past `most`, summed
            kind, path = "", f"… {len(ordered) - most:,} more files"
        shown = path[len(datadir.rstrip("/")) + 1 :] if datadir and path.startswith(datadir.rstrip("/") + "/") else path
        cells = [
            kind,
            human_bytes(c.write_bytes),
            str(c.write_ops),
            str(c.sync_ops),
            human_bytes(c.read_bytes),
            str(c.read_ops),
        ]
        if page_cache:
            cells += [human_bytes(c.dirtied_bytes), human_bytes(c.writeback_bytes)]
        table.add_row(*cells, printable(shown))
    if state.lost_events:
        table.caption = f"lost events: {state.lost_events}"
    return table
