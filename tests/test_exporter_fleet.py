"""`mysqlio exporter --all`: every server of the host in one exporter, with real processes
(copies of iogen named `mariadbd`, their cwd their datadir, as in test_follow.py).

Started before any of them, the exporter finds both, labels each one's series with its
datadir (`server`), counts each exactly (iogen's ground truth), and follows one through a
restart (counted from its first moments: its probe kept and re-targeted) while the other
goes on untouched."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_follow import CAUGHT_WITHIN_S, _server

from mysqlio.devtools.scrape import (
    EXPORTER_INTERVAL_S,
    Metrics,
    exported_files,
    free_port,
    iogen_files,
    scrape,
    wait_for,
)
from mysqlio.devtools.traced import read_json_line

pytestmark = [pytest.mark.bpf]
ARGS = ("--scenario", "write", "--scenario", "sync", "--scenario", "reads")


def _run(proc: subprocess.Popen[str], datadir: Path) -> dict[str, dict[str, int]]:
    """Let iogen do its I/O; its ground truth per file."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return iogen_files(read_json_line(proc.stdout, 30, "iogen run"), datadir)


def _value(m: Metrics, name: str, server: str) -> float:
    return m.value(name, server=server)


def _sampled_after(port: int, server: str, t: float) -> Metrics:
    """A scrape holding everything that server's process did before time t."""
    first = [0.0]

    def after() -> bool:
        first[0] = _value(scrape(port), "mysqlio_last_sample_timestamp_seconds", server)
        return first[0] > t

    wait_for("a sample after the run", after)
    wait_for(
        "the next sample", lambda: _value(scrape(port), "mysqlio_last_sample_timestamp_seconds", server) > first[0]
    )
    return scrape(port)


def _end(*procs: subprocess.Popen[str] | None) -> None:
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


def test_all_servers_labelled_exact_and_followed(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    mariadbd = bindir / "mariadbd"
    shutil.copy(iogen, mariadbd)
    dirs = [Path(os.path.realpath(tmp_path)) / name for name in ("a", "b")]
    for d in dirs:
        d.mkdir()
    a_dir, b_dir = dirs
    a_label, b_label = str(a_dir), str(b_dir)
    port = free_port()
    exporter = subprocess.Popen(
        [
            *(sys.executable, "-m", "mysqlio", "exporter", "--all", "-i", str(EXPORTER_INTERVAL_S)),
            *("--listen", f"127.0.0.1:{port}", "--top-files", "200"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    a = b = a2 = None
    try:
        assert exporter.stderr is not None
        ready, _, _ = select.select([exporter.stderr], [], [], 60)
        line = exporter.stderr.readline() if ready else ""
        assert line == f"mysqlio: exporting every mysqld / mariadbd of this host on http://127.0.0.1:{port}/metrics\n"
        # both servers start after the exporter
        a, b = _server(mariadbd, a_dir, *ARGS), _server(mariadbd, b_dir, *ARGS)

        def both_traced() -> bool:
            m = scrape(port)
            return all(
                any(lab.get("server") == s and v == 1 for lab, v in m.samples.get("mysqlio_target_up", []))
                for s in (a_label, b_label)
            )

        wait_for("both servers traced", both_traced, timeout_s=60)
        m = scrape(port)
        assert _value(m, "mysqlio_target_pid", a_label) == a.pid
        assert _value(m, "mysqlio_target_pid", b_label) == b.pid

        expected_a, expected_b = _run(a, a_dir), _run(b, b_dir)
        t = time.time()
        _sampled_after(port, a_label, t)
        m = _sampled_after(port, b_label, t)
        assert exported_files(m, a_dir) == expected_a
        assert exported_files(m, b_dir) == expected_b
        # each server's files under its own label only
        for lab, _v in m.samples["mysqlio_file_write_bytes_total"]:
            if lab["path"].startswith(a_label + "/"):
                assert lab["server"] == a_label
            if lab["path"].startswith(b_label + "/"):
                assert lab["server"] == b_label
        assert _value(m, "mysqlio_lost_events_total", a_label) == 0
        assert _value(m, "mysqlio_lost_events_total", b_label) == 0

        # a exits: its series stay, up 0; b is untouched
        assert a.stdin is not None
        a.stdin.close()
        a.wait(timeout=10)
        wait_for("a down", lambda: _value(scrape(port), "mysqlio_target_up", a_label) == 0)
        assert _value(scrape(port), "mysqlio_target_up", b_label) == 1
        # a restarts (same datadir): traced again, counted as a restart, totals go on
        a2 = _server(mariadbd, a_dir, *ARGS)
        # its I/O CAUGHT_WITHIN_S after its start counted: the probe kept and re-targeted
        time.sleep(CAUGHT_WITHIN_S)
        expected_a2 = _run(a2, a_dir)
        wait_for("a traced again", lambda: _value(scrape(port), "mysqlio_target_pid", a_label) == a2.pid, 60)
        m = _sampled_after(port, a_label, time.time())
        assert _value(m, "mysqlio_target_restarts_total", a_label) == 1
        assert _value(m, "mysqlio_target_restarts_total", b_label) == 0
        assert exported_files(m, a_dir) == {
            path: {c: n + expected_a2[path][c] for c, n in counts.items()} for path, counts in expected_a.items()
        }
        assert exported_files(m, b_dir) == expected_b

        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=30)
        assert exporter.returncode == 0, err
        assert "Traceback" not in err
    finally:
        _end(exporter, a, b, a2)


def test_all_and_pid_are_exclusive() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mysqlio", "exporter", "--all", "-p", "1"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr
    assert "Traceback" not in result.stderr
