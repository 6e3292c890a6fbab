"""Latency, proven against latency we impose and measure independently.

iogen's latency scenario does queue-depth-1 O_DIRECT writes and fdatasyncs
through pwrite64/fdatasync, libaio and io_uring on an ext4 loop device whose
writes are throttled to 5 IOPS for iogen's cgroup (tests/throttled_disk.py):
every throttled block write waits ~1/5 s. iogen also times each request itself
(clock_gettime around submission and completion). `top` (in-kernel histograms)
and `record` + `report` (per-event latency) must land within 10 % of both.
"""

from __future__ import annotations

import json
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from throttled_disk import ThrottledDisk, throttled_disk

from mysqlio.devtools.traced import attached_line, read_json_line, report_json, start_iogen
from mysqlio.probe import lost_events

WRITE_IOPS = 5
IMPOSED_NS = 1e9 / WRITE_IOPS
COUNT = 10  # timed requests per API and op
TOLERANCE = 0.10
APIS = ("syscall", "libaio", "io_uring")

pytestmark = pytest.mark.usefixtures("bpf_ready")


@pytest.fixture(scope="module")
def disk() -> Iterator[ThrottledDisk]:
    try:
        with throttled_disk(WRITE_IOPS) as d:
            yield d
    except RuntimeError as exc:  # no loop device / blkio here: fail, never skip
        pytest.fail(f"cannot build a throttled disk: {exc}")


def _start_tracer(argv: list[str], ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    line = attached_line(proc.stderr)
    assert line.startswith(ready), line
    return proc


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out


def nearest_rank(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, -(-len(ordered) * q // 100)) - 1]


def close(measured: float, truth: float) -> bool:
    return abs(measured - truth) <= TOLERANCE * truth


@pytest.fixture(scope="module")
def run(disk: ThrottledDisk, iogen: Path) -> dict[str, Any]:
    """One latency run traced by top (one long interval) and record at once."""
    work = tempfile.mkdtemp(dir=disk.mount)
    trace = str(Path(tempfile.mkdtemp()) / "lat.trace")
    gen = start_iogen(str(iogen), work, ["--scenario", "latency", "--count", str(COUNT)], disk.enter_cgroup)
    tracers = []
    try:
        top = _start_tracer(["top", "-p", str(gen.pid), "--json", "--latency", "-i", "600"], "mysqlio: tracing pid")
        tracers.append(top)
        rec = _start_tracer(["record", "-p", str(gen.pid), "-o", trace], "mysqlio: recording pid")
        tracers.append(rec)
        assert gen.stdin is not None and gen.stdout is not None
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 120, "iogen latency run")
        intervals = [json.loads(line) for line in _stop(top).splitlines() if line.strip()]
        _stop(rec)
    finally:
        for proc in tracers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if gen.stdin:
            gen.stdin.close()
        gen.wait(timeout=30)
    assert len(intervals) == 1, "the whole run must fall in top's one interval"
    return {
        "expected": expected,
        "top": intervals[0],
        "report": report_json(trace),
        "timeline": report_json(trace, "--latency")["latency_over_time"],
        "text": subprocess.run(
            [sys.executable, "-m", "mysqlio", "report", trace, "--latency"], capture_output=True, text=True, timeout=120
        ).stdout,
    }


def _truth(run: dict[str, Any], api: str, op: str) -> tuple[str, list[int]]:
    (series,) = [s for s in run["expected"]["latency"] if s["api"] == api and s["op"] == op]
    return series["path"], series["ns"]


def _show(label: str, ours: dict[str, int], truth: list[int]) -> None:
    print(
        f"{label:<28} ours p50 {ours['p50_ns'] / 1e6:7.1f} ms  p99 {ours['p99_ns'] / 1e6:7.1f}  max "
        f"{ours['max_ns'] / 1e6:7.1f}  | iogen p50 {nearest_rank(truth, 50) / 1e6:7.1f}  max {max(truth) / 1e6:7.1f}"
    )


@pytest.mark.parametrize("api", APIS)
def test_top_write_latency_matches_imposed_and_measured(run: dict[str, Any], api: str) -> None:
    path, truth = _truth(run, api, "write")
    (row,) = [f for f in run["top"]["files"] if f["path"] == path]
    ours = row["latency"]["write"]
    _show(f"top {api} write", ours, truth)
    # COUNT timed O_DIRECT writes plus the untimed buffered write that laid the file out
    assert ours["count"] == COUNT + 1
    assert close(ours["p50_ns"], nearest_rank(truth, 50)), (ours, truth)
    assert close(ours["p50_ns"], IMPOSED_NS), (ours, IMPOSED_NS)
    assert close(ours["p99_ns"], max(truth)), (ours, truth)
    assert close(ours["max_ns"], max(truth)) and ours["max_ns"] <= max(truth)


@pytest.mark.parametrize("api", APIS)
def test_top_sync_latency_matches_measured(run: dict[str, Any], api: str) -> None:
    path, truth = _truth(run, api, "fdatasync")
    (row,) = [f for f in run["top"]["files"] if f["path"] == path]
    ours = row["latency"]["sync"]
    _show(f"top {api} fdatasync", ours, truth)
    assert ours["count"] == COUNT
    assert close(ours["p50_ns"], nearest_rank(truth, 50)), (ours, truth)
    assert close(ours["max_ns"], max(truth)) and ours["max_ns"] <= max(truth)


@pytest.mark.parametrize("api", APIS)
def test_report_latency_matches_imposed_and_measured(run: dict[str, Any], api: str) -> None:
    by_path = {f["path"]: f for f in run["report"]["files"]}
    path, truth = _truth(run, api, "write")
    ours = by_path[path]["write_latency_ns"]
    assert close(ours["p50"], nearest_rank(truth, 50)), (ours, truth)
    assert close(ours["p50"], IMPOSED_NS), (ours, IMPOSED_NS)
    assert close(ours["max"], max(truth)) and ours["max"] <= max(truth)
    path, truth = _truth(run, api, "fdatasync")
    ours = by_path[path]["sync_latency_ns"]
    assert close(ours["p50"], nearest_rank(truth, 50)), (ours, truth)
    assert ours["max"] <= max(truth)


def test_report_latency_over_time_follows_the_slowest_files(run: dict[str, Any]) -> None:
    timeline = run["timeline"]
    slow = {(p["path"], p["op"]) for p in timeline["files"][:2]}
    # the slowest: fdatasync through syscall and io_uring (two throttled writes each;
    # libaio's fdatasync runs in a kernel worker outside the throttled cgroup)
    assert slow == {(_truth(run, api, "fdatasync")[0], "sync") for api in ("syscall", "io_uring")}
    measured = {(path, op): ns for s in run["expected"]["latency"] for path, op, ns in [(s["path"], s["op"], s["ns"])]}
    for i, pair in enumerate(timeline["files"]):
        cells = [s["latency"][i] for s in timeline["seconds"] if s["latency"][i]]
        assert sum(c["count"] for c in cells) >= COUNT
        if pair["op"] != "sync":
            continue  # a write file also had its untimed layout write: no truth for that second
        truth = measured[(pair["path"], "fdatasync")]
        for c in cells:  # each second's slowest request is one iogen timed itself
            assert any(close(c["max_ns"], t) for t in truth), (pair, c, truth)
            assert c["p50_ns"] <= c["p99_ns"] <= c["max_ns"]
    assert "Latency over time of the slowest files" in run["text"]
    assert "lat-syscall-sync.dat" in run["text"] and "sync p99" in run["text"]


def test_strace_agrees_on_the_syscall_path(disk: ThrottledDisk, iogen: Path) -> None:
    """Once, an independent tracer: strace -T's times of the same pwrite64 calls."""
    work = tempfile.mkdtemp(dir=disk.mount)
    gen = start_iogen(str(iogen), work, ["--scenario", "latency", "--count", "5"], disk.enter_cgroup)
    top = strace = None
    try:
        top = _start_tracer(["top", "-p", str(gen.pid), "--json", "--latency", "-i", "600"], "mysqlio: tracing pid")
        strace = subprocess.Popen(
            ["strace", "-T", "-e", "trace=pwrite64", "-p", str(gen.pid)],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert strace.stderr is not None
        assert "attached" in strace.stderr.readline()
        assert gen.stdin is not None and gen.stdout is not None
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 120, "iogen latency run")
        (top_json,) = [json.loads(x) for x in _stop(top).splitlines() if x.strip()]
        strace.send_signal(signal.SIGINT)
        _, strace_err = strace.communicate(timeout=30)
    finally:
        for proc in (top, strace):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if gen.stdin:
            gen.stdin.close()
        gen.wait(timeout=30)
    (series,) = [s for s in expected["latency"] if s["api"] == "syscall" and s["op"] == "write"]
    # the O_DIRECT overwrites: 4096-byte pwrite64 calls of lat-syscall.dat (the layout write is larger)
    strace_s = [float(t) for t in re.findall(r'pwrite64\(\d+, ".*?"\.*, 4096, \d+\) = 4096 <([\d.]+)>', strace_err)]
    assert len(strace_s) >= 5, strace_err[-2000:]
    # the last 5 such calls are the timed ones (the fdatasync phase writes buffered 4 KiB too)
    (row,) = [f for f in top_json["files"] if f["path"] == series["path"]]
    ours = row["latency"]["write"]
    strace_median_ns = statistics.median(strace_s[:5]) * 1e9
    print(f"strace -T median {strace_median_ns / 1e6:.1f} ms, mysqlio p50 {ours['p50_ns'] / 1e6:.1f} ms")
    assert close(ours["p50_ns"], strace_median_ns)


@pytest.mark.parametrize("case", ["no submission tracepoint", "untimed"])
def test_io_uring_requests_are_counted_not_timed(
    iogen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """io_uring requests counted exactly, with no latency, in two cases. A kernel without
    a submission tracepoint that carries the request: the probe leaves its submit program
    out (simulated by taking the feature away). And top without --latency, which times
    nothing, io_uring included, though its submissions are seen (for their offsets): the
    kernel fills no histogram (read after start_timing(), which drains the maps the
    programs wrote)."""
    from mysqlio import bpf_probe as probe_mod
    from mysqlio import kernel_features
    from mysqlio.abi import Api
    from mysqlio.model import PAGE_CACHE_OPS

    untimed = case == "untimed"
    if not untimed:
        monkeypatch.setenv(kernel_features.FEATURES_ENV, "-uring_submit")
    gen = start_iogen(str(iogen), str(tmp_path), ["--scenario", "uring"])
    try:
        with probe_mod.BpfProbe(gen.pid, timed=not untimed) as probe:
            if untimed and probe.timed:
                pytest.fail("this kernel has no bpf_task_pt_regs: the probe cannot open untimed")
            assert probe.uring_latency is untimed  # submissions seen: they could be timed
            assert gen.stdin is not None and gen.stdout is not None
            gen.stdin.write("go\n")
            gen.stdin.flush()
            expected = read_json_line(gen.stdout, 60, "iogen uring")
            rows = probe.drain()
            if untimed:
                probe.start_timing()
            latencies = probe.drain_latency()
    finally:
        if gen.stdin:
            gen.stdin.close()
        gen.wait(timeout=30)
    # requests only: the page cache's writeback rows of io_uring's fsync carry its API too
    uring_ops = sum(r.ops for r in rows if r.api is Api.IO_URING and r.op not in PAGE_CACHE_OPS)
    truth = sum(f["write_ops"] + f["read_ops"] + f["sync_ops"] for f in expected["files"])
    assert uring_ops == truth > 0
    assert not [lat for lat in latencies if lat.api is Api.IO_URING]


def test_requests_never_completed_are_aged_out_and_counted(
    disk: ThrottledDisk, iogen: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pending tables forget requests older than PENDING_MAX_AGE_S. With the age
    cut to 50 ms, the ~200 ms throttled libaio and io_uring requests get aged out
    while in flight: each is counted once as aged_out, and its completion, which
    comes later, once as lat_unmatched (its latency unknown, its bytes counted).
    The tables end empty."""
    from mysqlio import bpf_probe as probe_mod

    monkeypatch.setattr(probe_mod, "PENDING_MAX_AGE_S", 0.05)
    monkeypatch.setattr(probe_mod, "AGING_EVERY_S", 0.0)
    work = tempfile.mkdtemp(dir=disk.mount)
    gen = start_iogen(str(iogen), work, ["--scenario", "latency", "--count", "3"], disk.enter_cgroup)
    try:
        with probe_mod.BpfProbe(gen.pid) as probe:
            assert gen.stdin is not None and gen.stdout is not None
            gen.stdin.write("go\n")
            gen.stdin.flush()
            while not select.select([gen.stdout], [], [], 0.02)[0]:
                probe.drain_latency()  # ages the pending tables every call
            read_json_line(gen.stdout, 5, "iogen latency run")
            probe.drain_latency()
            drops = probe.drops().as_dict()
            left = probe.pending_requests()
    finally:
        if gen.stdin:
            gen.stdin.close()
        gen.wait(timeout=30)
    print(f"aged_out {drops['aged_out']}, lat_unmatched {drops['lat_unmatched']}, pending left {left}")
    assert drops["aged_out"] >= 6  # 3 writes through each of libaio and io_uring, at least
    assert drops["lat_unmatched"] == drops["aged_out"]
    assert left == 0
    assert lost_events(drops) == 0  # only latencies were lost, no bytes


def test_record_counts_requests_aged_out_as_lost_events(
    disk: ThrottledDisk, iogen: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In record mode the event is written at completion: a request aged out is an event
    lost (its later completion counts `unmatched` too), never a silent gap."""
    from mysqlio import bpf_probe as probe_mod

    monkeypatch.setattr(probe_mod, "PENDING_MAX_AGE_S", 0.05)
    monkeypatch.setattr(probe_mod, "AGING_EVERY_S", 0.0)
    work = tempfile.mkdtemp(dir=disk.mount)
    gen = start_iogen(str(iogen), work, ["--scenario", "latency", "--count", "3"], disk.enter_cgroup)
    try:
        with probe_mod.BpfProbe(gen.pid, record_ring_bytes=1 << 20) as probe:
            assert gen.stdin is not None and gen.stdout is not None
            gen.stdin.write("go\n")
            gen.stdin.flush()
            while not select.select([gen.stdout], [], [], 0.02)[0]:
                probe.drain_latency()
            read_json_line(gen.stdout, 5, "iogen latency run")
            probe.drain_latency()
            drops = probe.drops().as_dict()
    finally:
        if gen.stdin:
            gen.stdin.close()
        gen.wait(timeout=30)
    print(f"aged_out_events {drops['aged_out_events']}, unmatched {drops['unmatched']}")
    assert "aged_out" not in drops
    assert drops["aged_out_events"] >= 6  # 3 writes through each of libaio and io_uring, at least
    assert lost_events(drops) >= drops["aged_out_events"]


def test_record_trace_says_which_counter_lost_its_events(
    disk: ThrottledDisk, iogen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record end to end: the requests aged out are lost events of the trace, and the
    trace keeps them by the counter that lost them (report's lost_by_reason), which
    sums to its lost total."""
    import threading
    import time

    from mysqlio import bpf_probe as probe_mod
    from mysqlio import record as record_mod
    from mysqlio.sampling import StopFlag

    stop = threading.Event()

    class StopHere(StopFlag):
        """record's stop, set by this test rather than by a signal to the test process."""

        def install(self) -> None:
            self.event = stop

    monkeypatch.setattr(probe_mod, "PENDING_MAX_AGE_S", 0.05)
    monkeypatch.setattr(probe_mod, "AGING_EVERY_S", 0.0)
    monkeypatch.setattr(record_mod, "COUNTS_DRAIN_S", 0.0)  # aged at every flush
    monkeypatch.setattr(record_mod, "StopFlag", StopHere)
    work = tempfile.mkdtemp(dir=disk.mount)
    trace = str(tmp_path / "aged.trace")
    gen = start_iogen(str(iogen), work, ["--scenario", "latency", "--count", "3"], disk.enter_cgroup)
    ran: list[dict[str, Any]] = []
    try:
        assert gen.stdin is not None and gen.stdout is not None
        stdin, stdout = gen.stdin, gen.stdout

        def drive() -> None:
            """go once the probes are attached; stop record (as Ctrl-C would) once iogen
            is done and a flush has aged out what never completed."""
            time.sleep(1.5)
            stdin.write("go\n")
            stdin.flush()
            try:
                ran.append(read_json_line(stdout, 60, "iogen latency run"))
            finally:
                time.sleep(1.5)
                stop.set()

        threading.Thread(target=drive, daemon=True).start()
        options = record_mod.RecordOptions(pid=gen.pid, output=trace, duration_s=90, quiet=True, ring_bytes=1 << 20)
        assert record_mod.run_record(options) == 0
    finally:
        stop.set()
        if gen.stdin:
            gen.stdin.close()
        gen.wait(timeout=30)
    assert ran, "iogen did not finish its run"
    report = report_json(trace)
    by_reason = report["lost_by_reason"]
    print(f"lost {report['lost_events']}: {by_reason}")
    # of the 6 writes in flight (3 through each of libaio and io_uring) those still in flight
    # at a flush are aged out; one that completes later counts `unmatched` too
    assert by_reason.get("aged_out_events", 0) >= 1
    assert set(by_reason) <= {"aged_out_events", "unmatched"}
    assert sum(by_reason.values()) == report["lost_events"]


@pytest.mark.parametrize("hook", ["tracepoints", "raw"])
def test_untimed_probe_counts_every_request_and_times_after_start_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: str
) -> None:
    """top without --latency opens the probe untimed: where the kernel gives a syscall's
    registers at exit (bpf_task_pt_regs) no enter program is attached, every request is
    still counted exactly, and none is timed. start_timing() (top's key l) attaches the
    enter programs: the requests after it are timed, each one."""
    import mmap
    import os

    from mysqlio import bpf_probe as probe_mod
    from mysqlio import syscall_hook
    from mysqlio.abi import Op

    monkeypatch.setenv(syscall_hook.HOOK_ENV, hook)
    path = tmp_path / "data"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    ino = os.fstat(fd).st_ino

    def ours(rows: list[Any]) -> list[Any]:
        return [r for r in rows if r.file.ino == ino]

    try:
        with probe_mod.BpfProbe(os.getpid(), page_cache=False, timed=False) as probe:
            assert probe.syscall_hook == hook
            assert probe.timed is not probe.features.task_pt_regs
            for i in range(10):
                os.pwrite(fd, b"x" * 4096, i * 4096)
            with mmap.mmap(fd, 4096) as mapped:  # msync's entry is seen untimed too: not timed either
                mapped[0] = ord("m")
                mapped.flush()
            rows = ours(probe.drain())
            counts = sorted((r.op, r.ops, r.bytes) for r in rows if r.op in (Op.WRITE, Op.MSYNC))
            assert counts == sorted([(Op.WRITE, 10, 40960), (Op.MSYNC, 1, 0)])
            # timed from the start only on a kernel that keeps arguments at entry
            assert bool(ours(probe.drain_latency())) is probe.timed
            probe.start_timing()
            assert probe.timed
            for i in range(7):
                os.pwrite(fd, b"y" * 512, i * 512)
            os.fsync(fd)
            os.fsync(fd)
            rows = ours(probe.drain())
            counts = sorted((r.op, r.ops, r.bytes) for r in rows)
            assert counts == sorted([(Op.WRITE, 7, 3584), (Op.FSYNC, 2, 0)])
            timed = {r.op: r.hist.count for r in ours(probe.drain_latency())}
            assert timed == {Op.WRITE: 7, Op.FSYNC: 2}
    finally:
        os.close(fd)
