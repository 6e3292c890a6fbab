"""A real MariaDB under sysbench, traced with real BPF, for each InnoDB I/O backend."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import FileTotals, read_json_line, start_top, stop_top

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

# the I/O API each backend must show for InnoDB data pages
BACKEND_API = {"io_uring": "io_uring", "aio": "libaio", "pwrite": "syscall"}
TABLES = ("sbtest1", "sbtest2")


def _options(backend: str) -> MariaDBOptions:
    # flush dirty pages continuously so data files and the doublewrite
    # buffer in ibdata1 are written within a short run
    return MariaDBOptions(
        innodb_backend=backend,
        extra={"innodb_max_dirty_pages_pct": "0", "innodb_max_dirty_pages_pct_lwm": "0"},
    )


@pytest.fixture(scope="module", params=list(BACKEND_API))
def loaded_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, MariaDB, Sysbench]]:
    backend = request.param
    with MariaDB(_options(backend)) as db:
        assert db.innodb_backend_in_use() == backend
        bench = Sysbench(db, tables=2, table_size=2000, threads=2)
        bench.prepare()
        yield backend, db, bench
        bench.stop()


def trace_during_load(db: MariaDB, bench: Sysbench, seconds: float) -> FileTotals:
    top = start_top(db.pid, interval_s=1.0)
    assert top.stdout is not None
    totals = FileTotals()
    totals.add(read_json_line(top.stdout, 30, "mysqlio top"))
    bench.start(seconds)
    bench.wait(timeout_s=seconds + 60)
    time.sleep(1.0)
    objects, _ = stop_top(top)
    for obj in objects:
        totals.add(obj)
    return totals


def _by_name(totals: FileTotals, datadir: str) -> dict[str, dict[str, int]]:
    return {str(Path(p).relative_to(datadir)): c for p, c in totals.under(datadir).items()}


def test_server_files_written_with_kinds(bpf_ready: None, loaded_server: tuple[str, MariaDB, Sysbench]) -> None:
    _, db, bench = loaded_server
    totals = trace_during_load(db, bench, seconds=5)
    files = _by_name(totals, db.datadir)
    kinds = {str(Path(p).relative_to(db.datadir)): k for p, k in totals.kinds.items() if p.startswith(db.datadir)}

    assert totals.lost_events == 0
    for name in ("ib_logfile0", "ibdata1", "sbtest/sbtest1.ibd", "sbtest/sbtest2.ibd", "mysql-bin.000001"):
        assert files.get(name, {}).get("write_bytes", 0) > 0, f"{name} not written: {sorted(files)}"
    assert kinds["ib_logfile0"] == "redo"
    assert kinds["ibdata1"] == "system"
    assert kinds["sbtest/sbtest1.ibd"] == "table"
    assert kinds["mysql-bin.000001"] == "binlog"
    # sync_binlog=1: the binlog is synced, and so is the redo log
    assert files["mysql-bin.000001"]["sync_ops"] > 0
    assert files["ib_logfile0"]["sync_ops"] > 0


def test_data_pages_go_through_the_backend(bpf_ready: None, loaded_server: tuple[str, MariaDB, Sysbench]) -> None:
    backend, db, bench = loaded_server
    top = start_top(db.pid, interval_s=1.0)
    assert top.stdout is not None
    read_json_line(top.stdout, 30, "mysqlio top")
    bench.start(4)
    bench.wait(timeout_s=64)
    time.sleep(1.0)
    objects, _ = stop_top(top)
    apis: set[str] = set()
    for obj in objects:
        for f in obj["files"]:
            if f["path"].endswith(".ibd") and f["write_bytes"]:
                apis.update(f["apis"])
    assert BACKEND_API[backend] in apis, apis


def test_batch_output_on_live_server(bpf_ready: None, loaded_server: tuple[str, MariaDB, Sysbench]) -> None:
    """The acceptance command: top --batch -i 1 -n 5 under load."""
    _, db, bench = loaded_server
    bench.start(8)
    proc = subprocess.run(
        [sys.executable, "-m", "mysqlio", "top", "-p", str(db.pid), "--batch", "-i", "1", "-n", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    bench.wait(timeout_s=70)
    assert proc.returncode == 0, proc.stderr
    blocks = [b for b in proc.stdout.split("\n\n") if b.strip()]
    assert len(blocks) == 5
    text = proc.stdout
    for name in ("ib_logfile0", "sbtest1.ibd", "mysql-bin.000001"):
        assert name in text
    rows = [line for line in text.splitlines() if line.rstrip().endswith("ib_logfile0")]
    assert any(row.split()[1] == "redo" and row.split()[2] != "0B" for row in rows)


def _status(db: MariaDB, name: str) -> int:
    return int(db.sql(f"SHOW GLOBAL STATUS LIKE '{name}'")[0][1])


# MariaDB opens a tablespace (its first use after a restart) with a check of its first
# page through a buffered fd: Datafile::read_first_page reads UNIV_PAGE_SIZE_MAX (64 KiB),
# in performance_schema, not in Innodb_data_read; then reads page 0 again through its
# O_DIRECT fd (fil_node_t::read_page0), not in Innodb_data_read either
FIRST_PAGE_CHECK_BYTES = 65536
PAGE_BYTES = 16384


def test_cold_reads_are_disk_reads_as_innodb_counts_them(
    bpf_ready: None, loaded_server: tuple[str, MariaDB, Sysbench]
) -> None:
    """Issue 61: InnoDB reads its pages with O_DIRECT (MariaDB >= 10.6), whatever the backend:
    each a disk read of its file. Restarted after a slow shutdown (purge done: no background
    thread opens a table at start-up) without its buffer pool dump (nothing loaded back),
    the server opens and reads its tables cold, then warm. Per file, the bytes and reads
    requested equal performance_schema's over the window; the O_DIRECT reads are disk reads;
    the open's buffered check of the first page is read from the disk by the kernel's
    readahead; the O_DIRECT reads add up to Innodb_data_read and the page 0 of each table
    opened. Last in the module: it restarts the server."""
    backend, db, _ = loaded_server
    assert db.sql("SELECT @@innodb_flush_method")[0][0] == "O_DIRECT"
    db.sql("SET GLOBAL innodb_fast_shutdown=0")
    db.restart(while_down=lambda: Path(db.datadir, "ib_buffer_pool").unlink(missing_ok=True))
    top = start_top(db.pid, interval_s=1.0)
    assert top.stdout is not None
    read_json_line(top.stdout, 30, "mysqlio top")
    read0, pfs0 = _status(db, "Innodb_data_read"), db.file_io_summary()
    for _ in range(2):  # cold, then warm (from the buffer pool: no read at all)
        for table in TABLES:
            db.sql(f"SELECT COUNT(*), SUM(LENGTH(c)) FROM sbtest.{table}")
    time.sleep(1.0)
    read1, pfs1 = _status(db, "Innodb_data_read"), db.file_io_summary()
    objects, _ = stop_top(top)
    assert sum(o["lost_events"] for o in objects) == 0
    totals = FileTotals()
    for obj in objects:
        totals.add(obj)
    files = _by_name(totals, db.datadir)
    for table in TABLES:
        path = os.path.join(db.datadir, "sbtest", f"{table}.ibd")
        pfs = [after - before for before, after in zip(pfs0.get(path, (0, 0, 0, 0)), pfs1[path], strict=True)]
        got = files[f"sbtest/{table}.ibd"]
        figures = {k: got[k] for k in ("read_bytes", "read_ops", "disk_read_bytes", "readahead_bytes")}
        figures.update(direct=got["direct_read_bytes"], pfs_read_bytes=pfs[2], pfs_read_ops=pfs[3])
        assert (got["read_bytes"], got["read_ops"]) == (pfs[2], pfs[3]), (table, figures)
        assert got["read_bytes"] - got["direct_read_bytes"] == FIRST_PAGE_CHECK_BYTES, (table, figures)
        assert got["disk_read_bytes"] == got["direct_read_bytes"] + got["readahead_bytes"], (table, figures)
        assert got["readahead_bytes"] >= FIRST_PAGE_CHECK_BYTES, (table, figures)
    direct = sum(c["direct_read_bytes"] for c in files.values())
    assert direct == read1 - read0 + PAGE_BYTES * len(TABLES), (backend, direct, read1 - read0)
    print(f"{backend}: O_DIRECT reads {direct} B, Innodb_data_read {read1 - read0} B")
