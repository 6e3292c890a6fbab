"""The regions of ibdata1 read from real system tablespaces (MariaDB 10.11 sandboxes with
three page sizes), and what is assumed when page 0 or page 5 cannot be read."""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.abi import Api, Op, Region
from mysqlio.classify import Classifier
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.ibdata_regions import DOUBLEWRITE_MAGIC, RegionMap, parse, read_regions, separate_doublewrite
from mysqlio.model import aggregate
from mysqlio.probe import FileIdentity, OpCount
from mysqlio.resolve import FileResolver
from mysqlio.trace import TraceMeta

MiB = 1 << 20


@pytest.fixture(scope="module", params=("16k", "4k", "64k"))
def ibdata1(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """(page size, a copy of a running server's ibdata1: its header pages are on disk
    from the bootstrap on)."""
    options = MariaDBOptions(log_bin=False, performance_schema=False, extra={"innodb_page_size": request.param})
    copy = tmp_path_factory.mktemp(f"ibdata1_{request.param}") / "ibdata1"
    with MariaDB(options) as db:
        page_size = int(db.sql("SELECT @@innodb_page_size")[0][0])
        shutil.copyfile(Path(db.datadir) / "ibdata1", copy)
    yield page_size, copy


def _doublewrite(m: RegionMap) -> list[tuple[int, int]]:
    return [(r.start, r.end) for r in m.ranges if r.region is Region.DOUBLEWRITE]


@pytest.mark.mariadb
def test_real_ibdata1(ibdata1: tuple[int, Path]) -> None:
    page_size, path = ibdata1
    m = read_regions(str(path))
    assert m.assumed == ""
    assert m.page_size == page_size  # from FSP_SPACE_FLAGS (MariaDB's full_crc32 format)
    # the server's own doublewrite header on page 5, read here independently
    raw = path.read_bytes()[5 * page_size + page_size - 200 :][:30]
    magic, block1, block2 = struct.unpack_from(">III", raw, 10)
    assert magic == DOUBLEWRITE_MAGIC
    block = MiB // page_size if page_size <= 16384 else 64  # one extent
    assert block2 == block1 + block
    assert _doublewrite(m) == [(block1 * page_size, (block2 + block) * page_size)]
    # InnoDB creates the buffer in extents 1 and 2: 1 MiB .. 3 MiB up to 16 KiB pages
    assert block1 == block
    if page_size <= 16384:
        assert _doublewrite(m) == [(1 * MiB, 3 * MiB)]
    assert m.region_at(3 * page_size) is Region.CHANGE_BUFFER
    assert m.region_at(5 * page_size) is Region.TRX_SYS
    assert m.region_at(7 * page_size) is Region.DICTIONARY
    assert m.region_at(0) is Region.SYSTEM
    assert m.region_at((block2 + block) * page_size) is Region.SYSTEM
    assert m.region_at(-1) is Region.NONE


@pytest.mark.mariadb
def test_zeroed_page5_assumes_the_documented_position(ibdata1: tuple[int, Path], tmp_path: Path) -> None:
    page_size, path = ibdata1
    data = bytearray(path.read_bytes()[: 8 * page_size])
    data[5 * page_size : 6 * page_size] = bytes(page_size)
    broken = tmp_path / "ibdata1"
    broken.write_bytes(data)
    m = read_regions(str(broken))
    assert "doublewrite position assumed" in m.assumed
    assert m.page_size == page_size  # page 0 still says it
    assert _doublewrite(m) == _doublewrite(read_regions(str(path)))  # the documented place is where it is


def test_mysql_8_0_20_keeps_no_doublewrite_in_ibdata1(tmp_path: Path) -> None:
    """MySQL 8.0.20+ writes its doublewrite buffer to #ib_*.dblwr files: an ibdata1 without
    the magic then has no doublewrite region, and nothing is said to be assumed."""
    assert separate_doublewrite("8.0.20") and separate_doublewrite("8.4.3") and separate_doublewrite("9.1.0")
    assert not separate_doublewrite("8.0.19") and not separate_doublewrite("5.7.44")
    assert not separate_doublewrite("10.11.19-MariaDB") and not separate_doublewrite(None)
    page0 = bytearray(64)
    page0[24:26] = (8).to_bytes(2, "big")
    page0[54:58] = (0x15).to_bytes(4, "big")
    m = parse(bytes(page0), bytes(200), assume_doublewrite=False)
    assert m.assumed == "" and _doublewrite(m) == [] and m.region_at(1 * MiB) is Region.SYSTEM
    assert _doublewrite(parse(bytes(page0), bytes(200))) == [(1 * MiB, 3 * MiB)]


def test_unreadable_file_assumes_everything(tmp_path: Path) -> None:
    m = read_regions(str(tmp_path / "missing"))
    assert "page size 16384 assumed" in m.assumed and "doublewrite position assumed" in m.assumed
    assert _doublewrite(m) == [(1 * MiB, 3 * MiB)]
    short = tmp_path / "short"
    short.write_bytes(b"\0" * 100)
    assert read_regions(str(short), page_size_hint=4096).page_size == 4096


@pytest.mark.mariadb
def test_trace_metadata_round_trip(ibdata1: tuple[int, Path]) -> None:
    _, path = ibdata1
    m = read_regions(str(path))
    stored = json.loads(json.dumps({"dev": 2049, "ino": 12, **m.to_json()}))
    meta = TraceMeta.from_json(
        {
            "host": "h",
            "kernel": "k",
            "pid": 1,
            "server_exe": None,
            "server_version": None,
            "datadir": None,
            "start_wall": 0.0,
            "start_mono_ns": 0,
            "command": "",
            "regions": [stored, {"dev": 1, "ino": 2, "ranges": [[0, 1, "bogus"]]}],
        }
    )
    assert meta.region_maps() == {(2049, 12): m}  # a damaged entry is left out, the file stays whole
    old = TraceMeta.from_json({k: v for k, v in vars(meta).items() if k != "regions"})
    assert old.region_maps() == {}


def test_rows_by_region_and_folded(tmp_path: Path) -> None:
    """top's rows: one per region of ibdata1 (its fsyncs on the whole file's row), or one
    row with --fold-regions; the counters add up either way."""
    path = tmp_path / "ibdata1"
    path.write_bytes(b"\0")
    with path.open("rb"):  # open here: the resolver names it from /proc/self/fd
        st = path.stat()
        file = FileIdentity(st.st_dev, st.st_ino)
        rows = [
            OpCount(file, 1, Op.WRITE, Api.LIBAIO, 2 << 20, 2, 0, region=Region.DOUBLEWRITE),
            OpCount(file, 1, Op.WRITE, Api.LIBAIO, 16384, 1, 0, region=Region.SYSTEM),
            OpCount(file, 2, Op.WRITE, Api.SYSCALL, 32768, 2, 0, region=Region.TRX_SYS),
            OpCount(file, 1, Op.FSYNC, Api.SYSCALL, 0, 3, 0),
        ]
        resolver = FileResolver(os.getpid(), lambda _: None)
        split = aggregate(rows, resolver, Classifier(), str)
        folded = aggregate(rows, resolver, Classifier(), str, fold_regions=True)
    assert [(f.label[len(str(tmp_path)) :], f.write_bytes, f.write_ops, f.fsync_ops) for f in split] == [
        ("/ibdata1 · doublewrite", 2 << 20, 2, 0),
        ("/ibdata1 · transaction system", 32768, 2, 0),
        ("/ibdata1 · system", 16384, 1, 0),
        ("/ibdata1", 0, 0, 3),
    ]
    assert all(f.kind == "system" for f in split)
    assert len({f.key for f in split}) == 4
    [whole] = folded
    assert (whole.region, whole.write_bytes, whole.write_ops, whole.fsync_ops) == ("", (2 << 20) + 49152, 5, 3)
