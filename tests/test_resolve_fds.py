"""Names from /proc/PID/fd: an fd number closed and given to another file while the
resolver reads it must not lend that file's name to the first one's inode (seen in CI:
iogen's reads.dat named sync.dat for an interval, the two opened one after the other
on the same fd number, and on 2 cores the number can go A, B, A between two reads)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mysqlio.probe import FileIdentity
from mysqlio.resolve import FileResolver

# a process opening two files in turn on the same fd number, each held open for a
# short span that varies (so that scans running on the other core see them open),
# closed and the other opened at once
REOPEN = """
import os, sys
a, b = sys.argv[1], sys.argv[2]
print("ready", flush=True)
held = 0
while True:
    for path in (a, b):
        fd = os.open(path, os.O_RDONLY)
        held = (held + 7) % 40
        for _ in range(held):
            pass
        os.close(fd)
"""
SCANS_MAX_S = 10.0
NAMED_ENOUGH = 5_000  # before the fix, wrong names came at 1 in 13 to 1 in 2,200


def test_a_reused_fd_number_never_names_another_inode(tmp_path: Path) -> None:
    a, b = tmp_path / "reads.dat", tmp_path / "sync.dat"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    inode = {FileIdentity(p.stat().st_dev, p.stat().st_ino): p.name for p in (a, b)}
    child = subprocess.Popen([sys.executable, "-c", REOPEN, str(a), str(b)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        resolver = FileResolver(child.pid, lambda _: None)
        named = wrong = 0
        end = time.monotonic() + SCANS_MAX_S
        while time.monotonic() < end and named < NAMED_ENOUGH:
            resolver.scan_fds()
            for identity in resolver.open_files():
                if identity in inode:
                    named += 1
                    wrong += os.path.basename(resolver.resolve(identity).path) != inode[identity]
    finally:
        child.kill()
        child.wait()
    assert named >= 200, named  # the files were seen open, many times
    assert wrong == 0, f"{wrong} of {named} names were another file's"
