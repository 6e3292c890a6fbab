"""`mysqlio demo`: a throwaway MariaDB (or Oracle MySQL) under a write load, traced by `top`.

Everything lives in one temp dir (unix socket only, no TCP) and is removed on
exit, Ctrl-C included: no stray server, no leftover datadir. `--server mysql`
runs Oracle MySQL 9.7 in its own root (tools/server_roots.py's `sid-mysql`, built
on first use) and mount + pid namespace (RootedMySQL); its base directory is in
that root.

The load is sysbench oltp_write_only at a steady rate, plus a periodic burst:
every BURST_PERIOD_S s an event rewrites a MyISAM table
(`mysqlio.devtools.workload.PeriodicBulkWriter`), about 4 MiB into its .MYD file, so the
periodic banner of `top` shows it after three bursts. `top` runs as with `--mysql` (over
the sandbox's socket): the banner names the train after the event itself
("event mysqlio_demo.bulk_load_every_n_s (every 5 s, writes mysqlio_demo.bulk_load)").
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
from pathlib import Path
from types import ModuleType

from ..errors import UserError
from ..mysql_conn import ConnectionOptions, Connector
from ..server_status import StatusSampler
from ..top import TopOptions, run_top
from .mariadb import MariaDB, MariaDBOptions
from .rooted_mysql import RootedMySQL
from .sysbench import Sysbench
from .workload import PeriodicBulkWriter

SERVERS = ("mariadb", "mysql")
LOAD_SECONDS = 24 * 3600  # until the demo ends
LOAD_RATE = 200  # transactions per second: visible, and light on 2 cores
BURST_PERIOD_S = 5
BURST_SCHEMA, BURST_TABLE = "mysqlio_demo", "bulk_load"
FIRST_BURST_DELAY_S = 2  # top attaches before the first run
MYSQL_ROOT = "sid-mysql"  # tools/server_roots.py's root holding Oracle MySQL 9.7
TOOLS = Path(__file__).resolve().parents[2] / "tools"  # of the checkout this runs from


def _server_roots() -> ModuleType:
    """tools/server_roots.py, imported as tools/build_roots.py does (it imports its sibling
    kernels.py): the demo is a developer's command, run from a checkout."""
    if not (TOOLS / "server_roots.py").is_file():
        raise UserError("demo --server mysql runs from a mysqlio checkout (tools/server_roots.py builds its root)")
    sys.path.insert(0, str(TOOLS))
    try:
        return importlib.import_module("server_roots")
    finally:
        sys.path.remove(str(TOOLS))


def mysql_root() -> str:
    """The root holding Oracle MySQL 9.7, built first when absent (debootstrap, about a
    minute, once: it is cached). The build's own log stays in its log file; one line here
    says it is building, and a failure is one line."""
    roots = _server_roots()
    root = os.path.join(roots.cache_dir_of(), MYSQL_ROOT)
    if roots.is_ready(root, MYSQL_ROOT):
        return root
    print(
        f"mysqlio demo: building Oracle MySQL's root {root} (debootstrap of Debian sid's mysql-server, about 1 min, once)...",
        file=sys.stderr,
    )
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # its progress lines; a failure raises
            return str(roots.ensure_root(MYSQL_ROOT))
    except (RuntimeError, OSError) as exc:
        # "debootstrap sid failed (exit 1); LOG ends:\n...": its first line and the log's last
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        said = " ".join(dict.fromkeys((lines[0], lines[-1])))
        raise UserError(f"demo --server mysql: cannot build MySQL's root: {said}") from None


def _server(server: str, options: MariaDBOptions) -> tuple[MariaDB, str]:
    """The sandbox server (not started) and the name the demo's lines give it."""
    if server == "mysql":
        return RootedMySQL(mysql_root(), options), "MySQL"
    if server == "mariadb":
        return MariaDB(options), "MariaDB"
    raise UserError(f"demo --server is one of {', '.join(SERVERS)}, not {server!r}")


def run_demo(interval_s: float, count: int, output: str, server: str = "mariadb") -> int:
    # flush dirty pages continuously, so data files and the doublewrite buffer (inside
    # ibdata1 on MariaDB, #ib_16384_N.dblwr on MySQL) show up beside redo and binlog
    options = MariaDBOptions(extra={"innodb_max_dirty_pages_pct": "0", "innodb_max_dirty_pages_pct_lwm": "0"})
    sandbox, name = _server(server, options)
    where = "its own root and namespaces, " if server == "mysql" else ""
    print(f"mysqlio demo: starting a throwaway {name} (temp dir, {where}unix socket only)...", file=sys.stderr)
    with sandbox as db:
        bench = Sysbench(db, tables=4, table_size=10000, threads=2)
        writer = PeriodicBulkWriter(db, period_s=BURST_PERIOD_S, schema=BURST_SCHEMA, table=BURST_TABLE)
        try:
            print(f"mysqlio demo: {name} {db.version()} pid {db.pid}; preparing sysbench tables...", file=sys.stderr)
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
            print(f"mysqlio demo: stopping {name} and removing its files", file=sys.stderr)
