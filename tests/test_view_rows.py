"""The screen makes ScreenRows only for the rows it can show (issue 60): the first `most`
rows of an interval, and those of another sort order, are exactly the full list's; the
exit table shows the busiest files and sums the rest."""

from __future__ import annotations

import io
import random

from rich.console import Console

from mysqlio.abi import Api, By, Op
from mysqlio.latency import Histogram
from mysqlio.live import render_totals
from mysqlio.model import GROUPS, SERVER_GROUPS, FileActivity, Interval, ThreadActivity
from mysqlio.probe import FileIdentity, OpCount
from mysqlio.units import human_bytes
from mysqlio.view import SORT_KEYS, ScreenState

OPS = (Op.WRITE, Op.READ, Op.FSYNC, Op.FDATASYNC, Op.DIRTY, Op.WRITEBACK)
KINDS = ("table", "redo", "binlog", "system")


def _interval(rng: random.Random, n: int) -> Interval:
    files = []
    for i in rng.sample(range(40), n):
        # redo files of MySQL's #innodb_redo: folded into one row (with fold_redo)
        name = f"#innodb_redo/#ib_redo{i}" if i < 6 else f"db/t{i}.ibd"
        f = FileActivity(file=FileIdentity(2049, 100 + i), path=f"/var/lib/mysql/{name}", kind=KINDS[i % 4])
        for _ in range(rng.randrange(1, 4)):
            tid = rng.choice((7, 8, 9))
            by = rng.choice((By.FSYNC, By.FLUSHER_PERIODIC)) if rng.random() < 0.5 else By.NONE
            row = OpCount(f.file, tid, rng.choice(OPS), Api.SYSCALL, rng.choice((0, 4096, 16384)), 1, 0, by)
            f.add(row)
            f.threads.setdefault((tid, 0), ThreadActivity(tid=tid, name=f"t{tid}")).add(row)
        if rng.random() < 0.3:
            hist = Histogram(sum_ns=9000, max_ns=9000)
            hist.counts[rng.randrange(10, 40)] = 2
            f.latency["sync" if rng.random() < 0.5 else "write"] = hist
        files.append(f)
    return Interval(time=0.0, interval_s=0.5, pid=1, lost_events=0, drops={}, files=files, devices=[])


def test_the_first_rows_made_are_the_full_lists_first_in_every_sort_and_group() -> None:
    rng = random.Random(60)
    intervals = [_interval(rng, rng.randrange(5, 30)) for _ in range(8)]  # some files go quiet
    for group in (g for g in GROUPS if g not in SERVER_GROUPS):
        for sort in SORT_KEYS:
            full, cut = ScreenState(group, sort), ScreenState(group, sort)
            for interval in intervals:
                rows = full.update(interval)
                assert cut.update(interval, most=7) == rows[:7]
                assert cut.rows() == rows
            for other in SORT_KEYS:  # the key s: the rows shown, sorted another way (live.py)
                full.sort = cut.sort = other
                rows = full.sorted(rows)
                assert cut.rows(most=5) == rows[:5]


def test_the_exit_table_shows_the_busiest_files_and_sums_the_rest() -> None:
    """top's session totals at exit: the `most` busiest files, each as the full table had
    it, and one row summing the others (at 19,000 files a row each took 12-17 s to print)."""
    rng = random.Random(61)
    state = ScreenState()
    for _ in range(4):
        state.update(_interval(rng, 30))
    console = Console(width=200, color_system=None, record=True, file=io.StringIO())
    console.print(render_totals(state, "/var/lib/mysql", most=len(state.totals)))
    full = console.export_text().splitlines()
    console.print(render_totals(state, "/var/lib/mysql", most=10))
    cut = console.export_text().splitlines()
    rows = [line.split() for line in full if "/t" in line or "#ib_redo" in line]  # (widths differ)
    assert len(rows) == len(state.totals) > 10
    assert [line.split() for line in cut if "/t" in line or "#ib_redo" in line] == rows[:10]
    (rest,) = [line for line in cut if f"… {len(state.totals) - 10:,} more files" in line]
    ordered = sorted(state.totals.values(), key=lambda t: (-t[2].write_bytes, -t[2].writeback_bytes, -t[2].read_bytes))
    assert rest.split()[0] == human_bytes(sum(c.write_bytes for _, _, c in ordered[10:]))
