"""Step 5 of the detector: periodic bursts one interval at a time, for the live
screen of `top` (`BurstTracker`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .chains import find_chains, median_of
from .detect import chain_train, metronome_runs, metronome_train, pair_twins
from .explain import explain
from .find import SeriesBursts, thresholds
from .fold import FOLDED_KEY, redo_dir
from .rules import (
    LIVE,
    LIVE_BURSTS,
    MAD_SIGMA,
    MAX_DUTY,
    METRONOME_MIN,
    MIN_PERIOD_S,
    OTHERS_MIN_REL,
    PROMINENCE,
    SMALL_EVERY,
    SMALL_REQUESTS,
    TOL_REL,
    WRITEBACK_PAGE,
    Rules,
)
from .train import BYTE_METRICS, SYNC_CALLS, Train

if TYPE_CHECKING:
    from ..server_timers import ServerFacts

_BUF_DTYPE = np.float32  # the history of each file's counts
_MOVE_ROWS = 2048  # rows of the history moved back at once (the temporary: 8 MiB at 120 columns)


@dataclass
class _LiveBurst:
    start: float  # of the interval where it began
    onset: float  # the middle of that interval
    end: float
    amount: float = 0.0
    ops: float = 0.0
    bytes_total: float = 0.0
    ops_total: float = 0.0
    extra_bytes: float = 0.0
    extra_ops: float = 0.0
    ops_var: float = 0.0
    prominence: float = 0.0
    open: bool = True
    causes: dict[str, float] | None = None  # writeback: bytes by what made the kernel write them


def banner_order(trains: Iterable[Train]) -> list[Train]:
    """Trains as the banner ranks them: most bytes per period first (what each burst adds:
    a 4 MiB MyISAM train before a 4 KiB Aria one), then the sync trains (no bytes), most
    syncs per period first; ties by confidence, then file and metric. A writeback train
    that is the disk's spike of a write train (`twin`) comes right after that train: the
    same bytes, rounded up to pages, and the writes say more about their cause."""
    trains = list(trains)
    written = {t.file: t.bytes_per_burst for t in trains if t.metric == "write" and t.twin == "writeback"}

    def key(t: Train) -> tuple[float, int, float, float, str, str]:
        spike = t.metric == "writeback" and t.twin == "write" and t.file in written
        nbytes = written[t.file] if spike else t.bytes_per_burst
        syncs = t.ops_per_burst if t.metric == "sync" else 0
        return (-nbytes, int(spike), -syncs, -t.confidence, t.file, t.metric)

    return sorted(trains, key=key)


def _field(f: Any, name: str, default: Any = None) -> Any:
    return f.get(name, default) if isinstance(f, dict) else getattr(f, name, default)


def _identity(f: Any) -> str:
    """What tells a file from another across renames: a model.FileActivity's key, or the
    dev:ino of a file of `top --json`."""
    key = getattr(f, "key", None)
    if isinstance(key, str):
        return key
    return f"{_field(f, 'dev')}:{_field(f, 'ino')}" if _field(f, "ino") is not None else _field(f, "path")


def _requests(b: _LiveBurst, metric: str) -> float:
    """What a burst holds in requests: writes, syncs, or pages written back."""
    if metric == "write":
        return b.ops_total
    return b.bytes_total / WRITEBACK_PAGE if metric == "writeback" else b.bytes_total


class BurstTracker:
    """Periodic bursts one interval at a time, for the live screen of `top`.

    `update(t_end_s, dt_s, files)` takes one interval: its end time, its length
    and, per file, `path`, `kind`, `write_bytes`, `write_ops`, `sync_ops` and,
    when counted, `writeback_bytes` with `writeback_by` (a model.FileActivity, or a
    dict of `top --json`). A train becomes active once
    three bursts match (see the module's algorithm, with `rules`; the baseline is the
    median and MAD of the file's last `history` intervals, recomputed every
    `recompute_every` intervals, used once it has `min_history` of them unless the
    file was idle) and leaves when no burst came for more than two periods. Files
    absent from an interval did nothing in it (`top` lists only active files)."""

    _B, _O, _S, _W = 0, 1, 2, 3  # buffer rows: write bytes, write ops, syncs, writeback bytes
    # the metrics (rows of the thresholds and burst states) and their buffer rows
    _METRICS = (("write", _B), ("sync", _S), ("writeback", _W))
    _ROW: ClassVar[dict[str, tuple[int, int]]] = {metric: (j, m) for j, (metric, m) in enumerate(_METRICS)}

    def __init__(
        self,
        history: int = 120,
        window_s: float = 900.0,
        rules: Rules = LIVE,
        recompute_every: int = 10,
        min_history: int = 10,
    ) -> None:
        self.history = history
        self.window_s = window_s
        self.rules = rules
        self.recompute_every = recompute_every
        self.min_history = min_history
        self._index: dict[str, int] = {}
        self._names: list[str] = []
        self._kinds: list[str] = []
        self._rows = 0
        # history plus a quarter: the last `history` columns move back once a quarter of
        # them has been filled (not 2 x history), in float32 (exact to 16 MiB an interval;
        # read back as float64): 20,000 files x 4 metrics x 150 columns is 46 MiB
        self._buf = np.zeros((4, 16, history + max(8, history // 4)), _BUF_DTYPE)
        self._pos = 0  # next buffer column
        self._base = 0  # interval number of buffer column 0
        self._n = 0  # intervals seen
        self._first = np.zeros(16, np.int64)  # interval number each file was first seen
        self._new = np.zeros(16, np.bool_)  # its baseline not computed yet
        self._med = np.zeros((4, 16))
        self._ops_sigma = np.zeros(16)  # robust standard deviation of write requests per interval
        self._thr = np.full((3, 16), np.inf)  # burst start thresholds: write bytes, syncs, writeback
        self._stay = np.full((3, 16), np.inf)  # ... and while a burst lasts
        self._open = np.zeros((3, 16), np.bool_)
        self._ready = np.zeros((3, 16), np.bool_)
        self._quiet = np.zeros((3, 16), np.int64)
        self._live: dict[tuple[int, str], _LiveBurst] = {}
        self._bursts: dict[tuple[int, str], deque[_LiveBurst]] = {}
        self._seen: dict[tuple[int, str], int] = {}  # bursts so far: every one was a new search
        self._sync_calls: dict[int, list[int]] = {}  # row -> its calls of each SYNC_CALLS so far
        self._wb_by: dict[int, dict[str, float]] = {}  # row -> bytes written back by each cause so far
        self._folded_files: dict[int, set[str]] = {}  # a folded row -> the files seen in it
        self._cur_by: dict[int, dict[str, float]] = {}  # ... in the current interval
        self._active: dict[tuple[int, str], Train] = {}
        self._dts: deque[float] = deque(maxlen=16)
        self._r = 1.0
        self._t_start: float | None = None
        self._t_end = 0.0
        self.facts: ServerFacts | None = None  # the server's settings and events (--mysql): explain()

    def set_facts(self, facts: ServerFacts | None) -> None:
        """What the server says about its timers (server_timers.ServerFacts, --mysql): the
        trains are explained with it from now on (bursts.server_causes)."""
        self.facts = facts

    # ---- input

    def update(self, t_end_s: float, dt_s: float, files: Iterable[Any]) -> list[Train]:
        """Feed one interval; returns the active trains."""
        dt = max(float(dt_s), 1e-6)
        t_end = float(t_end_s)
        if self._t_start is None:
            self._t_start = t_end - dt
        self._dts.append(dt)
        self._r = median_of(np.asarray(self._dts))  # the typical interval: the bin width
        rows, wb, wo, so, bb = [], [], [], [], []
        index = self._index
        self._cur_by = {}
        keyed = []
        fresh: set[str] = set()
        for f in files:
            # (attributes read inline, not through _field: 20,000 files an interval, issue 60)
            if isinstance(f, dict):
                path, values = f["path"], (f["write_bytes"], f["write_ops"], f["sync_ops"])
                region, kind, written_back = f.get("region", ""), f.get("kind"), f.get("writeback_bytes", 0)
            else:
                path, values = f.path, (f.write_bytes, f.write_ops, f.sync_ops)
                region, kind = getattr(f, "region", ""), getattr(f, "kind", None)
                written_back = getattr(f, "writeback_bytes", 0)
            path += f" · {region}" if region else ""  # a region of ibdata1: a train of its own
            directory = redo_dir(path, kind)  # MySQL's redo files: one series (bursts.fold)
            key = path if directory is None else FOLDED_KEY + directory
            if key not in index:
                fresh.add(key)
            keyed.append((f, values, kind, directory, key, written_back or 0))
        need = self._rows + len(fresh)
        if need > self._buf.shape[1]:  # the new files' rows at once, and an eighth more
            self._reserve(need + need // 8)
        for f, values, kind, directory, key, written_back in keyed:
            i = index.get(key)
            if i is None:
                i = self._add(key, kind, directory)
            if directory is not None:
                self._folded_files.setdefault(i, set()).add(_identity(f))
            if values[2]:  # which sync call the file uses, when the interval says
                calls = self._sync_calls.setdefault(i, [0] * len(SYNC_CALLS))
                for c, name in enumerate(SYNC_CALLS):
                    calls[c] += _field(f, f"{name}_ops", 0) or 0
            if written_back:  # and what made the kernel write it back
                causes, now = self._wb_by.setdefault(i, {}), self._cur_by.setdefault(i, {})
                for cause, nbytes in (_field(f, "writeback_by") or {}).items():
                    causes[cause] = causes.get(cause, 0) + nbytes
                    now[cause] = now.get(cause, 0) + nbytes
            rows.append(i)
            wb.append(values[0])
            wo.append(values[1])
            so.append(values[2])
            bb.append(written_back)
        n = self._rows
        cur = np.zeros((4, n))
        if rows:
            r = np.asarray(rows, np.int64)
            for m, values in ((self._B, wb), (self._O, wo), (self._S, so), (self._W, bb)):
                cur[m] = np.bincount(r, weights=np.asarray(values, np.float64), minlength=n)
        # each file's baseline every `recompute_every` intervals, a share of the files each
        # time; new files and those seen for only a few intervals every time
        which = (np.arange(n) % self.recompute_every) == (self._n % self.recompute_every)
        which |= (self._n - self._first[:n]) < self.recompute_every
        which |= self._new[:n]
        self._new[:n] = False
        self._recompute(which)
        settled = (self._n - self._first[:n]) >= self.min_history
        close_after = 2 if dt < 0.5 else 1
        for j, (metric, m) in enumerate(self._METRICS):
            x = cur[m]
            was = self._open[j, :n]
            # a file idle so far: any activity is a burst; else its baseline needs `min_history` intervals
            idle = self._thr[j, :n] == 0.5
            ready = settled | idle
            above = np.where(was, x > self._stay[j, :n], x > self._thr[j, :n]) & ready
            # a busy file's first burst once its baseline settled may have begun before
            fresh = ~self._ready[j, :n] & ~idle
            self._ready[j, :n] = ready
            for i in np.flatnonzero(above & ~was).tolist():
                self._onset(i, metric, t_end, dt, cur, partial=bool(fresh[i]))
            for i in np.flatnonzero(above & was).tolist():
                self._grow(i, metric, t_end, cur)
            quiet = was & ~above
            self._quiet[j, :n][above] = 0
            self._quiet[j, :n][quiet] += 1
            self._open[j, :n] = above | (quiet & (self._quiet[j, :n] < close_after))
            for i in np.flatnonzero(quiet & ~self._open[j, :n]).tolist():
                self._close(i, metric)
        self._push(cur)
        self._t_end = t_end
        if dt >= 0.5:
            self._metronomes(t_end)
        self._expire(t_end)
        return self.active_trains()

    def feed(self, interval: Any) -> list[Train]:
        """One `model.Interval` (its `time` is the end of the interval); the server's facts
        it carries (--mysql: `interval.server.facts`) explain the trains."""
        facts = getattr(getattr(interval, "server", None), "facts", None)
        if facts is not None:
            self.set_facts(facts)
        return self.update(interval.time, interval.interval_s, interval.files)

    def feed_json(self, obj: dict[str, Any]) -> list[Train]:
        """One object of `top --json`."""
        return self.update(obj["time"], obj["interval_s"], obj["files"])

    # ---- output

    def active_trains(self) -> list[Train]:
        pair_twins(self._active.values())  # a file's write and writeback trains of one period
        if self.facts is not None:  # what the server says (explain() is cheap: no I/O)
            for t in self._active.values():
                t.explanation = explain(t, self.facts)
        return sorted(self._active.values(), key=lambda t: (-t.confidence, t.file, t.metric))

    def banner(self) -> str | None:
        """One line for the screen: the train of the most bytes per period, and how many more."""
        trains = banner_order(self.active_trains())
        if not trains:
            return None
        more = f"  (+{len(trains) - 1} more)" if len(trains) > 1 else ""
        return f"periodic: {trains[0].explanation}{more}"

    # ---- internals

    def _add(self, key: str, kind: str, name: str | None = None) -> int:
        """A new row: a file by its path (`key`), or a folded series by FOLDED_KEY and `name`."""
        i = self._rows
        if i == self._buf.shape[1]:
            self._reserve(2 * i)
        self._index[key] = i
        self._names.append(name or key)
        self._kinds.append(kind)
        self._first[i] = max(0, self._n - self.history)  # absent from the intervals so far: idle in them
        self._buf[:, i] = 0.0
        self._rows += 1
        self._new[i] = True
        return i

    def _reserve(self, rows: int) -> None:
        """Room for `rows` rows (update() asks for an interval's new files at once: doubling
        from 16,384 rows to 32,768 for 19,000 files held both buffers, 370 MiB, at once)."""
        i = self._buf.shape[1]
        if rows <= i:
            return
        buf = np.zeros((4, rows, self._buf.shape[2]), _BUF_DTYPE)
        buf[:, :i] = self._buf
        self._buf = buf
        self._first = np.concatenate([self._first, np.zeros(rows - i, np.int64)])
        self._new = np.concatenate([self._new, np.zeros(rows - i, np.bool_)])
        self._med = np.concatenate([self._med, np.zeros((4, rows - i))], axis=1)
        self._ops_sigma = np.concatenate([self._ops_sigma, np.zeros(rows - i)])
        self._thr = np.concatenate([self._thr, np.full((3, rows - i), np.inf)], axis=1)
        self._stay = np.concatenate([self._stay, np.full((3, rows - i), np.inf)], axis=1)
        self._open = np.concatenate([self._open, np.zeros((3, rows - i), np.bool_)], axis=1)
        self._ready = np.concatenate([self._ready, np.zeros((3, rows - i), np.bool_)], axis=1)
        self._quiet = np.concatenate([self._quiet, np.zeros((3, rows - i), np.int64)], axis=1)

    def _push(self, cur: np.ndarray) -> None:
        width = self._buf.shape[2]
        if self._pos == width:  # keep the last `history` columns
            keep = self.history
            # overlapping columns: numpy copies through a temporary, a block of rows at a time
            for lo in range(0, self._rows, _MOVE_ROWS):
                self._buf[:, lo : lo + _MOVE_ROWS, :keep] = self._buf[:, lo : lo + _MOVE_ROWS, width - keep :]
            self._base += width - keep
            self._pos = keep
        self._buf[:, : self._rows, self._pos] = cur
        self._pos += 1
        self._n += 1

    def _recompute(self, which: np.ndarray) -> None:
        """Median and thresholds of the files `which` over their last `history`
        intervals (files seen for fewer intervals: over those)."""
        n = self._rows
        if not n or not self._pos or not which.any():
            return
        lo = max(0, self._pos - self.history)
        first_col = np.maximum(self._first[:n] - self._base, lo)
        for start in np.unique(first_col[which]).tolist():
            rows = np.flatnonzero((first_col == start) & which)
            if start >= self._pos:
                continue
            win = self._buf[:, rows, start : self._pos].astype(np.float64)
            active = win.any(axis=(0, 2))
            self._med[:, rows] = 0.0
            self._thr[:, rows] = 0.5
            self._stay[:, rows] = 0.5
            self._ops_sigma[rows] = 0.0
            if not active.any():
                continue
            act = rows[active]
            w = win[:, active]
            med = np.median(w, axis=2)
            self._med[:, act] = med
            for j, (_, m) in enumerate(self._METRICS):
                mad = np.median(np.abs(w[m] - med[m][:, None]), axis=1)
                self._thr[j, act], self._stay[j, act] = thresholds(med[m], mad)
            self._ops_sigma[act] = MAD_SIGMA * np.median(np.abs(w[self._O] - med[self._O][:, None]), axis=1)

    def _amounts(self, i: int, metric: str, cur: np.ndarray) -> tuple[float, float, float, float, float]:
        """Above the baseline: amount, ops; in all: amount, ops; and the prominence."""
        j, m = self._ROW[metric]
        x, med = cur[m, i], self._med[m, i]
        prominence = max(x - med, 0.0) / max(self._thr[j, i] - med, 1e-9)
        if metric != "write":
            return max(x - med, 0.0), 0.0, x, 0.0, prominence
        o = cur[self._O, i]
        return max(x - med, 0.0), max(o - self._med[self._O, i], 0.0), x, o, prominence

    def _onset(self, i: int, metric: str, t_end: float, dt: float, cur: np.ndarray, partial: bool) -> None:
        b = _LiveBurst(start=t_end - dt, onset=t_end - dt / 2, end=t_end)
        self._live[(i, metric)] = b
        self._grow(i, metric, t_end, cur)
        if partial:
            return  # followed to its end, but not counted: it may have begun before
        q = self._bursts.setdefault((i, metric), deque())
        q.append(b)
        self._seen[(i, metric)] = self._seen.get((i, metric), 0) + 1
        while q and q[0].onset < t_end - self.window_s:
            q.popleft()
        if b.prominence < PROMINENCE:
            return  # noise so far: neither starts nor extends a train (looked at again when it ends)
        requests = _requests(b, metric)
        seen = self._seen[(i, metric)]
        if requests >= SMALL_REQUESTS or (i, metric) in self._active or seen % SMALL_EVERY == 0:
            self._search(i, metric)  # trains of small bursts need six: look at every third one

    def _grow(self, i: int, metric: str, t_end: float, cur: np.ndarray) -> None:
        b = self._live[(i, metric)]
        a, o, at, ot, prominence = self._amounts(i, metric, cur)
        b.amount += a
        b.ops += o
        b.bytes_total += at
        b.ops_total += ot
        if metric == "write":
            b.extra_bytes += at - self._med[self._B, i]
            b.extra_ops += ot - self._med[self._O, i]
            b.ops_var += self._ops_sigma[i] ** 2
        b.prominence = max(b.prominence, prominence)
        if metric == "writeback" and i in self._cur_by:
            b.causes = b.causes or {}
            for cause, nbytes in self._cur_by[i].items():
                b.causes[cause] = b.causes.get(cause, 0) + nbytes
        b.end = t_end

    def _close(self, i: int, metric: str) -> None:
        b = self._live.pop((i, metric), None)
        if b is None:
            return
        b.open = False
        if b.end <= b.onset + self._r:
            return  # one interval: it was searched with its whole size at its onset
        train = self._active.get((i, metric))
        if train is not None and train.members[-1].start_s == b.start:
            # the train took this burst at its onset, when only its first interval was in:
            # its figures (requests per burst, request size) are refreshed with all of it
            self._search(i, metric)
            return
        if b.prominence < PROMINENCE:
            return
        requests = _requests(b, metric)
        if requests >= SMALL_REQUESTS or self._seen[(i, metric)] % SMALL_EVERY == 0:
            self._search(i, metric)  # it lasted more than one interval: its size is known only now

    def _search(self, i: int, metric: str) -> None:
        """Is the newest burst of this file part of a train? Only its last LIVE_BURSTS
        bursts, and only periods that end at the newest burst, are tried."""
        q = self._bursts.get((i, metric))
        if not q or len(q) < self.rules.min_bursts:
            return
        r = self._r
        recent = list(q)[-LIVE_BURSTS:]
        span = min(self.window_s, self._t_end - (self._t_start or 0.0) + r)
        if len(recent) < len(q):
            span = self._t_end - recent[0].onset + r
        if sum(x.end - x.start for x in recent) > MAX_DUTY * span:  # busy, not bursty
            self._active.pop((i, metric), None)
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            b = SeriesBursts(
                onset=np.array([x.onset for x in recent]),
                start=np.array([x.start for x in recent]),
                duration=np.array([x.end - x.start for x in recent]),
                amount=np.array([x.amount for x in recent]),
                ops=np.array([x.ops for x in recent]),
                size=np.array(
                    [
                        round(x.amount / x.ops if x.ops >= 0.5 else x.bytes_total / x.ops_total if x.ops_total else 0)
                        for x in recent
                    ],
                    np.int64,
                ),
                prominence=np.array([x.prominence for x in recent]),
                extra_bytes=np.array([x.extra_bytes for x in recent]),
                extra_ops=np.array([x.extra_ops for x in recent]),
                ops_var=np.array([x.ops_var for x in recent]),
                requests=np.array([_requests(x, metric) for x in recent]),
            )
        newest = len(recent) - 1
        p_min = max(self.rules.min_period_bins * r, MIN_PERIOD_S) * 0.8
        # the gaps to the last three bursts before it, of those not tiny beside it (a page written back)
        floor = OTHERS_MIN_REL * float(b.amount[-1])
        before = [j for j in range(newest - 1, -1, -1) if b.amount[j] >= floor][:3]
        gaps = [float(b.onset[-1] - b.onset[j]) for j in before]
        gaps = [p for j, p in enumerate(gaps) if p >= p_min and all(abs(p / x - 1) > 0.05 for x in gaps[:j])]
        current = self._active.get((i, metric))
        tries = [gaps]
        if current is not None and not current.metronome:
            tries.insert(0, [current.period_s])  # does the train go on? (cheap: one period)
        for periods in tries:
            # each burst was a search: count them all as chances (not just the window's)
            for c in find_chains(b, r, span, self.rules, periods, n_all=self._seen[(i, metric)], end=newest):
                if c.idx[-1] == newest:
                    lo = max(0, self._pos - self.history)
                    m = self._ROW[metric][1]
                    total = float(self._buf[m, i, lo : self._pos].sum(dtype=np.float64))
                    total += recent[-1].bytes_total if metric in BYTE_METRICS else 0
                    total = max(total, float(b.amount[c.idx].sum()))
                    cause = self._cause(i, [recent[j] for j in c.idx.tolist()])
                    train = chain_train(self._names[i], self._kinds[i], metric, b, c, total, cause)
                    self._active[(i, metric)] = self._named(i, train)
                    return

    def _metronomes(self, t_end: float) -> None:
        """One sync in each interval (see `metronome_runs`), over the file's history."""
        m = METRONOME_MIN
        n = self._rows
        if self._n < m or not n:
            return
        recent = self._buf[self._S, :n, self._pos - m : self._pos]
        maybe = ((recent > 0).sum(axis=1) >= m - 2) & (recent.max(axis=1) <= 2)
        r = self._r
        lo = max(0, self._pos - self.history)
        for i in np.flatnonzero(maybe).tolist():
            key = (i, "sync")
            train = self._active.get(key)
            if train is not None and not train.metronome:
                continue  # a train of sync bursts already
            start = max(lo, int(self._first[i] - self._base))
            counts = self._buf[self._S, i, start : self._pos].astype(np.float64)
            runs = metronome_runs(counts)
            if runs and runs[-1][1] >= len(counts) - 1:
                a, b = runs[-1]
                train = metronome_train(self._names[i], self._kinds[i], counts, t_end - len(counts) * r, r, a, b)
                self._active[key] = self._named(i, train)
            elif train is not None:
                del self._active[key]
        for key, train in list(self._active.items()):
            if train.metronome and not maybe[key[0]]:
                del self._active[key]

    def _cause(self, i: int, members: list[_LiveBurst]) -> str | None:
        """What made the kernel write most of a writeback train's bursts (else most of
        the file's writeback so far; None: no interval said)."""
        causes: dict[str, float] = {}
        for b in members:
            for cause, nbytes in (b.causes or {}).items():
                causes[cause] = causes.get(cause, 0) + nbytes
        causes = causes or self._wb_by.get(i, {})
        return max(causes, key=causes.__getitem__) if causes else None

    def _named(self, i: int, train: Train) -> Train:
        """A sync train says which sync call the file uses (fsync when no interval said); a
        folded series, how many files it has seen."""
        calls = self._sync_calls.get(i)
        if train.metric == "sync" and calls and max(calls) > 0:
            train.sync_call = SYNC_CALLS[calls.index(max(calls))]
            train.explanation = explain(train)
        if i in self._folded_files:
            train.files = len(self._folded_files[i])
            train.explanation = explain(train)
        return train

    def _expire(self, t_end: float) -> None:
        r = self._r
        for key, train in list(self._active.items()):
            if t_end - train.last_s > 2 * train.period_s + TOL_REL * train.period_s + r:
                del self._active[key]
