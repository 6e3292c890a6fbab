"""Periodic bursts: "every 10 s, ibdata1 takes about 80 writes of 1 MiB".

Pure functions on per-file series (no BPF): `detect()` finds trains of bursts
in whole series (a recorded trace: `trains_from_trace`, `SeriesBuilder`),
`BurstTracker` does it one interval at a time for the live screen of `top`,
and `explain()` names the cause from the periodic InnoDB behaviour documented
in mysql-io-paths.md (5.5 master thread's 1 s / 10 s loops, 5.6/5.7 checkpoint
every 7 s, innodb_flush_log_at_trx_commit=2's once-a-second redo sync, Aria's
30 s checkpoint), and says "unknown" for any other period.

The algorithm, per file and metric (write bytes, or syncs):

1. Bursts: from the median and MAD of the file's bins, a burst starts in a bin
   above median + K_MAD * 1.4826 * MAD (and 1.5 x the median, and above 0) and
   lasts while above median + K_STAY robust deviations. Its time is its onset.
   A burst whose peak is below PROMINENCE x the threshold is noise. A series
   with more than MAX_DUTY of its bins in bursts is busy, not bursty.
2. Candidate periods: clusters (within 10 %) of the gaps between bursts one,
   two and three apart (with few bursts, every gap).
3. For each candidate P, dynamic programming over the onsets finds the best
   chain: each burst follows one P (within TOL_REL * P + one bin) or, one burst
   missed, 2P after the previous; then once more with the chain's fitted P.
4. A chain is a train when it has at least three bursts (six if they are of
   one to three requests), at most one miss (and one more per MISS_EVERY
   bursts), bursts short compared with P, regular gaps (standard deviation
   within 12 % of P and the bins' quantization), alike if few, and is unlikely
   by chance: with q1 (q2) the chance that one of the file's other prominent
   bursts falls in the window of a one-period (two-period) step,
   E = N * 12 * q1**(one-period steps - 1) * ((1-q1) q2)**(two-period steps)
   (times the orders of the steps) < ALPHA; a long chain must also be
   unlikely if all bursts, its own too, came at random. The
   period is the least-squares slope of onset against period index. An
   accepted train's bursts are set aside and the search repeats (two trains in
   one file).
5. The live tracker (`LIVE` rules: stricter about other bursts, periods of at
   least four intervals) keeps each file's baseline over its last `history`
   intervals and looks for a train that ends with each new burst; a train
   leaves when no burst came for more than two periods.

One sync in every interval (`top` at 1 s with innodb_flush_log_at_trx_commit=2)
cannot show as bursts at that resolution: a run of at least METRONOME_MIN such
intervals, where the file has no syncs otherwise, is a train of its own
(`Train.metronome`). A recorded trace has syncs in 0.1 s bins instead.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .events import OP_NAMES
from .units import human_bytes, printable

K_MAD = 5.0  # threshold: median + K_MAD robust standard deviations
K_STAY = 2.0  # a burst lasts while above median + K_STAY robust standard deviations
MAD_SIGMA = 1.4826  # MAD -> standard deviation of a normal distribution
MIN_REL = 0.5  # and at least this much above the median
MAX_DUTY = 0.4  # more bins than this in bursts: a busy series, not a bursty one
TOL_REL = 0.25  # a burst matches onset + P within TOL_REL * P + one bin
TOL_MISS_REL = 0.35  # ... and onset + 2P (one missed burst) within this * P + one bin
MIN_BURSTS = 3  # a train is established after three bursts
MIN_PERIOD_BINS = 2.5  # a period spans at least this many bins
MIN_PERIOD_S = 0.25
MAX_BURST_SHARE = 0.5  # a burst lasts at most this share of the period (median)
SPREAD_REL, SPREAD_BINS = 0.12, 0.43  # gap std limit (in quadrature): jitter, and bin quantization
AMP_RATIO = 4.0  # a short train's bursts are alike: largest / smallest amount
SHORT_TRAIN = 5  # ... for trains of at most this many bursts
SMALL_EVERY = 3  # the live tracker looks for trains of small bursts at every third one
SMALL_MIN, SMALL_REQUESTS = 6, 4  # bursts of fewer requests (one write, one fsync) prove less: six of them
SIZE_SNR = 10  # a train's request size is given when its requests stand 10 sigma above the noise
PROMINENCE = 1.5  # a burst's peak rises 1.5 times as far above the median as the start threshold
# (bursts barely over the threshold are noise: they neither make a train nor count against one)
MISS_EVERY = 8  # one missed burst allowed, and one more per this many bursts
DEV_COST = 0.3  # score lost by a burst one tolerance away from its expected time
MISS_COST = 0.6  # score lost by a missed burst
MAX_OTHERS_PER_PERIOD = 0.5  # the file's other bursts: at most one per two periods
LOOK_ELSEWHERE = 2 * 6  # periods tried per search (candidates, refined)
ALPHA_ALL = 0.1  # ... and a long chain, if all bursts (its own too) came at random
ALPHA = 0.005  # expected number of chains as good as this one by chance
MAX_TRAINS = 3  # per series
MAX_CANDIDATES = 6  # periods tried per search
LIVE_BURSTS = 24  # the tracker looks for trains among a file's last this many bursts
FEW_BURSTS = 8  # up to this many bursts, every gap is tried as a period too
METRONOME_MIN = 10  # intervals with exactly one sync each
METRONOME_NOISE = 0.1  # bins with syncs outside such runs, per bin inside them
EXPLAIN_TOL = 0.15  # a known timer matches within +-15 % of its period

METRICS = ("write", "sync")
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range")
_OP_WRITE = OP_NAMES.index("write")
_OP_SYNC_FIRST = OP_NAMES.index("fsync")
assert OP_NAMES[_OP_SYNC_FIRST:] == SYNC_CALLS


# ----------------------------------------------------------------- data


@dataclass
class Series:
    """One file's activity in equal bins: bin i covers [t0 + i*r, t0 + (i+1)*r).

    `bytes` and `ops` are write bytes and write requests per bin (either may be
    None: no write analysis); `syncs` are fsync + fdatasync + sync_file_range
    per bin (None: no sync analysis). The typical request size of a burst is
    its bytes over its requests above the file's baseline."""

    name: str
    kind: str
    resolution_s: float
    t0: float
    bytes: np.ndarray | None = None
    ops: np.ndarray | None = None
    syncs: np.ndarray | None = None
    sync_call: str | None = None  # the file's usual sync: fsync, fdatasync or sync_file_range


@dataclass(frozen=True)
class Burst:
    """A run of bins above the file's baseline. `bytes` / `ops` / `syncs` are
    what the burst added above the baseline (all of it for an idle file)."""

    start_s: float  # start of its first bin (interval) above the threshold
    duration_s: float
    bytes: int
    ops: int
    typical_request_size: int | None
    file: str
    kind: str
    metric: str = "write"  # "write" (bytes) or "sync" (sync requests)
    syncs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "start_s": round(self.start_s, 3),
            "duration_s": round(self.duration_s, 3),
            "bytes": self.bytes,
            "ops": self.ops,
            "syncs": self.syncs,
            "typical_request_size": self.typical_request_size,
        }


@dataclass
class Train:
    """Bursts of one file that repeat with a period."""

    file: str
    kind: str
    metric: str  # "write": bursts of bytes written; "sync": bursts of sync requests
    period_s: float
    period_spread_s: float  # standard deviation of the gaps (per period)
    bursts: int
    missed: int  # expected bursts between the first and the last that did not come
    bytes_per_burst: int  # median, above the baseline (0 for sync trains)
    ops_per_burst: int  # write requests (write; 0: unknown) or syncs (sync) per burst
    typical_request_size: int | None  # bytes per request of the bursts (None: unknown)
    share_of_file_bytes: float | None  # of all bytes the file took in the series (write trains)
    share_of_file_syncs: float | None  # of all its syncs (sync trains)
    confidence: float  # 0..1, a heuristic (not a probability)
    first_s: float
    last_s: float
    explanation: str = ""
    members: list[Burst] = field(default_factory=list, repr=False)
    metronome: bool = False  # one sync in every interval (see `_metronome`), not bursts
    sync_call: str = "fsync"  # sync trains: the file's usual sync system call

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "kind": self.kind,
            "metric": self.metric,
            "period_s": round(self.period_s, 3),
            "period_spread_s": round(self.period_spread_s, 3),
            "bursts": self.bursts,
            "missed": self.missed,
            "bytes_per_burst": self.bytes_per_burst,
            "ops_per_burst": self.ops_per_burst,
            "typical_request_size": self.typical_request_size,
            "share_of_file_bytes": None if self.share_of_file_bytes is None else round(self.share_of_file_bytes, 4),
            "share_of_file_syncs": None if self.share_of_file_syncs is None else round(self.share_of_file_syncs, 4),
            "confidence": round(self.confidence, 3),
            "first_s": round(self.first_s, 3),
            "last_s": round(self.last_s, 3),
            "explanation": self.explanation,
            "metronome": self.metronome,
            "sync_call": self.sync_call if self.metric == "sync" else None,
            "onsets_s": [round(b.start_s, 3) for b in self.members],
        }


# ----------------------------------------------------------------- bursts in a series


def thresholds(med: np.ndarray | float, mad: np.ndarray | float) -> tuple[Any, Any]:
    """(start, stay): a burst starts above `start` and lasts while above `stay`."""
    start = med + np.maximum(np.maximum(K_MAD * MAD_SIGMA * mad, MIN_REL * med), 0.5)
    stay = med + np.maximum(np.maximum(K_STAY * MAD_SIGMA * mad, 0.5 * MIN_REL * med), 0.5)
    return start, stay


def baseline(x: np.ndarray) -> tuple[float, float, float]:
    """(median, start, stay thresholds) of a series' values."""
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    start, stay = thresholds(med, mad)
    return med, float(start), float(stay)


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of the runs of True."""
    d = np.diff(mask.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


@dataclass
class _Bursts:
    """One series' bursts as arrays (sorted by onset)."""

    onset: np.ndarray  # the middle of its first bin: its time for the chains
    start: np.ndarray  # the start of its first bin
    duration: np.ndarray
    amount: np.ndarray  # bytes (write) or syncs (sync) above the baseline
    ops: np.ndarray  # write requests above the baseline
    size: np.ndarray  # typical request size, 0 = unknown
    prominence: np.ndarray  # its highest bin above the median, over (start threshold - median)
    requests: np.ndarray  # write requests (write) or syncs (sync) in the burst, baseline included
    extra_bytes: np.ndarray  # bytes and write requests beyond the baseline's share of its bins
    extra_ops: np.ndarray  # (not clipped: a train sums them, the noise cancels)
    ops_var: np.ndarray  # variance of extra_ops from the baseline's noise (robust, per bin x bins)

    def __len__(self) -> int:
        return len(self.onset)

    def take(self, which: np.ndarray) -> _Bursts:
        return _Bursts(**{f.name: getattr(self, f.name)[which] for f in fields(self)})

    def burst(self, i: int, file: str, kind: str, metric: str) -> Burst:
        size = int(self.size[i])
        amount = round(float(self.amount[i]))
        return Burst(
            start_s=float(self.start[i]),
            duration_s=float(self.duration[i]),
            bytes=amount if metric == "write" else 0,
            ops=round(float(self.ops[i])),
            typical_request_size=size or None,
            file=file,
            kind=kind,
            metric=metric,
            syncs=amount if metric == "sync" else 0,
        )


def _excess_sums(x: np.ndarray, med: float, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the sum above the median (at least 0 per bin) and the plain sum."""
    cs = np.concatenate([[0.0], np.cumsum(np.maximum(x - med, 0.0))])
    total = np.concatenate([[0.0], np.cumsum(x)])
    return cs[ends] - cs[starts], total[ends] - total[starts]


def find_bursts(s: Series, metric: str = "write") -> _Bursts | None:
    """The bursts of one metric of a series, or None when it is not bursty."""
    x = s.bytes if metric == "write" else s.syncs
    if x is None or not len(x):
        return None
    x = np.asarray(x, np.float64)
    med, start, stay = baseline(x)
    high = x > start
    if not high.any():
        return None
    mask = x > stay
    if s.resolution_s < 0.5 and len(mask) > 2:  # fine bins: one quiet bin does not split a burst
        mask[1:-1] |= mask[:-2] & mask[2:]
    starts, ends = _runs(mask)
    highs = np.concatenate([[0], np.cumsum(high)])
    keep = highs[ends] > highs[starts]  # runs above `stay` that reach `start`
    starts, ends = starts[keep], ends[keep]
    if (ends - starts).sum() > MAX_DUTY * len(x):
        return None
    r = s.resolution_s
    amount, requests = _excess_sums(x, med, starts, ends)
    ops = np.zeros(len(starts))
    size = np.zeros(len(starts), np.int64)
    if metric == "write" and s.ops is not None:
        o = np.asarray(s.ops, np.float64)
        med_ops = float(np.median(o))
        ops, ops_total = _excess_sums(o, med_ops, starts, ends)
        _, bytes_total = _excess_sums(x, med, starts, ends)
        requests = ops_total
        # the burst's own requests: what its bins hold beyond the baseline's share
        nbins = ends - starts
        extra_bytes, extra_ops = bytes_total - nbins * med, ops_total - nbins * med_ops
        with np.errstate(divide="ignore", invalid="ignore"):
            typical = np.where(
                extra_ops >= 0.5, extra_bytes / np.maximum(extra_ops, 1e-9), bytes_total / np.maximum(ops_total, 1e-9)
            )
        size = np.where(ops_total > 0, np.rint(np.maximum(typical, 0)), 0).astype(np.int64)
        ops_var = (MAD_SIGMA * float(np.median(np.abs(o - med_ops)))) ** 2 * nbins
    else:
        extra_bytes = extra_ops = ops_var = np.zeros(len(starts))
    return _Bursts(
        onset=s.t0 + (starts + 0.5) * r,
        start=s.t0 + starts * r,
        duration=(ends - starts) * r,
        amount=amount,
        ops=ops,
        size=size,
        extra_bytes=extra_bytes,
        extra_ops=extra_ops,
        ops_var=ops_var,
        prominence=(np.maximum.reduceat(x, starts) - med) / (start - med),
        requests=requests,
    )


# ----------------------------------------------------------------- chains of bursts


def _candidate_periods(on: np.ndarray, p_min: float, p_max: float) -> list[float]:
    """Typical gaps between bursts 1, 2 and 3 apart: clusters within 10 %, largest
    first; with few bursts, also every gap between neighbours (the DP and the fitted
    period refine them)."""
    gaps = [on[o:] - on[:-o] for o in (1, 2, 3) if len(on) > o]
    if not gaps:
        return []
    g = np.concatenate(gaps)
    g = np.sort(g[(g >= p_min) & (g <= p_max)])
    if not len(g):
        return []
    lg = np.log(g)
    cut = np.flatnonzero(np.diff(lg) > math.log(1.10)) + 1
    bounds = np.concatenate([[0], cut, [len(g)]])
    clusters = [(int(b - a), float(np.median(g[a:b]))) for a, b in itertools.pairwise(bounds.tolist()) if b - a >= 2]
    clusters.sort(key=lambda c: (-c[0], c[1]))
    out = [p for _, p in clusters[:MAX_CANDIDATES]]
    if len(on) <= FEW_BURSTS:
        d = np.diff(on)
        out += [float(p) for p in d[(d >= p_min) & (d <= p_max)] if all(abs(p / q - 1) > 0.05 for q in out)]
    return out


def _best_path(on: np.ndarray, period: float, r: float, end: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The best chain of bursts spaced by the period (dynamic programming over the
    onsets): each burst extends the best chain ending one period before it (within
    TOL_REL * P + one bin) or two periods before (one burst missed, a cost), a
    little less for every deviation. The best chain overall, or the one ending at
    burst `end`. Returns its members and their period indices."""
    n = len(on)
    tol1, tol2 = TOL_REL * period + r, TOL_MISS_REL * period + r
    t = on.tolist()
    if n > 64:
        lo1 = np.searchsorted(on, on - period - tol1, "left").tolist()
        hi1 = np.searchsorted(on, on - period + tol1, "right").tolist()
        lo2 = np.searchsorted(on, on - 2 * period - tol2, "left").tolist()
        hi2 = np.searchsorted(on, on - 2 * period + tol2, "right").tolist()
    else:  # a few bursts (the live tracker): numpy's overhead would dominate
        lo1 = [bisect.bisect_left(t, x - period - tol1) for x in t]
        hi1 = [bisect.bisect_right(t, x - period + tol1) for x in t]
        lo2 = [bisect.bisect_left(t, x - 2 * period - tol2) for x in t]
        hi2 = [bisect.bisect_right(t, x - 2 * period + tol2) for x in t]
    score = [1.0] * n
    back = [-1] * n
    step = [0] * n
    last = n if end is None else end + 1
    for j in range(last):
        a1, b1, a2, b2 = lo1[j], min(hi1[j], j), lo2[j], min(hi2[j], j)
        if a1 >= b1 and a2 >= b2:
            continue
        tj, best, arg, st = t[j], 1.0, -1, 0
        for i in range(a1, b1):
            v = score[i] + 1.0 - DEV_COST * abs(tj - t[i] - period) / tol1
            if v > best:
                best, arg, st = v, i, 1
        for i in range(a2, b2):
            v = score[i] + 1.0 - MISS_COST - DEV_COST * abs(tj - t[i] - 2 * period) / tol2
            if v > best:
                best, arg, st = v, i, 2
        score[j], back[j], step[j] = best, arg, st
    j = max(range(n), key=score.__getitem__) if end is None else end
    members, steps = [], []
    while j >= 0:
        members.append(j)
        steps.append(step[j])
        j = back[j]
    members.reverse()
    steps.reverse()
    steps[0] = 0
    return np.asarray(members, np.int64), np.cumsum(steps)


def _trimmed(idx: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The chain without the bursts it reaches only across a miss at either end (a train
    that had not started yet, or had stopped, followed by a burst of something else)."""
    a, b = 0, len(idx)
    while b - a > 1 and k[a + 1] - k[a] == 2:
        a += 1
    while b - a > 1 and k[b - 1] - k[b - 2] == 2:
        b -= 1
    return idx[a:b], k[a:b] - k[a]


@dataclass
class _Chain:
    idx: np.ndarray  # burst indices
    k: np.ndarray  # period index of each burst (0, 1, 2, 4, ... with misses)
    period: float
    spread: float
    irregularity: float  # spread / its limit, 0..1
    log_e: float  # log of the expected number of chance chains as good
    confidence: float

    @property
    def missed(self) -> int:
        return int(self.k[-1]) + 1 - len(self.idx)


def _median(a: np.ndarray) -> float:
    """np.median without its overhead, for the few values of a chain."""
    v = sorted(a.tolist())
    h = len(v) // 2
    return float(v[h]) if len(v) % 2 else (v[h - 1] + v[h]) / 2


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


@dataclass(frozen=True)
class Rules:
    """How much evidence a train needs. The live tracker sees a short window and
    no future, so it is stricter about other bursts than a whole recorded series."""

    min_bursts: int = MIN_BURSTS
    max_others_per_period: float = MAX_OTHERS_PER_PERIOD
    alpha: float = ALPHA
    amp_ratio: float = AMP_RATIO
    min_period_bins: float = MIN_PERIOD_BINS
    alpha_all: float = ALPHA_ALL
    whole_series: bool = True  # the bursts are all the file's (a trace), not a window of a stream


BATCH = Rules()
# live: a short window and no future, so stricter; periods of at least 4 intervals
# (3 bursts 2 bins apart happen by chance in a busy file)
LIVE = Rules(
    max_others_per_period=0.3,
    alpha=ALPHA / 10,
    amp_ratio=2.5,
    min_period_bins=4.0,
    alpha_all=ALPHA_ALL / 100,
    whole_series=False,
)


def _log_e_all(
    on: np.ndarray, k: np.ndarray, period: float, r: float, n_bursts: int, span_s: float, n_all: int, whole: bool
) -> float:
    """log of the expected number of chains this precise (each burst as close to one
    period after the last as it is, give or take half a bin) if the series' `n_bursts`
    bursts, the chain's too, came at random over `span_s`. A step's window of width w
    holds a burst with probability 1 - exp(-n * w / span): in a window of an ongoing
    stream (live) n is all of them, the stream's rate; in a whole series (`whole`, a
    trace) n is those not yet in the chain, since a burst cannot follow itself. (With
    all of them, a file whose only bursts are a short train at coarse bins, e.g. six
    runs of a 4 s job in a trace's 1 s bins, would look like chance.)"""
    dev = np.abs(np.diff(on) - np.diff(k) * period)[1:]  # the first gap is free
    used = np.arange(2, len(on)) if whole else 0  # chain members placed before each of those steps
    remaining = np.maximum(n_bursts - used, 0.5)
    p = -np.expm1(-remaining / span_s * 2 * (dev + r / 2))
    return math.log(max(n_all, 1) * LOOK_ELSEWHERE) + float(np.log(np.maximum(p, 1e-300)).sum())


def _evaluate(
    b: _Bursts, idx: np.ndarray, k: np.ndarray, r: float, span_s: float, n_all: int, rules: Rules
) -> _Chain | None:
    m = len(idx)
    if m < rules.min_bursts:
        return None
    n_exp = int(k[-1]) + 1
    if n_exp - m > (max(1, m // MISS_EVERY) if m >= SHORT_TRAIN else 0):  # a miss needs five bursts
        return None
    if m < SMALL_MIN and _median(b.requests[idx]) < SMALL_REQUESTS:
        return None
    on = b.onset[idx]
    kc = k - k.mean()
    period = float((kc * (on - on.mean())).sum() / (kc * kc).sum())
    if period < max(rules.min_period_bins * r, MIN_PERIOD_S):
        return None
    gaps = (np.diff(on) / np.diff(k)).tolist()
    mean_gap = sum(gaps) / len(gaps)
    spread = math.sqrt(sum((g - mean_gap) ** 2 for g in gaps) / len(gaps))
    limit = math.hypot(SPREAD_REL * period, SPREAD_BINS * r)  # jitter and bin quantization, independent
    if spread > limit:
        return None
    if _median(b.duration[idx]) > MAX_BURST_SHARE * period:
        return None
    if _median(b.prominence[idx]) < PROMINENCE:  # well clear of the noise
        return None
    amounts = b.amount[idx]
    if m <= SHORT_TRAIN and amounts.max() > rules.amp_ratio * max(amounts.min(), 1e-9):
        return None  # few bursts: alike
    # chance: the file's other bursts, globally and around the chain
    others = b.prominence >= PROMINENCE  # bins barely over the threshold are not competing bursts
    others[idx] = False
    rate = others.sum() / max(span_s, period)
    lo, hi = on[0] - period, on[-1] + period
    near = np.count_nonzero(others & (b.onset >= lo) & (b.onset <= hi))
    rate = max(rate, near / (hi - lo))
    if rate * period > rules.max_others_per_period:  # other bursts as frequent as the train's: no telling them apart
        return None
    # a step of one period hits a window of 2 * tol1 with probability q1; a step of two
    # (one miss) finds the first window empty and hits the second; the first step is free
    q1 = -math.expm1(-rate * 2 * (TOL_REL * period + r))
    q2 = (1 - q1) * -math.expm1(-rate * 2 * (TOL_MISS_REL * period + r))
    s2 = int(np.count_nonzero(np.diff(k) == 2))
    s1 = m - 1 - s2
    log_e = -math.inf
    if q1 > 0:
        log_e = math.log(max(n_all, 1) * LOOK_ELSEWHERE) + (s1 - 1) * math.log(q1)
        if s2:
            log_e += s2 * math.log(q2) + _log_comb(s1 - 1 + s2, s2)
    if log_e >= math.log(rules.alpha):
        return None
    if m > SHORT_TRAIN and _log_e_all(
        on, k, period, r, len(b), max(span_s, period), n_all, rules.whole_series
    ) >= math.log(rules.alpha_all):
        return None  # as regular as any chain through a random stream this dense
    evidence = 1 - 0.5 ** (m - 2)
    regularity = max(0.0, 1 - spread / limit)
    chance = 1 - min(1.0, math.exp(log_e) / rules.alpha) if log_e > -math.inf else 1.0
    confidence = evidence * (m / n_exp) * (0.5 + 0.5 * regularity) * (0.5 + 0.5 * chance)
    return _Chain(
        idx=idx, k=k, period=period, spread=spread, irregularity=spread / limit, log_e=log_e, confidence=confidence
    )


def _rank(c: _Chain) -> tuple[float, int]:
    """Bursts that fit, discounted for misses and irregular gaps."""
    return ((len(c.idx) - c.missed) * (1 - 0.5 * c.irregularity), len(c.idx))


def find_chains(
    b: _Bursts,
    r: float,
    span_s: float,
    rules: Rules = BATCH,
    periods: Sequence[float] | None = None,
    n_all: int | None = None,
    end: int | None = None,
) -> list[_Chain]:
    """The trains among one series' bursts, best first; `periods`: try only these;
    `n_all`: bursts that could have started a chance chain (default: these); `end`:
    only the train that ends with this burst."""
    n = len(b)
    if n < rules.min_bursts:
        return []
    avail = np.ones(n, np.bool_)
    found: list[_Chain] = []
    p_min = max(rules.min_period_bins * r, MIN_PERIOD_S) * 0.8
    p_max = span_s / max(1, rules.min_bursts - 1) * 1.2
    for _ in range(MAX_TRAINS if end is None else 1):
        pool = np.flatnonzero(avail)
        if len(pool) < rules.min_bursts:
            break
        sub = b.take(pool)
        best: _Chain | None = None
        tries = _candidate_periods(sub.onset, p_min, p_max) if periods is None else periods
        for candidate in tries:
            period = candidate
            for _refine in range(2):  # link with the candidate, then with the chain's fitted period
                idx, k = _best_path(sub.onset, period, r, end)
                top = None
                trimmed = _trimmed(idx, k)
                variants = [(idx, k)] if len(trimmed[0]) == len(idx) else [(idx, k), trimmed]
                for variant in variants if end is None else [v for v in variants if v[0][-1] == end]:
                    c = _evaluate(sub, *variant, r, span_s, max(n, n_all or 0), rules)
                    if c is not None and (top is None or _rank(c) > _rank(top)):
                        top = c
                if top is None:
                    break
                if best is None or _rank(top) > _rank(best):
                    best = top
                if abs(top.period - period) <= 0.02 * period:
                    break
                period = top.period
        if best is None:
            break
        best.idx = pool[best.idx]
        found.append(best)
        avail[best.idx] = False
    return found


def _metronome(counts: np.ndarray) -> list[tuple[int, int]]:
    """Runs (start, end) of at least METRONOME_MIN bins with one sync each, in phase:
    a sync may slip into the next or the previous bin (a 0 and a 2), so the count
    so far stays within one of the number of bins. None when the bins outside the
    runs have syncs too (a steady stream of syncs, not a timer)."""
    c = np.asarray(counts).astype(np.int64).tolist()
    runs: list[tuple[int, int]] = []
    start = -1
    lo = hi = dev = 0
    for i, v in enumerate([*c, 99]):
        if start >= 0:
            d = dev + v - 1
            if v <= 2 and max(hi, d) - min(lo, d) <= 1:
                dev, lo, hi = d, min(lo, d), max(hi, d)
                continue
            end = i
            while end > start and c[end - 1] == 0:
                end -= 1
            if end - start >= METRONOME_MIN:
                runs.append((start, end))
            start = -1
        if v in (1, 2) and i < len(c):
            start, dev = i, v - 1
            lo = hi = dev
    inside = sum(np.count_nonzero(c[a:b]) for a, b in runs) if runs else 0
    outside = int(np.count_nonzero(c)) - inside
    if not runs or outside > METRONOME_NOISE * sum(b - a for a, b in runs):
        return []
    return runs


# ----------------------------------------------------------------- trains


def _train(s_name: str, kind: str, metric: str, b: _Bursts, c: _Chain, total: float) -> Train:
    idx = c.idx
    members = [b.burst(int(i), s_name, kind, metric) for i in idx]
    amounts = b.amount[idx]
    share = float(amounts.sum() / total) if total > 0 else None
    # requests of the bursts themselves: summed over the train, where the baseline's
    # noise cancels; unknown when that noise is still too large (many small requests)
    extra_ops = float(b.extra_ops[idx].sum())
    size = per_burst = None
    if metric == "write" and extra_ops >= max(0.5 * len(idx), SIZE_SNR * math.sqrt(float(b.ops_var[idx].sum()))):
        size = max(0, round(float(b.extra_bytes[idx].sum()) / extra_ops))
        per_burst = round(extra_ops / len(idx))
    t = Train(
        file=s_name,
        kind=kind,
        metric=metric,
        period_s=c.period,
        period_spread_s=c.spread,
        bursts=len(idx),
        missed=c.missed,
        bytes_per_burst=round(float(np.median(amounts))) if metric == "write" else 0,
        ops_per_burst=round(float(np.median(amounts))) if metric == "sync" else per_burst or 0,
        typical_request_size=size,
        share_of_file_bytes=share if metric == "write" else None,
        share_of_file_syncs=share if metric == "sync" else None,
        confidence=c.confidence,
        first_s=float(b.start[idx[0]]),
        last_s=float(b.start[idx[-1]]),
        members=members,
    )
    t.explanation = explain(t)
    return t


def _metronome_train(name: str, kind: str, counts: np.ndarray, t0: float, r: float, start: int, end: int) -> Train:
    total = float(counts.sum())
    run = counts[start:end]
    onsets = [t0 + (start + i) * r for i in range(end - start) if run[i] > 0]
    members = [Burst(t, 0.0, 0, 1, None, name, kind, "sync", 1) for t in onsets]
    n = int(run.sum())
    t = Train(
        file=name,
        kind=kind,
        metric="sync",
        period_s=(end - start) * r / max(n, 1),
        period_spread_s=0.0,
        bursts=n,
        missed=0,
        bytes_per_burst=0,
        ops_per_burst=1,
        typical_request_size=None,
        share_of_file_bytes=None,
        share_of_file_syncs=n / total if total else None,
        confidence=round(1 - 0.5 ** ((end - start) / METRONOME_MIN), 3),
        first_s=onsets[0] if onsets else t0 + start * r,
        last_s=onsets[-1] if onsets else t0 + end * r,
        members=members,
        metronome=True,
    )
    t.explanation = explain(t)
    return t


def detect_series(s: Series, rules: Rules = BATCH) -> list[Train]:
    """The trains of one series: of write bytes and of syncs, whichever it has.
    Syncs in bins of 0.5 s or more are first tried as a metronome (one per bin)."""
    out: list[Train] = []
    for metric in METRICS:
        x = s.bytes if metric == "write" else s.syncs
        if x is None or not len(x):
            continue
        if metric == "sync" and s.resolution_s >= 0.5:
            counts = np.asarray(x)
            runs = _metronome(counts)
            out += [_metronome_train(s.name, s.kind, counts, s.t0, s.resolution_s, a, b) for a, b in runs]
            if runs:
                continue
        b = find_bursts(s, metric)
        if b is not None:
            total = float(np.asarray(x, np.float64).sum())
            span = len(x) * s.resolution_s
            out += [_train(s.name, s.kind, metric, b, c, total) for c in find_chains(b, s.resolution_s, span, rules)]
    if s.sync_call:
        for t in out:
            if t.metric == "sync":
                t.sync_call = s.sync_call
                t.explanation = explain(t)
    return out


def detect(series: Series | Iterable[Series], rules: Rules = BATCH) -> list[Train]:
    """All trains of all series, most confident first."""
    if isinstance(series, Series):
        series = [series]
    out: list[Train] = []
    for s in series:
        out += detect_series(s, rules)
    out.sort(key=lambda t: (-t.confidence, t.file, t.metric, t.first_s))
    return out


# ----------------------------------------------------------------- explanation

_PAGES = frozenset({"system", "doublewrite", "table", "undo"})
PAGE = 16 << 10  # InnoDB's default page size

# (kinds, metric, period_s, why): the timers of docs "Periodic behaviour that shows up as bursts"
_TIMERS: list[tuple[frozenset[str], str, float, str]] = [
    (_PAGES, "write", 10.0, "InnoDB master thread's 10 s loop in 5.5, or a checkpoint"),
    (_PAGES, "sync", 10.0, "after the InnoDB master thread's 10 s flush in 5.5, or a checkpoint"),
    (_PAGES, "write", 1.0, "a 1 s loop: the 5.5 master thread or the 5.6+ page cleaner"),
    (_PAGES, "sync", 1.0, "after the page flush of a 1 s loop: the 5.5 master thread or the 5.6+ page cleaner"),
    (frozenset({"redo"}), "write", 10.0, "checkpoint after the InnoDB master thread's 10 s flush in 5.5"),
    (frozenset({"redo"}), "write", 7.0, "checkpoint of the 5.6/5.7 master thread, every 7 s when busy"),
    (frozenset({"redo"}), "sync", 1.0, "innodb_flush_log_at_trx_commit=2"),
    (frozenset({"aria"}), "write", 30.0, "Aria checkpoint, every 30 s"),
    (frozenset({"aria"}), "sync", 30.0, "Aria checkpoint, every 30 s"),
]


def _what(kind: str, metric: str, request_size: int | None) -> str | None:
    """What a write burst of this kind of file is, from the file alone."""
    if metric != "write":
        return None
    if kind == "doublewrite" or (kind == "system" and request_size and request_size > PAGE):
        return "doublewrite flush"  # batches of pages: ibdata1 holds the doublewrite buffer (<= 8.0.19, MariaDB)
    if kind == "system" and not request_size:
        return "doublewrite or page flush"
    if kind in _PAGES:
        return "page flush"
    return None


def _why(kind: str, metric: str, period_s: float) -> str | None:
    """The known timer of this kind of file at this period."""
    for kinds, m, period, text in _TIMERS:
        if kind in kinds and metric == m and abs(period_s - period) <= EXPLAIN_TOL * period:
            return text
    return None


def cause(kind: str, metric: str, period_s: float, request_size: int | None = None) -> str:
    """What and why, as far as the facts go; "unknown" otherwise."""
    what, why = _what(kind, metric, request_size), _why(kind, metric, period_s)
    if what and why:
        return f"{what} ({why})"
    if what:
        return f"{what} (period of no known timer)"
    return why or "unknown"


def human_size(n: float) -> str:
    """1048576 -> '1 MiB'; 1.5 KiB stays '1.5KiB' (units.human_bytes)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            if abs(v - round(v)) <= 0.02 * v:
                return f"{round(v)} {unit}"
            break
    return human_bytes(n)


def human_period(period_s: float) -> str:
    if abs(period_s - 1.0) <= 0.05:
        return "once a second"
    shown = f"{period_s:.0f}" if period_s >= 10 else f"{round(period_s, 1):g}"
    return f"every {shown} s"


def explain(t: Train) -> str:
    """One line: file · what · how often → cause (or "unknown")."""
    name = printable(os.path.basename(t.file) or t.file)
    if t.metric == "sync":
        what = f"{name} {t.sync_call} {human_period(t.period_s)}"
    else:
        size = f"{human_size(t.typical_request_size)} writes" if t.typical_request_size else "writes"
        count = f"{t.ops_per_burst} × " if t.ops_per_burst > 1 else ""
        what = f"{name} · {count}{size} · {human_period(t.period_s)}"
    return f"{what} → {cause(t.kind, t.metric, t.period_s, t.typical_request_size)}"


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


# ----------------------------------------------------------------- live tracking


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


def _field(f: Any, name: str) -> Any:
    return f[name] if isinstance(f, dict) else getattr(f, name)


class BurstTracker:
    """Periodic bursts one interval at a time, for the live screen of `top`.

    `update(t_end_s, dt_s, files)` takes one interval: its end time, its length
    and, per file, `path`, `kind`, `write_bytes`, `write_ops`, `sync_ops` (a
    model.FileActivity, or a dict of `top --json`). A train becomes active once
    three bursts match (see the module's algorithm, with `rules`; the baseline is the
    median and MAD of the file's last `history` intervals, recomputed every
    `recompute_every` intervals, used once it has `min_history` of them unless the
    file was idle) and leaves when no burst came for more than two periods. Files
    absent from an interval did nothing in it (`top` lists only active files)."""

    _B, _O, _S = 0, 1, 2  # buffer rows: write bytes, write ops, syncs

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
        self._buf = np.zeros((3, 16, 2 * history))
        self._pos = 0  # next buffer column
        self._base = 0  # interval number of buffer column 0
        self._n = 0  # intervals seen
        self._first = np.zeros(16, np.int64)  # interval number each file was first seen
        self._new = np.zeros(16, np.bool_)  # its baseline not computed yet
        self._med = np.zeros((3, 16))
        self._ops_sigma = np.zeros(16)  # robust standard deviation of write requests per interval
        self._thr = np.full((2, 16), np.inf)  # burst start thresholds: write bytes, syncs
        self._stay = np.full((2, 16), np.inf)  # ... and while a burst lasts
        self._open = np.zeros((2, 16), np.bool_)
        self._ready = np.zeros((2, 16), np.bool_)
        self._quiet = np.zeros((2, 16), np.int64)
        self._live: dict[tuple[int, str], _LiveBurst] = {}
        self._bursts: dict[tuple[int, str], deque[_LiveBurst]] = {}
        self._seen: dict[tuple[int, str], int] = {}  # bursts so far: every one was a new search
        self._sync_calls: dict[int, list[int]] = {}  # row -> fsync, fdatasync, sync_file_range so far
        self._active: dict[tuple[int, str], Train] = {}
        self._dts: deque[float] = deque(maxlen=16)
        self._r = 1.0
        self._t_start: float | None = None
        self._t_end = 0.0

    # ---- input

    def update(self, t_end_s: float, dt_s: float, files: Iterable[Any]) -> list[Train]:
        """Feed one interval; returns the active trains."""
        dt = max(float(dt_s), 1e-6)
        t_end = float(t_end_s)
        if self._t_start is None:
            self._t_start = t_end - dt
        self._dts.append(dt)
        self._r = _median(np.asarray(self._dts))  # the typical interval: the bin width
        rows, wb, wo, so = [], [], [], []
        index = self._index
        for f in files:
            if isinstance(f, dict):
                path, values = f["path"], (f["write_bytes"], f["write_ops"], f["sync_ops"])
            else:
                path, values = f.path, (f.write_bytes, f.write_ops, f.sync_ops)
            i = index.get(path)
            if i is None:
                i = self._add(path, _field(f, "kind"))
            if values[2]:  # which sync call the file uses, when the interval says
                calls = self._sync_calls.setdefault(i, [0, 0, 0])
                for c, name in enumerate(SYNC_CALLS):
                    calls[c] += (f.get(f"{name}_ops", 0) if isinstance(f, dict) else getattr(f, f"{name}_ops", 0)) or 0
            rows.append(i)
            wb.append(values[0])
            wo.append(values[1])
            so.append(values[2])
        n = self._rows
        cur = np.zeros((3, n))
        if rows:
            r = np.asarray(rows, np.int64)
            for m, values in ((self._B, wb), (self._O, wo), (self._S, so)):
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
        for j, (metric, m) in enumerate((("write", self._B), ("sync", self._S))):
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
        """One `model.Interval` (its `time` is the end of the interval)."""
        return self.update(interval.time, interval.interval_s, interval.files)

    def feed_json(self, obj: dict[str, Any]) -> list[Train]:
        """One object of `top --json`."""
        return self.update(obj["time"], obj["interval_s"], obj["files"])

    # ---- output

    def active_trains(self) -> list[Train]:
        return sorted(self._active.values(), key=lambda t: (-t.confidence, t.file, t.metric))

    def banner(self) -> str | None:
        """One line for the screen: the most confident train, and how many more."""
        trains = self.active_trains()
        if not trains:
            return None
        more = f"  (+{len(trains) - 1} more)" if len(trains) > 1 else ""
        return f"periodic: {trains[0].explanation}{more}"

    # ---- internals

    def _add(self, path: str, kind: str) -> int:
        i = self._rows
        if i == self._buf.shape[1]:
            grow = 2 * i
            buf = np.zeros((3, grow, self._buf.shape[2]))
            buf[:, :i] = self._buf
            self._buf = buf
            self._first = np.concatenate([self._first, np.zeros(grow - i, np.int64)])
            self._new = np.concatenate([self._new, np.zeros(grow - i, np.bool_)])
            self._med = np.concatenate([self._med, np.zeros((3, grow - i))], axis=1)
            self._ops_sigma = np.concatenate([self._ops_sigma, np.zeros(grow - i)])
            self._thr = np.concatenate([self._thr, np.full((2, grow - i), np.inf)], axis=1)
            self._stay = np.concatenate([self._stay, np.full((2, grow - i), np.inf)], axis=1)
            self._open = np.concatenate([self._open, np.zeros((2, grow - i), np.bool_)], axis=1)
            self._ready = np.concatenate([self._ready, np.zeros((2, grow - i), np.bool_)], axis=1)
            self._quiet = np.concatenate([self._quiet, np.zeros((2, grow - i), np.int64)], axis=1)
        self._index[path] = i
        self._names.append(path)
        self._kinds.append(kind)
        self._first[i] = max(0, self._n - self.history)  # absent from the intervals so far: idle in them
        self._buf[:, i] = 0.0
        self._rows += 1
        self._new[i] = True
        return i

    def _push(self, cur: np.ndarray) -> None:
        width = self._buf.shape[2]
        if self._pos == width:  # keep the last `history` columns
            keep = self.history
            self._buf[:, :, :keep] = self._buf[:, :, width - keep :]
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
            win = self._buf[:, rows, start : self._pos]
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
            for j, m in enumerate((self._B, self._S)):
                mad = np.median(np.abs(w[m] - med[m][:, None]), axis=1)
                self._thr[j, act], self._stay[j, act] = thresholds(med[m], mad)
            self._ops_sigma[act] = MAD_SIGMA * np.median(np.abs(w[self._O] - med[self._O][:, None]), axis=1)

    def _amounts(self, i: int, metric: str, cur: np.ndarray) -> tuple[float, float, float, float, float]:
        """Above the baseline: amount, ops; in all: amount, ops; and the prominence."""
        j, m = (1, self._S) if metric == "sync" else (0, self._B)
        x, med = cur[m, i], self._med[m, i]
        prominence = max(x - med, 0.0) / max(self._thr[j, i] - med, 1e-9)
        if metric == "sync":
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
        requests = b.ops_total if metric == "write" else b.bytes_total
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
        b.end = t_end

    def _close(self, i: int, metric: str) -> None:
        b = self._live.pop((i, metric), None)
        if b is None:
            return
        b.open = False
        train = self._active.get((i, metric))
        if b.end > b.onset + self._r and (train is None or train.members[-1].start_s != b.start):
            if b.prominence < PROMINENCE:
                return
            requests = b.ops_total if metric == "write" else b.bytes_total
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
            b = _Bursts(
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
                requests=np.array([x.ops_total if metric == "write" else x.bytes_total for x in recent]),
            )
        newest = len(recent) - 1
        p_min = max(self.rules.min_period_bins * r, MIN_PERIOD_S) * 0.8
        gaps = [float(b.onset[-1] - b.onset[-1 - o]) for o in (1, 2, 3) if o < len(recent)]
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
                    m = self._B if metric == "write" else self._S
                    total = float(self._buf[m, i, lo : self._pos].sum())
                    total += recent[-1].bytes_total if metric == "write" else 0
                    total = max(total, float(b.amount[c.idx].sum()))
                    self._active[(i, metric)] = self._named(
                        i, _train(self._names[i], self._kinds[i], metric, b, c, total)
                    )
                    return

    def _metronomes(self, t_end: float) -> None:
        """One sync in each interval (see `_metronome`), over the file's history."""
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
            counts = self._buf[self._S, i, start : self._pos]
            runs = _metronome(counts)
            if runs and runs[-1][1] >= len(counts) - 1:
                a, b = runs[-1]
                train = _metronome_train(self._names[i], self._kinds[i], counts, t_end - len(counts) * r, r, a, b)
                self._active[key] = self._named(i, train)
            elif train is not None:
                del self._active[key]
        for key, train in list(self._active.items()):
            if train.metronome and not maybe[key[0]]:
                del self._active[key]

    def _named(self, i: int, train: Train) -> Train:
        """A sync train says which sync call the file uses (fsync when no interval said)."""
        calls = self._sync_calls.get(i)
        if train.metric == "sync" and calls and max(calls) > 0:
            train.sync_call = SYNC_CALLS[calls.index(max(calls))]
            train.explanation = explain(train)
        return train

    def _expire(self, t_end: float) -> None:
        r = self._r
        for key, train in list(self._active.items()):
            if t_end - train.last_s > 2 * train.period_s + TOL_REL * train.period_s + r:
                del self._active[key]


# ----------------------------------------------------------------- recorded traces


class SeriesBuilder:
    """Per-file series of a recorded trace, fed batch by batch: write bytes and
    requests in bins of `resolution_s`, syncs in bins of `sync_resolution_s` (fine
    enough for a once-a-second fsync). Sparse while it reads (one row per bin and
    file with activity), dense per file when asked for the series.

    `add(ev, dec)` takes a `report.Events` batch and its `report.Decoder`, so
    `report.build_report` can feed it from its own loop."""

    def __init__(self, resolution_s: float = 1.0, sync_resolution_s: float = 0.1) -> None:
        from .report import SecondRows  # not at import: top does not need pyarrow

        self.resolution_s = resolution_s
        self.sync_resolution_s = sync_resolution_s
        self._writes = SecondRows(2)
        self._syncs = SecondRows(1)
        self._kind_of = np.full(0, -1, np.int64)  # path id -> kind id
        self._sync_calls = np.zeros((0, 3), np.int64)  # path id -> fsync, fdatasync, sync_file_range
        self._t_min = math.inf
        self._t_max = -math.inf

    def add(self, ev: Any, dec: Any) -> None:
        if not len(ev.t):
            return
        self._t_min = min(self._t_min, float(ev.t.min()))
        self._t_max = max(self._t_max, float(ev.t.max()))
        n_paths = max(1, len(dec.paths.values))
        known = len(self._kind_of)
        if known < n_paths:  # a path's kind never changes: only new paths need theirs
            self._kind_of = np.concatenate([self._kind_of, np.full(n_paths - known, -1, np.int64)])
            new = ev.path >= known
            self._kind_of[ev.path[new]] = ev.kind[new]
        if len(self._sync_calls) < n_paths:
            self._sync_calls = np.concatenate(
                [self._sync_calls, np.zeros((n_paths - len(self._sync_calls), 3), np.int64)]
            )
        ok_op = np.where(ev.ok, ev.op, -1)
        write = ok_op == _OP_WRITE
        if write.any():
            nbytes = ev.nbytes[write].astype(np.float64)

            def sums(key: np.ndarray, size: int, _ev: Any) -> np.ndarray:
                out = np.zeros((size, 2), np.int64)
                out[:, 0] = np.rint(np.bincount(key, weights=nbytes, minlength=size))
                out[:, 1] = np.bincount(key, minlength=size)
                return out

            sec = np.floor(ev.t[write] / self.resolution_s).astype(np.int64)
            self._writes.add(sec, ev.path[write], n_paths, sums, ev)
        sync = ok_op >= _OP_SYNC_FIRST
        if sync.any():

            def counts(key: np.ndarray, size: int, _ev: Any) -> np.ndarray:
                return np.bincount(key, minlength=size).reshape(size, 1)

            sec = np.floor(ev.t[sync] / self.sync_resolution_s).astype(np.int64)
            self._syncs.add(sec, ev.path[sync], n_paths, counts, ev)
            key = ev.path[sync] * 3 + (ok_op[sync] - _OP_SYNC_FIRST)
            self._sync_calls += np.bincount(key, minlength=3 * n_paths).reshape(n_paths, 3)
        if self._writes.rows > 1_000_000:
            self._writes.compact()
        if self._syncs.rows > 1_000_000:
            self._syncs.compact()

    def series(self, dec: Any, min_bins: int = MIN_BURSTS) -> list[Series]:
        """One Series per file and metric with activity in at least `min_bins` bins,
        each over the whole trace (idle bins included)."""
        out: list[Series] = []
        if self._t_max < self._t_min:
            return out
        for rows, r, metric in (
            (self._writes, self.resolution_s, "write"),
            (self._syncs, self.sync_resolution_s, "sync"),
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
                name = dec.paths.values[pid]
                if metric == "write":
                    out.append(Series(name, kind, r, lo * r, bytes=dense[:, 0], ops=dense[:, 1]))
                else:
                    call = SYNC_CALLS[int(np.argmax(self._sync_calls[pid]))] if pid < len(self._sync_calls) else None
                    out.append(Series(name, kind, r, lo * r, syncs=dense[:, 0], sync_call=call))
        return out


def trains_from_trace(
    reader: Any, filters: Any = None, resolution_s: float = 1.0, sync_resolution_s: float = 0.1
) -> list[Train]:
    """Read a trace (`trace.TraceReader`) and find its trains; times are seconds
    since the start of the trace."""
    from .report import Decoder

    dec = Decoder(filters)
    builder = SeriesBuilder(resolution_s, sync_resolution_s)
    for batch in reader.batches():
        builder.add(dec.decode(batch), dec)
    return detect(builder.series(dec))


def trains_json(trains: Sequence[Train]) -> list[dict[str, Any]]:
    return [t.to_json() for t in trains]


def render_trains(trains: Sequence[Train], width: int = 120) -> Any:
    """A rich table: one line per train (for `report`)."""
    from rich.table import Table
    from rich.text import Text

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
        share = t.share_of_file_bytes if t.metric == "write" else t.share_of_file_syncs
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
