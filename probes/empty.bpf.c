// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The benchmark floor: the same tracepoints as mysqlio.bpf.c with only the
 * pid filter, so `make bench` can tell what our accounting adds to it.
 * Userspace loads the pair matching the probes' syscall hook, and the
 * page-cache hooks' programs for the floor-pc variant. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u32 targ_tgid = 0;
__u64 hits = 0;

static __always_inline int count_target(void)
{
	if ((bpf_get_current_pid_tgid() >> 32) == targ_tgid)
		__sync_fetch_and_add(&hits, 1);
	return 0;
}

/* per-syscall tracepoints: attached by userspace to each I/O syscall */
SEC("tracepoint")
int floor_enter(void *ctx)
{
	return count_target();
}

SEC("tracepoint")
int floor_exit(void *ctx)
{
	return count_target();
}

/* raw tracepoints: every syscall of every process */
SEC("tp_btf/sys_enter")
int BPF_PROG(floor_sys_enter, struct pt_regs *regs, long nr)
{
	return count_target();
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_sys_exit, struct pt_regs *regs, long ret)
{
	return count_target();
}

/* the page-cache and device tracepoints of pagecache.bpf.h (the floor-pc
 * variant, for mysqlio with those hooks on; userspace disables them otherwise).
 * Only the folio dirtying event: the benchmarks run on this machine's kernel. */
SEC("tp_btf/writeback_dirty_folio")
int floor_dirty_folio(void *ctx)
{
	return count_target();
}

SEC("tp_btf/writeback_start")
int floor_writeback_start(void *ctx)
{
	return count_target();
}

SEC("tp_btf/writeback_written")
int floor_writeback_written(void *ctx)
{
	return count_target();
}

SEC("tp_btf/block_bio_queue")
int floor_bio_queue(void *ctx)
{
	return count_target();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
