"""Periodic bursts (mysqlio.bursts): the detector on seeded synthetic series (a table
of detection and false trains per category), the explanations, the live tracker,
the speed budget, a synthetic recorded trace, and end to end with real BPF: iogen's
`periodic` scenario under `mysqlio record` and `mysqlio top --json` at once."""

from __future__ import annotations

import io
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mysqlio.bursts.detect import detect
from mysqlio.bursts.explain import explain
from mysqlio.bursts.live import BurstTracker
from mysqlio.bursts.render import burst_spans, render_trains
from mysqlio.bursts.rules import BATCH, LIVE
from mysqlio.bursts.series import trains_from_trace
from mysqlio.bursts.train import Series, Train
from mysqlio.devtools.traced import end_iogen, read_json_line, start_iogen, start_record, start_top, stop_top
from mysqlio.events import EVENT_DTYPE
from mysqlio.trace import FileInfo, TraceMeta, TraceReader, TraceWriter

MiB = 1 << 20
KiB = 1 << 10
SEEDS = 50  # per category

# ----------------------------------------------------------------- synthetic series


@dataclass
class Case:
    category: str
    seed: int
    series: list[Series]
    truth: dict[str, tuple[str, float, list[float]]] = field(default_factory=dict)  # file -> (metric, P, onsets)


def _raster(n: int, r: float, start: float, dur: float, amount: float) -> np.ndarray:
    """`amount` spread evenly over [start, start + dur), in bins of r."""
    out = np.zeros(n)
    a, b = start / r, (start + dur) / r
    for i in range(max(math.floor(a), 0), min(math.ceil(b), n)):
        lo, hi = max(a, i), min(b, i + 1)
        if hi > lo:
            out[i] += amount * (hi - lo) / (b - a)
    return out


def _onsets(rng: np.random.Generator, period: float, t_end: float, jitter: float = 0.1) -> list[float]:
    """A train: every gap is the period +- jitter (uniform)."""
    t, out = rng.uniform(0.2, 1.0) * period, []
    while t < t_end:
        out.append(t)
        t += period * rng.uniform(1 - jitter, 1 + jitter)
    return out


def _add_bursts(b, o, r, times, rng, sigma=0.2, period=10.0, max_dur=None) -> None:
    """Bursts of 20..80 x 1 MiB (spread lognormal sigma) lasting up to a quarter period (3 s)."""
    count = rng.integers(20, 80)
    for t in times:
        k = max(1, round(count * rng.lognormal(0, sigma)))
        dur = rng.uniform(0.05, max_dur if max_dur else min(0.25 * period, 3.0))
        x = _raster(len(b), r, t, dur, k * MiB)
        b += x
        o += x / MiB


def _background(rng, n: int, r: float, busy: bool, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Busy: 1..8 MiB/s of 16 KiB writes, level +-`noise` (normal) and Poisson request counts."""
    if not busy:
        return np.zeros(n), np.zeros(n)
    rate = rng.uniform(1, 8) * MiB
    level = np.clip(rng.normal(1.0, noise, n), 0, None)
    ops = rng.poisson(level * rate / (16 * KiB) * r).astype(float)
    return ops * 16 * KiB, ops


def _log_uniform(rng, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _resolution(period: float) -> float:
    return 0.1 if period < 8 else 1.0  # a period spans at least 8 bins


def realized_period(times: list[float], nominal: float) -> float:
    """Least-squares period of the onsets (gaps counted in whole nominal periods)."""
    t = np.asarray(times)
    k = np.concatenate([[0], np.cumsum(np.maximum(1, np.rint(np.diff(t) / nominal)))])
    kc = k - k.mean()
    return float((kc * (t - t.mean())).sum() / (kc * kc).sum())


def positive(category: str, seed: int) -> Case:
    """Trains of 8..15 bursts, period 1..60 s (log-uniform), +-10 % jitter, then quiet for 4 periods."""
    rng = np.random.default_rng(seed)
    period = _log_uniform(rng, 1.0, 60.0)
    r = _resolution(period)
    active = int(rng.integers(8, 16)) * period
    case = Case(category, seed, [])
    if category == "two files":  # a second train, 1.3..3 times shorter or longer, in another file
        p2 = period * rng.uniform(1.3, 3.0) if rng.random() < 0.5 else period / rng.uniform(1.3, 3.0)
        p2 = min(max(p2, 1.0), 60.0)
        r = _resolution(min(period, p2))
        active = max(active, 8 * p2)
        n = int((active + max(4 * max(period, p2), 10.0)) / r)
        for name, kind, p in (("/data/ibdata1", "system", period), ("/data/db/t1.ibd", "table", p2)):
            b, o = _background(rng, n, r, True)
            times = _onsets(rng, p, active)
            _add_bursts(b, o, r, times, rng, period=p)
            case.series.append(Series(name, kind, r, 0.0, b, o))
            case.truth[name] = ("write", p, times)
        return case
    if category == "fsync 1 s":  # innodb_flush_log_at_trx_commit=2, at 0.1 s or 1 s resolution
        r = 0.1 if seed % 2 else 1.0
        active = float(rng.integers(15, 40))
        n = int((active + 10) / r)
        b, o = _background(rng, n, r, True)
        times = _onsets(rng, 1.0, active, jitter=0.03 if r == 1.0 else 0.1)
        syncs = np.zeros(n)
        for t in times:
            syncs[int(t / r)] += 1
        case.series.append(Series("/data/ib_logfile0", "redo", r, 0.0, b, o, syncs))
        case.truth["/data/ib_logfile0"] = ("sync", 1.0, times)
        return case
    n = int((active + max(4 * period, 10.0)) / r)
    b, o = _background(rng, n, r, category != "clean", noise=0.3 if category == "noisy background" else 0.1)
    times = _onsets(rng, period, active)
    if category == "one missed":
        drop = int(rng.integers(3, len(times) - 1))
        times = times[:drop] + times[drop + 1 :]
    _add_bursts(b, o, r, times, rng, period=period)
    if category == "random spikes too":  # besides the train, about one spike per 4 periods
        spikes = rng.uniform(0, active, rng.poisson(len(times) / 4))
        _add_bursts(b, o, r, spikes.tolist(), rng, sigma=0.7, period=period)
    case.series.append(Series("/data/ibdata1", "system", r, 0.0, b, o))
    case.truth["/data/ibdata1"] = ("write", period, times)
    return case


def negative(category: str, seed: int, seconds: float | None = None) -> Case:
    """No train: 1 h of 1 s bins (odd seeds) or 10 min of 0.1 s bins (even seeds)."""
    rng = np.random.default_rng(seed)
    r = 1.0 if seed % 2 else 0.1
    n = int((seconds or (3600.0 if r == 1.0 else 600.0)) / r)
    t_total = n * r
    name, kind, syncs = "/data/db/t1.ibd", "table", None
    if category == "steady":
        b, o = _background(rng, n, r, True)
    elif category == "sparse":  # single 16 KiB writes and syncs at random, 0.05..20 a second
        rate = _log_uniform(rng, 0.05, 20.0)
        o = rng.poisson(rate * r, n).astype(float)
        b = o * 16 * KiB
        syncs = rng.poisson(rate * r / 4, n).astype(float)
    elif category == "random spikes":  # Poisson spikes like bursts, amplitudes spread (sigma 0.7)
        b, o = _background(rng, n, r, rng.random() < 0.5)
        mean_gap = _log_uniform(rng, 3.0, 60.0) if r == 0.1 else _log_uniform(rng, 5.0, 120.0)
        spikes = np.sort(rng.uniform(0, t_total, rng.poisson(t_total / mean_gap)))
        _add_bursts(b, o, r, spikes.tolist(), rng, sigma=0.7, max_dur=min(3.0, mean_gap / 4))
    elif category == "single spike":
        b, o = _background(rng, n, r, rng.random() < 0.5)
        _add_bursts(b, o, r, [rng.uniform(0, t_total)], rng)
    elif category == "ramp":
        level = np.linspace(0, rng.uniform(5, 50) * MiB * r, n)
        b = np.clip(level * rng.normal(1.0, 0.05, n), 0, None)
        o = b / (16 * KiB)
    elif category == "random syncs":  # binlog-like: one fdatasync per commit, 0.3..50 a second
        b, o = _background(rng, n, r, True)
        syncs = rng.poisson(_log_uniform(rng, 0.3, 50.0) * r, n).astype(float)
        name, kind = "/data/mysql-bin.000001", "binlog"
    else:
        raise ValueError(category)
    return Case(category, seed, [Series(name, kind, r, 0.0, b, o, syncs)])


POSITIVE = ("clean", "busy", "noisy background", "random spikes too", "one missed", "two files", "fsync 1 s")
NEGATIVE = ("steady", "sparse", "random spikes", "single spike", "ramp", "random syncs")


def feed(tracker: BurstTracker, case: Case, bins: int | None = None) -> list[tuple[float, list[Train]]]:
    """Feed a case bin by bin, as `top --json` would (only files with activity)."""
    r = case.series[0].resolution_s
    n = len(case.series[0].bytes) if bins is None else bins
    timeline = []
    for i in range(n):
        files = []
        for s in case.series:
            so = s.syncs[i] if s.syncs is not None else 0
            if s.bytes[i] or s.ops[i] or so:
                files.append(
                    {"path": s.name, "kind": s.kind, "write_bytes": s.bytes[i], "write_ops": s.ops[i], "sync_ops": so}
                )
        timeline.append(((i + 1) * r, tracker.update((i + 1) * r, r, files)))
    return timeline


def _matches(t: Train, f: str, metric: str, period: float, tol: float) -> bool:
    return t.file == f and t.metric == metric and abs(t.period_s / period - 1) <= tol


# ----------------------------------------------------------------- the table


@dataclass
class Row:
    cases: int = 0
    detected: int = 0
    worst_period_error: float = 0.0
    extra: int = 0  # trains that are not the truth
    tracked: int = 0
    tracked_in_3: int = 0
    worst_latency: float = 0.0  # periods from the first burst the tracker could see
    left_in_time: int = 0  # of the tracked: gone within 2.5 periods after the last burst
    tracker_extra: int = 0


def _batch_positive(case: Case, row: Row) -> None:
    trains = detect(case.series)
    ok = True
    for f, (metric, p, times) in case.truth.items():
        pr = realized_period(times, p)
        hits = [t for t in trains if _matches(t, f, metric, pr, 0.05)]
        ok &= bool(hits)
        if hits:
            row.worst_period_error = max(row.worst_period_error, abs(hits[0].period_s / pr - 1))
    row.extra += sum(
        1
        for t in trains
        if not any(_matches(t, f, m, realized_period(ts, p), 0.05) for f, (m, p, ts) in case.truth.items())
    )
    row.detected += ok


def _tracker_positive(case: Case, row: Row) -> None:
    tracker = BurstTracker()
    timeline = feed(tracker, case)
    r = case.series[0].resolution_s
    ok = in_3 = left = True
    for f, (metric, p, times) in case.truth.items():
        pr = realized_period(times, p)
        visible = [t for t in times if t >= (tracker.min_history + 1) * r]  # a busy file's baseline settles
        first = next((t for t, act in timeline if any(_matches(a, f, metric, pr, 0.15) for a in act)), None)
        if first is None:
            ok = in_3 = left = False
            continue
        latency = (first - visible[0]) / p
        row.worst_latency = max(row.worst_latency, latency)
        in_3 &= latency <= 3
        gone = next((t for t, act in timeline if t > times[-1] and not any(a.file == f for a in act)), None)
        left &= gone is not None and gone - times[-1] <= 2.5 * p + 2 * r
    row.tracker_extra += len({a.file for _, act in timeline for a in act if a.file not in case.truth})
    row.tracked += ok
    row.tracked_in_3 += ok and in_3
    row.left_in_time += ok and left


def _print_table(capsys: pytest.CaptureFixture[str], pos: dict[str, Row], neg: dict[str, Row]) -> None:
    lines = [
        "",
        f"periodic bursts: {SEEDS} seeded cases per category (batch detector; live tracker in brackets)",
        f"{'positives':18} {'detected':>9} {'max |dP|':>9} {'extra':>6} {'[tracked':>9} {'<=3 P':>6} {'max lat':>8} {'left]':>6}",
    ]
    for name, r in pos.items():
        lines.append(
            f"{name:18} {r.detected:>4}/{r.cases:<4} {100 * r.worst_period_error:>8.1f}% {r.extra:>6} "
            f"{r.tracked:>5}/{r.cases:<3} {r.tracked_in_3:>6} {r.worst_latency:>7.1f}P {r.left_in_time:>6}"
        )
    lines.append(f"{'negatives':18} {'false trains (cases with any)':>30} {'[tracker, first 5 min]':>24}")
    for name, r in neg.items():
        lines.append(f"{name:18} {r.extra:>30} {r.tracker_extra:>24}")
    with capsys.disabled():
        print("\n".join(lines))


def _positive_row(c: str) -> Row:
    row = Row()
    for i in range(SEEDS):
        case = positive(c, 1000 + i)
        row.cases += 1
        _batch_positive(case, row)
        _tracker_positive(case, row)
    return row


def _negative_row(c: str) -> Row:
    row = Row()
    for i in range(SEEDS):
        row.cases += 1
        row.extra += bool(detect(negative(c, 2000 + i).series))
        # the tracker over the first 5 minutes
        case = negative(c, 3000 + i, seconds=300)
        row.tracker_extra += any(act for _, act in feed(BurstTracker(), case))
    return row


def test_detection_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Detection rate, period error, latency and false trains over seeded cases."""
    # the categories in two processes (pure CPU: half the wall time on two cores; the
    # cases are seeded, so the table is the same)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        pos = dict(zip(POSITIVE, pool.map(_positive_row, POSITIVE), strict=True))
        neg = dict(zip(NEGATIVE, pool.map(_negative_row, NEGATIVE), strict=True))
    _print_table(capsys, pos, neg)
    for c, r in pos.items():
        # random spikes besides the train (one per 4 periods, Poisson): when they merge into
        # its bursts or crowd it, the train is not told apart (about 3 % over 300 seeds)
        assert r.detected >= (0.9 if c == "random spikes too" else 0.95) * r.cases, (
            f"{c}: detected {r.detected}/{r.cases}"
        )
        assert r.worst_period_error <= 0.05
        assert r.tracked >= (0.8 if c == "random spikes too" else 0.95) * r.cases, f"{c}: tracked {r.tracked}"
        assert r.left_in_time == r.tracked, f"{c}: a train outlived its bursts"
        if c in ("clean", "busy", "two files"):  # established after three bursts
            assert r.tracked_in_3 >= 0.95 * r.cases, f"{c}: {r.tracked_in_3} within three periods"
        if c in ("noisy background", "one missed"):  # weak bursts, or the miss among the first three
            assert r.tracked_in_3 >= 0.9 * r.cases, f"{c}: {r.tracked_in_3} within three periods"
    assert sum(r.extra for c, r in pos.items() if c != "random spikes too") == 0
    for c, r in neg.items():
        assert r.extra == 0, f"{c}: {r.extra} false trains"
        # live: three chance-regular bursts before anything else was seen can pass (see bursts.py)
        assert r.tracker_extra <= (0.12 * r.cases if c == "random spikes" else 0.04 * r.cases), c


# ----------------------------------------------------------------- explanations


def _train(file: str, kind: str, metric: str, period: float, size: int | None = None, ops: int = 1) -> Train:
    t = Train(file, kind, metric, period, 0.1, 5, 0, 0, ops, size, None, None, 0.9, 0.0, 40.0)
    t.explanation = explain(t)
    return t


def test_a_region_of_ibdata1_is_named_not_guessed() -> None:
    """With ibdata1's regions (ibdata_regions), a train says where in the file it went."""
    assert (
        _train("/var/lib/mysql/ibdata1 · doublewrite", "system", "write", 10.1, MiB, 80).explanation
        == "ibdata1 · doublewrite: 80 × 1 MiB every 10 s → doublewrite batches "
        "(InnoDB master thread's 10 s loop in 5.5, or a checkpoint)"
    )
    # single pages into the rest of ibdata1 are no doublewrite, whatever their size
    assert _train("/d/ibdata1 · system", "system", "write", 4.0, 16 * KiB, 3).explanation == (
        "ibdata1 · system: 3 × 16 KiB every 4 s → system pages (period of no known timer)"
    )


def test_explanations_come_from_the_documented_timers() -> None:
    assert (
        _train("/var/lib/mysql/ibdata1", "system", "write", 10.1, MiB, 80).explanation
        == "ibdata1 · 80 × 1 MiB writes · every 10 s → doublewrite flush "
        "(InnoDB master thread's 10 s loop in 5.5, or a checkpoint)"
    )
    assert (
        _train("/var/lib/mysql/ib_logfile0", "redo", "sync", 1.0).explanation
        == "ib_logfile0 fsync once a second → innodb_flush_log_at_trx_commit=2"
    )
    assert _train("/d/aria_log.00000001", "aria", "write", 29.0, 8 * KiB).explanation.endswith(
        "→ Aria checkpoint, every 30 s"
    )
    assert "checkpoint of the 5.6/5.7 master thread" in _train("/d/ib_logfile1", "redo", "write", 7.2, 512).explanation
    # a period no documented timer has: say so, do not guess
    assert _train("/d/ibdata1", "system", "write", 4.0, MiB, 80).explanation.endswith(
        "→ doublewrite flush (period of no known timer)"
    )
    assert _train("/d/db/t.ibd", "table", "write", 23.0, 16 * KiB, 3).explanation.endswith(
        "→ page flush (period of no known timer)"
    )
    assert _train("/d/mysql-bin.000001", "binlog", "sync", 2.0).explanation.endswith("→ unknown")
    assert _train("/d/x.MYD", "myisam", "write", 10.0, 4 * KiB, 5).explanation.endswith("→ unknown")
    assert "\\x1b" in _train("/d/\x1b[2J", "other", "write", 5.0).explanation  # printable names
    t = _train("/d/aria_log.00000001", "aria", "sync", 1.0)
    t.sync_call = "sync_file_range"
    assert explain(t) == "aria_log.00000001 sync_file_range once a second → unknown"


def test_trains_render_and_serialise() -> None:
    (t,) = detect(positive("clean", 7).series)
    assert t.typical_request_size == MiB and t.share_of_file_bytes == pytest.approx(1.0)
    # over a busy file's many small requests, the bursts' own request size is given only
    # when the train's requests stand well above the noise of the file's request count
    sizes = [t.typical_request_size for i in range(40) for t in detect(positive("busy", 100 + i).series)]
    assert all(s is None or abs(s / MiB - 1) < 0.25 for s in sizes) and any(sizes) and None in sizes
    trains = detect(positive("busy", 7).series)
    (t,) = trains
    obj = t.to_json()
    assert obj["file"] == "/data/ibdata1" and obj["metric"] == "write" and len(obj["onsets_s"]) == t.bursts
    assert 0.1 < obj["share_of_file_bytes"] < 1
    spans = burst_spans(trains)
    assert len(spans) == t.bursts and spans[0][2] == t.explanation and all(s[1] > s[0] for s in spans)
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(render_trains(trains, 120))
    assert "ibdata1" in console.file.getvalue()


# ----------------------------------------------------------------- the live tracker


def _story_interval(t: float, burst: bool, syncs: int = 1) -> list[dict[str, Any]]:
    """One second of a Percona 5.5 server: redo steady, ibdata1 80 x 1 MiB when it bursts."""
    files = [
        {"path": "/d/ib_logfile0", "kind": "redo", "write_bytes": 900_000, "write_ops": 220, "sync_ops": syncs}
        | ({"fsync_ops": syncs} if syncs else {})
    ]
    if burst:
        files.append({"path": "/d/ibdata1", "kind": "system", "write_bytes": 80 * MiB, "write_ops": 80, "sync_ops": 1})
    return files


def test_banner_after_the_third_burst_and_gone_when_the_train_stops() -> None:
    tracker = BurstTracker()
    bursts = [5, 15, 25, 35, 45]  # every 10 s, then no more
    banners = {}
    for t in range(1, 100):
        tracker.update(float(t), 1.0, _story_interval(t, t in bursts, syncs=0))
        banners[t] = tracker.banner()
    assert all(banners[t] is None for t in range(1, 25))
    assert banners[25] == (
        "periodic: ibdata1 · 80 × 1 MiB writes · every 10 s → doublewrite flush "
        "(InnoDB master thread's 10 s loop in 5.5, or a checkpoint)"
    )
    assert all(banners[t] for t in range(25, 66))  # 45 + 2 periods
    assert all(banners[t] is None for t in range(70, 100))


def test_tracker_once_a_second_fsync_and_two_trains() -> None:
    tracker = BurstTracker()
    shown = []
    for t in range(1, 40):
        files = _story_interval(t, t % 7 == 3)
        tracker.update(float(t), 1.0, files)
        shown.append([x.explanation for x in tracker.active_trains()])
    final = shown[-1]
    assert any(x == "ib_logfile0 fsync once a second → innodb_flush_log_at_trx_commit=2" for x in final), final
    assert any(x.startswith("ibdata1 · 80 × 1 MiB writes · every 7 s") for x in final), final
    assert "(+1 more)" in (tracker.banner() or "")
    # the fsync metronome needs ten intervals; nothing before
    assert not shown[5]


@pytest.mark.parametrize("tail_writes", [0, 2, 7, 15])
def test_tracker_counts_a_burst_split_by_an_interval_boundary_whole(tail_writes: int) -> None:
    """A job writes 31 x 128 KiB every 4 s; top's boundary falls inside each burst, so
    `tail_writes` of them land in the next 0.25 s interval. The train is taken at a burst's
    first interval, but its figures count the whole burst (the tail once it has come):
    31 writes of 128 KiB per burst, as MariaDB's own tests/test_bursts_mariadb.py asserts."""
    size, writes = 128 << 10, 31

    def myd(n: int) -> list[dict[str, Any]]:
        zero = dict.fromkeys(("sync_ops", "read_bytes", "read_ops", "errors"), 0)
        return [{"path": "/d/periodic.MYD", "kind": "myisam", "write_bytes": n * size, "write_ops": n, **zero}]

    tracker = BurstTracker()
    t = 0.0
    for i in range(200):
        on = i > 40 and i % 16 == 0
        tail = i > 40 and i % 16 == 1 and tail_writes > 0
        t += 0.25
        tracker.update(t, 0.25, myd(writes - tail_writes) if on else myd(tail_writes) if tail else [])
    (train,) = tracker.active_trains()
    assert (train.bytes_per_burst, train.ops_per_burst, train.typical_request_size) == (writes * size, writes, size)


def test_tracker_feeds_model_intervals() -> None:
    @dataclass
    class F:
        path: str
        kind: str
        write_bytes: int
        write_ops: int
        sync_ops: int

    @dataclass
    class Interval:
        time: float
        interval_s: float
        files: list[F]

    tracker = BurstTracker()
    for t in range(1, 40):
        files = [F("/d/ibdata1", "system", 64 * MiB, 64, 0)] if t % 8 == 1 else []
        tracker.feed(Interval(1000.0 + t, 1.0, files))
    (train,) = tracker.active_trains()
    assert abs(train.period_s - 8) < 0.1 and train.file == "/d/ibdata1"


# ----------------------------------------------------------------- speed


def _fleet(mix: Callable[[int], str], seconds: int, seed: int = 7) -> list[Series]:
    """200 files of 1 s bins: steady, spiky (random bursts), or with a train of 5..60 s."""
    rng = np.random.default_rng(seed)
    out = []
    for f in range(200):
        what = mix(f)
        b, o = _background(rng, seconds, 1.0, what != "spiky")
        if what == "spiky":
            _add_bursts(b, o, 1.0, np.sort(rng.uniform(0, seconds, rng.poisson(seconds / 30))).tolist(), rng, sigma=0.7)
        elif what == "train":
            p = float(rng.uniform(5, 60))
            _add_bursts(b, o, 1.0, _onsets(rng, p, seconds), rng, period=p)
        syncs = rng.poisson(2.0, seconds).astype(float) if f % 10 == 0 else None
        out.append(Series(f"/d/db/t{f}.ibd", "table", 1.0, 0.0, b, o, syncs))
    return out


def test_fleet_scale_detection_and_tracker(capsys: pytest.CaptureFixture[str]) -> None:
    """Detection over 1 h of 1 s data for 200 files, and the tracker per interval for 200
    files: what they find is asserted, their CPU time is printed. The targets (< 1 s,
    < 1 ms) are not asserted here: a timed unit test is noise-bound (the tracker's mean
    measured 0.80-1.19 ms on one quiet machine, run to run); speed targets belong in
    `make bench`."""
    fleet = _fleet(lambda f: "steady" if f < 180 else "spiky" if f < 190 else "train", 3600)
    best = math.inf
    for _ in range(3):
        t0 = time.thread_time()
        trains = detect(fleet)
        best = min(best, time.thread_time() - t0)
    assert sorted(t.file for t in trains) == [f"/d/db/t{f}.ibd" for f in range(190, 200)]
    tracker = BurstTracker()
    per = []
    for i in range(900):
        files = [
            {
                "path": s.name,
                "kind": s.kind,
                "write_bytes": s.bytes[i],
                "write_ops": s.ops[i],
                "sync_ops": s.syncs[i] if s.syncs is not None else 0,
            }
            for s in fleet
        ]
        t0 = time.thread_time()
        tracker.update(i + 1.0, 1.0, files)
        per.append(time.thread_time() - t0)
    per_ms = np.array(per[20:]) * 1e3
    with capsys.disabled():
        print(
            f"\nspeed (CPU): detect 200 files x 1 h of 1 s bins {best * 1e3:.0f} ms; tracker, 200 files "
            f"(180 steady, 10 spiky, 10 trains): mean {per_ms.mean():.3f} ms, median {np.median(per_ms):.3f} ms, "
            f"p99 {np.percentile(per_ms, 99):.3f} ms per interval"
        )
    assert len(tracker.active_trains()) >= 8


# ----------------------------------------------------------------- a recorded trace (synthetic)

KDEV = (8 << 20) | 2
START = 50_000_000_000


def test_trace_of_the_story(tmp_path: Path) -> None:
    """A trace of the issue's server: ibdata1 takes 80 x 1 MiB every 10 s over steady redo
    writes with one fdatasync a second; trains_from_trace names both."""
    files = {
        (KDEV, 1): FileInfo("/var/lib/mysql/ibdata1", "system", None, False),
        (KDEV, 2): FileInfo("/var/lib/mysql/ib_logfile0", "redo", None, False),
        (KDEV, 3): FileInfo("/var/lib/mysql/db/t1.ibd", "table", "db.t1", False),
    }
    rng = np.random.default_rng(3)
    path = tmp_path / "story.trace"
    w = TraceWriter(str(path), TraceMeta("h", "k", 1, None, "5.5.62-Percona", "/var/lib/mysql", 1e9, START, "test"))
    for second in range(125):
        ev = []
        redo = np.zeros(200, EVENT_DTYPE)
        redo["ts_ns"] = START + second * 10**9 + np.sort(rng.integers(0, 10**9, 200))
        redo["ino"], redo["op"], redo["result"] = 2, 0, rng.integers(512, 8192, 200)
        ev.append(redo)
        sync = np.zeros(1, EVENT_DTYPE)
        sync["ts_ns"], sync["ino"], sync["op"] = START + second * 10**9 + 400_000_000 + rng.integers(0, 10**6), 2, 3
        ev.append(sync)
        pages = np.zeros(5, EVENT_DTYPE)  # random page writes to a table
        pages["ts_ns"] = START + second * 10**9 + rng.integers(0, 10**9, 5)
        pages["ino"], pages["op"], pages["result"] = 3, 0, 16 * KiB
        ev.append(pages)
        if second % 10 == 7:  # the master thread's 10 s flush: 80 x 1 MiB doublewrite
            dbl = np.zeros(80, EVENT_DTYPE)
            dbl["ts_ns"] = START + second * 10**9 + 100_000_000 + np.arange(80) * 2_000_000
            dbl["ino"], dbl["op"], dbl["result"] = 1, 0, MiB
            ev.append(dbl)
        e = np.concatenate(ev)
        e = e[np.argsort(e["ts_ns"], kind="stable")]
        e["dev"], e["tid"], e["latency_ns"], e["offset"] = KDEV, 7, 1000, 0
        w.write(e, files, {7: "mysqld"}, 0)
    w.close(0, end_wall=1e9 + 125)
    trains = trains_from_trace(TraceReader(str(path)))
    by = {(os.path.basename(t.file), t.metric): t for t in trains}
    assert set(by) == {("ibdata1", "write"), ("ib_logfile0", "sync")}, [t.explanation for t in trains]
    dbl, fsync = by["ibdata1", "write"], by["ib_logfile0", "sync"]
    assert abs(dbl.period_s - 10) <= 0.5 and dbl.bursts == 12 and dbl.typical_request_size == MiB
    assert dbl.ops_per_burst == 80 and dbl.share_of_file_bytes == 1.0
    assert dbl.explanation == (
        "ibdata1 · 80 × 1 MiB writes · every 10 s → doublewrite flush "
        "(InnoDB master thread's 10 s loop in 5.5, or a checkpoint)"
    )
    assert abs(fsync.period_s - 1) <= 0.05 and fsync.bursts >= 100
    assert fsync.explanation == "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2"
    assert [int(b.start_s) for b in dbl.members[:3]] == [7, 17, 27]


# ----------------------------------------------------------------- writeback


def _writeback_case(seed: int, write_train: bool = False, by: str = "fsync", period: float = 10.0) -> list[Series]:
    """ibdata1 over 125 s: 1..8 MiB/s of 16 KiB writes, steady (+-10 %), in 1 s bins; its
    writeback (0.1 s bins) is a trickle of single pages and, every `period` s (+-0.5 %),
    80 MiB at once, by `by`. With `write_train`, the writes come as 80 x 1 MiB bursts
    0.3 s before each writeback instead (on the same steady background)."""
    rng = np.random.default_rng(seed)
    n = 125
    b, o = _background(rng, n, 1.0, True)
    wb = np.zeros(n * 10)
    wb[rng.integers(0, n * 10, 40)] += 4 * KiB
    onsets = _onsets(rng, period, n - period / 2, jitter=0.005)
    for t in onsets:
        wb[int(t * 10)] += 80 * MiB
        if write_train:
            x = _raster(n, 1.0, max(t - 0.3, 0.0), 0.25, 80 * MiB)
            b += x
            o += x / MiB
    return [
        Series("/var/lib/mysql/ibdata1", "system", 1.0, 0.0, b, o),
        Series("/var/lib/mysql/ibdata1", "system", 0.1, 0.0, writeback=wb, writeback_by=by),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_writeback_train_over_smooth_writes(seed: int) -> None:
    """A sync that pushes 80 MiB every 10 s is a train even when the writes were spread out:
    one writeback train (its cause said), no write train."""
    trains = detect(_writeback_case(seed))
    assert [t.metric for t in trains] == ["writeback"], [t.explanation for t in trains]
    (t,) = trains
    assert abs(t.period_s - 10) <= 0.3 and t.bursts >= 11 and t.writeback_by == "fsync"
    assert abs(t.bytes_per_burst / (80 * MiB) - 1) < 0.01 and t.ops_per_burst == 0 and t.twin is None
    assert t.typical_request_size is None and t.share_of_file_bytes and t.share_of_file_bytes > 0.99
    assert t.explanation == (
        "ibdata1: 80 MiB written back every 10.0 s by fsync → "
        "after the InnoDB master thread's 10 s flush in 5.5, or a checkpoint"
    )
    obj = t.to_json()
    assert obj["metric"] == "writeback" and obj["writeback_by"] == "fsync" and obj["sync_call"] is None
    assert obj["bytes_per_burst"] == t.bytes_per_burst and obj["twin"] is None


def test_smooth_writes_and_writeback_are_no_train() -> None:
    """Steady writes, written back steadily (every bin a little): nothing is periodic."""
    rng = np.random.default_rng(11)
    b, o = _background(rng, 300, 1.0, True)
    wb = rng.poisson(40, 3000).astype(float) * 4 * KiB
    series = [Series("/d/t.ibd", "table", 1.0, 0.0, b, o), Series("/d/t.ibd", "table", 0.1, 0.0, writeback=wb)]
    assert detect(series) == []


def test_write_and_writeback_trains_of_one_period_are_twins() -> None:
    """Bursts of writes into the page cache, each written back 0.3 s later: both trains are
    kept, and their explanations tell the writes from the disk's spike."""
    trains = detect(_writeback_case(3, write_train=True))
    by = {t.metric: t for t in trains}
    assert sorted(by) == ["write", "writeback"], [t.explanation for t in trains]
    assert (by["write"].twin, by["writeback"].twin) == ("writeback", "write")
    # the write train's explanation as without its twin (its request size and count are
    # estimated over the busy background); the writeback's says it is the disk's spike
    w = by["write"].explanation
    assert w.startswith("ibdata1 · ") and w.endswith(
        " writes · every 10 s → doublewrite flush (InnoDB master thread's 10 s loop in 5.5, or a checkpoint)"
    )
    assert by["writeback"].explanation.startswith(
        "ibdata1: 80 MiB written back every 10.0 s by fsync, the disk's spike of its writes → "
    )
    assert by["writeback"].to_json()["twin"] == "write"
    # another period is no twin
    other = detect(_writeback_case(3, write_train=True)[:1] + _writeback_case(4, period=7.0)[1:])
    assert {t.metric: t.twin for t in other} == {"write": None, "writeback": None}


def test_writeback_explanations() -> None:
    from mysqlio.bursts.explain import WRITEBACK_BY_TEXT
    from mysqlio.model import WRITEBACK_CAUSES

    assert sorted(WRITEBACK_BY_TEXT) == sorted(WRITEBACK_CAUSES)

    def wb(kind: str, by: str | None, period: float, nbytes: int = 8 * MiB) -> str:
        t = Train("/d/f", kind, "writeback", period, 0.1, 5, 0, nbytes, 0, None, 1.0, None, 0.9, 0.0, 40.0)
        t.writeback_by = by
        return explain(t)

    assert wb("table", "flusher_periodic", 5.1) == (
        "f: 8 MiB written back every 5.1 s by the kernel flusher (dirty_expire) → "
        "the flusher's wake-up, vm.dirty_writeback_centisecs (5 s)"
    )
    for period in (30.0, 33.0, 35.0):
        assert wb("table", "flusher_periodic", period).endswith(
            "by the kernel flusher (dirty_expire) → pages older than vm.dirty_expire_centisecs (30 s), "
            "at the flusher's next wake-up (every 5 s)"
        )
    assert (
        wb("table", "flusher_periodic", 12.0)
        == "f: 8 MiB written back every 12.0 s by the kernel flusher (dirty_expire)"
    )
    assert wb("redo", "fdatasync", 1.0).endswith("by fdatasync → innodb_flush_log_at_trx_commit=2")
    assert wb("other", "fsync", 2.0) == "f: 8 MiB written back every 2.0 s by fsync"
    assert wb("other", None, 2.0) == "f: 8 MiB written back every 2.0 s"
    assert wb("aria", "write", 30.0).endswith("by O_SYNC / O_DSYNC writes → Aria checkpoint, every 30 s")
    assert wb("table", "memory", 10.0, 1_310_720) == "f: 1.2MiB written back every 10.0 s by memory reclaim"


def _pc_interval(i: int, writeback_by: str = "fsync") -> list[dict[str, Any]]:
    """0.25 s of iogen's pc_periodic: 64 KiB every 0.1 s (2 or 3 per interval), and
    every 8th interval an fsync that writes back the 1.25 MiB of its 2 s."""
    writes = 3 if i % 2 else 2
    f: dict[str, Any] = {
        "path": "/d/pc_periodic.dat",
        "kind": "other",
        "write_bytes": writes * 64 * KiB,
        "write_ops": writes * 16,
        "sync_ops": 0,
        "writeback_bytes": 0,
        "writeback_by": {},
    }
    if i % 8 == 5:
        f |= {"sync_ops": 1, "fsync_ops": 1, "writeback_bytes": 1280 * KiB, "writeback_by": {writeback_by: 1280 * KiB}}
    return [f]


def test_tracker_finds_the_writeback_train() -> None:
    """`top --json` intervals of pc_periodic: a writeback train of 2 s by fsync, shown by
    its third burst; the writes (smooth) make none; a model.FileActivity says the same."""
    tracker = BurstTracker()
    shown = []
    for i in range(41):
        tracker.update(0.25 * (i + 1), 0.25, _pc_interval(i))
        shown.append([x.metric for x in tracker.active_trains()])
    assert shown.index(["writeback"]) == 21  # the third fsync (intervals 5, 13, 21)
    assert all(x == ["writeback"] for x in shown[21:]), shown  # no write train; the 1-sync bursts need six
    trains = tracker.active_trains()
    (wb,) = [x for x in trains if x.metric == "writeback"]
    assert abs(wb.period_s - 2) < 0.05 and wb.bytes_per_burst == 1280 * KiB and wb.writeback_by == "fsync"
    assert wb.explanation == "pc_periodic.dat: 1.2MiB written back every 2.0 s by fsync"
    assert wb.to_json()["writeback_by"] == "fsync"
    # a model.FileActivity carries the same keys as attributes
    from mysqlio.model import FileActivity
    from mysqlio.probe import FileIdentity

    def activity(i: int) -> list[FileActivity]:
        (d,) = _pc_interval(i, "flusher_periodic")
        d = {k: v for k, v in d.items() if k not in ("sync_ops", "fsync_ops")}
        return [FileActivity(file=FileIdentity(1, 2), **d)]

    tracker = BurstTracker()
    for i in range(41):
        tracker.update(1000 + i * 0.25, 0.25, activity(i))
    (wb,) = tracker.active_trains()
    assert wb.metric == "writeback" and wb.writeback_by == "flusher_periodic"


def test_writeback_series_of_a_trace(tmp_path: Path) -> None:
    """A trace's op "writeback" events make a writeback series in 0.1 s bins with the
    file's dominant cause: 1 MiB by fsync every 2 s (and a little by the flusher) over
    smooth writes is a writeback train by fsync, and no write train."""
    files = {(KDEV, 1): FileInfo("/d/pc.dat", "other", None, False)}
    path = tmp_path / "wb.trace"
    w = TraceWriter(str(path), TraceMeta("h", "k", 1, None, "x", "/d", 1e9, START, "test"))
    for second in range(30):
        ev = []
        writes = np.zeros(10, EVENT_DTYPE)
        writes["ts_ns"] = START + second * 10**9 + np.arange(10) * 100_000_000
        writes["ino"], writes["op"], writes["result"] = 1, 0, 64 * KiB
        ev.append(writes)
        if second % 2 == 1:
            sync = np.zeros(1, EVENT_DTYPE)
            sync["ts_ns"], sync["ino"], sync["op"] = START + second * 10**9 + 50_000_000, 1, 2
            wb = np.zeros(16, EVENT_DTYPE)  # 16 bios of 64 KiB, written back by that fsync
            wb["ts_ns"] = START + second * 10**9 + 50_000_000 + np.arange(16) * 100_000
            wb["ino"], wb["op"], wb["api"], wb["by"], wb["result"] = 1, 7, 3, 1, 64 * KiB
            ev += [sync, wb]
        if second == 20:
            flusher = np.zeros(1, EVENT_DTYPE)
            flusher["ts_ns"] = START + second * 10**9 + 700_000_000
            flusher["ino"], flusher["op"], flusher["api"], flusher["by"], flusher["result"] = 1, 7, 3, 7, 4 * KiB
            ev.append(flusher)
        e = np.concatenate(ev)
        e = e[np.argsort(e["ts_ns"], kind="stable")]
        e["dev"], e["tid"], e["latency_ns"] = KDEV, 7, 1000
        w.write(e, files, {7: "iogen"}, 0)
    w.close(0, end_wall=1e9 + 30)
    trains = trains_from_trace(TraceReader(str(path)))
    by = {t.metric: t for t in trains}
    assert "write" not in by and "writeback" in by, [t.explanation for t in trains]
    t = by["writeback"]
    assert abs(t.period_s - 2) <= 0.02 and t.bursts == 15 and t.bytes_per_burst == MiB
    assert t.writeback_by == "fsync" and t.explanation == "pc.dat: 1 MiB written back every 2.0 s by fsync"


# ----------------------------------------------------------------- end to end, real BPF

PERIOD = 10.0  # the 5.5 master thread's loop: the explanation is the issue's
BURSTS = 3  # at 10, 20 and 30 s


@pytest.mark.bpf
def test_end_to_end_iogen_periodic(
    bpf_ready: None, iogen: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """iogen's `periodic` scenario (ibdata1: 32 x 1 MiB every 10 s; ib_logfile0: 200 small
    writes a second and one fdatasync a second) under `mysqlio record` and `mysqlio top
    --json` at once: the detector on the trace (1 s bins) finds the 10 s train in ibdata1
    and the fsync train in ib_logfile0 (and the writeback train its fdatasyncs make); a
    tracker fed with top's intervals shows the ibdata1 train within three periods of its
    first burst."""
    work = Path(os.path.realpath(tmp_path)) / "io"
    work.mkdir()
    trace = str(tmp_path / "periodic.trace")
    args = ["--scenario", "periodic", "--period", str(PERIOD), "--burst-count", "32", "--burst-size", str(MiB)]
    args += ["--seconds", str(PERIOD * BURSTS + 1.5), "--rate", "200", "--size", "4096"]
    gen = start_iogen(str(iogen), str(work), args)
    rec = top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        rec = start_record(gen.pid, trace)
        top = start_top(gen.pid, 1.0)
        assert top.stdout is not None
        tracker = BurstTracker()
        tracker.feed_json(read_json_line(top.stdout, 30, "mysqlio top"))  # probes attached
        go = time.time()
        gen.stdin.write("go\n")
        gen.stdin.flush()
        established = None
        shown: set[str] = set()
        while gen.poll() is None:
            ready = select_line(top.stdout, gen.stdout, 5)
            if ready == "gen":
                break
            obj = read_json_line(top.stdout, 5, "mysqlio top")
            tracker.feed_json(obj)
            shown.update(t.explanation for t in tracker.active_trains())
            if established is None and any(t.file == str(work / "ibdata1") for t in tracker.active_trains()):
                established = obj["time"]
        expected = read_json_line(gen.stdout, 60, "iogen run")
        time.sleep(1.0)
        rest, _ = stop_top(top)
        for obj in rest:
            tracker.feed_json(obj)
            if established is None and any(t.file == str(work / "ibdata1") for t in tracker.active_trains()):
                established = obj["time"]
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
    finally:
        for p in (top, rec):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        end_iogen(gen)
    bursts_s = expected["bursts_s"]
    assert len(bursts_s) == BURSTS

    trains = trains_from_trace(TraceReader(trace))
    with capsys.disabled():
        print("\nend to end, from the trace:", *[f"  {t.explanation} (P {t.period_s:.3f} s)" for t in trains], sep="\n")
    ibdata = [t for t in trains if t.file == str(work / "ibdata1")]
    assert len(ibdata) == 1, [t.explanation for t in trains]
    (t,) = ibdata
    # 1 s bins: a burst woken late across a bin edge moves its onset by one bin, the fitted
    # period by 1 s / (BURSTS - 1) = 5 % (9.5 s was seen on a loaded machine); no more
    quantum = 1.0 / ((BURSTS - 1) * PERIOD)
    assert t.metric == "write" and abs(t.period_s / PERIOD - 1) <= quantum + 1e-9 and t.bursts == BURSTS
    assert t.typical_request_size == MiB and t.ops_per_burst == 32
    assert t.explanation == (
        "ibdata1 · 32 × 1 MiB writes · every 10 s → doublewrite flush "
        "(InnoDB master thread's 10 s loop in 5.5, or a checkpoint)"
    )
    redo = {t.metric: t for t in trains if t.file == str(work / "ib_logfile0")}
    # the steady writes: no train; each fdatasync writes back the second's 200 writes: a writeback train
    assert sorted(redo) == ["sync", "writeback"], [t.explanation for t in redo.values()]
    assert abs(redo["sync"].period_s - 1) <= 0.05
    assert redo["sync"].explanation == "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2"
    wb = redo["writeback"]
    assert abs(wb.period_s - 1) <= 0.05 and wb.writeback_by == "fdatasync"
    assert wb.explanation.endswith("written back every 1.0 s by fdatasync → innodb_flush_log_at_trx_commit=2")

    assert established is not None, "the live tracker never showed the ibdata1 train"
    assert "ib_logfile0 fdatasync once a second → innodb_flush_log_at_trx_commit=2" in shown, shown
    assert not [x for x in shown if x.startswith("ib_logfile0 ·")], shown  # its steady writes: no train
    first_burst = go + bursts_s[0]
    with capsys.disabled():
        print(f"end to end, live: ibdata1 train shown {established - first_burst:.1f} s after its first burst")
    assert established - first_burst <= 3 * PERIOD


def select_line(top_out: Any, gen_out: Any, timeout_s: float) -> str:
    """Which of top's and iogen's outputs has a line first."""
    import select

    ready, _, _ = select.select([top_out, gen_out], [], [], timeout_s)
    if gen_out in ready:
        return "gen"
    if top_out in ready:
        return "top"
    raise AssertionError(f"neither mysqlio top nor iogen printed anything in {timeout_s} s")


def test_rules_are_stricter_live() -> None:
    assert LIVE.alpha < BATCH.alpha and LIVE.max_others_per_period < BATCH.max_others_per_period
    assert LIVE.min_bursts == BATCH.min_bursts == 3
