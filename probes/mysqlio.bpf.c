// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Per-file write, read and sync accounting for one process (mysqld).
 *
 * Syscalls: the per-syscall tracepoints of the I/O syscalls, or (without
 * tracefs) the BTF raw tracepoints sys_enter/sys_exit. Exit turns the fd into
 * the file it names (dev, inode) and adds the returned byte count. Its
 * arguments are read there from the registers the syscall entered with
 * (bpf_task_pt_regs, 5.15), so entry only stamps the time, and only while
 * requests are timed (record, top --latency); before 5.15, entry keeps the
 * fd, its offset argument and the time.
 * libaio: at io_submit exit, each accepted iocb is added with its submitted
 * size; the first rejected one counts as an error.
 * io_uring: at io_uring_complete the request still holds its struct file,
 * opcode and result, so the bytes are counted there.
 * O_DIRECT reads (the file's f_flags): a MIO_DIRECT_READ row too, of the bytes
 * their bios read (pagecache.bpf.h: direct_read_bio; a read of unwritten
 * extents or holes returns zeros without any), or, for io_uring, libaio's
 * io_submit of several iocbs and without the bio program, of the bytes the
 * read returned.
 * Latency: syscalls from entry to exit; libaio iocbs from io_submit to the
 * io_getevents that returns them (matched by iocb pointer); io_uring requests
 * from io_uring_submit_req to io_uring_complete (matched by request pointer).
 * The pending tables are bounded; userspace ages out requests never completed.
 *
 * Aggregates go to one of two hash maps behind a one-slot ARRAY_OF_MAPS.
 * Userspace swaps the slot each interval; the kernel's update of a map-in-map
 * waits for an RCU grace period, so no program still writes the old map when
 * userspace drains it: no update is lost between read and reset.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "mysqlio.h"

/* Syscall numbers; the tracepoints give raw numbers, not names. */
#if defined(__TARGET_ARCH_x86)
#define NR_read 0
#define NR_write 1
#define NR_pread64 17
#define NR_pwrite64 18
#define NR_readv 19
#define NR_writev 20
#define NR_fsync 74
#define NR_fdatasync 75
#define NR_io_getevents 208
#define NR_io_submit 209
#define NR_sync_file_range 277
#define NR_preadv 295
#define NR_pwritev 296
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_io_pgetevents 333
#define NR_msync 26
#define SYSCALL_NR_FIELD orig_ax
#define SYSCALL_NR(regs) ((regs)->SYSCALL_NR_FIELD)
#define O_DIRECT 00040000 /* uapi asm-generic/fcntl.h: x86's */
#elif defined(__TARGET_ARCH_arm64)
#define NR_io_submit 2
#define NR_io_getevents 4
#define NR_io_pgetevents 292
#define NR_msync 227
#define NR_read 63
#define NR_write 64
#define NR_readv 65
#define NR_writev 66
#define NR_pread64 67
#define NR_pwrite64 68
#define NR_preadv 69
#define NR_pwritev 70
#define NR_fsync 82
#define NR_fdatasync 83
#define NR_sync_file_range 84
#define NR_preadv2 286
#define NR_pwritev2 287
#define SYSCALL_NR_FIELD syscallno
#define SYSCALL_NR(regs) ((regs)->SYSCALL_NR_FIELD)
#define O_DIRECT 00200000 /* uapi arch/arm64 asm/fcntl.h: not asm-generic's */
#else
#error "mysqlio supports x86_64 and arm64"
#endif

#define S_IFMT 00170000
#define S_IFREG 0100000
#define S_IFBLK 0060000

/* uapi values, stable across kernels */
#define PROC_SUPER_MAGIC 0x9fa0
#define SYSFS_MAGIC 0x62656572
#define CGROUP_SUPER_MAGIC 0x27e0eb
#define CGROUP2_SUPER_MAGIC 0x63677270
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#define IOCB_CMD_PREAD 0
#define IOCB_CMD_PWRITE 1
#define IOCB_CMD_FSYNC 2
#define IOCB_CMD_FDSYNC 3
#define IOCB_CMD_PREADV 7
#define IOCB_CMD_PWRITEV 8
#define IORING_OP_READV 1
#define IORING_OP_WRITEV 2
#define IORING_OP_FSYNC 3
#define IORING_OP_READ_FIXED 4
#define IORING_OP_WRITE_FIXED 5
#define IORING_OP_SYNC_FILE_RANGE 8
#define IORING_OP_READ 22
#define IORING_OP_WRITE 23
#define IORING_FSYNC_DATASYNC 1

const volatile bool targ_record = false; /* stream one event per request */
/* Kernel features, probed by userspace before load (tracer/kernel_features.py):
 * the branch not taken is removed by the verifier, so a helper the kernel
 * lacks may appear in it. */
/* bpf_task_pt_regs (5.15): a syscall's arguments are read at its exit, from
 * the registers saved at entry (x86-64 keeps them there; arm64 keeps the
 * first in orig_x0), so no enter program is needed unless requests are timed */
const volatile bool targ_args_at_exit = false;
/* the stats table (struct stats_cell) for the cas programs: set where the
 * kernel has BPF compare-and-swap (5.12), with which a program claims a cell */
const volatile bool targ_stats_cells = false;
/* the most cells used, less one: STATS_CELLS - 1, or fewer (a power of two,
 * less one) for a test of the overflow into the hash maps; control->cells_mask
 * says how many are used now */
const volatile __u32 targ_cells_mask = STATS_CELLS - 1;
/* which argument of the io_uring tracepoints is the request (it moved) */
const volatile __u32 targ_uring_submit_req_arg = 0;
const volatile __u32 targ_uring_complete_req_arg = 1;
/* io_uring_complete has no request (Linux 5.10: ctx, user_data, res, cflags):
 * a request is matched to its submission by its ring and user_data */
const volatile bool targ_uring_by_user_data = false;
/* log2 of the kernel's page size (mysqlio.bpf_arch sets it from the running
 * kernel): page indexes and folio orders become bytes with it */
const volatile __u32 targ_page_shift = DEFAULT_PAGE_SHIFT;
/* the bio program is attached (not --no-page-cache): an O_DIRECT read by a
 * syscall or a lone libaio iocb counts its disk bytes from its bios
 * (direct_read_bio), not the bytes it returned */
const volatile bool targ_direct_bios = false;

struct drop_counters drops = {};

/* struct mio_control: whether the enter programs stamp requests
 * (targ_args_at_exit; timed from load, or set by userspace when it starts
 * timing them, before it attaches the enter programs), the stats table's half
 * written, the region files. Its own map, not a .bss variable: userspace
 * writes it whole while the programs update drops. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mio_control);
} control SEC(".maps");

/* A lookup of a one-entry ARRAY is inlined by the verifier: one load. */
static __always_inline struct mio_control *control_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&control, &zero);
}

static __always_inline bool requests_timed(void)
{
	struct mio_control *ctl;

	if (targ_record)
		return true;
	ctl = control_get();
	return ctl && ctl->timed;
}

/* No room to remember a submitted request: in record mode its event will be
 * lost; in top mode only its latency (libaio bytes count at submission,
 * io_uring bytes at completion). */
static __always_inline void count_pending_full(void)
{
	if (targ_record)
		__sync_fetch_and_add(&drops.pending_full, 1);
	else
		__sync_fetch_and_add(&drops.lat_full, 1);
}

/* A libaio completion whose submission was not seen: in record mode an event
 * is lost; in top mode only its latency is unknown (it was in flight at attach).
 * (io_uring completions carry everything but the latency: see on_uring_complete.) */
static __always_inline void count_unmatched(void)
{
	if (targ_record)
		__sync_fetch_and_add(&drops.unmatched, 1);
	else
		__sync_fetch_and_add(&drops.lat_unmatched, 1);
}

enum call_kind { CALL_FD = 0, CALL_MSYNC = 1, CALL_IO_SUBMIT = 2, CALL_IO_GETEVENTS = 3 };

/* What file_ref_seen read of a file's inode, storage or not, for a caller
 * that caches the file's identity (fd_file_ref): all zero if it read none. */
struct inode_seen {
	struct inode *inode;
	struct super_block *sb;
	__u64 ino;
};

/* A file a thread's fd syscalls named lately (struct inflight's last): its
 * inode as read when it entered, filled in place (no copy on the stack) */
struct last_file {
	struct inode_seen seen;
	struct file *file;
	__u32 dev;
	__u8 storage; /* the file is storage (else not accounted) */
	__u8 pad[3];
};

/* Files kept per thread: a committing thread of MariaDB 11.8 alternates the
 * binlog and the redo log: with one kept, a miss at almost every call (11.8
 * record x0.94 with two, tools/ab_objects.py, issue 19). Two: fd_file_ref
 * tells the newest from the other by one bit. */
#define LAST_FILES 2

/* What sys_enter learnt, kept until sys_exit of the same thread, written in
 * place (no copy through the stack): with targ_args_at_exit only the time and
 * syscall number (the exit fills the rest from the registers), else the
 * arguments too. A read/write/sync syscall keeps its fd:
 * the file it names is looked up at exit, not at entry, where the thread's
 * last files (below) spare most of the lookup. Measured on 6.18 with MariaDB
 * 10.11 (tools/ab_objects.py, issue 19): the lookup costs about as much at
 * exit as at entry; the slot filled in place and the cache of the last file
 * cut the in-kernel time per request by 6 % (top) and 12 % (record). */
struct inflight {
	__u64 ts_ns;       /* entry */
	__s64 offset;      /* CALL_FD: the offset argument, or -1 (none, or at_pos) */
	__u64 uptr;        /* io_submit: iocb pointer array; io_getevents: io_event array */
	struct file *file; /* CALL_MSYNC: the file mapped at the address (read at entry) */
	__u64 ino;         /* CALL_MSYNC: its identity */
	__u32 dev;
	__u32 fd;          /* CALL_FD */
	__u32 nr;          /* io_submit: number of iocbs asked */
	__u8 kind;         /* enum call_kind */
	__u8 op;           /* CALL_FD, CALL_MSYNC: enum mio_op */
	__u8 at_pos;       /* CALL_FD: acts at the file position (read at exit) */
	__u8 active;       /* set last at entry, cleared at exit */
	__u8 last_newest;  /* which of last[] the thread named most recently */
	__u8 pad;
	__u16 sysno;       /* the syscall stamped at entry (targ_args_at_exit) */
	__u32 tid;         /* the thread whose slot this is (0: none yet) */
	/* The last files this thread's fd syscalls named, kept across calls
	 * while requests are timed (untimed, no slot is read: account_untimed):
	 * a file's identity is taken again while the fd names the same struct
	 * file with the same inode (pointer, number and super block), which skips
	 * reading the inode's and super block's heads; record, which reads no
	 * per-interval counts, then makes no stats row either. A struct file
	 * or inode freed and reused at the same address for another file fails
	 * a comparison: the identity (s_dev, i_ino) is that of the same super
	 * block and number (files are SLAB_TYPESAFE_BY_RCU since 6.7: their
	 * reuse is quick). */
	struct last_file last[LAST_FILES];
};

/* The in-flight slots: one array, a thread's slot one of two cells chosen by
 * its tid and marked with it (inflight_slot). An ARRAY lookup is inlined by
 * the verifier: the cell's address is a multiply and an add, its load the one
 * line it touches. Task-local storage (5.13), used before, cost a helper call
 * and three more lines (the task's storage pointer, its cache, the element):
 * on 6.18 with MariaDB 10.11, `record` x 0.85 per request with this array
 * (tools/ab_objects.py, issue 19). It also needs no fallback: the LRU hash
 * kernels before 5.13 had instead is gone. 16,384 cells of 144 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INFLIGHT_SLOTS);
	__type(key, __u32);
	__type(value, struct inflight);
} inflight SEC(".maps");

struct stats_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FILE_OPS);
	__type(key, struct file_op_key);
	__type(value, struct file_op_stats);
} stats_a SEC(".maps"), stats_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct stats_map);
} stats_slot SEC(".maps") = {
	.values = { &stats_a },
};

/* The stats table: the rows of the cas programs (targ_stats_cells), in
 * open-addressed cells of one cache line each, found by a hash of the key
 * (cell_row). A row of the hash maps above costs two to three cold cache lines
 * per request (a bucket, then an element of 96 bytes whose key and counts
 * straddle lines): their lookup was a third of top's in-kernel time on 6.18
 * (perf, issue 19). Rows whose cells are all taken go to the hash maps.
 * Two halves of STATS_CELLS cells in one map, not two maps behind a
 * map-in-map: a lookup in a map the verifier knows is inlined, one in an
 * inner map is a helper call and an indirect one (issue 19). The programs
 * write the half control->cells_half names; userspace flips it, waits for an
 * RCU grace period (its swap of the stats maps' slot), then reads the other
 * half through mmap and zeroes it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * STATS_CELLS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct stats_cell);
} cells SEC(".maps");

/* latency histograms per (file, op, api), swapped like the stats maps.
 * Preallocated (2 x 4,096 rows of 1 KiB), though most intervals use few:
 * before Linux 6.1 (bpf_mem_alloc) a tracing program that allocates a hash
 * row at run time may recurse into the allocator, and loading one makes the
 * verifier WARN ("trace type BPF program uses run-time allocation": a stack
 * trace in dmesg, a panic where panic_on_warn is set). Seen on Debian 11's
 * 5.10.0-32 in the kernel matrix. */
struct lat_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LAT_ROWS);
	__type(key, struct lat_key);
	__type(value, struct lat_hist);
} lat_a SEC(".maps"), lat_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct lat_map);
} lat_slot SEC(".maps") = {
	.values = { &lat_a },
};

/* an all-zero histogram to create rows from (too large for the stack) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_hist);
} lat_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_NAMES);
	__type(key, struct file_id);
	__type(value, struct file_name);
} names SEC(".maps");

/* names of the threads seen, for thread attribution after they exit */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_name);
} threads SEC(".maps");

/* record's event stream: one BPF ring buffer per CPU (created, sized and put
 * in by userspace after load). One ring shared by every CPU made each event
 * take the ring's lock and producer lines from the CPU that wrote last. */
struct event_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* the possible CPUs, set by userspace */
	__type(key, __u32);
	__array(values, struct event_ring);
} events SEC(".maps");

/* On x86-64, where the kernel has BPF atomics (the cas programs), event slots
 * instead (targ_event_slots): each CPU's events in an array of slots of its
 * own, one cache line each (mmapable: page-aligned), claimed in turn from the
 * CPU's head by compare-and-swap and read by userspace from its tail; a slot's
 * seq, written last, publishes it. Measured on 6.18 with MariaDB 10.11
 * (tools/ab_objects.py, issue 19): the ring buffer's reserve and submit cost
 * record's exit program 240 ns a request (552 -> 313 ns without any event),
 * slots 75 ns (388): the ring takes two helper calls, a spinlock with
 * interrupts off and an atomic exchange, and each call and return pays for
 * the CPU's return-thunk mitigation (AMD's SRSO).
 * Order: a program writes the event, then seq; the reader reads seq, then the
 * event. x86-64 keeps stores in order, and loads (TSO), so a plain store
 * publishes; other architectures keep the ring buffer, whose commit and
 * reader carry the barriers. Built with -DMIO_EVENT_RINGBUF: ring buffers
 * everywhere (the A/B of the two). */
#if defined(__TARGET_ARCH_x86) && !defined(MIO_EVENT_RINGBUF)
#define MIO_EVENT_SLOTS 1

struct event_slot {
	struct mio_event event;
	__u64 seq; /* the slot's index in its CPU's stream plus one, once written */
};

_Static_assert(sizeof(struct event_slot) == SLOT_BYTES, "an event slot is one cache line");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* possible CPUs x slots per CPU, set by userspace */
	__type(key, __u32);
	__type(value, struct event_slot);
} event_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2); /* 2 x possible CPUs, set by userspace */
	__type(key, __u32);
	__type(value, struct mio_slot_pos);
} event_pos SEC(".maps");

/* set by userspace before load: record streams through the event slots, each
 * CPU's 2^targ_slot_bits of them */
const volatile bool targ_event_slots = false;
const volatile __u32 targ_slot_bits = 0;
#endif

/* The region files (one entry, written by userspace after load): see
 * struct region_table. An ARRAY lookup is inlined by the verifier: a request
 * of any other file costs one pointer and MAX_REGION_FILES compares. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct region_table);
} regions SEC(".maps");

/* Which region file (dev, ino) is: its index, or -1 (most files). From the
 * control line, read by the exit programs anyway: no region table read. */
static __always_inline int region_file(__u32 dev, __u64 ino)
{
	struct mio_control *ctl = control_get();
	int f;

	if (!ctl || !ino)
		return -1;
	for (f = 0; f < MAX_REGION_FILES; f++)
		if (ctl->region_ino[f] == ino && ctl->region_dev[f] == dev)
			return f;
	return -1;
}

/* The region of region file f, (dev, ino), holding byte `offset` (a request's
 * first byte: InnoDB's writes never straddle two regions), or the file's
 * region SYSTEM when no range holds it; NONE when the offset is unknown, or
 * the table's file f is not (dev, ino) (userspace writes the table and the
 * control line one after the other). */
static __noinline __u8 region_at(int f, __u32 dev, __u64 ino, __s64 offset)
{
	struct region_table *t;
	__u32 zero = 0, r, slot;

	if (f < 0 || f >= MAX_REGION_FILES || offset < 0)
		return MIO_REGION_NONE;
	t = bpf_map_lookup_elem(&regions, &zero);
	if (!t || t->ino[f] != ino || t->dev[f] != dev)
		return MIO_REGION_NONE;
	for (r = 0; r < MAX_REGION_RANGES; r++) {
		if (r >= t->nranges[f])
			break;
		slot = f * MAX_REGION_RANGES + r;
		if (slot >= MAX_REGION_SLOTS)
			break;
		if ((__u64)offset >= t->start[slot] && (__u64)offset < t->end[slot])
			return t->region[slot];
	}
	return MIO_REGION_SYSTEM;
}

/* The region of file (dev, ino) holding byte `offset`: NONE for most files */
static __always_inline __u8 region_of(__u32 dev, __u64 ino, __s64 offset)
{
	int f = region_file(dev, ino);

	return f >= 0 ? region_at(f, dev, ino, offset) : MIO_REGION_NONE;
}

/* submitted libaio iocbs (by user iocb pointer) and io_uring
 * requests (by request pointer), until their completion is seen */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PENDING);
	__type(key, __u64);
	__type(value, struct pending_io);
} aio_pending SEC(".maps"), uring_pending SEC(".maps");

/* Per-CPU scratch space for what does not fit the BPF stack (512 bytes for
 * the whole call chain; older verifiers count it more strictly). One slot per
 * program that uses it, so no two programs ever share one: the kernel never
 * runs a program twice at once on a CPU, but it runs other programs there
 * while one is stopped. An io_uring completion can run in an interrupt on a
 * CPU whose program it interrupted (Linux 5.10 completes direct I/O from the
 * block layer's interrupt), and where the syscall tracepoints are preemptible
 * (Debian's 7.2, PREEMPT_LAZY: they lost runs to other tasks' runs of the same
 * program) another task's enter program can run while one is preempted. */
enum scratch_slot {
	SCRATCH_MSYNC_ENTER = 0,
	SCRATCH_EXIT,
	SCRATCH_URING_SUBMIT,
	SCRATCH_URING_COMPLETE,
	SCRATCH_BIO,
	SCRATCH_IO_SUBMIT_ENTER,
	SCRATCH_SLOTS
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct file_name);
} name_scratch SEC(".maps");

/* The heads of struct inode and super_block, read in one probe read each */
#define INODE_HEAD 96
#define SB_HEAD 128
struct heads {
	char inode[INODE_HEAD];
	char sb[SB_HEAD];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct heads);
} heads_scratch SEC(".maps");

static __always_inline __u32 current_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

static __always_inline bool is_target_tgid(__u32 tgid)
{
	struct mio_control *ctl = control_get();

	return ctl && ctl->tgid == tgid;
}

/* The current thread's pid_tgid if it is one of the target's, else 0 (the
 * idle task's, never traced), read once: its tid is the row's thread */
static __always_inline __u64 target_id(void)
{
	__u64 id = bpf_get_current_pid_tgid();

	return is_target_tgid(id >> 32) ? id : 0;
}

static __always_inline bool is_target(void)
{
	return target_id() != 0;
}

/* bpf_get_current_task_btf (5.11) gives a BTF pointer whose fields are plain
 * loads; before it, bpf_get_current_task and CO-RE probe reads. */
#define HAS_TASK_BTF bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)

/* The address of fd's slot in the fd array of task, a BTF pointer (NULL:
 * beyond it). The slot holds a struct file * (a word holding one since 6.12). */
static __always_inline struct file **fd_slot_of(struct task_struct *task, __u32 fd)
{
	struct fdtable *fdt = task->files->fdt;

	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	return &fdt->fd[fd];
}

/* fd_slot_of the current task */
static __always_inline struct file **fd_slot(__u32 fd)
{
	struct task_struct *task;
	struct fdtable *fdt;

	if (HAS_TASK_BTF)
		return fd_slot_of(bpf_get_current_task_btf(), fd);
	task = (struct task_struct *)bpf_get_current_task();
	fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	return &BPF_CORE_READ(fdt, fd)[fd];
}

/* The struct file an fd array's slot holds, or NULL. The array holds
 * untyped pointers, hence one probe read. */
static __always_inline struct file *slot_file(struct file **slot)
{
	struct file *file = NULL;

	if (slot)
		bpf_probe_read_kernel(&file, sizeof(file), slot);
	return file;
}

/* The struct file an fd of the current task names, or NULL. */
static struct file *fd_to_file(__u32 fd)
{
	return slot_file(fd_slot(fd));
}

/* A thread's two candidate cells: its tid's low bits, then a multiplicative
 * hash of it, so two tids that share the first (they differ by a multiple of
 * INFLIGHT_SLOTS) rarely share the second too. */
static __always_inline struct inflight *inflight_cell(__u32 tid, const int way)
{
	__u32 idx = way ? (tid * 0x9E3779B1U) >> (32 - INFLIGHT_BITS) : tid & (INFLIGHT_SLOTS - 1);

	return bpf_map_lookup_elem(&inflight, &idx);
}

/* Thread tid's in-flight slot, or NULL if it has none. The callers pass the
 * current thread's tid, read once per program run (a helper call each). */
static __always_inline struct inflight *inflight_get(__u32 tid)
{
	struct inflight *slot = inflight_cell(tid, 0);

	if (slot && slot->tid == tid)
		return slot;
	slot = inflight_cell(tid, 1);
	return slot && slot->tid == tid ? slot : NULL;
}

/* This thread's in-flight slot, claimed if need be: its first cell if no
 * thread ever had it, else its second unless that one's thread is in a
 * syscall, else the first unless the same. Both threads in a syscall: the
 * first is taken from its thread, whose call loses its arguments and time
 * (counted in inflight_full). A claimed cell's last files are forgotten.
 * A thread that exited leaves its cell marked: the next claim takes it.
 * (Not guarded against one case: a claim of a cell at the very instant its
 * thread enters a syscall, which then finds no slot at exit, uncounted. It
 * needs two live threads sharing the first cell and a race of a few ns.) */
static __always_inline struct inflight *inflight_slot(__u32 tid)
{
	struct inflight *first, *second;

	first = inflight_cell(tid, 0);
	if (!first)
		return NULL;
	if (first->tid == tid)
		return first;
	second = inflight_cell(tid, 1);
	if (!second)
		return NULL;
	if (second->tid == tid)
		return second;
	if (first->tid && !second->active)
		first = second;
	else if (first->active)
		__sync_fetch_and_add(&drops.inflight_full, 1);
	first->active = 0;
	first->last[0].file = NULL;
	first->last[1].file = NULL;
	first->tid = tid;
	return first;
}

/* A file as it is accounted: its pointer (for the path walk) and identity. */
struct file_ref {
	struct file *file;
	__u64 ino;
	__u32 dev;
	__u8 region; /* enum mio_region of the request (set by the caller) */
};

/* The head of struct inode / super_block, read in one probe read each: a
 * probe read costs ~25 ns here, and the fields needed (i_mode, i_sb, i_ino;
 * s_dev, s_magic) all lie in the first bytes on the kernels seen. Their
 * offsets are CO-RE relocated constants: a field beyond the head (another
 * layout) is read on its own instead, never taken as 0. */
#define HEAD_FIELD(head, ptr, type, field)                                                          \
	(bpf_core_field_offset(type, field) + sizeof(((type *)0)->field) <= sizeof(head)            \
		 ? *(__typeof__(((type *)0)->field) *)((head) + bpf_core_field_offset(type, field)) \
		 : BPF_CORE_READ((type *)(ptr), field))

/* What is storage: a regular file or a block device (mode & S_IFMT), and not
 * a regular file of a pseudo filesystem (mysqld reads /proc and /sys). */
static __always_inline bool is_storage_mode(__u32 mode)
{
	return mode == S_IFBLK || mode == S_IFREG;
}

static __always_inline bool is_pseudo_fs(__u64 magic)
{
	return magic == PROC_SUPER_MAGIC || magic == SYSFS_MAGIC || magic == CGROUP_SUPER_MAGIC ||
	       magic == CGROUP2_SUPER_MAGIC;
}

/* Fill ref for a file that is storage (is_storage_mode, not is_pseudo_fs).
 * Every field is read here once, so the exit path reads none. seen,
 * when not NULL, gets the inode's pointer, super block and number. */
static __always_inline bool file_ref_seen(struct file *file, struct file_ref *ref, __u32 slot,
					  struct inode_seen *seen)
{
	struct heads *heads;
	struct inode *inode;
	struct super_block *sb;
	__u32 mode;

	if (!file)
		return false;
	heads = bpf_map_lookup_elem(&heads_scratch, &slot);
	if (!heads)
		return false;
	inode = BPF_CORE_READ(file, f_inode);
	if (bpf_probe_read_kernel(heads->inode, sizeof(heads->inode), inode))
		return false;
	sb = HEAD_FIELD(heads->inode, inode, struct inode, i_sb);
	if (seen) {
		seen->inode = inode;
		seen->sb = sb;
		seen->ino = HEAD_FIELD(heads->inode, inode, struct inode, i_ino);
	}
	mode = HEAD_FIELD(heads->inode, inode, struct inode, i_mode) & S_IFMT;
	if (!is_storage_mode(mode))
		return false;
	if (bpf_probe_read_kernel(heads->sb, sizeof(heads->sb), sb))
		return false;
	if (mode == S_IFREG && is_pseudo_fs(HEAD_FIELD(heads->sb, sb, struct super_block, s_magic)))
		return false;
	ref->file = file;
	ref->region = MIO_REGION_NONE;
	ref->ino = HEAD_FIELD(heads->inode, inode, struct inode, i_ino);
	ref->dev = HEAD_FIELD(heads->sb, sb, struct super_block, s_dev);
	return true;
}

static __always_inline bool file_ref_of(struct file *file, struct file_ref *ref, __u32 slot)
{
	return file_ref_seen(file, ref, slot, NULL);
}

/* bpf_rdonly_cast (a kfunc, 6.2): a pointer read as a BTF pointer of a kernel
 * type, whose fields are then plain loads, not probe reads. Called only by
 * the *_cast programs, which userspace loads only where the kernel has it
 * (kernel_features: rdonly_cast); weak, so other kernels load the rest. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* a struct file pointer read untyped, as a BTF pointer (bpf_rdonly_cast) */
static __always_inline struct file *file_btf(const struct file *untyped)
{
	return bpf_rdonly_cast(untyped, bpf_core_type_id_kernel(struct file));
}

/* file_ref_seen through bpf_rdonly_cast: the same fields, as plain loads (a
 * probe read costs ~25 ns here; file_ref_seen makes three). */
static __always_inline bool file_ref_cast(struct file *untyped, struct file_ref *ref, struct inode_seen *seen)
{
	struct file *file;
	struct inode *inode;
	struct super_block *sb;
	__u32 mode;

	if (!untyped)
		return false;
	file = file_btf(untyped);
	inode = file->f_inode;
	if (seen) {
		seen->inode = inode;
		seen->sb = inode->i_sb;
		seen->ino = inode->i_ino;
	}
	mode = inode->i_mode & S_IFMT;
	if (!is_storage_mode(mode))
		return false;
	sb = inode->i_sb;
	if (mode == S_IFREG && is_pseudo_fs(sb->s_magic))
		return false;
	ref->file = untyped;
	ref->region = MIO_REGION_NONE;
	ref->ino = inode->i_ino;
	ref->dev = sb->s_dev;
	return true;
}

/* fd_to_file through bpf_rdonly_cast: the fd array's slot read with a plain
 * load instead of a probe read. The array holds untyped pointers, so its slot
 * is cast to struct fd, whose first 8 bytes are a struct file * (a word
 * holding one since 6.12): the load is read raw, by offset, not by a field
 * name, which differs between kernels. */
static __always_inline struct file *slot_file_cast(struct file **slot)
{
	if (!slot)
		return NULL;
	return (struct file *)*(__u64 *)bpf_rdonly_cast(slot, bpf_core_type_id_kernel(struct fd));
}

static __always_inline struct file *fd_to_file_cast(__u32 fd)
{
	return slot_file_cast(fd_slot(fd));
}

/* The struct file an fd names, through a BTF cast where the program may
 * call bpf_rdonly_cast (see handle_exit_cast). */
static __always_inline struct file *fd_file(__u32 fd, const bool cast)
{
	return cast ? fd_to_file_cast(fd) : fd_to_file(fd);
}

/* fd_file of task, a BTF pointer to the current task (one helper call fewer
 * than fd_file where the caller already holds it) */
static __always_inline struct file *fd_file_of(struct task_struct *task, __u32 fd, const bool cast)
{
	struct file **slot = fd_slot_of(task, fd);

	return cast ? slot_file_cast(slot) : slot_file(slot);
}

/* which connection each thread serves (--mysql): connection.bpf.h, included
 * at the end (its program reads a tracepoint's argument as enter_tracepoint) */
static __always_inline __u32 conn_of(__u32 tid);
static __always_inline bool conn_read_raw(struct pt_regs *regs, __u32 tid, const bool cast);

/* Remember the path of a file userspace may never see open (it can be
 * closed before the next /proc read): walk dentries up, across mounts. */
static __noinline void remember_name(struct file *file, struct file_id *id, __u32 slot)
{
	struct file_name *name;
	struct dentry *dentry, *parent, *mnt_root;
	struct vfsmount *vfsmnt;
	struct mount *mnt, *mnt_parent;
	const unsigned char *str;
	int i;

	if (bpf_map_lookup_elem(&names, id))
		return;
	name = bpf_map_lookup_elem(&name_scratch, &slot);
	if (!name)
		return;
	name->depth = 0;
	name->complete = 0;
	name->nlink = BPF_CORE_READ(file, f_inode, i_nlink);
	name->mode = BPF_CORE_READ(file, f_inode, i_mode);
	dentry = BPF_CORE_READ(file, f_path.dentry);
	vfsmnt = BPF_CORE_READ(file, f_path.mnt);
	/* struct mount embeds the vfsmount; its offset is relocated (CO-RE) */
	mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt);

	for (i = 0; i < PATH_DEPTH + 4; i++) {
		mnt_root = BPF_CORE_READ(mnt, mnt.mnt_root);
		if (dentry == mnt_root) {
			mnt_parent = BPF_CORE_READ(mnt, mnt_parent);
			if (mnt_parent == mnt) {
				name->complete = 1;
				break;
			}
			/* continue from the mount point in the parent mount */
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = mnt_parent;
			continue;
		}
		parent = BPF_CORE_READ(dentry, d_parent);
		if (parent == dentry) {
			name->complete = 1;
			break;
		}
		if (name->depth >= PATH_DEPTH)
			break;
		str = BPF_CORE_READ(dentry, d_name.name);
		bpf_probe_read_kernel_str(name->comps[name->depth & (PATH_DEPTH - 1)],
					  NAME_LEN, str);
		name->depth++;
		dentry = parent;
	}
	bpf_map_update_elem(&names, id, name, BPF_NOEXIST);
}

/* page-cache rows and their events (pagecache.bpf.h): a direct read's are counted the same way */
static __noinline int account_page_cache(const struct file_op_key *key, __u64 bytes, __s64 offset);
static __noinline int account_page_cache_cas(const struct file_op_key *key, __u64 bytes, __s64 offset);

/* the file was opened (or fcntl'd) with O_DIRECT: its reads bypass the page cache, their
 * bios carry the reader's pages, which name no file (pagecache.bpf.h's on_bio counts them
 * on the device only) */
static __always_inline bool file_is_direct(struct file *f, const bool cast)
{
	if (!f)
		return false;
	if (cast)
		return file_btf(f)->f_flags & O_DIRECT;
	return BPF_CORE_READ(f, f_flags) & O_DIRECT;
}

/* a new row's initial value (read-only data: not on the stack) */
static const struct file_op_stats zero_stats = {};

static __always_inline bool remember_server_file(__u32 dev, __u64 ino);

/* A cell's first three words are its key (struct file_op_key), its next three
 * its counts (struct file_op_stats): the layout compared word by word below. */
_Static_assert(sizeof(struct file_op_key) == 24 && sizeof(struct file_op_stats) == 24, "cell layout");
_Static_assert(__builtin_offsetof(struct stats_cell, bytes) == 24 && sizeof(struct stats_cell) == 64,
	       "cell layout");

/* the first cell tried for a key: a multiplicative hash of its three words
 * (the key's padding is zero: every key is built from = {}) */
static __always_inline __u32 cell_hash(const __u64 *w)
{
	__u64 h;

	h = w[0] * 0x9E3779B97F4A7C15ULL;
	h ^= w[1] * 0xC2B2AE3D27D4EB4FULL;
	h ^= w[2] * 0x165667B19E3779F9ULL;
	return (__u32)(h >> 32);
}

/* The counts of key in the stats table, found or claimed (*created) among
 * STATS_CELL_PROBES cells from its hash, within the first mask + 1 cells of
 * the half at base; NULL: all taken. The table's memory is vmalloc'd, 4 KiB
 * pages: over all 16,384 cells of a half each row sat on a page of its own,
 * and the load of its cell took ~45 % of the perf samples of untimed top's
 * exit program on 6.18 (MariaDB 11.8; 128 cells instead: x 0.86 per request,
 * tools/ab_objects.py, issue 19). Userspace sizes the mask to the rows it
 * sees (control->cells_mask); a key found in two cells after it grows is
 * added up by userspace, like two CPUs' rows of one key. A cell is claimed
 * by compare-and-swap (FREE -> BUSY), filled, then published (-> READY); a
 * reader skips a BUSY cell, so two CPUs making the same row at once may
 * make it twice: userspace adds rows of one key together. */
static __always_inline struct file_op_stats *cell_row(__u32 base, __u32 mask, const struct file_op_key *key,
						     bool *created)
{
	const __u64 *want = (const __u64 *)key;
	struct stats_cell *cell;
	__u32 first = cell_hash(want), i, idx;
	__u64 state;
	__u64 *have;

	for (i = 0; i < STATS_CELL_PROBES; i++) {
		idx = base + ((first + i) & mask);
		cell = bpf_map_lookup_elem(&cells, &idx);
		if (!cell)
			return NULL;
		have = (__u64 *)cell;
		state = *(volatile __u64 *)&cell->state;
		if (state == MIO_CELL_READY) {
			if (have[0] == want[0] && have[1] == want[1] && have[2] == want[2])
				return (struct file_op_stats *)&cell->bytes;
			continue;
		}
		if (state != MIO_CELL_FREE ||
		    __sync_val_compare_and_swap(&cell->state, MIO_CELL_FREE, MIO_CELL_BUSY) != MIO_CELL_FREE)
			continue;
		have[0] = want[0];
		have[1] = want[1];
		have[2] = want[2];
		/* a full barrier: the key is written before the cell is READY */
		__sync_val_compare_and_swap(&cell->state, MIO_CELL_BUSY, MIO_CELL_READY);
		*created = true;
		return (struct file_op_stats *)&cell->bytes;
	}
	return NULL;
}

/* The counts of key in the active stats maps (*created: a new row), or NULL
 * when they are full (counted). cas: the stats table may be used. */
static __always_inline struct file_op_stats *stats_row(const struct file_op_key *key, bool *created, const bool cas)
{
	struct file_op_stats *stats;
	struct mio_control *ctl;
	__u32 zero = 0;
	void *active;

	if (cas && targ_stats_cells) {
		ctl = control_get();
		if (!ctl)
			return NULL;
		stats = cell_row(ctl->cells_half & 1 ? STATS_CELLS : 0, ctl->cells_mask & targ_cells_mask, key, created);
		if (stats)
			return stats;
	}
	active = bpf_map_lookup_elem(&stats_slot, &zero);
	if (!active)
		return NULL;
	stats = bpf_map_lookup_elem(active, key);
	if (stats)
		return stats;
	/* -EEXIST here only means another CPU created the row first */
	bpf_map_update_elem(active, key, &zero_stats, BPF_NOEXIST);
	stats = bpf_map_lookup_elem(active, key);
	if (!stats) {
		__sync_fetch_and_add(&drops.stats_full, 1);
		return NULL;
	}
	*created = true;
	return stats;
}

/* Add one request's outcome to its file's row in the active stats maps, for
 * thread tid (the current one, except for an io_uring completion matched to
 * its submission on a kernel whose completion names no request). */
static __always_inline void account_in(const struct file_ref *file, __u8 op, __u8 api, __s64 ret, __u32 tid,
				       const bool cas, const bool direct_too)
{
	struct file_op_key key = {};
	struct file_op_stats *stats;
	struct thread_name thread;
	struct file_id id = {};
	bool created = false;

	if (!file)
		return;
	key.ino = file->ino;
	key.dev = file->dev;
	key.tid = tid;
	key.op = op;
	key.api = api;
	key.region = file->region;
	key.conn = conn_of(tid); /* connection.bpf.h */

	/* an O_DIRECT read: read from the device for the file, a row of its own (record: an
	 * event), counted first (whether or not the request's row fits). The key reused: no
	 * second one on the exit's stack, near the verifiers' 512 bytes. A syscall's is
	 * counted from its bios where the bio program runs (direct_read_bio). */
	if (direct_too && op == MIO_READ && ret > 0 && !(targ_direct_bios && api == MIO_API_SYSCALL) &&
	    file_is_direct(file->file, false)) {
		key.op = MIO_DIRECT_READ;
		if (cas)
			account_page_cache_cas(&key, ret, -1);
		else
			account_page_cache(&key, ret, -1);
		key.op = op;
	}
	stats = stats_row(&key, &created, cas);
	/* record drains these counts unread: a full table loses none of its events, and
	 * what making a row does once (below) is done without one, or the files past a
	 * full table (opened and closed faster than its drains) would go unnamed */
	if (!stats && !targ_record)
		return;
	if (created || !stats) {
		id.ino = key.ino;
		id.dev = key.dev;
		/* its pages written back later, by anyone, are the server's */
		remember_server_file(key.dev, key.ino);
		if (file->file)
			/* io_uring requests are accounted at completion, the others at syscall exit */
			remember_name(file->file, &id, api == MIO_API_IO_URING ? SCRATCH_URING_COMPLETE : SCRATCH_EXIT);
		/* a thread's name can change (MySQL names its threads after start) */
		if (tid == (__u32)bpf_get_current_pid_tgid()) {
			bpf_get_current_comm(thread.comm, sizeof(thread.comm));
			bpf_map_update_elem(&threads, &key.tid, &thread, BPF_ANY);
		}
	}
	if (!stats)
		return;
	if (ret < 0) {
		__sync_fetch_and_add(&stats->errors, 1);
		return;
	}
	__sync_fetch_and_add(&stats->ops, 1);
	if (op == MIO_WRITE || op == MIO_READ)
		__sync_fetch_and_add(&stats->bytes, ret);
}

/* Two copies: a program of a kernel without BPF compare-and-swap must not
 * hold the instruction at all (the *_nocas programs, the global functions) */
static __noinline void account(const struct file_ref *file, __u8 op, __u8 api, __s64 ret, __u32 tid)
{
	account_in(file, op, api, ret, tid, false, true);
}

/* account without the direct read's row, for account_iocb: its call chain
 * (exit, account_iocb, account, remember_name) is at the verifiers' 512 bytes */
static __noinline void account_iocb_row(const struct file_ref *file, __u8 op, __s64 ret)
{
	account_in(file, op, MIO_API_LIBAIO, ret, current_tid(), false, false);
}

static __noinline void account_cas(const struct file_ref *file, __u8 op, __u8 api, __s64 ret, __u32 tid)
{
	account_in(file, op, api, ret, tid, true, true);
}

/* cas is a constant at every call site: only one of the two is compiled in */
#define ACCOUNT(cas, ...) ((cas) ? account_cas(__VA_ARGS__) : account(__VA_ARGS__))

/* record: room for one event in the ring buffer of this CPU, or NULL (counted) */
static __always_inline struct mio_event *ring_reserve(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct mio_event *e;
	void *ring;

	ring = bpf_map_lookup_elem(&events, &cpu);
	e = ring ? bpf_ringbuf_reserve(ring, sizeof(*e), 0) : NULL;
	if (!e)
		__sync_fetch_and_add(&drops.ringbuf_full, 1);
	return e;
}

#ifdef MIO_EVENT_SLOTS
/* one load or store of a word shared with other CPUs or userspace, neither
 * merged nor repeated by the compiler */
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/* times a program tries to claim a slot while programs that interrupt it on
 * its CPU claim the ones it read */
#define SLOT_CLAIM_TRIES 4

/* record: this CPU's next event slot, or NULL (counted), and *seq to publish
 * it with. Programs can interrupt one another on a CPU (a completion can run
 * in an interrupt; a syscall tracepoint program can be preempted where the
 * kernel is built preemptible, as Debian sid's 7.2 with PREEMPT_LAZY), so they
 * share its head: compare-and-swap claims an index for one of them. A slot is
 * free once the reader's tail has passed it (the tail moves after its events
 * are copied out). A claimed slot must be published, or the reader stops
 * there: the slot is looked up before the claim (its lookup cannot fail, the
 * CPU being below the possible CPUs whose slots the array holds). */
static __always_inline struct mio_event *slot_reserve(__u64 *seq)
{
	__u32 cpu = bpf_get_smp_processor_id(), at = 2 * cpu, key;
	__u64 slots = 1ULL << targ_slot_bits, idx;
	struct mio_slot_pos *head, *tail;
	struct event_slot *slot;
	int i;

	head = bpf_map_lookup_elem(&event_pos, &at);
	at++;
	tail = bpf_map_lookup_elem(&event_pos, &at);
	if (!head || !tail)
		return NULL;
	for (i = 0; i < SLOT_CLAIM_TRIES; i++) {
		idx = READ_ONCE(head->pos);
		if (idx - READ_ONCE(tail->pos) >= slots) {
			__sync_fetch_and_add(&drops.ringbuf_full, 1);
			return NULL;
		}
		key = (cpu << targ_slot_bits) + (__u32)(idx & (slots - 1));
		slot = bpf_map_lookup_elem(&event_slots, &key);
		if (!slot)
			return NULL;
		if (__sync_val_compare_and_swap(&head->pos, idx, idx + 1) != idx)
			continue;
		*seq = idx + 1;
		return &slot->event;
	}
	__sync_fetch_and_add(&drops.events_contended, 1);
	return NULL;
}
#endif

/* record: room for one event in this CPU's event stream, or NULL (counted);
 * *seq is event_submit's. cas: the program may use compare-and-swap (only
 * those use the event slots). */
static __always_inline struct mio_event *event_reserve(__u64 *seq, const bool cas)
{
#ifdef MIO_EVENT_SLOTS
	if (cas && targ_event_slots)
		return slot_reserve(seq);
#endif
	return ring_reserve();
}

/* record: the event reserved is written: publish it. The ring's without a
 * wakeup (userspace polls). */
static __always_inline void event_submit(struct mio_event *e, __u64 seq, const bool cas)
{
#ifdef MIO_EVENT_SLOTS
	if (cas && targ_event_slots) {
		barrier(); /* the event's stores before seq's (x86-64 keeps them in order) */
		WRITE_ONCE(container_of(e, struct event_slot, event)->seq, seq);
		return;
	}
#endif
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* record: one event into this CPU's event stream; userspace polls it. `now`
 * is the completion's time, read once by the caller for the latency histogram
 * and the event alike (a clock read costs 80-150 ns where the TSC is virtualised). */
static __always_inline int emit_in(const struct pending_io *req, __u8 api, __s64 result, __u64 now,
				   const bool cas)
{
	struct mio_event *e;
	__u64 seq = 0;

	if (!req)
		return 0;
	e = event_reserve(&seq, cas);
	if (!e)
		return 0;
	e->ts_ns = now;
	e->latency_ns = req->ts_ns ? now - req->ts_ns : MIO_LATENCY_UNKNOWN;
	e->ino = req->ino;
	e->offset = req->offset;
	e->result = result;
	e->dev = req->dev;
	e->tid = req->tid;
	e->op = req->op;
	e->api = api;
	e->by = req->by;
	e->pad = 0;
	e->conn = req->conn;
	event_submit(e, seq, cas);
	return 0;
}

/* the two copies, as account / account_cas. Static: a global function cannot
 * take a pointer before Linux 5.12 ("Arg#0 type PTR in emit() is not supported
 * yet" on 5.10). */
static __noinline int emit(const struct pending_io *req, __u8 api, __s64 result, __u64 now)
{
	return emit_in(req, api, result, now, false);
}

static __noinline int emit_cas(const struct pending_io *req, __u8 api, __s64 result, __u64 now)
{
	return emit_in(req, api, result, now, true);
}

#define EMIT(cas, ...) ((cas) ? emit_cas(__VA_ARGS__) : emit(__VA_ARGS__))

/* record: an io_uring completion whose submission was not seen (its start
 * time 0: latency unknown) */
static __always_inline int emit_untimed(__u32 dev, __u64 ino, __u8 op, __s64 result, const bool cas)
{
	struct pending_io req = {};

	req.ino = ino;
	req.dev = dev;
	req.offset = -1;
	req.tid = current_tid();
	req.conn = conn_of(req.tid);
	req.op = op;
	return EMIT(cas, &req, MIO_API_IO_URING, result, bpf_ktime_get_ns());
}

/* floor(log2(v)) for v > 0, without loops (libbpf-tools' log2l idiom) */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	return r | (__u32)(v >> 1);
}

static __always_inline __u32 lat_slot_of(__u64 ns)
{
	__u32 e, slot;

	if (ns < (1ULL << LAT_MIN_EXP))
		return 0;
	e = log2_u64(ns);
	/* e >= LAT_MIN_EXP > LAT_SUB_BITS: the shift below is defined */
	slot = (e - LAT_MIN_EXP) * LAT_SUB + ((ns >> (e - LAT_SUB_BITS)) & (LAT_SUB - 1));
	return slot < LAT_SLOTS ? slot : LAT_SLOTS - 1;
}

/* Keep the largest latency of a row. With BPF's compare-and-swap (Linux 5.12)
 * the maximum is exact even when CPUs race on the same row. Kernels before it
 * reject the instruction anywhere in a program, so they load the *_nocas
 * programs instead, whose plain store can lose a larger value to a smaller
 * one written at the same instant by another CPU. */
static __always_inline void lat_max(struct lat_hist *hist, __u64 lat_ns, const bool cas)
{
	__u64 old;
	int i;

	if (!cas) {
		if (lat_ns > hist->max_ns)
			hist->max_ns = lat_ns;
		return;
	}
	for (i = 0; i < 4; i++) {
		old = hist->max_ns;
		if (lat_ns <= old || __sync_val_compare_and_swap(&hist->max_ns, old, lat_ns) == old)
			break;
	}
}

/* Add one completed request's latency to its (file, op, api) histogram.
 * The callers below are global (not static) functions: verified once, not at
 * every call site, which keeps load time low with the bounded loops that call
 * them; their arguments are scalars, all a global function can take before 5.12. */
static __always_inline int record_latency_in(__u32 dev, __u64 ino, __u8 op, __u8 api, __u64 lat_ns,
					     const bool cas)
{
	struct lat_key key = {};
	struct lat_hist *hist, *zero_hist;
	__u32 zero = 0, slot;
	void *active;

	active = bpf_map_lookup_elem(&lat_slot, &zero);
	if (!active)
		return 0;
	key.ino = ino;
	key.dev = dev;
	key.op = op;
	key.api = api;
	hist = bpf_map_lookup_elem(active, &key);
	if (!hist) {
		zero_hist = bpf_map_lookup_elem(&lat_zero, &zero);
		if (!zero_hist)
			return 0;
		bpf_map_update_elem(active, &key, zero_hist, BPF_NOEXIST);
		hist = bpf_map_lookup_elem(active, &key);
		if (!hist) {
			__sync_fetch_and_add(&drops.lat_full, 1);
			return 0;
		}
	}
	slot = lat_slot_of(lat_ns);
	/* a mask the verifier sees (LAT_SLOTS is a power of two): clang knows
	 * slot < LAT_SLOTS and drops a comparison, and the 6.1 verifier then
	 * finds the index unbounded; the barrier keeps the mask */
	barrier_var(slot);
	slot &= LAT_SLOTS - 1;
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->sum_ns, lat_ns);
	lat_max(hist, lat_ns, cas);
	return 0;
}

__noinline int record_latency(__u32 dev, __u64 ino, __u8 op, __u8 api, __u64 lat_ns)
{
	return record_latency_in(dev, ino, op, api, lat_ns, true);
}

__noinline int record_latency_nocas(__u32 dev, __u64 ino, __u8 op, __u8 api, __u64 lat_ns)
{
	return record_latency_in(dev, ino, op, api, lat_ns, false);
}

/* cas is a constant at every call site: only one of the two is compiled in.
 * record keeps each request's latency in its event: the histograms are for
 * top and the exporter, and record adds nothing to them. */
#define RECORD_LATENCY(cas, ...)                                                                   \
	(targ_record ? 0 : (cas) ? record_latency(__VA_ARGS__) : record_latency_nocas(__VA_ARGS__))

/* What sys_enter needs of a syscall: its number and first four arguments
 * (the arguments a syscall does not have are left 0); mio_: kernels from 7.x
 * have a struct syscall_args of their own. */
struct mio_syscall_args {
	long nr;
	__u64 arg[4];
};

/* The first four arguments a syscall entered with, from its saved registers
 * (a BTF pointer: direct loads where the arch allows, x86) */
static __always_inline void syscall_args_of(struct pt_regs *regs, struct mio_syscall_args *a)
{
	a->arg[0] = PT_REGS_PARM1_SYSCALL(regs);
	a->arg[1] = PT_REGS_PARM2_SYSCALL(regs);
	a->arg[2] = PT_REGS_PARM3_SYSCALL(regs);
	a->arg[3] = PT_REGS_PARM4_SYSCALL(regs);
}

/* Where a syscall acts, as far as its arguments say: its offset argument,
 * or -1 with *at_pos set when it acts at the file position (read, write,
 * readv, writev; preadv2/pwritev2 with offset -1), or -1 (syncs). */
static __always_inline __s64 syscall_offset_arg(const struct mio_syscall_args *a, __u8 *at_pos)
{
	*at_pos = 0;
	switch (a->nr) {
	case NR_pwrite64:
	case NR_pread64:
	case NR_pwritev:
	case NR_preadv:
		return a->arg[3];
	case NR_pwritev2:
	case NR_preadv2:
		if ((__s64)a->arg[3] != -1)
			return a->arg[3];
		break;
	case NR_sync_file_range:
		return a->arg[1];
	case NR_fsync:
	case NR_fdatasync:
	case NR_msync:
		return -1;
	}
	*at_pos = 1;
	return -1;
}

/* Where a request at the file position acted, read at its exit: the kernel
 * has moved f_pos past the bytes it moved (for O_APPEND, from the end of file
 * it wrote at), so the start is f_pos - ret. A failed request left f_pos. */
static __always_inline __s64 offset_at_exit(struct file *file, long ret, const bool cast)
{
	__s64 pos = cast ? file_btf(file)->f_pos : BPF_CORE_READ(file, f_pos);

	return ret > 0 ? pos - ret : pos;
}

static __always_inline int syscall_op(long nr)
{
	switch (nr) {
	case NR_write:
	case NR_pwrite64:
	case NR_writev:
	case NR_pwritev:
	case NR_pwritev2:
		return MIO_WRITE;
	case NR_read:
	case NR_pread64:
	case NR_readv:
	case NR_preadv:
	case NR_preadv2:
		return MIO_READ;
	case NR_fsync:
		return MIO_FSYNC;
	case NR_fdatasync:
		return MIO_FDATASYNC;
	case NR_sync_file_range:
		return MIO_SYNC_FILE_RANGE;
	case NR_msync:
		return MIO_MSYNC;
	}
	return -1;
}

static __always_inline bool is_io_syscall(long nr)
{
	return nr == NR_io_submit || nr == NR_io_getevents || nr == NR_io_pgetevents || syscall_op(nr) >= 0;
}

/* The thread's in-flight slot for a call starting now, inactive until
 * end_call (NULL: counted in inflight_full). */
static __always_inline struct inflight *begin_call(__u8 kind, __u8 op, __u32 tid)
{
	struct inflight *call = inflight_slot(tid);

	if (!call) {
		__sync_fetch_and_add(&drops.inflight_full, 1);
		return NULL;
	}
	/* a slot left active by an exit never seen is simply taken over */
	call->active = 0;
	call->kind = kind;
	call->op = op;
	return call;
}

/* The call's slot is filled: stamp its start and mark it active, last, for
 * a program that interrupts this one on its CPU and reads the slot
 * (writeback_cause). */
static __always_inline int end_call(struct inflight *call)
{
	call->ts_ns = bpf_ktime_get_ns();
	barrier();
	call->active = 1;
	return 0;
}

/* A traced syscall starts where its arguments are read at exit
 * (targ_args_at_exit): only its number and start time are kept, for its
 * latency. Not msync, whose file is found at entry (on_msync_enter). */
static __always_inline int stamp_call(long nr, __u32 tid)
{
	struct inflight *call;

	if (nr == NR_msync)
		return 0;
	call = begin_call(CALL_FD, 0, tid);
	if (!call)
		return 0;
	call->sysno = nr;
	return end_call(call);
}

/* A traced syscall starts: remember what it acts on until its exit. */
static __always_inline int on_sys_enter(const struct mio_syscall_args *a, __u32 tid)
{
	struct inflight *call;
	int op;

	if (targ_args_at_exit)
		return stamp_call(a->nr, tid);
	/* io_submit has enter programs of its own (on_io_submit_enter) */
	if (a->nr == NR_io_getevents || a->nr == NR_io_pgetevents) {
		call = begin_call(CALL_IO_GETEVENTS, 0, tid);
		if (!call)
			return 0;
		call->uptr = a->arg[3];
	} else {
		op = syscall_op(a->nr);
		/* msync names an address, not an fd: its own enter programs */
		if (op < 0 || op == MIO_MSYNC)
			return 0;
		call = begin_call(CALL_FD, op, tid);
		if (!call)
			return 0;
		call->fd = a->arg[0];
		call->offset = syscall_offset_arg(a, &call->at_pos);
	}
	return end_call(call);
}

/* Two ways to see syscalls; userspace loads one pair.
 *
 * Per-syscall tracepoints (syscalls:sys_enter_pwrite64, ...; need tracefs):
 * they fire only for the syscalls they are attached to, so the other
 * syscalls of every process on the machine cost nothing. The kernel lets a
 * program read only the arguments its tracepoint has (it checks the context
 * size at attach), hence one enter program per number of arguments read.
 *
 * What such a program is given is not the event's record (tracefs's format
 * file: struct syscall_trace_enter/exit, an int nr, then args[] or ret) but a
 * copy the kernel makes for BPF, struct syscall_tp_t, a local of
 * perf_call_bpf_enter/exit (kernel/trace/trace_syscalls.c) that the kernel's
 * BTF carries, twice (one with args, one with ret). Its head moved:
 *   up to 6.5  __u64 regs;               unsigned long syscall_nr;
 *   6.6        struct trace_entry ent;   unsigned long syscall_nr;
 *   from 6.7   struct trace_entry ent;   int syscall_nr;  (ba8ea72388a1)
 * while the attach checks the program's reads against the record's size
 * (perf_event_set_bpf_prog: max_ctx_offset, else EACCES). PREEMPT_RT's lazy
 * preemption adds preempt_lazy_count to struct trace_entry (12 bytes: Debian
 * 12's 6.1 -rt kernels, RHEL and CentOS Stream 9 from 5.14.0-285), and
 * vmlinux.h's trace_event_raw_sys_enter/exit (the raw sys_enter/exit events'
 * records, whose id is a long), read before, then put args and ret 8 bytes
 * past where the record has them: ret at 24 of a 24-byte exit record, refused.
 * Hence local flavours of the kernel's own struct, relocated by libbpf: the
 * syscall number at its place and of its size, the arguments at theirs. The
 * record's own struct, bcc's and Inspektor Gadget's fix, places args and ret
 * right up to 6.5 and from 6.7, but its int nr at 12 is, on Debian's 6.1-rt,
 * the upper half of the unsigned long syscall_nr at 8: 0. On a 6.6-layout RT
 * kernel (12-byte ent, unsigned long syscall_nr) the context's ret lies past
 * the record: the exit reads it from the entry registers where the program
 * has them (targ_args_at_exit, on every kernel alike), else an attach there
 * is refused and userspace takes the raw hook (tracer/syscall_hook.py). */
struct syscall_tp_t___enter {
	unsigned long syscall_nr;
	unsigned long args[6];
} __attribute__((preserve_access_index));

/* from 6.7 (the two flavours' loads are relocated to the same field; the one
 * whose size differs from the kernel's is poisoned by libbpf, in a branch
 * the verifier removes) */
struct syscall_tp_t___int {
	int syscall_nr;
} __attribute__((preserve_access_index));

struct syscall_tp_t___exit {
	long ret;
} __attribute__((preserve_access_index));

/* the syscall number, at its place and of its size */
static __always_inline long tp_syscall_nr(void *ctx)
{
	if (bpf_core_field_size(struct syscall_tp_t___enter, syscall_nr) == sizeof(int))
		return ((struct syscall_tp_t___int *)ctx)->syscall_nr;
	return (int)((struct syscall_tp_t___enter *)ctx)->syscall_nr;
}

/* argument i, a literal: an index the compiler sees only after inlining would
 * have the relocated offset of args added to ctx, a modified context pointer
 * the verifier refuses to read through; with a literal the whole access is
 * one relocated load */
#define TP_ARG(ctx, i) (((struct syscall_tp_t___enter *)(ctx))->args[i])

/* the exit's return value, from the context (before 5.15: no entry registers) */
static __always_inline long tp_ret(void *ctx)
{
	return ((struct syscall_tp_t___exit *)ctx)->ret;
}

static __always_inline int enter_tracepoint(void *ctx, const int nargs)
{
	struct mio_syscall_args a = {};
	__u32 tid = (__u32)target_id();

	if (!tid)
		return 0;
	a.nr = tp_syscall_nr(ctx);
	if (targ_args_at_exit)
		return stamp_call(a.nr, tid);
	a.arg[0] = TP_ARG(ctx, 0);
	/* nargs is a constant at each call: the reads beyond it are not compiled */
	if (nargs >= 3) {
		a.arg[1] = TP_ARG(ctx, 1);
		a.arg[2] = TP_ARG(ctx, 2);
	}
	if (nargs >= 4)
		a.arg[3] = TP_ARG(ctx, 3);
	return on_sys_enter(&a, tid);
}

SEC("tracepoint")
int handle_enter_args1(void *ctx)
{
	return enter_tracepoint(ctx, 1);
}

SEC("tracepoint")
int handle_enter_args3(void *ctx)
{
	return enter_tracepoint(ctx, 3);
}

SEC("tracepoint")
int handle_enter_args4(void *ctx)
{
	return enter_tracepoint(ctx, 4);
}

/* BTF raw tracepoints sys_enter/sys_exit (no tracefs needed): the fallback.
 * They run for every syscall of every process, which the pid test ends. */
SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long nr)
{
	struct mio_syscall_args a = {};
	__u32 tid = (__u32)target_id();

	/* io_submit's entry is its own program's (on_io_submit_enter) */
	if (!tid || nr == NR_io_submit || !is_io_syscall(nr))
		return 0;
	a.nr = nr;
	syscall_args_of(regs, &a);
	return on_sys_enter(&a, tid);
}

/* msync(addr, len, flags) names an address: the file is the one mapped
 * there. Two ways to find it, each in programs of its own (userspace loads
 * the pair this kernel takes): bpf_find_vma (5.17; its callback is an
 * instruction kernels before 5.13 refuse even where it is never run), or,
 * where the VMAs are an rb-tree (before 6.1), a bounded walk down it. */
static __always_inline int on_msync_enter(struct file *file)
{
	struct inflight *call;
	struct file_ref ref;

	/* the mapping, not an fd, holds the file: its identity is read now,
	 * while the address still maps it */
	if (!file_ref_of(file, &ref, SCRATCH_MSYNC_ENTER)) {
		__sync_fetch_and_add(&drops.msync_no_file, 1);
		return 0;
	}
	call = begin_call(CALL_MSYNC, MIO_MSYNC, current_tid());
	if (!call)
		return 0;
	call->sysno = NR_msync;
	call->file = ref.file;
	call->ino = ref.ino;
	call->dev = ref.dev;
	call->offset = -1;
	return end_call(call);
}

struct vma_file_ctx {
	struct file *file;
};

static long vma_file_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_file_ctx *ctx = data;

	ctx->file = vma->vm_file;
	return 0;
}

static __always_inline struct file *vma_file_find_vma(__u64 addr)
{
	struct vma_file_ctx ctx = {};

	bpf_find_vma(bpf_get_current_task_btf(), addr, vma_file_cb, &ctx, 0);
	return ctx.file;
}

struct mm_struct___rb { /* before 6.1 */
	struct rb_root mm_rb;
} __attribute__((preserve_access_index));

struct vm_area_struct___rb {
	struct rb_node vm_rb;
	unsigned long vm_start;
	unsigned long vm_end;
	struct file *vm_file;
} __attribute__((preserve_access_index));

/* find_vma() of those kernels: the lowest VMA ending above addr */
static __always_inline struct file *vma_file_rb(__u64 addr)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct mm_struct___rb *mm = (void *)BPF_CORE_READ(task, mm);
	struct vm_area_struct___rb *vma;
	struct rb_node *node;
	int i;

	if (!mm)
		return NULL;
	node = BPF_CORE_READ(mm, mm_rb.rb_node);
	for (i = 0; i < MAX_VMA_DEPTH && node; i++) {
		vma = (void *)node - bpf_core_field_offset(struct vm_area_struct___rb, vm_rb);
		if (BPF_CORE_READ(vma, vm_end) <= addr) {
			node = BPF_CORE_READ(node, rb_right);
			continue;
		}
		if (BPF_CORE_READ(vma, vm_start) <= addr)
			return BPF_CORE_READ(vma, vm_file);
		node = BPF_CORE_READ(node, rb_left);
	}
	return NULL;
}

SEC("tracepoint/syscalls/sys_enter_msync")
int handle_enter_msync(void *ctx)
{
	if (!is_target())
		return 0;
	return on_msync_enter(vma_file_find_vma(TP_ARG(ctx, 0)));
}

SEC("tracepoint/syscalls/sys_enter_msync")
int handle_enter_msync_rb(void *ctx)
{
	if (!is_target())
		return 0;
	return on_msync_enter(vma_file_rb(TP_ARG(ctx, 0)));
}

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter_msync, struct pt_regs *regs, long nr)
{
	if (nr != NR_msync || !is_target())
		return 0;
	return on_msync_enter(vma_file_find_vma(PT_REGS_PARM1_SYSCALL(regs)));
}

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter_msync_rb, struct pt_regs *regs, long nr)
{
	if (nr != NR_msync || !is_target())
		return 0;
	return on_msync_enter(vma_file_rb(PT_REGS_PARM1_SYSCALL(regs)));
}

/* what of an iocb could not be read (struct aio_captured's lost): counted at
 * io_submit's exit, where the kernel read it (the kernel rejects what it cannot read) */
#define IOCB_FAULT 1     /* its iocb or iovecs: read_faults */
#define IOCB_TRUNCATED 2 /* iovecs past MAX_IOVECS: iocbs_truncated */

/* Bytes an IOCB_CMD_PWRITEV/PREADV asks for: the sum of its iovecs. */
static __always_inline __s64 iovec_bytes(__u64 iov_ptr, __u64 count, __u8 *lost)
{
	struct iovec iov;
	__s64 total = 0;
	int i;

	if (count > MAX_IOVECS) {
		*lost |= IOCB_TRUNCATED;
		count = MAX_IOVECS;
	}
	for (i = 0; i < MAX_IOVECS; i++) {
		if (i >= count)
			break;
		if (bpf_probe_read_user(&iov, sizeof(iov), (void *)(iov_ptr + i * sizeof(iov)))) {
			*lost |= IOCB_FAULT;
			break;
		}
		total += iov.iov_len;
	}
	return total;
}

/* the key of a libaio direct read's row, per CPU: in a map, not on account_iocb's stack */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct file_op_key);
} direct_key SEC(".maps");

/* Whether the O_DIRECT read iocbs of the io_submit thread tid is entering (its
 * slot, filled before its iocbs are read) are counted from their bios
 * (pagecache.bpf.h: direct_read_bio, where the bio program runs), not from
 * their size: an io_submit of one iocb (IOCB_ALONE at its exit). */
static __always_inline bool iocb_read_by_bios(__u32 tid)
{
	struct inflight *call;

	if (!targ_direct_bios)
		return false;
	call = inflight_get(tid);
	return call && call->kind == CALL_IO_SUBMIT && call->nr == 1;
}

/* top: a libaio O_DIRECT read of bytes by the current thread (hash rows, as account_iocb's) */
static __always_inline void direct_read_scratch(const struct file_ref *file, __s64 bytes)
{
	__u32 zero = 0;
	struct file_op_key *key = bpf_map_lookup_elem(&direct_key, &zero);

	if (!key)
		return;
	key->ino = file->ino;
	key->dev = file->dev;
	key->tid = current_tid();
	key->op = MIO_DIRECT_READ;
	key->api = MIO_API_LIBAIO;
	key->by = MIO_BY_NONE;
	key->region = file->region;
	key->conn = conn_of(key->tid);
	account_page_cache(key, bytes, -1);
}

/* account_iocb's accepted: the kernel took the iocb (else it rejected it), and
 * it was the call's only one (its O_DIRECT read's bios are then counted by
 * direct_read_bio, which cannot tell several iocbs' bios apart) */
#define IOCB_ACCEPTED 1
#define IOCB_ALONE 2

/* libaio (issue 60): io_submit's iocbs are read at its entry, while the caller
 * still owns them, and accounted at its exit, which says how many the kernel
 * took. By the exit an accepted iocb may be complete (a buffered write, or
 * one to tmpfs, completes inside io_submit), reaped by another thread and its
 * iocb and iovecs reused: MySQL zeroes a slot's iocb once it completes, which
 * read at exit was a read of fd 0 (nothing counted, no drop). One entry per
 * (thread, iocb index), marked with its call's entry stamp; LRU, so an entry
 * whose exit never came is evicted, never in the way. */
#define AIO_CAPTURED 4096

struct aio_captured_key {
	__u32 tid;
	__u32 i;
};

struct aio_captured {
	__u64 gen;         /* the call's entry stamp (inflight.ts_ns) */
	__u64 iocb;        /* the user iocb's address: aio_pending's key */
	struct file *file; /* NULL: nothing to account (no storage file, unknown opcode) */
	__u64 ino;
	__s64 bytes;
	__s64 offset;
	__u32 dev;
	__u8 op;
	__u8 region;
	__u8 lost;    /* IOCB_FAULT, IOCB_TRUNCATED */
	__u8 pending; /* an aio_pending entry was made for it (requests timed) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AIO_CAPTURED);
	__type(key, struct aio_captured_key);
	__type(value, struct aio_captured);
} aio_captured SEC(".maps");

/* Read iocb i of an io_submit entering now (stamp gen) into aio_captured;
 * timed: its aio_pending entry is made now, before the kernel can complete it. */
/* The request an iocb is, for its latency and record's event: made at submission,
 * completed at io_getevents (or an error at once, the first rejected iocb's) */
static __always_inline void iocb_pending(struct pending_io *pending, const struct aio_captured *c, __u64 gen,
					 __u32 tid)
{
	pending->ts_ns = gen;
	pending->dev = c->dev;
	pending->ino = c->ino;
	pending->offset = c->offset;
	pending->tid = tid;
	pending->conn = conn_of(tid);
	pending->op = c->op;
}

__noinline int capture_iocb(__u64 iocbpp, __u32 i, __u64 gen, __u32 tid, __u32 timed)
{
	struct aio_captured_key key = { .tid = tid, .i = i };
	struct aio_captured c = { .gen = gen };
	struct pending_io pending = {};
	struct iocb *user_iocb = NULL;
	struct iocb cb;
	struct file_ref file;
	__s64 bytes = 0;
	__u8 op;

	if (bpf_probe_read_user(&user_iocb, sizeof(user_iocb), (void *)(iocbpp + i * 8)) ||
	    bpf_probe_read_user(&cb, sizeof(cb), user_iocb)) {
		c.lost = IOCB_FAULT;
		goto out;
	}
	c.iocb = (__u64)user_iocb;
	switch (cb.aio_lio_opcode) {
	case IOCB_CMD_PWRITE:
		op = MIO_WRITE;
		bytes = cb.aio_nbytes;
		break;
	case IOCB_CMD_PREAD:
		op = MIO_READ;
		bytes = cb.aio_nbytes;
		break;
	case IOCB_CMD_PWRITEV:
		op = MIO_WRITE;
		bytes = iovec_bytes(cb.aio_buf, cb.aio_nbytes, &c.lost);
		break;
	case IOCB_CMD_PREADV:
		op = MIO_READ;
		bytes = iovec_bytes(cb.aio_buf, cb.aio_nbytes, &c.lost);
		break;
	case IOCB_CMD_FSYNC:
		op = MIO_FSYNC;
		break;
	case IOCB_CMD_FDSYNC:
		op = MIO_FDATASYNC;
		break;
	default:
		goto out;
	}
	if (!file_ref_of(fd_to_file(cb.aio_fildes), &file, SCRATCH_IO_SUBMIT_ENTER))
		goto out;
	c.file = file.file;
	c.ino = file.ino;
	c.dev = file.dev;
	c.op = op;
	c.bytes = bytes;
	c.offset = op <= MIO_READ ? cb.aio_offset : -1;
	c.region = op <= MIO_READ ? region_of(file.dev, file.ino, cb.aio_offset) : MIO_REGION_NONE;
	if (timed) {
		/* completion is read at io_getevents, matched by the iocb pointer,
		 * for its latency and event: none for an io_submit not timed */
		iocb_pending(&pending, &c, gen, tid);
		/* an O_DIRECT read: record's event of its direct read at completion, unless
		 * its bios make it */
		pending.direct = op == MIO_READ && bytes > 0 && file_is_direct(file.file, false) &&
				 !iocb_read_by_bios(tid);
		if (bpf_map_update_elem(&aio_pending, &c.iocb, &pending, BPF_ANY))
			count_pending_full();
		else
			c.pending = 1;
	}
out:
	bpf_map_update_elem(&aio_captured, &key, &c, BPF_ANY);
	return 0;
}

/* io_submit(ctx, nr, iocbpp) enters: its slot stamped, its iocbs captured */
static __always_inline int on_io_submit_enter(long nr, __u64 iocbpp, __u32 tid)
{
	struct inflight *call;
	__u32 timed = requests_timed();
	__u64 gen;
	__u32 i;

	call = begin_call(CALL_IO_SUBMIT, 0, tid);
	if (!call)
		return 0;
	gen = bpf_ktime_get_ns();
	call->sysno = NR_io_submit;
	call->nr = nr > 0 ? nr : 0;
	call->uptr = iocbpp;
	for (i = 0; i < MAX_IOCBS; i++) {
		if (i >= call->nr)
			break;
		capture_iocb(iocbpp, i, gen, tid, timed);
	}
	call->ts_ns = gen;
	barrier();
	call->active = 1;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_io_submit")
int handle_enter_io_submit(void *ctx)
{
	__u32 tid = (__u32)target_id();

	if (!tid)
		return 0;
	return on_io_submit_enter(TP_ARG(ctx, 1), TP_ARG(ctx, 2), tid);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter_io_submit, struct pt_regs *regs, long nr)
{
	struct mio_syscall_args a = {};
	__u32 tid;

	if (nr != NR_io_submit)
		return 0;
	tid = (__u32)target_id();
	if (!tid)
		return 0;
	syscall_args_of(regs, &a);
	return on_io_submit_enter(a.arg[1], a.arg[2], tid);
}

/* account_iocb's accepted, besides IOCB_ACCEPTED and IOCB_ALONE: an iocb after
 * the one io_submit rejected, which the kernel never looked at */
#define IOCB_UNSEEN 4

/* Account iocb i of an io_submit call (entry stamp gen) from what its entry
 * read: accepted, its submitted size; rejected (accepted 0: the first one
 * io_submit refused), an error; unseen, nothing. cas: its rejection's event
 * may take an event slot. */
static __always_inline int account_iocb_in(__u32 tid, __u32 i, __u64 gen, __u32 accepted, __s64 submit_ret,
					   const bool cas)
{
	struct aio_captured_key key = { .tid = tid, .i = i };
	struct pending_io pending = {};
	struct aio_captured *found;
	struct aio_captured c;
	struct file_ref file;

	found = bpf_map_lookup_elem(&aio_captured, &key);
	if (!found || found->gen != gen) {
		/* made at entry, evicted before the exit (more iocbs in flight than AIO_CAPTURED) */
		__sync_fetch_and_add(&drops.inflight_full, 1);
		return 0;
	}
	c = *found;
	bpf_map_delete_elem(&aio_captured, &key);
	if ((c.lost & IOCB_FAULT) && !(accepted & IOCB_UNSEEN))
		__sync_fetch_and_add(&drops.read_faults, 1);
	if ((c.lost & IOCB_TRUNCATED) && !(accepted & IOCB_UNSEEN))
		__sync_fetch_and_add(&drops.iocbs_truncated, 1);
	if (c.pending && !(accepted & IOCB_ACCEPTED))
		/* never submitted: no completion will come */
		bpf_map_delete_elem(&aio_pending, &c.iocb);
	if (!c.file || (accepted & IOCB_UNSEEN))
		return 0;
	file.file = c.file;
	file.ino = c.ino;
	file.dev = c.dev;
	file.region = c.region;
	account_iocb_row(&file, c.op, (accepted & IOCB_ACCEPTED) ? c.bytes : -1);
	if (accepted & IOCB_ACCEPTED) {
		/* an O_DIRECT read: top counts it read from the device as submitted (an
		 * iocb alone: from its bios, where the bio program runs), record at its
		 * completion */
		if (!targ_record && c.op == MIO_READ && c.bytes > 0 &&
		    !(targ_direct_bios && (accepted & IOCB_ALONE)) && file_is_direct(c.file, false))
			direct_read_scratch(&file, c.bytes);
		return 0;
	}
	/* io_submit's own error is the first rejected iocb's */
	if (targ_record) {
		iocb_pending(&pending, &c, gen, tid);
		EMIT(cas, &pending, MIO_API_LIBAIO, submit_ret < 0 ? submit_ret : -11 /* EAGAIN */,
		     bpf_ktime_get_ns());
	}
	return 0;
}

/* the two copies, as account / account_cas: global functions, each verified once */
__noinline int account_iocb(__u32 tid, __u32 i, __u64 gen, __u32 accepted, __s64 submit_ret)
{
	return account_iocb_in(tid, i, gen, accepted, submit_ret, false);
}

__noinline int account_iocb_cas(__u32 tid, __u32 i, __u64 gen, __u32 accepted, __s64 submit_ret)
{
	return account_iocb_in(tid, i, gen, accepted, submit_ret, true);
}

#define ACCOUNT_IOCB(cas, ...) ((cas) ? account_iocb_cas(__VA_ARGS__) : account_iocb(__VA_ARGS__))

/* io_submit returns ret: its iocbs as its entry read them (call: its slot,
 * stamped by on_io_submit_enter) */
static __always_inline void account_io_submit(struct inflight *call, long ret, const bool cas)
{
	__u32 accepted = ret > 0 ? ret : 0;
	__u32 alone = call->nr == 1 ? IOCB_ALONE : 0;
	__u32 i;

	for (i = 0; i < MAX_IOCBS; i++) {
		if (i >= call->nr)
			break;
		/* io_submit stops at the first iocb it rejects */
		ACCOUNT_IOCB(cas, call->tid, i, call->ts_ns,
			     i < accepted ? IOCB_ACCEPTED | alone : i == accepted ? 0 : IOCB_UNSEEN, ret);
	}
	if (call->nr > MAX_IOCBS && accepted > MAX_IOCBS)
		__sync_fetch_and_add(&drops.iocbs_truncated, accepted - MAX_IOCBS);
}

/* completions returned by io_getevents, matched to their submission */
static __always_inline void complete_aio(struct inflight *call, long ret, const bool cas)
{
	struct io_event ev;
	struct pending_io *pending;
	__u64 now;
	__u32 i;

	for (i = 0; i < MAX_AIO_EVENTS; i++) {
		if (i >= ret)
			return;
		if (bpf_probe_read_user(&ev, sizeof(ev), (void *)(call->uptr + i * sizeof(ev)))) {
			__sync_fetch_and_add(&drops.read_faults, 1);
			return;
		}
		pending = bpf_map_lookup_elem(&aio_pending, &ev.obj);
		if (!pending) {
			count_unmatched();
			continue;
		}
		now = bpf_ktime_get_ns();
		if ((__s64)ev.res >= 0)
			RECORD_LATENCY(cas, pending->dev, pending->ino, pending->op, MIO_API_LIBAIO,
				       now - pending->ts_ns);
		if (targ_record) {
			EMIT(cas, pending, MIO_API_LIBAIO, ev.res, now);
			if (pending->direct && (__s64)ev.res > 0) {
				/* its direct read's event, untimed (the entry goes next) */
				pending->op = MIO_DIRECT_READ;
				pending->ts_ns = 0;
				EMIT(cas, pending, MIO_API_LIBAIO, ev.res, now);
			}
		}
		bpf_map_delete_elem(&aio_pending, &ev.obj);
	}
	/* the rest stay pending until aged out: in record mode their events are
	 * lost, in top mode only their latency (their bytes counted at submission) */
	if (ret > MAX_AIO_EVENTS) {
		if (targ_record)
			__sync_fetch_and_add(&drops.iocbs_truncated, ret - MAX_AIO_EVENTS);
		else
			__sync_fetch_and_add(&drops.lat_unmatched, ret - MAX_AIO_EVENTS);
	}
}

/* f is still the file `last` holds (see struct inflight): the same struct
 * file, inode pointer, inode number and super block. cast: read through
 * bpf_rdonly_cast (plain loads), else probe reads. */
static __always_inline bool is_last_file(const struct last_file *last, struct file *f, const bool cast)
{
	struct file *typed;
	struct inode *inode;

	if (f != last->file)
		return false;
	if (cast) {
		typed = file_btf(f);
		inode = typed->f_inode;
		return inode == last->seen.inode && inode->i_ino == last->seen.ino && inode->i_sb == last->seen.sb;
	}
	inode = BPF_CORE_READ(f, f_inode);
	return inode == last->seen.inode && BPF_CORE_READ(inode, i_ino) == last->seen.ino &&
	       BPF_CORE_READ(inode, i_sb) == last->seen.sb;
}

/* The identity of the file a thread's fd syscall named, through the
 * thread's cache of its last files (see struct inflight); *same says whether
 * it was one of them. */
static __always_inline bool fd_file_ref(struct inflight *call, struct file *f, struct file_ref *file,
					const bool cast, bool *same)
{
	struct last_file *last;
	__u32 newest = call->last_newest & 1;

	*same = false;
	if (!f)
		return false;
	last = &call->last[newest];
	if (!is_last_file(last, f, cast)) {
		/* the other one: named again, it becomes the newest; else it is
		 * replaced. No copy between the two: a copy's stack took the
		 * exit's call chain past the verifier's 512 bytes on 6.1
		 * ("combined stack size of 4 calls is 544") */
		newest ^= 1;
		last = &call->last[newest];
		call->last_newest = newest;
		if (!is_last_file(last, f, cast))
			goto miss;
	}
	*same = true;
	if (!last->storage)
		return false;
	file->file = f;
	file->ino = last->seen.ino;
	file->dev = last->dev;
	return true;
miss:
	/* the identity read in full, its inode kept from that same read (all
	 * zero if the read failed: the next call then misses too) */
	last->file = NULL; /* invalid while it is replaced */
	last->seen.inode = NULL;
	last->seen.sb = NULL;
	last->seen.ino = 0;
	last->storage = cast ? file_ref_cast(f, file, &last->seen) : file_ref_seen(f, file, SCRATCH_EXIT, &last->seen);
	last->dev = last->storage ? file->dev : 0;
	last->file = f;
	return last->storage;
}

/* Where a request of op on file acted (its offset argument, or, at_pos,
 * the file position read now) and so its region (into file->region). */
static __always_inline __s64 request_region(struct file_ref *file, __u8 op, __u8 at_pos, __s64 offset, long ret,
					    const bool cast)
{
	int region;

	/* top needs the offset only for a region file's reads and writes */
	region = op <= MIO_READ ? region_file(file->dev, file->ino) : -1;
	if (at_pos && (targ_record || region >= 0))
		offset = offset_at_exit(file->file, ret, cast);
	/* most files are no region file: no call (a call and its return cost
	 * ~10 ns each where returns are thunked, e.g. AMD's SRSO safe RET) */
	file->region = region >= 0 ? region_at(region, file->dev, file->ino, offset) : MIO_REGION_NONE;
	return offset;
}

/* A read/write/sync syscall of fd returns (CALL_FD): the file its fd names,
 * if it is storage, and where the request acted (into call->offset); *same:
 * the thread's last file. */
static __always_inline bool fd_call_file(struct inflight *call, long ret, struct file_ref *file,
					 const bool cast, bool *same)
{
	if (!fd_file_ref(call, fd_file(call->fd, cast), file, cast, same))
		return false;
	call->offset = request_region(file, call->op, call->at_pos, call->offset, ret, cast);
	return true;
}

/* record: a syscall's event, from its in-flight slot (its ts_ns 0: not
 * timed), written straight into its event slot or ring record: without the copy through a
 * pending_io and the call to emit, record x 0.95 and x 0.98 per request
 * (two runs of 4 rounds, tools/ab_objects.py, issue 19). A function of its own:
 * the exit's call chains are near the 512 bytes of stack the verifiers of
 * 5.10-6.12 allow. */
static __always_inline int emit_syscall_in(const struct inflight *call, __u32 dev, __u64 ino, __s64 result,
					   __u64 now, const bool cas)
{
	struct mio_event *e;
	__u64 seq = 0;

	if (!call)
		return 0;
	e = event_reserve(&seq, cas);
	if (!e)
		return 0;
	e->ts_ns = now;
	e->latency_ns = call->ts_ns ? now - call->ts_ns : MIO_LATENCY_UNKNOWN;
	e->ino = ino;
	e->offset = call->offset;
	e->result = result;
	e->dev = dev;
	e->tid = call->tid; /* the current thread's cell */
	e->op = call->op;
	e->api = MIO_API_SYSCALL;
	e->by = 0;
	e->pad = 0;
	e->conn = conn_of(call->tid);
	event_submit(e, seq, cas);
	return 0;
}

/* the two copies, as account / account_cas */
static __noinline int emit_syscall(const struct inflight *call, __u32 dev, __u64 ino, __s64 result, __u64 now)
{
	return emit_syscall_in(call, dev, ino, result, now, false);
}

static __noinline int emit_syscall_cas(const struct inflight *call, __u32 dev, __u64 ino, __s64 result, __u64 now)
{
	return emit_syscall_in(call, dev, ino, result, now, true);
}

#define EMIT_SYSCALL(cas, ...) ((cas) ? emit_syscall_cas(__VA_ARGS__) : emit_syscall(__VA_ARGS__))

/* A read/write/sync or msync call returns, its file found (CALL_FD, CALL_MSYNC):
 * its counts, and its latency and event when its entry was stamped (ts_ns). */
static __always_inline int account_call(struct inflight *call, long ret, const bool cas, __u64 ts_ns,
					const bool cast)
{
	struct file_ref file;
	bool same = false;
	__u64 now;

	if (call->kind == CALL_MSYNC) {
		file.file = call->file;
		file.ino = call->ino;
		file.dev = call->dev;
		file.region = MIO_REGION_NONE;
	} else if (!fd_call_file(call, ret, &file, cast, &same)) {
		return 0;
	}
	/* record drains the per-interval counts unread: of a row it needs only
	 * what making one does once per file and thread (the file's name, the
	 * server's claim on its pages, the thread's name), done when the file
	 * became the thread's last one. Measured in issue 19 (tools/ab_objects.py).
	 * An O_DIRECT read's direct-read event is made there too (account_in), unless its
	 * bios make it (direct_read_bio). */
	if (!(targ_record && same &&
	      !(call->op == MIO_READ && ret > 0 && !targ_direct_bios && file_is_direct(file.file, cast))))
		ACCOUNT(cas, &file, call->op, MIO_API_SYSCALL, ret, call->tid);
	/* not timed: record still emits it, its latency unknown */
	if (!ts_ns && !targ_record)
		return 0;
	now = bpf_ktime_get_ns();
	if (ts_ns && ret >= 0)
		RECORD_LATENCY(cas, file.dev, file.ino, call->op, MIO_API_SYSCALL, now - ts_ns);
	if (targ_record)
		EMIT_SYSCALL(cas, call, file.dev, file.ino, ret, now);
	return 0;
}

/* A traced syscall returns, its arguments kept by its entry. */
static __always_inline int on_sys_exit_entered(long ret, const bool cas, __u32 tid)
{
	struct inflight *call;

	call = inflight_get(tid);
	if (!call || !call->active)
		return 0;
	call->active = 0;
	if (call->kind == CALL_IO_SUBMIT) {
		account_io_submit(call, ret, cas);
		return 0;
	}
	if (call->kind == CALL_IO_GETEVENTS) {
		complete_aio(call, ret, cas);
		return 0;
	}
	return account_call(call, ret, cas, call->ts_ns, false);
}

/* A read/write/sync syscall returns while requests are not timed (top
 * without --latency; targ_args_at_exit): counted from its registers alone.
 * No in-flight slot is read: measured on 6.18 with MariaDB 10.11
 * (tools/ab_objects.py, issue 19), claiming the thread's cell costs more than
 * the last-file cache it holds saves: going through it made untimed top
 * x 1.17 per request (4 rounds; x 1.06 when the slot was task storage). */
static __always_inline int account_untimed(struct mio_syscall_args *a, long ret, struct pt_regs *regs,
					   struct task_struct *task, __u32 tid, const bool cas, const bool cast)
{
	struct file_ref file;
	struct file *f;
	__s64 offset;
	__u8 at_pos;
	int op;

	op = syscall_op(a->nr);
	if (op < 0)
		return 0;
	syscall_args_of(regs, a);
	f = fd_file_of(task, a->arg[0], cast);
	if (cast ? !file_ref_cast(f, &file, NULL) : !file_ref_of(f, &file, SCRATCH_EXIT))
		return 0;
	offset = syscall_offset_arg(a, &at_pos);
	request_region(&file, op, at_pos, offset, ret, cast);
	/* top's every request passes here: its accounting inlined (no call) */
	if (cas)
		account_in(&file, op, MIO_API_SYSCALL, ret, tid, true, true);
	else
		account(&file, op, MIO_API_SYSCALL, ret, tid);
	return 0;
}

/* A traced syscall returns, its arguments read from the registers its entry
 * saved (targ_args_at_exit). Its entry was stamped only while requests are
 * timed (record; top --latency): without the stamp it is counted, not timed. */
static __always_inline int on_sys_exit_regs(long ret, const bool cas, struct pt_regs *regs, struct task_struct *task,
					    __u32 tid, const bool cast)
{
	struct mio_syscall_args a = {};
	struct inflight *call;
	bool timing = requests_timed();
	bool timed;
	int op;

	a.nr = SYSCALL_NR(regs);
	/* io_getevents has nothing to complete untimed (untimed io_submit keeps
	 * no pending iocb); io_submit and msync (whose enter programs read their
	 * iocbs, found their file) use the slot */
	if (!timing && a.nr != NR_msync && a.nr != NR_io_submit)
		return a.nr == NR_io_getevents || a.nr == NR_io_pgetevents
			       ? 0
			       : account_untimed(&a, ret, regs, task, tid, cas, cast);
	/* the slot also holds the thread's last file: created at its first exit */
	call = inflight_slot(tid);
	if (!call) {
		__sync_fetch_and_add(&drops.inflight_full, 1);
		return 0;
	}
	/* a stamp left by an exit never seen is another syscall's: not this one's */
	timed = call->active && call->sysno == a.nr;
	call->active = 0;
	if (a.nr == NR_io_submit) {
		/* its iocbs were read at its entry (on_io_submit_enter, always
		 * attached): none to account for a call already in flight at attach */
		if (timed && call->kind == CALL_IO_SUBMIT)
			account_io_submit(call, ret, cas);
		return 0;
	}
	if (a.nr == NR_msync)
		/* its file was found at entry: without that, nothing to account.
		 * Its entry is always seen, but untimed (top without --latency)
		 * nothing is timed: no histogram that userspace would not read */
		return timed && call->kind == CALL_MSYNC
			       ? account_call(call, ret, cas, timing ? call->ts_ns : 0, cast)
			       : 0;
	if (!timed)
		call->ts_ns = 0;
	syscall_args_of(regs, &a);
	if (a.nr == NR_io_getevents || a.nr == NR_io_pgetevents) {
		/* only a timed call's completions can have a pending submission
		 * (untimed io_submit keeps none) */
		if (timed) {
			call->kind = CALL_IO_GETEVENTS;
			call->uptr = a.arg[3];
			complete_aio(call, ret, cas);
		}
		return 0;
	}
	op = syscall_op(a.nr);
	if (op < 0)
		return 0;
	call->kind = CALL_FD;
	call->op = op;
	call->fd = a.arg[0];
	call->offset = syscall_offset_arg(&a, &call->at_pos);
	return account_call(call, ret, cas, call->ts_ns, cast);
}

/* The registers the current task entered the kernel with (bpf_task_pt_regs,
 * 5.15: only where targ_args_at_exit says the kernel has it) */
static __always_inline struct pt_regs *task_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

/* A traced syscall returns. From 5.15 (targ_args_at_exit) its arguments
 * are read from regs, the registers it entered with; task is the current
 * task as a BTF pointer, tid its thread. cas: the program may use
 * compare-and-swap (5.12); cast: bpf_rdonly_cast (6.2). */
static __always_inline int on_sys_exit(long ret, const bool cas, struct pt_regs *regs, struct task_struct *task,
				       __u32 tid, const bool cast)
{
	if (targ_args_at_exit)
		return regs ? on_sys_exit_regs(ret, cas, regs, task, tid, cast) : 0;
	return on_sys_exit_entered(ret, cas, tid);
}

/* Where a task's entry registers lie past its stack page (task_pt_regs: a
 * constant of the kernel's build, THREAD_SIZE less a padding and the struct),
 * learnt from the first bpf_task_pt_regs call; 0 until then. */
__u64 regs_offset = 0;

/* The registers the current task entered the kernel with. A cast program
 * (6.2) finds them at regs_offset past its stack page, read as a BTF pointer:
 * bpf_task_pt_regs cost 60 ns a call (6.18, issue 19: tools/ab_objects.py),
 * a third of untimed top's in-kernel time beyond the floor, where its
 * address costs one load. */
static __always_inline struct pt_regs *entry_regs(struct task_struct *task, const bool cast)
{
	struct pt_regs *regs;
	__u64 off;

	if (cast) {
		off = regs_offset;
		if (off)
			return bpf_rdonly_cast((void *)((__u64)task->stack + off),
					       bpf_core_type_id_kernel(struct pt_regs));
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (cast && regs) {
		/* the pointer read back as a number: the verifier of 6.12 refuses
		 * arithmetic between a pointer and an unbounded register ("math
		 * between ptr_ pointer and register with unbounded min value") */
		__u64 addr = 0;

		bpf_probe_read_kernel(&addr, sizeof(addr), &regs);
		regs_offset = addr - (__u64)task->stack;
	}
	return regs;
}

/* a per-syscall exit tracepoint: attached only to the exits of the I/O syscalls.
 * With the entry registers (targ_args_at_exit) the context is not read at all:
 * the return value is the one the tracepoint gives, syscall_get_return_value()
 * of those registers (x86-64 ax, arm64 x0), so the attach passes whatever the
 * context's layout (see enter_tracepoint). */
static __always_inline int exit_tracepoint(void *ctx, const bool cas, const bool cast)
{
	struct task_struct *task;
	struct pt_regs *regs;
	__u64 id = target_id();

	if (!id)
		return 0;
	if (!targ_args_at_exit)
		return on_sys_exit_entered(tp_ret(ctx), cas, (__u32)id);
	/* the task read once, for its registers and later its fd table */
	task = bpf_get_current_task_btf();
	regs = entry_regs(task, cast);
	if (!regs)
		return 0;
	return on_sys_exit(PT_REGS_RC(regs), cas, regs, task, (__u32)id, cast);
}

SEC("tracepoint")
int handle_exit(void *ctx)
{
	return exit_tracepoint(ctx, true, false);
}

SEC("tracepoint")
int handle_exit_nocas(void *ctx)
{
	return exit_tracepoint(ctx, false, false);
}

SEC("tracepoint")
int handle_exit_cast(void *ctx)
{
	return exit_tracepoint(ctx, true, true);
}

/* the raw sys_exit: every syscall of every process */
static __always_inline int exit_raw(struct pt_regs *regs, long ret, const bool cas, const bool cast)
{
	__u64 id = target_id();

	/* a recvfrom: the thread's connection (connection.bpf.h) */
	if (id && conn_read_raw(regs, (__u32)id, cast))
		return 0;
	/* cheap syscall-number test first: most syscalls are not ours */
	if (!id || !is_io_syscall(SYSCALL_NR(regs)))
		return 0;
	if (!targ_args_at_exit)
		return on_sys_exit_entered(ret, cas, (__u32)id);
	return on_sys_exit(ret, cas, regs, bpf_get_current_task_btf(), (__u32)id, cast);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	return exit_raw(regs, ret, true, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit_nocas, struct pt_regs *regs, long ret)
{
	return exit_raw(regs, ret, false, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit_cast, struct pt_regs *regs, long ret)
{
	return exit_raw(regs, ret, true, true);
}

static __always_inline bool uring_req_is_target(struct io_kiocb *req)
{
	struct task_struct *task;

	if (is_target())
		return true;
	/* completions can run in another task (e.g. an io-wq worker of a
	 * different process is impossible, but kernel threads are not) */
	if (!bpf_core_field_exists(req->tctx))
		return false;
	task = BPF_CORE_READ(req, tctx, task);
	/* control's tgid, as every pid filter: retargeted when --follow finds the
	 * server restarted (bpf_probe.BpfProbe.retarget) */
	return task && is_target_tgid(BPF_CORE_READ(task, tgid));
}

/* The mysqlio op of an io_uring request, or -1 for opcodes not accounted. */
static __always_inline int uring_op(struct io_kiocb *req)
{
	switch (BPF_CORE_READ(req, opcode)) {
	case IORING_OP_WRITE:
	case IORING_OP_WRITEV:
	case IORING_OP_WRITE_FIXED:
		return MIO_WRITE;
	case IORING_OP_READ:
	case IORING_OP_READV:
	case IORING_OP_READ_FIXED:
		return MIO_READ;
	case IORING_OP_FSYNC:
		/* the request's command area holds struct io_sync */
		return BPF_CORE_READ((struct io_sync *)req, flags) & IORING_FSYNC_DATASYNC ? MIO_FDATASYNC
											  : MIO_FSYNC;
	case IORING_OP_SYNC_FILE_RANGE:
		return MIO_SYNC_FILE_RANGE;
	}
	return -1;
}

/* The request argument of an io_uring tracepoint. Its position moved across
 * kernels (io_uring_submit_sqe(ctx, req, ...) in 5.15, (req, ...) from 5.19,
 * renamed io_uring_submit_req in 6.4; io_uring_complete(ctx, req, ...) since
 * 5.15, no request at all in 5.10): userspace reads the tracepoint's BTF and
 * sets the index; a constant, so only that load is verified. */
static __always_inline struct io_kiocb *uring_req_arg(__u64 *ctx, __u32 index)
{
	__u64 req;

	/* one load at a constant offset per branch (clang would otherwise load
	 * from ctx + index * 8, a modified context pointer the verifier refuses) */
	if (index == 0)
		asm volatile("%0 = *(u64 *)(%1 + 0)" : "=r"(req) : "r"(ctx));
	else
		asm volatile("%0 = *(u64 *)(%1 + 8)" : "=r"(req) : "r"(ctx));
	return (struct io_kiocb *)req;
}

/* Before 5.19 a request held its user_data itself, not in a struct io_cqe. */
struct io_kiocb___user_data {
	__u64 user_data;
};

/* The key of a request submitted on a kernel whose completion tracepoint
 * names only the ring and user_data. user_data is the application's (InnoDB
 * puts a pointer there): two requests in flight on one ring with the same
 * user_data would share a key; the second's completion is then not counted. */
static __always_inline __u64 uring_user_key(__u64 ring, __u64 user_data)
{
	return ring ^ user_data;
}

static __always_inline __u64 uring_user_data(struct io_kiocb *req)
{
	if (bpf_core_field_exists(req->cqe))
		return BPF_CORE_READ(req, cqe.user_data);
	return BPF_CORE_READ((struct io_kiocb___user_data *)req, user_data);
}

/* The file an io_uring request acts on, if it is storage (a request with no
 * file attached is counted in uring_no_file). */
static __always_inline bool uring_file_ref(struct io_kiocb *req, struct file_ref *file, const __u32 slot)
{
	struct file *f = BPF_CORE_READ(req, file);

	if (!f) {
		__sync_fetch_and_add(&drops.uring_no_file, 1);
		return false;
	}
	return file_ref_of(f, file, slot);
}

/* remember when each request was submitted (latency), and where it acts
 * (prep has run: io_rw's kiocb.ki_pos holds the SQE offset); attached to
 * io_uring_submit_sqe instead where the kernel has that name */
SEC("tp_btf/io_uring_submit_req")
int handle_uring_submit(__u64 *ctx)
{
	struct io_kiocb *req = uring_req_arg(ctx, targ_uring_submit_req_arg);
	struct pending_io pending = {};
	struct file_id id = {};
	struct file_ref file;
	__u64 key = (__u64)req;
	int op;

	if (!req || !is_target())
		return 0;
	op = uring_op(req);
	if (op < 0)
		return 0;
	pending.ts_ns = bpf_ktime_get_ns();
	pending.offset = op <= MIO_READ ? BPF_CORE_READ((struct io_rw *)req, kiocb.ki_pos) : -1;
	pending.tid = current_tid();
	pending.conn = conn_of(pending.tid);
	pending.op = op;
	if (targ_uring_by_user_data) {
		/* the completion will not show the request: its file is taken
		 * now, and its path walked now (the file may be closed before
		 * userspace looks at the process's fds) */
		if (!uring_file_ref(req, &file, SCRATCH_URING_SUBMIT))
			return 0;
		pending.dev = file.dev;
		pending.ino = file.ino;
		pending.direct = op == MIO_READ && file_is_direct(file.file, false);
		id.ino = file.ino;
		id.dev = file.dev;
		remember_name(file.file, &id, SCRATCH_URING_SUBMIT);
		key = uring_user_key((__u64)BPF_CORE_READ(req, ctx), uring_user_data(req));
	}
	if (bpf_map_update_elem(&uring_pending, &key, &pending, BPF_ANY))
		count_pending_full();
	return 0;
}

/* A submitted request completes, its counts taken: its latency and its event
 * (record), then it is forgotten. The clock is read only while requests are
 * timed: top without --latency times nothing, io_uring included, though its
 * submission is seen anyway (for its offset). */
static __always_inline void uring_completed(struct pending_io *pending, __u64 *key, __u8 op, __s32 res,
					   const bool cas)
{
	__u64 now;

	if (requests_timed()) {
		now = bpf_ktime_get_ns();
		if (res >= 0)
			RECORD_LATENCY(cas, pending->dev, pending->ino, op, MIO_API_IO_URING,
				       now - pending->ts_ns);
		if (targ_record)
			EMIT(cas, pending, MIO_API_IO_URING, res, now);
	}
	bpf_map_delete_elem(&uring_pending, key);
}

/* Linux 5.10: an O_DIRECT read's completion, its file known from its submission only */
static __always_inline void direct_read_by_user_data(const struct file_ref *file, __u32 tid, __s64 res, const bool cas)
{
	struct file_op_key key = {};

	key.ino = file->ino;
	key.dev = file->dev;
	key.tid = tid;
	key.op = MIO_DIRECT_READ;
	key.api = MIO_API_IO_URING;
	key.region = file->region;
	key.conn = conn_of(tid);
	if (cas)
		account_page_cache_cas(&key, res, -1);
	else
		account_page_cache(&key, res, -1);
}

/* io_uring_complete(ctx, user_data, res, cflags) (Linux 5.10): the request is
 * the one submitted with that ring and user_data; only the target's are in
 * uring_pending, and a completion may run in any context (an interrupt, on
 * 5.10), so the thread is the submitter's. A completion whose submission was
 * not seen (in flight at attach) cannot be told from another process's: it
 * is not counted. */
static __always_inline int on_uring_complete_by_user_data(__u64 *ctx, const bool cas)
{
	struct pending_io *pending;
	struct file_ref file = {};
	__s32 res = (__s32)ctx[2];
	__u64 ring = 0, key;

	/* the ring's address as a number: a kernel that types the argument
	 * (struct io_ring_ctx *) forbids arithmetic on the pointer itself */
	bpf_probe_read_kernel(&ring, sizeof(ring), &ctx[0]);
	key = uring_user_key(ring, ctx[1]);

	pending = bpf_map_lookup_elem(&uring_pending, &key);
	if (!pending)
		return 0;
	file.ino = pending->ino;
	file.dev = pending->dev;
	file.region = pending->op <= MIO_READ ? region_of(file.dev, file.ino, pending->offset)
					      : MIO_REGION_NONE;
	ACCOUNT(cas, &file, pending->op, MIO_API_IO_URING, res, pending->tid);
	if (pending->direct && res > 0)
		direct_read_by_user_data(&file, pending->tid, res, cas);
	uring_completed(pending, &key, pending->op, res, cas);
	return 0;
}

static __always_inline int on_uring_complete(__u64 *ctx, const bool cas)
{
	struct io_kiocb *req;
	struct pending_io *pending;
	struct file_ref file;
	__u64 key;
	__s32 res;
	int op;

	if (targ_uring_by_user_data)
		return on_uring_complete_by_user_data(ctx, cas);
	req = uring_req_arg(ctx, targ_uring_complete_req_arg);
	key = (__u64)req;
	if (!req || !uring_req_is_target(req))
		return 0;
	op = uring_op(req);
	if (op < 0)
		return 0;
	res = BPF_CORE_READ(req, cqe.res);
	if (!uring_file_ref(req, &file, SCRATCH_URING_COMPLETE))
		return 0;
	pending = bpf_map_lookup_elem(&uring_pending, &key);
	/* the offset is the submission's (ki_pos has moved on by now) */
	file.region = pending && op <= MIO_READ ? region_of(file.dev, file.ino, pending->offset)
						: MIO_REGION_NONE;
	ACCOUNT(cas, &file, op, MIO_API_IO_URING, res, current_tid());
	if (!pending) {
		/* submitted before attach, or no submission tracepoint on this
		 * kernel: everything but the latency and offset is known here */
		if (targ_record)
			emit_untimed(file.dev, file.ino, op, res, cas);
		__sync_fetch_and_add(&drops.lat_unmatched, 1);
		return 0;
	}
	pending->dev = file.dev;
	pending->ino = file.ino;
	uring_completed(pending, &key, op, res, cas);
	return 0;
}

SEC("tp_btf/io_uring_complete")
int handle_uring_complete(__u64 *ctx)
{
	return on_uring_complete(ctx, true);
}

SEC("tp_btf/io_uring_complete")
int handle_uring_complete_nocas(__u64 *ctx)
{
	return on_uring_complete(ctx, false);
}

#include "connection.bpf.h"
#include "pagecache.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
