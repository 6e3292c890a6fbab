"""A recorded trace's per-file series, fed batch by batch (`SeriesBuilder`), and
the trains of a whole trace (`trains_from_trace`)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ..events import BY_NAMES, OP_NAMES
from ..filters import Filters
from ..trace import TraceReader
from ..trace_counts import SecondRows
from ..trace_events import Decoder, Events
from .detect import detect
from .fold import FOLDED_KEY, redo_dir
from .rules import MIN_BURSTS
from .train import SYNC_CALLS, Series, Train

_OP_WRITE = OP_NAMES.index("write")
_OP_WRITEBACK = OP_NAMES.index("writeback")
_OP_SYNC_FIRST = OP_NAMES.index("fsync")
_OP_SYNC_END = _OP_SYNC_FIRST + len(SYNC_CALLS)
assert OP_NAMES[_OP_SYNC_FIRST:_OP_SYNC_END] == SYNC_CALLS


class SeriesBuilder:
    """Per-file series of a recorded trace, fed batch by batch: write bytes and
    requests in bins of `resolution_s` (0.1 s: in 1 s bins a 30 ms burst that
    straddles a second's edge fills two bins, and a job every 4 s then leaves half
    its file's bins busy, which is no burst at all: a fresh CI run missed a MyISAM
    job's train so), syncs in bins of `sync_resolution_s` (fine enough for a
    once-a-second fsync), bytes written back (op "writeback" events)
    in bins of `writeback_resolution_s` (a sync's writeback takes milliseconds), with
    each file's dominant cause (`by`). Sparse while it reads (one row per bin and
    file with activity), dense per file when asked for the series.

    `add(ev, dec)` takes a `trace_events.Events` batch and its `trace_events.Decoder`,
    so `report.build.build_report` can feed it from its own loop."""

    def __init__(
        self, resolution_s: float = 0.1, sync_resolution_s: float = 0.1, writeback_resolution_s: float = 0.1
    ) -> None:
        self.resolution_s = resolution_s
        self.sync_resolution_s = sync_resolution_s
        self.writeback_resolution_s = writeback_resolution_s
        self._writes = SecondRows(2)
        self._syncs = SecondRows(1)
        self._writeback = SecondRows(1)
        self._wb_by = np.zeros((0, len(BY_NAMES)), np.int64)  # path id -> bytes written back by each cause
        self._kind_of = np.full(0, -1, np.int64)  # path id -> kind id
        self._sync_calls = np.zeros((0, len(SYNC_CALLS)), np.int64)  # path id -> its calls of each SYNC_CALLS
        # path id -> the id of its series: its own, or for a file of MySQL's redo directory the
        # directory's (bursts.fold); -1: not known yet
        self._series_of = np.zeros(0, np.int64)
        self._folded: dict[int, str] = {}  # the id of a folded series -> its name (the directory)
        self._folded_files: dict[int, set[tuple[int, int]]] = {}  # a folded series' id -> its files (dev, ino)
        self._t_min = math.inf
        self._t_max = -math.inf

    def add(self, ev: Events, dec: Decoder) -> None:
        if not len(ev.t):
            return
        self._t_min = min(self._t_min, float(ev.t.min()))
        self._t_max = max(self._t_max, float(ev.t.max()))
        path = self._series_ids(dec.region_paths(ev), ev, dec)  # a region of ibdata1 is a file of its own here
        n_paths = max(1, len(dec.paths.values))
        known = len(self._kind_of)
        if known < n_paths:  # a path's kind never changes: only new paths need theirs
            self._kind_of = np.concatenate([self._kind_of, np.full(n_paths - known, -1, np.int64)])
            new = path >= known
            self._kind_of[path[new]] = ev.kind[new]
        if len(self._sync_calls) < n_paths:
            self._sync_calls = np.concatenate(
                [self._sync_calls, np.zeros((n_paths - len(self._sync_calls), len(SYNC_CALLS)), np.int64)]
            )
        if len(self._wb_by) < n_paths:
            self._wb_by = np.concatenate([self._wb_by, np.zeros((n_paths - len(self._wb_by), len(BY_NAMES)), np.int64)])
        ok_op = np.where(ev.ok, ev.op, -1)
        write = ok_op == _OP_WRITE
        if write.any():
            nbytes = ev.nbytes[write].astype(np.float64)

            def sums(key: np.ndarray, size: int, _ev: Events) -> np.ndarray:
                out = np.zeros((size, 2), np.int64)
                out[:, 0] = np.rint(np.bincount(key, weights=nbytes, minlength=size))
                out[:, 1] = np.bincount(key, minlength=size)
                return out

            sec = np.floor(ev.t[write] / self.resolution_s).astype(np.int64)
            self._writes.add(sec, path[write], n_paths, sums, ev)
        sync = (ok_op >= _OP_SYNC_FIRST) & (ok_op < _OP_SYNC_END)
        if sync.any():

            def counts(key: np.ndarray, size: int, _ev: Events) -> np.ndarray:
                return np.bincount(key, minlength=size).reshape(size, 1)

            sec = np.floor(ev.t[sync] / self.sync_resolution_s).astype(np.int64)
            self._syncs.add(sec, path[sync], n_paths, counts, ev)
            n_calls = len(SYNC_CALLS)
            key = path[sync] * n_calls + (ok_op[sync] - _OP_SYNC_FIRST)
            self._sync_calls += np.bincount(key, minlength=n_calls * n_paths).reshape(n_paths, n_calls)
        wb = ok_op == _OP_WRITEBACK
        if wb.any():
            wb_bytes = ev.nbytes[wb].astype(np.float64)

            def wb_sums(key: np.ndarray, size: int, _ev: Events) -> np.ndarray:
                return np.rint(np.bincount(key, weights=wb_bytes, minlength=size)).astype(np.int64).reshape(size, 1)

            sec = np.floor(ev.t[wb] / self.writeback_resolution_s).astype(np.int64)
            self._writeback.add(sec, path[wb], n_paths, wb_sums, ev)
            n_by = len(BY_NAMES)
            key = path[wb] * n_by + ev.by[wb]
            self._wb_by += (
                np.rint(np.bincount(key, weights=wb_bytes, minlength=n_by * n_paths))
                .astype(np.int64)
                .reshape(n_paths, n_by)
            )
        if self._folded:
            self._count_files(path, ev, np.isin(path, list(self._folded)))
        for rows in (self._writes, self._syncs, self._writeback):
            if rows.rows > 1_000_000:
                rows.compact()

    def _series_ids(self, path: np.ndarray, ev: Events, dec: Decoder) -> np.ndarray:
        """Each event's series id: its path id, or for a file of MySQL's redo directory the
        directory's (one series for the files InnoDB recycles: bursts.fold)."""
        size = len(dec.paths.values)
        if len(self._series_of) < size:
            grow = np.full(size - len(self._series_of), -1, np.int64)
            self._series_of = np.concatenate([self._series_of, grow])
        todo = self._series_of[path] < 0
        if todo.any():
            ids, first = np.unique(path[todo], return_index=True)
            kinds = ev.kind[np.flatnonzero(todo)[first]]
            for pid, kind_id in zip(ids.tolist(), kinds.tolist(), strict=True):
                directory = redo_dir(dec.paths.values[pid], dec.kinds.values[kind_id])
                if directory is None:
                    self._series_of[pid] = pid
                    continue
                # a name no event has (not the directory's: an fsync of it stays apart)
                sid = dec.paths.add(FOLDED_KEY + directory)
                self._folded[sid] = directory
                self._series_of[pid] = sid
        return self._series_of[path]

    def _count_files(self, sid: np.ndarray, ev: Events, mask: np.ndarray) -> None:
        """The files each folded series holds, by (dev, ino): a recycled file is one file
        under each of its names (as the live screen's folded row counts them)."""
        if not mask.any():
            return
        rows = np.unique(np.stack([sid[mask], ev.dev[mask].astype(np.int64), ev.ino[mask].astype(np.int64)]), axis=1)
        for s, dev, ino in rows.T.tolist():
            self._folded_files.setdefault(s, set()).add((dev, ino))

    def series(self, dec: Decoder, min_bins: int = MIN_BURSTS) -> Iterator[Series]:
        """One Series per file and metric with activity in at least `min_bins` bins,
        each over the whole trace (idle bins included). A generator: each is dense
        (an hour in 0.1 s bins is 36,000 bins a file), so one at a time is alive
        while `detect` consumes them."""
        if self._t_max < self._t_min:
            return
        for rows, r, metric in (
            (self._writes, self.resolution_s, "write"),
            (self._syncs, self.sync_resolution_s, "sync"),
            (self._writeback, self.writeback_resolution_s, "writeback"),
        ):
            sec, ids, values = rows.compact()
            if not len(sec):
                continue
            lo, hi = math.floor(self._t_min / r), math.floor(self._t_max / r)
            order = np.argsort(ids, kind="stable")
            sec, ids, values = sec[order], ids[order], values[order]
            starts = np.flatnonzero(np.diff(ids, prepend=np.int64(-1)))
            ends = np.append(starts[1:], len(ids))
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
                if b - a < min_bins:
                    continue
                pid = int(ids[a])
                kind_id = int(self._kind_of[pid]) if pid < len(self._kind_of) else -1
                kind = dec.kinds.values[kind_id] if kind_id >= 0 else "other"
                dense = np.zeros((hi - lo + 1, values.shape[1]))
                np.add.at(dense, sec[a:b] - lo, values[a:b])
                name = self._folded.get(pid) or dec.paths.values[pid]
                files = len(self._folded_files.get(pid, ())) if pid in self._folded else None
                if metric == "write":
                    yield Series(name, kind, r, lo * r, bytes=dense[:, 0], ops=dense[:, 1], files=files)
                elif metric == "writeback":
                    by = self._dominant_by(pid)
                    yield Series(name, kind, r, lo * r, writeback=dense[:, 0], writeback_by=by, files=files)
                else:
                    call = SYNC_CALLS[int(np.argmax(self._sync_calls[pid]))] if pid < len(self._sync_calls) else None
                    yield Series(name, kind, r, lo * r, syncs=dense[:, 0], sync_call=call, files=files)

    def _dominant_by(self, pid: int) -> str | None:
        """The cause of most of the file's writeback (None: none known)."""
        if pid >= len(self._wb_by):
            return None
        by = self._wb_by[pid, 1:]  # BY_NAMES[0] is "none"
        return BY_NAMES[1 + int(np.argmax(by))] if by.any() else None


def trains_from_trace(
    reader: TraceReader, filters: Filters | None = None, resolution_s: float = 0.1, sync_resolution_s: float = 0.1
) -> list[Train]:
    """Read a trace (`trace.TraceReader`) and find its trains; times are seconds
    since the start of the trace."""
    dec = Decoder(filters, reader.meta.region_maps())
    builder = SeriesBuilder(resolution_s, sync_resolution_s)
    for batch in reader.batches():
        builder.add(dec.decode(batch), dec)
    return detect(builder.series(dec))
