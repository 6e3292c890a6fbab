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
#define STATS_CELLS 16384  /* cells of the stats table per interval (a power of two) */
#define STATS_CELL_PROBES 8 /* cells tried per row before the overflow hash map */
#define MAX_NAMES 16384    /* files whose dentry path is remembered */
#define MAX_THREADS 16384  /* thread names remembered */
#define INFLIGHT_BITS 14
#define INFLIGHT_SLOTS (1 << INFLIGHT_BITS) /* cells of in-flight syscalls (two candidates per thread) */
#define COMM_LEN 16
#define MAX_IOCBS 64       /* iocbs walked per io_submit */
#define MAX_IOVECS 16      /* iovecs summed per IOCB_CMD_PWRITEV/PREADV */
#define MAX_PENDING 65536  /* libaio iocbs / io_uring requests awaiting completion (record) */
#define MAX_AIO_EVENTS 256 /* io_event entries read per io_getevents (MariaDB's tpool asks for 256) */
#define MAX_LAT_ROWS 4096  /* (file, op, api) latency histograms per interval */
#define PATH_DEPTH 8       /* path components kept per file */
#define NAME_LEN 48        /* bytes kept per path component */
#define MAX_SERVER_FILES 16384 /* files the traced server touched (writeback attribution) */
#define MAX_FLUSHERS 1024  /* kernel flusher threads inside a writeback pass */
#define DEV_SLOT_BITS 6
#define DEV_SLOTS (1 << DEV_SLOT_BITS) /* block devices counted, per CPU */
#define DEV_PROBES 4                   /* slots tried from a device's hash */
#define DEV_OWNERS 5                   /* enum mio_owner's values: a device's columns */
#define MAX_VMA_DEPTH 48   /* rb-tree levels searched for an address (kernels before 6.1) */
/* log2 of the page size until the loader sets targ_page_shift to the running
 * kernel's (x86-64: 4 KiB; arm64: 4, 16 or 64 KiB, RHEL's and Ubuntu's 64K kernels) */
#define DEFAULT_PAGE_SHIFT 12
#define MAX_REGION_FILES 4  /* files split into regions (InnoDB system tablespace files) */
#define MAX_REGION_RANGES 8 /* byte ranges per region file */
#define MAX_REGION_SLOTS 32 /* MAX_REGION_FILES * MAX_REGION_RANGES */
#define MAX_CONN_THREADS 16384 /* threads whose connection (the socket they last read) is known */

enum mio_op {
	MIO_WRITE = 0,
	MIO_READ = 1,
	MIO_FSYNC = 2,
	MIO_FDATASYNC = 3,
	MIO_SYNC_FILE_RANGE = 4,
	MIO_MSYNC = 5,     /* msync(2) of a shared mapping of the file: a sync */
	/* page cache (bytes = page-cache bytes; ops = folios / bios) */
	MIO_DIRTY = 6,     /* pages of the file went clean -> dirty (the traced process) */
	MIO_WRITEBACK = 7, /* the file's page cache written to its device, for `by` */
	/* bytes read from its device into the file's page cache (bytes = bios' bytes, ops = bios) */
	MIO_DISK_READ = 8, /* a read bio not marked readahead (a page's own read, ->read_folio) */
	MIO_READAHEAD = 9, /* a read bio of the kernel's readahead (REQ_RAHEAD) */
	/* a read of a file open with O_DIRECT: its bytes came from the device, past the page
	 * cache (bytes = the read's, ops = reads; also in the MIO_READ row, which counts it) */
	MIO_DIRECT_READ = 10,
};

enum mio_api {
	MIO_API_SYSCALL = 0,
	MIO_API_LIBAIO = 1,
	MIO_API_IO_URING = 2,
	MIO_API_KERNEL = 3, /* page cache: the kernel, not a request of the server */
};

/* What made the kernel write a file's dirty pages to its device: a request of
 * the traced server in progress (its op), or the kernel on its own. */
enum mio_by {
	MIO_BY_NONE = 0,                /* not a writeback row */
	MIO_BY_FSYNC = 1,
	MIO_BY_FDATASYNC = 2,
	MIO_BY_SYNC_FILE_RANGE = 3,
	MIO_BY_MSYNC = 4,
	MIO_BY_WRITE = 5,               /* a write of the server (O_SYNC / O_DSYNC file) */
	MIO_BY_SERVER_OTHER = 6,        /* another server syscall, or its io_uring worker */
	MIO_BY_FLUSHER_PERIODIC = 7,    /* flusher: dirty_expire_centisecs elapsed */
	MIO_BY_FLUSHER_BACKGROUND = 8,  /* flusher: dirty_background_ratio/bytes passed */
	MIO_BY_MEMORY = 9,              /* memory pressure: reclaim, kswapd */
	MIO_BY_SYNC = 10,               /* sync(2) / syncfs(2) of any process */
	MIO_BY_OTHER = 11,              /* another process, or another flusher reason */
};

/* Block devices: who a bio's bytes belong to, as the bio is queued. */
enum mio_owner {
	MIO_OWNER_DEVICE = 0,        /* the device's own view: completed requests (userspace, from /sys) */
	MIO_OWNER_SERVER_FILE = 1,   /* page cache of a file the traced server touched */
	MIO_OWNER_SERVER_DIRECT = 2, /* the server's own I/O outside the page cache (O_DIRECT) */
	MIO_OWNER_FS = 3,            /* filesystem journal and metadata (block device pages) */
	MIO_OWNER_OTHER = 4,         /* other files and processes */
};

enum mio_dir {
	MIO_DIR_READ = 0,
	MIO_DIR_WRITE = 1,
};

/* Regions of a file split by offset (InnoDB's system tablespace, ibdata1:
 * tracer/ibdata_regions.py finds them). A request belongs to the region that
 * holds its first byte. NONE: the whole file (not a region file, or a row
 * without an offset: syncs, page cache). */
enum mio_region {
	MIO_REGION_NONE = 0,
	MIO_REGION_SYSTEM = 1,        /* the rest: undo, pages of system tables, free space */
	MIO_REGION_DOUBLEWRITE = 2,   /* the doublewrite buffer's two blocks */
	MIO_REGION_CHANGE_BUFFER = 3, /* change buffer header and root (pages 3, 4) */
	MIO_REGION_TRX_SYS = 4,       /* transaction system header and first rollback segment (5, 6) */
	MIO_REGION_DICTIONARY = 5,    /* data dictionary header (7) */
};

/* The region files, filled by userspace after load (one entry, the map
 * `regions`): file f is (dev[f], ino[f]) (ino 0: unused), its ranges
 * [start, end) in bytes are slots f * MAX_REGION_RANGES + r for
 * r < nranges[f], the ranges of a file in no particular order. */
struct region_table {
	__u64 ino[MAX_REGION_FILES];
	__u32 dev[MAX_REGION_FILES];
	__u32 nranges[MAX_REGION_FILES];
	__u64 start[MAX_REGION_SLOTS];
	__u64 end[MAX_REGION_SLOTS];
	__u8 region[MAX_REGION_SLOTS];
};

/* What every exit program reads before it counts a request, written whole by
 * userspace (the one entry of the map `control`): 64 bytes in the kernel's
 * direct map (a small array that is not mappable is kmalloc'd; issue 19: the
 * state it replaced sat in three maps, a cold line each per request).
 * tgid: the target, which every program's pid filter compares here rather
 * than in .rodata, a line an untimed exit would read only for it (0 until
 * userspace writes it, before any program is attached: no thread matches).
 * timed: requests are timed (the enter programs stamp them). cells_half: the
 * half of the stats table the programs write (userspace reads the other).
 * cells_mask: the cells of a half in use, less one (a power of two, less one):
 * sized by userspace to the rows seen, so the rows lie in few pages (see
 * cell_row). region_dev/ino: the region files (struct region_table's, in the
 * same order; ino 0: unused), so a request of any other file reads no region
 * table. */
struct mio_control {
	__u32 timed;
	__u32 cells_half;
	__u32 cells_mask;
	__u32 region_dev[MAX_REGION_FILES];
	__u32 tgid; /* the target; 0 until userspace writes it: no thread matches */
	__u64 region_ino[MAX_REGION_FILES];
};

/* A thread's connection (the map conns, probes/connection.bpf.h): the inode of
 * the socket it last read with recvfrom, and when it first read one since the
 * probes attached (CLOCK_MONOTONIC ns): its requests before that (conn 0) were
 * all of the connection it served at the attach. */
struct conn_state {
	__u32 conn;
	__u32 pad;
	__u64 first_ns;
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
	__u8 by;   /* MIO_WRITEBACK rows: enum mio_by; else 0 */
	__u8 region; /* enum mio_region: reads and writes of a region file; else 0 */
	__u32 conn; /* the connection the thread served: the inode of the socket it
		     * last read (probes/connection.bpf.h); 0: none seen, or not tracked */
};

/* A cell of the stats table (struct stats_cell): free, being claimed by a
 * program (its key is being written), or holding a row. */
enum mio_cell {
	MIO_CELL_FREE = 0,
	MIO_CELL_BUSY = 1,
	MIO_CELL_READY = 2,
};

/* One row of the stats table, in one cache line: a struct file_op_key, then
 * a struct file_op_stats (the same fields, flattened for the generator),
 * then its state (enum mio_cell). */
struct stats_cell {
	__u64 ino;
	__u32 dev;
	__u32 tid;
	__u8 op;
	__u8 api;
	__u8 by;
	__u8 region;
	__u32 conn;
	__u64 bytes;
	__u64 ops;
	__u64 errors;
	__u64 state; /* 64 bits: BPF's 32-bit atomics need -mcpu=v3 */
	__u64 pad;
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

/* Cumulative counters of one block device (disk, not partition; kernel
 * dev_t) on one CPU, by direction and owner (MIO_OWNER_DEVICE's column is
 * unused: the device's own view is read from /sys). Never reset: userspace
 * sums the CPUs' and takes deltas. */
struct dev_slot {
	__u64 dev; /* 0: a free slot (64 bits: the compare-and-swap of older clang) */
	__u64 bytes[2][DEV_OWNERS]; /* [enum mio_dir][enum mio_owner] */
	__u64 count[2][DEV_OWNERS]; /* bios queued */
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
	__u8 by;          /* enum mio_by */
	__u8 pad;
	__u32 conn;       /* as struct file_op_key's */
};

/* record's event stream on x86-64: each CPU's array of event slots, an event
 * and its sequence number in one cache line (struct event_slot in the
 * programs, tracer/ringbuf.py SLOT_DTYPE), written in turn from the CPU's head
 * and read by userspace from its tail. The sequence number, written last,
 * publishes the slot: its index in the CPU's stream plus one. */
#define SLOT_BYTES 64

/* A CPU's position in its event slots, one cache line each (event_pos): the
 * programs' head at entry 2 x cpu (the next index a program claims), the
 * reader's tail at 2 x cpu + 1 (the next index it reads). */
struct mio_slot_pos {
	__u64 pos;
	__u64 pad[7];
};

/* A libaio iocb or io_uring request between submission and completion. */
struct pending_io {
	__u64 ts_ns;
	__u64 ino;
	__s64 offset;
	__u32 dev;
	__u32 tid;
	__u8 op;
	__u8 by;   /* enum mio_by (page-cache events) */
	__u8 region; /* enum mio_region (a read/write syscall of a region file) */
	__u8 direct; /* a read of a file open with O_DIRECT (libaio; io_uring on Linux 5.10) */
	__u32 conn;  /* the submitting thread's connection (struct file_op_key's) */
};

/* Counters of what could not be accounted, read by userspace from .bss. */
struct drop_counters {
	__u64 stats_full;      /* a new (file, op) row did not fit the map */
	__u64 inflight_full;   /* a syscall's in-flight slot taken before its exit by a thread sharing its cells */
	__u64 iocbs_truncated; /* iocbs past MAX_IOCBS, or iovecs past MAX_IOVECS */
	__u64 uring_no_file;   /* io_uring completion with no file attached */
	__u64 read_faults;     /* user memory (iocbs, iovecs) that could not be read */
	__u64 ringbuf_full;    /* record: an event did not fit its CPU's ring buffer */
	__u64 pending_full;    /* record: no room to remember a submitted AIO request */
	__u64 unmatched;       /* record: a libaio completion whose submission was not seen */
	__u64 lat_full;        /* top: a latency row or pending request did not fit
				* (its latency is unknown; its bytes are counted) */
	__u64 lat_unmatched;   /* top: an AIO completion whose submission was not seen
				* (in flight at attach); top and record: such an
				* io_uring completion (counted, recorded untimed):
				* its latency is unknown */
	__u64 dev_full;        /* a bio of a device that found no free slot */
	__u64 msync_no_file;   /* an msync whose address no file mapping held */
	__u64 events_contended; /* record (event slots): an event whose program found
				 * its CPU's next slot taken by interrupting programs
				 * at each of its tries */
	__u64 conn_full;       /* a thread's connection did not fit the map conns (its
				* requests are counted, their connection unknown) */
};

#endif /* __MYSQLIO_H */
