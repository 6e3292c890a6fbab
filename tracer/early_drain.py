"""Drain the stats maps mid-interval when one interval's rows would not fit them.

The maps hold the rows of one drain (mysqlio.map_sizing sizes them at start); a row that
finds them full is lost (stats_full, counted and shown). When the files the server
holds call for more rows than the budget bought, or an interval's rows came near the
capacity, or some were lost, the interval is drained in parts: each part's rows are kept
here and handed over with the interval's own at its end, so the interval's counts are
whole. The parts are drained by a thread of their own: the interval loop may be busy
naming and printing thousands of files for seconds on a loaded machine, and the maps
fill meanwhile. The part count adapts interval by interval; a probe whose maps are not
sized (SystemTap), or whose maps hold an interval, is drained once per interval as before.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from .map_sizing import ROWS_PER_FILE
from .probe import OpCount

MOST_PARTS = 8  # drains per interval at most (each waits for an RCU grace period)


class EarlyDrain:
    """The drains of one interval: `parts` of them, the last by the sampler (take)."""

    def __init__(self, probe: Any, interval_s: float = 1.0) -> None:
        self._probe = probe
        self.interval_s = interval_s  # run_loop sets it
        sizes = getattr(probe, "map_sizes", None)
        self.capacity = sizes.stats_rows() if sizes is not None else 0
        # every part there is when the maps cannot hold the rows of one burst over the files
        # the server holds (a checkpoint's comes without warning), however quiet an interval;
        # else parts only as learn() finds rows. Not its open-files limit: a container's 2^20
        # would drain MOST_PARTS times every idle interval.
        short = sizes is not None and ROWS_PER_FILE * sizes.held > self.capacity
        self.least_parts = MOST_PARTS if short else 1
        self.parts = self.least_parts
        self.early = 0  # mid-interval drains so far
        # eBPF: the rows as arrays (stats_cells.ROW, folded by mysqlio.fold); else OpCounts
        self._table = getattr(probe, "drain_table", None)
        self._rows: list[Any] = []
        self._seen = 0  # rows of the last interval
        self._since = time.monotonic()
        self._lock = threading.Lock()  # one drain at a time; _rows, _since
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, interval_s: float) -> None:
        """Drain in parts from now on, when parts are called for (a daemon thread)."""
        self.interval_s = interval_s
        self._wake()

    def _wake(self) -> None:
        if self.parts > 1 and self._thread is None and not self._closed.is_set():
            self._thread = threading.Thread(target=self._run, name="mysqlio-early-drain", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                due = self._since + self.interval_s / self.parts
            if self._closed.wait(max(0.0, due - time.monotonic())):
                return
            with self._lock:
                due = self._since + self.interval_s / self.parts
                if not self._closed.is_set() and self.parts > 1 and time.monotonic() >= due:
                    self._rows.append(self._drain())
                    self._since = time.monotonic()
                    self.early += 1

    def _drain(self) -> Any:
        return self._table() if self._table is not None else self._probe.drain()

    def take(self) -> list[OpCount] | np.ndarray:
        """The interval's rows: its early parts' and the rest, drained now (a stats_cells.ROW
        array where the probe drains one, else OpCounts)."""
        with self._lock:
            parts = [*self._rows, self._drain()]
            rows = np.concatenate(parts) if self._table is not None else [r for part in parts for r in part]
            self._rows = []
            self._since = time.monotonic()
        self._seen = len(rows)
        return rows

    def learn(self, lost_rows: int) -> None:
        """Set the next interval's parts from this one's rows and the rows it lost for a
        full table (stats_full): room for twice the rows seen, twice the parts after a loss."""
        if not self.capacity:
            return
        wanted = math.ceil(2 * self._seen / self.capacity)
        if lost_rows:
            wanted = max(wanted, 2 * self.parts)
        with self._lock:
            self.parts = max(self.least_parts, min(MOST_PARTS, wanted))
        self._wake()

    def close(self) -> None:
        """Stop the thread (before the probe closes)."""
        self._closed.set()
        with self._lock:  # a drain under way ends first
            pass
