"""20,000 real tables under sysbench (issue 60): `verify` against performance_schema and
`top`'s lost events, files per interval, CPU and RSS, on the host's MariaDB 10.11 and on
Oracle MySQL 9.7 (tools/server_roots.py sid-mysql), each datadir on tmpfs.

For each server: sysbench prepares TABLES tables (2 threads, TABLE_SIZE rows each; the
time printed), then for each open-files variant the server runs
tools/workloads/every_table.lua (4 threads: each event updates the next table in turn, so
one pass of TABLES events writes every table), and after a warm-up of one full pass:
`mysqlio verify -d WINDOW --json`, then `mysqlio top --json -i 1` for WINDOW intervals.
Variants:
    open   table_open_cache, table_definition_cache and innodb_open_files at TABLES +
           2,000, or 1,000 below the fd limit when that is lower: a server started from
           here inherits our hard limit on open files and cannot raise it without
           CAP_SYS_RESOURCE (20,000 on the machine of issue 60, so ~1,000 of 20,000
           tables still take turns at being open)
    churn  those three at the server's defaults (innodb_open_files 2,000 on MariaDB
           10.11, 4,000 on MySQL 9.7: each printed): InnoDB closes .ibd files and opens
           them again as the load goes round, the hard case for naming files
Both raise open_files_limit (to the fd limit) and performance_schema's file instances
and handles above what the tables need (Performance_schema_file_instances_lost must stay
0, or performance_schema is no ground truth). The buffer pool is MariaDBOptions' 128 MiB: far
less than 20,000 tables' pages, so pages are evicted and read again, and every table's
.ibd is read and written within a pass.

Called by tools/bench.py (optional scenario "tables": `bench.py --only tables`; about 20
minutes, so not in a plain `make bench`); alone:

    .venv/bin/python tools/bench_tables.py [--servers mariadb,mysql] [--variants open,churn]
        [--tables 20000] [--window 20]

Benchmarks never fail on a number: the rows say what was measured, lost or different.
Run as root.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from bench import Result, Suite
from bench_scale import hwm_mib
from bench_server import root_of
from bench_tracers import MYSQLIO, require, wait_line

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.rooted_mysql import RootedMySQL
from mysqlio.devtools.sysbench import Sysbench

LUA = Path(__file__).resolve().parent / "workloads" / "every_table.lua"
SERVERS = ("mariadb", "mysql")
VARIANTS = ("open", "churn")
TABLES, SMOKE_TABLES = 20_000, 500
TABLE_SIZE = 10  # rows per table: a table is a few pages, its .ibd ~100 KiB
LOAD_THREADS = 4
WINDOW_S, SMOKE_WINDOW_S = 20, 5
PASS_TIMEOUT_S = 300  # the warm-up's full pass (a restarted server opens every .ibd in it)
TMPFS_MB = 16_384  # MySQL's base directory (its tables take ~3 GiB)


def fd_limit() -> int:
    """The most files a server started from here may open: our hard limit, which it
    cannot raise without CAP_SYS_RESOURCE (20,000 on the machine of issue 60)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1 << 20 if hard == resource.RLIM_INFINITY else hard


def server_settings(tables: int, variant: str) -> dict[str, str]:
    """[mysqld] settings of a DBA with `tables` tables; `variant` as the module says."""
    settings = {
        "open_files_limit": str(min(max(65_535, 3 * tables), fd_limit())),
        "performance_schema_max_file_instances": str(4 * tables + 10_000),
        "performance_schema_max_file_handles": str(4 * tables + 10_000),
        "max_connections": "200",
    }
    if variant == "open":
        # below the fd limit: the servers cap innodb_open_files at open_files_limit
        cache = str(min(tables + 2_000, fd_limit() - 1_000))
        settings.update({"table_open_cache": cache, "table_definition_cache": cache, "innodb_open_files": cache})
    elif variant != "churn":
        raise ValueError(f"variant is one of {', '.join(VARIANTS)}, got {variant!r}")
    return settings


class TmpfsRootedMySQL(RootedMySQL):
    """RootedMySQL with its base directory on a tmpfs of its own: 20,000 CREATE TABLEs
    take minutes on the root's disk. The tmpfs is mounted here before unshare (the
    server's mount namespace, a copy of ours, has it), through RootedMariaDB's hook for
    a loop disk (_attach_disk, called with the base directory's path before its layout)."""

    def __init__(self, root: str, options: MariaDBOptions, size_mb: int = TMPFS_MB) -> None:
        super().__init__(root, options, on_loop_disk_mb=size_mb)

    def _attach_disk(self, size_mb: int, base: str) -> None:
        os.mkdir(base)
        self._disk_stack.callback(os.rmdir, base)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", base], check=True, timeout=30)
        self._disk_stack.callback(_unmount, base)

    def _remove_base(self) -> None:
        super()._remove_base()  # the files (no loop disk: self._disk stays None)
        self._disk_stack.close()  # then the tmpfs and its mount point


def _unmount(path: str) -> None:
    if subprocess.run(["umount", path], capture_output=True, timeout=60, check=False).returncode:
        subprocess.run(["umount", "--lazy", path], capture_output=True, timeout=60, check=False)


@contextmanager
def server(kind: str, tables: int, variant: str) -> Iterator[MariaDB]:
    """The server `kind` with `variant`'s settings, its datadir on tmpfs; gone afterwards."""
    options = MariaDBOptions(extra=server_settings(tables, variant))
    base = None
    db: MariaDB
    if kind == "mariadb":
        base = tempfile.mkdtemp(prefix="mysqlio-bench-tables-", dir="/dev/shm")
        db = MariaDB(options, base_dir=base)
    elif kind == "mysql":
        db = TmpfsRootedMySQL(root_of("sid-mysql"), options)
    else:
        raise ValueError(f"server is one of {', '.join(SERVERS)}, got {kind!r}")
    try:
        with db:
            yield db
    finally:
        if base:
            shutil.rmtree(base, ignore_errors=True)


def reconfigure(db: MariaDB, tables: int, variant: str) -> None:
    """Restart `db` on the same files with `variant`'s settings."""
    db.options.extra = server_settings(tables, variant)
    Path(db.config_file).write_text(db.config_text())
    db.restart(timeout_s=300)


def status(db: MariaDB, *names: str) -> dict[str, int]:
    rows = db.sql(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({', '.join(repr(n) for n in names)})")
    return {name: int(value) for name, value in rows}


def wait_pass(db: MariaDB, bench: Sysbench, tables: int) -> float:
    """Seconds for the load to make `tables` more updates (one pass over every table)."""
    t0, start = time.monotonic(), status(db, "Com_update")["Com_update"]
    while status(db, "Com_update")["Com_update"] - start < tables:
        if not bench.running():
            raise RuntimeError(f"sysbench ended during the warm-up:\n{bench.output()[-2000:]}")
        if time.monotonic() - t0 > PASS_TIMEOUT_S:
            raise RuntimeError(f"fewer than {tables:,} updates in {PASS_TIMEOUT_S} s")
        time.sleep(0.5)
    return time.monotonic() - t0


@dataclass
class TopRun:
    lost: list[int] = field(default_factory=list)  # per interval
    files: list[int] = field(default_factory=list)  # files per interval
    ibd: list[int] = field(default_factory=list)  # sbtest .ibd files per interval
    drops: dict[str, int] = field(default_factory=dict)  # summed over the intervals
    measured: int = 0  # intervals from the end of the first to that of the last asked for
    cpu_s: float = 0.0  # user+system over them
    wall_s: float = 0.0  # the same span by the clock
    first_cpu_s: float = 0.0  # from "tracing" to the first interval's line (names every file)
    rss_mib: float = 0.0  # at the last interval
    hwm_mib: float = 0.0  # VmHWM then

    @property
    def cpu_per_interval_pct(self) -> float:
        """CPU of one 1 s interval, % of a core: what top costs, even when a loaded machine
        gives it less than that and it falls behind (then intervals come late)."""
        return 100 * self.cpu_s / max(self.measured, 1)


def run_top(pid: int, intervals: int) -> TopRun:
    """`top -p PID --json -i 1` for INTERVALS lines (read as they come), then stopped."""
    top = subprocess.Popen(
        [*MYSQLIO, "top", "-p", str(pid), "--json", "-i", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_line(top.stderr, "mysqlio: tracing pid", timeout_s=120)
        drain = threading.Thread(target=lambda: top.stderr and top.stderr.read(), daemon=True)
        drain.start()
        proc = psutil.Process(top.pid)

        def cpu() -> float:
            times = proc.cpu_times()
            return times.user + times.system

        run, at_tracing = TopRun(), cpu()
        t_first = cpu_first = 0.0
        assert top.stdout is not None
        for n, line in enumerate(top.stdout, 1):
            head, files = split_line(line)
            run.lost.append(int(head["lost_events"]))
            for name, value in head.get("drops", {}).items():
                run.drops[name] = run.drops.get(name, 0) + int(value)
            run.files.append(len(files))
            run.ibd.append(sum(1 for p in files if "/sbtest/" in p and p.endswith(".ibd")))
            if n == 1:
                t_first, cpu_first = time.monotonic(), cpu()
                run.first_cpu_s = cpu_first - at_tracing
            if n == intervals:
                run.cpu_s, run.wall_s = cpu() - cpu_first, time.monotonic() - t_first
                run.measured = intervals - 1
                run.rss_mib = proc.memory_info().rss / 2**20
                run.hwm_mib = hwm_mib(top.pid)
                top.send_signal(signal.SIGINT)
        top.wait(timeout=120)
        return run
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()


_PATH = re.compile(r'"path":"((?:[^"\\]|\\.)*)"')


def split_line(line: str) -> tuple[dict[str, Any], list[str]]:
    """A line of `top --json`: its numbers and drops (what comes before "files", which
    output.write_json puts after them) and its files' paths, without decoding the whole
    line (20,000 files make a line of tens of MB; the machine has 2 cores)."""
    at = line.find('"files":[')
    head = json.loads(line[:at].rstrip(",") + "}")
    end = line.find("]", at) if line.startswith('"files":[]', at) else line.find(',"devices":', at)
    return head, [json.loads(f'"{p}"') for p in _PATH.findall(line, at, end if end > 0 else len(line))]


@dataclass
class VerifyRun:
    state: str
    text: str
    lost: int
    ibd_written_pfs: int  # sbtest .ibd files performance_schema saw written in the window
    ibd_written_ours: int  # the same, by mysqlio
    ibd_read_pfs: int
    files_with_row: int  # file and direction rows with a performance_schema figure
    exact: int  # of those, mysqlio's bytes within the edges' ± (no excess at all)
    worst_excess: int  # the largest |difference| beyond ± of any such row, bytes
    worst: str  # that row: file, op, figures
    no_row: list[str]  # files mysqlio saw bytes for that performance_schema has no row for
    warnings: list[str]
    ibd_rows: int  # sbtest .ibd file and direction rows with a performance_schema figure
    ibd_exact: int  # of those, mysqlio's bytes equal to performance_schema's middle figure
    ibd_pfs_bytes: int  # their bytes, performance_schema's middle figures summed
    ibd_mysqlio_bytes: int  # and mysqlio's
    ibd_edge_max: int  # the largest ± of any of them
    edge_max: tuple[str, int]  # the largest ± of any row: its file, bytes


def run_verify(pid: int, window_s: int, keep: str | None = None) -> VerifyRun:
    """`mysqlio verify -d WINDOW --json`, its JSON kept as `keep` when given."""
    proc = subprocess.run(
        [*MYSQLIO, "verify", "-p", str(pid), "-d", str(window_s), "--json"],
        capture_output=True,
        text=True,
        timeout=window_s + 300,
        check=False,
    )
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise RuntimeError(f"mysqlio verify exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout)
    if keep:
        Path(keep).write_text(proc.stdout)
    rows = out["files"]
    ibd = [r for r in rows if "sbtest/" in r["name"] and r["name"].endswith(".ibd")]
    with_row = [r for r in rows if r["pfs_bytes"] is not None and not r["note"].startswith("memory-mapped")]

    def excess(r: dict[str, Any]) -> int:
        return max(0, abs(r["difference_bytes"]) - r["pfs_edge_bytes"])

    worst = max(with_row, key=excess, default=None)
    worst_text = (
        f"{worst['name']} {worst['op']}: performance_schema {worst['pfs_bytes']:,} ±{worst['pfs_edge_bytes']:,}, "
        f"mysqlio {worst['mysqlio_bytes']:,}"
        if worst
        else "no row"
    )
    no_row = [r["name"] for r in rows if r["pfs_bytes"] is None and r["kind"] != "redo" and r["mysqlio_bytes"]]
    ibd_rows = [r for r in ibd if r["pfs_bytes"] is not None]
    widest = max(with_row, key=lambda r: r["pfs_edge_bytes"], default=None)
    return VerifyRun(
        state=out["verdict"]["state"],
        text=out["verdict"]["text"],
        lost=int(out["lost_events"]),
        ibd_written_pfs=sum(1 for r in ibd if r["op"] == "write" and r["pfs_bytes"]),
        ibd_written_ours=sum(1 for r in ibd if r["op"] == "write" and r["mysqlio_bytes"]),
        ibd_read_pfs=sum(1 for r in ibd if r["op"] == "read" and r["pfs_bytes"]),
        files_with_row=len(with_row),
        exact=sum(1 for r in with_row if excess(r) == 0),
        worst_excess=excess(worst) if worst else 0,
        worst=worst_text,
        no_row=no_row,
        warnings=list(out["warnings"]),
        ibd_rows=len(ibd_rows),
        ibd_exact=sum(1 for r in ibd_rows if r["difference_bytes"] == 0),
        ibd_pfs_bytes=sum(r["pfs_bytes"] for r in ibd_rows),
        ibd_mysqlio_bytes=sum(r["mysqlio_bytes"] for r in ibd_rows),
        ibd_edge_max=max((r["pfs_edge_bytes"] for r in ibd_rows), default=0),
        edge_max=(f"{widest['name']} {widest['op']}", widest["pfs_edge_bytes"]) if widest else ("", 0),
    )


PFS_LOST = ("Performance_schema_file_instances_lost", "Performance_schema_file_handles_lost")


def measure_variant(
    suite: Suite, db: MariaDB, bench: Sysbench, label: str, tables: int, window_s: int, keep: str | None = None
) -> None:
    """One load of every_table.lua: a warm-up pass, verify's window, then top's."""
    settings = db.sql("SELECT @@innodb_open_files, @@table_open_cache, @@open_files_limit")[0]
    lost0 = status(db, *PFS_LOST)
    bench.start(PASS_TIMEOUT_S + 3 * window_s + 300, script=str(LUA))
    try:
        pass_s = wait_pass(db, bench, tables)
        t0, updates0 = time.monotonic(), status(db, "Com_update")["Com_update"]
        ver = run_verify(db.pid, window_s, keep)
        rate = (status(db, "Com_update")["Com_update"] - updates0) / (time.monotonic() - t0)
        top = run_top(db.pid, window_s)
        opened = status(db, "Innodb_num_open_files")["Innodb_num_open_files"]
    finally:
        bench.stop()
    lost1 = status(db, *PFS_LOST)
    grew = {k: lost1[k] - lost0[k] for k in PFS_LOST}
    note = f"innodb_open_files {settings[0]}, table_open_cache {settings[1]}, open_files_limit {settings[2]}"
    suite.add(Result(label, "first pass over every table", [pass_s], "s", note=f"after the start; {note}"))
    suite.add(
        Result(label, "updates during verify's window", [rate], "/s", note=f"{rate * window_s / tables:.1f} passes")
    )
    suite.add(
        Result(
            label,
            ".ibd files written in the window (performance_schema)",
            [ver.ibd_written_pfs],
            note=f"of {tables:,}; mysqlio saw {ver.ibd_written_ours:,} written; {ver.ibd_read_pfs:,} read (pfs)",
        )
    )
    suite.add(Result(label, "verify verdict", [float(ver.state == "agree")], note=f"{ver.state}: {ver.text}"))
    suite.add(
        Result(
            label,
            "verify: worst per-file difference beyond ±",
            [ver.worst_excess],
            "B",
            note=f"{ver.worst}; {ver.exact:,} of {ver.files_with_row:,} file rows within ±"
            + (f"; no pfs row: {', '.join(ver.no_row[:5])}" if ver.no_row else ""),
        )
    )
    suite.add(
        Result(
            label,
            "verify: .ibd rows equal to the byte",
            [ver.ibd_exact],
            note=f"of {ver.ibd_rows:,} (.ibd file and direction); their bytes: performance_schema "
            f"{ver.ibd_pfs_bytes:,}, mysqlio {ver.ibd_mysqlio_bytes:,}; largest ± of an .ibd row "
            f"{ver.ibd_edge_max:,}, of any row {ver.edge_max[1]:,} ({ver.edge_max[0]})",
        )
    )
    suite.add(Result(label, "lost events, verify's window", [ver.lost], note="; ".join(ver.warnings)[:300]))
    drops = ", ".join(f"{k} {v:,}" for k, v in top.drops.items() if v) or "no drop counter above 0"
    # the intervals asked for and those top printed as it stopped
    suite.add(Result(label, f"lost events, top ({len(top.lost)} intervals)", [sum(top.lost)], note=drops))
    suite.add(
        Result(
            label,
            "top: files per interval",
            [float(v) for v in top.files],
            note=f"sbtest .ibd per interval: median {statistics.median(top.ibd or [0]):,.0f}",
        )
    )
    suite.add(
        Result(
            label,
            "top: CPU per 1 s interval",
            [top.cpu_per_interval_pct],
            "% of a core",
            note=f"user+system over intervals 2..{top.measured + 1}, which took {top.wall_s:.1f} s by the clock; "
            f"the first (names every file) {top.first_cpu_s:.1f} s of CPU",
        )
    )
    suite.add(Result(label, "top: RSS", [top.rss_mib], "MiB", note=f"VmHWM {top.hwm_mib:.0f} MiB"))
    suite.add(
        Result(
            label,
            "performance_schema file instances / handles lost",
            [grew[PFS_LOST[0]]],
            note=f"during the load: instances {grew[PFS_LOST[0]]}, handles {grew[PFS_LOST[1]]}; "
            f"Innodb_num_open_files at the end {opened:,}",
        )
    )


def bench_server_tables(
    suite: Suite,
    kind: str,
    tables: int,
    variants: Sequence[str],
    window_s: int,
    keep: str | None = None,
    prepare_threads: int = 2,
) -> None:
    with server(kind, tables, variants[0]) as db:
        title = f"{'MariaDB' if kind == 'mariadb' else 'MySQL'} {db.version().split('-')[0]}"
        bench = Sysbench(db, tables=tables, table_size=TABLE_SIZE, threads=prepare_threads)
        t0 = time.monotonic()
        bench.prepare()
        prepare_s = time.monotonic() - t0
        lost = status(db, PFS_LOST[0])[PFS_LOST[0]]
        instances = db.sql("SELECT COUNT(*) FROM performance_schema.file_instances")[0][0]
        suite.add(
            Result(
                f"tables: {title}, {tables:,} tables",
                "sysbench prepare",
                [prepare_s],
                "s",
                note=f"{prepare_threads} threads, {TABLE_SIZE} rows a table, datadir on tmpfs; then "
                f"{PFS_LOST[0]} {lost:,} with {int(instances):,} file instances",
            )
        )
        bench.threads = LOAD_THREADS
        for n, variant in enumerate(variants):
            if n:
                reconfigure(db, tables, variant)
            label = f"tables: {title}, {tables:,} tables, {variant}"
            kept = os.path.join(keep, f"verify-{kind}-{variant}.json") if keep else None
            measure_variant(suite, db, bench, label, tables, window_s, kept)


def bench_tables(
    suite: Suite,
    servers: Sequence[str] = SERVERS,
    variants: Sequence[str] = VARIANTS,
    tables: int | None = None,
    window_s: int | None = None,
    keep: str | None = None,
) -> None:
    """`keep`: a directory to write each verify's JSON to."""
    require("sysbench", "mariadb")
    tables = tables or (SMOKE_TABLES if suite.smoke else TABLES)
    window_s = window_s or (SMOKE_WINDOW_S if suite.smoke else WINDOW_S)
    for kind in servers:
        bench_server_tables(suite, kind, tables, variants, window_s, keep)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated subset of {','.join(SERVERS)}")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}")
    ap.add_argument("--tables", type=int, default=TABLES)
    ap.add_argument("--window", type=int, default=WINDOW_S, help="seconds of verify's window and of top's")
    ap.add_argument("--keep", metavar="DIR", help="write each verify's JSON here")
    ap.add_argument("--smoke", action="store_true", help=f"{SMOKE_TABLES} tables, {SMOKE_WINDOW_S} s windows")
    args = ap.parse_args(argv)
    servers, variants = args.servers.split(","), args.variants.split(",")
    for what, chosen, allowed in (("--servers", servers, SERVERS), ("--variants", variants, VARIANTS)):
        if not chosen or set(chosen) - set(allowed):
            ap.error(f"{what}: a comma-separated subset of {','.join(allowed)}")
    if args.tables < 1 or args.window < 2:
        ap.error("--tables must be at least 1 and --window at least 2")
    suite = Suite(smoke=args.smoke)
    tables = SMOKE_TABLES if args.smoke and args.tables == TABLES else args.tables
    window = SMOKE_WINDOW_S if args.smoke and args.window == WINDOW_S else args.window
    if args.keep and not os.path.isdir(args.keep):
        ap.error(f"--keep {args.keep}: no such directory")
    bench_tables(suite, servers, variants, tables, window, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
