"""Whole series to trains: `detect()`, the metronome (one sync in every bin), and
twins (a file's write and writeback trains of one period: `pair_twins`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from .chains import Chain, find_chains
from .explain import explain
from .find import SeriesBursts, find_bursts
from .rules import BATCH, METRONOME_MIN, METRONOME_NOISE, SIZE_SNR, TWIN_TOL, Rules
from .train import BYTE_METRICS, METRICS, Burst, Series, Train

if TYPE_CHECKING:
    from ..server_timers import ServerFacts


def metronome_runs(counts: np.ndarray) -> list[tuple[int, int]]:
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


def chain_train(
    s_name: str, kind: str, metric: str, b: SeriesBursts, c: Chain, total: float, writeback_by: str | None = None
) -> Train:
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
        bytes_per_burst=round(float(np.median(amounts))) if metric in BYTE_METRICS else 0,
        ops_per_burst=round(float(np.median(amounts))) if metric == "sync" else per_burst or 0,
        typical_request_size=size,
        share_of_file_bytes=share if metric in BYTE_METRICS else None,
        share_of_file_syncs=share if metric == "sync" else None,
        confidence=c.confidence,
        first_s=float(b.start[idx[0]]),
        last_s=float(b.start[idx[-1]]),
        members=members,
        writeback_by=writeback_by if metric == "writeback" else None,
    )
    t.explanation = explain(t)
    return t


def metronome_train(name: str, kind: str, counts: np.ndarray, t0: float, r: float, start: int, end: int) -> Train:
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
    """The trains of one series: of write bytes, of syncs and of writeback bytes,
    whichever it has. Syncs in bins of 0.5 s or more are first tried as a metronome
    (one per bin)."""
    out: list[Train] = []
    for metric in METRICS:
        x = s.values(metric)
        if x is None or not len(x):
            continue
        if metric == "sync" and s.resolution_s >= 0.5:
            counts = np.asarray(x)
            runs = metronome_runs(counts)
            out += [metronome_train(s.name, s.kind, counts, s.t0, s.resolution_s, a, b) for a, b in runs]
            if runs:
                continue
        b = find_bursts(s, metric)
        if b is not None:
            total = float(np.asarray(x, np.float64).sum())
            span = len(x) * s.resolution_s
            out += [
                chain_train(s.name, s.kind, metric, b, c, total, s.writeback_by)
                for c in find_chains(b, s.resolution_s, span, rules)
            ]
    for t in out:
        if t.metric == "sync" and s.sync_call:
            t.sync_call = s.sync_call
        t.files = s.files
        if (t.metric == "sync" and s.sync_call) or s.files is not None:
            t.explanation = explain(t)
    return out


def pair_twins(trains: Iterable[Train]) -> None:
    """Mark a file's write and writeback trains of the same period (within TWIN_TOL)
    as twins, and say in the writeback train's explanation that it is the disk's
    spike of those writes; unmark the others. In place."""
    trains = list(trains)
    writes: dict[str, list[Train]] = {}
    for t in trains:
        if t.metric == "write":
            writes.setdefault(t.file, []).append(t)
    changed = {id(t): t.twin for t in trains}
    for t in trains:
        t.twin = None
    for t in trains:
        if t.metric != "writeback":
            continue
        for w in writes.get(t.file, []):
            if w.twin is None and abs(w.period_s / t.period_s - 1) <= TWIN_TOL:
                w.twin, t.twin = "writeback", "write"
                break
    for t in trains:
        if t.twin != changed[id(t)]:
            t.explanation = explain(t)


def detect(series: Series | Iterable[Series], rules: Rules = BATCH, facts: ServerFacts | None = None) -> list[Train]:
    """All trains of all series, most confident first; explained with the server's facts
    when given (record --mysql: server_timers.ServerFacts)."""
    if isinstance(series, Series):
        series = [series]
    out: list[Train] = []
    for s in series:
        out += detect_series(s, rules)
    pair_twins(out)
    if facts is not None:
        for t in out:
            t.explanation = explain(t, facts)
    out.sort(key=lambda t: (-t.confidence, t.file, t.metric, t.first_s))
    return out
