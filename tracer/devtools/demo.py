"""`mysqlio demo`: a throwaway MariaDB under a write load, traced by `top`.

Everything lives in one temp dir (unix socket only, no TCP) and is removed on
exit, Ctrl-C included: no stray mariadbd, no leftover datadir.

The load is sysbench oltp_write_only at a steady rate, plus a periodic burst:
every BURST_PERIOD_S s a MariaDB event rewrites a MyISAM table
(`mysqlio.devtools.workload.PeriodicBulkWriter`), about 4 MiB into its .MYD file, so the
periodic banner of `top` shows it after three bursts. `top` runs as with `--mysql` (over
the sandbox's socket): the banner names the train after the event itself
("event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load)").
"""

from __future__ import annotations

import os
import sys

from ..mysql_conn import ConnectionOptions, Connector
from ..server_status import StatusSampler
from ..top import TopOptions, run_top
from .mariadb import MariaDB, MariaDBOptions
from .sysbench import Sysbench
from .workload import PeriodicBulkWriter

LOAD_SECONDS = 24 * 3600  # until the demo ends
LOAD_RATE = 200  # transactions per second: visible, and light on 2 cores
BURST_PERIOD_S = 5
BURST_SCHEMA, BURST_TABLE = "mysqlio_demo", "bulk_load"
FIRST_BURST_DELAY_S = 2  # top attaches before the first run


def run_demo(interval_s: float, count: int, output: str) -> int:
    print("mysqlio demo: starting a throwaway MariaDB (temp dir, unix socket only)...", file=sys.stderr)
    # flush dirty pages continuously, so data files and the doublewrite
    # buffer (inside ibdata1 on MariaDB) show up beside redo and binlog
    options = MariaDBOptions(extra={"innodb_max_dirty_pages_pct": "0", "innodb_max_dirty_pages_pct_lwm": "0"})
    with MariaDB(options) as db:
        bench = Sysbench(db, tables=4, table_size=10000, threads=2)
        writer = PeriodicBulkWriter(db, period_s=BURST_PERIOD_S, schema=BURST_SCHEMA, table=BURST_TABLE)
        try:
            print(f"mysqlio demo: MariaDB {db.version()} pid {db.pid}; preparing sysbench tables...", file=sys.stderr)
            bench.prepare()
            writer.create_table()
            bench.start(LOAD_SECONDS, rate=LOAD_RATE)
            writer.start(delay_s=FIRST_BURST_DELAY_S)
            print(f"mysqlio demo: sysbench oltp_write_only at {LOAD_RATE} tx/s; Ctrl-C ends the demo", file=sys.stderr)
            burst_file = os.path.relpath(writer.data_file, db.datadir)
            print(f"mysqlio demo: periodic burst: {writer.describe()}, into {burst_file}", file=sys.stderr)
            # --mysql: the server's counters, and its events and settings name the trains
            status = StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid))
            return run_top(TopOptions(pid=db.pid, interval_s=interval_s, count=count, output=output, status=status))
        finally:
            # the event goes with the server: nothing to drop
            bench.stop()
            print("mysqlio demo: stopping MariaDB and removing its files", file=sys.stderr)
