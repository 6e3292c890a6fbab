#!/usr/bin/env python3
"""A/B builds of the BPF object on a live server: the in-kernel cost per traced request.

    .venv/bin/python tools/ab_objects.py OLD.bpf.o NEW.bpf.o [MORE.bpf.o...] [--rounds 5]
                                         [--seconds 10] [--variants top,record]
    (an object may carry environment variables for its runs: PATH::VAR=VALUE)

Starts one benchmark server (MYSQLIO_BENCH_CONFIGS picks it, as in tools/bench.py:
10.11-io_uring by default), then runs sysbench oltp_write_only under each variant with
each object in turn, interleaved (the order rotates each round), with
kernel.bpf_stats_enabled. Prints, per variant and object, the median ns per traced
request and the tracer's own CPU, the median of the per-round ratios to the first object,
each program's median ns per run, its share per traced request and its runs per request,
and each variant over the first variant, round by round (one object and several variants
compares tracers: --variants floor,top,top-lat,record). For changes to the probes: measure
before and after in one run, on the same server and load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from bench_server import bpf_stats_enabled, chosen_configs, program_runs, requests_of, started


@contextmanager
def object_env(spec: str) -> Iterator[None]:
    """MYSQLIO_BPF_OBJECT set to the object of `spec` for the tracers started in the
    block, with the spec's variables (PATH::VAR=VALUE::..., e.g.
    ::MYSQLIO_KERNEL_FEATURES=-task_pt_regs for a kernel feature's fallback)."""
    path, *assignments = spec.split("::")
    env = {"MYSQLIO_BPF_OBJECT": path, **dict(a.split("=", 1) for a in assignments)}
    old = {var: os.environ.get(var) for var in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for var, value in old.items():
            if value is None:
                del os.environ[var]
            else:
                os.environ[var] = value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("objects", nargs="+", help="BPF objects; the first is the reference")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10, help="load per run")
    ap.add_argument("--variants", default="top,record", help="tracers of tools/bench_tracers.py")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if len(args.objects) < 2 and len(variants) < 2:
        print("ab_objects: give two objects or more, or one object and two variants or more", file=sys.stderr)
        return 2
    names = [os.path.basename(p) for p in args.objects]
    if len(set(names)) != len(names):
        names = [f"{i}:{n}" for i, n in enumerate(names)]
    objects = dict(zip(names, (os.path.abspath(p) for p in args.objects), strict=True))
    for spec in objects.values():
        path = spec.split("::", 1)[0]
        if not os.path.isfile(path):
            print(f"ab_objects: {path}: no such object", file=sys.stderr)
            return 2
    per_request: dict[tuple[str, str], list[float]] = {}
    per_program: dict[tuple[str, str, str], list[float]] = {}
    program_share: dict[tuple[str, str, str], list[float]] = {}  # a program's ns per traced request
    program_rate: dict[tuple[str, str, str], list[float]] = {}  # its runs per traced request
    cpu_percent: dict[tuple[str, str], list[float]] = {}  # the tracer process's own CPU
    (config, *_) = chosen_configs()
    with started(config) as server, tempfile.TemporaryDirectory() as tmp, bpf_stats_enabled():
        print(f"{server.title} ({server.note}); {args.rounds} rounds of {args.seconds} s", flush=True)
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for variant in variants:
                for name in order:
                    with object_env(objects[name]):
                        cpu = cpu_percent.setdefault((variant, name), [])
                        runs = program_runs(server.db.pid, server.bench, variant, args.seconds, tmp, cpu=cpu)
                    requests, _ = requests_of(variant, runs)
                    ns = sum(ns for _, ns, _ in runs.values())
                    per_request.setdefault((variant, name), []).append(ns / max(requests, 1))
                    for prog, pns, cnt in runs.values():
                        if cnt:
                            per_program.setdefault((variant, name, prog), []).append(pns / cnt)
                            program_share.setdefault((variant, name, prog), []).append(pns / max(requests, 1))
                            program_rate.setdefault((variant, name, prog), []).append(cnt / max(requests, 1))
                    print(f"round {r + 1} {variant} {name}: {ns / max(requests, 1):,.0f} ns/request", flush=True)
    ref = names[0]
    for variant in variants:
        print(f"{variant}:")
        for name in names:
            values = per_request[(variant, name)]
            line = f"  {name:24} {statistics.median(values):>7,.0f} ns/request"
            line += f", its CPU {statistics.median(cpu_percent[(variant, name)]):.2f} % of a core"
            if name != ref:
                ratios = [v / b for b, v in zip(per_request[(variant, ref)], values, strict=True)]
                line += f"  ÷ {ref}: {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            print(line)
        for prog in sorted({p for (v, _, p) in per_program if v == variant}):
            columns: list[list[str]] = [[], [], []]
            for name in names:
                for column, table, form in zip(
                    columns, (per_program, program_share, program_rate), ("7,.0f", "7,.0f", "7.2f"), strict=True
                ):
                    values = table.get((variant, name, prog))
                    column.append(f"{statistics.median(values):{form}}" if values else f"{'-':>7}")
            runs, shares, rates = ("  ".join(column) for column in columns)
            print(f"    {prog:28} ns/run: {runs}   ns/request: {shares}   runs/request: {rates}")
    # each variant over the first, round by round, for each object
    for name in names:
        first = per_request[(variants[0], name)]
        for variant in variants[1:]:
            ratios = [v / b for b, v in zip(first, per_request[(variant, name)], strict=True)]
            print(
                f"{name}: {variant} ÷ {variants[0]}: {statistics.median(ratios):.2f}"
                f" ({min(ratios):.2f}-{max(ratios):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
