"""How the probes see syscalls: per-syscall tracepoints, or the raw sys_enter/sys_exit.

The per-syscall tracepoints (syscalls:sys_enter_pwrite64, ...) fire only for
the I/O syscalls they are attached to; the BTF raw tracepoints sys_enter and
sys_exit fire for every syscall of every process on the machine, each run
ending at the pid test. Under a CPU-bound MariaDB the raw pair ran ~480k times
a second for ~20k I/O syscalls (docs/benchmarks.md), so the per-syscall
tracepoints are used whenever tracefs has them; the raw pair is the fallback.

libbpf reads each tracepoint's id from tracefs, at the place it picks itself
(libbpf 1.x, use_debugfs(); bpftrace does the same): /sys/kernel/debug/tracing
when that path is accessible (debugfs mounted, tracefs automounted under it),
else /sys/kernel/tracing. A fresh machine may have neither mounted; then mysqlio
(as root) mounts tracefs at /sys/kernel/tracing, the place libbpf then uses, and
says so in one line on stderr. Only when that is impossible (no CAP_SYS_ADMIN, a
kernel without tracefs, a container's read-only /sys) do the probes go on the raw
pair, said on stderr too, with the reason and the fix.

The per-syscall tracepoints' programs read their context through the kernel's own
struct syscall_tp_t (probes/mysqlio.bpf.c, enter_tracepoint): a kernel whose BTF
lacks it gets the raw pair. And should the kernel still refuse to attach one of
them (it checks a program's reads of the context against the event's record), the
probes are loaded again on the raw pair (fall_back), said in one stderr line with
the kernel's reason; only MYSQLIO_SYSCALL_HOOK=tracepoints makes that an error.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .errors import BpfError

if TYPE_CHECKING:
    from .libbpf import BpfObject

Hook = Literal["tracepoints", "raw"]
HOOK_ENV = "MYSQLIO_SYSCALL_HOOK"  # force one ("raw" / "tracepoints"), for tests and benchmarks

# The syscalls the probes account, by the enter program attached to them: a
# tracepoint program may read only the arguments its syscall has (the kernel
# checks the context size at attach), so each program reads 1, 3 or 4.
ENTER_PROGRAMS: dict[str, tuple[str, ...]] = {
    "handle_enter_args1": ("fsync", "fdatasync"),
    "handle_enter_args3": ("read", "write", "readv", "writev"),
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
# msync names an address, not an fd: its enter programs (bpf_probe chooses the
# kernel's variant) name their tracepoint themselves; its exit is the common one
MSYNC = "msync"
# io_submit's iocbs are read at its entry, before the kernel may complete them and
# the caller reuse them (issue 60): its enter programs name their tracepoint too
# and, like msync's, are always attached
IO_SUBMIT = "io_submit"
OWN_ENTERS = (MSYNC, IO_SUBMIT)
EXIT_PROGRAM = "handle_exit"
# io_submit's enter programs, the per-syscall hook's and the raw pair's
IO_SUBMIT_PROGRAM, IO_SUBMIT_RAW_PROGRAM = "handle_enter_io_submit", "handle_sys_enter_io_submit"
# the raw pair's programs (the first, sys_enter, is attached only while requests are timed)
RAW_PROGRAMS = ("handle_sys_enter", "handle_sys_exit", IO_SUBMIT_RAW_PROGRAM)

DEBUGFS_TRACING = "/sys/kernel/debug/tracing"
TRACEFS = "/sys/kernel/tracing"
# libbpf's two places, in its order: debugfs's when accessible, else tracefs's own
TRACEFS_DIRS = (DEBUGFS_TRACING, TRACEFS)
# the device name of a tracefs mysqlio mounted, as `mount` and /proc/self/mountinfo show it
MOUNT_SOURCE = "mysqlio"
MOUNTINFO = "/proc/self/mountinfo"
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8  # as systemd mounts tracefs


def traced_syscalls() -> list[str]:
    return [name for names in ENTER_PROGRAMS.values() for name in names] + list(OWN_ENTERS)


def attachments(entries: bool = True, exits: bool = True) -> Iterator[tuple[str, str]]:
    """(program, syscalls:event) pairs of the per-syscall hook: the enter
    programs' (entries), the exit program's (exits)."""
    if entries:
        for program, syscalls in ENTER_PROGRAMS.items():
            for syscall in syscalls:
                yield program, f"sys_enter_{syscall}"
    if exits:
        for syscall in traced_syscalls():
            yield EXIT_PROGRAM, f"sys_exit_{syscall}"


def attach(
    obj: BpfObject, enter: str | None = None, exit: str | None = None, entries: bool = True, exits: bool = True
) -> None:
    """Attach a loaded object's programs to the per-syscall events: the probes'
    own (ENTER_PROGRAMS, EXIT_PROGRAM), or one enter and one exit program in
    their place (the benchmark's floor). entries / exits: the enter events, the
    exit events (where syscall arguments are read at exit, the enter programs
    only time requests and are attached when requests are timed)."""
    for program, event in attachments(entries, exits):
        name = (exit or program) if program == EXIT_PROGRAM else (enter or program)
        try:
            obj.attach_tracepoint(name, "syscalls", event)
        except BpfError as exc:
            # the errno of the attach libbpf just made (no foreign call since)
            raise TracepointsRefused(str(exc), ctypes.get_errno(), exc.log) from exc


class TracepointsRefused(BpfError):
    """The kernel refused to attach a program to a per-syscall tracepoint; `errno` is
    its reason, `cause` says what that means here."""

    def __init__(self, message: str, err: int, log: str = "") -> None:
        self.errno = err
        self.cause = refusal_cause(err)
        super().__init__(f"{message} ({self.cause})" if self.cause else message, log)


# struct trace_entry heads every tracepoint's record and context; PREEMPT_RT's lazy
# preemption adds this member to it (Debian's -rt kernels, RHEL/CentOS Stream 9 from
# 5.14.0-285), which moved the syscall tracepoints' fields
LAZY_MEMBER = ("trace_entry", "preempt_lazy_count")
# the per-syscall tracepoints' context as the kernel gives it to BPF, which the
# programs read through (probes/mysqlio.bpf.c: struct syscall_tp_t___enter)
CONTEXT_MEMBER = ("syscall_tp_t", "syscall_nr")


def refusal_cause(err: int, btf_path: str = "/sys/kernel/btf/vmlinux") -> str:
    """What a refused attach to a per-syscall tracepoint means, from its errno."""
    if err != errno.EACCES:
        return ""
    cause = "a program reads past the event's record, which the kernel checks at attach"
    if _struct_has_member(*LAZY_MEMBER, btf_path):
        cause += (
            "; this kernel's struct trace_entry has preempt_lazy_count (PREEMPT_RT's lazy preemption, as on "
            "RHEL 9.3+), which moves the context's fields (an object built before the probes read them through "
            "the kernel's own struct syscall_tp_t is refused so: make setup rebuilds it)"
        )
    return cause


def _struct_has_member(struct: str, member: str, btf_path: str) -> bool:
    from .kernel_features import struct_has_member

    try:
        return struct_has_member(struct, member, btf_path)
    except OSError:
        return False


def libbpf_tracefs_dir(dirs: tuple[str, ...] = TRACEFS_DIRS) -> str:
    """The directory libbpf reads tracepoint ids from: dirs[0] (debugfs's tracing
    directory) when it is accessible with this process's effective ids, else
    dirs[-1] (libbpf 1.x: faccessat(DEBUGFS, F_OK, AT_EACCESS), once a process)."""
    return dirs[0] if os.access(dirs[0], os.F_OK, effective_ids=True) else dirs[-1]


def has_events(base: str) -> bool:
    """tracefs at base has every traced syscall's enter and exit event."""
    events = os.path.join(base, "events", "syscalls")
    return all(os.path.isdir(os.path.join(events, event)) for _, event in attachments())


def mount_entry(target: str, mountinfo: str = MOUNTINFO) -> tuple[str, str] | None:
    """(fstype, source) of the filesystem on top at mount point target, or None."""
    found = None
    try:
        with open(mountinfo) as f:
            for line in f:
                fields = line.split()
                dash = fields.index("-")
                if _unescape(fields[4]) == target:
                    found = (fields[dash + 1], _unescape(fields[dash + 2]))
    except (OSError, ValueError, IndexError):
        return None
    return found


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as \ooo (octal)
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def mount_tracefs(target: str) -> None:
    """`mount -t tracefs` at one of libbpf's two places, through mount(2) (no
    shell, no mount binary). Raises OSError with the kernel's errno."""
    if target not in TRACEFS_DIRS:
        raise ValueError(f"{target} is not where libbpf looks for tracefs")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(MOUNT_SOURCE.encode(), target.encode(), b"tracefs", flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), target)


@dataclass(frozen=True)
class Tracefs:
    """tracefs where libbpf will look for it: what was found there, and done."""

    path: str  # the directory libbpf reads (libbpf_tracefs_dir)
    events: bool  # every traced syscall's enter and exit event is there
    mounted: bool  # a tracefs is mounted there now
    mounted_by: str = ""  # "now": this process mounted it; "mysqlio": an earlier mysqlio did; "": someone else
    problem: str = ""  # why the per-syscall tracepoints cannot be used ("" when they can)
    fix: str = ""


def find_tracefs(
    dirs: tuple[str, ...] = TRACEFS_DIRS,
    mount: Callable[[str], None] = mount_tracefs,
    mountinfo: str = MOUNTINFO,
) -> Tracefs:
    """tracefs at the place libbpf will use, mounted there (by `mount`) if nothing is."""
    path = libbpf_tracefs_dir(dirs)
    entry = mount_entry(path, mountinfo)
    mounted = (entry is not None and entry[0] == "tracefs") or os.path.isdir(os.path.join(path, "events"))
    by = "mysqlio" if entry == ("tracefs", MOUNT_SOURCE) else ""
    if has_events(path):
        return Tracefs(path, True, True, by)
    if mounted:
        if not os.access(path, os.R_OK | os.X_OK):
            return Tracefs(path, False, True, by, f"tracefs at {path} is readable by root only", "run as root")
        return Tracefs(
            path, False, True, by, f"tracefs at {path} lacks syscalls:sys_enter_*/sys_exit_* events", _NO_SYSCALL_EVENTS
        )
    try:
        mount(path)
    except OSError as exc:
        return Tracefs(path, False, False, "", *_mount_failure(path, exc))
    if has_events(path):
        return Tracefs(path, True, True, "now")
    return Tracefs(
        path, False, True, "now", f"tracefs mounted at {path} has no syscalls:sys_enter_* events", _NO_SYSCALL_EVENTS
    )


_NO_SYSCALL_EVENTS = "a kernel built with CONFIG_FTRACE_SYSCALLS=y (Debian, Ubuntu and RHEL kernels are)"


def _mount_failure(path: str, exc: OSError) -> tuple[str, str]:
    """(problem, fix) when tracefs could not be mounted at path."""
    command = f"mount -t tracefs nodev {path}"
    failed = f"tracefs is not mounted and mounting it at {path} failed"
    if exc.errno == errno.EPERM:
        return (
            f"{failed}: that needs CAP_SYS_ADMIN (root; in a container, a privileged one)",
            f"run mysqlio as root, or mount it once as root: {command}",
        )
    if exc.errno in (errno.ENODEV, errno.ENOENT):
        return (
            f"{failed} ({exc.strerror}): this kernel has no tracefs",
            "a kernel with tracefs and CONFIG_FTRACE_SYSCALLS (distribution kernels have both)",
        )
    if exc.errno in (errno.EROFS, errno.EACCES):
        return (
            f"{failed} ({exc.strerror}; a container's read-only /sys?)",
            f"on the host, as root: {command}, and give the container {path}",
        )
    return f"{failed} ({exc.strerror})", f"as root: {command}"


@dataclass(frozen=True)
class HookChoice:
    hook: Hook
    forced: bool  # by MYSQLIO_SYSCALL_HOOK
    tracefs: Tracefs | None  # None: forced to the raw pair, tracefs not looked at
    # why the kernel cannot take the per-syscall tracepoints' programs, or refused
    # one at attach ("": tracefs decided)
    refused: str = ""

    def notice(self) -> str | None:
        """The one stderr line: tracefs mounted, or why the raw pair is used."""
        tracefs = self.tracefs
        if tracefs is None:
            return None
        if self.refused:
            if self.forced:
                return f"mysqlio: {HOOK_ENV}=tracepoints, but {self.refused}"
            return (
                f"mysqlio: {self.refused}; using the raw sys_enter/sys_exit hook instead, which every "
                "syscall on the machine pays for"
            )
        if tracefs.problem:
            if self.forced:
                return f"mysqlio: {HOOK_ENV}=tracepoints, but {tracefs.problem} (fix: {tracefs.fix})"
            return (
                f"mysqlio: {tracefs.problem}; using the raw sys_enter/sys_exit hook instead, which every "
                f"syscall on the machine pays for (fix: {tracefs.fix})"
            )
        if tracefs.mounted_by == "now":
            return f"mysqlio: tracefs was not mounted; mounted it at {tracefs.path}"
        return None


_chosen: dict[tuple[object, ...], HookChoice] = {}
_quiet: dict[tuple[object, ...], bool] = {}  # decided for doctor, which says it in its own lines


def choose(
    dirs: tuple[str, ...] = TRACEFS_DIRS,
    mount: Callable[[str], None] = mount_tracefs,
    quiet: bool = False,
    btf_path: str = "/sys/kernel/btf/vmlinux",
) -> HookChoice:
    """The hook, decided once a process (as libbpf decides its tracefs place once):
    the per-syscall tracepoints when tracefs has them, after mounting it where
    libbpf looks if nothing is mounted there, and the kernel's BTF has the context
    their programs read (CONTEXT_MEMBER); else the raw pair. The first decision
    says on stderr what was mounted or why the raw pair is used, unless quiet
    (doctor reports it in its own lines). fall_back() may change it later."""
    forced = os.environ.get(HOOK_ENV, "")
    key = (dirs, mount, forced)
    if key not in _chosen:
        if forced == "raw":
            choice = HookChoice("raw", True, None)
        else:
            tracefs = find_tracefs(dirs, mount)
            hook: Hook = "tracepoints" if tracefs.events or forced == "tracepoints" else "raw"
            refused = ""
            if hook == "tracepoints" and not _struct_has_member(*CONTEXT_MEMBER, btf_path):
                refused = (
                    f"the kernel's BTF has no struct {CONTEXT_MEMBER[0]}, the context the per-syscall "
                    "tracepoints' programs read"
                )
                hook = "tracepoints" if forced == "tracepoints" else "raw"
            choice = HookChoice(hook, forced == "tracepoints", tracefs, refused)
        _chosen[key] = choice
        _quiet[key] = quiet
        line = choice.notice()
        if line and not quiet:
            print(line, file=sys.stderr, flush=True)
    return _chosen[key]


def fall_back(refused: TracepointsRefused) -> bool:
    """The kernel refused a per-syscall tracepoint's program at attach: the hook
    becomes the raw pair for this process (the caller loads the probes again), said
    in one stderr line with the kernel's reason. False when the hook was forced to
    the tracepoints, or was not them (the caller raises the refusal then)."""
    moved = False
    for key, choice in list(_chosen.items()):
        if choice.hook != "tracepoints" or choice.forced:
            continue
        reason = f"the kernel refused the per-syscall tracepoints ({refused})"
        _chosen[key] = HookChoice("raw", False, choice.tracefs, reason)
        moved = True
        line = _chosen[key].notice()
        if line and not _quiet.get(key, False):
            print(line, file=sys.stderr, flush=True)
    return moved


def choose_hook(dirs: tuple[str, ...] = TRACEFS_DIRS, mount: Callable[[str], None] = mount_tracefs) -> Hook:
    return choose(dirs, mount).hook


def describe(hook: Hook) -> str:
    if hook == "tracepoints":
        return f"per-syscall tracepoints on {len(traced_syscalls())} I/O syscalls (enter and exit)"
    return "raw sys_enter/sys_exit: every syscall of every process runs the pid test"
