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

# The traced process, with iogen's protocol (ready line, "go", its counts as JSON):
# thread A parks; threads are made and ended until one's tid is A's modulo the
# number of cells, which parks as B; then both pwrite() at once, each its own file.
PAIR = """
import json, os, sys, threading

directory = sys.argv[sys.argv.index("--dir") + 1]
slots = int(sys.argv[sys.argv.index("--slots") + 1])
writes = int(sys.argv[sys.argv.index("--writes") + 1])
go = threading.Event()
checked = threading.Event()
tids = {}

def writer(name):
    go.wait()
    fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"x" * 4096
    for i in range(writes):
        os.pwrite(fd, block, (i % 64) * 4096)
    os.close(fd)

def first():
    tids["a"] = threading.get_native_id()
    checked.set()
    writer("a")

def candidate():
    mine = threading.get_native_id() % slots == tids["a"] % slots
    if mine:
        tids["b"] = threading.get_native_id()
    checked.set()
    if mine:
        writer("b")

threads = [threading.Thread(target=first)]
threads[0].start()
checked.wait()
for _ in range(200_000):
    checked.clear()
    t = threading.Thread(target=candidate)
    t.start()
    checked.wait()
    if "b" in tids:
        threads.append(t)
        break
    t.join()
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
go.set()
for t in threads:
    t.join()
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
        run = run_iogen_traced(script, str(work), args)
        assert run.traced.lost_events == 0
        _check_pair(run.expected, run.traced.under(str(work)))
    work = tmp_path / "record"
    work.mkdir()
    trace = str(tmp_path / "pair.trace")
    expected = run_iogen_recorded(script, str(work), args, trace)
    report = report_json(trace)
    assert report["lost_events"] == 0
    _check_pair(expected, {f["path"]: f for f in report["files"] if f["path"].startswith(f"{work}/")})
