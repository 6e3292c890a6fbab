/*
 * iogen - ground-truth file I/O generator for mysqlio.
 *
 * Does file I/O through every path mysqld uses (write/read families,
 * fsync/fdatasync/sync_file_range, libaio, io_uring, O_DIRECT) on files in
 * --dir, and prints as one JSON line exactly what it did to each file, so a
 * tracer's per-file numbers can be compared to it exactly.
 *
 * One op = one request: one syscall, one libaio iocb or one io_uring SQE.
 * Bytes = what the request returned. A failed request counts in "errors" only.
 *
 * Page cache (on-request pc_* scenarios, each on new files of its own): the
 * files of these scenarios also carry "dirtied_bytes" (page-cache bytes that
 * went clean -> dirty, once per page per transition), "writeback_bytes" (bytes
 * the kernel wrote from the file's page cache to its device), "writeback_by"
 * (cause -> bytes, only causes with bytes: "fsync", "fdatasync",
 * "sync_file_range", "msync", "flusher_periodic") and "msync_ops" (also counted
 * in "sync_ops"). Other files print none of these keys. Pages are
 * sysconf(_SC_PAGESIZE) bytes, written one page per pwrite so the page cache
 * holds order-0 folios. Where cachestat(2) exists (Linux 6.5+) the scenarios
 * check the kernel agrees (dirty pages before each sync, none after) and fail
 * otherwise, e.g. when something else wrote the pages back first. Run them on
 * a quiet block-backed filesystem (not tmpfs, which has no writeback).
 *
 * coldread (on request): reads from the disk and from the page cache, per file;
 * see sc_coldread.
 *
 * aio_reuse (on request): libaio iocbs and iovecs zeroed by the process before
 * io_submit returns; see sc_aio_reuse.
 *
 * pc_existing (pc_fsync on an existing file opened O_TRUNC) and read_existing
 * (an existing file read whole) need the caller to have put their file in
 * --dir: on overlayfs, a lower layer's file, copied up for pc_existing. On
 * overlayfs nothing is checked with cachestat(2): the overlay file's own page
 * cache is always empty (its pages are the layer's inode's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libaio.h>
#include <liburing.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define MAX_FILES	64
#define BUF_SIZE	(1 << 20)
#define ALIGN		4096
#define MAX_IOV		8
#define MAX_BATCH	16

enum op { OP_WRITE, OP_READ, OP_FSYNC, OP_FDATASYNC, OP_SFR, OP_MSYNC };

/* What caused the kernel to write a file's dirty page cache back. */
enum wb_cause { WB_FSYNC, WB_FDATASYNC, WB_SFR, WB_MSYNC, WB_FLUSHER_PERIODIC, WB_NCAUSES };
static const char *const wb_cause_names[] = {
	[WB_FSYNC] = "fsync", [WB_FDATASYNC] = "fdatasync", [WB_SFR] = "sync_file_range",
	[WB_MSYNC] = "msync", [WB_FLUSHER_PERIODIC] = "flusher_periodic",
};

/* What iogen did to one file: the expectations a tracer must match. */
struct file {
	char path[PATH_MAX];
	bool deleted;
	long long write_bytes, write_ops, read_bytes, read_ops;
	long long fsync_ops, fdatasync_ops, sfr_ops, msync_ops, errors;
	bool pc;		/* page-cache expectations below are printed */
	long long dirtied_bytes, writeback_bytes, writeback_by[WB_NCAUSES];
	bool rd;		/* read expectations below are printed (coldread) */
	long long disk_read_bytes, direct_read_bytes;
};

static struct file files[MAX_FILES];
static int nr_files;
static char dir[PATH_MAX];
static const char *scen = "setup";	/* current scenario, for messages */
static char *buf, *rbuf;		/* aligned write / read buffers */
static int unlinked_fd = -1;		/* kept open until exit */
static double rate_elapsed = -1;
static long long proc_io_read = -1;	/* coldread: /proc/self/io read_bytes over its reads */

static long page_size;			/* sysconf(_SC_PAGESIZE) */

static struct {
	double rate, seconds, period, flusher_wait;
	long size, burst_size;
	int threads, burst_count, lat_count;
	bool wait, stagger;
} env = { .size = 512, .threads = 1, .burst_count = 80, .burst_size = BUF_SIZE, .lat_count = 10,
	  .flusher_wait = 40 };

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "iogen: %s: ", scen);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

#define die_err(call, err)	fail("%s: %s", call, strerror(err))
#define die(call)		die_err(call, errno)

/* ---- expectations registry ---- */

static struct file *file_get(const char *name)
{
	char path[PATH_MAX];
	int i;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		fail("%s: path too long", name);
	for (i = 0; i < nr_files; i++)
		if (!files[i].deleted && !strcmp(files[i].path, path))
			return &files[i];
	if (nr_files == MAX_FILES)
		fail("too many files");
	strcpy(files[nr_files].path, path);
	return &files[nr_files++];
}

/* Record the outcome of one request: ret >= 0 is its result, < 0 an error. */
static void expect(struct file *f, enum op op, long ret)
{
	if (ret < 0) {
		f->errors++;
		return;
	}
	switch (op) {
	case OP_WRITE:	   f->write_ops++; f->write_bytes += ret; break;
	case OP_READ:	   f->read_ops++; f->read_bytes += ret; break;
	case OP_FSYNC:	   f->fsync_ops++; break;
	case OP_FDATASYNC: f->fdatasync_ops++; break;
	case OP_SFR:	   f->sfr_ops++; break;
	case OP_MSYNC:	   f->msync_ops++; break;
	}
}

/* A syscall that must succeed: count it, or die. */
static long ok(struct file *f, enum op op, long ret, const char *call)
{
	if (ret < 0)
		die(call);
	expect(f, op, ret);
	return ret;
}

/* A syscall that must fail with errno @err: count the error, or die. */
static void fails(struct file *f, long ret, int err, const char *call)
{
	if (ret >= 0)
		fail("%s: succeeded, expected %s", call, strerror(err));
	if (errno != err)
		die(call);
	expect(f, OP_WRITE, -err);
}

/* Open DIR/name (created if needed); O_DIRECT falls back to buffered on EINVAL. */
static int open_file(struct file **fp, const char *name, int flags)
{
	struct file *f = file_get(name);
	int fd;

	fd = open(f->path, flags | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EINVAL && (flags & O_DIRECT)) {
		fprintf(stderr, "iogen: %s: %s: O_DIRECT unsupported, using buffered I/O\n",
			scen, name);
		fd = open(f->path, (flags & ~O_DIRECT) | O_CREAT | O_CLOEXEC, 0644);
	}
	if (fd < 0)
		die("open");
	*fp = f;
	return fd;
}

static void xclose(int fd)
{
	if (close(fd))
		die("close");
}

static void close_fds(const int *fds, int n)
{
	while (n--)
		xclose(*fds++);
}

/* Lay out iovecs of the given lengths in @base, each 4096-aligned. */
static int mkiov(struct iovec *iov, char *base, const size_t *lens, int n)
{
	size_t off = 0;
	int i;

	for (i = 0; i < n; i++) {
		iov[i].iov_base = base + off;
		iov[i].iov_len = lens[i];
		off += (lens[i] + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	}
	if (off > BUF_SIZE)
		fail("iovecs exceed buffer");
	return n;
}

#define LENS(...)	(const size_t[]){ __VA_ARGS__ }
#define IOV(iov, base, ...) \
	mkiov(iov, base, LENS(__VA_ARGS__), sizeof(LENS(__VA_ARGS__)) / sizeof(size_t))

/* ---- syscall scenarios ---- */

static void sc_write(void)
{
	static const size_t sizes[] = { 1, 777, 4096 + 7, 65536 + 13, 0, 301 };
	struct file *f;
	int fd = open_file(&f, "write.dat", O_WRONLY | O_TRUNC);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		ok(f, OP_WRITE, write(fd, buf, sizes[i]), "write");
	xclose(fd);
}

static void sc_pwrite(void)
{
	static const struct { size_t len; off_t off; } w[] = {
		{ 513, 0 }, { 3001, 10000 }, { 8191, (1 << 20) + 3 }, { 129, 600 },
	};
	struct file *f;
	int fd = open_file(&f, "pwrite.dat", O_WRONLY | O_TRUNC);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(w); i++)
		ok(f, OP_WRITE, pwrite(fd, buf, w[i].len, w[i].off), "pwrite64");
	xclose(fd);
}

static void sc_writev(void)
{
	struct iovec iov[MAX_IOV];
	struct file *f;
	int fd = open_file(&f, "writev.dat", O_WRONLY | O_TRUNC);

	ok(f, OP_WRITE, writev(fd, iov, IOV(iov, buf, 100, 2000, 333)), "writev");
	ok(f, OP_WRITE, writev(fd, iov, IOV(iov, buf, 7, 4099)), "writev");
	ok(f, OP_WRITE, writev(fd, iov, IOV(iov, buf, 1, 2, 3, 4, 5, 6, 7, 8)), "writev");
	xclose(fd);
}

static void sc_pwritev(void)
{
	struct iovec iov[MAX_IOV];
	struct file *f;
	int fd = open_file(&f, "pwritev.dat", O_WRONLY | O_TRUNC);

	ok(f, OP_WRITE, pwritev(fd, iov, IOV(iov, buf, 211, 1500, 4099), 0), "pwritev");
	ok(f, OP_WRITE, pwritev(fd, iov, IOV(iov, buf, 64, 8000), 50000), "pwritev");
	xclose(fd);
}

static void sc_pwritev2(void)
{
	struct iovec iov[MAX_IOV];
	struct file *f;
	int fd = open_file(&f, "pwritev2.dat", O_WRONLY | O_TRUNC);

	ok(f, OP_WRITE, pwritev2(fd, iov, IOV(iov, buf, 123, 4567), 0, 0), "pwritev2");
	ok(f, OP_WRITE, pwritev2(fd, iov, IOV(iov, buf, 321, 765), 9000, RWF_DSYNC), "pwritev2");
	/* offset -1: at (and advancing) the file position */
	ok(f, OP_WRITE, pwritev2(fd, iov, IOV(iov, buf, 55), -1, 0), "pwritev2");
	xclose(fd);
}

static void sc_reads(void)
{
	struct iovec iov[MAX_IOV];
	struct file *f;
	int fd = open_file(&f, "reads.dat", O_RDWR | O_TRUNC);

	ok(f, OP_WRITE, write(fd, buf, 20000 + 17), "write");
	ok(f, OP_READ, pread(fd, rbuf, 2000, 5000), "pread64");
	if (lseek(fd, 0, SEEK_SET) < 0)
		die("lseek");
	ok(f, OP_READ, read(fd, rbuf, 1000), "read");
	ok(f, OP_READ, readv(fd, iov, IOV(iov, rbuf, 123, 456, 789)), "readv");
	ok(f, OP_READ, preadv(fd, iov, IOV(iov, rbuf, 300, 700), 10000), "preadv");
	ok(f, OP_READ, preadv2(fd, iov, IOV(iov, rbuf, 500, 1234), 15000, 0), "preadv2");
	ok(f, OP_READ, preadv2(fd, iov, IOV(iov, rbuf, 111), -1, 0), "preadv2");
	/* short read (1017 bytes), then two reads at EOF returning 0 */
	ok(f, OP_READ, pread(fd, rbuf, 4096, 19000), "pread64");
	ok(f, OP_READ, pread(fd, rbuf, 100, 20017), "pread64");
	if (lseek(fd, 0, SEEK_END) < 0)
		die("lseek");
	ok(f, OP_READ, read(fd, rbuf, 100), "read");
	xclose(fd);
}

static void sc_sync(void)
{
	struct file *f;
	int fd = open_file(&f, "sync.dat", O_WRONLY | O_TRUNC);

	ok(f, OP_WRITE, write(fd, buf, 1111), "write");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	ok(f, OP_WRITE, write(fd, buf, 2222), "write");
	ok(f, OP_FDATASYNC, fdatasync(fd), "fdatasync");
	ok(f, OP_WRITE, write(fd, buf, 3333), "write");
	ok(f, OP_SFR, sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE), "sync_file_range");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	ok(f, OP_WRITE, write(fd, buf, 444), "write");
	ok(f, OP_SFR, sync_file_range(fd, 1111, 5555, SYNC_FILE_RANGE_WRITE), "sync_file_range");
	ok(f, OP_FDATASYNC, fdatasync(fd), "fdatasync");
	ok(f, OP_SFR, sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE), "sync_file_range");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	xclose(fd);
}

/* ---- async scenarios: a batch is a table of requests ---- */

enum kind { K_WRITE, K_WRITEV, K_READ, K_READV, K_FSYNC, K_FDSYNC, K_SFR };
enum res { R_FULL, R_EOF, R_EBADF };	/* expected result of a request */

struct io {
	int t;			/* target: index into the batch's fds/files */
	enum kind kind;
	off_t off;
	size_t len[MAX_IOV];	/* plain: len[0]; vectored: 0-terminated */
	enum res res;
};

#define RQ(t, kind, off, ...)	{ t, kind, off, { __VA_ARGS__ }, R_FULL }
#define RQ_RES(res, t, kind, off, ...)	{ t, kind, off, { __VA_ARGS__ }, res }
#define SYNC(t, kind)		RQ(t, kind, 0, 0)

struct req {
	struct file *f;
	enum op op;
	long want;		/* expected result: bytes, 0, or -errno */
	struct iovec iov[MAX_IOV];
	int nr_iov;
};

static bool is_sync(enum kind k)
{
	return k == K_FSYNC || k == K_FDSYNC || k == K_SFR;
}

static void prep_req(struct req *r, const struct io *io, struct file **fs)
{
	static const enum op ops[] = {
		[K_WRITE] = OP_WRITE, [K_WRITEV] = OP_WRITE, [K_READ] = OP_READ,
		[K_READV] = OP_READ, [K_FSYNC] = OP_FSYNC, [K_FDSYNC] = OP_FDATASYNC,
		[K_SFR] = OP_SFR,
	};
	char *base = (io->kind == K_READ || io->kind == K_READV) ? rbuf : buf;
	int i, n = 1;
	long total = 0;

	if (io->kind == K_WRITEV || io->kind == K_READV)
		for (n = 0; n < MAX_IOV && io->len[n]; n++)
			;
	r->nr_iov = mkiov(r->iov, base, io->len, n);
	for (i = 0; i < n && !is_sync(io->kind); i++)
		total += io->len[i];
	r->f = fs[io->t];
	r->op = ops[io->kind];
	r->want = io->res == R_EOF ? 0 : io->res == R_EBADF ? -EBADF : total;
}

static void aio_reap(io_context_t ctx, int nr)
{
	struct io_event ev[MAX_BATCH];
	int i, got;

	while (nr > 0) {
		got = io_getevents(ctx, 1, nr, ev, NULL);
		if (got == -EINTR)
			continue;
		if (got < 0)
			die_err("io_getevents", -got);
		for (i = 0; i < got; i++) {
			struct req *r = ev[i].data;

			if ((long)ev[i].res != r->want || ev[i].res2)
				fail("aio completion res %ld (res2 %ld), expected %ld",
				     (long)ev[i].res, (long)ev[i].res2, r->want);
		}
		nr -= got;
	}
}

/*
 * Submit a batch with io_submit and reap it. Accepted iocbs count at
 * submission (bytes submitted); a rejected fsync/fdsync iocb (-EINVAL on
 * filesystems without aio fsync) counts as an error and is skipped; the rest
 * of the batch is then submitted.
 */
static void aio_batch(io_context_t ctx, const int *fds, struct file **fs,
		      const struct io *ios, int n)
{
	struct iocb cbs[MAX_BATCH], *cbp[MAX_BATCH];
	struct req reqs[MAX_BATCH];
	int i, ret, done = 0, inflight = 0;

	for (i = 0; i < n; i++) {
		struct req *r = &reqs[i];
		int fd = fds[ios[i].t];

		prep_req(r, &ios[i], fs);
		switch (ios[i].kind) {
		case K_WRITE:  io_prep_pwrite(&cbs[i], fd, r->iov[0].iov_base, r->want, ios[i].off); break;
		case K_WRITEV: io_prep_pwritev(&cbs[i], fd, r->iov, r->nr_iov, ios[i].off); break;
		case K_READ:   io_prep_pread(&cbs[i], fd, r->iov[0].iov_base, r->want, ios[i].off); break;
		case K_READV:  io_prep_preadv(&cbs[i], fd, r->iov, r->nr_iov, ios[i].off); break;
		case K_FSYNC:  io_prep_fsync(&cbs[i], fd); break;
		case K_FDSYNC: io_prep_fdsync(&cbs[i], fd); break;
		default:       fail("no such aio request");
		}
		cbs[i].data = r;
		cbp[i] = &cbs[i];
	}
	while (done < n) {
		ret = io_submit(ctx, n - done, cbp + done);
		if (ret > 0) {
			for (i = done; i < done + ret; i++)
				expect(reqs[i].f, reqs[i].op, reqs[i].want);
			done += ret;
			inflight += ret;
			if (done == n)
				break;
			if (!is_sync(ios[done].kind))
				fail("io_submit: iocb %d of %d rejected", done, n);
			ret = -EINVAL;	/* partial: the kernel does not say why */
		}
		if (ret == 0 || (ret < 0 && !(ret == -EINVAL && is_sync(ios[done].kind))))
			die_err("io_submit", ret ? -ret : EIO);
		fprintf(stderr, "iogen: %s: io_submit rejected a sync iocb: %s\n",
			scen, strerror(-ret));
		expect(reqs[done].f, reqs[done].op, ret);
		done++;
	}
	aio_reap(ctx, inflight);
}

static void sc_aio(void)
{
	static const struct io b1[] = {
		RQ(0, K_WRITE, 0, 8192),
		RQ(1, K_WRITEV, 0, 4096, 8192),
		RQ(1, K_WRITE, 12288, 12288),
		RQ(0, K_WRITEV, 8192, 8192, 4096),
	};
	static const struct io b2[] = {
		RQ(0, K_READ, 4096, 4096),
		RQ(1, K_READ, 8192, 8192),
		RQ(0, K_WRITE, 20480, 16384),
		RQ(1, K_WRITEV, 24576, 4096, 8192, 16384),
		SYNC(0, K_FSYNC),
		SYNC(1, K_FDSYNC),
		RQ(0, K_READV, 0, 4096, 8192),
	};
	static const struct io b3[] = {
		SYNC(1, K_FSYNC),
		SYNC(0, K_FDSYNC),
		RQ(1, K_READV, 0, 4096, 8192, 4096),
		RQ(0, K_WRITE, 36864, 4096),
	};
	io_context_t ctx = 0;
	struct file *fs[2], *ferr;
	struct iocb cbs[2], *cbp[2] = { &cbs[0], &cbs[1] };
	int ret, efd, fds[2];

	ret = io_setup(MAX_BATCH, &ctx);
	if (ret < 0)
		die_err("io_setup", -ret);
	fds[0] = open_file(&fs[0], "aio_a.dat", O_RDWR | O_TRUNC | O_DIRECT);
	fds[1] = open_file(&fs[1], "aio_b.dat", O_RDWR | O_TRUNC | O_DIRECT);
	aio_batch(ctx, fds, fs, b1, ARRAY_SIZE(b1));
	aio_batch(ctx, fds, fs, b2, ARRAY_SIZE(b2));
	aio_batch(ctx, fds, fs, b3, ARRAY_SIZE(b3));

	/* First iocb writes to an O_RDONLY fd: io_submit fails, nothing submitted. */
	efd = open_file(&ferr, "aio_err.dat", O_RDONLY);
	io_prep_pwrite(&cbs[0], efd, buf, 4096, 0);
	io_prep_pwrite(&cbs[1], fds[0], buf, 4096, 0);	/* never submitted */
	ret = io_submit(ctx, 2, cbp);
	if (ret != -EBADF)
		fail("io_submit on O_RDONLY fd returned %d, expected -EBADF", ret);
	expect(ferr, OP_WRITE, ret);

	close_fds((int[]){ efd, fds[0], fds[1] }, 3);
	ret = io_destroy(ctx);
	if (ret < 0)
		die_err("io_destroy", -ret);
}

/*
 * aio_reuse (issue 60): iocbs the process reuses before io_submit returns. The kernel
 * copies an iocb and its iovecs when it takes them; once a request completes, its
 * iocb is the process's again, and MySQL zeroes it as soon as another thread reaps the
 * completion, which on tmpfs or a fast device happens while io_submit is still
 * returning. Made deterministic in one call: its last two iocbs are buffered reads of
 * zeros (done inside io_submit) over the first two iocbs and over the second's iovecs,
 * which the kernel has taken by then. What was submitted counts, whatever the iocbs
 * hold afterwards.
 */
static void sc_aio_reuse(void)
{
	static struct iocb cbs[4];
	static struct iovec iov[2];
	static const char zeros[sizeof(cbs)];
	static const long want[] = { 8192, 12288, 2 * sizeof(struct iocb), sizeof(iov) };
	struct iocb *cbp[4] = { &cbs[0], &cbs[1], &cbs[2], &cbs[3] };
	struct io_event ev[4];
	struct file *fw, *fz;
	io_context_t ctx = 0;
	int i, ret, got = 0, fdw, fdz;

	ret = io_setup(MAX_BATCH, &ctx);
	if (ret < 0)
		die_err("io_setup", -ret);
	fdw = open_file(&fw, "aio_reuse.dat", O_RDWR | O_TRUNC | O_DIRECT);
	fdz = open_file(&fz, "aio_reuse_zeros.dat", O_RDWR | O_TRUNC);
	ok(fz, OP_WRITE, pwrite(fdz, zeros, sizeof(zeros), 0), "pwrite");
	io_prep_pwrite(&cbs[0], fdw, buf, want[0], 0);
	iov[0] = (struct iovec){ buf, 4096 };
	iov[1] = (struct iovec){ buf + 4096, 8192 };
	io_prep_pwritev(&cbs[1], fdw, iov, 2, 8192);
	io_prep_pread(&cbs[2], fdz, cbs, want[2], 0);
	io_prep_pread(&cbs[3], fdz, iov, want[3], 0);
	ret = io_submit(ctx, 4, cbp);
	if (ret != 4)
		fail("io_submit of 4 iocbs returned %d", ret);
	expect(fw, OP_WRITE, want[0]);
	expect(fw, OP_WRITE, want[1]);
	expect(fz, OP_READ, want[2]);
	expect(fz, OP_READ, want[3]);
	if (cbs[0].aio_fildes || cbs[1].aio_fildes || iov[1].iov_len)
		fail("the iocbs were not zeroed inside io_submit: the scenario tests nothing");
	while (got < 4) {
		ret = io_getevents(ctx, 1, 4 - got, ev + got, NULL);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			die_err("io_getevents", -ret);
		got += ret;
	}
	for (i = 0; i < 4; i++) {
		long res = (long)ev[i].res, j = (struct iocb *)ev[i].obj - cbs;

		if (j < 0 || j > 3 || res != want[j])
			fail("aio completion res %ld of iocb %ld", res, j);
	}
	close_fds((int[]){ fdw, fdz }, 2);
	ret = io_destroy(ctx);
	if (ret < 0)
		die_err("io_destroy", -ret);
}

/* Submit a batch of SQEs at once and check every CQE; @fds may be fixed-file indexes. */
static void uring_batch(struct io_uring *ring, const int *fds, struct file **fs,
			const struct io *ios, int n, bool fixed)
{
	struct req reqs[MAX_BATCH];
	struct io_uring_cqe *cqe;
	int i, ret;

	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		const struct io *io = &ios[i];
		struct req *r = &reqs[i];
		int fd = fds[io->t];

		if (!sqe)
			fail("io_uring_get_sqe: ring full");
		prep_req(r, io, fs);
		switch (io->kind) {
		case K_WRITE:  io_uring_prep_write(sqe, fd, r->iov[0].iov_base, io->len[0], io->off); break;
		case K_WRITEV: io_uring_prep_writev(sqe, fd, r->iov, r->nr_iov, io->off); break;
		case K_READ:   io_uring_prep_read(sqe, fd, r->iov[0].iov_base, io->len[0], io->off); break;
		case K_READV:  io_uring_prep_readv(sqe, fd, r->iov, r->nr_iov, io->off); break;
		case K_FSYNC:  io_uring_prep_fsync(sqe, fd, 0); break;
		case K_FDSYNC: io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC); break;
		case K_SFR:    io_uring_prep_sync_file_range(sqe, fd, io->len[0], io->off,
							     SYNC_FILE_RANGE_WRITE); break;
		}
		if (fixed)
			sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data(sqe, r);
	}
	ret = io_uring_submit(ring);
	if (ret < 0)
		die_err("io_uring_submit", -ret);
	if (ret != n)
		fail("io_uring_submit: submitted %d of %d", ret, n);
	for (i = 0; i < n; i++) {
		struct req *r;

		ret = io_uring_wait_cqe(ring, &cqe);
		if (ret < 0)
			die_err("io_uring_wait_cqe", -ret);
		r = io_uring_cqe_get_data(cqe);
		if (cqe->res != r->want)
			fail("io_uring cqe res %d, expected %ld", cqe->res, r->want);
		expect(r->f, r->op, cqe->res);
		io_uring_cqe_seen(ring, cqe);
	}
}

static void sc_uring(void)
{
	static const struct io b1[] = {		/* 0 = uring.dat */
		RQ(0, K_WRITE, 0, 4096 + 100),
		RQ(0, K_WRITEV, 4196, 150, 2500, 77),
		RQ(0, K_WRITE, 6923, 999),
		SYNC(0, K_FSYNC),
		RQ(0, K_SFR, 0, 0),
	};
	static const struct io b2[] = {		/* 1 = uring_err.dat (O_RDONLY) */
		RQ(0, K_READ, 0, 1000),
		RQ(0, K_READV, 2000, 200, 300, 1234),
		RQ(0, K_READ, 7000, 922),
		RQ_RES(R_EOF, 0, K_READ, 7922, 100),
		SYNC(0, K_FDSYNC),
		RQ(0, K_SFR, 4096, 1000),
		RQ_RES(R_EBADF, 1, K_WRITE, 0, 4096),
	};
	static const struct io b3[] = {		/* fixed: 0 = uring_fixed.dat, 1 = uring.dat */
		RQ(0, K_WRITE, 0, 3001),
		RQ(0, K_WRITEV, 3001, 11, 22, 33),
		RQ(1, K_WRITE, 7922, 555),
		SYNC(0, K_FSYNC),
		RQ(1, K_READ, 1000, 1500),
	};
	static const int idx[] = { 0, 1 };
	struct io_uring ring;
	struct file *fs[3];
	int ret, fds[3];

	ret = io_uring_queue_init(MAX_BATCH, &ring, 0);
	if (ret < 0)
		die_err("io_uring_queue_init", -ret);
	fds[0] = open_file(&fs[0], "uring.dat", O_RDWR | O_TRUNC);
	fds[1] = open_file(&fs[1], "uring_err.dat", O_RDONLY);
	uring_batch(&ring, fds, fs, b1, ARRAY_SIZE(b1), false);
	uring_batch(&ring, fds, fs, b2, ARRAY_SIZE(b2), false);

	fds[2] = open_file(&fs[2], "uring_fixed.dat", O_RDWR | O_TRUNC);
	ret = io_uring_register_files(&ring, (int[]){ fds[2], fds[0] }, 2);
	if (ret < 0)
		die_err("io_uring_register_files", -ret);
	uring_batch(&ring, idx, (struct file *[]){ fs[2], fs[0] }, b3, ARRAY_SIZE(b3), true);
	ret = io_uring_unregister_files(&ring);
	if (ret < 0)
		die_err("io_uring_unregister_files", -ret);

	io_uring_queue_exit(&ring);
	close_fds(fds, 3);
}

/* ---- file lifecycle scenarios ---- */

static void sc_odirect(void)
{
	struct file *f;
	int fd = open_file(&f, "odirect.dat", O_RDWR | O_TRUNC | O_DIRECT);

	ok(f, OP_WRITE, pwrite(fd, buf, 16384, 0), "pwrite64");
	ok(f, OP_WRITE, pwrite(fd, buf, 16384, 3 * 16384), "pwrite64");
	ok(f, OP_WRITE, pwrite(fd, buf, 16384, 16384), "pwrite64");
	ok(f, OP_WRITE, pwrite(fd, buf, 2 * 16384, 4 * 16384), "pwrite64");
	ok(f, OP_READ, pread(fd, rbuf, 16384, 16384), "pread64");
	xclose(fd);
}

static void sc_reuse(void)
{
	struct file *fa, *fb;
	int i, a, b;

	for (i = 0; i < 3; i++) {
		int flags = O_WRONLY | (i ? O_APPEND : O_TRUNC);

		a = open_file(&fa, "reuse_a.dat", flags);
		ok(fa, OP_WRITE, write(a, buf, 1234 + i), "write");
		xclose(a);
		b = open_file(&fb, "reuse_b.dat", flags);
		if (b != a)
			fail("reuse_b.dat got fd %d, not reused fd %d", b, a);
		ok(fb, OP_WRITE, write(b, buf, 4321 + i), "write");
		xclose(b);
	}
}

static void sc_rename(void)
{
	struct file *f;
	int fd = open_file(&f, "renamed_before.dat", O_WRONLY | O_TRUNC);
	char to[PATH_MAX];

	ok(f, OP_WRITE, write(fd, buf, 3333), "write");
	if (snprintf(to, sizeof(to), "%s/renamed_after.dat", dir) >= (int)sizeof(to))
		fail("path too long");
	if (rename(f->path, to))
		die("rename");
	strcpy(f->path, to);	/* expectations follow the file to its new name */
	ok(f, OP_WRITE, write(fd, buf, 4444), "write");
	xclose(fd);
}

static void sc_unlink(void)
{
	struct file *f;
	int fd = open_file(&f, "unlinked.dat", O_WRONLY | O_TRUNC);

	ok(f, OP_WRITE, write(fd, buf, 5555), "write");
	if (unlink(f->path))
		die("unlink");
	f->deleted = true;
	ok(f, OP_WRITE, write(fd, buf, 6666), "write");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	unlinked_fd = fd;	/* closed after the final wait */
}

static void sc_shortlived(void)
{
	struct file *f;
	int fd = open_file(&f, "shortlived.dat", O_WRONLY | O_TRUNC);

	ok(f, OP_WRITE, write(fd, buf, 2345), "write");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	xclose(fd);
}

static void sc_errors(void)
{
	struct file *f;
	int p[2], ro, wr;

	ro = open_file(&f, "errors.dat", O_RDONLY);
	fails(f, write(ro, buf, 10), EBADF, "write");
	fails(f, pwrite(ro, buf, 10, 0), EBADF, "pwrite64");
	wr = open_file(&f, "errors.dat", O_WRONLY | O_TRUNC);
	fails(f, pwrite(wr, buf, 10, -1), EINVAL, "pwrite64");
	fails(f, read(wr, rbuf, 10), EBADF, "read");
	ok(f, OP_WRITE, write(wr, buf, 99), "write");
	close_fds((int[]){ ro, wr }, 2);

	/* not a regular file: not expected anywhere */
	if (pipe(p))
		die("pipe");
	if (fsync(p[1]) == 0 || errno != EINVAL)
		fail("fsync on a pipe: expected EINVAL");
	close_fds(p, 2);
}

/* Write to and read from non-files: must not show up in any file's numbers. */
static void xfer(int wfd, int rfd, const void *src, size_t len, const char *what)
{
	char tmp[4096];

	if (write(wfd, src, len) != (ssize_t)len)
		fail("write to %s failed", what);
	if (read(rfd, tmp, sizeof(tmp)) != (ssize_t)len)
		fail("read from %s failed", what);
}

static void sc_nonfile(void)
{
	uint64_t one = 1;
	int p[2], s[2], efd;

	if (pipe(p))
		die("pipe");
	xfer(p[1], p[0], buf, 300, "pipe");
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, s))
		die("socketpair");
	xfer(s[0], s[1], buf, 400, "socket");
	xfer(s[1], s[0], buf, 401, "socket");
	efd = eventfd(0, 0);
	if (efd < 0)
		die("eventfd");
	xfer(efd, efd, &one, sizeof(one), "eventfd");
	close_fds((int[]){ p[0], p[1], s[0], s[1], efd }, 5);
}

/* ---- rate ---- */

struct rate_thread {
	pthread_t tid;
	struct file *f;
	int fd;
	long long ops;
	double rate;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts = { (time_t)t, (long)((t - (time_t)t) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *rate_worker(void *arg)
{
	struct rate_thread *t = arg;
	long long k = 0, j, batch = t->rate / 100;	/* ~100 clock checks/s */
	double start = now();

	batch = batch < 1 ? 1 : batch > 1000 ? 1000 : batch;
	while (k < t->ops) {
		for (j = 0; j < batch && k < t->ops; j++, k++)
			ok(t->f, OP_WRITE, pwrite(t->fd, buf, env.size, (k % 256) * env.size),
			   "pwrite64");
		sleep_until(start + k / t->rate);
	}
	return NULL;
}

static void sc_rate(void)
{
	static struct rate_thread th[MAX_FILES / 2];
	long long total = (long long)(env.rate * env.seconds + 0.5);
	int i, T = env.threads, err;
	char name[32];
	double start;

	for (i = 0; i < T; i++) {
		if (T == 1)
			snprintf(name, sizeof(name), "rate.dat");
		else
			snprintf(name, sizeof(name), "rate-%d.dat", i);
		th[i].fd = open_file(&th[i].f, name, O_WRONLY | O_TRUNC);
		th[i].ops = total / T + (i < total % T);
		th[i].rate = env.rate / T;
	}
	start = now();
	for (i = 0; i < T; i++)
		if ((err = pthread_create(&th[i].tid, NULL, rate_worker, &th[i])))
			die_err("pthread_create", err);
	for (i = 0; i < T; i++)
		if ((err = pthread_join(th[i].tid, NULL)))
			die_err("pthread_join", err);
	rate_elapsed = now() - start;
	for (i = 0; i < T; i++)
		xclose(th[i].fd);
}

/* ---- periodic ---- */

/*
 * A Percona 5.5 master thread in miniature: every --period seconds (from P on)
 * --burst-count pwrites of --burst-size bytes to "ibdata1" (the doublewrite
 * flush), over a steady background of --rate small pwrites of --size bytes a
 * second to "ib_logfile0" with one fdatasync a second
 * (innodb_flush_log_at_trx_commit=2), for --seconds. Prints when each burst began.
 */
static double burst_at[4096];
static int nr_bursts;

static void sc_periodic(void)
{
	struct file *fb, *fg;
	int bfd = open_file(&fb, "ibdata1", O_WRONLY | O_TRUNC);
	int gfd = open_file(&fg, "ib_logfile0", O_WRONLY | O_TRUNC);
	double start = now(), t, next_burst = env.period, next_sync = 1, next;
	long long k = 0;
	int j;

	for (;;) {
		t = now() - start;
		if (t >= env.seconds)
			break;
		if (t >= next_burst) {
			if (nr_bursts < (int)ARRAY_SIZE(burst_at))
				burst_at[nr_bursts++] = t;
			for (j = 0; j < env.burst_count; j++)
				ok(fb, OP_WRITE, pwrite(bfd, buf, env.burst_size,
							(off_t)j * env.burst_size), "pwrite64");
			next_burst += env.period;
		}
		if (t >= next_sync) {
			ok(fg, OP_FDATASYNC, fdatasync(gfd), "fdatasync");
			next_sync += 1;
		}
		for (; env.rate && k < t * env.rate; k++)
			ok(fg, OP_WRITE, pwrite(gfd, buf, env.size, (k % 256) * env.size),
			   "pwrite64");
		next = next_burst < next_sync ? next_burst : next_sync;
		if (env.rate && k / env.rate < next)
			next = k / env.rate;
		sleep_until(start + (next < env.seconds ? next : env.seconds));
	}
	rate_elapsed = now() - start;
	close_fds((int[]){ bfd, gfd }, 2);
}

/* ---- latency ---- */

/*
 * Requests one at a time (queue depth 1), each timed here from just before
 * its submission to its completion, for a tracer's latencies to be compared
 * with: --count O_DIRECT 4 KiB overwrites of lat-API.dat, then --count
 * fdatasyncs of lat-API-sync.dat (each after a buffered 4 KiB write), through
 * pwrite64/fdatasync, libaio and io_uring (API = syscall, libaio, io_uring).
 * Run it where the latency is imposed (e.g. a blkio-throttled loop device).
 */
enum lat_api { LAT_SYSCALL, LAT_LIBAIO, LAT_URING, LAT_NAPIS };
static const char *const lat_api_names[] = { "syscall", "libaio", "io_uring" };
#define LAT_MAX 1024
static struct lat_series {
	struct file *f, *fsync;	/* O_DIRECT writes; fdatasyncs */
	int count;
	long long write_ns[LAT_MAX], sync_ns[LAT_MAX];
} lat[LAT_NAPIS];
static bool lat_ran;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One request through @api; returns its result (bytes, 0, or -errno). */
static long lat_request(enum lat_api api, int fd, bool sync, off_t off,
			io_context_t ctx, struct io_uring *ring)
{
	struct iocb cb, *cbp = &cb;
	struct io_event ev;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	long ret;

	switch (api) {
	case LAT_SYSCALL:
		ret = sync ? fdatasync(fd) : pwrite(fd, buf, ALIGN, off);
		return ret < 0 ? -errno : ret;
	case LAT_LIBAIO:
		if (sync)
			io_prep_fdsync(&cb, fd);
		else
			io_prep_pwrite(&cb, fd, buf, ALIGN, off);
		ret = io_submit(ctx, 1, &cbp);
		if (ret != 1)
			return ret < 0 ? ret : -EIO;
		while ((ret = io_getevents(ctx, 1, 1, &ev, NULL)) == -EINTR)
			;
		return ret == 1 ? (long)ev.res : ret < 0 ? ret : -EIO;
	default:
		sqe = io_uring_get_sqe(ring);
		if (!sqe)
			return -EBUSY;
		if (sync)
			io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		else
			io_uring_prep_write(sqe, fd, buf, ALIGN, off);
		ret = io_uring_submit(ring);
		if (ret != 1)
			return ret < 0 ? ret : -EIO;
		ret = io_uring_wait_cqe(ring, &cqe);
		if (ret < 0)
			return ret;
		ret = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		return ret;
	}
}

static void sc_latency(void)
{
	io_context_t ctx = 0;
	struct io_uring ring;
	int api, i, ret, n = env.lat_count;
	char name[40];

	ret = io_setup(4, &ctx);
	if (ret < 0)
		die_err("io_setup", -ret);
	ret = io_uring_queue_init(4, &ring, 0);
	if (ret < 0)
		die_err("io_uring_queue_init", -ret);
	for (api = 0; api < LAT_NAPIS; api++) {
		struct lat_series *ls = &lat[api];
		struct file *f, *fs;
		int bfd, dfd, sfd;

		/* laid out by one write first, so the timed writes are overwrites:
		 * one block I/O each, no allocation */
		snprintf(name, sizeof(name), "lat-%s.dat", lat_api_names[api]);
		bfd = open_file(&f, name, O_RDWR | O_TRUNC);
		ok(f, OP_WRITE, pwrite(bfd, buf, (size_t)n * ALIGN, 0), "pwrite64");
		ok(f, OP_FSYNC, fsync(bfd), "fsync");
		dfd = open_file(&f, name, O_RDWR | O_DIRECT);
		ls->f = f;
		for (i = 0; i < n; i++) {
			long long t0 = now_ns();

			ret = lat_request(api, dfd, false, (off_t)i * ALIGN, ctx, &ring);
			if (ret < 0)
				die_err(lat_api_names[api], -ret);
			ls->write_ns[i] = now_ns() - t0;
			expect(f, OP_WRITE, ret);
		}
		/* each fdatasync writes back one dirty page, overwritten in place */
		snprintf(name, sizeof(name), "lat-%s-sync.dat", lat_api_names[api]);
		sfd = open_file(&fs, name, O_RDWR | O_TRUNC);
		ls->fsync = fs;
		for (i = 0; i < n; i++) {
			long long t0;

			ok(fs, OP_WRITE, pwrite(sfd, buf, ALIGN, 0), "pwrite64");
			t0 = now_ns();
			ret = lat_request(api, sfd, true, 0, ctx, &ring);
			if (ret < 0)
				die_err(lat_api_names[api], -ret);
			ls->sync_ns[i] = now_ns() - t0;
			expect(fs, OP_FDATASYNC, ret);
		}
		ls->count = n;
		close_fds((int[]){ bfd, dfd, sfd }, 3);
	}
	io_uring_queue_exit(&ring);
	ret = io_destroy(ctx);
	if (ret < 0)
		die_err("io_destroy", -ret);
	lat_ran = true;
}

static void json_str(const char *s);

static void print_lat_json(void)
{
	int api, i, op;

	printf(", \"latency\": [");
	for (api = 0; api < LAT_NAPIS; api++) {
		for (op = 0; op < 2; op++) {
			const long long *ns = op ? lat[api].sync_ns : lat[api].write_ns;

			printf("%s{\"path\": ", api || op ? ", " : "");
			json_str(op ? lat[api].fsync->path : lat[api].f->path);
			printf(", \"api\": \"%s\", \"op\": \"%s\", \"ns\": [", lat_api_names[api],
			       op ? "fdatasync" : "write");
			for (i = 0; i < lat[api].count; i++)
				printf("%s%lld", i ? ", " : "", ns[i]);
			printf("]}");
		}
	}
	printf("]");
}

/* ---- page cache ---- */

/*
 * Buffered writes whose page cache the kernel writes back for one known cause.
 * Each scenario writes new files (an old one is unlinked first: ext4 flushes a
 * file truncated to 0 when it is closed, a cause none of them expects), one
 * pwrite of exactly one page per page, so that each page is an order-0 folio
 * of its own and the kernel's per-page counts (vmstat nr_dirtied, nr_written)
 * match these exactly. A write spanning several pages may get a large folio
 * (ext4 has them since Linux 6.16: one 256 KiB pwrite made an order-6 folio on
 * 6.18), which is dirtied and written back whole, however little of it changed.
 */
#ifndef __NR_cachestat
#define __NR_cachestat	451	/* the same on every architecture, Linux 6.5+ */
#endif
#define PC_PAGES	16	/* pc_fsync, pc_flusher */
#define PC_SFR_PAGES	8
#define PC_SMALL_WRITES	10	/* of PC_SMALL_SIZE bytes, all in the first page */
#define PC_SMALL_SIZE	100
#define PC_MMAP_PAGES	32	/* N: a file of 2N pages, every other one stored to */
#define PC_FLUSHER_TIMEOUT 120	/* s */

/* <linux/mman.h> of 6.5+, under names of our own */
struct pc_cachestat_range { uint64_t off, len; };
struct pc_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

static bool no_cachestat;

#define PC_OVERLAYFS_MAGIC 0x794c7630	/* OVERLAYFS_SUPER_MAGIC */

/* The page-cache state of @fd's whole file; false where the kernel has no cachestat,
 * or where the file is on overlayfs: its pages are the upper (or lower) layer's
 * inode's, and cachestat of the overlay file reads the overlay inode's, always empty. */
static bool pc_stat(int fd, struct pc_cachestat *cs)
{
	struct pc_cachestat_range range = { 0, 0 };	/* len 0: to the end of the file */
	struct statfs sfs;

	if (no_cachestat)
		return false;
	if (fstatfs(fd, &sfs))
		die("fstatfs");
	if (sfs.f_type == PC_OVERLAYFS_MAGIC)
		return false;
	if (syscall(__NR_cachestat, fd, &range, cs, 0) == 0)
		return true;
	if (errno != ENOSYS)
		die("cachestat");
	no_cachestat = true;
	fprintf(stderr, "iogen: %s: no cachestat(2): page-cache states unchecked\n", scen);
	return false;
}

/* Fail unless the kernel says @fd's file has @dirty dirty pages and none under writeback. */
static void pc_check(int fd, long long dirty, const char *when)
{
	struct pc_cachestat cs;

	if (pc_stat(fd, &cs) && (cs.nr_dirty != (uint64_t)dirty || cs.nr_writeback))
		fail("%s: cachestat: %llu dirty and %llu writeback pages, expected %lld and 0",
		     when, (unsigned long long)cs.nr_dirty, (unsigned long long)cs.nr_writeback,
		     dirty);
}

/* Create DIR/name anew, read-write, with page-cache expectations. */
static int pc_open(struct file **fp, const char *name)
{
	struct file *f = file_get(name);

	if (unlink(f->path) && errno != ENOENT)
		die("unlink");
	f->pc = true;
	return open_file(fp, name, O_RDWR | O_EXCL);
}

/* @n buffered pwrites of one page each, to pages @first, @first + 1, ...: @n pages dirtied. */
static void pc_write_pages(struct file *f, int fd, int first, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (ok(f, OP_WRITE, pwrite(fd, buf, page_size, (off_t)(first + i) * page_size),
		       "pwrite64") != page_size)
			fail("short pwrite64");
	f->dirtied_bytes += (long long)n * page_size;
}

/* @pages pages of @f written back by the kernel for @cause. */
static void pc_written(struct file *f, long long pages, enum wb_cause cause)
{
	f->writeback_bytes += pages * page_size;
	f->writeback_by[cause] += pages * page_size;
}

static void sc_pc_fsync(void)
{
	struct file *f;
	int fd = pc_open(&f, "pc_fsync.dat");

	pc_write_pages(f, fd, 0, PC_PAGES);
	pc_check(fd, PC_PAGES, "before fsync");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	pc_check(fd, 0, "after fsync");
	pc_written(f, PC_PAGES, WB_FSYNC);
	xclose(fd);
}

/* DIR/name, which the caller put there: opened without O_CREAT (on overlayfs, a file
 * of the lower layer, copied up when opened for writing). */
static int open_existing(struct file **fp, const char *name, int flags)
{
	struct file *f = file_get(name);
	int fd = open(f->path, flags | O_CLOEXEC);

	if (fd < 0)
		fail("%s: %s (the scenario needs it to exist)", f->path, strerror(errno));
	*fp = f;
	return fd;
}

/* pc_fsync on an existing file opened O_TRUNC: on overlayfs, a lower file copied up
 * (no data copied: it is truncated), its pages then the upper inode's. */
static void sc_pc_existing(void)
{
	struct file *f;
	int fd = open_existing(&f, "pc_existing.dat", O_RDWR | O_TRUNC);

	f->pc = true;
	pc_write_pages(f, fd, 0, PC_PAGES);
	pc_check(fd, PC_PAGES, "before fsync");
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	pc_check(fd, 0, "after fsync");
	pc_written(f, PC_PAGES, WB_FSYNC);
	xclose(fd);
}

/* An existing file read whole, read-only, a page a read up to the read at EOF (on
 * overlayfs, a file left in the lower layer). */
static void sc_read_existing(void)
{
	struct file *f;
	int fd = open_existing(&f, "read_existing.dat", O_RDONLY);

	while (ok(f, OP_READ, read(fd, rbuf, page_size), "read") > 0)
		;
	xclose(fd);
}

/*
 * coldread: reads from the disk, per file. coldread.dat (COLD_PAGES pages, written and
 * fsynced, its clean pages then dropped with POSIX_FADV_DONTNEED) read whole, sequentially
 * and buffered: every byte from the disk (readahead included; a whole number of pages, so
 * no block past EOF); then again: every byte from the page cache. coldread_direct.dat
 * (DIRECT_PAGES, written and fsynced) read whole with O_DIRECT: from the disk, outside the
 * page cache; then with libaio and io_uring (O_DIRECT too). coldread_random.dat
 * (RANDOM_PAGES, dropped as coldread.dat) read with RANDOM_READS page-sized preads at
 * scattered pages: what the disk gave it depends on the readahead, so it is measured:
 * the pages mincore(2) finds cached after (none before). coldread_fresh.dat: see
 * fresh_file; coldread_unwritten.dat: see unwritten_file. "disk_read_bytes" is every byte
 * read from the disk for the file (its page cache's reads and its O_DIRECT reads);
 * "direct_read_bytes" what O_DIRECT reads read; "proc_io_read_bytes" the kernel's own
 * /proc/self/io read_bytes over the reads (bios this process submitted). Where cachestat(2)
 * exists the file must be uncached before its cold read and wholly cached after.
 */
#define COLD_PAGES	256
#define DIRECT_PAGES	64
#define COLD_CHUNK	(64 * 1024)
#define RANDOM_PAGES	1024
#define RANDOM_READS	24

static long long proc_read_bytes(void)
{
	char line[256];
	long long v = -1;
	FILE *io = fopen("/proc/self/io", "r");

	if (!io)
		die("/proc/self/io");
	while (fgets(line, sizeof(line), io))
		if (sscanf(line, "read_bytes: %lld", &v) == 1)
			break;
	fclose(io);
	if (v < 0)
		fail("/proc/self/io: no read_bytes");
	return v;
}

static void cached_check(int fd, long long pages, const char *when)
{
	struct pc_cachestat cs;

	if (pc_stat(fd, &cs) && cs.nr_cache != (uint64_t)pages)
		fail("%s: cachestat: %llu cached pages, expected %lld", when,
		     (unsigned long long)cs.nr_cache, pages);
}

/* Read @fd from offset 0 to EOF in @chunk-byte reads (the last one returns 0). */
static void read_whole(struct file *f, int fd, size_t chunk)
{
	off_t off = 0;
	long n;

	while ((n = ok(f, OP_READ, pread(fd, rbuf, chunk, off), "pread64")) > 0)
		off += n;
}

/* pages of @fd's first @pages cached now (mincore of a mapping, which faults nothing in) */
static long long cached_pages(int fd, long long pages)
{
	unsigned char vec[RANDOM_PAGES];
	long long i, n = 0;
	void *map;

	if (pages > RANDOM_PAGES)
		fail("cached_pages: %lld pages, at most %d", pages, RANDOM_PAGES);
	map = mmap(NULL, pages * page_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	if (mincore(map, pages * page_size, vec))
		die("mincore");
	munmap(map, pages * page_size);
	for (i = 0; i < pages; i++)
		n += vec[i] & 1;
	return n;
}

/* the same O_DIRECT file read whole again with libaio, then with io_uring: each a disk read */
static void direct_read_async(struct file *d, int dfd)
{
	static const struct io rd[] = { RQ(0, K_READ, 0, DIRECT_PAGES * 4096 / 2),
					RQ(0, K_READ, DIRECT_PAGES * 4096 / 2, DIRECT_PAGES * 4096 / 2) };
	io_context_t ctx = 0;
	struct io_uring ring;
	int ret;

	if (page_size != 4096)	/* the requests are in 4 KiB pages */
		return;
	ret = io_setup(MAX_BATCH, &ctx);
	if (ret < 0)
		die_err("io_setup", -ret);
	aio_batch(ctx, &dfd, &d, rd, ARRAY_SIZE(rd));
	io_destroy(ctx);
	ret = io_uring_queue_init(MAX_BATCH, &ring, 0);
	if (ret < 0)
		die_err("io_uring_queue_init", -ret);
	uring_batch(&ring, &dfd, &d, rd, ARRAY_SIZE(rd), false);
	io_uring_queue_exit(&ring);
	d->direct_read_bytes += (long long)DIRECT_PAGES * 4096 * 2;
}

/*
 * coldread_fresh.dat (COLD_PAGES): written, fsynced and its pages dropped by a child
 * process (another process: not traced), then read whole, cold, by iogen: a file the traced
 * process had never touched before its first read, as a table a restarted server opens
 * (its first read's bios are queued before that read's syscall is counted).
 */
/* path: COLD_PAGES written, fsynced and dropped from the page cache by a child process
 * (not traced) */
static void written_by_a_child(const char *path)
{
	int fd, status;
	pid_t child;

	if (unlink(path) && errno != ENOENT)
		die("unlink");
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		for (int i = 0; fd >= 0 && i < COLD_PAGES; i++)
			if (pwrite(fd, buf, page_size, (off_t)i * page_size) != page_size)
				_exit(1);
		_exit(fd < 0 || fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) ? 1 : 0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("%s: its writer failed", path);
}

static int fresh_file(struct file **fp)
{
	struct file *f = file_get("coldread_fresh.dat");
	int fd;

	written_by_a_child(f->path);
	f->pc = true;	/* nothing dirtied or written back by iogen */
	f->rd = true;
	fd = open_file(fp, "coldread_fresh.dat", O_RDONLY);
	cached_check(fd, 0, "coldread_fresh.dat before its cold read");
	return fd;
}

/*
 * coldread_mapped.dat (COLD_PAGES, written and dropped by a child): mapped, its fd closed,
 * every page touched: page faults that read it from the disk in iogen's own thread, as a
 * server's cold binary or library text is read in while it runs. No read of a file the
 * process reads: no file of iogen's (not file_get: no row expected), and out of the
 * window proc_io_read measures (its faults count in /proc/self/io read_bytes).
 */
static void mapped_file_faulted(void)
{
	char path[PATH_MAX];
	volatile const char *map;
	long long sum = 0;
	int fd;

	if (snprintf(path, sizeof(path), "%s/coldread_mapped.dat", dir) >= (int)sizeof(path))
		fail("path too long");
	written_by_a_child(path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open coldread_mapped.dat");
	cached_check(fd, 0, "coldread_mapped.dat before its faults");
	map = mmap(NULL, (size_t)COLD_PAGES * page_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	xclose(fd);
	for (int i = 0; i < COLD_PAGES; i++)
		sum += map[(size_t)i * page_size];
	if (sum != (long long)COLD_PAGES * buf[0])
		fail("coldread_mapped.dat: read back other bytes");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open coldread_mapped.dat");
	cached_check(fd, COLD_PAGES, "coldread_mapped.dat after its faults");
	xclose(fd);
	munmap((void *)map, (size_t)COLD_PAGES * page_size);
}

/*
 * coldread_unwritten.dat: UNWRITTEN_PAGES preallocated with fallocate(2) (unwritten extents,
 * which the filesystem returns as zeros without reading the disk: a fresh InnoDB redo log),
 * pages [WRITTEN_AT, WRITTEN_AT + WRITTEN_PAGES) of them then written and fsynced, and
 * HOLE_PAGES more past them by ftruncate(2) (a hole); opened again O_DIRECT. Both unwritten
 * parts are longer than the ext4 extent zero-out threshold (32 KiB), so its write converts
 * only the written pages. unwritten_read reads it.
 */
#define UNWRITTEN_PAGES	48
#define WRITTEN_AT	16
#define WRITTEN_PAGES	8
#define HOLE_PAGES	8

static int unwritten_file(struct file **fp)
{
	struct file *u;
	int fd = pc_open(&u, "coldread_unwritten.dat");

	u->rd = true;
	if (fallocate(fd, 0, 0, (off_t)UNWRITTEN_PAGES * page_size))
		die("fallocate");
	pc_write_pages(u, fd, WRITTEN_AT, WRITTEN_PAGES);
	ok(u, OP_FSYNC, fsync(fd), "fsync");
	pc_written(u, WRITTEN_PAGES, WB_FSYNC);
	if (ftruncate(fd, (off_t)(UNWRITTEN_PAGES + HOLE_PAGES) * page_size))
		die("ftruncate");
	xclose(fd);
	fd = open(u->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		die("open O_DIRECT");
	*fp = u;
	return fd;
}

/* coldread_unwritten.dat read whole with O_DIRECT by pread, then by libaio, one iocb per
 * io_submit (what MariaDB's tpool and MySQL's os0file submit): from the disk, each time, its
 * written pages only. (Not by io_uring: its direct reads count what they return.) */
static void unwritten_read(struct file *u, int fd)
{
	static const struct io rd[] = { RQ(0, K_READ, 0, (UNWRITTEN_PAGES + HOLE_PAGES) * 4096 / 2),
					RQ(0, K_READ, (UNWRITTEN_PAGES + HOLE_PAGES) * 4096 / 2,
					   (UNWRITTEN_PAGES + HOLE_PAGES) * 4096 / 2) };
	io_context_t ctx = 0;
	int ret;

	read_whole(u, fd, COLD_CHUNK);
	u->direct_read_bytes = (long long)WRITTEN_PAGES * page_size;
	if (page_size == 4096) {	/* the requests are in 4 KiB pages */
		ret = io_setup(MAX_BATCH, &ctx);
		if (ret < 0)
			die_err("io_setup", -ret);
		aio_batch(ctx, &fd, &u, &rd[0], 1);
		aio_batch(ctx, &fd, &u, &rd[1], 1);
		io_destroy(ctx);
		u->direct_read_bytes += (long long)WRITTEN_PAGES * page_size;
	}
	u->disk_read_bytes = u->direct_read_bytes;
}

static void sc_coldread(void)
{
	struct file *f, *d, *r, *n, *u;
	long long io0, page;
	int fd = pc_open(&f, "coldread.dat"), dfd, rfd, nfd, ufd, i;

	f->rd = true;
	pc_write_pages(f, fd, 0, COLD_PAGES);
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	pc_written(f, COLD_PAGES, WB_FSYNC);
	if ((errno = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)))
		die("posix_fadvise");
	cached_check(fd, 0, "before the cold read");

	dfd = pc_open(&d, "coldread_direct.dat");
	d->rd = true;
	pc_write_pages(d, dfd, 0, DIRECT_PAGES);
	ok(d, OP_FSYNC, fsync(dfd), "fsync");
	pc_written(d, DIRECT_PAGES, WB_FSYNC);
	xclose(dfd);
	dfd = open(d->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		die("open O_DIRECT");

	rfd = pc_open(&r, "coldread_random.dat");
	r->rd = true;
	pc_write_pages(r, rfd, 0, RANDOM_PAGES);
	ok(r, OP_FSYNC, fsync(rfd), "fsync");
	pc_written(r, RANDOM_PAGES, WB_FSYNC);
	if ((errno = posix_fadvise(rfd, 0, 0, POSIX_FADV_DONTNEED)))
		die("posix_fadvise");
	if (cached_pages(rfd, RANDOM_PAGES))
		fail("coldread_random.dat: cached before its reads");
	nfd = fresh_file(&n);
	ufd = unwritten_file(&u);
	mapped_file_faulted();

	io0 = proc_read_bytes();
	read_whole(f, fd, COLD_CHUNK);
	f->disk_read_bytes = (long long)COLD_PAGES * page_size;
	cached_check(fd, COLD_PAGES, "after the cold read");
	read_whole(f, fd, COLD_CHUNK);	/* warm: nothing more from the disk */
	read_whole(d, dfd, COLD_CHUNK);
	d->direct_read_bytes = (long long)DIRECT_PAGES * page_size;
	direct_read_async(d, dfd);
	d->disk_read_bytes = d->direct_read_bytes;
	/* scattered pages (a multiplicative step modulo the page count: a different page each) */
	for (i = 0, page = 7; i < RANDOM_READS; i++, page = (page * 389 + 101) % RANDOM_PAGES)
		ok(r, OP_READ, pread(rfd, rbuf, page_size, page * page_size), "pread64");
	r->disk_read_bytes = cached_pages(rfd, RANDOM_PAGES) * page_size;
	read_whole(n, nfd, COLD_CHUNK);
	n->disk_read_bytes = (long long)COLD_PAGES * page_size;
	cached_check(nfd, COLD_PAGES, "coldread_fresh.dat after its cold read");
	unwritten_read(u, ufd);
	proc_io_read = proc_read_bytes() - io0;
	xclose(ufd);
	xclose(nfd);
	xclose(rfd);
	xclose(dfd);
	xclose(fd);
}

/* Small writes into one page: the page is dirtied once, written back whole. */
static void sc_pc_small(void)
{
	struct file *f;
	int fd = pc_open(&f, "pc_small.dat");
	int i;

	for (i = 0; i < PC_SMALL_WRITES; i++)
		ok(f, OP_WRITE, write(fd, buf, PC_SMALL_SIZE), "write");
	f->dirtied_bytes += page_size;
	pc_check(fd, 1, "before fdatasync");
	ok(f, OP_FDATASYNC, fdatasync(fd), "fdatasync");
	pc_check(fd, 0, "after fdatasync");
	pc_written(f, 1, WB_FDATASYNC);
	xclose(fd);
}

static void sc_pc_sfr(void)
{
	struct file *f;
	int fd = pc_open(&f, "pc_sfr.dat");

	pc_write_pages(f, fd, 0, PC_SFR_PAGES);
	pc_check(fd, PC_SFR_PAGES, "before sync_file_range");
	ok(f, OP_SFR, sync_file_range(fd, 0, (off_t)PC_SFR_PAGES * page_size,
				      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				      SYNC_FILE_RANGE_WAIT_AFTER), "sync_file_range");
	pc_check(fd, 0, "after sync_file_range");
	pc_written(f, PC_SFR_PAGES, WB_SFR);
	xclose(fd);
}

/*
 * 2N pages written and fsync'd (clean, order-0 folios in the cache), then one
 * byte stored through a shared mapping into every other page and msync'd: N
 * pages dirtied and written back by msync. The pages must still be cached when
 * stored to: a fault reading one back could bring it in as a large folio.
 */
static void sc_pc_mmap(void)
{
	size_t len = (size_t)2 * PC_MMAP_PAGES * page_size;
	struct pc_cachestat cs;
	struct file *f;
	int fd = pc_open(&f, "pc_mmap.dat");
	char *map;
	int i;

	pc_write_pages(f, fd, 0, 2 * PC_MMAP_PAGES);
	ok(f, OP_FSYNC, fsync(fd), "fsync");
	pc_check(fd, 0, "after fsync");
	pc_written(f, 2 * PC_MMAP_PAGES, WB_FSYNC);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	if (pc_stat(fd, &cs) && cs.nr_cache != 2 * PC_MMAP_PAGES)
		fail("%llu of %d pages cached before the stores",
		     (unsigned long long)cs.nr_cache, 2 * PC_MMAP_PAGES);
	for (i = 0; i < PC_MMAP_PAGES; i++)
		map[(size_t)2 * i * page_size] = 'M';
	f->dirtied_bytes += (long long)PC_MMAP_PAGES * page_size;
	pc_check(fd, PC_MMAP_PAGES, "before msync");
	ok(f, OP_MSYNC, msync(map, len, MS_SYNC), "msync");
	pc_check(fd, 0, "after msync");
	pc_written(f, PC_MMAP_PAGES, WB_MSYNC);
	if (munmap(map, len))
		die("munmap");
	xclose(fd);
}

/*
 * Pages left dirty for the kernel's flusher, which writes them back once they
 * are older than vm.dirty_expire_centisecs (the caller shortens it and
 * vm.dirty_writeback_centisecs). Waits until cachestat says the file is clean
 * (fails after PC_FLUSHER_TIMEOUT s), or --flusher-wait seconds without cachestat.
 */
static void sc_pc_flusher(void)
{
	struct pc_cachestat cs;
	struct file *f;
	int fd = pc_open(&f, "pc_flusher.dat");
	double start;

	pc_write_pages(f, fd, 0, PC_PAGES);
	pc_check(fd, PC_PAGES, "after the writes");
	start = now();
	if (pc_stat(fd, &cs)) {
		while (cs.nr_dirty || cs.nr_writeback) {
			if (now() - start > PC_FLUSHER_TIMEOUT)
				fail("%llu dirty and %llu writeback pages after %d s: "
				     "is vm.dirty_expire_centisecs short?",
				     (unsigned long long)cs.nr_dirty,
				     (unsigned long long)cs.nr_writeback, PC_FLUSHER_TIMEOUT);
			sleep_until(now() + 0.1);
			pc_stat(fd, &cs);
		}
	} else {
		sleep_until(start + env.flusher_wait);
	}
	pc_written(f, PC_PAGES, WB_FLUSHER_PERIODIC);
	xclose(fd);
}

/*
 * A server that writes steadily and syncs on a timer: PC_PERIODIC_PAGES
 * buffered pwrites of one page each, appended to "pc_periodic.dat", in each
 * slot of PC_PERIODIC_EVERY s, and an fsync every --period seconds of slots,
 * for the whole periods of --seconds (the last fsync ends the run: every page
 * written is written back by an fsync). The writes are smooth; the writeback
 * comes in one burst per period, of the pages written in it.
 *
 * The clock of the slots stops while an fsync blocks, as a server's timer that
 * restarts after its flush: a cycle is --period plus that fsync's time. On a
 * fixed clock, the slots that fell due while an fsync blocked came at once
 * after it, a real cluster of writes every period that report rightly showed
 * as a write train (measured: on a loop disk throttled to 5 IOPS, fsyncs of
 * 0.2-0.4 s left 14 gaps under 5 ms between slots, and report showed 45
 * writes every 2 s). Slots spread over what is left of a period are no better:
 * gaps under PC_PERIODIC_EVERY put two slots into one of report's 0.1 s bins
 * on a beat, another train. So every slot is PC_PERIODIC_EVERY after the one
 * before it, or after the end of the fsync between them, and each period's
 * fsync PC_PERIODIC_EVERY after its last slot: a late wake-up (68 ms, under
 * load ~8 on 2 cores) moves the clock with it, as an fsync does, instead of
 * leaving the next slot only 32 ms after the late one.
 *
 * Prints when each fsync began and ended ("fsyncs_s", "fsync_ends_s") and when
 * each slot's writes began ("write_slots_s"), as periodic prints its bursts.
 * Like every pc_* scenario, fails when something else wrote the pages back
 * first (a sync(2) of any process, or a short vm.dirty_expire_centisecs).
 */
/* Sleeps until t; returns how late it woke (s, never negative). */
static double wake_at(double t)
{
	double late;

	sleep_until(t);
	late = now() - t;
	return late > 0 ? late : 0;
}

#define PC_PERIODIC_PAGES	16	/* 64 KiB of 4 KiB pages */
#define PC_PERIODIC_EVERY	0.1	/* s */
static double fsync_at[4096], fsync_end[4096], slot_at[65536];
static int nr_fsyncs, nr_slots;

static void sc_pc_periodic(void)
{
	struct file *f;
	int fd = pc_open(&f, "pc_periodic.dat");
	long long periods = (long long)(env.seconds / env.period + 1e-9), j, k = 0, k_end, n;
	/* stopped: the fsyncs' time and the late wake-ups so far */
	double start = now(), stopped = 0, t;

	for (j = 1; j <= periods; j++) {
		/* the slots k with k * EVERY in [(j - 1) P, j P) on the clock of the slots */
		k_end = (long long)((j * env.period - 1e-6) / PC_PERIODIC_EVERY) + 1;
		for (n = 0; k < k_end; k++, n++) {
			stopped += wake_at(start + stopped + k * PC_PERIODIC_EVERY);
			if (nr_slots < (int)ARRAY_SIZE(slot_at))
				slot_at[nr_slots++] = now() - start;
			pc_write_pages(f, fd, (int)(k * PC_PERIODIC_PAGES), PC_PERIODIC_PAGES);
		}
		stopped += wake_at(start + stopped + j * env.period);
		t = now() - start;
		pc_check(fd, n * PC_PERIODIC_PAGES, "before fsync");
		ok(f, OP_FSYNC, fsync(fd), "fsync");
		stopped += now() - start - t;
		if (nr_fsyncs < (int)ARRAY_SIZE(fsync_at)) {
			fsync_at[nr_fsyncs] = t;
			fsync_end[nr_fsyncs++] = now() - start;
		}
		pc_check(fd, 0, "after fsync");
		pc_written(f, n * PC_PERIODIC_PAGES, WB_FSYNC);
	}
	rate_elapsed = now() - start;
	xclose(fd);
}

/* ---- many files (scenario many) ----
 *
 * A server with tens of thousands of tables writes to as many files in one
 * checkpoint (issue 60): --files N files, opened once, and --threads T
 * threads, each writing one page at its own offset to every file per round,
 * a round every --period P s for --seconds S (rounds = S / P, rounded; a
 * round that overruns its period is followed at once). The files (many_NNNNNN)
 * are kept from an earlier run, their size that of T pages. Each thread counts
 * its own requests; the files' totals are printed like the other files'. */

static struct {
	int nfiles, rounds;
	int *fd;
	long long (*done)[2];	/* per thread, per file: ops, bytes */
	double start;
} many;

struct many_thread {
	pthread_t th;
	int idx;
};

static void *many_worker(void *arg)
{
	struct many_thread *t = arg;
	long long (*done)[2] = many.done + (size_t)t->idx * many.nfiles;
	off_t off = (off_t)t->idx * page_size;
	int r, i;
	ssize_t ret;

	for (r = 0; r < many.rounds; r++) {
		/* --stagger: thread i's rounds i / T of a period later */
		sleep_until(many.start + (r + (env.stagger ? (double)t->idx / env.threads : 0)) * env.period);
		for (i = 0; i < many.nfiles; i++) {
			ret = pwrite(many.fd[i], buf, page_size, off);
			if (ret < 0)
				die("pwrite64");
			done[i][0]++;
			done[i][1] += ret;
		}
	}
	return NULL;
}

/* The path of file i of scenario many. */
static void many_path(char *out, int i)
{
	if (snprintf(out, PATH_MAX, "%s/many_%06d", dir, i) >= PATH_MAX)
		fail("many_%06d: path too long", i);
}

/* The open-files soft limit raised to the hard one: room for the files. */
static void many_rlimit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		die("getrlimit");
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit");
	if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)many.nfiles + 64 > rl.rlim_cur)
		fail("--files %d: the open-files limit is %llu", many.nfiles,
		     (unsigned long long)rl.rlim_cur);
}

/* Open (create) the files before the ready line: opening tens of thousands takes
 * seconds, and a tracer's first intervals need not wait for it. */
static void many_open(void)
{
	char path[PATH_MAX];
	int i;

	many.fd = calloc(many.nfiles, sizeof(*many.fd));
	many.done = calloc((size_t)env.threads * many.nfiles, sizeof(*many.done));
	if (!many.fd || !many.done)
		fail("out of memory");
	many_rlimit();
	for (i = 0; i < many.nfiles; i++) {
		many_path(path, i);
		many.fd[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (many.fd[i] < 0)
			die("open");
	}
}

static void sc_many(void)
{
	static struct many_thread th[MAX_FILES / 2];
	int i;

	many.rounds = (int)(env.seconds / env.period + 0.5);
	many.start = now();
	for (i = 0; i < env.threads; i++) {
		th[i].idx = i;
		errno = pthread_create(&th[i].th, NULL, many_worker, &th[i]);
		if (errno)
			die("pthread_create");
	}
	for (i = 0; i < env.threads; i++)
		pthread_join(th[i].th, NULL);
	rate_elapsed = now() - many.start;
	for (i = 0; i < many.nfiles; i++)
		xclose(many.fd[i]);
}

/* ---- main ---- */

static const struct scenario {
	const char *name;
	void (*fn)(void);
	bool on_request;	/* not part of the default set */
} scenarios[] = {
#define SC(name) { #name, sc_##name, false }
	SC(write), SC(pwrite), SC(writev), SC(pwritev), SC(pwritev2), SC(reads),
	SC(sync), SC(aio), SC(uring), SC(odirect), SC(reuse), SC(rename),
	SC(unlink), SC(shortlived), SC(errors), SC(nonfile),
	{ "rate", sc_rate, true },
	{ "periodic", sc_periodic, true },
	{ "latency", sc_latency, true },
	{ "pc_fsync", sc_pc_fsync, true },
	{ "pc_small", sc_pc_small, true },
	{ "pc_sfr", sc_pc_sfr, true },
	{ "pc_mmap", sc_pc_mmap, true },
	{ "pc_flusher", sc_pc_flusher, true },
	{ "pc_periodic", sc_pc_periodic, true },
	{ "pc_existing", sc_pc_existing, true },
	{ "read_existing", sc_read_existing, true },
	{ "coldread", sc_coldread, true },
	{ "many", sc_many, true },
	{ "aio_reuse", sc_aio_reuse, true },
#undef SC
};

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* A pc_* file's page-cache expectations: writeback_by lists causes with bytes only. */
static void print_pc_json(const struct file *f)
{
	const char *sep = "";
	int c;

	printf(", \"dirtied_bytes\": %lld, \"writeback_bytes\": %lld, \"msync_ops\": %lld, "
	       "\"writeback_by\": {", f->dirtied_bytes, f->writeback_bytes, f->msync_ops);
	for (c = 0; c < WB_NCAUSES; c++) {
		if (!f->writeback_by[c])
			continue;
		printf("%s\"%s\": %lld", sep, wb_cause_names[c], f->writeback_by[c]);
		sep = ", ";
	}
	printf("}");
}

static void print_file_json(const struct file *f, const char *sep);
static void print_many_json(const char *sep);

static void print_json(void)
{
	const char *sep = "";
	int i;

	printf("{\"pid\": %d", getpid());
	if (rate_elapsed >= 0)
		printf(", \"elapsed_s\": %.6f", rate_elapsed);
	if (nr_bursts) {
		printf(", \"bursts_s\": [");
		for (i = 0; i < nr_bursts; i++)
			printf("%s%.6f", i ? ", " : "", burst_at[i]);
		printf("]");
	}
	if (nr_fsyncs) {
		printf(", \"fsyncs_s\": [");
		for (i = 0; i < nr_fsyncs; i++)
			printf("%s%.6f", i ? ", " : "", fsync_at[i]);
		printf("], \"fsync_ends_s\": [");
		for (i = 0; i < nr_fsyncs; i++)
			printf("%s%.6f", i ? ", " : "", fsync_end[i]);
		printf("]");
	}
	if (nr_slots) {
		printf(", \"write_slots_s\": [");
		for (i = 0; i < nr_slots; i++)
			printf("%s%.6f", i ? ", " : "", slot_at[i]);
		printf("]");
	}
	if (lat_ran)
		print_lat_json();
	if (proc_io_read >= 0)
		printf(", \"proc_io_read_bytes\": %lld", proc_io_read);
	printf(", \"files\": [");
	for (i = 0; i < nr_files; i++) {
		print_file_json(&files[i], sep);
		sep = ", ";
	}
	print_many_json(sep);
	printf("]}\n");
	if (fflush(stdout))
		die("stdout");
}

static void print_file_json(const struct file *f, const char *sep)
{
	printf("%s{\"path\": ", sep);
	json_str(f->path);
	printf(", \"deleted\": %s, \"write_bytes\": %lld, \"write_ops\": %lld, "
	       "\"read_bytes\": %lld, \"read_ops\": %lld, \"fsync_ops\": %lld, "
	       "\"fdatasync_ops\": %lld, \"sync_file_range_ops\": %lld, "
	       "\"sync_ops\": %lld, \"errors\": %lld",
	       f->deleted ? "true" : "false", f->write_bytes, f->write_ops,
	       f->read_bytes, f->read_ops, f->fsync_ops, f->fdatasync_ops,
	       f->sfr_ops, f->fsync_ops + f->fdatasync_ops + f->sfr_ops + f->msync_ops,
	       f->errors);
	if (f->pc)
		print_pc_json(f);
	if (f->rd)
		printf(", \"disk_read_bytes\": %lld, \"direct_read_bytes\": %lld",
		       f->disk_read_bytes, f->direct_read_bytes);
	printf("}");
}

/* The files of scenario many: each one's requests summed over the threads. */
static void print_many_json(const char *sep)
{
	struct file f;
	int i, t;

	for (i = 0; i < many.nfiles && many.done; i++) {
		memset(&f, 0, sizeof(f));
		many_path(f.path, i);
		for (t = 0; t < env.threads; t++) {
			f.write_ops += many.done[(size_t)t * many.nfiles + i][0];
			f.write_bytes += many.done[(size_t)t * many.nfiles + i][1];
		}
		print_file_json(&f, sep);
		sep = ", ";
	}
}

/* Block until a line (or EOF) arrives on stdin; byte-wise so nothing is over-read. */
static void wait_line(void)
{
	ssize_t ret;
	char c;

	while ((ret = read(0, &c, 1)) > 0 || (ret < 0 && errno == EINTR))
		if (ret > 0 && c == '\n')
			break;
}

static void __attribute__((noreturn)) usage(int code)
{
	FILE *out = code ? stderr : stdout;
	size_t i;

	fprintf(out, "usage: iogen --dir DIR [--scenario NAME]... [--wait]\n"
		     "             [--rate N --seconds S [--size B] [--threads T]]\n"
		     "             [--period P --seconds S [--burst-count N] [--burst-size B]\n"
		     "              [--rate N --size B]]  (scenario periodic)\n"
		     "             [--period P --seconds S]  (scenario pc_periodic)\n"
		     "             [--count N]  (scenario latency: N timed requests per API and op)\n"
		     "             [--flusher-wait S]  (scenario pc_flusher: wait S s, default 40,\n"
		     "              where the kernel has no cachestat to see the file clean)\n"
		     "             [--files N --period P --seconds S [--threads T] [--stagger]]\n"
		     "              (scenario many: each thread writes a page to each of N files\n"
		     "              every P s; --stagger: thread i i/T of a period after thread 0)\n"
		     "scenarios:");
	for (i = 0; i < ARRAY_SIZE(scenarios); i++)
		fprintf(out, " %s", scenarios[i].name);
	fprintf(out, "\n");
	exit(code);
}

static double num_arg(const char *opt, const char *s, double min)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= min)) {
		fprintf(stderr, "iogen: bad %s: %s\n", opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "scenario", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'w' },
		{ "rate", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "size", required_argument, NULL, 'b' },
		{ "threads", required_argument, NULL, 't' },
		{ "period", required_argument, NULL, 'P' },
		{ "burst-count", required_argument, NULL, 'n' },
		{ "burst-size", required_argument, NULL, 'B' },
		{ "count", required_argument, NULL, 'c' },
		{ "flusher-wait", required_argument, NULL, 'F' },
		{ "files", required_argument, NULL, 'f' },
		{ "stagger", no_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	static char outbuf[1 << 16];
	bool sel[ARRAY_SIZE(scenarios)] = { false }, any = false;
	const char *dirarg = NULL;
	struct stat st;
	size_t i;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dirarg = optarg; break;
		case 'w': env.wait = true; break;
		case 'r': env.rate = num_arg("--rate", optarg, 1e-9); break;
		case 'S': env.seconds = num_arg("--seconds", optarg, 0); break;
		case 'b': env.size = num_arg("--size", optarg, 1); break;
		case 't': env.threads = num_arg("--threads", optarg, 1); break;
		case 'P': env.period = num_arg("--period", optarg, 1e-3); break;
		case 'n': env.burst_count = num_arg("--burst-count", optarg, 1); break;
		case 'B': env.burst_size = num_arg("--burst-size", optarg, 1); break;
		case 'c': env.lat_count = num_arg("--count", optarg, 1); break;
		case 'F': env.flusher_wait = num_arg("--flusher-wait", optarg, 0); break;
		case 'g': env.stagger = true; break;
		case 'f': many.nfiles = num_arg("--files", optarg, 1); break;
		case 'h': usage(0);
		case 's':
			for (i = 0; i < ARRAY_SIZE(scenarios); i++)
				if (!strcmp(optarg, scenarios[i].name))
					break;
			if (i == ARRAY_SIZE(scenarios)) {
				fprintf(stderr, "iogen: unknown scenario: %s\n", optarg);
				exit(2);
			}
			sel[i] = any = true;
			break;
		default: usage(2);
		}
	}
	if (!dirarg || optind < argc)
		usage(2);
	if (!realpath(dirarg, dir) || stat(dir, &st))
		c = errno;
	else
		c = S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (c) {
		fprintf(stderr, "iogen: --dir %s: %s\n", dirarg, strerror(c));
		exit(2);
	}
	for (i = 0; i < ARRAY_SIZE(scenarios); i++) {
		if (!any)	/* default: all but on-request; --rate alone means rate */
			sel[i] = env.rate ? !strcmp(scenarios[i].name, "rate")
					  : !scenarios[i].on_request;
		if (sel[i] && scenarios[i].fn == sc_rate && !(env.rate && env.seconds)) {
			fprintf(stderr, "iogen: rate needs --rate N --seconds S\n");
			exit(2);
		}
		if (sel[i] && scenarios[i].fn == sc_periodic && !(env.period && env.seconds)) {
			fprintf(stderr, "iogen: periodic needs --period P --seconds S\n");
			exit(2);
		}
		if (sel[i] && scenarios[i].fn == sc_many &&
		    !(many.nfiles && many.nfiles <= 1 << 20 && env.period && env.seconds >= env.period)) {
			fprintf(stderr, "iogen: many needs --files N (at most 1048576) --period P --seconds S, S >= P\n");
			exit(2);
		}
		if (sel[i] && scenarios[i].fn == sc_pc_periodic &&
		    !(env.period && env.seconds >= env.period)) {
			fprintf(stderr, "iogen: pc_periodic needs --period P --seconds S, S >= P\n");
			exit(2);
		}
	}
	if (env.threads > MAX_FILES / 2 || env.size > BUF_SIZE || env.burst_size > BUF_SIZE ||
	    env.lat_count > LAT_MAX) {
		fprintf(stderr, "iogen: --threads/--size/--burst-size/--count too large\n");
		exit(2);
	}
	page_size = sysconf(_SC_PAGESIZE);
	if (page_size <= 0 || page_size > BUF_SIZE)
		fail("page size %ld", page_size);
	if (posix_memalign((void **)&buf, ALIGN, BUF_SIZE) ||
	    posix_memalign((void **)&rbuf, ALIGN, BUF_SIZE))
		fail("posix_memalign failed");
	for (i = 0; i < BUF_SIZE; i++)
		buf[i] = 'a' + i % 26;

	for (i = 0; i < ARRAY_SIZE(scenarios); i++)
		if (sel[i] && scenarios[i].fn == sc_many) {
			scen = "many";
			many_open();
		}
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));	/* JSON line in one write() */
	printf("{\"pid\": %d, \"ready\": true}\n", getpid());
	if (fflush(stdout))
		die("stdout");
	if (env.wait)
		wait_line();

	for (i = 0; i < ARRAY_SIZE(scenarios); i++) {
		if (!sel[i])
			continue;
		scen = scenarios[i].name;
		scenarios[i].fn();
	}
	scen = "report";
	print_json();
	if (env.wait)
		wait_line();
	if (unlinked_fd >= 0)
		xclose(unlinked_fd);
	return 0;
}
