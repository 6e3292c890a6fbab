"""Steps 2 to 4 of the detector: candidate periods, the best chain of bursts for
each (dynamic programming), and whether a chain is a train or chance."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .find import SeriesBursts
from .rules import (
    BATCH,
    DEV_COST,
    FEW_BURSTS,
    LOOK_ELSEWHERE,
    MAX_BURST_SHARE,
    MAX_CANDIDATES,
    MAX_TRAINS,
    MIN_PERIOD_S,
    MISS_COST,
    MISS_EVERY,
    OTHERS_MIN_REL,
    PROMINENCE,
    SHORT_TRAIN,
    SMALL_MIN,
    SMALL_REQUESTS,
    SPREAD_BINS,
    SPREAD_REL,
    TOL_MISS_REL,
    TOL_REL,
    Rules,
)


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
class Chain:
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


def median_of(a: np.ndarray) -> float:
    """np.median without its overhead, for the few values of a chain."""
    v = sorted(a.tolist())
    h = len(v) // 2
    return float(v[h]) if len(v) % 2 else (v[h - 1] + v[h]) / 2


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


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
    runs of a 4 s job in 1 s bins, would look like chance.)"""
    dev = np.abs(np.diff(on) - np.diff(k) * period)[1:]  # the first gap is free
    used = np.arange(2, len(on)) if whole else 0  # chain members placed before each of those steps
    remaining = np.maximum(n_bursts - used, 0.5)
    p = -np.expm1(-remaining / span_s * 2 * (dev + r / 2))
    return math.log(max(n_all, 1) * LOOK_ELSEWHERE) + float(np.log(np.maximum(p, 1e-300)).sum())


def _evaluate(
    b: SeriesBursts, idx: np.ndarray, k: np.ndarray, r: float, span_s: float, n_all: int, rules: Rules
) -> Chain | None:
    m = len(idx)
    if m < rules.min_bursts:
        return None
    n_exp = int(k[-1]) + 1
    if n_exp - m > (max(1, m // MISS_EVERY) if m >= SHORT_TRAIN else 0):  # a miss needs five bursts
        return None
    if m < SMALL_MIN and median_of(b.requests[idx]) < SMALL_REQUESTS:
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
    if median_of(b.duration[idx]) > MAX_BURST_SHARE * period:
        return None
    if median_of(b.prominence[idx]) < PROMINENCE:  # well clear of the noise
        return None
    amounts = b.amount[idx]
    if m <= SHORT_TRAIN and amounts.max() > rules.amp_ratio * max(amounts.min(), 1e-9):
        return None  # few bursts: alike
    if amounts.min() < OTHERS_MIN_REL * median_of(amounts):
        return None  # through tiny bursts (a trickle): `_pools` tries the large ones alone
    # chance: the file's other bursts, globally and around the chain
    others = b.prominence >= PROMINENCE  # bins barely over the threshold are not competing bursts
    others &= b.amount >= OTHERS_MIN_REL * median_of(amounts)  # nor are a trickle's (a page written back)
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
    return Chain(
        idx=idx, k=k, period=period, spread=spread, irregularity=spread / limit, log_e=log_e, confidence=confidence
    )


def _rank(c: Chain) -> tuple[float, int]:
    """Bursts that fit, discounted for misses and irregular gaps."""
    return ((len(c.idx) - c.missed) * (1 - 0.5 * c.irregularity), len(c.idx))


def _pools(b: SeriesBursts, pool: np.ndarray, end: int | None, rules: Rules) -> list[np.ndarray]:
    """The bursts to chain: all of `pool`, and, among a trickle of tiny ones (a page
    written back now and then), those not tiny beside the large ones (or beside the
    burst `end`), which a chain through the tiny ones would otherwise hide."""
    amount = b.amount[pool]
    ref = float(b.amount[end]) if end is not None else float(np.quantile(amount, 0.9)) if len(pool) else 0.0
    big = amount >= OTHERS_MIN_REL * ref
    if rules.min_bursts <= np.count_nonzero(big) < len(pool):
        return [pool, pool[big]]
    return [pool]


def find_chains(
    b: SeriesBursts,
    r: float,
    span_s: float,
    rules: Rules = BATCH,
    periods: Sequence[float] | None = None,
    n_all: int | None = None,
    end: int | None = None,
) -> list[Chain]:
    """The trains among one series' bursts, best first; `periods`: try only these;
    `n_all`: bursts that could have started a chance chain (default: these); `end`:
    only the train that ends with this burst."""
    n = len(b)
    if n < rules.min_bursts:
        return []
    avail = np.ones(n, np.bool_)
    found: list[Chain] = []
    p_min = max(rules.min_period_bins * r, MIN_PERIOD_S) * 0.8
    p_max = span_s / max(1, rules.min_bursts - 1) * 1.2
    for _ in range(MAX_TRAINS if end is None else 1):
        best: Chain | None = None
        best_pool = np.flatnonzero(avail)
        for pool in _pools(b, best_pool, end, rules):
            if len(pool) < rules.min_bursts:
                break
            sub = b.take(pool)
            sub_end = None if end is None else int(np.searchsorted(pool, end))
            tries = _candidate_periods(sub.onset, p_min, p_max) if periods is None else periods
            for candidate in tries:
                period = candidate
                for _refine in range(2):  # link with the candidate, then with the chain's fitted period
                    idx, k = _best_path(sub.onset, period, r, sub_end)
                    top = None
                    trimmed = _trimmed(idx, k)
                    variants = [(idx, k)] if len(trimmed[0]) == len(idx) else [(idx, k), trimmed]
                    for variant in variants if end is None else [v for v in variants if v[0][-1] == sub_end]:
                        c = _evaluate(sub, *variant, r, span_s, max(n, n_all or 0), rules)
                        if c is not None and (top is None or _rank(c) > _rank(top)):
                            top = c
                    if top is None:
                        break
                    if best is None or _rank(top) > _rank(best):
                        best, best_pool = top, pool
                    if abs(top.period - period) <= 0.02 * period:
                        break
                    period = top.period
        if best is None:
            break
        best.idx = best_pool[best.idx]
        found.append(best)
        avail[best.idx] = False
    return found
