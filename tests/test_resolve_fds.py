"""Names from /proc/PID/fd: an fd number closed and given to another file while the
resolver reads it must not lend that file's name to the first one's inode (seen in CI:
iogen's reads.dat named sync.dat for an interval, the two opened one after the other
on the same fd number)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mysqlio.probe import FileIdentity
from mysqlio.resolve import FileResolver

# a process opening two files in turn on the same fd number, as fast as it can
REOPEN = """
import os, sys
a, b = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while True:
    for path in (a, b):
        fd = os.open(path, os.O_RDONLY)
        os.close(fd)
"""
SCANS_S = 5.0


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
        end = time.monotonic() + SCANS_S
        while time.monotonic() < end:
            resolver.scan_fds()
            for identity in resolver.open_files():
                if identity in inode:
                    named += 1
                    wrong += os.path.basename(resolver.resolve(identity).path) != inode[identity]
    finally:
        child.kill()
        child.wait()
    assert named > 100, named  # the files were seen open, many times
    assert wrong == 0, f"{wrong} of {named} names were another file's"
