"""The stats table's rows (tracer/stats_cells.py): one row per key, whatever held it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mysqlio import abi, bpf_probe, stats_cells
from mysqlio.errors import BpfError


def cell_rows(*rows: tuple[int, ...]) -> np.ndarray:
    """Cells of (ino, dev, tid, op, bytes, ops, errors), all READY."""
    out = np.zeros(len(rows), dtype=stats_cells.CELL)
    for i, (ino, dev, tid, op, nbytes, ops, errors) in enumerate(rows):
        for field, value in zip(
            ("ino", "dev", "tid", "op", "bytes", "ops", "errors"), (ino, dev, tid, op, nbytes, ops, errors), strict=True
        ):
            out[field][i] = value
        out["state"][i] = abi.Cell.READY
    return out


def hash_row(ino: int, dev: int, tid: int, op: int, nbytes: int, ops: int) -> tuple[abi.FileOpKey, abi.FileOpStats]:
    return abi.FileOpKey(ino=ino, dev=dev, tid=tid, op=op), abi.FileOpStats(bytes=nbytes, ops=ops)


def test_rows_of_one_key_are_added_up() -> None:
    """Two cells of one key (two CPUs made the row at once) and its overflow row
    in the hash map are one row; other keys stay apart."""
    write, read = int(abi.Op.WRITE), int(abi.Op.READ)
    rows = cell_rows((7, 1, 100, write, 4096, 1, 0), (7, 1, 100, write, 8192, 2, 1), (7, 1, 101, write, 512, 1, 0))
    more = [hash_row(7, 1, 100, write, 16384, 1), hash_row(7, 1, 100, read, 100, 1)]
    # the same thread's writes for another connection (a socket inode, probes/connection.bpf.h)
    other = cell_rows((7, 1, 100, write, 300, 1, 0))
    other["conn"][0] = 5
    more.append((abi.FileOpKey(ino=7, dev=1, tid=100, op=write, conn=5), abi.FileOpStats(bytes=200, ops=1)))
    got = stats_cells.merged(np.concatenate([rows, other]), more)
    assert got == {
        (7, 1, 100, write, 0, 0, 0, 0): [4096 + 8192 + 16384, 4, 1],
        (7, 1, 101, write, 0, 0, 0, 0): [512, 1, 0],
        (7, 1, 100, read, 0, 0, 0, 0): [100, 1, 0],
        (7, 1, 100, write, 0, 0, 0, 5): [300 + 200, 2, 0],
    }


def test_no_rows() -> None:
    assert stats_cells.merged(stats_cells.CELL_ROWS_NONE, []) == {}


@pytest.mark.parametrize("value", ["0", "3", "32768", "-4", "many"])
def test_cells_in_use_must_be_a_power_of_two_in_the_table(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(bpf_probe.STATS_CELLS_ENV, value)
    with pytest.raises(BpfError, match=f"^{bpf_probe.STATS_CELLS_ENV}=.*: give a power of two from 1 to 16384$"):
        bpf_probe.stats_cells_used()


def test_cells_in_use_default_to_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bpf_probe.STATS_CELLS_ENV, raising=False)
    assert bpf_probe.stats_cells_used() == abi.STATS_CELLS
    monkeypatch.setenv(bpf_probe.STATS_CELLS_ENV, "4")
    assert bpf_probe.stats_cells_used() == 4


@pytest.mark.bpf
def test_each_drain_takes_the_half_written_since_the_last(bpf_ready: None, tmp_path: Path) -> None:
    """The programs write the half the control line names; each drain flips it and
    takes the other: the writes between two drains are in that drain alone, through
    both halves twice (a half taken and zeroed is written again)."""
    fd = os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT, 0o600)
    ino = os.fstat(fd).st_ino
    try:
        with bpf_probe.BpfProbe(os.getpid(), page_cache=False, timed=False) as probe:
            assert probe.features.atomics  # this machine's kernel has the table
            got = []
            for n in (3, 5, 0, 2, 7):
                for i in range(n):
                    os.pwrite(fd, b"x" * 100, i * 100)
                got.append([(r.ops, r.bytes) for r in probe.drain() if r.file.ino == ino])
            assert got == [[(3, 300)], [(5, 500)], [], [(2, 200)], [(7, 700)]]
    finally:
        os.close(fd)


@pytest.mark.bpf
def test_cells_in_use_grow_with_the_rows(bpf_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The programs use few cells at first (few pages for the TLB), and more once an
    interval has more rows: 300 files written by one thread are 300 rows, counted
    exactly when most spill into the overflow hash map (8 probes among 128 cells) and
    after the table has grown to 4 cells a row; it never shrinks."""
    monkeypatch.delenv(bpf_probe.STATS_CELLS_ENV, raising=False)
    fds = [os.open(tmp_path / f"t{i}.ibd", os.O_RDWR | os.O_CREAT, 0o600) for i in range(300)]
    inos = {os.fstat(fd).st_ino: i for i, fd in enumerate(fds)}
    try:
        with bpf_probe.BpfProbe(os.getpid(), page_cache=False, timed=False) as probe:
            assert probe.cells_in_use == stats_cells.CELLS_FIRST
            in_use = []
            for writes in (1, 2, 0, 1):
                for fd in fds:
                    for w in range(writes):
                        os.pwrite(fd, b"x" * 512, w * 512)
                got = {inos[r.file.ino]: (r.ops, r.bytes) for r in probe.drain() if r.file.ino in inos}
                assert got == ({i: (writes, writes * 512) for i in range(300)} if writes else {})
                in_use.append(probe.cells_in_use)
            assert in_use == [2048, 2048, 2048, 2048]
    finally:
        for fd in fds:
            os.close(fd)
