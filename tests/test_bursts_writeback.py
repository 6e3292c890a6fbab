"""Writeback trains end to end, with real BPF: "a sync that pushes 80 MiB every 10 s is a
train even when the writes were spread out", in miniature.

iogen's `pc_periodic` scenario on a new ext4 on a loop device: 64 KiB of buffered writes
(16 one-page pwrites) in each of 20 slots a period, 0.1 s apart, appended to
pc_periodic.dat, and an fsync after each period's slots, for SECONDS s of slots. iogen's
clock of the slots stops while an fsync blocks (and moves with a late wake-up), so a cycle
is PERIOD plus that fsync's time (a few ms here; 0.1-0.4 s on a slow disk), and iogen prints when each fsync and each slot
began. Its ground truth: the writes are smooth (no two slots closer than SLOT_GAP_MIN_S,
however long the fsyncs take), the fsyncs come every `Run.period` (their median spacing),
and each fsync writes back the 20 slots of its period, 1.25 MiB
(iogen checks with cachestat(2) that the pages were still dirty before each fsync and
clean after it, and fails otherwise). Traced at once by `mysqlio top --json` (its live
trains: the `bursts` key of each interval) and `mysqlio record` (`report --json`'s
`bursts`), both must show a writeback train of period `Run.period`, by fsync, of the bytes
written per period, and no write train.

The kernel's writeback settings are global: another test shortening
vm.dirty_expire_centisecs meanwhile would let the flusher write some pages before the
fsync, and iogen fail, as would a sync(2) of any process; such a run is tried again (four
times at most). Needs root: fails (does not skip) without it, as every BPF test."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from throttled_disk import throttled_disk

from mysqlio.devtools.loop_disk import loop_ext4
from mysqlio.devtools.traced import (
    FileTotals,
    end_iogen,
    read_json_line,
    report_json,
    start_iogen,
    start_record,
    start_top,
)

PERIOD = 2.0
SECONDS = 12.0
FSYNCS = int(SECONDS / PERIOD)
TOP_INTERVAL_S = 0.25
SLOTS = 20  # a period's slots of 16 one-page writes
SLOT_EVERY_S = PERIOD / SLOTS  # iogen's PC_PERIODIC_EVERY
PER_PERIOD = SLOTS * 64 * 1024  # bytes written between two fsyncs, each written back by the second
# Half a slot. On a clock that ran on while an fsync blocked, the slots that fell due meanwhile
# came at once after it: a real cluster of writes every period, which report rightly showed as
# a write train (fresh-machine CI, issue 62; reproduced on a loop disk throttled to 5 IOPS,
# where fsyncs take 0.2-0.4 s).
SLOT_GAP_MIN_S = 0.05
# A sleep's wake-up, late: a fresh-machine CI run with other tests beside it (load ~8 on 2
# cores) woke an fsync more than 20 ms late, once within 2 ms of the schedule here.
WAKE_LATE_MAX_S = 0.1
ATTEMPTS = 5


@dataclass
class Run:
    expected: dict[str, Any]  # iogen's JSON
    intervals: list[dict[str, Any]]  # top's
    go: float  # unix time iogen started
    trace: str
    path: str  # pc_periodic.dat

    @property
    def period(self) -> float:
        """The median spacing of iogen's fsyncs: PERIOD plus an fsync's time."""
        return float(np.median(np.diff(self.expected["fsyncs_s"])))


def _run(iogen: Path, directory: str, trace: str, preexec_fn: Callable[[], None] | None = None) -> Run | None:
    """iogen under top and record at once; None when iogen failed (its reason on stderr)."""
    args = ["--scenario", "pc_periodic", "--period", str(PERIOD), "--seconds", str(SECONDS)]
    gen = start_iogen(str(iogen), directory, args, preexec_fn=preexec_fn)
    rec = top = None
    intervals: list[dict[str, Any]] = []
    try:
        assert gen.stdin is not None and gen.stdout is not None
        rec = start_record(gen.pid, trace)
        top = start_top(gen.pid, TOP_INTERVAL_S)
        assert top.stdout is not None
        intervals.append(read_json_line(top.stdout, 30, "mysqlio top"))  # its probes are attached
        out = top.stdout

        def read() -> None:  # all the time: a full pipe would hold top up
            for line in out:
                if line.strip():
                    intervals.append(json.loads(line))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        go = time.time()
        gen.stdin.write("go\n")
        gen.stdin.flush()
        ready, _, _ = select.select([gen.stdout], [], [], SECONDS + 60)
        assert ready, "iogen pc_periodic did not end"
        line = gen.stdout.readline()
        if not line:
            return None
        expected = json.loads(line)
        time.sleep(1.0)  # the last fsync's writeback, in an interval of its own and in the trace
        top.send_signal(signal.SIGINT)  # it prints the last partial interval and exits 0
        top.wait(timeout=20)
        reader.join(timeout=10)
        assert top.returncode == 0, f"mysqlio top exited {top.returncode}"
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, f"record exited {rec.returncode}: {err}"
    finally:
        for p in (top, rec):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        end_iogen(gen)
    return Run(expected, intervals, go, trace, str(Path(directory) / "pc_periodic.dat"))


@pytest.fixture(scope="module")
def run(bpf_ready: None, iogen: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    for attempt in range(1, ATTEMPTS + 1):
        trace = str(tmp_path_factory.mktemp("wb") / "pc_periodic.trace")
        with loop_ext4(64, direct_io=True) as disk:
            subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
            result = _run(iogen, os.path.realpath(disk.mount), trace)
        if result is not None:
            return result
        print(f"iogen pc_periodic failed (attempt {attempt} of {ATTEMPTS}): something else wrote its pages back?")
        time.sleep(3.0)
    pytest.fail(f"iogen pc_periodic failed {ATTEMPTS} times (see its stderr)")


def _file_trains(intervals: list[dict[str, Any]], path: str) -> list[tuple[float, dict[str, Any]]]:
    """(interval end, train) of every train of `path` top showed, interval by interval."""
    return [(obj["time"], t) for obj in intervals for t in obj.get("bursts", []) if t["file"] == path]


@pytest.mark.bpf
def test_iogen_ground_truth(run: Run) -> None:
    """iogen's own account, and top's per-file totals equal to it (page cache included)."""
    (f,) = run.expected["files"]
    assert f["path"] == run.path
    assert len(run.expected["fsyncs_s"]) == FSYNCS
    fsyncs, fsync_ends = np.asarray(run.expected["fsyncs_s"]), np.asarray(run.expected["fsync_ends_s"])
    fsync_s = fsync_ends - fsyncs
    slots = np.asarray(run.expected["write_slots_s"])
    assert len(slots) == FSYNCS * SLOTS
    assert np.diff(slots).min() >= SLOT_GAP_MIN_S, f"writes not smooth; fsyncs took {fsync_s.round(3)} s"
    # iogen's clock: each fsync is due SLOT_EVERY_S after its period's last slot, each period's
    # first slot when the fsync before it ended (its clock stops while one blocks, and moves
    # with a late wake-up); each comes then, late by a sleep's wake-up only
    last_slots, first_slots = slots[SLOTS - 1 :: SLOTS], slots[SLOTS::SLOTS]
    late = np.concatenate([fsyncs - last_slots - SLOT_EVERY_S, first_slots - fsync_ends[:-1]])
    assert late.min() >= -0.002 and late.max() <= WAKE_LATE_MAX_S, f"off iogen's schedule by {late.round(3)} s"
    assert f["write_bytes"] == f["dirtied_bytes"] == f["writeback_bytes"] == FSYNCS * PER_PERIOD
    assert f["writeback_by"] == {"fsync": FSYNCS * PER_PERIOD} and f["fsync_ops"] == FSYNCS
    totals = FileTotals()
    for obj in run.intervals:
        totals.add(obj)
    got = totals.totals[run.path]
    for counter in ("write_bytes", "write_ops", "fsync_ops", "dirtied_bytes", "writeback_bytes"):
        assert got[counter] == f[counter], counter
    assert totals.writeback_by[run.path] == f["writeback_by"]


@pytest.mark.bpf
def test_top_shows_the_writeback_train(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    """The live tracker of top: a writeback train of the fsyncs' period by fsync, of the bytes of a
    period, from the third fsync on; never a write train (the writes are smooth)."""
    shown = _file_trains(run.intervals, run.path)
    assert not [t for _, t in shown if t["metric"] == "write"], shown
    wb = [(at, t) for at, t in shown if t["metric"] == "writeback"]
    assert wb, f"top never showed a writeback train: {[t['explanation'] for _, t in shown]}"
    established, t = wb[0]
    _, last = wb[-1]
    with capsys.disabled():
        print(
            f"\ntop --json: {last['explanation']} (period {last['period_s']} s, {last['bytes_per_burst']} bytes "
            f"a burst, {last['bursts']} bursts); shown {established - (run.go + run.expected['fsyncs_s'][2]):.2f} s "
            "after the third fsync"
        )
    for _, t in wb:
        assert abs(t["period_s"] / run.period - 1) <= 0.05, t
        assert t["writeback_by"] == "fsync" and t["bytes_per_burst"] == PER_PERIOD, t
    assert last["explanation"] == f"pc_periodic.dat: 1.2MiB written back every {last['period_s']:.1f} s by fsync"
    assert established <= run.go + run.expected["fsyncs_s"][2] + 1.0


@pytest.mark.bpf
def test_report_shows_the_writeback_train(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    """The trace: a writeback train of every fsync (as far apart as iogen's fsyncs), by
    fsync, of the bytes of a period; no write train."""
    trains = [t for t in report_json(run.trace)["bursts"] if t["file"] == run.path]
    with capsys.disabled():
        print("\nreport --json:", *[f"  {t['explanation']} (P {t['period_s']} s)" for t in trains], sep="\n")
    assert "write" not in [t["metric"] for t in trains]
    (t,) = [t for t in trains if t["metric"] == "writeback"]
    assert abs(t["period_s"] / run.period - 1) <= 0.02 and t["bursts"] == FSYNCS and t["missed"] == 0
    assert t["writeback_by"] == "fsync" and t["bytes_per_burst"] == PER_PERIOD and t["share_of_file_bytes"] == 1.0
    assert np.allclose(np.diff(t["onsets_s"]), np.diff(run.expected["fsyncs_s"]), atol=0.15)
    assert t["explanation"] == f"pc_periodic.dat: 1.2MiB written back every {t['period_s']:.1f} s by fsync"


@pytest.mark.bpf
def test_slow_fsyncs_leave_the_writes_smooth(
    bpf_ready: None, iogen: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The failure of issue 62 on purpose: iogen's writes to a disk throttled to 5 IOPS,
    where each fsync blocks for 2 to 4 slots. iogen still spreads its slots (its own times
    say so), and neither top nor the trace shows a write train. (The writeback's cause is
    not asserted here: blk-throttle submits the held bios from a worker thread.)"""
    with throttled_disk(5) as disk:
        result = _run(iogen, os.path.realpath(disk.mount), str(tmp_path / "slow.trace"), disk.enter_cgroup)
    assert result is not None, "iogen pc_periodic failed (see its stderr)"
    fsync_s = np.subtract(result.expected["fsync_ends_s"], result.expected["fsyncs_s"])
    gaps = np.diff(result.expected["write_slots_s"])
    with capsys.disabled():
        print(f"\nfsyncs took {fsync_s.round(3)} s; slots at least {gaps.min():.3f} s apart")
    assert np.median(fsync_s) >= 0.15, "the throttled disk did not hold the fsyncs"
    assert len(gaps) == FSYNCS * SLOTS - 1 and gaps.min() >= SLOT_GAP_MIN_S
    assert not [t for _, t in _file_trains(result.intervals, result.path) if t["metric"] == "write"]
    trains = [t for t in report_json(result.trace)["bursts"] if t["file"] == result.path]
    assert "write" not in [t["metric"] for t in trains], [t["explanation"] for t in trains]
