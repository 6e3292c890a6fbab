"""`mysqlio report`, `export` and `plot` on recorded traces: golden outputs on the
committed example traces, exact totals on synthetic ones, and bad input.

UPDATE_GOLDEN=1 rewrites tests/golden/* (after `python tests/fixtures/make_fixtures.py`
when the example traces change)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from mysqlio import latency
from mysqlio.abi import LATENCY_UNKNOWN
from mysqlio.devtools.traced import COUNTERS, DISK_READ_COUNTERS, PAGE_CACHE_COUNTERS, assert_one_line_error
from mysqlio.events import API_NAMES, BY_NAMES, EVENT_DTYPE, OP_NAMES
from mysqlio.filters import Filters
from mysqlio.latency import percentile
from mysqlio.plot import plot_series, plot_trace
from mysqlio.report import build as report_build
from mysqlio.report.build import build_report
from mysqlio.report.model import Report
from mysqlio.report.text import render_per_second, render_report
from mysqlio.report.to_json import report_json, write_report_json
from mysqlio.trace import FileInfo, TraceMeta, TraceReader, TraceWriter

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
MYSQLIO = [sys.executable, "-m", "mysqlio"]
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it)"


def run_cli(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MYSQLIO, *args], capture_output=True, text=True, cwd=cwd, timeout=60, check=False)


def render(r: Report, width: int) -> str:
    """The text report at a fixed width, as `print_report` writes it when piped."""
    console = Console(width=width, color_system=None, record=True, highlight=False, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render_report(r, width))
    return "".join(line.rstrip() + "\n" for line in console.export_text().splitlines())


# ----------------------------------------------------------------- golden files


@pytest.mark.parametrize("width", [100, 160])
def test_golden_text(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)
    text = render(build_report(TraceReader("example.trace")), width)
    check_golden(f"example_{width}.txt", text)
    assert max(len(line) for line in text.splitlines()) <= width


def test_golden_text_cut_trace_by_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)
    text = render(build_report(TraceReader("cut.trace"), "thread"), 80)
    assert "trace cut short" in text
    check_golden("cut_thread_80.txt", text)
    assert max(len(line) for line in text.splitlines()) <= 80


def test_golden_cli_text_and_json() -> None:
    proc = run_cli("report", "example.trace")
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 120  # piped: 120 columns
    check_golden("example_cli.txt", proc.stdout)
    proc = run_cli("report", "example.trace", "--json")
    assert proc.returncode == 0, proc.stderr
    check_golden("example.json", proc.stdout)


def test_golden_cli_per_second_filtered() -> None:
    args = ("report", "example.trace", "--per-second", "--from", "11.5", "--to", "13", "--kind", "system,redo,table")
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    check_golden("example_per_second.txt", proc.stdout)
    proc = run_cli(*args, "--json", "--group", "kind")
    assert proc.returncode == 0, proc.stderr
    check_golden("example_per_second_kind.json", proc.stdout)


def test_golden_cli_cut_json() -> None:
    proc = run_cli("report", "cut.trace", "--json", "--group", "table")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["truncated"] and not obj["complete"]
    check_golden("cut_table.json", proc.stdout)


@pytest.mark.parametrize("group", ["file", "thread"])
def test_per_second_written_one_second_at_a_time(group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--per-second's rows are made as they are written (an hour is a million rows):
    the text in blocks of three rows (after the header) prints as one block, and the JSON streamed is
    json.dumps of the whole object, keys after it included; no second: an empty list."""
    monkeypatch.chdir(FIXTURES)
    r = build_report(TraceReader("example.trace"), group, per_second=True)
    assert r.per_second is not None
    rows = sum(len(rows) for _, rows in r.per_second)
    assert rows > 9

    def text(rows_per_table: int) -> str:
        console = Console(width=120, color_system=None, record=True, highlight=False, file=open(os.devnull, "w"))  # noqa: SIM115
        tables = list(render_per_second(r, 120, rows_per_table))
        for table in tables:
            console.print(table)
        return f"{len(tables)}\n" + console.export_text()

    small, whole = text(3), text(10**9)
    assert int(small.split("\n")[0]) == 1 + -(-rows // 3) and whole.startswith("2\n")
    assert small.split("\n", 1)[1] == whole.split("\n", 1)[1]
    after = {"latency_over_time": {"seconds": [{"t": 1, "x": "\u00b5s\n"}], "pairs": []}}
    for report in (r, build_report(TraceReader("example.trace"), group, Filters(t_from=1e6), per_second=True)):
        out = io.StringIO()
        write_report_json(report, out, after)
        assert out.getvalue() == json.dumps(report_json(report) | after, indent=1) + "\n"
    assert '"per_second": []' in out.getvalue()


def test_example_report_content() -> None:
    obj = report_json(build_report(TraceReader(str(FIXTURES / "example.trace"))))
    files = {f["path"].rsplit("/", 1)[-1]: f for f in obj["files"]}
    assert files["ibdata1"]["write_bytes"] == 3 * 80 * (1 << 20)
    assert files["ibdata1"]["fsync_ops"] == 3
    assert files["ib_logfile0"]["write_ops"] == files["ib_logfile0"]["fdatasync_ops"] == 600
    assert files["sbtest1.ibd"]["apis"] == ["syscall", "libaio"]
    assert files["sbtest2.ibd"]["apis"] == ["io_uring"]
    assert files["error.log"]["errors"] == 1 and files["error.log"]["write_ops"] == 0
    assert files["#sql-temptable-1f2a-3-0"]["deleted"] is True
    assert files["aria_log.00000001"]["sync_file_range_ops"] == 30
    assert files["sbtest1.ibd"]["table"] == "sbtest.sbtest1"
    assert [b["t"] for b in obj["busiest_seconds"][:3]] == [22, 2, 12]
    assert all(b["top_file"]["path"].endswith("ibdata1") for b in obj["busiest_seconds"][:3])
    assert obj["complete"] and not obj["truncated"] and obj["duration_s"] == 30.0
    # the page cache: each file's dirtied and written-back bytes, and why
    MiB = 1 << 20
    assert files["ibdata1"]["dirtied_bytes"] == files["ibdata1"]["writeback_bytes"] == 240 * MiB
    assert files["ibdata1"]["writeback_by"] == {"fsync": 3 * 48 * MiB, "flusher_background": 3 * 32 * MiB}
    assert files["ib_logfile0"]["writeback_by"] == {"fdatasync": 600 * 4096}
    assert files["tc.log"]["msync_ops"] == 30 and files["tc.log"]["sync_ops"] == 30
    assert files["tc.log"]["writeback_by"] == {"msync": 30 * 4096} and files["tc.log"]["apis"] == ["syscall"]
    assert files["slow.log"]["writeback_by"] == {"flusher_periodic": 7 * 4096}
    assert files["#sql-temptable-1f2a-3-0"]["dirtied_bytes"] == 65536
    assert files["#sql-temptable-1f2a-3-0"]["writeback_bytes"] == 0
    assert files["sbtest1.ibd"]["dirtied_bytes"] == files["sbtest1.ibd"]["writeback_bytes"] == 0  # O_DIRECT
    totals = obj["totals"]
    assert sum(totals["writeback_by"].values()) == totals["writeback_bytes"] == 257_204_224
    # the disks: sda wrote the server's pages, its direct I/O and the journal; nvme0n1 others' only
    sda, nvme = obj["devices"]
    assert (sda["name"], sda["dev"], nvme["name"]) == ("sda", "8:0", "nvme0n1")
    assert sda["write_by"]["server_files"] == totals["writeback_bytes"]
    assert sda["write_by"]["server_direct"] == (240 + 120) * 16384
    assert sda["write_bytes"] == sum(sda["write_by"].values()) == 270_598_144
    assert sda["write_amplification"] == round(270_598_144 / (257_204_224 + (240 + 120) * 16384), 3)
    assert nvme["write_by"]["other"] == nvme["write_bytes"] == 3 * MiB and nvme["write_amplification"] is None
    assert obj["device_samples"] == 60


# ----------------------------------------------------------------- exact totals


KDEV = (8 << 20) | 2
KDEV2 = (253 << 20) | 0
START = 123_000_000_000


_BYTES_OPS = [
    OP_NAMES.index(op) for op in ("write", "read", "dirty", "writeback", "disk_read", "readahead", "direct_read")
]
_SYNC_OPS = [OP_NAMES.index(op) for op in ("fsync", "fdatasync", "sync_file_range", "msync")]
# and a direct read's event: its request's bytes again, from the disk, untimed
_PAGE_CACHE_OPS = [OP_NAMES.index(op) for op in ("dirty", "writeback", "disk_read", "readahead", "direct_read")]
_WRITEBACK = OP_NAMES.index("writeback")
_KERNEL_API = API_NAMES.index("kernel")


def synthetic(tmp_path: Path, seed: int = 5, nbatches: int = 12, n: int = 2500) -> tuple[Path, np.ndarray, dict]:
    """A random trace (all ops and apis, errors, two devices sharing inode numbers, files
    appearing late, one unknown file, out-of-order completions; page-cache events of api
    "kernel" without latency, writeback with every cause, some by the kernel's tid 0) and
    its events."""
    rng = np.random.default_rng(seed)
    kinds = ["redo", "binlog", "table", "system", "tmp"]
    files: dict[tuple[int, int], FileInfo] = {}
    for ino in range(1, 41):
        for dev in (KDEV, KDEV2):
            if dev == KDEV2 and ino > 5:
                continue
            kind = kinds[ino % len(kinds)]
            table = f"db.t{ino}" if kind == "table" else None
            files[(dev, ino)] = FileInfo(f"/d{dev >> 20}/f{ino}", kind, table, ino == 40)
    threads = {200 + i: f"thread{i % 3}" for i in range(6)} | {0: "[kernel]"}
    path = tmp_path / "synthetic.trace"
    all_events = []
    w = TraceWriter(str(path), TraceMeta("h", "k", 1, None, None, None, 1e9, START, "test"))
    for b in range(nbatches):
        e = np.zeros(n, EVENT_DTYPE)
        jitter = rng.integers(-300_000_000, 300_000_000, n)  # completions out of order
        e["ts_ns"] = START + b * 500_000_000 + np.clip(rng.integers(0, 500_000_000, n) + jitter, 0, None)
        e["latency_ns"] = rng.lognormal(11, 2, n).astype(np.uint64)
        e["ino"] = rng.integers(1, 10 + 3 * b, n)  # more files appear over time
        e["ino"][0] = 999  # unknown to the recorder
        e["dev"] = np.where(rng.random(n) < 0.2, KDEV2, KDEV)
        e["dev"][e["ino"] > 5] = KDEV
        e["op"] = rng.integers(0, len(OP_NAMES), n)
        page_cache = np.isin(e["op"], _PAGE_CACHE_OPS)
        e["api"] = np.where(page_cache, _KERNEL_API, rng.integers(0, _KERNEL_API, n))
        e["latency_ns"][page_cache] = LATENCY_UNKNOWN
        e["by"] = np.where(e["op"] == _WRITEBACK, rng.integers(1, len(BY_NAMES), n), 0)
        size = rng.integers(1, 1 << 21, n)
        e["result"] = np.where(np.isin(e["op"], _BYTES_OPS), size, 0)
        e["result"][(rng.random(n) < 0.02) & ~page_cache] = -rng.integers(1, 100)
        e["offset"] = rng.integers(-1, 1 << 30, n)
        e["tid"] = rng.integers(200, 206, n)
        e["tid"][(e["op"] == _WRITEBACK) & (rng.random(n) < 0.3)] = 0  # the kernel's flusher
        w.write(e, files, threads, b * 3)
        all_events.append(e)
    w.close(99, end_wall=1e9 + 6, lost_by={"ringbuf_full": 90, "skipped_runs": 9})
    return path, np.concatenate(all_events), {"files": files, "threads": threads}


def brute_force(e: np.ndarray, files: dict, key_of: Any) -> dict[Any, dict[str, int]]:
    """Per-key counters by a plain per-event loop."""
    out: dict[Any, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in e:
        c = out[key_of(row)]
        res = int(row["result"])
        if res < 0:
            c["errors"] += 1
            continue
        op = OP_NAMES[row["op"]]
        if op in ("write", "read"):
            c[f"{op}_bytes"] += res
            c[f"{op}_ops"] += 1
        elif op == "dirty":
            c["dirtied_bytes"] += res
        elif op == "writeback":
            c["writeback_bytes"] += res
            c[f"wb_{BY_NAMES[row['by']]}"] += res
        elif op in ("disk_read", "readahead", "direct_read"):  # all read from the disk
            c["disk_read_bytes"] += res
            c["readahead_bytes"] += res if op == "readahead" else 0
            c["direct_read_bytes"] += res if op == "direct_read" else 0
        else:
            c[f"{op}_ops"] += 1
            c["sync_ops"] += 1
    return out


def page_cache_of(counts: dict[str, int]) -> dict[str, int]:
    """The page-cache counters of a report row (or of brute_force's), causes as wb_<cause>."""
    row = {c: counts.get(c, 0) for c in (*PAGE_CACHE_COUNTERS, *DISK_READ_COUNTERS)}
    row.update({f"wb_{cause}": n for cause, n in counts.get("writeback_by", {}).items()})
    row.update({k: v for k, v in counts.items() if k.startswith("wb_") and v})
    return row


def _path_of(files: dict) -> Any:
    def key(row: np.void) -> str:
        info = files.get((int(row["dev"]), int(row["ino"])))
        return (
            info.path
            if info
            else f"<unknown {int(row['dev']) >> 20}:{int(row['dev']) & 0xFFFFF} inode {int(row['ino'])}>"
        )

    return key


def test_round_trip_totals_are_exact(tmp_path: Path) -> None:
    path, e, ctx = synthetic(tmp_path)
    proc = run_cli("report", str(path), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    res = e["result"]
    ok = res >= 0
    totals = obj["totals"]
    assert totals["write_bytes"] == int(res[ok & (e["op"] == 0)].sum())
    assert totals["read_bytes"] == int(res[ok & (e["op"] == 1)].sum())
    assert totals["write_ops"] == int((ok & (e["op"] == 0)).sum())
    assert totals["read_ops"] == int((ok & (e["op"] == 1)).sum())
    assert totals["sync_ops"] == int((ok & np.isin(e["op"], _SYNC_OPS)).sum())
    assert totals["msync_ops"] == int((ok & (e["op"] == OP_NAMES.index("msync"))).sum()) > 0
    assert totals["dirtied_bytes"] == int(res[e["op"] == OP_NAMES.index("dirty")].sum()) > 0
    assert totals["writeback_bytes"] == int(res[e["op"] == _WRITEBACK].sum()) > 0
    assert set(totals["writeback_by"]) == set(BY_NAMES[1:])
    assert sum(totals["writeback_by"].values()) == totals["writeback_bytes"]
    readahead = int(res[e["op"] == OP_NAMES.index("readahead")].sum())
    assert totals["readahead_bytes"] == readahead > 0
    direct = int(res[e["op"] == OP_NAMES.index("direct_read")].sum())
    assert totals["direct_read_bytes"] == direct > 0
    disk = int(res[e["op"] == OP_NAMES.index("disk_read")].sum()) + readahead + direct
    assert totals["disk_read_bytes"] == disk > readahead + direct
    assert totals["cache_hit_bytes"] == max(0, totals["read_bytes"] - disk)
    assert totals["errors"] == int((~ok).sum())
    assert obj["events"] == obj["events_in_trace"] == len(e)
    assert obj["lost_events"] == 99 and obj["complete"] and obj["duration_s"] == 6.0
    assert obj["lost_by_reason"] == {"ringbuf_full": 90, "skipped_runs": 9}
    text = run_cli("report", str(path), cwd=tmp_path)
    assert "99 events were lost while recording (ringbuf_full 90, skipped_runs 9): totals are too low" in text.stdout
    assert totals["write_latency_ns"]["max"] == int(e["latency_ns"][ok & (e["op"] == 0)].max())

    expected = brute_force(e, ctx["files"], _path_of(ctx["files"]))
    got = {f["path"]: f for f in obj["files"]}
    assert set(got) == set(expected)
    for p, counts in expected.items():
        assert {k: got[p][k] for k in COUNTERS} == {k: counts.get(k, 0) for k in COUNTERS}, p
        assert page_cache_of(got[p]) == page_cache_of(counts), p
    assert {f["kind"] for f in obj["files"]} >= {"redo", "binlog", "table", "system", "tmp", "other"}
    assert got["/d8/f40"]["deleted"] is True
    assert got["/d253/f3"]["dev"] == "253:0"
    kinds = {k["kind"]: k for k in obj["kinds"]}
    assert sum(k["write_bytes"] for k in kinds.values()) == totals["write_bytes"]


def test_groups_filters_and_seconds_are_exact(tmp_path: Path) -> None:
    path, e, ctx = synthetic(tmp_path, seed=9, nbatches=8)
    files = ctx["files"]
    path_of = _path_of(files)
    t = (e["ts_ns"].astype(np.int64) - START) / 1e9

    r = build_report(TraceReader(str(path)), "thread")
    expected = brute_force(e, files, lambda row: int(row["tid"]))
    assert {row.tid: row.stats.write_bytes for row in r.rows} == {k: v["write_bytes"] for k, v in expected.items()}
    assert {row.thread for row in r.rows} == {"thread0", "thread1", "thread2", "[kernel]"}
    kernel = next(row for row in r.rows if row.tid == 0)
    assert kernel.label == "[kernel]" and kernel.stats.write_ops == 0
    assert page_cache_of(kernel.stats.counters_json()) == page_cache_of(expected[0])
    assert kernel.stats.writeback_bytes > 0 and kernel.stats.apis == set()

    r = build_report(TraceReader(str(path)), "table")
    kind_of = {i.path: i.kind for i in files.values()}
    table_of = {i.path: i.table for i in files.values()}
    expected = brute_force(e, files, lambda row: table_of.get(path_of(row)) or kind_of.get(path_of(row), "other"))
    assert {row.label: row.stats.sync_ops for row in r.rows} == {k: v["sync_ops"] for k, v in expected.items()}

    flt = Filters(kinds=frozenset({"redo", "table"}), match=re.compile(r"f[12]"), t_from=0.7, t_to=2.9)
    r = build_report(TraceReader(str(path)), "file", flt, per_second=True)
    keep = (
        np.array(
            [kind_of.get(path_of(row), "other") in flt.kinds and bool(flt.match.search(path_of(row))) for row in e]
        )
        & (t >= 0.7)
        & (t < 2.9)
    )
    expected = brute_force(e[keep], files, path_of)
    assert {row.label: row.stats.write_bytes for row in r.rows} == {k: v["write_bytes"] for k, v in expected.items()}
    assert r.events == int(keep.sum())
    # per second: the rows add up to the totals, and each second holds its own events
    assert r.per_second is not None
    assert sum(row.stats.write_bytes for _, rows in r.per_second for row in rows) == r.total.write_bytes
    for sec, rows in r.per_second:
        in_sec = keep & (np.floor(t) == sec)
        want = brute_force(e[in_sec], files, path_of)
        assert {row.label: row.stats.errors for row in rows} == {k: v.get("errors", 0) for k, v in want.items()}


def test_busiest_seconds_with_settling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settling old seconds early (as on long traces) gives the same busiest seconds."""
    path, e, ctx = synthetic(tmp_path, seed=3, nbatches=20, n=1500)
    monkeypatch.setattr(report_build, "SETTLE_ROWS", 10)
    monkeypatch.setattr(report_build, "COMPACT_ROWS", 10)
    r = build_report(TraceReader(str(path)), per_second=True)
    t = np.floor((e["ts_ns"].astype(np.int64) - START) / 1e9).astype(int)
    w = (e["op"] == 0) & (e["result"] >= 0)
    per_sec = np.bincount(t[w], weights=e["result"][w])
    top5 = list(np.argsort(-per_sec, kind="stable")[:5])
    assert [b.t for b in r.busiest] == top5
    path_of = _path_of(ctx["files"])
    for b in r.busiest:
        sel = w & (t == b.t)
        by_file: dict[str, int] = defaultdict(int)
        for row in e[sel]:
            by_file[path_of(row)] += int(row["result"])
        assert b.top_bytes == max(by_file.values())
        assert by_file[b.top_path] == b.top_bytes
    assert sum(row.stats.read_ops for _, rows in r.per_second or [] for row in rows) == r.total.read_ops


def test_latency_percentiles_within_the_histogram_resolution() -> None:
    rng = np.random.default_rng(0)
    lat = rng.lognormal(12, 2, 50_000).astype(np.uint64)
    hist = np.bincount(latency.bucket_of(lat), minlength=latency.NBUCKETS)
    for q in (50, 99):
        exact = float(np.percentile(lat, q, method="inverted_cdf"))
        assert abs(percentile(hist, q, int(lat.max())) - exact) <= exact / (2 * latency.SUB) + 1
    assert percentile(np.zeros(latency.NBUCKETS, np.int64), 50, 0) is None


# ----------------------------------------------------------------- export and plot


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_reads_back(fmt: str, tmp_path: Path) -> None:
    path, e, _ = synthetic(tmp_path, nbatches=3, n=700)
    out = tmp_path / f"out.{fmt}"
    proc = run_cli("export", str(path), "--format", fmt, "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    if fmt == "parquet":
        table = pq.read_table(out)
        rows = table.to_pylist()
    elif fmt == "csv":
        with out.open(newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(e)
    assert sum(int(r["bytes"]) for r in rows) == int(np.maximum(e["result"], 0).sum())
    known = e["latency_ns"] != LATENCY_UNKNOWN
    assert sum(int(r["latency_ns"]) for r in rows if r["latency_ns"] not in (None, "")) == int(
        e["latency_ns"][known].sum()
    )
    # an unknown latency (page-cache events) is null, not 2^64-1
    assert sum(1 for r in rows if r["latency_ns"] in (None, "")) == int((~known).sum()) > 0
    assert sum(int(r["errno"]) for r in rows) == int(-e["result"][e["result"] < 0].sum())
    assert {r["op"] for r in rows} == set(OP_NAMES) and {r["api"] for r in rows} == set(API_NAMES)
    # the writeback's cause: "none" for every other event
    assert {r["by"] for r in rows} == set(BY_NAMES)
    assert all((r["by"] != "none") == (r["op"] == "writeback") for r in rows)
    by_cause: dict[str, int] = defaultdict(int)
    for r in rows:
        by_cause[r["by"]] += int(r["bytes"]) if r["op"] == "writeback" else 0
    wb = e["op"] == _WRITEBACK
    assert dict(by_cause) == {"none": 0} | {
        name: int(e["result"][wb & (e["by"] == i)].sum()) for i, name in enumerate(BY_NAMES) if i
    }
    assert sum(1 for r in rows if r["table"] not in (None, "")) == sum(1 for r in rows if r["kind"] == "table")


def test_export_format_from_suffix_and_cut_trace(tmp_path: Path) -> None:
    out = tmp_path / "cut.parquet"
    proc = run_cli("export", "cut.trace", "-o", str(out))
    assert proc.returncode == 0
    assert "cut short" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert pq.read_table(out).num_rows == build_report(TraceReader(str(FIXTURES / "cut.trace"))).events


def test_plot_files(tmp_path: Path) -> None:
    reader = TraceReader(str(FIXTURES / "example.trace"))
    series = plot_trace(reader, str(tmp_path / "p.png"), bursts=[(2.0, 3.2, "doublewrite burst")])
    assert series.labels[0] == "system" and int(series.write_bytes.sum()) == 260_566_126
    assert int(series.sync_ops.sum()) == 1293 and len(series.seconds) == 30  # with tc.log's 30 msync
    # written back beside the writes: all the example's writeback, when it happened
    assert int(series.writeback_bytes.sum()) == 257_204_224 and len(series.writeback_bytes) == 30
    assert all(80 << 20 <= series.writeback_bytes[s] < 81 << 20 for s in (2, 12, 22))  # the bursts' pages
    assert all(series.writeback_bytes[s] < 1 << 20 for s in range(30) if s not in (2, 12, 22))
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    by_file = plot_series(TraceReader(str(FIXTURES / "example.trace")), "file", top=2)
    assert by_file.labels == ["ibdata1", "sbtest/sbtest1.ibd", "5 other files"]  # files that wrote
    proc = run_cli("plot", "example.trace", "--by", "file", "-o", str(tmp_path / "p.html"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "p.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</html>" in page
    assert stat.S_IMODE((tmp_path / "p.html").stat().st_mode) == 0o600
    proc = run_cli("plot", "example.trace", "-o", str(tmp_path / "p.svg"), "--kind", "redo")
    assert proc.returncode == 0, proc.stderr
    assert "<svg" in (tmp_path / "p.svg").read_text()


# ----------------------------------------------------------------- bad input


def _bad_files(d: Path) -> dict[str, Path]:
    good = (FIXTURES / "example.trace").read_bytes()
    files = {
        "empty": b"",
        "text": b"SELECT 1;\n" * 50,
        "header_cut": good[:300],
        "corrupt": b"\xff\xff\xff\xff" + bytes(range(256)) * 4,
    }
    out = {}
    for name, data in files.items():
        (d / name).write_bytes(data)
        out[name] = d / name
    foreign = pa.table({"a": [1]})
    with ipc.new_stream(str(d / "foreign"), foreign.schema) as w:
        w.write_table(foreign)
    out["foreign"] = d / "foreign"
    out["missing"] = d / "missing"
    out["directory"] = d
    return out


BAD_TRACES = {
    "missing": "No such file or directory",
    "directory": "Is a directory",
    "empty": "empty file",
    "text": "not a mysqlio trace",
    "header_cut": "truncated or corrupt",
    "corrupt": "truncated or corrupt",
    "foreign": "not a mysqlio trace",
}
# every bad trace through `report`; a few through `export` and `plot`, which share the reader
BAD_TRACE_CASES = [("report", case) for case in BAD_TRACES] + [
    ("export", "missing"),
    ("export", "foreign"),
    ("plot", "header_cut"),
    ("plot", "directory"),
]
BAD_ARGS = [
    (["report", "example.trace", "--from", "5", "--to", "2"], "--from 5 must be before --to 2"),
    (["report", "example.trace", "--from", "-1"], "must be >= 0"),
    (["report", "example.trace", "--to", "abc"], "not a number"),
    (["report", "example.trace", "--kind", "nosuch"], "unknown kind"),
    (["report", "example.trace", "--match", "("], "bad regular expression"),
    (["report", "example.trace", "--group", "disk"], "invalid choice"),
    (["report"], "required"),
    (["export", "example.trace", "-o", "/nonexistent-dir/x.csv"], "cannot write export"),
    (["export", "example.trace", "-o", "out.xyz"], "cannot tell the format"),
    (["export", "example.trace", "--format", "xml", "-o", "x"], "invalid choice"),
    (["plot", "example.trace", "-o", "out.pdf"], "must end in"),
    (["plot", "example.trace", "-o", "/nonexistent-dir/x.png"], "cannot write plot"),
    (["plot", "example.trace", "-o", "x.png", "--match", "nothing-matches"], "nothing to plot"),
]


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """All bad-input commands, run side by side (each is a fresh `python -m mysqlio`)."""
    d = tmp_path_factory.mktemp("bad")
    files = _bad_files(d)
    commands: dict[str, list[str]] = {}
    for command, case in BAD_TRACE_CASES:
        extra = {"report": [], "export": ["-o", str(d / f"{case}.csv")], "plot": ["-o", str(d / f"{case}.png")]}
        commands[f"{command}-{case}"] = [command, str(files[case]), *extra[command]]
    for args, _ in BAD_ARGS:
        commands[" ".join(args)] = args
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(run_cli, *args) for key, args in commands.items()}
        runs = {key: f.result() for key, f in futures.items()}
    runs["outputs"] = sorted(p.name for p in d.iterdir() if p.suffix in (".csv", ".png"))  # type: ignore[assignment]
    return runs


@pytest.mark.parametrize(("command", "case"), BAD_TRACE_CASES)
def test_bad_trace(bad_runs: dict[str, Any], command: str, case: str) -> None:
    assert_one_line_error(bad_runs[f"{command}-{case}"], BAD_TRACES[case])


def test_bad_trace_writes_no_output(bad_runs: dict[str, Any]) -> None:
    assert bad_runs["outputs"] == []


@pytest.mark.parametrize(("args", "message"), BAD_ARGS)
def test_bad_arguments(bad_runs: dict[str, Any], args: list[str], message: str) -> None:
    assert_one_line_error(bad_runs[" ".join(args)], message)
