"""Issue 61: a fresh MariaDB's start-up reads its new redo log with O_DIRECT. ib_logfile0 is
preallocated and mostly never written (unwritten extents, which the filesystem answers with
zeros without reading the disk): counted from the read bios, its disk reads are the few
blocks written, not the tens of MB the reads returned, and the server's files' disk reads add
up to the kernel's own /proc/PID/io read_bytes, less the filesystem's metadata blocks. The
server is traced from its first instruction: a shell that waits for a line, then execs
mariadbd under the same pid. (MariaDB's InnoDB on libaio submits one iocb a call: its direct
reads count from their bios too.) About 15 s."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_warmup import linked_files, read_into_page_cache

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.traced import FileTotals, read_json_line, start_top, stop_top

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]

MIB = 1 << 20
METADATA_SLACK = 256 << 10


def _read_bytes(pid: int) -> int:
    """The kernel's count of the bytes the process's bios read (/proc/PID/io)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io: no read_bytes")


def _wait_ready(db: MariaDB, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not (os.path.exists(db.socket) and db._ping()):
        assert proc.poll() is None, f"mariadbd exited {proc.returncode}: see {db.base_dir}/mariadbd.out"
        assert time.monotonic() < deadline, "mariadbd did not answer within the timeout"
        time.sleep(0.1)


def test_fresh_redo_log_is_read_from_the_disk_as_written(bpf_ready: None) -> None:
    db = MariaDB(MariaDBOptions(innodb_backend="aio", log_bin=False))
    server = db._server_binary(db.SERVER)
    proc: subprocess.Popen[bytes] | None = None
    top = None
    try:
        # the datadir bootstrapped (by another process), then the server held before its exec
        db._make_layout()
        db._install_db(server, time.monotonic() + 120)
        with open(os.path.join(db.base_dir, "mariadbd.out"), "ab") as log:
            proc = subprocess.Popen(
                [
                    "sh",
                    "-c",
                    'read go; exec "$0" "$@"',
                    server,
                    f"--defaults-file={db.config_file}",
                    f"--user={db.USER}",
                ],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        assert proc.stdin is not None
        # the binary and its libraries cached: their pages faulted in from the disk at exec
        # and start-up would be in the kernel's count and in no file's row
        read_into_page_cache(linked_files(server))
        top = start_top(proc.pid, interval_s=0.5)
        assert top.stdout is not None
        totals = FileTotals()
        totals.add(read_json_line(top.stdout, 60, "mysqlio top"))
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        _wait_ready(db, proc, 60)
        # stopped, its reads are over: the kernel's count and the intervals' hold still
        os.kill(proc.pid, signal.SIGSTOP)
        kernel_reads = _read_bytes(proc.pid)
        time.sleep(1.2)
        objects, _ = stop_top(top)
        os.kill(proc.pid, signal.SIGCONT)
        for obj in objects:
            totals.add(obj)
    finally:
        if top is not None and top.poll() is None:
            top.kill()
            top.wait()
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
        db.stop()
    redo = totals.totals[os.path.join(db.datadir, "ib_logfile0")]
    # start-up reads much of the log; the disk gives only what was written of it
    assert redo["read_bytes"] > 16 * MIB, redo
    assert 0 < redo["disk_read_bytes"] == redo["direct_read_bytes"] < redo["read_bytes"] // 100, redo
    disk_reads = sum(c["disk_read_bytes"] for c in totals.totals.values())
    # the kernel's count has, besides the files' data, the filesystem's own blocks the
    # server's threads read (an inode table or directory block an open needs, not cached)
    # and any page of a mapped file faulted in from the disk (a plugin's): a few pages
    # here, where counting the redo log's zeros was tens of MB
    assert 0 <= kernel_reads - disk_reads <= METADATA_SLACK, (disk_reads, kernel_reads)
    print(
        f"ib_logfile0: {redo['read_bytes']} B read, {redo['disk_read_bytes']} B from the disk; "
        f"all files {disk_reads} B from the disk, /proc/PID/io read_bytes {kernel_reads}"
    )
