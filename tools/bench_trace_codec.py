#!/usr/bin/env python3
"""What the trace writer's compression costs `record` (run by hand, not a test).

    .venv/bin/python tools/bench_trace_codec.py [--batches 40] [--events 12500] [--files 300]

Builds the writer's record batches once (batches of --events events, as `record` flushes
every 0.5 s at 25k events/s), then writes them as an Arrow IPC stream with each codec in
turn, interleaved over --repeat rounds: the median ms per batch (building included) and the
bytes per event on disk. The trace writer uses zstd.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from bench_report import START_MONO, files_and_threads, make_batch

from mysqlio.trace import BatchKeys, TraceMeta, TraceWriter

CODECS = ("zstd", "lz4", None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--events", type=int, default=12_500)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    files, threads = files_and_threads(args.files)
    events = [
        make_batch(rng, args.events, START_MONO + i * 500_000_000, 500_000_000, args.files) for i in range(args.batches)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        meta = TraceMeta("host", "kernel", 1, None, None, None, time.time(), START_MONO, "bench")
        builder = TraceWriter(os.path.join(tmp, "builder.trace"), meta)
        build_ms: list[float] = []
        batches: list[pa.RecordBatch] = []
        for e in events:
            t0 = time.perf_counter()
            batches.append(builder._batch(e, files, threads, BatchKeys.of(e)))
            build_ms.append((time.perf_counter() - t0) * 1e3)
        builder.close(0)
        write_ms: dict[str | None, list[float]] = {c: [] for c in CODECS}
        size: dict[str | None, int] = {}
        for _ in range(args.repeat):
            for codec in CODECS:
                path = os.path.join(tmp, f"{codec}.arrow")
                options = ipc.IpcWriteOptions(emit_dictionary_deltas=True, compression=codec)
                t0 = time.perf_counter()
                with pa.OSFile(path, "wb") as sink, ipc.new_stream(sink, batches[0].schema, options=options) as w:
                    for b in batches:
                        w.write_batch(b)
                write_ms[codec].append((time.perf_counter() - t0) * 1e3 / len(batches))
                size[codec] = os.path.getsize(path)
    build = statistics.median(build_ms)
    print(f"{args.batches} batches of {args.events:,} events, {args.files} files; building a batch {build:.2f} ms")
    for codec in CODECS:
        per_batch = build + statistics.median(write_ms[codec])
        per_event = size[codec] / (args.batches * args.events)
        print(f"  {codec or 'none':5} {per_batch:5.2f} ms a batch, {per_event:5.1f} bytes an event")


if __name__ == "__main__":
    main()
