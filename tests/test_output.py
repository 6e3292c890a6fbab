"""Plain-text and JSON output of one interval, including hostile file names."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time

from mysqlio.abi import Api, By, Dir, Op, Owner
from mysqlio.devices import DeviceActivity
from mysqlio.model import FileActivity, Interval, ThreadActivity
from mysqlio.output import format_text, write_json
from mysqlio.probe import DeviceCount, FileIdentity, OpCount


def _interval(path: str) -> Interval:
    f = FileActivity(file=FileIdentity(2049, 7), path=path, kind="table", table="db.t")
    row = OpCount(f.file, 42, Op.WRITE, Api.LIBAIO, 16384, 1, 0)
    f.add(row)
    f.threads[42] = ThreadActivity(tid=42, name="ib_pg_flush_co")
    f.threads[42].add(row)
    return Interval(time=1_800_000_000.0, interval_s=2.0, pid=9, lost_events=0, drops={}, files=[f])


def test_text_escapes_control_characters_in_names() -> None:
    text = format_text(_interval("/var/lib/mysql/db/t\x1b]0;pwned\x07\n.ibd"))
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07\\x0a.ibd" in text
    assert len(text.strip().splitlines()) == 3  # summary, header, one row: no injected line


def test_text_rates_are_per_second() -> None:
    line = format_text(_interval("/d/t.ibd")).splitlines()[2]
    assert "8.0KiB" in line and " 0.5 " in line


def test_json_fields() -> None:
    out = io.StringIO()
    write_json(_interval("/d/t\udcff.ibd"), out)
    obj = json.loads(out.getvalue())
    (f,) = obj["files"]
    assert f["write_bytes"] == 16384 and f["write_ops"] == 1 and f["apis"] == ["libaio"]
    assert f["table"] == "db.t" and f["threads"][0]["name"] == "ib_pg_flush_co"


def test_json_of_many_files_is_one_dump_of_the_whole() -> None:
    """write_json writes the files a chunk at a time: across chunk edges (none, one, 2,500
    files) the line is byte for byte the one json.dumps makes of the whole interval."""
    for n in (0, 1, 2_500):
        interval = _interval("/d/t0.ibd")
        for i in range(1, n):
            f = FileActivity(file=FileIdentity(2049, 100 + i), path=f"/d/t{i}.ibd", kind="table", table=f"db.t{i}")
            f.add(OpCount(f.file, 42, Op.WRITE, Api.SYSCALL, 4096 * i, 1, 0))
            interval.files.append(f)
        interval.files = interval.files[:n]
        out = io.StringIO()
        write_json(interval, out, notes=["a note"])
        whole = {**interval.to_json(), "notes": ["a note"]}
        assert out.getvalue() == json.dumps(whole, separators=(",", ":")) + "\n"


def _page_cache_interval() -> Interval:
    """A mapped redo log written back by msync, a table file by the kernel's flusher, a busy disk."""
    redo = FileActivity(file=FileIdentity(2049, 8), path="/d/ib_logfile0", kind="redo")
    table = FileActivity(file=FileIdentity(2049, 9), path="/d/t.ibd", kind="table")
    rows = [
        (redo, OpCount(redo.file, 42, Op.DIRTY, Api.KERNEL, 65536, 0, 0)),
        (redo, OpCount(redo.file, 42, Op.WRITEBACK, Api.KERNEL, 49152, 0, 0, By.MSYNC)),
        (redo, OpCount(redo.file, 42, Op.MSYNC, Api.SYSCALL, 0, 3, 0)),
        (table, OpCount(table.file, 42, Op.WRITE, Api.SYSCALL, 32768, 2, 0)),
        (table, OpCount(table.file, 42, Op.DIRTY, Api.KERNEL, 32768, 0, 0)),
        (table, OpCount(table.file, 0, Op.WRITEBACK, Api.KERNEL, 16384, 0, 0, By.FLUSHER_PERIODIC)),
        (table, OpCount(table.file, 42, Op.WRITEBACK, Api.KERNEL, 16384, 0, 0, By.FSYNC)),
    ]
    for f, row in rows:
        f.add(row)
        f.threads.setdefault(row.tid, ThreadActivity(tid=row.tid, name="[kernel]" if row.tid == 0 else "mariadbd"))
        f.threads[row.tid].add(row)
    disk = DeviceActivity(dev=0xFE10, name="vdb")
    for owner, nbytes, n in ((Owner.DEVICE, 98304, 6), (Owner.SERVER_FILE, 81920, 5), (Owner.FS, 16384, 1)):
        disk.add(DeviceCount(disk.dev, Dir.WRITE, owner, 0, 0), nbytes, n)
    return Interval(
        time=1_800_000_000.0, interval_s=2.0, pid=9, lost_events=0, drops={}, files=[redo, table], devices=[disk]
    )


def test_text_page_cache_columns_and_devices() -> None:
    lines = format_text(_page_cache_interval(), page_cache=True).splitlines()
    assert "dirtied 48.0KiB/s  written back 40.0KiB/s" in lines[0]
    assert lines[1].split()[-6:] == ["dirty/s", "wback/s", "written", "back", "by", "path"], lines[1]
    redo = next(line for line in lines if line.endswith("/d/ib_logfile0"))
    # no write request, 3 msyncs in 2 s as syncs, its page cache: dirtied, written back by msync
    assert redo.split()[2:11] == ["0B", "0", "0B", "0", "1.5", "0", "32.0KiB", "24.0KiB", "msync"], redo
    table = next(line for line in lines if line.endswith("/d/t.ibd"))
    assert "flusher 50% / fsync 50%" in table, table
    assert lines[-2].endswith(
        "devices (what each completed per second; whose bytes: server files, direct I/O, fs, other)"
    )
    assert lines[-1].split(None, 1)[1] == (
        "vdb     W 48.0KiB/s 3 req/s (server 83%, fs 17%)  R 0B/s 0 req/s  amplification 1.20"
    )
    # without the page cache counted (SystemTap): the columns and devices of before
    plain = format_text(_page_cache_interval()).splitlines()
    assert len(plain) == 4 and "dirty/s" not in plain[1] and "devices" not in plain[-1]


def test_json_keeps_page_cache_and_devices() -> None:
    out = io.StringIO()
    write_json(_page_cache_interval(), out, notes=["a note"])
    obj = json.loads(out.getvalue())
    redo, table = obj["files"]
    assert (redo["dirtied_bytes"], redo["writeback_bytes"], redo["msync_ops"], redo["sync_ops"]) == (65536, 49152, 3, 3)
    assert redo["writeback_by"] == {"msync": 49152}
    assert table["writeback_by"] == {"fsync": 16384, "flusher_periodic": 16384}
    kernel = next(t for t in table["threads"] if t["tid"] == 0)
    assert (kernel["name"], kernel["writeback_by"]) == ("[kernel]", {"flusher_periodic": 16384})
    (disk,) = obj["devices"]
    assert (disk["name"], disk["write_bytes"], disk["write_requests"], disk["write_amplification"]) == (
        "vdb",
        98304,
        6,
        1.2,
    )
    assert disk["write_by"] == {"server_files": 81920, "server_direct": 0, "filesystem": 16384, "other": 0}
    assert obj["notes"] == ["a note"]


_BLOCKED_WRITER = """
import json, signal, sys, threading
from mysqlio.output import write_whole
stop = threading.Event()
signal.signal(signal.SIGINT, lambda *_: stop.set())
for i in range(int(sys.argv[1])):
    write_whole(sys.stdout, json.dumps({"i": i, "pad": "x" * 12000}) + "\\n")
"""


def _wait_blocked_on_pipe(pid: int) -> None:
    """Until the process sleeps in a pipe write (its reader is not reading)."""
    for _ in range(3000):
        with open(f"/proc/{pid}/wchan") as f:
            if "pipe_write" in f.read():
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never blocked writing to its pipe")


def test_a_signal_during_a_blocked_write_cuts_no_line() -> None:
    """top --json | slow reader, then Ctrl-C: each SIGINT comes while the writer is blocked
    on the full pipe; every line must still arrive whole (without write_whole's held-back
    signals, CPython lost the rest of the interrupted write in about 1 run of 5)."""
    lines, signals = 40, 5
    proc = subprocess.Popen(
        [sys.executable, "-c", _BLOCKED_WRITER, str(lines)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    out = b""
    try:
        for _ in range(signals):
            _wait_blocked_on_pipe(proc.pid)
            proc.send_signal(signal.SIGINT)
            out += proc.stdout.read(70_000)  # lets it write a few more lines, then block again
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    got = [json.loads(line)["i"] for line in (out + rest).decode().splitlines()]
    assert got == list(range(lines))
