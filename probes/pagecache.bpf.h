/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Page cache, writeback and block devices: what reaches the disk, and why.
 * Included by mysqlio.bpf.c (it shares its maps, account_row and inflight).
 *
 * Dirtying: writeback:writeback_dirty_folio (writeback_dirty_page before 5.18)
 * fires when a page-cache folio goes clean -> dirty, in the dirtying task:
 * a buffered write, or a store into a shared mapping (the page fault that
 * makes the page writable). Counted for the traced process only.
 *
 * Writeback: block:block_bio_queue sees every bio once, in the task that
 * submits it. The bio's first page names its address_space, whose host is the
 * file (or, for filesystem metadata and the journal, the block device). A
 * file the traced server touched (server_files) gets a MIO_WRITEBACK row,
 * caused by the server's request in progress in that task (fsync, msync...)
 * or by the kernel flusher, whose reason writeback:writeback_start gives.
 *
 * Reads: a read bio of a server file's pages is a MIO_DISK_READ row, or
 * MIO_READAHEAD when the kernel's readahead queued it (REQ_RAHEAD). An O_DIRECT
 * read's bios carry the reader's pages, which name no file: the file is the
 * one the read the thread is in names (direct_read_bio), a MIO_DIRECT_READ row.
 *
 * Devices: the bios' bytes split by owner (server files, server direct I/O,
 * filesystem, other), cumulative: userspace takes deltas. What each device
 * completed (requests after merging) is the kernel's own count, which userspace
 * reads from /sys/dev/block/M:m/stat (tracer/disk_stat.py): no program here.
 */

/* Files the traced server made requests on or dirtied: a bio of any task
 * writing their pages is the server's data reaching the disk. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_SERVER_FILES);
	__type(key, struct file_id);
	__type(value, __u8);
} server_files SEC(".maps");

/* Per CPU, server files a bio's lookup found in server_files, one per value of
 * the inode's low bits: a CPU's bios are mostly of a few files (the binlog, the
 * redo log, and the loop or device-mapper copies of their bios), and a lookup
 * in server_files cost about 120 ns a bio on 6.18 (issue 19). Only hits are
 * kept: a file is never taken out of server_files but by its LRU. */
#define SERVER_FILE_CACHE 4
struct server_file_cache {
	struct file_id ids[SERVER_FILE_CACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct server_file_cache);
} server_file_cache SEC(".maps");

/* record, per CPU: the files its dirtying claimed last in server_files, and
 * when (claim_due). Any entry holds any file, replaced in turn. One entry per
 * value of the inode's low bits, shared with the bios' server_file_cache, made
 * the dirtying program 900-945 ns a run on two servers of three (540 on the
 * third; 11.8 on 6.18, issue 19): files in turn in one entry claim at each. */
#define CLAIM_CACHE 4
struct claim_cache {
	struct file_id ids[CLAIM_CACHE];
	__u64 claimed_ns[CLAIM_CACHE];
	__u32 next; /* the entry replaced next */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct claim_cache);
} claim_cache SEC(".maps");

/* kernel flusher threads inside a writeback pass: tid -> enum mio_by */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_FLUSHERS);
	__type(key, __u32);
	__type(value, __u8);
} flushers SEC(".maps");

/* Per CPU: every bio of every device counts here, and a row shared by the
 * CPUs moved its line between them at each bio (11.8 on 6.18, issue 19:
 * tools/ab_objects.py). A device's slot is found from its number (open
 * addressing, DEV_PROBES tries) in an array, whose lookup the kernel inlines
 * (6.10); a hash row per (device, direction, owner) cost about 115 ns more a
 * bio on 6.18. Userspace sums the CPUs' slots of each device. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DEV_SLOTS);
	__type(key, __u32);
	__type(value, struct dev_slot);
} devslots SEC(".maps");

/* task flags (include/linux/sched.h; unchanged since 2.6) */
#define PF_IO_WORKER 0x00000010
#define PF_MEMALLOC 0x00000800
#define PF_KSWAPD 0x00020000
#define PF_KTHREAD 0x00200000
/* low bits of page->mapping that mean "not a file's address_space" */
#define PAGE_MAPPING_FLAGS 0x3
#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1
/* the running kernel's page size (targ_page_shift, not a fixed 4 KiB: arm64
 * kernels have 16 and 64 KiB pages) */
#define PAGE_BYTES ((__u64)1 << targ_page_shift)

/* Layouts of older kernels (CO-RE flavors: the suffix is ignored) */
struct bio___old { /* before 5.12 */
	struct gendisk *bi_disk;
	__u8 bi_partno;
} __attribute__((preserve_access_index));

struct folio___old { /* 5.16 - 6.5: the order in the first tail page */
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

struct page___ci { /* 7.x: compound_head renamed */
	unsigned long compound_info;
} __attribute__((preserve_access_index));

struct page___ch { /* before 7.x (the types built with may be newer: arm64's are sid's) */
	unsigned long compound_head;
} __attribute__((preserve_access_index));

struct page___old { /* before 6.16 */
	unsigned long index;
} __attribute__((preserve_access_index));

/* The word at byte off of kernel memory p, as a number (cast programs: the
 * kfunc bpf_rdonly_cast, 6.2). p is read as a struct pt_regs, whose fields are
 * all unsigned longs, so the load gives a number where p's own type has a
 * pointer or a union with one there (a page's compound head and mapping bits);
 * the verifier guards it as a probe read, without the helper call (~50 ns a
 * call on 6.18 where returns are thunked, AMD's SRSO; issue 19). off + 8 must
 * lie within struct pt_regs (168 bytes on x86-64). */
static __always_inline unsigned long kernel_word(const void *p, __u32 off)
{
	return *(unsigned long *)((char *)bpf_rdonly_cast(p, bpf_core_type_id_kernel(struct pt_regs)) + off);
}

static __always_inline __s64 page_offset_in_file(struct page *page)
{
	if (bpf_core_field_exists(((struct page___old *)page)->index))
		return (__s64)BPF_CORE_READ((struct page___old *)page, index) * PAGE_BYTES;
	return (__s64)BPF_CORE_READ(page, __folio_index) * PAGE_BYTES;
}

static __always_inline __u32 disk_dev(struct gendisk *disk)
{
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
}

/* The same, for a disk reached through a tracepoint's BTF pointer: plain loads */
static __always_inline __u32 disk_dev_btf(struct gendisk *disk)
{
	return disk ? ((__u32)disk->major << 20) | (__u32)disk->first_minor : 0;
}

static __always_inline __u32 task_flags(void)
{
	struct task_struct *task;

	/* a BTF pointer's field is a plain load, where the kernel gives one
	 * (bpf_get_current_task_btf, 5.11) */
	if (HAS_TASK_BTF)
		return bpf_get_current_task_btf()->flags;
	task = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(task, flags);
}

/* The number of the syscall the current task is in (targ_args_at_exit):
 * one probe read at regs_offset past its stack page once an exit program
 * learnt it, else through bpf_task_pt_regs (60 ns a call on 6.18, issue 19);
 * a plain load in the cast programs */
static __always_inline long current_syscall_nr(const bool cast)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 off = regs_offset, regs;

	if (cast) {
		/* a BTF pointer either way (entry_regs), as the exit programs read it */
		struct pt_regs *entry = entry_regs(task, true);

		return entry ? SYSCALL_NR(entry) : -1;
	}

	/* both ways end in the one probe read: a plain load of the registers'
	 * field on one way only was merged by the compiler with the read of
	 * nr ("same insn cannot be used with different pointers", 6.18) */
	regs = off ? (__u64)task->stack + off : (__u64)task_regs();
	/* the field's own size and sign (CO-RE): arm64's syscallno is an s32,
	 * and the word after it no part of it (pmr in 7.2), x86-64's orig_ax a long */
	return (long)BPF_CORE_READ_BITFIELD_PROBED((struct pt_regs *)regs, SYSCALL_NR_FIELD);
}

static __always_inline bool remember_server_file(__u32 dev, __u64 ino)
{
	struct file_id id = { .ino = ino, .dev = dev };
	__u8 one = 1;

	return !bpf_map_update_elem(&server_files, &id, &one, BPF_ANY);
}

/* record: whether the current CPU's dirtying of (dev, ino) claims it in
 * server_files now. record makes no row for dirtying, and updating the LRU map
 * at each (its node replaced) would cost more than the row; once a second
 * keeps a file claimed as long as the server dirties it, against the LRU. */
#define CLAIM_AGAIN_NS 1000000000ULL
static __always_inline bool claim_due(__u32 dev, __u64 ino, __u64 now)
{
	struct claim_cache *cache;
	__u32 zero = 0;
	int i;

	cache = bpf_map_lookup_elem(&claim_cache, &zero);
	if (!cache)
		return true;
#pragma unroll
	for (i = 0; i < CLAIM_CACHE; i++) {
		if (cache->ids[i].ino == ino && cache->ids[i].dev == dev) {
			if (now - cache->claimed_ns[i] < CLAIM_AGAIN_NS)
				return false;
			cache->claimed_ns[i] = now;
			return true;
		}
	}
	i = cache->next++ & (CLAIM_CACHE - 1);
	cache->ids[i].ino = ino;
	cache->ids[i].dev = dev;
	cache->claimed_ns[i] = now;
	return true;
}

/* record: one page-cache event (op MIO_DIRTY / MIO_WRITEBACK) at `now`.
 * offset: in the file, -1 when unknown. */
static __always_inline void emit_page_cache(const struct file_op_key *key, __u64 bytes, __s64 offset, __u64 now,
					    const bool cas)
{
	struct pending_io req = {};

	req.ino = key->ino;
	req.dev = key->dev;
	req.tid = key->tid;
	req.conn = key->conn;
	req.op = key->op;
	req.by = key->by;
	req.offset = offset;
	/* ts_ns 0: no latency (the event's time is when it is queued) */
	EMIT(cas, &req, key->api, bytes, now);
}

/* Add bytes to a page-cache row (op MIO_DIRTY / MIO_WRITEBACK), in the stats
 * table where the program may use compare-and-swap (cas) as the syscalls' rows.
 * record streams one event instead: it drains the rows unread, and the row was
 * 70-110 ns of its dirtying program's 580-650 a run (11.8 on 6.18, issue 19).
 * Returns 1 when the row was new this interval (record: 0). */
static __always_inline int account_page_cache_in(const struct file_op_key *key, __u64 bytes, __s64 offset,
						 const bool cas)
{
	struct file_op_stats *stats;
	bool created = false;

	if (!key)
		return 0;
	if (targ_record) {
		emit_page_cache(key, bytes, offset, bpf_ktime_get_ns(), cas);
		return 0;
	}
	stats = stats_row(key, &created, cas);
	if (!stats)
		return 0;
	__sync_fetch_and_add(&stats->ops, 1);
	__sync_fetch_and_add(&stats->bytes, bytes);
	return created;
}

/* the two copies, as account / account_cas */
static __noinline int account_page_cache(const struct file_op_key *key, __u64 bytes, __s64 offset)
{
	return account_page_cache_in(key, bytes, offset, false);
}

static __noinline int account_page_cache_cas(const struct file_op_key *key, __u64 bytes, __s64 offset)
{
	return account_page_cache_in(key, bytes, offset, true);
}

#define ACCOUNT_PAGE_CACHE(cas, ...) ((cas) ? account_page_cache_cas(__VA_ARGS__) : account_page_cache(__VA_ARGS__))

/* ---- dirtying ---- */

/* Bytes of a page-cache folio: its order is in the head page's flags since
 * 6.6, in a field of the first tail page before. */
static __always_inline __u64 folio_bytes(struct folio *folio, const bool cast)
{
	unsigned long flags = 0;

	/* the flags word opens struct page and struct folio on every kernel */
	if (cast)
		flags = kernel_word(folio, 0);
	else
		bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return PAGE_BYTES;
	if (bpf_core_field_exists(((struct folio___old *)folio)->_folio_order))
		return (__u64)PAGE_BYTES << BPF_CORE_READ((struct folio___old *)folio, _folio_order);
	if (bpf_core_field_exists(folio->_flags_1))
		return (__u64)PAGE_BYTES << ((cast ? kernel_word(folio, bpf_core_field_offset(struct folio, _flags_1))
						    : BPF_CORE_READ(folio, _flags_1)) &
					     0xff);
	return PAGE_BYTES;
}

/* A folio of mapping went dirty in thread tid of the traced process (its
 * callers test target_id first: they run for every process's dirtying).
 * mapping is the tracepoint's BTF pointer: plain loads, no helper call per level. */
static __always_inline int on_dirty(struct address_space *mapping, __u64 bytes, __s64 offset, __u32 tid,
				    const bool cas)
{
	struct file_op_key key = {};
	struct inode *host;
	__u64 now;

	if (!mapping)
		return 0;
	host = mapping->host;
	if (!host || (host->i_mode & S_IFMT) != S_IFREG)
		return 0;
	key.ino = host->i_ino;
	key.dev = host->i_sb->s_dev;
	key.tid = tid;
	key.conn = conn_of(tid); /* connection.bpf.h */
	key.op = MIO_DIRTY;
	key.api = MIO_API_KERNEL;
	/* its writeback, by anyone, is the server's: claimed once an interval per
	 * (file, thread) by top (a new row), at most once a second per CPU by record */
	if (targ_record) {
		now = bpf_ktime_get_ns();
		if (claim_due(key.dev, key.ino, now))
			remember_server_file(key.dev, key.ino);
		emit_page_cache(&key, bytes, offset, now, cas);
		return 0;
	}
	if (ACCOUNT_PAGE_CACHE(cas, &key, bytes, offset))
		remember_server_file(key.dev, key.ino);
	return 0;
}

/* The dirtying programs: the traced process's threads only (they run for
 * every process's dirtying); cas and cast as the syscalls' programs. */
static __always_inline int on_dirty_folio(struct folio *folio, struct address_space *mapping, const bool cas,
					  const bool cast)
{
	__u64 id = target_id();

	if (!id)
		return 0;
	return on_dirty(mapping, folio_bytes(folio, cast), (__s64)folio->index * PAGE_BYTES, (__u32)id, cas);
}

/* before 5.18: the same event on a page (a page-cache page is order 0 there) */
static __always_inline int on_dirty_page(struct page *page, struct address_space *mapping, const bool cas)
{
	__u64 id = target_id();

	if (!id)
		return 0;
	return on_dirty(mapping, PAGE_BYTES, page_offset_in_file(page), (__u32)id, cas);
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(handle_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	return on_dirty_folio(folio, mapping, true, false);
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(handle_dirty_folio_nocas, struct folio *folio, struct address_space *mapping)
{
	return on_dirty_folio(folio, mapping, false, false);
}

/* the folio's flags read with plain loads (bpf_rdonly_cast, 6.2) */
SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(handle_dirty_folio_cast, struct folio *folio, struct address_space *mapping)
{
	return on_dirty_folio(folio, mapping, true, true);
}

SEC("tp_btf/writeback_dirty_page")
int BPF_PROG(handle_dirty_page, struct page *page, struct address_space *mapping)
{
	return on_dirty_page(page, mapping, true);
}

SEC("tp_btf/writeback_dirty_page")
int BPF_PROG(handle_dirty_page_nocas, struct page *page, struct address_space *mapping)
{
	return on_dirty_page(page, mapping, false);
}

/* ---- why the kernel writes back ---- */

SEC("tp_btf/writeback_start")
int BPF_PROG(handle_writeback_start, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	__u32 tid = current_tid();
	__u32 reason = BPF_CORE_READ(work, reason);
	__u8 by = MIO_BY_OTHER;

	if (reason == bpf_core_enum_value(enum wb_reason, WB_REASON_PERIODIC))
		by = MIO_BY_FLUSHER_PERIODIC;
	else if (reason == bpf_core_enum_value(enum wb_reason, WB_REASON_BACKGROUND))
		by = MIO_BY_FLUSHER_BACKGROUND;
	else if (reason == bpf_core_enum_value(enum wb_reason, WB_REASON_VMSCAN))
		by = MIO_BY_MEMORY;
	else if (reason == bpf_core_enum_value(enum wb_reason, WB_REASON_SYNC))
		by = MIO_BY_SYNC;
	bpf_map_update_elem(&flushers, &tid, &by, BPF_ANY);
	return 0;
}

SEC("tp_btf/writeback_written")
int BPF_PROG(handle_writeback_written, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	__u32 tid = current_tid();

	bpf_map_delete_elem(&flushers, &tid);
	return 0;
}

static __always_inline __u8 by_of_op(__u8 op)
{
	switch (op) {
	case MIO_FSYNC:
		return MIO_BY_FSYNC;
	case MIO_FDATASYNC:
		return MIO_BY_FDATASYNC;
	case MIO_SYNC_FILE_RANGE:
		return MIO_BY_SYNC_FILE_RANGE;
	case MIO_MSYNC:
		return MIO_BY_MSYNC;
	case MIO_WRITE:
		return MIO_BY_WRITE;
	}
	return MIO_BY_SERVER_OTHER;
}

/* Who caused a write of a server file's pages queued by the current task. */
static __always_inline void writeback_cause(struct file_op_key *key, const bool cast)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct inflight *call;
	__u32 tid = (__u32)id;
	long nr;
	int op;
	__u8 *by;

	if (is_target_tgid(id >> 32)) {
		key->tid = tid;
		key->conn = conn_of(tid);
		key->api = MIO_API_SYSCALL;
		key->by = MIO_BY_SERVER_OTHER;
		if (targ_args_at_exit) {
			/* the syscall the thread is in, from its entry registers: an
			 * io_uring worker's are zeroed (never entered from userspace),
			 * and outside a syscall orig_ax holds a fault's error code, but
			 * a page fault queues reads, never a file's writeback */
			if (task_flags() & PF_IO_WORKER) {
				key->api = MIO_API_IO_URING;
			} else {
				nr = current_syscall_nr(cast);
				if (nr == NR_io_submit)
					key->api = MIO_API_LIBAIO;
				else if ((op = syscall_op(nr)) >= 0)
					key->by = by_of_op(op);
			}
			return;
		}
		call = inflight_get(tid);
		if (call && call->active) {
			if (call->kind == CALL_FD || call->kind == CALL_MSYNC)
				key->by = by_of_op(call->op);
			else if (call->kind == CALL_IO_SUBMIT)
				key->api = MIO_API_LIBAIO;
		} else if (task_flags() & PF_IO_WORKER) {
			key->api = MIO_API_IO_URING;
		}
		return;
	}
	key->tid = 0;
	key->api = MIO_API_KERNEL;
	by = bpf_map_lookup_elem(&flushers, &tid);
	if (by)
		key->by = *by;
	else if (task_flags() & (PF_KSWAPD | PF_MEMALLOC))
		key->by = MIO_BY_MEMORY;
	else
		key->by = MIO_BY_OTHER;
}

/* Who queued a read bio of a server file: a thread of the server (its own
 * read, or its io_uring worker's), else the kernel (tid 0: another process's
 * read of the file, or a kernel thread's). */
static __always_inline void read_cause(struct file_op_key *key)
{
	__u64 id = bpf_get_current_pid_tgid();

	key->by = MIO_BY_NONE;
	if (!is_target_tgid(id >> 32)) {
		key->tid = 0;
		key->api = MIO_API_KERNEL;
		return;
	}
	key->tid = (__u32)id;
	key->conn = conn_of((__u32)id);
	key->api = task_flags() & PF_IO_WORKER ? MIO_API_IO_URING : MIO_API_SYSCALL;
}

/* REQ_RAHEAD in a bio's bi_opf: the readahead paths (mpage_readahead,
 * ext4_mpage_readpages, iomap_readahead) set it on each bio they submit, a
 * page's single read (->read_folio / ->readpage) does not. Its bit number
 * moved with the flags before it: taken from the kernel's enum (CO-RE). */
static __always_inline __u64 req_rahead(void)
{
	if (!bpf_core_enum_value_exists(enum req_flag_bits, __REQ_RAHEAD))
		return 0;
	return 1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD);
}

/* ---- block devices ---- */

static __always_inline void add_dev(__u32 dev, __u8 dir, __u8 owner, __u64 bytes, const bool cas)
{
	/* major above bit 20, minor below: folded, then Fibonacci hashing */
	__u32 idx = ((dev ^ (dev >> 20)) * 2654435761u) >> (32 - DEV_SLOT_BITS);
	struct dev_slot *slot;
	int i;

	if (!dev || dir > MIO_DIR_WRITE || owner >= DEV_OWNERS)
		return;
	for (i = 0; i < DEV_PROBES; i++) {
		slot = bpf_map_lookup_elem(&devslots, &idx);
		if (!slot)
			return;
		/* A free slot is claimed. Without compare-and-swap (before 5.12) a
		 * run nested in this one on the CPU could claim it at the same
		 * instant: the one way a device's bios could go to another's slot. */
		if (!slot->dev) {
			if (cas)
				__sync_val_compare_and_swap(&slot->dev, 0, dev);
			else
				slot->dev = dev;
		}
		if (slot->dev == dev) {
			__sync_fetch_and_add(&slot->bytes[dir][owner], bytes);
			__sync_fetch_and_add(&slot->count[dir][owner], 1);
			return;
		}
		idx = (idx + 1) & (DEV_SLOTS - 1);
	}
	__sync_fetch_and_add(&drops.dev_full, 1);
}

static __always_inline bool is_server_file(const struct file_id *id)
{
	struct server_file_cache *cache;
	struct file_id *seen;
	__u32 zero = 0;

	cache = bpf_map_lookup_elem(&server_file_cache, &zero);
	if (!cache)
		return bpf_map_lookup_elem(&server_files, id) != NULL;
	seen = &cache->ids[id->ino & (SERVER_FILE_CACHE - 1)];
	if (seen->ino == id->ino && seen->dev == id->dev)
		return true;
	if (!bpf_map_lookup_elem(&server_files, id))
		return false;
	seen->ino = id->ino;
	seen->dev = id->dev;
	return true;
}

/* The file a bio's first page caches: its mode (0: none, the page is
 * anonymous or a user buffer), identity and the page's offset in it. */
struct page_file {
	__u64 ino;
	__s64 offset;
	__u32 dev;
	__u32 mode;
};

/* A tail page of a large folio: its head (the mapping and index live
 * there) is found by arithmetic, which a BTF pointer does not allow, so it is
 * read with probe reads. head: the page's compound_head / compound_info. */
static __noinline void tail_page_file(__u64 page_addr, unsigned long head, struct page_file *f)
{
	struct address_space *mapping;
	struct inode *host;
	struct page *page;

	head &= ~1UL;
	/* 7.x with HugeTLB vmemmap optimisation stores GENMASK(63, shift), a mask that
	 * turns the tail's address into its head's; else (and before 7.x) the head's
	 * address itself. A mask's complement is 2^shift - 1; no struct page's is. */
	if (!((~head + 1) & ~head))
		page = (struct page *)(page_addr & head);
	else
		page = (struct page *)head;
	mapping = BPF_CORE_READ(page, mapping);
	if (!mapping || ((unsigned long)mapping & PAGE_MAPPING_FLAGS))
		return;
	host = BPF_CORE_READ(mapping, host);
	if (!host)
		return;
	f->mode = BPF_CORE_READ(host, i_mode) & S_IFMT;
	if (f->mode != S_IFREG)
		return;
	f->ino = BPF_CORE_READ(host, i_ino);
	f->dev = BPF_CORE_READ(host, i_sb, s_dev);
	f->offset = page_offset_in_file(page);
}

/* the bytes of struct page read at once: its compound head and mapping lie
 * in them on the kernels seen (a layout where not: HEAD_FIELD reads apart) */
#define PAGE_HEAD_BYTES 40

/* What the bio's first page caches. A page that heads its folio (or is
 * one alone) is read through the tracepoint's BTF pointers: plain loads, but
 * one probe read of the page's head for the compound head and the mapping's
 * flag bits, which must be numbers (a BTF pointer allows no bit operation;
 * both share unions with pointers, so a plain load of them is a pointer). A
 * large folio's tail page goes by probe reads. */
static __always_inline void bio_page_file(struct bio *bio, struct page_file *f, const bool cast)
{
	unsigned long head = 0, mapping_bits;
	char raw[PAGE_HEAD_BYTES];
	__u64 page_addr = 0;
	struct address_space *mapping;
	struct inode *host;
	struct page *page;
	__u32 head_at;

	if (!bio->bi_vcnt)
		return;
	page = bio->bi_io_vec->bv_page;
	if (!page)
		return;
	/* the compound head's word: compound_info since 7.x renamed it */
	if (bpf_core_field_exists(((struct page___ci *)page)->compound_info))
		head_at = bpf_core_field_offset(struct page___ci, compound_info);
	else
		head_at = bpf_core_field_offset(struct page___ch, compound_head);
	if (cast) {
		/* the page's words as numbers with plain loads (no probe read) */
		head = kernel_word(page, head_at);
	} else {
		if (bpf_probe_read_kernel(raw, sizeof(raw), page))
			return;
		if (head_at + sizeof(head) <= sizeof(raw))
			head = *(unsigned long *)(raw + head_at);
		else if (bpf_probe_read_kernel(&head, sizeof(head), (char *)page + head_at))
			return;
	}
	if (head & 1) { /* bit 0: a tail page: its address as a number, read again */
		if (!bpf_probe_read_kernel(&page_addr, sizeof(page_addr), &bio->bi_io_vec->bv_page))
			tail_page_file(page_addr, head, f);
		return;
	}
	mapping_bits = cast ? kernel_word(page, bpf_core_field_offset(struct page, mapping))
			    : (unsigned long)HEAD_FIELD(raw, page, struct page, mapping);
	if (!mapping_bits || (mapping_bits & PAGE_MAPPING_FLAGS))
		return;
	mapping = page->mapping;
	host = mapping->host;
	if (!host)
		return;
	f->mode = host->i_mode & S_IFMT;
	if (f->mode != S_IFREG)
		return;
	f->ino = host->i_ino;
	f->dev = host->i_sb->s_dev;
	if (bpf_core_field_exists(((struct page___old *)page)->index))
		f->offset = (__s64)((struct page___old *)page)->index * PAGE_BYTES;
	else
		f->offset = (__s64)page->__folio_index * PAGE_BYTES;
}

/* ---- O_DIRECT reads ---- */

/* In the body of the syscall the registers entered with, not in the work the
 * kernel runs after its exit on the way back to userspace (task work: io_uring
 * can queue a read there): x86-64's entry puts -ENOSYS in ax, which the
 * syscall's return value replaces; arm64 keeps x0, the first argument, until
 * then (a read that returned as many bytes as its fd number cannot be told).
 * PT_REGS_RC's own expansion, not the macro: tests/fixtures/past_record.bpf.c
 * redefines PT_REGS_RC for the exit programs, with their ctx. */
#define REGS_RC(regs) (__PT_REGS_CAST(regs)->__PT_RC_REG)
#if defined(__TARGET_ARCH_x86)
#define IN_SYSCALL_BODY(regs) (REGS_RC(regs) == (unsigned long)-38 /* -ENOSYS */)
#else
#define IN_SYSCALL_BODY(regs) (REGS_RC(regs) == PT_REGS_PARM1_SYSCALL(regs))
#endif

/* The read the current thread of the server is in, whose O_DIRECT read bio is
 * queued now: a read syscall's fd and offset argument (or at_pos), or an
 * io_submit of one iocb (uptr, its iocb pointer array). An io_submit of
 * several iocbs, an io_uring submission (io_uring_enter, its worker threads)
 * are none: their direct reads are counted from what they return. */
struct direct_call {
	__u64 uptr;
	__s64 offset;
	__u32 fd;
	__u8 at_pos;
	__u8 iocb;
};

static __always_inline bool direct_read_call(struct direct_call *dc, const bool cast)
{
	struct mio_syscall_args a = {};
	struct task_struct *task;
	struct inflight *call;
	struct pt_regs *regs;

	if (targ_args_at_exit) {
		/* from the registers the thread entered with (an io_uring worker's
		 * are zeroed: never entered from userspace) */
		if (task_flags() & PF_IO_WORKER)
			return false;
		task = bpf_get_current_task_btf();
		regs = entry_regs(task, cast);
		if (!regs || !IN_SYSCALL_BODY(regs))
			return false;
		a.nr = SYSCALL_NR(regs);
		syscall_args_of(regs, &a);
		if (a.nr == NR_io_submit) {
			dc->iocb = 1;
			dc->uptr = a.arg[2];
			return a.arg[1] == 1;
		}
		if (syscall_op(a.nr) != MIO_READ)
			return false;
		dc->fd = a.arg[0];
		dc->offset = syscall_offset_arg(&a, &dc->at_pos);
		return true;
	}
	/* before 5.15 the enter programs are always attached: the call's slot,
	 * active from its entry to its exit */
	call = inflight_get(current_tid());
	if (!call || !call->active)
		return false;
	if (call->kind == CALL_IO_SUBMIT) {
		dc->iocb = 1;
		dc->uptr = call->uptr;
		return call->nr == 1;
	}
	if (call->kind != CALL_FD || call->op != MIO_READ)
		return false;
	dc->fd = call->fd;
	dc->offset = call->offset;
	dc->at_pos = call->at_pos;
	return true;
}

/* A lone libaio iocb's read (dc->iocb): its fd and offset, read from the iocb
 * the server passed; false when that read faults or the iocb is no read. */
static __always_inline bool direct_call_iocb(struct direct_call *dc)
{
	struct iocb *user_iocb = NULL;
	struct iocb cb;

	if (!dc->iocb)
		return true;
	if (bpf_probe_read_user(&user_iocb, sizeof(user_iocb), (void *)dc->uptr) ||
	    bpf_probe_read_user(&cb, sizeof(cb), user_iocb)) {
		__sync_fetch_and_add(&drops.read_faults, 1);
		return false;
	}
	if (cb.aio_lio_opcode != IOCB_CMD_PREAD && cb.aio_lio_opcode != IOCB_CMD_PREADV)
		return false;
	dc->fd = cb.aio_fildes;
	dc->offset = cb.aio_offset;
	return true;
}

/* The read the server's thread is in (a read syscall's fd, a lone libaio
 * iocb's) is of file id: a page-cache read bio it queues is that read's, even
 * before the read's syscall exit remembers the file (the first read of a file
 * it never touched: a table opened after a restart). Its other read bios are
 * not its files': a page fault's (its binary's or a library's cold text, read
 * in while it runs a statement) names no file it reads. A file on overlayfs
 * is read through its layer's inode, not the fd's: any file's bio in its read
 * is that read's (tracer/overlay_files.py joins an upper inode to its file). */
static __always_inline bool reading_file_in(const struct file_id *id, const bool cast)
{
	struct direct_call dc = {};
	struct super_block *sb;
	struct inode *inode;
	struct file *f;
	__u64 ino;

	if (!direct_read_call(&dc, cast) || !direct_call_iocb(&dc))
		return false;
	f = fd_file(dc.fd, cast);
	if (!f)
		return false;
	if (cast) {
		inode = file_btf(f)->f_inode;
		ino = inode->i_ino;
		sb = inode->i_sb;
		return (ino == id->ino && sb->s_dev == id->dev) || sb->s_magic == OVERLAYFS_SUPER_MAGIC;
	}
	inode = BPF_CORE_READ(f, f_inode);
	ino = BPF_CORE_READ(inode, i_ino);
	sb = BPF_CORE_READ(inode, i_sb);
	return (ino == id->ino && BPF_CORE_READ(sb, s_dev) == id->dev) ||
	       BPF_CORE_READ(sb, s_magic) == OVERLAYFS_SUPER_MAGIC;
}

/* its copies: with bpf_rdonly_cast (6.2) and without, whose program must not
 * hold the kfunc at all; functions of their own: their stack is not on_bio's */
static __noinline bool reading_file(const struct file_id *id)
{
	return reading_file_in(id, false);
}

static __noinline bool reading_file_cast(const struct file_id *id)
{
	return reading_file_in(id, true);
}

/* A read bio of the traced server whose pages name no file (its own buffer:
 * O_DIRECT), of bytes, queued to partition part_dev: its bytes are a direct
 * read of the file the read the thread is in names (direct_read_call), if it
 * is open O_DIRECT. A read of unwritten extents or holes queues no bio: the
 * zeros it returns count nothing. Each bio counts once: its copies queued
 * below the file's own device (device-mapper, md, a loop device's reads of its
 * backing file) are not (the buffered reads' rule, on_bio), nor the parts a
 * split makes (block_bio_queue sees the bio before it is split). */
static __always_inline int direct_read_bio_in(__u32 bytes, __u32 part_dev, const bool cas, const bool cast)
{
	struct direct_call dc = {};
	struct file_op_key key = {};
	struct file_ref file;
	struct file *f;
	__u8 api = MIO_API_SYSCALL;

	if (!targ_direct_bios || !direct_read_call(&dc, cast) || !direct_call_iocb(&dc))
		return 0;
	if (dc.iocb)
		api = MIO_API_LIBAIO;
	f = fd_file(dc.fd, cast);
	if (!file_is_direct(f, cast))
		return 0;
	if (cast ? !file_ref_cast(f, &file, NULL) : !file_ref_of(f, &file, SCRATCH_BIO))
		return 0;
	if (file.dev != part_dev && (file.dev >> 20))
		return 0;
	/* at the file position: not moved yet, the read's first byte */
	if (dc.at_pos)
		dc.offset = cast ? file_btf(f)->f_pos : BPF_CORE_READ(f, f_pos);
	key.ino = file.ino;
	key.dev = file.dev;
	key.tid = current_tid();
	key.conn = conn_of(key.tid);
	key.op = MIO_DIRECT_READ;
	key.api = api;
	key.region = region_of(file.dev, file.ino, dc.offset);
	ACCOUNT_PAGE_CACHE(cas, &key, bytes, -1);
	return 0;
}

/* its copies, as account / account_cas (a program of a kernel without BPF
 * compare-and-swap, or without bpf_rdonly_cast, must not hold the instruction
 * at all); functions of their own: their stack is not on_bio's */
static __noinline int direct_read_bio(__u32 bytes, __u32 part_dev)
{
	return direct_read_bio_in(bytes, part_dev, false, false);
}

static __noinline int direct_read_bio_cas(__u32 bytes, __u32 part_dev)
{
	return direct_read_bio_in(bytes, part_dev, true, false);
}

static __noinline int direct_read_bio_cast(__u32 bytes, __u32 part_dev)
{
	return direct_read_bio_in(bytes, part_dev, true, true);
}

#define DIRECT_READ_BIO(cas, cast, ...)                                                                  \
	((cast) ? direct_read_bio_cast(__VA_ARGS__)                                                      \
		: (cas) ? direct_read_bio_cas(__VA_ARGS__) : direct_read_bio(__VA_ARGS__))

/* `bio` is the tracepoint's BTF pointer: its fields, its device's and its
 * disk's are plain loads (each BPF_CORE_READ level is a helper call, ~25 ns;
 * the bio hook runs for every bio of every device: issue 19). */
static __always_inline int on_bio(struct bio *bio, const bool cas, const bool cast)
{
	struct file_op_key key = {};
	struct page_file pf = {};
	struct file_id id = {};
	struct block_device *bdev;
	__u32 op, bytes, dev, part_dev;
	__u8 owner, dir;

	op = bio->bi_opf & REQ_OP_MASK;
	if (op != REQ_OP_READ && op != REQ_OP_WRITE)
		return 0;
	bytes = bio->bi_iter.bi_size;
	if (!bytes)
		return 0;
	if (bpf_core_field_exists(((struct bio___old *)bio)->bi_disk)) {
		dev = disk_dev(BPF_CORE_READ((struct bio___old *)bio, bi_disk));
		part_dev = dev + BPF_CORE_READ((struct bio___old *)bio, bi_partno);
	} else {
		bdev = bio->bi_bdev;
		dev = disk_dev_btf(bdev->bd_disk);
		part_dev = bdev->bd_dev;
	}
	dir = op == REQ_OP_WRITE ? MIO_DIR_WRITE : MIO_DIR_READ;

	bio_page_file(bio, &pf, cast);
	if (pf.mode == S_IFREG) {
		id.ino = pf.ino;
		id.dev = pf.dev;
		/* a read the server's own thread queues in a read of this file is of its
		 * file even before that read's syscall exit remembers it (reading_file) */
		owner = is_server_file(&id) ||
				(dir == MIO_DIR_READ && is_target() &&
				 (cast ? reading_file_cast(&id) : reading_file(&id)))
			? MIO_OWNER_SERVER_FILE
			: MIO_OWNER_OTHER;
	} else if (pf.mode == S_IFBLK) {
		owner = MIO_OWNER_FS;
	} else if (is_target()) {
		owner = MIO_OWNER_SERVER_DIRECT; /* user pages: O_DIRECT */
	} else {
		/* no file behind the page: a kernel thread's buffers (the journal's
		 * copies) are the filesystem's; a process's, its direct I/O */
		owner = task_flags() & PF_KTHREAD ? MIO_OWNER_FS : MIO_OWNER_OTHER;
	}
	add_dev(dev, dir, owner, bytes, cas);
	if (owner == MIO_OWNER_SERVER_DIRECT) {
		if (dir == MIO_DIR_READ)
			DIRECT_READ_BIO(cas, cast, bytes, part_dev);
		return 0;
	}

	/* A file's writeback is the bio to its filesystem's own device. The same pages
	 * queued again below it (a loop device's backing file with direct I/O, a
	 * device-mapper clone) are the server's bytes on that disk too, but no second
	 * writeback. (A filesystem on an anonymous device, major 0 as btrfs, cannot
	 * be told from its lower devices: each of its bios counts.) */
	if (owner != MIO_OWNER_SERVER_FILE || (id.dev != part_dev && (id.dev >> 20)))
		return 0;
	key.ino = id.ino;
	key.dev = id.dev;
	if (dir == MIO_DIR_WRITE) {
		key.op = MIO_WRITEBACK;
		writeback_cause(&key, cast);
	} else {
		/* a read into the file's page cache: the same condition, as a loop
		 * device's direct I/O reads into the upper file's pages again */
		key.op = (bio->bi_opf & req_rahead()) ? MIO_READAHEAD : MIO_DISK_READ;
		read_cause(&key);
	}
	ACCOUNT_PAGE_CACHE(cas, &key, bytes, pf.offset);
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(handle_bio_queue, struct bio *bio)
{
	return on_bio(bio, true, false);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(handle_bio_queue_nocas, struct bio *bio)
{
	return on_bio(bio, false, false);
}

/* the bio's page read with plain loads (bpf_rdonly_cast, 6.2) */
SEC("tp_btf/block_bio_queue")
int BPF_PROG(handle_bio_queue_cast, struct bio *bio)
{
	return on_bio(bio, true, true);
}

/* before 5.11 the tracepoint also passed the queue: one program, without
 * compare-and-swap (hash rows), that loads wherever that form is */
SEC("tp_btf/block_bio_queue")
int BPF_PROG(handle_bio_queue_q, struct request_queue *q, struct bio *bio)
{
	return on_bio(bio, false, false);
}
