"""Each variant's in-kernel cost is compared with empty programs on the hooks it uses:
untimed top attaches no enter program, so its floor has exit programs only; record and
top --latency time requests at enter and exit, so theirs has both."""

from __future__ import annotations

import pytest
from bench_server import CONFIGS, NOPC, floor_of, kernel_plan, ratios_to_floor
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


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_kernel_rounds_pair_every_targeted_variant_with_its_floor(key: str) -> None:
    """kernel_cost's ratios are taken round by round: a variant with a target and its
    floor have a window in every round, one right after the other, which first
    alternating; the other variants have one, in the first round."""
    config = CONFIGS[key]
    plan = kernel_plan(config, rounds=10, seed=11)
    assert len(plan) == 10
    # both targets' tracers, on every server; on disk, both with the page-cache hooks and without
    variants = [v for _, v in config.kernel_pairs]
    assert variants == ["top", "record", *(() if config.on_tmpfs else NOPC)]
    in_pairs = {name for pair in config.kernel_pairs for name in pair}
    assert len(in_pairs) == 2 * len(config.kernel_pairs)  # each floor paired with one variant
    for r, names in enumerate(plan):
        assert sorted(set(names)) == sorted(names)  # one window a variant in a round
        assert set(names) == (set(config.kernel_variants) if r == 0 else in_pairs)
        for floor, variant in config.kernel_pairs:
            assert floor == floor_of(variant, config.kernel_variants)
            i, j = names.index(floor), names.index(variant)
            assert j - i == (1 if r % 2 == 0 else -1)  # adjacent, floor first in even rounds
    assert len({tuple(names) for names in plan[1:]}) > 1  # the pairs in a new order


def test_a_ratio_pairs_windows_of_the_same_round() -> None:
    per_request = {
        "floor": [200.0, 100.0, 300.0],
        "floor-exits": [100.0, 50.0, 150.0],
        "top": [250.0, 125.0, 375.0],  # 2.5x floor-exits in every round
        "record": [600.0, 300.0, 900.0],  # 3x floor in every round
        "top-lat": [400.0],  # one window, in the first round
    }
    assert ratios_to_floor("top", per_request) == [2.5, 2.5, 2.5]
    assert ratios_to_floor("record", per_request) == [3.0, 3.0, 3.0]
    assert ratios_to_floor("top-lat", per_request) == [2.0]
