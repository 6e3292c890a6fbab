"""Debian's real Prometheus scraping two real exporters: one on iogen (ground truth per
file, and latency imposed by a throttled disk, test_latency.py's), one on a sandbox
MariaDB with a periodic event (a flush train) checked against its performance_schema.

PromQL over the run must equal the ground truth: per-file and per-kind bytes, request
counts, `histogram_quantile` within the bucket that holds iogen's own median; an
unreachable exporter is `up` 0; the shipped rules load; and every panel of the shipped
Grafana dashboard, run as Grafana runs it (a range query), has data."""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from test_exporter import start_exporter
from throttled_disk import throttled_disk

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.prometheus import Prometheus
from mysqlio.devtools.scrape import FILE_COUNTERS, SYNC_CALLS, free_port, iogen_files, wait_for
from mysqlio.devtools.traced import read_json_line, start_iogen
from mysqlio.devtools.workload import PeriodicBulkWriter

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "contrib" / "prometheus" / "mysqlio-rules.yml"
DASHBOARD = REPO / "contrib" / "grafana" / "mysqlio-dashboard.json"
WRITE_IOPS = 5  # throttled disk: each O_DIRECT write of iogen's latency scenario waits ~1/5 s
RATE_INTERVAL = "4s"  # Grafana's $__rate_interval for a 1 s scrape: 4 x the scrape interval


def _by_path(prom: Prometheus, metric: str, instance: str, **labels: str) -> dict[str, int]:
    selector = ", ".join([f'instance="{instance}"', *(f'{k}="{v}"' for k, v in labels.items())])
    rows = prom.query(f"sum by (path) ({metric}{{{selector}}})")
    return {r["metric"]["path"]: int(float(r["value"][1])) for r in rows}


def _prom_files(prom: Prometheus, instance: str, directory: str) -> dict[str, dict[str, int]]:
    """Per-file counters of the files under `directory`, as Prometheus stored them."""
    out: dict[str, dict[str, int]] = {}
    names = [(c, f"mysqlio_file_{c}_total", {}) for c in FILE_COUNTERS]
    names += [(call, "mysqlio_file_sync_ops_total", {"call": call}) for call in SYNC_CALLS]
    for key, metric, labels in names:
        for path, value in _by_path(prom, metric, instance, **labels).items():
            if path.startswith(directory + "/"):
                out.setdefault(path, dict.fromkeys((*FILE_COUNTERS, *SYNC_CALLS), 0))[key] = value
    return out


def _scalar(prom: Prometheus, promql: str) -> float:
    rows = prom.query(promql)
    assert len(rows) == 1, (promql, rows)
    return float(rows[0]["value"][1])


def _stored_after(prom: Prometheus, instance: str, t: float) -> None:
    """Wait until Prometheus holds a sample the exporter took after time t."""
    query = f'mysqlio_last_sample_timestamp_seconds{{instance="{instance}"}}'
    wait_for(f"a sample of {instance} after the run", lambda: _scalar(prom, query) > t + 0.5, timeout_s=30)


def _panels(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]


def _as_grafana(expr: str) -> str:
    """The query Grafana sends: its variables replaced (All instances; the rate interval)."""
    return expr.replace("$instance", ".+").replace("$__rate_interval", RATE_INTERVAL)


def _nearest_rank(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, -(-len(ordered) * q // 100)) - 1]


def test_prometheus_queries_equal_ground_truth(bpf_ready: None, iogen: Path) -> None:
    options = MariaDBOptions(extra={"innodb_stats_auto_recalc": "OFF", "event_scheduler": "ON"})
    with throttled_disk(WRITE_IOPS) as disk, MariaDB(options) as db:
        work = tempfile.mkdtemp(dir=disk.mount)
        gen = start_iogen(str(iogen), work, ["--scenario", "latency", "--count", "10"], disk.enter_cgroup)
        bulk = PeriodicBulkWriter(db, period_s=2, rows=1000)
        bulk.create_table()
        db.wait_clean()
        pfs_before = db.file_io_summary()
        iogen_port, db_port, closed_port = free_port(), free_port(), free_port()
        iogen_at, db_at, closed_at = (f"127.0.0.1:{p}" for p in (iogen_port, db_port, closed_port))
        exporters = [
            start_exporter(gen.pid, "--listen", iogen_at, "--top-files", "100"),
            start_exporter(db.pid, "--listen", db_at, "--top-files", "100"),
        ]
        try:
            with Prometheus({"mysqlio": [iogen_at, db_at, closed_at]}, rule_files=[RULES]) as prom:
                started = time.time()
                wait_for("both exporters scraped", lambda: prom.targets_up().get(db_at) == 1, 30)
                wait_for("iogen's exporter scraped", lambda: prom.targets_up().get(iogen_at) == 1, 30)
                assert gen.stdin is not None and gen.stdout is not None
                gen.stdin.write("go\n")
                gen.stdin.flush()
                bulk.start()
                expected = read_json_line(gen.stdout, 180, "iogen latency run")
                train = f'mysqlio_burst_train_period_seconds{{instance="{db_at}"}}'
                # A file's series starts at its first scrape with what it had read by then, so
                # its rate needs reads in two later scrapes: CI saw the train come so soon that
                # the busiest-files read panel (rate > 0) had no point yet.
                file_reads = f'rate(mysqlio_file_read_bytes_total{{instance="{db_at}"}}[{RATE_INTERVAL}]) > 0'

                def train_and_file_reads_seen() -> bool:
                    # meanwhile, scans of the MyISAM table: reads through the OS, in every scrape
                    db.sql(f"SELECT SUM(CRC32(pad)) FROM {bulk.schema}.{bulk.table}")
                    return bool(prom.query(train)) and bool(prom.query(file_reads))

                wait_for("the event's train and a file's read rate in Prometheus", train_and_file_reads_seen, 120)
                bulk.stop()
                db.wait_clean()
                pfs_after = db.file_io_summary()
                ended = time.time()
                _stored_after(prom, iogen_at, ended)
                _stored_after(prom, db_at, ended)
                _check_iogen(prom, iogen_at, expected, work)
                _check_mariadb(prom, db_at, db, pfs_before, pfs_after)
                assert prom.targets_up()[closed_at] == 0  # an exporter it cannot reach: up 0, no crash
                _check_rules_loaded(prom)
                _check_dashboard(prom, started, time.time())
        finally:
            for proc in exporters:
                proc.terminate()
                proc.wait(timeout=30)
            if gen.stdin:
                gen.stdin.close()
            gen.wait(timeout=30)


def _check_iogen(prom: Prometheus, at: str, expected: dict[str, Any], work: str) -> None:
    truth = iogen_files(expected, Path(work))
    assert _prom_files(prom, at, work) == truth
    for counter in ("write_bytes", "write_ops", "read_bytes", "read_ops"):
        total = _scalar(prom, f'sum(mysqlio_{counter}_total{{instance="{at}"}})')  # per kind, summed
        assert total == sum(f[counter] for f in truth.values()), counter
    assert _scalar(prom, f'sum(mysqlio_lost_events_total{{instance="{at}"}})') == 0
    # p99 of the writes lies in the histogram bucket that holds iogen's own p99. iogen times
    # its O_DIRECT writes to the throttled disk (~200 ms each); its other writes (buffered,
    # before the fdatasyncs it times) are microseconds, so the slowest of all writes is the
    # slowest it timed, and the histogram's p99 (rank 0.99 x n) falls among the timed ones
    timed = [ns for s in expected["latency"] if s["op"] == "write" for ns in s["ns"]]
    selector = f'instance="{at}", op="write"'
    quantile = _scalar(
        prom, f"histogram_quantile(0.99, sum by (le) (mysqlio_request_duration_seconds_bucket{{{selector}}}))"
    )
    counts = {
        r["metric"]["le"]: float(r["value"][1])
        for r in prom.query(f"sum by (le) (mysqlio_request_duration_seconds_bucket{{{selector}}})")
    }
    bounds = sorted(float(le) for le in counts if le != "+Inf")
    upper = min(b for b in bounds if b >= quantile)
    lower = max(b for b in bounds if b < upper)
    truth_s = max(timed) / 1e9
    print(f"iogen write p99 {truth_s * 1e3:.1f} ms; Prometheus p99 {quantile * 1e3:.1f} ms in ({lower}, {upper}] s")
    assert counts["+Inf"] == sum(f["write_ops"] for f in truth.values())
    assert lower < truth_s <= upper, (sorted(timed), counts)


def _check_mariadb(
    prom: Prometheus, at: str, db: MariaDB, before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]
) -> None:
    """The binlog's bytes (written by the event's statements) against performance_schema."""
    written = {p: after[p][0] - before.get(p, (0,))[0] for p in after}
    binlogs = {p: n for p, n in written.items() if re.search(r"/mysql-bin\.\d+$", p) and n}
    assert binlogs, f"the event wrote no binlog: {written}"
    ours = _by_path(prom, "mysqlio_file_write_bytes_total", at)
    for path, nbytes in binlogs.items():
        print(f"{path}: performance_schema {nbytes} B, Prometheus {ours.get(path)} B")
        assert ours.get(path) == nbytes
    myd = f"{db.datadir}/mysqlio_periodic/bulk_load.MYD"
    assert ours.get(myd, 0) > 0
    assert _scalar(prom, f'mysqlio_target_up{{instance="{at}"}}') == 1


def _check_rules_loaded(prom: Prometheus) -> None:
    groups = prom.rule_groups()
    names = {g["name"] for g in groups}
    assert {"mysqlio-rates", "mysqlio-latency", "mysqlio-devices", "mysqlio-alerts"} <= names
    for g in groups:
        for rule in g["rules"]:
            assert rule.get("health") in ("ok", "unknown"), (rule["name"], rule.get("lastError"))


def _check_dashboard(prom: Prometheus, start: float, end: float) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = _panels(dashboard)
    assert len(panels) == len(dashboard["panels"]), "a panel without a query"
    empty = []
    for title, expr in panels:
        series = prom.query_range(_as_grafana(expr), start, end)
        points = [float(v) for s in series for _t, v in s["values"] if not math.isnan(float(v))]
        if not points:
            empty.append(title)
    assert not empty, f"panels without data: {empty}"
