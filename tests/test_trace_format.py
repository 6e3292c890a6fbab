"""The trace file format: columns, dictionary deltas, metadata, crash safety, bad files."""

from __future__ import annotations

import itertools
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from mysqlio.devices import DeviceActivity
from mysqlio.errors import UserError
from mysqlio.events import API_NAMES, BY_NAMES, EVENT_DTYPE, OP_NAMES
from mysqlio.filters import Filters
from mysqlio.report.build import build_report
from mysqlio.report.to_json import report_json
from mysqlio.trace import COLUMNS, FileInfo, TraceMeta, TraceReader, TraceWriter

KDEV = (8 << 20) | 1
KDEV2 = (259 << 20) | 5
START = 7_000_000_000_000


def meta(**kw: object) -> TraceMeta:
    base = {
        "host": "h",
        "kernel": "k",
        "pid": 42,
        "server_exe": "/usr/sbin/mysqld",
        "server_version": "8.0.36",
        "datadir": "/var/lib/mysql",
        "start_wall": 1_700_000_000.25,
        "start_mono_ns": START,
        "command": "mysqlio record -o x",
    }
    base.update(kw)
    return TraceMeta(**base)  # type: ignore[arg-type]


def events(n: int, seed: int, t0_s: float = 0.0, inos: tuple[int, ...] = (1, 2, 3)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = np.zeros(n, EVENT_DTYPE)
    e["ts_ns"] = START + int(t0_s * 1e9) + np.sort(rng.integers(0, 500_000_000, n))
    e["latency_ns"] = rng.integers(0, 10**8, n)
    e["ino"] = rng.choice(np.array(inos, np.uint64), n)
    e["dev"] = KDEV
    e["offset"] = rng.integers(-1, 1 << 40, n)
    e["result"] = rng.integers(-30, 1 << 20, n)
    e["tid"] = rng.integers(100, 104, n)
    e["op"] = rng.integers(0, len(OP_NAMES), n)
    e["api"] = rng.integers(0, len(API_NAMES), n)
    return e


def file_map(inos: tuple[int, ...] = (1, 2, 3), dev: int = KDEV) -> dict[tuple[int, int], FileInfo]:
    return {
        (dev, i): FileInfo(f"/var/lib/mysql/db/t{i}.ibd", "table", f"db.t{i}" if i % 2 else None, i == 3) for i in inos
    }


THREADS = {100: "ib_pg_flush_co", 101: "one_connection", 102: "ib_log_writer", 103: "mysqld"}


def read_all(path: Path) -> tuple[TraceReader, pa.Table | None]:
    reader = TraceReader(str(path))
    batches = list(reader.batches())
    return reader, (pa.Table.from_batches(batches) if batches else None)


def test_columns_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    e1, e2 = events(1000, 1), events(500, 2, t0_s=0.5, inos=(3, 4))
    for e, seed in ((e1, 1), (e2, 2)):  # a writeback's cause, "none" for the others
        wb = e["op"] == OP_NAMES.index("writeback")
        e["by"][wb] = np.random.default_rng(seed).integers(1, len(BY_NAMES), int(wb.sum()))
        # the thread's connection (a socket inode; 0 for none)
        e["conn"] = np.random.default_rng(seed).choice(np.array([0, 4_000_000_001, 17], np.uint32), len(e))
    files = file_map((1, 2, 3, 4))
    with TraceWriter(str(path), meta()) as w:
        w.write(e1, files, THREADS, 0)
        w.write(e2, files, THREADS, 7)
    reader, table = read_all(path)
    assert table is not None and table.num_rows == 1500
    assert table.schema.remove_metadata() == COLUMNS
    e = np.concatenate([e1, e2])
    col = {name: table.column(name).to_pylist() for name in table.column_names}
    assert col["ts_ns"] == e["ts_ns"].tolist()
    assert np.allclose(col["t"], (e["ts_ns"].astype(np.int64) - START) / 1e9, rtol=0, atol=1e-9)
    assert col["tid"] == e["tid"].tolist()
    assert col["thread"] == [THREADS[t] for t in e["tid"].tolist()]
    assert col["op"] == [OP_NAMES[o] for o in e["op"].tolist()]
    assert col["api"] == [API_NAMES[a] for a in e["api"].tolist()]
    assert col["path"] == [files[(KDEV, i)].path for i in e["ino"].tolist()]
    assert col["kind"] == ["table"] * 1500
    assert col["table"] == [files[(KDEV, i)].table for i in e["ino"].tolist()]
    assert col["deleted"] == [i == 3 for i in e["ino"].tolist()]
    assert set(col["dev"]) == {os.makedev(8, 1)}
    assert col["ino"] == e["ino"].tolist()
    assert col["offset"] == e["offset"].tolist()
    assert col["bytes"] == np.maximum(e["result"], 0).tolist()
    assert col["errno"] == np.where(e["result"] < 0, -e["result"], 0).tolist()
    assert col["latency_ns"] == e["latency_ns"].tolist()
    assert col["by"] == [BY_NAMES[b] for b in e["by"].tolist()]
    assert set(col["by"]) == set(BY_NAMES)
    assert col["conn"] == e["conn"].tolist() and set(col["conn"]) == {0, 4_000_000_001, 17}
    assert reader.complete and not reader.truncated
    assert reader.devices == []  # no device samples written: none read


def test_dictionary_deltas_across_batches(tmp_path: Path) -> None:
    """New paths in a later batch travel as a dictionary delta; indices stay stable."""
    path = tmp_path / "t.trace"
    with TraceWriter(str(path), meta()) as w:
        for b in range(5):
            inos = tuple(range(1, 3 + b))
            w.write(events(100, b, t0_s=b / 2, inos=inos), file_map(inos), THREADS, 0)
    with pa.OSFile(str(path)) as f:
        reader = ipc.open_stream(f)
        dicts = []
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            if batch.num_rows:
                dicts.append(batch.column("path").dictionary.to_pylist())
        stats = reader.stats
    # the empty header batch has empty dictionaries; pyarrow sends the first non-empty one
    # of each column (thread, path, kind, table) as a replacement, every later one as a delta
    assert stats.num_replaced_dictionaries == 4
    assert stats.num_dictionary_deltas >= 4
    for earlier, later in itertools.pairwise(dicts):
        assert later[: len(earlier)] == earlier  # append-only
    assert len(dicts[4]) == 6


def test_metadata_and_lost_and_end(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    m = meta()
    w = TraceWriter(str(path), m)
    w.write(events(10, 1), file_map(), THREADS, 3)
    w.write(events(0, 2), file_map(), THREADS, 5)
    assert w.events_written == 10
    assert w.bytes_written == path.stat().st_size  # flushed per batch
    w.close(9, end_wall=1_700_000_060.5, lost_by={"skipped_runs": 2, "ringbuf_full": 7})
    schema_md = ipc.open_stream(pa.OSFile(str(path))).schema.metadata
    assert schema_md[b"mysqlio"] == b"trace"
    assert schema_md[b"mysqlio.format_version"] == b"1"
    assert json.loads(schema_md[b"mysqlio.meta"])["start_mono_ns"] == START
    reader = TraceReader(str(path))
    assert reader.meta == m
    assert reader.lost_total == 0 and not reader.complete
    assert sum(b.num_rows for b in reader.batches()) == 10
    assert reader.lost_total == 9 and reader.complete and not reader.truncated
    assert reader.lost_by == {"ringbuf_full": 7, "skipped_runs": 2}
    assert reader.end_wall == 1_700_000_060.5


@pytest.mark.parametrize("raw", [b"[1]", b"{", b'{"ringbuf_full": -1}', b'{"ringbuf_full": "3"}', b'{"a": true}'])
def test_damaged_lost_by_ends_the_trace_as_truncated(tmp_path: Path, raw: bytes) -> None:
    """What was lost is unknown from a damaged count on: as a damaged lost_total."""
    path = tmp_path / "t.trace"
    with TraceWriter(str(path), meta()) as w:
        w.write(events(4, 1), file_map(), THREADS, 1, lost_by={"ringbuf_full": 1})
        w._append(w._batch(events(3, 2), file_map(), THREADS), {"lost_total": "2", "lost_by": raw})  # type: ignore[arg-type]
    reader = TraceReader(str(path))
    assert sum(b.num_rows for b in reader.batches()) == 4
    assert reader.truncated and reader.lost_by == {"ringbuf_full": 1}


def test_mode_0600_even_when_file_existed(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    path.write_text("old")
    path.chmod(0o644)
    TraceWriter(str(path), meta()).close(0)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    TraceReader(str(path))  # the old content is gone


def test_unwritable_path_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^cannot write trace .*/nodir/t.trace: No such file or directory$"):
        TraceWriter(str(tmp_path / "nodir" / "t.trace"), meta())
    with pytest.raises(UserError, match="Is a directory"):
        TraceWriter(str(tmp_path), meta())


def test_unknown_files_threads_and_odd_names(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    e = events(50, 3, inos=(1, 9))
    e["dev"][: len(e) // 2] = KDEV2  # the same inode number on two devices: two files
    odd = "/var/lib/mysql/bad\udcffname.ibd"  # an undecodable byte, surrogate-escaped
    files = {(KDEV, 1): FileInfo(odd, "table", None, False), (KDEV2, 1): FileInfo("/data/other", "other", None, False)}
    with TraceWriter(str(path), meta()) as w:
        w.write(e, files, {}, 0)
    _, table = read_all(path)
    assert table is not None
    paths = set(table.column("path").to_pylist())
    assert "/var/lib/mysql/bad\\xffname.ibd" in paths
    assert "/data/other" in paths
    assert any(p.startswith("<unknown 8:1 inode 9>") for p in paths)
    assert set(table.column("thread").to_pylist()) == {"?"}
    devs = {(d, i) for d, i in zip(table.column("dev").to_pylist(), table.column("ino").to_pylist(), strict=True)}
    assert (os.makedev(259, 5), 1) in devs and (os.makedev(8, 1), 1) in devs
    # each event keeps its own file, row by row
    named = {(KDEV, 1): "/var/lib/mysql/bad\\xffname.ibd", (KDEV2, 1): "/data/other"}
    for d, i, p in zip(e["dev"].tolist(), e["ino"].tolist(), table.column("path").to_pylist(), strict=True):
        assert (
            p == named[(d, i)]
            if (d, i) in named
            else p.startswith(f"<unknown {'8:1' if d == KDEV else '259:5'} inode {i}>")
        )


def _good_trace(tmp_path: Path, nbatches: int = 3) -> tuple[Path, list[int]]:
    path = tmp_path / "good.trace"
    sizes = []
    w = TraceWriter(str(path), meta())
    for b in range(nbatches):
        w.write(events(40, b, t0_s=b / 2), file_map(), THREADS, b)
        sizes.append(w.bytes_written)
    w.close(nbatches)
    return path, sizes


def test_truncated_at_every_offset_of_the_last_batch(tmp_path: Path) -> None:
    path, sizes = _good_trace(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut.trace"
    # every offset near the ends of the last batch and of the end marker, a sample in between
    edges = [sizes[1], sizes[2], len(data)]
    offsets = {o for e in edges for o in range(e - 48, e + 48)} | set(range(sizes[1], len(data), 11))
    for end in sorted(o for o in offsets if sizes[1] <= o <= len(data)):
        cut.write_bytes(data[:end])
        reader = TraceReader(str(cut))
        rows = sum(b.num_rows for b in reader.batches())
        if end < sizes[2]:
            assert rows == 80 and (reader.truncated or end == sizes[1]) and not reader.complete, end
        else:
            assert rows == 120, end
        assert reader.complete == (end >= len(data) - 8), end  # the 8-byte end-of-stream marker may be cut


def test_truncated_inside_the_header_is_a_user_error(tmp_path: Path) -> None:
    path, sizes = _good_trace(tmp_path, 1)
    data = path.read_bytes()
    cut = tmp_path / "cut.trace"
    for end in list(range(1, 64)) + list(range(64, sizes[0], 97)):
        cut.write_bytes(data[:end])
        try:
            reader = TraceReader(str(cut))
        except UserError as exc:
            assert "truncated or corrupt" in str(exc) or "not a mysqlio trace" in str(exc)
            continue
        list(reader.batches())  # a cut after the schema: readable, zero or more batches


def test_kill_9_mid_writing_leaves_a_readable_trace(tmp_path: Path) -> None:
    path = tmp_path / "killed.trace"
    script = textwrap.dedent(
        f"""
        from test_trace_format import events, file_map, meta, THREADS
        from mysqlio.trace import TraceWriter
        w = TraceWriter({str(path)!r}, meta())
        b = 0
        while True:
            w.write(events(20000, b, t0_s=b / 2), file_map(), THREADS, b)
            b += 1
            print(b, flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}  # the child imports this module
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    for _ in range(3):
        assert child.stdout.readline(), "writer died"
    time.sleep(0.013)  # land somewhere inside a later batch
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader = TraceReader(str(path))
    rows = [b.num_rows for b in reader.batches()]
    assert len(rows) >= 3 and set(rows) == {20000}
    assert reader.truncated or not reader.complete
    assert not reader.complete
    assert reader.lost_total == len(rows) - 1


def test_foreign_and_bad_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    text = tmp_path / "text"
    text.write_text("hello, world\n" * 20)
    foreign = tmp_path / "foreign.arrows"
    table = pa.table({"x": [1, 2, 3]})
    with ipc.new_stream(str(foreign), table.schema) as w:
        w.write_table(table)
    arrow_file = tmp_path / "foreign.arrow"
    with ipc.new_file(str(arrow_file), table.schema) as w:
        w.write_table(table)
    newer = tmp_path / "newer.trace"
    schema = COLUMNS.with_metadata({"mysqlio": "trace", "mysqlio.format_version": "99", "mysqlio.meta": "{}"})
    with ipc.new_stream(str(newer), schema):
        pass
    cases = {
        tmp_path / "missing": "No such file or directory",
        tmp_path: "Is a directory",
        empty: "empty file",
        text: "not a mysqlio trace",
        foreign: "not a mysqlio trace (no mysqlio metadata)",
        arrow_file: "an Arrow IPC file, not a mysqlio trace",
        newer: "format 99 is newer",
    }
    for path, message in cases.items():
        with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
            TraceReader(str(path))


def test_writer_rejects_wrong_dtype(tmp_path: Path) -> None:
    with TraceWriter(str(tmp_path / "t.trace"), meta()) as w, pytest.raises(TypeError):
        w.write(np.zeros(3, np.int64), {}, {}, 0)


def test_killed_before_the_first_batch_is_an_empty_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    w = TraceWriter(str(path), meta())
    assert w.bytes_written == path.stat().st_size > 0  # the header is on disk at once
    reader = TraceReader(str(path))
    assert list(reader.batches()) == []
    assert not reader.complete and not reader.truncated


# ----------------------------------------------------------------- block-device samples


def device_sample(t: float, write_bytes: int, name: str = "sda", dev: tuple[int, int] = (8, 0)) -> dict:
    """A batch's sample as the recorder makes it (record._Devices)."""
    d = DeviceActivity(dev=os.makedev(*dev), name=name, write_bytes=write_bytes, write_requests=write_bytes // 4096)
    d.write_by = {"server_files": write_bytes // 2, "filesystem": write_bytes - write_bytes // 2}
    d.read_bytes, d.read_requests, d.read_by = 8192, 2, {"server_direct": 8192}
    return {"t": t, "interval_s": 0.5, "devices": [d.to_json()]}


def checked(sample: dict) -> dict:
    """A sample as the reader gives it back: its devices' counters, not what derives from them."""
    devices = [{k: v for k, v in d.items() if k != "write_amplification"} for d in sample["devices"]]
    return {**sample, "devices": devices}


def test_device_samples_round_trip(tmp_path: Path) -> None:
    """Each batch's device sample is read back as written; a batch may carry one without
    events; the report sums them per device, over its time range."""
    path = tmp_path / "t.trace"
    samples = [device_sample(0.5, 1 << 20), device_sample(1.0, 3 << 20), device_sample(1.5, 4096, "vdb", (252, 16))]
    with TraceWriter(str(path), meta()) as w:
        w.write(events(100, 1), file_map(), THREADS, 0, devices=samples[0])
        w.write(events(0, 2), file_map(), THREADS, 0, devices=samples[1])  # devices only
        w.write(events(100, 3, t0_s=1.0), file_map(), THREADS, 0)  # no sample: nothing read
        w.write(events(10, 4, t0_s=1.0), file_map(), THREADS, 0, devices=samples[2])
    reader = TraceReader(str(path))
    assert reader.devices == []  # read with the batches
    assert sum(b.num_rows for b in reader.batches()) == 210
    assert reader.devices == [checked(x) for x in samples]
    obj = report_json(build_report(TraceReader(str(path))))
    sda, vdb = obj["devices"]
    assert (sda["name"], sda["dev"], vdb["name"], vdb["dev"]) == ("sda", "8:0", "vdb", "252:16")
    assert sda["write_bytes"] == 4 << 20 and sda["write_requests"] == 1024 and sda["read_bytes"] == 16384
    assert sda["write_by"] == {"server_files": 2 << 20, "server_direct": 0, "filesystem": 2 << 20, "other": 0}
    assert sda["write_amplification"] == 2.0 and obj["device_samples"] == 3
    # --from 0.6: the first sample's interval (0 to 0.5 s) is left out
    later = build_report(TraceReader(str(path)), filters=Filters(t_from=0.6))
    assert [(d.name, d.write_bytes) for d in later.devices] == [("sda", 3 << 20), ("vdb", 4096)]


DAMAGED_SAMPLES = [
    b"not json",
    b"\xff\xfe",
    b"[]",
    b"[" * 100_000,
    b'{"t": 1.0, "interval_s": 0.5}',
    b'{"t": -1.0, "interval_s": 0.5, "devices": []}',
    b'{"t": NaN, "interval_s": 0.5, "devices": []}',
    b'{"t": 1.0, "interval_s": true, "devices": []}',
    b'{"t": "1", "interval_s": 0.5, "devices": []}',
    b'{"t": 1.0, "interval_s": 0.5, "devices": {}}',
]


def _damaged_devices() -> list[dict]:
    good = device_sample(2.0, 4096)["devices"][0]
    damaged = []
    for key, value in [
        ("write_bytes", -1),
        ("write_bytes", True),
        ("write_bytes", 1.5),
        ("write_bytes", 1 << 70),
        ("read_requests", None),
        ("dev", "8"),
        ("dev", "8:x"),
        ("dev", "9" * 5000 + ":0"),
        ("dev", "\u0661:0"),  # a digit, but not an ASCII one
        ("dev", 8),
        ("name", ""),
        ("name", None),
        ("write_by", []),
        ("write_by", {"server_files": -5}),
        ("read_by", {"filesystem": "1"}),
    ]:
        damaged.append({**good, key: value})
    damaged += [[], "sda", None]
    return damaged


def test_damaged_device_samples_are_dropped_never_raised(tmp_path: Path) -> None:
    """A sample that is not one is dropped, a damaged device of a good sample too: the
    rest of the trace, and of the sample, still reads and reports."""
    path = tmp_path / "t.trace"
    good = device_sample(2.0, 4096)
    with TraceWriter(str(path), meta()) as w:
        w.write(events(10, 1), file_map(), THREADS, 0, devices=device_sample(0.5, 1 << 20))
        for raw in DAMAGED_SAMPLES:
            w._append(w._batch(np.zeros(0, EVENT_DTYPE), {}, {}), {"lost_total": "0", "devices": raw})  # type: ignore[arg-type]
        w.write(
            events(0, 2), file_map(), THREADS, 0, devices={**good, "devices": [*_damaged_devices(), *good["devices"]]}
        )
        w.write(events(10, 3), file_map(), THREADS, 0)
    reader = TraceReader(str(path))
    assert sum(b.num_rows for b in reader.batches()) == 20 and reader.complete
    assert [len(s["devices"]) for s in reader.devices] == [1, 1]  # the good device of the damaged sample kept
    assert reader.devices[1] == checked(good)
    (sda,) = report_json(build_report(TraceReader(str(path))))["devices"]
    assert sda["write_bytes"] == (1 << 20) + 4096


def test_device_samples_in_the_example_trace() -> None:
    """The committed example carries a device sample per batch (the fuzz test mutates it)."""
    reader = TraceReader(str(Path(__file__).parent / "fixtures" / "example.trace"))
    list(reader.batches())
    assert len(reader.devices) == 60 and all(s["interval_s"] == 0.5 for s in reader.devices)
    assert [s["t"] for s in reader.devices] == [0.5 * (b + 1) for b in range(60)]


def test_a_trace_recorded_before_connections_reads_as_none() -> None:
    """The example trace has no `conn` column and no `connections` in its metadata: every
    event's connection reads 0 and report names threads by their samples, as before."""
    from mysqlio.trace_events import Decoder

    reader = TraceReader(str(Path(__file__).parent / "fixtures" / "example.trace"))
    assert reader.schema.get_field_index("conn") < 0 and not reader.meta.connections
    dec = Decoder()
    conns = [dec.decode(batch).conn for batch in reader.batches()]
    assert sum(len(c) for c in conns) == 5944 and not any(c.any() for c in conns)
