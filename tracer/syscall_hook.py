"""How the probes see syscalls: per-syscall tracepoints, or the raw sys_enter/sys_exit.

The per-syscall tracepoints (syscalls:sys_enter_pwrite64, ...) fire only for
the I/O syscalls they are attached to; the BTF raw tracepoints sys_enter and
sys_exit fire for every syscall of every process on the machine, each run
ending at the pid test. Under a CPU-bound MariaDB the raw pair ran ~480k times
a second for ~20k I/O syscalls (docs/benchmarks.md), so the per-syscall
tracepoints are used whenever tracefs has them; the raw pair is the fallback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from mysqlio.libbpf import BpfObject

Hook = Literal["tracepoints", "raw"]
HOOK_ENV = "MYSQLIO_SYSCALL_HOOK"  # force one ("raw" / "tracepoints"), for tests and benchmarks

# The syscalls the probes account, by the enter program attached to them: a
# tracepoint program may read only the arguments its syscall has (the kernel
# checks the context size at attach), so each program reads 1, 3 or 4.
ENTER_PROGRAMS: dict[str, tuple[str, ...]] = {
    "handle_enter_args1": ("fsync", "fdatasync"),
    "handle_enter_args3": ("read", "write", "readv", "writev", "io_submit"),
    "handle_enter_args4": (
        "pread64",
        "pwrite64",
        "preadv",
        "pwritev",
        "preadv2",
        "pwritev2",
        "sync_file_range",
        "io_getevents",
        "io_pgetevents",
    ),
}
EXIT_PROGRAM = "handle_exit"
RAW_PROGRAMS = ("handle_sys_enter", "handle_sys_exit")
# where libbpf looks for tracefs (debugfs's mount first, as libbpf 1.1 does)
TRACEFS_DIRS = ("/sys/kernel/debug/tracing", "/sys/kernel/tracing")


def traced_syscalls() -> list[str]:
    return [name for names in ENTER_PROGRAMS.values() for name in names]


def attachments() -> Iterator[tuple[str, str]]:
    """(program, syscalls:event) pairs of the per-syscall hook."""
    for program, syscalls in ENTER_PROGRAMS.items():
        for syscall in syscalls:
            yield program, f"sys_enter_{syscall}"
    for syscall in traced_syscalls():
        yield EXIT_PROGRAM, f"sys_exit_{syscall}"


def attach(obj: BpfObject, enter: str | None = None, exit: str | None = None) -> None:
    """Attach a loaded object's programs to every per-syscall event: the probes'
    own (ENTER_PROGRAMS, EXIT_PROGRAM), or one enter and one exit program in
    their place (the benchmark's floor)."""
    for program, event in attachments():
        if program == EXIT_PROGRAM:
            obj.attach_tracepoint(exit or program, "syscalls", event)
        else:
            obj.attach_tracepoint(enter or program, "syscalls", event)


def tracefs_events_dir(dirs: tuple[str, ...] = TRACEFS_DIRS) -> str | None:
    """The tracefs events/syscalls directory holding every traced syscall's
    enter and exit events, or None (tracefs not mounted, or a kernel without
    CONFIG_FTRACE_SYSCALLS)."""
    for base in dirs:
        events = os.path.join(base, "events", "syscalls")
        if all(os.path.isdir(os.path.join(events, event)) for _, event in attachments()):
            return events
    return None


def choose_hook(dirs: tuple[str, ...] = TRACEFS_DIRS) -> Hook:
    forced = os.environ.get(HOOK_ENV, "")
    if forced in ("raw", "tracepoints"):
        return forced  # type: ignore[return-value]
    return "tracepoints" if tracefs_events_dir(dirs) else "raw"


def describe(hook: Hook) -> str:
    if hook == "tracepoints":
        return f"per-syscall tracepoints on {len(traced_syscalls())} I/O syscalls (enter and exit)"
    return "raw sys_enter/sys_exit: every syscall of every process runs the pid test"
