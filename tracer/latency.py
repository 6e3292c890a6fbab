"""Latency histograms: one bucket scheme for the kernel's per-interval
histograms (top) and the per-event latencies of traces (report).

Buckets are log-linear: SUB buckets per power of two. Bucket 0 holds 0 ns;
bucket 1 + e * SUB + s holds [2**e * (1 + s/SUB), 2**e * (1 + (s+1)/SUB)) ns.
A percentile is given as its bucket's midpoint, at most 1 / (2 * SUB) = 6.25 %
from the true value, and never above the exact maximum.

The kernel keeps LAT_SLOTS of these buckets, from 2**LAT_MIN_EXP ns
(256 ns; anything faster lands in the first slot) to ~18 minutes (anything
slower lands in the last): probes/mysqlio.h (abi), struct lat_hist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .abi import LAT_MIN_EXP, LAT_SLOTS, LAT_SUB, Op

SUB = LAT_SUB  # the kernel's buckets per power of two, for traces too
MAX_EXP = 47  # 2**48 ns is ~3 days
NBUCKETS = 1 + SUB * (MAX_EXP + 1)
KERNEL_OFFSET = 1 + SUB * LAT_MIN_EXP  # bucket of kernel slot 0
assert KERNEL_OFFSET + LAT_SLOTS <= NBUCKETS

# the op classes latency is shown for; syncs of every kind are one class
CLASSES = ("write", "sync", "read")
CLASS_OF_OP = {
    Op.WRITE: "write",
    Op.READ: "read",
    Op.FSYNC: "sync",
    Op.FDATASYNC: "sync",
    Op.SYNC_FILE_RANGE: "sync",
    Op.MSYNC: "sync",
    # page-cache events carry no latency (record streams them untimed)
    Op.DIRTY: "write",
    Op.WRITEBACK: "write",
    Op.DISK_READ: "read",
    Op.READAHEAD: "read",
    Op.DIRECT_READ: "read",
}
ACCURACY_NOTE = f"latency percentiles: {SUB} buckets per power of 2 (±{100 / (2 * SUB):g} %); max exact"


def _bucket_bounds() -> tuple[np.ndarray, np.ndarray]:
    lo = np.zeros(NBUCKETS)
    hi = np.zeros(NBUCKETS)
    for b in range(1, NBUCKETS):
        e, s = divmod(b - 1, SUB)
        lo[b] = 2.0**e * (1 + s / SUB)
        hi[b] = 2.0**e * (1 + (s + 1) / SUB)
    return lo, hi


LOWER, UPPER = _bucket_bounds()
MIDPOINT = (LOWER + UPPER) / 2


def bucket_of(ns: np.ndarray) -> np.ndarray:
    """Bucket of each latency in ns (vectorised)."""
    mant, exp = np.frexp(ns.astype(np.float64))  # ns = mant * 2**exp, mant in [0.5, 1)
    sub = ((mant * 2 - 1) * SUB).astype(np.int64)
    b = 1 + (exp.astype(np.int64) - 1) * SUB + sub
    b[ns == 0] = 0
    return np.clip(b, 0, NBUCKETS - 1)


def percentile(hist: np.ndarray, q: float, maximum: int) -> int | None:
    """Nearest-rank percentile q (0..100) of a histogram, as its bucket's midpoint."""
    total = int(hist.sum())
    if total == 0:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    b = int(np.searchsorted(np.cumsum(hist), rank))
    return min(round(MIDPOINT[b]), maximum)


@dataclass
class Histogram:
    """Latencies of a set of requests: bucket counts, exact sum and maximum."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(NBUCKETS, np.int64))
    sum_ns: int = 0
    max_ns: int = 0

    @classmethod
    def from_kernel(cls, slots: Any, sum_ns: int, max_ns: int) -> Histogram:
        """From a struct lat_hist's slots (a ctypes array of LAT_SLOTS counts)."""
        hist = cls(sum_ns=int(sum_ns), max_ns=int(max_ns))
        hist.counts[KERNEL_OFFSET : KERNEL_OFFSET + LAT_SLOTS] = np.frombuffer(slots, dtype=np.uint32)
        return hist

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def merge(self, other: Histogram) -> None:
        self.counts += other.counts
        self.sum_ns += other.sum_ns
        self.max_ns = max(self.max_ns, other.max_ns)

    def percentile(self, q: float) -> int | None:
        return percentile(self.counts, q, self.max_ns)

    def summary(self) -> dict[str, int] | None:
        """p50 / p99 / max / mean in ns and the number of requests; None when empty."""
        n = self.count
        if not n:
            return None
        return {
            "count": n,
            "p50_ns": self.percentile(50) or 0,
            "p99_ns": self.percentile(99) or 0,
            "max_ns": self.max_ns,
            "mean_ns": self.sum_ns // n,
        }
