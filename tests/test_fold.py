"""top's columnar fold (mysqlio.fold) and JSON (mysqlio.json_files) give what the per-row
objects give (model.aggregate, FileActivity.to_json + json.dumps): the same files, counters,
threads, order and bytes, on rows of every op, API, cause, region, thread and connection."""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest

from mysqlio import fold, json_files, stats_cells
from mysqlio.abi import Api, By, FileOpKey, FileOpStats, Op, Region
from mysqlio.classify import Classifier
from mysqlio.latency import Histogram
from mysqlio.model import COUNTER_FIELDS, OP_COUNTERS, Counts, aggregate
from mysqlio.probe import FileIdentity, LatencyRow, OpCount, dev_to_kernel
from mysqlio.resolve import FileResolver


@pytest.fixture
def open_files(tmp_path: Path) -> Iterator[list[FileIdentity]]:
    """Files held open by this process (the resolver names them from /proc/self/fd)."""
    names = ["ibdata1", "t1.ibd", "ib_logfile0", "binlog.000001", 'we"ird\nname.ibd']
    with ExitStack() as stack:
        files = []
        for name in names:
            path = tmp_path / name
            path.write_bytes(b"\0")
            stack.enter_context(path.open("rb"))
            st = path.stat()
            files.append(FileIdentity(st.st_dev, st.st_ino))
        yield [*files, FileIdentity(files[0].dev, 1)]  # and one no name holds


def _rows(files: list[FileIdentity], n: int, seed: int) -> list[OpCount]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        big = rng.random() < 0.3
        rows.append(
            OpCount(
                rng.choice(files),
                rng.choice((1, 2, 3)),
                rng.choice(list(OP_COUNTERS)),
                rng.choice(list(Api)),
                rng.choice((0, 4096, 1 << 40)) if big else rng.randrange(0, 10),
                rng.randrange(0, 3),
                rng.randrange(0, 2) * rng.randrange(0, 2),
                rng.choice(list(By)),
                rng.choice(list(Region)),
                rng.choice((0, 0, 7, 1 << 31)),
            )
        )
    return rows


def _table(rows: list[OpCount]) -> np.ndarray:
    table = np.zeros(len(rows), stats_cells.ROW)
    table[:] = [
        (r.file.ino, dev_to_kernel(r.file.dev), r.tid, r.op, r.api, r.by, r.region, r.conn, r.bytes, r.ops, r.errors)
        for r in rows
    ]
    return table


def _merged(rows: list[OpCount]) -> list[OpCount]:
    """The rows of one key added up, as a probe's drain gives them."""
    out: dict[tuple[object, ...], OpCount] = {}
    for r in rows:
        key = (r.file, r.tid, r.op, r.api, r.by, r.region, r.conn)
        was = out.get(key)
        out[key] = (
            r
            if was is None
            else OpCount(*key[:4], was.bytes + r.bytes, was.ops + r.ops, was.errors + r.errors, *key[4:])
        )  # type: ignore[arg-type]
    return list(out.values())


def test_fold_learnt_every_counter_from_counts_add() -> None:
    """The fast paths are on: every counter Counts.add changes is one of COUNTER_FIELDS
    (else fold would leave the rows to aggregate), and file_json spells to_json's bytes."""
    assert fold.EXACT
    assert json_files.FAST


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fold_regions", [False, True])
def test_fold_equals_aggregate(open_files: list[FileIdentity], seed: int, fold_regions: bool) -> None:
    rows = _merged(_rows(open_files, 400, seed))
    hist = Histogram(sum_ns=5000, max_ns=4000)
    hist.counts[20] = 3
    latencies = [
        LatencyRow(open_files[1], Op.WRITE, Api.SYSCALL, hist),
        LatencyRow(FileIdentity(7, 9), Op.FSYNC, Api.SYSCALL, hist),
    ]

    def names(tid: int) -> str:
        return f"thread {tid}"

    want = aggregate(
        rows, FileResolver(os.getpid(), lambda _: None), Classifier(), names, False, latencies, fold_regions
    )
    got = fold.fold(
        _table(rows), FileResolver(os.getpid(), lambda _: None), Classifier(), names, False, latencies, fold_regions
    )
    assert len(want) > len(open_files)  # files split by region, and a file with latencies only
    assert [f.to_json() for f in got] == [f.to_json() for f in want]
    assert [list(f.threads) for f in got] == [list(f.threads) for f in want]  # the order of ties too
    assert [(f.writeback_by, f.apis) for f in got] == [(f.writeback_by, f.apis) for f in want]

    # every attribute, in the dataclasses' order (fold passes the counters by position);
    # latencies are in to_json above (a Histogram's array has no ==)
    def held(f: object) -> list[tuple[str, object]]:
        return [(k, v) for k, v in vars(f).items() if k != "latency"]

    assert [held(f) for f in got] == [held(f) for f in want]
    assert [[held(t) for t in f.threads.values()] for f in got] == [[held(t) for t in f.threads.values()] for f in want]
    # as compact: their dicts share their class's keys (a dict of its own was ~600 bytes more an object)
    assert [sys.getsizeof(vars(f)) for f in got] == [sys.getsizeof(vars(f)) for f in want]
    for f in got:
        assert json_files.file_json(f) == json.dumps(f.to_json(), separators=(",", ":"))
    # a sampler's next intervals: names, kinds and tables kept from the last (fold.Memo)
    memo, resolver = fold.Memo(), FileResolver(os.getpid(), lambda _: None)
    for _ in range(2):
        again = fold.fold(_table(rows), resolver, Classifier(), names, False, latencies, fold_regions, memo=memo)
        assert [f.to_json() for f in again] == [f.to_json() for f in want]
        resolver.new_interval()
    assert memo.names and memo.files


def test_merge_adds_every_counter(open_files: list[FileIdentity]) -> None:
    """Counts.merge (unrolled for the screen's totals) adds what add_counter adds, counter by counter."""
    files = fold.fold(
        _table(_merged(_rows(open_files, 300, 9))), FileResolver(os.getpid(), lambda _: None), Classifier(), str
    )
    total, want = Counts(), Counts()
    for f in files:
        total.merge(f)
        for name in COUNTER_FIELDS:
            want.add_counter(name, f.counter(name))
        want.apis |= f.apis
    assert total == want
    assert total.writeback_by and list(total.writeback_by) == list(want.writeback_by)


def test_fold_of_no_rows(open_files: list[FileIdentity]) -> None:
    """An interval of latencies only (libaio requests counted in the interval before)."""
    hist = Histogram(sum_ns=10, max_ns=10)
    hist.counts[3] = 1
    latencies = [LatencyRow(open_files[0], Op.WRITE, Api.LIBAIO, hist)]
    got = fold.fold(_table([]), FileResolver(os.getpid(), lambda _: None), Classifier(), str, latencies=latencies)
    want = aggregate([], FileResolver(os.getpid(), lambda _: None), Classifier(), str, latencies=latencies)
    assert [f.to_json() for f in got] == [f.to_json() for f in want]
    assert len(got) == 1 and got[0].latency_json()["write"]["count"] == 1
    assert fold.fold(_table([]), FileResolver(os.getpid(), lambda _: None), Classifier(), str) == []


def test_table_adds_up_a_keys_rows_as_merged() -> None:
    """stats_cells.table: a key's cells and overflow rows added up, keys in first-row order."""
    rng = np.random.default_rng(1)
    cells = np.zeros(300, stats_cells.CELL)
    for f in stats_cells.KEY_FIELDS:
        cells[f] = rng.integers(0, 3, len(cells))
    for f in ("bytes", "ops", "errors"):
        cells[f] = rng.integers(0, 1 << 40, len(cells))
    more = [(FileOpKey(ino=1, dev=2, tid=0, op=1), FileOpStats(bytes=5, ops=1, errors=0)) for _ in range(2)]
    table = stats_cells.table(cells, more)
    assert len(table) < len(cells)  # 3^8 keys drawn 300 times: some twice
    got = {tuple(r[:8]): list(r[8:]) for r in table.tolist()}
    assert got == stats_cells.merged(cells, more)
    assert list(got) == list(stats_cells.merged(cells, more))
    assert len(stats_cells.table(stats_cells.CELL_ROWS_NONE, [])) == 0
