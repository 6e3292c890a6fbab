"""The traced server is never harmed and nothing of ours outlives us."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mysqlio import abi
from mysqlio.devtools.traced import (
    attached_line,
    held_bpf_ids,
    read_json_line,
    report_json,
    run_iogen_recorded,
    run_iogen_traced,
    start_record,
    start_top,
)

pytestmark = pytest.mark.bpf


def held_prog_link_ids(pid: int) -> tuple[set[int], set[int]]:
    """(program ids, link ids) whose fds a process holds."""
    ids = held_bpf_ids(pid)
    return ids["prog"], ids["link"]


def loaded_bpf_ids() -> tuple[set[int], set[int]]:
    """(program ids, link ids) the kernel has now."""
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, check=True).stdout)
    links = json.loads(subprocess.run(["bpftool", "link", "show", "-j"], capture_output=True, check=True).stdout)
    return {p["id"] for p in progs}, {link["id"] for link in links}


def _wait_for(predicate: object, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("command", ["top", "record"])
def test_kill_9_leaves_no_probe_attached(bpf_ready: None, tmp_path: Path, command: str) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    if command == "top":
        tracer = start_top(victim.pid, interval_s=0.3)
        assert tracer.stdout is not None
        read_json_line(tracer.stdout, 30, "mysqlio top")
    else:
        tracer = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "record", "-p", str(victim.pid), "-o", str(tmp_path / "t.trace")],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert tracer.stderr is not None
        assert attached_line(tracer.stderr).startswith("mysqlio: recording pid")
    try:
        progs, links = held_prog_link_ids(tracer.pid)
        assert len(progs) >= 3 and len(links) >= 3, (progs, links)  # the probes really were attached
        loaded_progs, loaded_links = loaded_bpf_ids()
        assert progs <= loaded_progs and links <= loaded_links
        os.kill(tracer.pid, signal.SIGKILL)
        tracer.wait()

        def gone() -> bool:
            now_progs, now_links = loaded_bpf_ids()
            return not (progs & now_progs) and not (links & now_links)

        assert _wait_for(gone), "a program or link of the killed tracer is still loaded"
        assert victim.poll() is None, "the traced process was harmed"
    finally:
        victim.kill()
        victim.wait()


FILES = abi.STATS_CELLS + abi.MAX_FILE_OPS + 8000  # more rows than both hold together


def _many_files_script(pause_every: int | None) -> str:
    """A Python writer of FILES files in the directory it is given, once a line on its
    stdin says go: each opened, given 1 + i % 7 bytes and closed ("done" printed after);
    pausing 0.1 s after every `pause_every` files when given (~10,000 files a second)."""
    pause = f"    if i % {pause_every} == {pause_every - 1}:\n        time.sleep(0.1)\n" if pause_every else ""
    return (
        "import os, sys, time\n"
        "d = sys.argv[1]\n"
        "sys.stdin.readline()\n"
        f"for i in range({FILES}):\n"
        "    fd = os.open(f'{d}/f{i}', os.O_CREAT | os.O_WRONLY, 0o600)\n"
        "    os.write(fd, b'x' * (1 + i % 7))\n"
        "    os.close(fd)\n"
        f"{pause}"
        "print('done', flush=True)\n"
        "sys.stdin.readline()\n"
    )


def test_map_pressure_counts_overflow_without_misattribution(
    bpf_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More files in one interval than the kernel's stats table and hash map hold
    (16,384 rows each): overflow is counted and shown as lost events; every file
    that was counted has exactly its own bytes. The tables keep their compiled sizes
    (no growth budget): sized from a process's open-files limit, they would hold them all."""
    monkeypatch.setenv("MYSQLIO_MAP_BUDGET_MIB", "0")
    script = _many_files_script(pause_every=None)
    work = tmp_path / "many"
    work.mkdir()
    gen = subprocess.Popen(
        [sys.executable, "-c", script, str(work)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    top = start_top(gen.pid, interval_s=10.0)
    try:
        assert top.stdout is not None and gen.stdin is not None and gen.stdout is not None
        read_json_line(top.stdout, 30, "mysqlio top")
        gen.stdin.write("go\n")
        gen.stdin.flush()
        assert gen.stdout.readline().strip() == "done"
        obj = read_json_line(top.stdout, 30, "mysqlio top")
        while not obj["files"] and not obj["lost_events"]:
            obj = read_json_line(top.stdout, 30, "mysqlio top")
    finally:
        top.kill()
        top.wait()
        gen.kill()
        gen.wait()
    mine = [f for f in obj["files"] if f["path"].startswith(str(work) + "/")]
    assert obj["lost_events"] > 0 and obj["drops"]["stats_full"] > 0
    assert len(obj["files"]) + obj["drops"]["stats_full"] >= FILES
    for f in mine:
        i = int(Path(f["path"]).name[1:])
        assert (f["write_bytes"], f["write_ops"]) == (1 + i % 7, 1), f


def test_record_names_every_file_past_full_tables(
    bpf_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More files opened, written and closed than the kernel's tables hold (their compiled
    sizes: 16,384 names; 16,384 + 16,384 rows, one a file in record), at ~10,000 a second.
    record drains top's per-interval counts unread, every 5 s (at once when it finds them
    full): the files past a full table must still be named (the probe walks a file's path
    and names its thread without a row) and lose no event (record reads its events, not the
    counts). And record forgets each batch's kernel names once read (as top does each
    interval), so that its LRU of names does not fill and evict names before they are read.
    Before, thousands of such files were traced as "<dev M:m inode N>" (the 100k-file
    benchmark's unnamed files, docs/benchmarks.md), the full table counted as lost."""
    monkeypatch.setenv("MYSQLIO_MAP_BUDGET_MIB", "0")
    script = _many_files_script(pause_every=1000)
    work = Path("/dev/shm") / f"mysqlio-full-{os.getpid()}"
    work.mkdir()
    trace = str(tmp_path / "full.trace")
    gen = subprocess.Popen(
        [sys.executable, "-c", script, str(work)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    rec = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        rec = start_record(gen.pid, trace)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        started = time.monotonic()
        assert gen.stdout.readline().strip() == "done"
        took = time.monotonic() - started
        time.sleep(1.0)  # a flush after the last file
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
    finally:
        if rec is not None and rec.poll() is None:
            rec.kill()
            rec.wait()
        gen.kill()
        gen.wait()
        shutil.rmtree(work, ignore_errors=True)
    report = report_json(trace)
    prefix = str(work) + "/"
    mine = {f["path"]: f for f in report["files"] if f["path"].startswith(prefix)}
    others = [f["path"] for f in report["files"] if not f["path"].startswith(prefix)]
    assert report["lost_events"] == 0, report.get("lost_by_reason")
    assert len(mine) == FILES, (len(mine), others[:5], len(others), f"{took:.1f} s")
    for path, f in mine.items():
        i = int(Path(path).name[1:])
        assert (f["write_bytes"], f["write_ops"]) == (1 + i % 7, 1), f


def test_disk_full_during_record(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """ENOSPC mid-recording: one line, non-zero exit, and the trace still reads back."""
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(full)], check=True)
    gen = subprocess.Popen(
        [str(iogen), "--dir", "/dev/shm", "--rate", "50000", "--seconds", "20"], stdout=subprocess.DEVNULL
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mysqlio", "record", "-p", str(gen.pid), "-o", str(full / "t.trace"), "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode != 0
        assert proc.stderr.strip().splitlines() == [
            f"mysqlio: cannot write trace {full}/t.trace: No space left on device"
        ]
        report = subprocess.run(
            [sys.executable, "-m", "mysqlio", "report", str(full / "t.trace"), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert json.loads(report.stdout)["truncated"] is True
    finally:
        gen.kill()
        gen.wait()
        subprocess.run(["umount", str(full)], check=False)
        Path("/dev/shm/rate.dat").unlink(missing_ok=True)


def test_tracing_drops_nothing_into_the_traced_directory(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """`top` and `record` on a process leave no file in the directory it writes:
    afterwards that directory holds exactly the files iogen says it made."""
    work = tmp_path / "data"
    work.mkdir()
    trace = str(tmp_path / "t.trace")
    run = run_iogen_traced(str(iogen), str(work), [])
    run_iogen_recorded(str(iogen), str(work), [], trace)
    made = {os.path.basename(f["path"]) for f in run.expected["files"] if not f["deleted"]}
    assert sorted(os.listdir(work)) == sorted(made)


def test_no_shell_is_ever_spawned() -> None:
    """Every subprocess of the package takes an argument list; nothing goes through a shell."""
    package = Path(__file__).resolve().parent.parent / "tracer"
    offenders = [
        f"{path.name}:{n}"
        for path in sorted(package.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if any(call in line for call in ("shell=True", "os.system(", "os.popen(", "commands.getoutput"))
    ]
    assert offenders == []
