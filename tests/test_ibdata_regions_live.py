"""ibdata1's regions on a live MariaDB 10.11, against the server's own doublewrite counters.

The window is quiesced at both edges (the pattern of test_pfs_crosscheck.py: wait_clean(),
then counters that stay still for 1 s; innodb_stats_auto_recalc=OFF so that nothing
writes after wait_clean()):

    quiet S0 -> top attached -> S1 (== S0) -> sysbench oltp_write_only -> quiet S2
    -> > 1 interval -> stop top -> S3 (== S2)

What is exact, and why (MariaDB 10.11 storage/innobase/buf/buf0dblwr.cc):
- Innodb_dblwr_pages_written counts every page copied into the doublewrite buffer, and
  each copy is written (whole pages, uncompressed tables) into its block of ibdata1 before
  the pages go to their tablespaces: the doublewrite region's bytes are exactly
  delta(Innodb_dblwr_pages_written) x innodb_page_size.
- Innodb_dblwr_writes counts batches (flush_buffered_writes); a batch is written as one
  request per block it fills (block1, then block2 when the batch is larger than a block),
  so the region's write requests are >= the batches and at most twice as many.
With innodb_doublewrite=OFF nothing goes to the region.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import read_json_line, report_json, start_record, start_top, stop_top

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

INTERVAL_S = 1.0
LOAD_S = 3
COUNTERS = ("Innodb_dblwr_pages_written", "Innodb_dblwr_writes", "Innodb_data_written")


def _counters(db: MariaDB) -> dict[str, int]:
    return {name: db.status(name) for name in COUNTERS}


def _quiet(db: MariaDB, attempts: int = 5) -> dict[str, int]:
    """wait_clean(), then counters that stay equal for 1 s."""
    for _ in range(attempts):
        db.wait_clean()
        first = _counters(db)
        time.sleep(1.0)
        if _counters(db) == first:
            return first
    raise AssertionError("the server keeps writing after wait_clean()")


def _regions(objects: list[dict[str, Any]], path: str) -> dict[str, dict[str, int]]:
    """Sums of the rows of `path` by region over top's intervals."""
    out: dict[str, dict[str, int]] = {}
    for obj in objects:
        assert obj["lost_events"] == 0
        for f in obj["files"]:
            if f["path"] == path:
                sums = out.setdefault(f["region"], {"write_bytes": 0, "write_ops": 0, "read_bytes": 0})
                for name in sums:
                    sums[name] += f[name]
    return out


def traced_window(db: MariaDB, bench: Sysbench, trace: str) -> tuple[dict[str, int], list[Any], float]:
    """Counter deltas over the quiesced window, top's JSON objects of it, and when it
    started (monotonic s); `record` writes the window (and before) to `trace`.

    record is attached first and the server made to write once: MariaDB's libaio
    completion thread sits in io_getevents() when the probes attach, and the events
    that call returns were submitted before it was seen (record matches a completion
    to its io_getevents entry). The window starts after that write, quiesced."""
    rec = start_record(db.pid, trace)
    db.sql("UPDATE sbtest.sbtest1 SET k = k + 1 WHERE id = 1")
    s0 = _quiet(db)
    window_start = time.monotonic()
    top = start_top(db.pid, interval_s=INTERVAL_S)
    assert top.stdout is not None
    try:
        objects = [read_json_line(top.stdout, 30, "mysqlio top")]
        assert _counters(db) == s0, "writes around the attach: the window is not exact"
        bench.start(LOAD_S)
        bench.wait(timeout_s=LOAD_S + 60)
        s2 = _quiet(db)
        time.sleep(INTERVAL_S * 1.2)
        rest, _ = stop_top(top)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
    finally:
        for proc in (top, rec):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert _counters(db) == s2, "writes after the window: not exact"
    return {k: s2[k] - s0[k] for k in COUNTERS}, objects + rest, window_start


def _report_regions(trace: str, path: str, window_start: float) -> dict[str, dict[str, int]]:
    """report --json's rows of `path` from window_start (monotonic s) on, by region."""
    start_mono_s = report_json(trace)["meta"]["start_mono_ns"] / 1e9
    rep = report_json(trace, "--from", f"{window_start - start_mono_s:.6f}")
    assert rep["lost_events"] == 0
    return {
        r["region"]: {name: r[name] for name in ("write_bytes", "write_ops", "read_bytes")}
        for r in rep["files"]
        if r["path"] == path
    }


@pytest.fixture(params=("aio", "pwrite", "io_uring"))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[MariaDB, Sysbench]]:
    options = MariaDBOptions(innodb_backend=request.param, extra={"innodb_stats_auto_recalc": "OFF"})
    with MariaDB(options) as db:
        assert db.innodb_backend_in_use() == request.param
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        try:
            bench.prepare()
            yield db, bench
        finally:
            bench.stop()


def test_doublewrite_region_is_dblwr_pages_written(
    bpf_ready: None, server: tuple[MariaDB, Sysbench], tmp_path: Path
) -> None:
    db, bench = server
    page_size = int(db.sql("SELECT @@innodb_page_size")[0][0])
    trace = str(tmp_path / "t.trace")
    delta, objects, window_start = traced_window(db, bench, trace)
    regions = _regions(objects, f"{db.datadir}/ibdata1")
    # record + report split the same requests the same way, from their offsets
    recorded = _report_regions(trace, f"{db.datadir}/ibdata1", window_start)
    # (the region "" rows are the file's fsyncs: no bytes)
    assert {r: c for r, c in recorded.items() if any(c.values())} == {
        r: c for r, c in regions.items() if any(c.values())
    }
    dblwr = regions.get("doublewrite", {"write_bytes": 0, "write_ops": 0})
    print(f"\ndelta {delta}\nibdata1 by region {regions}")
    assert delta["Innodb_dblwr_pages_written"] > 0, "the load wrote no page through the doublewrite buffer"
    assert dblwr["write_bytes"] == delta["Innodb_dblwr_pages_written"] * page_size
    assert delta["Innodb_dblwr_writes"] <= dblwr["write_ops"] <= 2 * delta["Innodb_dblwr_writes"]
    assert "" not in regions or regions[""]["write_bytes"] == 0, "ibdata1 writes without a region"


def test_doublewrite_off_leaves_the_region_empty(bpf_ready: None, tmp_path: Path) -> None:
    options = MariaDBOptions(extra={"innodb_stats_auto_recalc": "OFF", "innodb_doublewrite": "OFF"})
    with MariaDB(options) as db:
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        try:
            bench.prepare()
            delta, objects, _ = traced_window(db, bench, str(tmp_path / "t.trace"))
        finally:
            bench.stop()
    regions = _regions(objects, f"{db.datadir}/ibdata1")
    print(f"\ndelta {delta}\nibdata1 by region {regions}")
    assert delta["Innodb_dblwr_pages_written"] == 0
    assert regions.get("doublewrite", {}).get("write_bytes", 0) == 0
    # the rest of ibdata1 (undo, the transaction system header) is still written
    assert sum(r["write_bytes"] for r in regions.values()) > 0
