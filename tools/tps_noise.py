#!/usr/bin/env python3
"""How finely this machine can measure a tracer's TPS ratio: the load's own noise.

    .venv/bin/python tools/tps_noise.py [--windows 20] [--workload oltp_write_only]
                                        [--buffer-pool-mb N] [--redo-log-mb N]

Starts one benchmark server (MYSQLIO_BENCH_CONFIGS picks it, as in tools/bench.py:
10.11-io_uring by default), runs one sysbench load with NO tracer and reads its TPS
(Com_commit) over windows of the length `make bench` uses, each after the same settle.
Prints the windows, their spread, and that of the ratio of each window to the one
before: a TPS ratio of `make bench` is one such ratio per round (a tracer's window and
the untraced one of its round), so the median of R rounds is known to about
1.25 sd / sqrt(R) (the standard error of a median), and a target 1 % below 1 needs the
rounds printed to tell it from 1 at 95 %.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import tempfile

from bench import windowed_tps
from bench_server import ServerConfig, chosen_configs, started, window_seconds
from bench_tracers import SetupError

MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over the mean's, normal data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=20, help="untraced windows (at least 3)")
    parser.add_argument("--workload", default="oltp_write_only", help="the sysbench script")
    parser.add_argument("--buffer-pool-mb", type=int, help="InnoDB's buffer pool (the bench server's by default)")
    parser.add_argument("--redo-log-mb", type=int, help="InnoDB's redo log (the bench server's by default)")
    args = parser.parse_args()
    if args.windows < 3:
        print("tps_noise: --windows must be at least 3", file=sys.stderr)
        return 2
    try:
        config = chosen_configs()[0]
        return measure(config, args.workload, args.windows, args.buffer_pool_mb, args.redo_log_mb)
    except (ValueError, RuntimeError, SetupError) as e:
        print(f"tps_noise: {e}", file=sys.stderr)
        return 1


def measure(
    config: ServerConfig, workload: str, windows: int, buffer_pool_mb: int | None, redo_log_mb: int | None
) -> int:
    window_s = window_seconds(smoke=False)
    with started(config, buffer_pool_mb, redo_log_mb) as server, tempfile.TemporaryDirectory() as tmp:
        # make bench's own windows, each under the "none" variant (no tracer)
        rates = windowed_tps(
            server.db.pid,
            server.bench,
            lambda: server.db.status("Com_commit"),
            window_s,
            windows,
            tmp,
            ("none",),
            0,
            script=workload,
        )["none"]
        title = f"{server.title}, sysbench {workload}, {windows} untraced windows of {window_s} s"
        sizes = server.db.options
        title += f"; buffer pool {sizes.buffer_pool_mb} MiB, redo log {sizes.redo_log_mb} MiB"
    log_ratios = [math.log(b / a) for a, b in itertools.pairwise(rates)]
    sd = statistics.pstdev(log_ratios)
    print(title)
    print("TPS:", " ".join(f"{r:.0f}" for r in rates))
    print(
        f"median {statistics.median(rates):.0f} TPS, coefficient of variation {statistics.pstdev(rates) / statistics.mean(rates):.3f}"
    )
    print(f"one window over the one before: sd of the log ratio {sd:.3f}")
    for rounds in (10, 30):
        print(
            f"the median ratio of {rounds} rounds known to about ±{100 * MEDIAN_SE * sd / math.sqrt(rounds):.1f} % (one sd)"
        )
    print(f"rounds to tell a ratio of 0.99 from 1 at 95 %: {math.ceil((1.96 * MEDIAN_SE * sd / 0.01) ** 2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
