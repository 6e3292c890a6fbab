"""The detector's data: a file's activity in bins (`Series`) in, bursts and trains
of bursts (`Burst`, `Train`) out, and their JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

METRICS = ("write", "sync")
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "msync")


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
    metronome: bool = False  # one sync in every interval (see `metronome_runs`), not bursts
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


def trains_json(trains: Sequence[Train]) -> list[dict[str, Any]]:
    return [t.to_json() for t in trains]
