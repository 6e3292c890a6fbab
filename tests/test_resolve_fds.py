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

import pytest

from mysqlio.probe import FileIdentity, KernelName
from mysqlio.resolve import FileResolver, ResolvedPath

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


def test_a_file_renamed_while_open_gets_its_new_name_next_interval(tmp_path: Path) -> None:
    """MySQL >= 8.0.30 renames redo files it holds open (`#ib_redoN_tmp` -> `#ib_redoN`):
    the name read from /proc before the rename is checked once an interval, so the next
    interval shows the new one, without another unknown file to trigger a /proc read."""
    spare, live = tmp_path / "#ib_redo7_tmp", tmp_path / "#ib_redo7"
    spare.write_bytes(b"r")
    identity = FileIdentity(spare.stat().st_dev, spare.stat().st_ino)
    fd = os.open(spare, os.O_RDONLY)
    try:
        resolver = FileResolver(os.getpid(), lambda _: None)
        assert resolver.resolve(identity).path == str(spare)
        os.rename(spare, live)
        assert resolver.resolve(identity).path == str(spare)  # checked already in this interval
        resolver.new_interval()
        got = resolver.resolve(identity)
        assert (got.path, got.deleted, got.source) == (str(live), False, "fd")
        os.unlink(live)  # renamed away and deleted: the fd's name says so
        resolver.new_interval()
        got = resolver.resolve(identity)
        assert (got.path, got.deleted) == (str(live), True)
    finally:
        os.close(fd)


def test_a_name_cut_short_of_a_file_renamed_since_finds_its_new_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL writes a spare redo file's header as `#ib_redoN_tmp`, renames it `#ib_redoN`
    before it writes the log into it, and holds no fd on it between: the kernel's name (cut
    short in a deep datadir) is the old one, the new one is found in its directory; and a
    name given in an earlier interval is checked again in the next."""
    deep = tmp_path.joinpath(*"abcdefghij", "#innodb_redo")
    deep.mkdir(parents=True)
    spare, live = deep / "#ib_redo9_tmp", deep / "#ib_redo9"
    spare.write_bytes(b"h")
    st = os.stat(spare)
    identity = FileIdentity(st.st_dev, st.st_ino)
    monkeypatch.chdir(deep.parent.parent)
    cut = ".../" + "/".join(os.path.realpath(spare).split("/")[-8:])
    walked: list[KernelName | None] = [KernelName(cut, complete=False, deleted=False)]
    resolver = FileResolver(os.getpid(), lambda _file: walked[0])
    assert resolver.resolve(identity) == ResolvedPath(os.path.realpath(spare), False, "kernel+cwd")
    os.rename(spare, live)
    resolver.new_interval()
    assert resolver.resolve(identity) == ResolvedPath(os.path.realpath(live), False, "kernel+dir")
    # not walked again: the name given before is checked, and follows one more rename
    walked[0] = None
    os.rename(live, spare)
    resolver.new_interval()
    assert resolver.resolve(identity) == ResolvedPath(os.path.realpath(spare), False, "kernel+dir")
