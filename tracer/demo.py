"""`mysqlio demo`: a throwaway MariaDB under a write load, traced by `top`.

Everything lives in one temp dir (unix socket only, no TCP) and is removed on
exit, Ctrl-C included: no stray mariadbd, no leftover datadir.
"""

from __future__ import annotations

import sys

from mysqlio.sandbox import MariaDB, MariaDBOptions, Sysbench
from mysqlio.top import TopOptions, run_top

LOAD_SECONDS = 24 * 3600  # until the demo ends
LOAD_RATE = 200  # transactions per second: visible, and light on 2 cores


def run_demo(interval_s: float, count: int, output: str) -> int:
    print("mysqlio demo: starting a throwaway MariaDB (temp dir, unix socket only)...", file=sys.stderr)
    # flush dirty pages continuously, so data files and the doublewrite
    # buffer (inside ibdata1 on MariaDB) show up beside redo and binlog
    options = MariaDBOptions(extra={"innodb_max_dirty_pages_pct": "0", "innodb_max_dirty_pages_pct_lwm": "0"})
    with MariaDB(options) as db:
        bench = Sysbench(db, tables=4, table_size=10000, threads=2)
        try:
            print(f"mysqlio demo: MariaDB {db.version()} pid {db.pid}; preparing sysbench tables...", file=sys.stderr)
            bench.prepare()
            bench.start(LOAD_SECONDS, rate=LOAD_RATE)
            print(f"mysqlio demo: sysbench oltp_write_only at {LOAD_RATE} tx/s; Ctrl-C ends the demo", file=sys.stderr)
            return run_top(TopOptions(pid=db.pid, interval_s=interval_s, count=count, output=output))
        finally:
            bench.stop()
            print("mysqlio demo: stopping MariaDB and removing its files", file=sys.stderr)
