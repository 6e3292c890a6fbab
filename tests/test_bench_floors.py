"""Each variant's in-kernel cost is compared with empty programs on the hooks it uses:
untimed top attaches no enter program, so its floor has exit programs only; record and
top --latency time requests at enter and exit, so theirs has both."""

from __future__ import annotations

import pytest
from bench_server import floor_of
from bench_tracers import Tracer, base_name

ON_DISK = {"floor": 270.0, "floor-exits": 140.0, "floor-pc": 420.0, "floor-pc-exits": 300.0}
ON_TMPFS = {"floor": 190.0, "floor-exits": 95.0}


@pytest.mark.parametrize(
    ("variant", "measured", "floor"),
    [
        ("top", ON_TMPFS, "floor-exits"),
        ("top", ON_DISK, "floor-pc-exits"),
        ("top-nopc", ON_DISK, "floor-exits"),
        ("top-lat", ON_TMPFS, "floor"),
        ("top-lat", ON_DISK, "floor-pc"),
        ("record", ON_TMPFS, "floor"),
        ("record", ON_DISK, "floor-pc"),
        ("record-nopc", ON_DISK, "floor"),
    ],
)
def test_a_variant_is_compared_with_the_floor_on_its_hooks(
    variant: str, measured: dict[str, float], floor: str
) -> None:
    assert floor_of(variant, measured) == floor


@pytest.mark.parametrize(
    ("variant", "page_cache", "exits_only"),
    [("floor", False, False), ("floor-exits", False, True), ("floor-pc", True, False), ("floor-pc-exits", True, True)],
)
def test_floor_variants_name_their_hooks(variant: str, page_cache: bool, exits_only: bool) -> None:
    tracer = Tracer(variant, pid=1, tmp="/nonexistent")
    assert (tracer.name, tracer.floor_page_cache, tracer.exits_only) == ("floor", page_cache, exits_only)
    assert base_name(variant) == "floor"


def test_a_tracers_cpu_is_read_from_every_thread_and_agrees_with_its_ticks() -> None:
    """The tracer's own CPU over a window: every thread's schedstat (nanoseconds), not
    the 10 ms ticks of its utime and stime (0.1 % of a core over 10 s, the size of the
    targets). Both count the same CPU: every thread's, not only the main one's."""
    import subprocess
    import sys

    import psutil
    from bench_tracers import thread_cpu_seconds

    # two threads spinning for 0.3 s of CPU each, alive until stdin closes
    code = (
        "import threading, time, sys\n"
        "done = threading.Event()\n"
        "def spin():\n"
        "    end = time.thread_time() + 0.3\n"
        "    while time.thread_time() < end: pass\n"
        "    done.wait()\n"
        "ts = [threading.Thread(target=spin) for _ in range(2)]\n"
        "[t.start() for t in ts]\n"
        "while time.process_time() < 0.6: time.sleep(0.01)\n"
        "print('spun', flush=True); sys.stdin.read(); done.set()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "spun\n"
        precise = thread_cpu_seconds(child.pid)
        t = psutil.Process(child.pid).cpu_times()
    finally:
        child.communicate("", timeout=10)
    assert precise >= 0.6
    assert abs(precise - (t.user + t.system)) < 0.05  # a few ticks
