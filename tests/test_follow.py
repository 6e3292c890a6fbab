"""Following a server across restarts (mysqlio.follow), with real processes: a copy
of iogen named `mariadbd` is a server to the layout reader, its cwd its datadir.
Then through the exporter: the restart is counted, the new pid traced, and the
counters go on from where they were."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from test_exporter import start_exporter

from mysqlio.devtools.scrape import exported_files, free_port, iogen_files, scrape, scrape_after, wait_for
from mysqlio.devtools.traced import (
    COUNTERS,
    FileTotals,
    attached_line,
    read_json_line,
    report_json,
    start_top,
    stop_top,
)
from mysqlio.follow import POLL_S, ServerFollower, identity_of


def _server(binary: Path, datadir: Path, *args: str) -> subprocess.Popen[str]:
    """iogen under the name of binary, started in datadir (the layout's datadir), ready."""
    proc = subprocess.Popen(
        [str(binary), "--dir", str(datadir), "--wait", *args],
        cwd=datadir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert read_json_line(proc.stdout, 10, binary.name).get("ready") is True
    return proc


def _end(*procs: subprocess.Popen[str] | None) -> None:
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture
def mariadbd(iogen: Path, tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(iogen, bindir / "mariadbd")
    return bindir / "mariadbd"


def _dirs(tmp_path: Path, *names: str) -> list[Path]:
    out = []
    for name in names:
        d = Path(os.path.realpath(tmp_path)) / name
        d.mkdir()
        out.append(d)
    return out


def test_follower_finds_the_same_server_again(mariadbd: Path, tmp_path: Path) -> None:
    datadir, elsewhere = _dirs(tmp_path, "data", "other")
    first = _server(mariadbd, datadir)
    impostor = second = None
    stop = threading.Event()
    try:
        follower = ServerFollower(first.pid)
        assert (follower.identity.name, follower.identity.datadir) == ("mariadbd", str(datadir))
        # the server still runs: no restart, even with another server of that name around
        impostor = _server(mariadbd, elsewhere)
        assert follower.wait_for_restart(stop, timeout_s=1.2) is None

        found: list[int | None] = []
        waiter = threading.Thread(target=lambda: found.append(follower.wait_for_restart(stop, timeout_s=30)))
        waiter.start()
        first.kill()
        first.wait()
        time.sleep(3 * POLL_S)  # several polls with only the impostor (another datadir) running
        assert waiter.is_alive(), f"followed the wrong process: {found}"
        second = _server(mariadbd, datadir)
        started = time.monotonic()
        waiter.join(10)
        assert found == [second.pid]
        assert time.monotonic() - started <= 2 * POLL_S + 0.5
        assert follower.pid == second.pid

        # waiting again, on the running second server: stop interrupts it at once
        threading.Timer(0.3, stop.set).start()
        started = time.monotonic()
        assert follower.wait_for_restart(stop) is None
        assert time.monotonic() - started < 0.3 + POLL_S + 0.3
    finally:
        stop.set()
        _end(first, impostor, second)


def test_follower_finds_a_server_before_it_chdirs(mariadbd: Path, tmp_path: Path) -> None:
    """A restarted server works in the launcher's directory until it chdir()s to its
    datadir: it is found by the datadir its options give (here $MARIADB_HOME/my.cnf), so
    its probes can count it from its start; its layout, from its working directory, only
    once it works there (wait_for_chdir)."""
    datadir, launcher, home = _dirs(tmp_path, "data", "launcher", "home")
    (home / "my.cnf").write_text(f"[mysqld]\ndatadir = {datadir}\n")
    first = _server(mariadbd, datadir)
    second = None
    stop = threading.Event()
    try:
        follower = ServerFollower(first.pid)
        first.kill()
        first.wait()
        second = subprocess.Popen(
            [str(mariadbd), "--dir", str(datadir), "--wait"],
            cwd=launcher,
            env={**os.environ, "MARIADB_HOME": str(home)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert follower.wait_for_restart(stop, timeout_s=10) == second.pid
        found = identity_of(second.pid)
        assert found is not None and found.datadir == str(launcher)  # not its datadir yet
        started = time.monotonic()
        follower.wait_for_chdir(stop, timeout_s=0.3)  # it never chdir()s: waits the timeout
        assert 0.3 <= time.monotonic() - started < 1.0
    finally:
        _end(first, second)


def test_follower_matches_other_processes_by_command_line() -> None:
    """Not a server (no datadir): the same name and the same command line."""
    seconds = f"{3000 + random.random() * 1000:.6f}"  # no other `sleep` of the machine has these arguments
    first = subprocess.Popen(["sleep", seconds])
    other = again = None
    stop = threading.Event()
    try:
        wait_for("sleep to start", lambda: psutil.Process(first.pid).cmdline() == ["sleep", seconds], 5)
        follower = ServerFollower(first.pid)
        assert follower.identity.datadir is None and follower.identity.cmdline == ("sleep", seconds)
        first.kill()
        first.wait()
        other = subprocess.Popen(["sleep", seconds + "1"])
        assert follower.wait_for_restart(stop, timeout_s=3 * POLL_S) is None
        again = subprocess.Popen(["sleep", seconds])
        assert follower.wait_for_restart(stop, timeout_s=5) == again.pid
    finally:
        _end(first, other, again)


CAUGHT_WITHIN_S = 0.5  # the second run starts this long after the restarted server is up


@pytest.mark.bpf
def test_exporter_follows_a_restarted_server(bpf_ready: None, mariadbd: Path, tmp_path: Path) -> None:
    """The exporter on a `mariadbd`; it exits and another starts on the same datadir and
    does its I/O CAUGHT_WITHIN_S after its start: up goes 0 then 1, restarts 1, the new pid
    is traced, and the per-file counters are the sums of both processes' ground truth
    (cumulative across the restart, the new process counted from its first moments)."""
    (datadir,) = _dirs(tmp_path, "data")
    args = ["--scenario", "write", "--scenario", "sync", "--scenario", "reads"]
    port = free_port()
    first = _server(mariadbd, datadir, *args)
    second = exporter = None
    try:
        exporter = start_exporter(first.pid, "--listen", f"127.0.0.1:{port}")
        m = scrape(port)
        assert (m.value("mysqlio_target_pid"), m.value("mysqlio_target_up")) == (first.pid, 1)
        info = m.samples["mysqlio_target_info"][0][0]
        assert (info["process"], info["datadir"], info["follow"]) == ("mariadbd", str(datadir), "1")
        assert first.stdin is not None and first.stdout is not None
        first.stdin.write("go\n")
        first.stdin.flush()
        expected_first = iogen_files(read_json_line(first.stdout, 30, "first run"), datadir)
        assert exported_files(scrape_after(port, time.time()), datadir) == expected_first

        first.stdin.close()  # iogen exits at the end of its input
        first.wait(timeout=10)
        wait_for("up 0", lambda: scrape(port).value("mysqlio_target_up") == 0)
        m = scrape(port)
        assert (m.value("mysqlio_target_pid"), m.value("mysqlio_target_restarts_total")) == (first.pid, 0)

        second = _server(mariadbd, datadir, *args)
        # counted from its first CAUGHT_WITHIN_S, before the exporter names it: the probe kept
        # loaded and re-targeted at it (mysqlio.kept_probe); a probe opened anew took 1-2 s
        time.sleep(CAUGHT_WITHIN_S)
        assert exported_files(scrape(port), datadir) == expected_first  # nothing went back
        assert second.stdin is not None and second.stdout is not None
        second.stdin.write("go\n")
        second.stdin.flush()
        expected_second = iogen_files(read_json_line(second.stdout, 30, "second run"), datadir)
        wait_for("the second server traced", lambda: scrape(port).value("mysqlio_target_pid") == second.pid)
        m = scrape_after(port, time.time())
        assert (m.value("mysqlio_target_up"), m.value("mysqlio_target_restarts_total")) == (1, 1)
        assert 0 <= m.value("mysqlio_target_unseen_seconds") < CAUGHT_WITHIN_S
        assert m.value("mysqlio_lost_events_total") == 0
        assert set(expected_second) == set(expected_first)  # the same files: their totals add up
        assert exported_files(m, datadir) == {
            path: {c: n + expected_second[path][c] for c, n in counts.items()}
            for path, counts in expected_first.items()
        }
        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=20)
        assert exporter.returncode == 0, err
        assert f"mysqlio: pid {first.pid} exited; waiting for the next mariadbd with datadir {datadir}\n" in err
        assert f"mysqlio: exporting pid {second.pid} (mariadbd) on http://127.0.0.1:{port}/metrics\n" in err
    finally:
        _end(exporter, first, second)


@pytest.mark.bpf
def test_top_and_record_follow_a_restarted_server(bpf_ready: None, mariadbd: Path, tmp_path: Path) -> None:
    """`top --follow` and `record --follow` on a `mariadbd` that exits and comes back
    on the same datadir: both go on with the new pid, counting it from its first
    CAUGHT_WITHIN_S; top's per-file sums and the report's totals are both runs' ground
    truth added up, and the trace notes the gap."""
    (datadir,) = _dirs(tmp_path, "data")
    trace = str(tmp_path / "follow.trace")
    args = ["--scenario", "write", "--scenario", "sync"]
    first = _server(mariadbd, datadir, *args)
    second = top = rec = None
    try:
        top = start_top(first.pid, 0.3, ["--follow"])
        assert top.stdout is not None
        read_json_line(top.stdout, 30, "top")  # attached
        rec = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "record", "--follow", "-p", str(first.pid), "-o", trace],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert rec.stderr is not None and attached_line(rec.stderr).startswith("mysqlio: recording pid")
        runs = []
        seen: list[dict] = []  # top's intervals read while waiting for the restart
        for server in (first, "second"):
            if server == "second":
                second = server = _server(mariadbd, datadir, *args)
                # both count the new process within ~0.1 s of its start (probes kept loaded and
                # re-targeted: mysqlio.kept_probe); opening new probes took 1.7-4.7 s
                time.sleep(CAUGHT_WITHIN_S)
            assert isinstance(server, subprocess.Popen) and server.stdin and server.stdout
            server.stdin.write("go\n")
            server.stdin.flush()
            runs.append(
                {f["path"]: {c: f[c] for c in COUNTERS} for f in read_json_line(server.stdout, 30, "run")["files"]}
            )
            time.sleep(0.8)  # the last interval drained while the process still runs
            server.stdin.close()
            server.wait(timeout=10)
        objs, top_err = stop_top(top)
        rec.send_signal(signal.SIGINT)
        _, rec_err = rec.communicate(timeout=30)
        assert rec.returncode == 0, rec_err
    finally:
        _end(top, rec, first, second)
    expected = {p: {c: n + runs[1][p][c] for c, n in counts.items()} for p, counts in runs[0].items()}
    totals = FileTotals()
    for obj in seen + objs:
        totals.add(obj)
    assert totals.lost_events == 0
    got = {p: {c: counts[c] for c in COUNTERS} for p, counts in totals.under(str(datadir)).items()}
    assert got == expected
    assert f"mysqlio: pid {first.pid} exited; waiting for the next mariadbd with datadir {datadir}" in top_err
    report = report_json(trace)
    assert report["lost_events"] == 0
    (gap,) = report["gaps"]
    assert (gap["old_pid"], gap["new_pid"]) == (first.pid, second.pid)
    assert 0 < gap["from_t"] < gap["to_t"]
    by_path = {f["path"]: f for f in report["files"] if f["path"].startswith(f"{datadir}/")}
    assert {p: {c: by_path[p][c] for c in expected[p]} for p in by_path} == expected
    text = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", trace], capture_output=True, text=True, timeout=60
    ).stdout
    assert f"the server restarted: pid {first.pid} → {second.pid}" in text
