"""`mysqlio demo -n N` runs non-interactively and leaves nothing behind."""

from __future__ import annotations

import glob
import json
import subprocess
import sys

import psutil
import pytest

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]


def _sandbox_dirs() -> set[str]:
    return set(glob.glob("/tmp/mysqlio-mariadb-*"))


def test_demo_runs_and_cleans_up(bpf_ready: None) -> None:
    before_dirs = _sandbox_dirs()
    before_servers = {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "mariadbd"}
    proc = subprocess.run(
        [sys.executable, "-m", "mysqlio", "demo", "-n", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    intervals = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(intervals) == 3
    kinds = {f["kind"] for obj in intervals for f in obj["files"] if f["write_bytes"]}
    assert {"redo", "binlog"} <= kinds
    after_servers = {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "mariadbd"}
    assert after_servers <= before_servers, "demo left a mariadbd running"
    assert _sandbox_dirs() <= before_dirs, "demo left its temp dir"
