"""top's interval, phase by phase, in one process at N open files (issue 60): the CPU
(thread time) of each phase of an interval on the same input, without BPF or a traced
process, so that two versions of the package can be compared on a machine shared with
other work (end to end, a starved top falls behind and merges intervals).

This process opens N files (a directory under /dev/shm) and traces nothing: each interval
is a drained table of one 4 KiB write to each file by one thread, folded (`fold.fold`,
naming every file by the resolver from this process's /proc/self/fd, as top names the
server's), then fed to the bursts tracker, written as a JSON line (to memory), folded
into the screen's rows (`ScreenState.update`, with `most` where the package has it) and
drawn (160 x 50, to /dev/null). Printed per phase: the median over the intervals past
the first two, and the garbage collector's time (already in the phases it ran in: not
added again to the interval's sum). At the end, the session totals' table
that the screen prints on exit (once).

    bench_phases.py --ab BEFORE [--after AFTER] [--files 19000] [--rounds 3]

runs BEFORE and AFTER (PYTHONPATH dirs holding a mysqlio package; AFTER defaults to this
tree's) one after the other, `rounds` times, and prints medians and after / before ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PHASES = ("fold", "bursts", "json", "view", "render", "gc")
SUMMED = PHASES[:-1]  # the interval's phases ("gc" ran inside them)
INTERVALS = 8
WARM = 2  # intervals left out: the first names every file (a /proc scan, a check of each name)


def child(files: int) -> dict[str, float]:
    """One run in this process (the package from PYTHONPATH): ms per phase."""
    import gc
    import inspect
    import io
    import resource
    import shutil
    import tempfile
    import time

    import numpy as np
    from rich.console import Console

    from mysqlio import fold, stats_cells
    from mysqlio.bursts.live import BurstTracker
    from mysqlio.classify import Classifier
    from mysqlio.live import render_totals
    from mysqlio.model import Interval
    from mysqlio.output import write_json
    from mysqlio.probe import dev_to_kernel
    from mysqlio.render import Header, render_screen
    from mysqlio.resolve import FileResolver
    from mysqlio.sampling import GC_YOUNG
    from mysqlio.view import ScreenState

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])  # as run_loop sets it
    where = tempfile.mkdtemp(prefix="mysqlio-bench-phases-", dir="/dev/shm")
    fds, ids = [], []
    try:
        for i in range(files):
            fd = os.open(f"{where}/t{i}.ibd", os.O_CREAT | os.O_RDWR)
            fds.append(fd)
            st = os.fstat(fd)
            ids.append((st.st_dev, st.st_ino))
        table = np.zeros(files, stats_cells.ROW)
        table["ino"] = [ino for _, ino in ids]
        table["dev"] = [dev_to_kernel(dev) for dev, _ in ids]
        table["tid"], table["bytes"], table["ops"] = 77, 4096, 1  # op 0, api 0: a write by a syscall
        resolver, classifier, memo = FileResolver(os.getpid(), lambda _: None), Classifier(), fold.Memo()
        bursts, state = BurstTracker(), ScreenState()
        lazy = "most" in inspect.signature(state.update).parameters
        console = Console(file=open(os.devnull, "w"), width=160, height=50, force_terminal=True)  # noqa: SIM115
        spent: dict[str, list[float]] = {phase: [] for phase in PHASES}
        collecting = [0.0, 0.0]

        def on_gc(phase: str, _info: dict[str, int]) -> None:
            if phase == "start":
                collecting[1] = time.thread_time()
            else:
                collecting[0] += time.thread_time() - collecting[1]

        gc.callbacks.append(on_gc)
        for _ in range(INTERVALS):
            gc_before = collecting[0]
            resolver.new_interval()
            t = time.thread_time()
            got = fold.fold(table, resolver, classifier, str, False, [], memo=memo)
            spent["fold"].append(time.thread_time() - t)
            interval = Interval(time.time(), 1.0, os.getpid(), 0, {}, got, [])
            t = time.thread_time()
            trains = bursts.feed(interval)
            spent["bursts"].append(time.thread_time() - t)
            t = time.thread_time()
            write_json(interval, io.StringIO(), [x.to_json() for x in trains], [], None, None, None)
            spent["json"].append(time.thread_time() - t)
            t = time.thread_time()
            rows = state.update(interval, most=200) if lazy else state.update(interval)
            spent["view"].append(time.thread_time() - t)
            t = time.thread_time()
            written = sum(f.write_bytes for f in got)
            header = Header(os.getpid(), "bench", 1.0, 1.0, written, 0, 0, 0, "file", "write", where)
            console.print(render_screen(header, rows, 160, 50))
            spent["render"].append(time.thread_time() - t)
            spent["gc"].append(collecting[0] - gc_before)
        t = time.thread_time()
        console.print(render_totals(state, where))
        out = {phase: 1000 * statistics.median(v[WARM:]) for phase, v in spent.items()}
        out["exit totals"] = 1000 * (time.thread_time() - t)
        return out
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(where, ignore_errors=True)


def run(python_path: str | None, files: int) -> dict[str, float]:
    """A run in a process of its own, the package from python_path (None: this tree's)."""
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(files)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--ab", metavar="DIR", help="PYTHONPATH holding the baseline mysqlio package")
    ap.add_argument("--after", metavar="DIR", help="PYTHONPATH holding the package to compare (default: this tree's)")
    ap.add_argument("--files", type=int, default=19_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if args.ab is None:
        ap.error("--ab DIR is needed")
    for flag, where in (("--ab", args.ab), ("--after", args.after)):
        if where is not None and not (Path(where) / "mysqlio" / "__init__.py").is_file():
            ap.error(f"{flag} {where}: no mysqlio package there")
    got: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        got["before"].append(run(args.ab, args.files))
        got["after"].append(run(args.after, args.files))
    phases = [*PHASES, "exit totals"]
    print(f"| {args.files:,} files, ms of CPU | " + " | ".join(phases) + " | sum of the interval's |")
    print("|---" * (len(phases) + 2) + "|")
    for name, runs in got.items():
        cells = [statistics.median(r[p] for r in runs) for p in phases]
        total = statistics.median(sum(r[p] for p in SUMMED) for r in runs)
        print(f"| {name} | " + " | ".join(f"{c:.0f}" for c in cells) + f" | {total:.0f} |")
    pairs = list(zip(got["before"], got["after"], strict=True))
    ratios = [statistics.median(a[p] / b[p] if b[p] else float("nan") for b, a in pairs) for p in phases]
    total = statistics.median(sum(a[p] for p in SUMMED) / sum(b[p] for p in SUMMED) for b, a in pairs)
    print("| after / before (median of pairs) | " + " | ".join(f"{r:.2f}" for r in ratios) + f" | {total:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
