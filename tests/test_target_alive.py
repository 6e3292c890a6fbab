"""target.is_alive: a running process, a zombie and a reaped one, told apart from
/proc/PID/stat (record asks twenty times a second)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mysqlio import target


def test_a_running_process_is_alive() -> None:
    assert target.is_alive(os.getpid())


def test_a_zombie_and_a_reaped_process_are_not() -> None:
    # a command name with ") Z" in it: the state is read after the last ')'
    code = "import sys\nopen('/proc/self/comm', 'w').write('odd) Z (name')\nprint(flush=True)\nsys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        with open(f"/proc/{child.pid}/comm") as f:
            assert f.read() == "odd) Z (name\n"
        assert target.is_alive(child.pid)
        assert child.stdin is not None
        child.stdin.close()
        deadline = time.monotonic() + 10
        while target.is_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not target.is_alive(child.pid)  # exited, not yet waited for: a zombie
        with open(f"/proc/{child.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
    finally:
        child.wait(timeout=10)
    assert not target.is_alive(child.pid)
