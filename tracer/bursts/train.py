"""The detector's data: a file's activity in bins (`Series`) in, bursts and trains
of bursts (`Burst`, `Train`) out, and their JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

METRICS = ("write", "sync", "writeback")
BYTE_METRICS = frozenset({"write", "writeback"})  # bursts of bytes (the others: of syncs)
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "msync")


@dataclass
class Series:
    """One file's activity in equal bins: bin i covers [t0 + i*r, t0 + (i+1)*r).

    `bytes` and `ops` are write bytes and write requests per bin (either may be
    None: no write analysis); `syncs` are fsync + fdatasync + sync_file_range +
    msync per bin (None: no sync analysis); `writeback` the bytes the kernel wrote
    from the file's page cache to its device per bin (None: no writeback analysis),
    `writeback_by` what made it write most of them (model.WRITEBACK_CAUSES). The
    typical request size of a burst is its bytes over its requests above the
    file's baseline."""

    name: str
    kind: str
    resolution_s: float
    t0: float
    bytes: np.ndarray | None = None
    ops: np.ndarray | None = None
    syncs: np.ndarray | None = None
    sync_call: str | None = None  # the file's usual sync: fsync, fdatasync, sync_file_range or msync
    writeback: np.ndarray | None = None
    writeback_by: str | None = None  # the cause of most of its writeback: fsync, flusher_periodic, ...
    # files folded into this series (bursts.fold: MySQL's redo directory, `name`), None: one file
    files: int | None = None

    def values(self, metric: str) -> np.ndarray | None:
        """The bins of one metric (METRICS), None when not analysed."""
        return {"write": self.bytes, "sync": self.syncs, "writeback": self.writeback}[metric]


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
    metric: str = "write"  # "write" (bytes), "sync" (sync requests) or "writeback" (bytes)
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
    # "write": bursts of bytes written; "sync": of sync requests; "writeback": of bytes the
    # kernel wrote back to the device (the disk's spike, whether or not the writes were one)
    metric: str
    period_s: float
    period_spread_s: float  # standard deviation of the gaps (per period)
    bursts: int
    missed: int  # expected bursts between the first and the last that did not come
    bytes_per_burst: int  # median, above the baseline (0 for sync trains)
    ops_per_burst: int  # write requests (write; 0: unknown) or syncs (sync) per burst
    typical_request_size: int | None  # bytes per request of the bursts (None: unknown)
    share_of_file_bytes: float | None  # of all bytes the file took (write) or wrote back (writeback)
    share_of_file_syncs: float | None  # of all its syncs (sync trains)
    confidence: float  # 0..1, a heuristic (not a probability)
    first_s: float
    last_s: float
    explanation: str = ""
    members: list[Burst] = field(default_factory=list, repr=False)
    metronome: bool = False  # one sync in every interval (see `metronome_runs`), not bursts
    sync_call: str = "fsync"  # sync trains: the file's usual sync system call
    writeback_by: str | None = None  # writeback trains: what made the kernel write back (None: unknown)
    # the metric of the same file's other train of the same period: "writeback" for a write
    # train whose bytes reach the disk as a writeback train, "write" for that writeback train
    twin: str | None = None
    # a folded series (bursts.fold: MySQL's redo directory, `file`): the files it holds
    files: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
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
            "writeback_by": self.writeback_by if self.metric == "writeback" else None,
            "twin": self.twin,
            "onsets_s": [round(b.start_s, 3) for b in self.members],
        }
        if self.files is not None:  # a folded series (MySQL's redo directory) only
            out["files"] = self.files
        return out


def trains_json(trains: Sequence[Train]) -> list[dict[str, Any]]:
    return [t.to_json() for t in trains]
