/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Types shared by mysqlio.bpf.c and userspace: the one source of the ABI.
 * tools/gen_abi.py generates tracer/abi.py (ctypes, IntEnum) and the constants
 * of stap/tapset/mysqlio.stpm from this file (make abi); tracer/abi_check.py
 * compares abi.py's structs with the object's BTF before loading it. Keep to
 * what the generator parses: integer #defines, enums, structs of __u8..__s64
 * and char fields (arrays allowed). */
#ifndef __MYSQLIO_H
#define __MYSQLIO_H

#define MAX_FILE_OPS 16384 /* (file, op, api) rows per interval */
#define MAX_NAMES 16384    /* files whose dentry path is remembered */
#define MAX_THREADS 16384  /* thread names remembered */
#define COMM_LEN 16
#define MAX_IOCBS 64       /* iocbs walked per io_submit */
#define MAX_IOVECS 16      /* iovecs summed per IOCB_CMD_PWRITEV/PREADV */
#define MAX_PENDING 65536  /* libaio iocbs / io_uring requests awaiting completion (record) */
#define MAX_AIO_EVENTS 256 /* io_event entries read per io_getevents (MariaDB's tpool asks for 256) */
#define MAX_LAT_ROWS 4096  /* (file, op, api) latency histograms per interval */
#define PATH_DEPTH 8       /* path components kept per file */
#define NAME_LEN 48        /* bytes kept per path component */

enum mio_op {
	MIO_WRITE = 0,
	MIO_READ = 1,
	MIO_FSYNC = 2,
	MIO_FDATASYNC = 3,
	MIO_SYNC_FILE_RANGE = 4,
};

enum mio_api {
	MIO_API_SYSCALL = 0,
	MIO_API_LIBAIO = 1,
	MIO_API_IO_URING = 2,
};

/* One row of the per-interval aggregate: a file, the thread that asked,
 * the operation and the API that carried it. dev is the kernel's dev_t
 * (major << 20 | minor), not the userspace st_dev encoding. */
struct file_op_key {
	__u64 ino;
	__u32 dev;
	__u32 tid;
	__u8 op;
	__u8 api;
	__u16 pad;
	__u32 pad2;
};

struct thread_name {
	char comm[COMM_LEN];
};

struct file_op_stats {
	__u64 bytes;
	__u64 ops;
	__u64 errors;
};

struct file_id {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

/* Path components from the file up, as far as PATH_DEPTH allows;
 * complete = 1 when the walk reached the root of the mount tree. */
struct file_name {
	char comps[PATH_DEPTH][NAME_LEN];
	__u32 depth;
	__u32 complete;
	__u32 nlink;
	__u32 mode;
};

/* Latency histogram: log-linear, LAT_SUB buckets per power of two. Slot 0
 * holds everything below 2^LAT_MIN_EXP ns (256 ns), the last slot everything
 * from 2^(LAT_MIN_EXP + LAT_SLOTS / LAT_SUB) ns (~18 min) up. A bucket's
 * midpoint is at most 1 / (2 * LAT_SUB) = 6.25 % from any value in it.
 * tracer/latency.py extends the same scheme to userspace. */
#define LAT_SUB_BITS 3
#define LAT_SUB (1 << LAT_SUB_BITS)
#define LAT_MIN_EXP 8
#define LAT_SLOTS 256

struct lat_key {
	__u64 ino;
	__u32 dev;
	__u8 op;
	__u8 api;
	__u16 pad;
};

struct lat_hist {
	__u64 sum_ns;
	__u64 max_ns;
	__u32 slots[LAT_SLOTS];
};

/* latency_ns of a request whose start was not seen: an io_uring completion on
 * a kernel without a submission tracepoint that names the request (counted, not timed) */
#define MIO_LATENCY_UNKNOWN (~0ULL)

/* One request, as `record` streams it through the ring buffer
 * (tracer/events.py EVENT_DTYPE is abi.Event). */
struct mio_event {
	__u64 ts_ns;      /* completion, CLOCK_MONOTONIC */
	__u64 latency_ns; /* entry -> exit, or submit -> completion for AIO */
	__u64 ino;
	__s64 offset;     /* -1 when unknown */
	__s64 result;     /* bytes, or -errno */
	__u32 dev;
	__u32 tid;
	__u8 op;
	__u8 api;
	__u8 pad[6];
};

/* A libaio iocb or io_uring request between submission and completion. */
struct pending_io {
	__u64 ts_ns;
	__u64 ino;
	__s64 offset;
	__u32 dev;
	__u32 tid;
	__u8 op;
	__u8 pad[7];
};

/* Counters of what could not be accounted, read by userspace from .bss. */
struct drop_counters {
	__u64 stats_full;      /* a new (file, op) row did not fit the map */
	__u64 inflight_full;   /* no task storage for a syscall until its exit (out of memory) */
	__u64 iocbs_truncated; /* iocbs past MAX_IOCBS, or iovecs past MAX_IOVECS */
	__u64 uring_no_file;   /* io_uring completion with no file attached */
	__u64 read_faults;     /* user memory (iocbs, iovecs) that could not be read */
	__u64 ringbuf_full;    /* record: an event did not fit the ring buffer */
	__u64 pending_full;    /* record: no room to remember a submitted AIO request */
	__u64 unmatched;       /* record: a libaio completion whose submission was not seen */
	__u64 lat_full;        /* top: a latency row or pending request did not fit
				* (its latency is unknown; its bytes are counted) */
	__u64 lat_unmatched;   /* top: an AIO completion whose submission was not seen
				* (in flight at attach); top and record: such an
				* io_uring completion (counted, recorded untimed):
				* its latency is unknown */
};

#endif /* __MYSQLIO_H */
