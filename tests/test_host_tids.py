"""host_tids: a server's tids (THREAD_OS_ID, in its own pid namespace) as the probes see
them, from the tasks' NSpid lines. A /proc-like directory in tmp_path stands for a server
in a pid namespace of its own (the real one: tests/test_users_in_pid_namespace.py); this
process is the case of our own namespace."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from mysqlio.host_tids import RESCAN_S, HostTids, parse_nspid, read_nspid, same_pid_namespace

PID = 5000  # the server's pid here; pid 1 in its namespace


def test_parse_nspid() -> None:
    assert parse_nspid("Name:\tmysqld\nTgid:\t5000\nNSpid:\t5003\t4\nNSsid:\t1\n") == (5003, 4)
    assert parse_nspid("NSpid:\t77\n") == (77,)
    assert parse_nspid("Name:\tx\n") == ()  # kernels before 4.1
    assert parse_nspid("NSpid:\tx\n") == ()


def _task(proc: Path, tid: int, *nested: int) -> None:
    d = proc / str(PID) / "task" / str(tid)
    d.mkdir(parents=True)
    fields = "\t".join(map(str, (tid, *nested)))
    (d / "status").write_text(f"Name:\tmysqld\nNSpid:\t{fields}\n")


def _fake_proc(tmp_path: Path, ours: str, theirs: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self" / "ns").mkdir(parents=True)
    (proc / str(PID) / "ns").mkdir(parents=True)
    os.symlink(ours, proc / "self" / "ns" / "pid")
    os.symlink(theirs, proc / str(PID) / "ns" / "pid")
    return proc


def test_a_server_in_its_own_pid_namespace(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, "pid:[4026531836]", "pid:[4026532999]")
    for tid, inner in ((5000, 1), (5003, 4), (5010, 9)):
        _task(proc, tid, 77, inner)  # nested twice: the server's own tid is the last
    now = [100.0]
    tids = HostTids(PID, proc, clock=lambda: now[0])
    assert not tids.same_namespace
    assert tids.to_host([1, 4, 9, 12]) == {1: 5000, 4: 5003, 9: 5010} and tids.rescanned
    _task(proc, 5020, 77, 12)  # a new thread: not listed again until RESCAN_S has passed
    assert tids.to_host([4, 12]) == {4: 5003} and not tids.rescanned
    now[0] += RESCAN_S
    assert tids.to_host([4, 12]) == {4: 5003, 12: 5020} and tids.rescanned
    # all known: nothing is read
    now[0] += RESCAN_S
    assert tids.to_host([1, 12]) == {1: 5000, 12: 5020} and not tids.rescanned
    # a thread gone leaves the map at the next listing
    for f in (proc / str(PID) / "task" / "5003").iterdir():
        f.unlink()
    (proc / str(PID) / "task" / "5003").rmdir()
    assert tids.to_host([4, 99]) == {} and tids.rescanned and not tids.gone


def test_a_process_gone(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, "pid:[1]", "pid:[2]")
    tids = HostTids(PID, proc)
    assert tids.to_host([1]) == {} and tids.rescanned and tids.gone


def test_our_own_namespace_is_the_identity() -> None:
    pid = os.getpid()
    assert same_pid_namespace(pid)
    assert read_nspid(Path(f"/proc/{pid}/task/{pid}"))[0] == pid
    ready, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: (ready.set(), done.wait(10)))
    thread.start()
    ready.wait(10)
    try:
        assert thread.native_id is not None
        tids = HostTids(pid)
        assert tids.same_namespace
        assert tids.to_host([pid, thread.native_id, 1]) == {pid: pid, thread.native_id: thread.native_id}
    finally:
        done.set()
        thread.join()
