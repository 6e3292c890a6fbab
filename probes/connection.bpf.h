/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Which client connection each thread of the server serves (--mysql), included
 * by mysqlio.bpf.c at its end (the accounting above calls conn_of, declared
 * there), before pagecache.bpf.h.
 *
 * A connection thread reads its client's socket before it works for it: MySQL
 * and MariaDB read a packet with recv() (vio_read: the syscall recvfrom, with
 * MSG_DONTWAIT, after ppoll when nothing was there), the login's first packet
 * too, even of a TLS connection (the TLS request is sent in clear; only then do
 * OpenSSL's read() calls take over). A thread that serves another connection
 * (the thread cache hands a cached OS thread to the next one; a thread pool's
 * worker picks up any) therefore reads the new connection's socket with
 * recvfrom before any of its I/O, and every request of the thread after that
 * belongs to that connection until it reads another socket. The map `conns`
 * keeps, per thread, the inode number of the socket it last read with recvfrom
 * (a socket's inode is numbered by get_next_ino(): 32 bits, unique while it
 * lives); the accounting puts it into each row's key and each event (conn).
 * Userspace names a socket's connection (thread_sockets.py: /proc/PID/fd and
 * performance_schema.socket_instances) and says "(unknown connection)" for one
 * it could not name.
 *
 * Seen by strace on MariaDB 10.11 and MySQL 9.7 (a cached thread, the same fd
 * number for the next connection's socket, recvfrom at login and per command;
 * MySQL 9.7 over TLS: recvfrom for the login's first packet, read() after).
 * Not seen: a thread pool worker that switches between TLS connections reads
 * each with read(), not recvfrom: attribution there is the thread's last login.
 * An io_uring completion is counted (top) with its thread's connection at
 * completion (record's event: at submission, struct pending_io's conn).
 *
 * Cost (--mysql only: targ_conns, else the verifier removes it all): one
 * program on sys_enter_recvfrom of every process (the raw hook: a test in the
 * sys_exit program it runs anyway), which for the server's threads reads the
 * fd's inode (three loads; probe reads before 6.2) and writes the map only when
 * the socket changed; and one hash lookup per accounted request (the thread's
 * conn). Measured with bpf_stats on 6.18 (a loaded 2-core machine, MariaDB
 * 10.11 under sysbench oltp_write_only, ~15 recvfrom a transaction, ~45k runs
 * a second of every process): ~150 ns a run (190 without the cast), and the
 * exit program ~+30 ns a run (~215 -> ~245). */
#ifndef __MYSQLIO_CONNECTION_BPF_H
#define __MYSQLIO_CONNECTION_BPF_H

#define S_IFSOCK 0140000

#if defined(__TARGET_ARCH_x86)
#define NR_recvfrom 45
#elif defined(__TARGET_ARCH_arm64)
#define NR_recvfrom 207
#endif

/* the probes know connections (--mysql): set by userspace before load */
const volatile bool targ_conns = false;

/* tid -> struct conn_state: the inode number of the socket the thread last
 * read, and when it first read one. Userspace reads first_ns (a thread's
 * requests before it, conn 0, are of the connection it served at the attach:
 * connections.py) and deletes exited threads' entries (conn_map.py). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CONN_THREADS);
	__type(key, __u32);
	__type(value, struct conn_state);
} conns SEC(".maps");

/* the connection of thread tid: the socket it last read, 0 if none is known */
static __always_inline __u32 conn_of(__u32 tid)
{
	struct conn_state *state;

	if (!targ_conns)
		return 0;
	state = bpf_map_lookup_elem(&conns, &tid);
	return state ? state->conn : 0;
}

/* Thread tid of the server reads fd with recvfrom: if fd is a socket, the
 * thread serves its connection from now on. cast: the fd's file and inode
 * read through bpf_rdonly_cast (6.2: plain loads, as the exit's *_cast
 * programs), else by probe reads. */
static __always_inline int conn_read(__u32 fd, __u32 tid, const bool cast)
{
	struct file *file = fd_file(fd, cast);
	struct conn_state *have, state = {};
	struct inode *inode;
	__u32 mode, ino;

	if (!file)
		return 0;
	if (cast) {
		inode = file_btf(file)->f_inode;
		mode = inode->i_mode;
		ino = inode->i_ino;
	} else {
		inode = BPF_CORE_READ(file, f_inode);
		mode = BPF_CORE_READ(inode, i_mode);
		ino = BPF_CORE_READ(inode, i_ino);
	}
	if ((mode & S_IFMT) != S_IFSOCK)
		return 0;
	have = bpf_map_lookup_elem(&conns, &tid);
	if (have) {
		if (have->conn != ino)
			have->conn = ino; /* one aligned word: readers see the old or the new */
		return 0;
	}
	state.conn = ino;
	state.first_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&conns, &tid, &state, BPF_ANY))
		__sync_fetch_and_add(&drops.conn_full, 1);
	return 0;
}

static __always_inline int conn_recvfrom(void *ctx, const bool cast)
{
	__u32 tid;

	if (!targ_conns)
		return 0;
	tid = (__u32)target_id();
	if (!tid)
		return 0;
	/* the fd: read as enter_tracepoint reads an argument (mysqlio.bpf.c) */
	return conn_read(TP_ARG(ctx, 0), tid, cast);
}

/* syscalls:sys_enter_recvfrom, attached with --mysql where the per-syscall
 * tracepoints are the hook (userspace disables the twin this kernel does not
 * load, and both otherwise) */
SEC("tracepoint/syscalls/sys_enter_recvfrom")
int handle_conn_recvfrom(void *ctx)
{
	return conn_recvfrom(ctx, false);
}

SEC("tracepoint/syscalls/sys_enter_recvfrom")
int handle_conn_recvfrom_cast(void *ctx)
{
	return conn_recvfrom(ctx, true);
}

/* The raw hook's sys_exit (every syscall): a recvfrom of the server's thread
 * tid, its fd from the registers it entered with. */
static __always_inline bool conn_read_raw(struct pt_regs *regs, __u32 tid, const bool cast)
{
	if (!targ_conns || SYSCALL_NR(regs) != NR_recvfrom)
		return false;
	conn_read(PT_REGS_PARM1_SYSCALL(regs), tid, cast);
	return true;
}

#endif /* __MYSQLIO_CONNECTION_BPF_H */
