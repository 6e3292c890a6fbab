"""`report --per-second`: the (second, group) counters, made into rows one second at a
time. An hour of a busy trace is about a million rows; held whole (as rows, then as
JSON objects or a rich table) they took 3 GiB (docs/benchmarks.md). Here only the
compacted counters stay; each second's rows exist while that second is written out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..model import COUNTER_FIELDS
from .groups import busiest_key
from .model import GroupRow, Stats


@dataclass
class PerSecond:
    """Rows of each second with activity, busiest first, in time order when iterated."""

    sec: np.ndarray  # one entry per (second, group), sorted by second (SecondRows.compact)
    ids: np.ndarray  # group ids
    values: np.ndarray  # (entries, len(COUNTER_FIELDS)) counters
    row_of: Callable[[int, Stats], GroupRow]  # group id and counters -> its row (GroupKeys.row)
    _starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._starts = np.flatnonzero(np.diff(self.sec, prepend=np.int64(-(2**62)))).tolist()

    def __len__(self) -> int:
        """Seconds with activity."""
        return len(self._starts)

    def __iter__(self) -> Iterator[tuple[int, list[GroupRow]]]:
        ends = [*self._starts[1:], len(self.sec)]
        for start, end in zip(self._starts, ends, strict=True):
            rows = [self.row_of(int(self.ids[j]), Stats.of(self.values[j])) for j in range(start, end)]
            yield int(self.sec[start]), sorted(rows, key=busiest_key)

    def labels(self) -> list[str]:
        """The label of every group that has a row in some second (once each)."""
        zero = Stats.of([0] * len(COUNTER_FIELDS))
        return [self.row_of(int(g), zero).label for g in np.unique(self.ids).tolist()]
