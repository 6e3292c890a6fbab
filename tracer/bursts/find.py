"""Step 1 of the detector: the bursts of one series, from its median and MAD."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .rules import K_MAD, K_STAY, MAD_SIGMA, MAX_DUTY, MIN_REL, WRITEBACK_PAGE
from .train import BYTE_METRICS, Burst, Series


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
class SeriesBursts:
    """One series' bursts as arrays (sorted by onset)."""

    onset: np.ndarray  # the middle of its first bin: its time for the chains
    start: np.ndarray  # the start of its first bin
    duration: np.ndarray
    amount: np.ndarray  # bytes (write, writeback) or syncs (sync) above the baseline
    ops: np.ndarray  # write requests above the baseline
    size: np.ndarray  # typical request size, 0 = unknown
    prominence: np.ndarray  # its highest bin above the median, over (start threshold - median)
    requests: np.ndarray  # write requests, syncs or pages (writeback) in the burst, baseline included
    extra_bytes: np.ndarray  # bytes and write requests beyond the baseline's share of its bins
    extra_ops: np.ndarray  # (not clipped: a train sums them, the noise cancels)
    ops_var: np.ndarray  # variance of extra_ops from the baseline's noise (robust, per bin x bins)

    def __len__(self) -> int:
        return len(self.onset)

    def take(self, which: np.ndarray) -> SeriesBursts:
        return SeriesBursts(**{f.name: getattr(self, f.name)[which] for f in fields(self)})

    def burst(self, i: int, file: str, kind: str, metric: str) -> Burst:
        size = int(self.size[i])
        amount = round(float(self.amount[i]))
        return Burst(
            start_s=float(self.start[i]),
            duration_s=float(self.duration[i]),
            bytes=amount if metric in BYTE_METRICS else 0,
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


def find_bursts(s: Series, metric: str = "write") -> SeriesBursts | None:
    """The bursts of one metric of a series, or None when it is not bursty."""
    x = s.values(metric)
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
        if metric == "writeback":  # pages: a burst of one page proves as little as one write
            requests = requests / WRITEBACK_PAGE
    return SeriesBursts(
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
