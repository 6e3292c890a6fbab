"""The per-request event record: one layout shared by the BPF ring buffer
(struct io_event in probes/mysqlio.h), the recorder and the trace writer."""

from __future__ import annotations

import numpy as np

# Field order and sizes mirror struct io_event; 56 bytes, 8-aligned.
EVENT_DTYPE = np.dtype(
    [
        ("ts_ns", "<u8"),  # completion time, CLOCK_MONOTONIC (bpf_ktime_get_ns)
        ("latency_ns", "<u8"),  # entry -> exit; submit -> completion for libaio / io_uring
        ("ino", "<u8"),
        ("offset", "<i8"),  # file offset of the request, -1 when unknown
        ("result", "<i8"),  # bytes transferred (0 for syncs), or -errno
        ("dev", "<u4"),  # kernel dev_t: major << 20 | minor
        ("tid", "<u4"),
        ("op", "u1"),  # mysqlio.bpf_types.Op
        ("api", "u1"),  # mysqlio.bpf_types.Api
        ("pad", "V6"),
    ]
)
assert EVENT_DTYPE.itemsize == 56

# latency_ns of a request whose start was not seen (MIO_LATENCY_UNKNOWN in
# probes/mysqlio.h): an io_uring completion on a kernel without a submission
# tracepoint that names the request; counted, not timed
LATENCY_UNKNOWN = (1 << 64) - 1

OP_NAMES = ("write", "read", "fsync", "fdatasync", "sync_file_range")
API_NAMES = ("syscall", "libaio", "io_uring")
