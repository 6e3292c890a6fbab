"""Two threads whose tids share an in-flight cell (`inflight_slot` in
probes/mysqlio.bpf.c: a thread's slot is one of two cells of an array, chosen by
its tid), both inside syscalls at once: neither loses a request, none is counted lost.
Only a tid's first cell is shared here; their second cells collide with odds of
1 in INFLIGHT_SLOTS."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mysqlio import kernel_features
from mysqlio.abi import INFLIGHT_SLOTS
from mysqlio.devtools.traced import COUNTERS, report_json, run_iogen_recorded, run_iogen_traced

pytestmark = pytest.mark.bpf

WRITES = 20_000  # per thread, 4 KiB each
# Finding B makes and ends up to a turn of the tids of threads (pid_max): about
# 2 s on a quiet 2-core machine; iogen's 10 s was too short once (CI, stop 50).
SEARCH_TIMEOUT_S = 120

# The traced process, with iogen's protocol (ready line, "go", its counts as JSON):
# thread A parks; threads are made and ended until one's tid is A's modulo the
# number of cells, which parks as B; then both pwrite() at once, each its own file.
# With pid_max 32768 (2 cores) one tid alone can be B, and a live task may hold
# it: after a full turn of the tids without B, A is released and another parks.
PAIR = """
import json, os, sys, threading

directory = sys.argv[sys.argv.index("--dir") + 1]
slots = int(sys.argv[sys.argv.index("--slots") + 1])
writes = int(sys.argv[sys.argv.index("--writes") + 1])
with open("/proc/sys/kernel/pid_max") as f:
    turn = int(f.read()) + 1000

def writer(name):
    fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"x" * 4096
    for i in range(writes):
        os.pwrite(fd, block, (i % 64) * 4096)
    os.close(fd)

class Parked:
    \"\"\"A thread that parks if its tid shares `match`'s first cell (any tid
    without `match`), then writes `name` once started, or ends if name is None.\"\"\"

    def __init__(self, match=None):
        self.match, self.tid, self.name = match, None, None
        self.known, self.started = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()
        self.known.wait()

    def run(self):
        tid = threading.get_native_id()
        if self.match is None or tid % slots == self.match % slots:
            self.tid = tid
        self.known.set()
        if self.tid is None:
            return
        self.started.wait()
        if self.name:
            writer(self.name)

a = b = None
for _ in range(8):
    a = Parked()
    for _ in range(turn):
        candidate = Parked(match=a.tid)
        if candidate.tid is not None:
            b = candidate
            break
        candidate.thread.join()
    if b:
        break
    a.started.set()
    a.thread.join()
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
tids = {"a": a.tid}
threads = [a]
if b:
    tids["b"] = b.tid
    threads.append(b)
for name, t in zip(tids, threads):
    t.name = name
for t in threads:
    t.started.set()
for t in threads:
    t.thread.join()
files = [
    {"path": os.path.join(directory, n), "write_bytes": writes * 4096, "write_ops": writes, "read_bytes": 0,
     "read_ops": 0, "sync_ops": 0, "fsync_ops": 0, "fdatasync_ops": 0, "sync_file_range_ops": 0, "errors": 0}
    for n in sorted(tids)
]
print(json.dumps({"files": files, "tids": tids}), flush=True)
sys.stdin.readline()
"""


def _pair(tmp_path: Path) -> str:
    script = tmp_path / "pair.py"
    script.write_text(f"#!{sys.executable}\n{PAIR}")
    script.chmod(0o755)
    return str(script)


def _check_pair(expected: dict, got: dict[str, dict]) -> None:
    tids = expected["tids"]
    assert sorted(tids) == ["a", "b"], f"no thread found sharing A's cell: {tids}"
    assert tids["a"] != tids["b"] and tids["a"] % INFLIGHT_SLOTS == tids["b"] % INFLIGHT_SLOTS
    want = {f["path"]: f for f in expected["files"]}
    assert sorted(got) == sorted(want)
    for path, counts in want.items():
        assert {c: got[path][c] for c in COUNTERS} == {c: counts[c] for c in COUNTERS}, path


@pytest.mark.parametrize("missing", ["", "-task_pt_regs"])
def test_threads_sharing_a_cell_lose_nothing(
    bpf_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """`record` (its enter programs fill the cells) and `top` (without
    bpf_task_pt_regs, the cell holds every syscall's arguments until its exit)."""
    monkeypatch.setenv(kernel_features.FEATURES_ENV, missing)
    args = ["--slots", str(INFLIGHT_SLOTS), "--writes", str(WRITES)]
    script = _pair(tmp_path)
    if missing:
        work = tmp_path / "top"
        work.mkdir()
        run = run_iogen_traced(script, str(work), args, ready_timeout_s=SEARCH_TIMEOUT_S)
        assert run.traced.lost_events == 0
        _check_pair(run.expected, run.traced.under(str(work)))
    work = tmp_path / "record"
    work.mkdir()
    trace = str(tmp_path / "pair.trace")
    expected = run_iogen_recorded(script, str(work), args, trace, ready_timeout_s=SEARCH_TIMEOUT_S)
    report = report_json(trace)
    assert report["lost_events"] == 0
    _check_pair(expected, {f["path"]: f for f in report["files"] if f["path"].startswith(f"{work}/")})
