"""ibdata1's regions exact at the kernel, without a server: a child process makes an
`ibdata1` with a real FSP header (page 0) and doublewrite header (page 5) in its working
directory (which mysqlio takes for its datadir), then, once `top` and `record` are
attached, writes and reads known bytes at known offsets with pwrite64, write (the file
position), pwritev, pread64 and preadv. Every byte must land in its region, in `top`
(the kernel's aggregation) and in `report` (offline, from the offsets)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.traced import read_json_line, report_json, start_record, start_top, stop_top
from mysqlio.syscall_hook import HOOK_ENV
from mysqlio.trace import TraceReader

pytestmark = [pytest.mark.bpf]

PAGE = 16384
MiB = 1 << 20

CHILD = textwrap.dedent(
    """
    import os, struct, sys
    PAGE = 16384
    fd = os.open("ibdata1", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    page0 = bytearray(PAGE)
    struct.pack_into(">H", page0, 24, 8)        # FIL_PAGE_TYPE_FSP_HDR
    struct.pack_into(">I", page0, 38 + 16, 0x15)  # FSP_SPACE_FLAGS: full_crc32, 16 KiB
    page5 = bytearray(PAGE)
    struct.pack_into(">III", page5, PAGE - 200 + 10, 536853855, 64, 128)  # doublewrite header
    os.pwrite(fd, bytes(page0), 0)
    os.pwrite(fd, bytes(page5), 5 * PAGE)
    os.ftruncate(fd, 256 * PAGE)
    other = os.open("other.dat", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fsync(fd)
    print("ready", flush=True)
    sys.stdin.readline()
    blob = bytes(MiB := 1 << 20)
    os.pwrite(fd, blob, 64 * PAGE)                        # doublewrite: 1 MiB (block 1)
    os.pwritev(fd, [blob[:PAGE], blob[:PAGE]], 128 * PAGE)  # doublewrite: 32 KiB (block 2)
    os.pwrite(fd, blob[:PAGE], 191 * PAGE)                # doublewrite: its last page
    os.pwrite(fd, blob[:PAGE], 192 * PAGE)                # system: the page after it
    os.lseek(fd, 200 * PAGE, os.SEEK_SET)
    os.write(fd, blob[: 2 * PAGE])                        # system: 32 KiB at the file position
    os.pwritev(fd, [blob[:PAGE]], 3 * PAGE)               # change buffer
    os.pwrite(fd, blob[:PAGE], 6 * PAGE)                  # transaction system (first rseg)
    os.pwrite(fd, blob[:100], 7 * PAGE + 10)              # dictionary, inside the page
    os.pread(fd, 2 * PAGE, 100 * PAGE)                    # doublewrite: read 32 KiB
    os.lseek(fd, 70 * PAGE, os.SEEK_SET)
    os.read(fd, PAGE)                                     # doublewrite: read at the file position
    os.readv(fd, [bytearray(PAGE)])                       # doublewrite: the next page, readv
    app = os.open("ibdata1", os.O_WRONLY | os.O_APPEND)
    os.lseek(app, 3 * PAGE, os.SEEK_SET)                  # an append ignores the position
    os.write(app, blob[:PAGE])                            # system: appended at 256 pages
    os.writev(app, [blob[:PAGE]])                         # system: appended at 257 pages
    os.preadv(fd, [bytearray(PAGE)], 5 * PAGE)            # transaction system: read a page
    os.pwrite(other, blob[:4096], 64 * PAGE)              # another file: never a region
    os.fsync(fd)                                          # a sync: the whole file's row
    print("done", flush=True)
    sys.stdin.readline()
    """
)

# region -> (write bytes, write ops, read bytes, read ops, fsyncs)
EXPECTED = {
    "doublewrite": (MiB + 2 * PAGE + PAGE, 3, 4 * PAGE, 3, 0),
    "system": (PAGE + 2 * PAGE + 2 * PAGE, 4, 0, 0, 0),
    "change buffer": (PAGE, 1, 0, 0, 0),
    "transaction system": (PAGE, 1, PAGE, 1, 0),
    "dictionary": (100, 1, 0, 0, 0),
    "": (0, 0, 0, 0, 1),
}
FIELDS = ("write_bytes", "write_ops", "read_bytes", "read_ops", "fsync_ops")
# (op, offset, bytes) of every request to ibdata1 after "go", in order: the offsets of the
# requests at the file position (read, readv, O_APPEND write and writev) are read at exit
EXPECTED_EVENTS = [
    ("write", 64 * PAGE, MiB),
    ("write", 128 * PAGE, 2 * PAGE),
    ("write", 191 * PAGE, PAGE),
    ("write", 192 * PAGE, PAGE),
    ("write", 200 * PAGE, 2 * PAGE),
    ("write", 3 * PAGE, PAGE),
    ("write", 6 * PAGE, PAGE),
    ("write", 7 * PAGE + 10, 100),
    ("read", 100 * PAGE, 2 * PAGE),
    ("read", 70 * PAGE, PAGE),
    ("read", 71 * PAGE, PAGE),
    ("write", 256 * PAGE, PAGE),
    ("write", 257 * PAGE, PAGE),
    ("read", 5 * PAGE, PAGE),
    ("fsync", -1, 0),
]


def _line(proc: subprocess.Popen[str], want: str) -> None:
    assert proc.stdout is not None
    got = proc.stdout.readline().strip()
    assert got == want, f"child said {got!r}, not {want!r}"


def _top_regions(objects: list[dict[str, Any]], path: str) -> dict[str, tuple[int, ...]]:
    sums: dict[str, list[int]] = {}
    for obj in objects:
        assert obj["lost_events"] == 0
        for f in obj["files"]:
            if f["path"] == path:
                row = sums.setdefault(f["region"], [0] * len(FIELDS))
                for i, name in enumerate(FIELDS):
                    row[i] += f[name]
    return {r: tuple(v) for r, v in sums.items()}


@pytest.mark.parametrize("hook", ["tracepoints", "raw"])
def test_every_byte_in_its_region(bpf_ready: None, tmp_path: Path, hook: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOOK_ENV, hook)  # both ways of seeing syscalls (syscall_hook.py)
    # mysqlio reads the layout of a mysqld / mariadbd only: the child is this Python
    # interpreter under that name (its working directory is then its datadir)
    exe = tmp_path / "bin" / "mysqld"
    exe.parent.mkdir()
    shutil.copy(os.path.realpath(sys.executable), exe)
    env = {**os.environ, "PYTHONHOME": sys.base_prefix}
    child = subprocess.Popen(
        [str(exe), "-c", CHILD], cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    trace = str(tmp_path / "t.trace")
    top = rec = None
    try:
        _line(child, "ready")
        rec = start_record(child.pid, trace)
        top = start_top(child.pid, interval_s=0.5)
        assert top.stdout is not None
        first = read_json_line(top.stdout, 30, "mysqlio top")
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        _line(child, "done")
        time.sleep(0.8)
        rest, err = stop_top(top)
        rec.send_signal(signal.SIGINT)
        _, rec_err = rec.communicate(timeout=60)
        assert rec.returncode == 0, rec_err
        child.stdin.write("exit\n")
        child.stdin.flush()
        child.wait(timeout=10)
    finally:
        for proc in (top, rec, child):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    path = str(tmp_path / "ibdata1")
    assert "doublewrite position assumed" not in err
    assert _top_regions([first, *rest], path) == EXPECTED
    other = [f for obj in [first, *rest] for f in obj["files"] if f["path"].endswith("other.dat")]
    assert {f["region"] for f in other} == {""} and sum(f["write_bytes"] for f in other) == 4096

    rep = report_json(trace)
    assert rep["lost_events"] == 0
    assert len(rep["meta"]["regions"]) == 1
    recorded = {
        r["region"]: tuple(r[name] if name != "fsync_ops" else r["sync_ops"] for name in FIELDS)
        for r in rep["files"]
        if r["path"] == path
    }
    assert recorded == EXPECTED
    events = [
        (op, offset, nbytes)
        for batch in TraceReader(trace).batches()
        for p, api, op, offset, nbytes in zip(
            *(batch.column(c).to_pylist() for c in ("path", "api", "op", "offset", "bytes")), strict=True
        )
        if p == path and api == "syscall" and op in ("write", "read", "fsync")  # not the page cache's
    ]
    assert events == EXPECTED_EVENTS
