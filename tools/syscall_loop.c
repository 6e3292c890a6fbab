// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* syscall_loop N: N getppid() syscalls in a loop; prints the ns per call.
 *
 * tools/bench.py (scenario syscall_tax) runs it under each tracer, tracing
 * another process: while any syscall tracepoint has a program, every thread of
 * every process takes the kernel's slow syscall path (the tracepoint work flag
 * is set on all of them), a cost bpf_stats does not see. getppid does no
 * other work, so the difference is that cost. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long n, i;
	double t0;

	if (argc != 2 || (n = strtol(argv[1], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: syscall_loop CALLS\n");
		return 2;
	}
	t0 = now_s();
	for (i = 0; i < n; i++)
		syscall(SYS_getppid); /* the libc wrapper, not a cached value */
	printf("%.2f\n", (now_s() - t0) / n * 1e9);
	return 0;
}
