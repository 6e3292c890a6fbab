"""`mysqlio exporter`: scraped over HTTP with urllib and parsed with prometheus_client's
own parser. End to end with real BPF on iogen (exact per-file and per-kind counters,
burst-train gauges, bounded per-file series, localhost only, nothing left attached
after kill -9), plus the bookkeeping that keeps counters monotonic when files leave
the top N, on synthetic intervals."""

from __future__ import annotations

import itertools
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry
from test_safety import held_prog_link_ids, loaded_bpf_ids

from mysqlio.abi import Api, By, Dir, Op, Owner
from mysqlio.devices import OWNER_NAMES, DeviceActivity
from mysqlio.devtools.loop_disk import DeviceStat, device_stat, loop_ext4
from mysqlio.devtools.scrape import (
    EXPORTER_INTERVAL_S,
    FILE_COUNTERS,
    SYNC_CALLS,
    Metrics,
    exported_files,
    free_port,
    iogen_files,
    parse,
    scrape,
    scrape_after,
    wait_for,
)
from mysqlio.devtools.traced import assert_one_line_error, attached_line, end_iogen, read_json_line, start_iogen
from mysqlio.exporter import CONTAINER_LABELS, ExporterState, IoCollector
from mysqlio.kinds import KINDS
from mysqlio.model import WRITEBACK_CAUSES, FileActivity, Interval
from mysqlio.probe import DeviceCount, FileIdentity, OpCount

DEFAULT_PORT = 9164
ON_THE_HOST = dict.fromkeys(CONTAINER_LABELS, "")  # every sample's pod labels, for a server on the host
FAMILIES = (
    *(f"mysqlio_{c}" for c in FILE_COUNTERS),
    "mysqlio_sync_ops",
    *(f"mysqlio_file_{c}" for c in FILE_COUNTERS),
    "mysqlio_file_sync_ops",
    "mysqlio_dirtied_bytes",
    "mysqlio_file_dirtied_bytes",
    "mysqlio_writeback_bytes",
    "mysqlio_file_writeback_bytes",
    "mysqlio_device_bytes",
    "mysqlio_device_requests",
    "mysqlio_lost_events",
    "mysqlio_drops",
    "mysqlio_burst_train_period_seconds",
    "mysqlio_burst_train_bytes_per_burst",
    "mysqlio_burst_train_ops_per_burst",
    "mysqlio_burst_train_confidence",
    "mysqlio_target_pid",
    "mysqlio_target_up",
    "mysqlio_target_restarts",
    "mysqlio_target_info",
    "mysqlio_last_sample_timestamp_seconds",
    "mysqlio_sample_interval_seconds",
    "mysqlio_tracked_files",
)
# every scenario of iogen at once, and a write burst every 1.5 s into "ibdata1"
SCENARIOS = [
    *("write", "pwrite", "writev", "pwritev", "pwritev2", "reads", "sync", "aio", "uring", "odirect"),
    *("reuse", "rename", "unlink", "shortlived", "errors", "nonfile"),
]
PERIOD_S, BURST_COUNT, BURST_SIZE = 1.5, 8, 65536
IOGEN_ARGS = [
    *(a for s in [*SCENARIOS, "periodic"] for a in ("--scenario", s)),
    *("--period", str(PERIOD_S), "--seconds", "8", "--burst-count", str(BURST_COUNT), "--burst-size", str(BURST_SIZE)),
]


# ---------------------------------------------------------------- helpers (test_follow uses them too)


def start_exporter(pid: int, *extra: str) -> subprocess.Popen[str]:
    """Started, probes attached and serving (its stderr said so)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", "exporter", "-p", str(pid), "-i", str(EXPORTER_INTERVAL_S), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 60)
    line = attached_line(proc.stderr) if ready else ""
    if not line.startswith(f"mysqlio: exporting pid {pid} "):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"exporter did not start: {line}{err}")
    return proc


def listening(pid: int) -> list[tuple[str, int]]:
    return sorted(
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process(pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    )


def stop_exporter(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return err


# ---------------------------------------------------------------- end to end, real BPF


@pytest.mark.bpf
def test_exporter_end_to_end(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """Two exporters on one iogen run: A with room for every file, B with --top-files 3
    on the default address. A's per-file counters equal iogen's ground truth exactly
    and add up to the per-kind counters; B exports exactly 3 files, with A's values,
    and the same per-kind totals; the 1.5 s write bursts show as a train; both listen
    on 127.0.0.1 only; kill -9 of A leaves none of its BPF programs or links."""
    work = Path(os.path.realpath(tmp_path)) / "io"
    work.mkdir()
    with socket.socket() as probe_default:
        probe_default.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe_default.bind(("127.0.0.1", DEFAULT_PORT))
        except OSError as exc:
            pytest.fail(f"the default port {DEFAULT_PORT} is taken on this machine: {exc}")
    gen = start_iogen(str(iogen), str(work), IOGEN_ARGS)
    a = b = None
    port_a = free_port()
    try:
        assert gen.stdin is not None and gen.stdout is not None
        a = start_exporter(gen.pid, "--listen", str(port_a), "--top-files", "1000")  # port alone: localhost
        b = start_exporter(gen.pid, "--top-files", "3")  # the default address
        before = scrape(port_a)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 60, "iogen run")
        done = time.time()
        ma, mb = scrape_after(port_a, done), scrape_after(DEFAULT_PORT, done)

        assert listening(a.pid) == [("127.0.0.1", port_a)]
        assert listening(b.pid) == [("127.0.0.1", DEFAULT_PORT)]

        progs, links = held_prog_link_ids(a.pid)
        assert len(progs) >= 3 and len(links) >= 3, (progs, links)  # the probes really are attached
        os.kill(a.pid, signal.SIGKILL)
        a.wait()

        def detached() -> bool:
            now_progs, now_links = loaded_bpf_ids()
            return not (progs & now_progs) and not (links & now_links)

        wait_for("the killed exporter's programs and links to go", detached, 10)
        assert gen.poll() is None, "the traced process was harmed"
        assert "Traceback" not in stop_exporter(b)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        end_iogen(gen)

    # before the workload: every family, every kind at 0, the target
    assert set(FAMILIES) <= before.families, set(FAMILIES) - before.families
    assert {lab["kind"] for lab, _ in before.samples["mysqlio_write_bytes_total"]} == set(KINDS)
    assert before.value("mysqlio_target_pid") == gen.pid and before.value("mysqlio_target_up") == 1
    assert before.value("mysqlio_target_restarts_total") == 0
    assert before.value("mysqlio_sample_interval_seconds") == EXPORTER_INTERVAL_S
    info = before.samples["mysqlio_target_info"][0][0]
    assert (info["process"], info["follow"], info["backend"]) == ("iogen", "1", "bpf")

    # A: every file exactly, no other file; per kind = sum over files (A exports all)
    truth = iogen_files(expected, work)
    assert len(truth) >= 17
    assert exported_files(ma, work) == truth
    assert ma.value("mysqlio_lost_events_total") == 0
    assert ma.total("mysqlio_drops_total") == 0 and len(ma.samples["mysqlio_drops_total"]) >= 3
    for c in FILE_COUNTERS:
        assert ma.total(f"mysqlio_{c}_total") == ma.total(f"mysqlio_file_{c}_total"), c
    for call in SYNC_CALLS:
        assert ma.total("mysqlio_sync_ops_total", call=call) == ma.total("mysqlio_file_sync_ops_total", call=call)
    assert ma.value("mysqlio_write_bytes_total", kind="system") == truth[str(work / "ibdata1")]["write_bytes"]
    assert (
        ma.value("mysqlio_sync_ops_total", kind="redo", call="fdatasync")
        == truth[str(work / "ib_logfile0")]["fdatasync"]
    )
    assert ma.value("mysqlio_last_sample_timestamp_seconds") > done

    # latency histograms: every completed request of a kind once, per op class
    for kind in {lab["kind"] for lab, v in ma.samples["mysqlio_write_ops_total"] if v}:
        ops = {
            "write": ma.value("mysqlio_write_ops_total", kind=kind),
            "read": ma.value("mysqlio_read_ops_total", kind=kind),
            "sync": ma.total("mysqlio_sync_ops_total", kind=kind),
        }
        for op, count in ops.items():
            samples = [
                v
                for lab, v in ma.samples.get("mysqlio_request_duration_seconds_count", [])
                if lab == {"kind": kind, "op": op, **ON_THE_HOST}
            ]
            assert samples == ([count] if count else []), (kind, op, samples, count)
            if count:
                buckets = [
                    (float(lab["le"]), v)
                    for lab, v in ma.samples["mysqlio_request_duration_seconds_bucket"]
                    if lab["kind"] == kind and lab["op"] == op
                ]
                assert buckets[-1] == (float("inf"), count)
                assert all(x[1] <= y[1] for x, y in itertools.pairwise(buckets))  # cumulative
                assert ma.value("mysqlio_request_duration_seconds_sum", kind=kind, op=op) > 0

    # the write bursts into ibdata1: a 1.5 s train of 8 x 64 KiB
    ibdata = {"path": str(work / "ibdata1"), "kind": "system", "metric": "write"}
    assert abs(ma.value("mysqlio_burst_train_period_seconds", **ibdata) / PERIOD_S - 1) <= 0.05
    assert ma.value("mysqlio_burst_train_bytes_per_burst", **ibdata) == BURST_COUNT * BURST_SIZE
    assert ma.value("mysqlio_burst_train_ops_per_burst", **ibdata) == BURST_COUNT

    # B: three files, with the same counters as A; the same per-kind totals
    b_files = exported_files(mb, work)
    assert len({lab["path"] for lab, _ in mb.samples["mysqlio_file_write_bytes_total"]}) == 3
    assert len(b_files) == 3 and str(work / "ibdata1") in b_files  # 2.5 MiB: the busiest by far
    assert all(b_files[p] == truth[p] for p in b_files)
    for name in [f"mysqlio_{c}_total" for c in FILE_COUNTERS] + ["mysqlio_sync_ops_total"]:
        assert mb.samples[name] == ma.samples[name], name
    assert len(mb.samples.get("mysqlio_burst_train_period_seconds", [])) <= 3


def _quiet_scrape(port: int, device: str) -> tuple[DeviceStat, Metrics]:
    """A scrape sampled after now, between two equal readings of the device's counters
    (ext4 may commit its journal again a few seconds after a sync: then once more)."""
    for _ in range(10):
        stat = device_stat(device)
        m = scrape_after(port, time.time())
        if device_stat(device) == stat:
            return stat, m
    raise AssertionError(f"{device} never stayed quiet for a scrape")


@pytest.mark.bpf
def test_page_cache_and_device_exact_on_a_loop_disk(bpf_ready: None, iogen: Path) -> None:
    """iogen's pc_fsync on ext4 on a loop device: 64 KiB written in 16 pwrites, then one
    fsync. The scraped page-cache counters equal iogen's own accounting exactly: 65536
    bytes dirtied, 65536 written back, all by fsync; the device's bytes equal its own
    counters (/sys/block/loopN/stat) and the server's share of them is those 65536 bytes.
    (Every block device of the machine is exported; other tests' disks are left alone.)"""
    with loop_ext4(64, direct_io=True) as disk:  # as tests/test_pagecache.py: the image outside the page cache
        subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
        time.sleep(0.5)
        gen = start_iogen(str(iogen), str(disk.mount), ["--scenario", "pc_fsync"])
        exporter = None
        port = free_port()
        try:
            assert gen.stdin is not None and gen.stdout is not None
            exporter = start_exporter(gen.pid, "--listen", str(port))
            # the window starts once the exporter is up (its start reads the mount's metadata)
            stat_before, before = _quiet_scrape(port, disk.name)
            gen.stdin.write("go\n")
            gen.stdin.flush()
            expected = read_json_line(gen.stdout, 60, "iogen run")
            stat, m = _quiet_scrape(port, disk.name)
            stat = stat - stat_before
            assert "Traceback" not in stop_exporter(exporter)
        finally:
            if exporter is not None and exporter.poll() is None:
                exporter.kill()
                exporter.wait()
            end_iogen(gen)

    (f,) = expected["files"]
    assert (f["dirtied_bytes"], f["writeback_bytes"], f["writeback_by"]) == (65536, 65536, {"fsync": 65536})
    path = f["path"]
    (kind,) = {lab["kind"] for lab, _ in m.samples["mysqlio_file_dirtied_bytes_total"] if lab["path"] == path}
    # before the workload: the families are there, every (kind, cause) at 0, no device yet
    assert before.total("mysqlio_dirtied_bytes_total") == 0 and before.total("mysqlio_writeback_bytes_total") == 0
    assert {lab["by"] for lab, _ in before.samples["mysqlio_writeback_bytes_total"]} == set(WRITEBACK_CAUSES)
    assert {lab["call"] for lab, _ in before.samples["mysqlio_sync_ops_total"]} == set(SYNC_CALLS) | {"msync"}
    # per file and per kind, to the byte
    assert m.by_path("mysqlio_file_dirtied_bytes_total") == {path: f["dirtied_bytes"]}
    assert m.by_path("mysqlio_file_writeback_bytes_total") == {path: f["writeback_bytes"]}
    assert m.by_path("mysqlio_file_writeback_bytes_total", by="fsync") == {path: 65536}
    assert m.value("mysqlio_dirtied_bytes_total", kind=kind) == 65536 == m.total("mysqlio_dirtied_bytes_total")
    assert m.value("mysqlio_writeback_bytes_total", kind=kind, by="fsync") == 65536
    assert m.total("mysqlio_writeback_bytes_total") == 65536
    assert m.by_path("mysqlio_file_write_bytes_total") == {path: f["write_bytes"]}
    assert m.value("mysqlio_sync_ops_total", kind=kind, call="fsync") == f["fsync_ops"] == 1
    assert m.value("mysqlio_sync_ops_total", kind=kind, call="msync") == f["msync_ops"] == 0
    # the device: its bytes and requests as it counted them, the server's share exact

    def delta(name: str, **labels: str) -> float:
        return m.total(name, device=disk.name, **labels) - before.total(name, device=disk.name, **labels)

    assert delta("mysqlio_device_bytes_total", direction="write", owner="device") == stat.bytes_written
    assert delta("mysqlio_device_requests_total", direction="write") == stat.writes
    assert delta("mysqlio_device_bytes_total", direction="read", owner="device") == stat.bytes_read
    assert delta("mysqlio_device_requests_total", direction="read") == stat.reads
    assert delta("mysqlio_device_bytes_total", direction="write", owner="server_files") == 65536
    assert delta("mysqlio_device_bytes_total", direction="write", owner="server_direct") == 0
    assert delta("mysqlio_device_bytes_total", direction="write", owner="filesystem") > 0  # ext4's journal
    assert {lab["owner"] for lab, _ in m.samples["mysqlio_device_bytes_total"]} == {"device", *OWNER_NAMES.values()}
    assert m.value("mysqlio_lost_events_total") == 0


@pytest.mark.bpf
def test_no_follow_exits_when_the_target_exits(bpf_ready: None) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    exporter = start_exporter(victim.pid, "--listen", str(free_port()), "--no-follow")
    try:
        victim.kill()
        victim.wait()
        _, err = exporter.communicate(timeout=20)
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()
    assert exporter.returncode == 4, err
    assert err.strip().splitlines() == [f"mysqlio: process {victim.pid} exited; stopped tracing"]


def test_port_in_use_is_one_line(bpf_ready: None) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            proc = subprocess.run(
                [sys.executable, "-m", "mysqlio", "exporter", "-p", str(victim.pid), "--listen", f"127.0.0.1:{port}"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
    finally:
        victim.kill()
        victim.wait()
    assert proc.returncode == 2
    assert_one_line_error(proc, f"cannot listen on 127.0.0.1:{port}", "Address already in use")


# ---------------------------------------------------------------- bookkeeping, synthetic intervals


def _interval(t: float, files: Sequence[tuple[str, str, int, int]]) -> Interval:
    """files: (path, kind, write bytes, fsyncs); one write request per file with bytes."""
    activity = [
        FileActivity(
            file=FileIdentity(1, abs(hash(path)) % 10**9),
            path=path,
            kind=kind,
            write_bytes=wb,
            write_ops=1 if wb else 0,
            fsync_ops=fs,
        )
        for path, kind, wb, fs in files
    ]
    return Interval(time=t, interval_s=1.0, pid=1, lost_events=0, drops={"stats_full": 0}, files=activity)


def _scrape_state(state: ExporterState) -> Metrics:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(IoCollector(state))
    return parse(generate_latest(registry).decode())


def test_top_files_bound_series_and_counters_never_go_back() -> None:
    """--top-files 1: the file with most bytes lately is exported; one that drops out and
    comes back continues its total; per-kind totals count every file all along."""
    state = ExporterState(top_files=1, interval_s=1.0, backend="bpf", follow=True, pid=1)
    state.add(_interval(1000.0, [("/d/x", "table", 1000, 0), ("/d/y", "table", 10, 0)]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_write_bytes_total") == {"/d/x": 1000}
    for t in range(1001, 1004):
        state.add(_interval(float(t), [("/d/y", "table", 5000, 0)]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_write_bytes_total") == {"/d/y": 15010}
    # ten minutes later y's bytes have decayed; x writes a little and is the busiest again
    state.add(_interval(1600.0, [("/d/x", "table", 1, 0)]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_write_bytes_total") == {"/d/x": 1001}  # continued, not restarted
    assert m.by_path("mysqlio_file_write_ops_total") == {"/d/x": 2}
    assert m.value("mysqlio_write_bytes_total", kind="table") == 16011
    assert m.value("mysqlio_write_ops_total", kind="table") == 6
    assert m.value("mysqlio_tracked_files") == 2
    # a file that only syncs still ranks (by syncs) when no file has bytes
    state = ExporterState(top_files=1, interval_s=1.0, backend="bpf", follow=True, pid=1)
    state.add(_interval(1.0, [("/d/s", "redo", 0, 3)]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_sync_ops_total", call="fsync") == {"/d/s": 3}
    assert m.value("mysqlio_sync_ops_total", kind="redo", call="fsync") == 3


def test_tracked_files_are_bounded_least_recently_active_first() -> None:
    state = ExporterState(top_files=2, interval_s=1.0, backend="bpf", follow=True, pid=1)
    state.max_files = 3
    for i in range(5):
        state.add(_interval(float(i), [(f"/d/f{i}", "table", 100 + i, 0)]))
    m = _scrape_state(state)
    assert m.value("mysqlio_tracked_files") == 3
    assert m.by_path("mysqlio_file_write_bytes_total") == {"/d/f4": 104, "/d/f3": 103}
    assert m.value("mysqlio_write_bytes_total", kind="table") == sum(100 + i for i in range(5))
    # f0 was evicted: it comes back from 0 (a counter reset to Prometheus)
    state.add(_interval(5000.0, [("/d/f0", "table", 7, 0)]))
    assert _scrape_state(state).by_path("mysqlio_file_write_bytes_total")["/d/f0"] == 7


def test_hostile_path_is_a_valid_label() -> None:
    state = ExporterState(top_files=5, interval_s=1.0, backend="bpf", follow=True, pid=1)
    hostile = '/d/a"b\\c\nd\udcff'
    state.add(_interval(1.0, [(hostile, "other", 5, 0)]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_write_bytes_total") == {'/d/a"b\\c\\x0ad\\xff': 5}


def test_page_cache_writeback_causes_and_devices_accumulate() -> None:
    """Writeback per kind for every cause, per file for the causes seen; msync is a sync call;
    device counters add up across intervals; a file the server only maps ranks by its dirtied bytes."""
    state = ExporterState(top_files=1, interval_s=1.0, backend="bpf", follow=True, pid=1)
    redo = FileActivity(file=FileIdentity(1, 5), path="/d/ib_logfile0", kind="redo")
    for row in (
        OpCount(redo.file, 7, Op.DIRTY, Api.KERNEL, 8192, 0, 0),
        OpCount(redo.file, 7, Op.WRITEBACK, Api.KERNEL, 4096, 0, 0, By.MSYNC),
        OpCount(redo.file, 0, Op.WRITEBACK, Api.KERNEL, 4096, 0, 0, By.FLUSHER_PERIODIC),
        OpCount(redo.file, 7, Op.MSYNC, Api.SYSCALL, 0, 2, 0),
    ):
        redo.add(row)
    small = _interval(1.0, [("/d/t.ibd", "table", 100, 0)]).files[0]
    for t in (1.0, 2.0):
        disk = DeviceActivity(dev=0xFE10, name="vdb")
        for owner, nbytes, n in ((Owner.DEVICE, 12288, 2), (Owner.SERVER_FILE, 8192, 2), (Owner.FS, 4096, 1)):
            disk.add(DeviceCount(disk.dev, Dir.WRITE, owner, 0, 0), nbytes, n)
        state.add(Interval(time=t, interval_s=1.0, pid=1, lost_events=0, drops={}, files=[redo, small], devices=[disk]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_dirtied_bytes_total") == {"/d/ib_logfile0": 16384}  # no write, yet the busiest
    assert m.samples["mysqlio_file_writeback_bytes_total"] == [
        ({"path": "/d/ib_logfile0", "kind": "redo", "region": "", "by": "msync", **ON_THE_HOST}, 8192.0),
        ({"path": "/d/ib_logfile0", "kind": "redo", "region": "", "by": "flusher_periodic", **ON_THE_HOST}, 8192.0),
    ]
    assert m.value("mysqlio_writeback_bytes_total", kind="redo", by="msync") == 8192
    assert m.value("mysqlio_writeback_bytes_total", kind="table", by="fsync") == 0
    assert len(m.samples["mysqlio_writeback_bytes_total"]) == len(KINDS) * len(WRITEBACK_CAUSES)
    assert m.value("mysqlio_sync_ops_total", kind="redo", call="msync") == 4
    assert m.by_path("mysqlio_file_sync_ops_total", call="msync") == {"/d/ib_logfile0": 4}
    vdb = {"device": "vdb", "direction": "write"}
    assert m.value("mysqlio_device_bytes_total", owner="device", **vdb) == 24576
    assert m.value("mysqlio_device_bytes_total", owner="server_files", **vdb) == 16384
    assert m.value("mysqlio_device_bytes_total", owner="filesystem", **vdb) == 8192
    assert m.value("mysqlio_device_bytes_total", owner="other", **vdb) == 0
    assert m.value("mysqlio_device_requests_total", **vdb) == 4
    assert m.value("mysqlio_device_requests_total", device="vdb", direction="read") == 0


def test_ibdata1_regions_are_a_label() -> None:
    """ibdata1's regions are series of their own (label region); every other file's region is ""."""
    state = ExporterState(top_files=5, interval_s=1.0, backend="bpf", follow=True, pid=1)
    ibdata = FileIdentity(1, 7)
    files = [
        FileActivity(
            file=ibdata, path="/d/ibdata1", kind="system", region="doublewrite", write_bytes=2 << 20, write_ops=2
        ),
        FileActivity(file=ibdata, path="/d/ibdata1", kind="system", region="system", write_bytes=16384, write_ops=1),
        FileActivity(file=FileIdentity(1, 8), path="/d/t.ibd", kind="table", write_bytes=4096, write_ops=1),
    ]
    for t in (1.0, 2.0):
        state.add(Interval(time=t, interval_s=1.0, pid=1, lost_events=0, drops={}, files=files))
    m = _scrape_state(state)
    assert m.value("mysqlio_file_write_bytes_total", path="/d/ibdata1", region="doublewrite") == 4 << 20
    assert m.value("mysqlio_file_write_bytes_total", path="/d/ibdata1", region="system") == 32768
    assert m.value("mysqlio_file_write_bytes_total", path="/d/t.ibd", region="") == 8192
    assert len(m.samples["mysqlio_file_write_bytes_total"]) == 3
    assert m.value("mysqlio_write_bytes_total", kind="system") == 4 * (1 << 20) + 32768
