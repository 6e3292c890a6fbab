"""StopFlag under signals: a stop signal never hangs the process that gets it.

The old handler set a threading.Event itself; a signal that landed while the main thread
was inside Event.wait, holding the event's lock, blocked the handler on that lock for good
(an exporter that never exited after SIGTERM, under emulation)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import os, sys
from mysqlio.sampling import StopFlag

flag = StopFlag()
flag.install()
done, seen, turns = sys.argv[1], 0, 0
print("ready", flush=True)
while turns % 1000 or not os.path.exists(done):
    turns += 1
    # the loop's wait, as short as it goes: the event's lock is held much of the time
    if flag.event.wait(0.00001):
        flag.event.clear()
        seen += 1
print(seen, flag.signum, flush=True)
"""


def test_a_storm_of_stop_signals_neither_hangs_nor_crashes(tmp_path: Path) -> None:
    done = tmp_path / "done"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(done)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        sent = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and child.poll() is None:
            child.send_signal(signal.SIGHUP)
            sent += 1
            time.sleep(0.0005)
        done.touch()
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 0, err[-2000:]
    seen, signum = (int(word) for word in out.split())
    assert sent > 1000
    assert 0 < seen <= sent  # the event was set (signals close together are seen as one)
    assert signum == signal.SIGHUP
