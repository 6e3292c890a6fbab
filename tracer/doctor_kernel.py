"""Doctor's eBPF prerequisites: privileges, the kernel, BTF, the JIT, io_uring's sysctl,
libbpf, the BTF raw tracepoints the probes attach to (io_uring's only where a server can
use it: doctor_io_uring), tracefs and the syscall hook."""

from __future__ import annotations

import gzip
import os
import platform
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from . import preflight, syscall_hook
from .btf import kernel_btf_has
from .doctor_check import Check
from .doctor_io_uring import IO_URING_SYSCTL, io_uring_unavailable, optional_io_uring
from .errors import BpfError
from .libbpf import libbpf_name, libbpf_version

# The probes attach to these BTF raw tracepoints (probes/mysqlio.bpf.c, SEC("tp_btf/...")).
SYSCALL_TRACEPOINTS = ("sys_enter", "sys_exit")
IO_URING_TRACEPOINTS = ("io_uring_complete",)
# bpf_object__next_map / __next_program, the newest symbols mysqlio.libbpf calls, came in 0.6
# (as did libbpf_major_version, so a libbpf without it is too old anyway).
MIN_LIBBPF = (0, 6)
JIT_PATH = "/proc/sys/net/core/bpf_jit_enable"
SCHED_PREEMPT = "/sys/kernel/debug/sched/preempt"  # PREEMPT_DYNAMIC's choice (debugfs)


# ---- privileges and kernel ---------------------------------------------------


def check_privileges(caps: int | None = None, euid: int | None = None) -> Check:
    caps = preflight.effective_caps() if caps is None else caps
    euid = os.geteuid() if euid is None else euid
    if preflight.has_bpf_privileges(caps):
        if euid == 0:
            who = "root"
        elif caps & (1 << preflight.CAP_SYS_ADMIN):
            who = f"uid {euid} with CAP_SYS_ADMIN"
        else:
            who = f"uid {euid} with CAP_BPF and CAP_PERFMON"
        return Check("privileges", "ok", who, required=True, value="ok")
    return Check(
        "privileges",
        "fail",
        f"uid {euid} without CAP_BPF + CAP_PERFMON (effective capabilities {caps:#x})",
        "run as root (sudo mysqlio ...), or grant CAP_BPF and CAP_PERFMON (kernel >= 5.8) "
        "plus CAP_SYS_PTRACE to read the server's open files",
        required=True,
        value="missing",
    )


def check_kernel(release: str | None = None) -> Check:
    """The release, for the record: what the probes can do is asked of the kernel
    itself (kernel_feature_checks), since vendor kernels carry backports."""
    release = release or platform.release()
    return Check("kernel", "ok", f"Linux {release}", value=release)


def check_btf(path: str = preflight.BTF_PATH) -> Check:
    if os.path.exists(path):
        size = os.path.getsize(path)
        return Check("BTF", "ok", f"{path} ({size / 1e6:.1f} MB)", required=True, value=path)
    return Check(
        "BTF",
        "fail",
        f"{path} is missing: the kernel was built without CONFIG_DEBUG_INFO_BTF",
        "use a kernel with BTF (most distributions since 2020 have it), or --backend stap",
        required=True,
    )


def check_jit(path: str = JIT_PATH) -> Check:
    try:
        with open(path) as f:
            value = f.read().strip()
    except OSError:
        # no sysctl: built with CONFIG_BPF_JIT_ALWAYS_ON, or without BPF JIT support
        return Check("BPF JIT", "ok", f"{path} absent (JIT always on, or not built)", value=None)
    if value == "0":
        return Check(
            "BPF JIT",
            "warn",
            "off: the probes run interpreted, several times slower",
            "sysctl -w net.core.bpf_jit_enable=1",
            value=value,
        )
    return Check("BPF JIT", "ok", "on" + (" (with debug output)" if value == "2" else ""), value=value)


def check_io_uring_sysctl(path: str = IO_URING_SYSCTL) -> Check:
    """Whether programs may create io_uring instances (MariaDB's preferred InnoDB backend)."""
    try:
        with open(path) as f:
            value = f.read().strip()
    except OSError:
        return Check("io_uring allowed", "ok", "yes (no kernel.io_uring_disabled sysctl)", value="0")
    if value == "0":
        return Check("io_uring allowed", "ok", "yes (kernel.io_uring_disabled = 0)", value=value)
    if value == "1":
        return Check(
            "io_uring allowed",
            "ok",
            "only for root and the group kernel.io_uring_group (kernel.io_uring_disabled = 1)",
            value=value,
        )
    # a note, not a problem: a server that cannot create an io_uring does its I/O otherwise, traced
    return Check(
        "io_uring allowed",
        "ok",
        "no (kernel.io_uring_disabled = 2): MariaDB uses libaio or simulated AIO instead (mysqlio traces both);"
        " to let InnoDB use io_uring: sysctl -w kernel.io_uring_disabled=0",
        value=value,
    )


def kernel_configs() -> tuple[str, ...]:
    """Where this kernel's build configuration may be, in the order it is looked for."""
    release = os.uname().release
    return ("/proc/config.gz", f"/boot/config-{release}", f"/lib/modules/{release}/config")


def preemption_model(
    shown_path: str = SCHED_PREEMPT,
    cmdline_path: str = "/proc/cmdline",
    configs: Sequence[str] | None = None,
    version: str | None = None,
) -> str | None:
    """none | voluntary | full | lazy | rt: the scheduler's choice where debugfs shows it
    (PREEMPT_DYNAMIC, e.g. "none voluntary full (lazy)"), else a preempt= boot parameter,
    else rt where the kernel's version says PREEMPT_RT (its model is built in: Debian's
    -rt kernels, whose config is not in the guests of the kernel matrix), else the kernel
    config's default; None when none can be read."""
    for path, pattern in ((shown_path, r"\((\w+)\)"), (cmdline_path, r"(?:^|\s)preempt=(\w+)")):
        try:
            found = re.search(pattern, Path(path).read_text())
        except OSError:
            continue
        if found:
            return found.group(1)
    if re.search(r"\bPREEMPT_RT\b", version if version is not None else os.uname().version):
        return "rt"
    for config in configs or kernel_configs():
        try:
            raw = Path(config).read_bytes()
            text = (gzip.decompress(raw) if config.endswith(".gz") else raw).decode(errors="replace")
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        for option, model in (("_RT", "rt"), ("_LAZY", "lazy"), ("", "full"), ("_VOLUNTARY", "voluntary")):
            if f"CONFIG_PREEMPT{option}=y" in text:
                return model
        return "none"
    return None


def faultable_syscall_tracepoints(btf_path: str = preflight.BTF_PATH) -> bool | None:
    """Whether the syscall tracepoints call their programs preemptible: faultable
    tracepoints (Linux 6.13; struct tracepoint_ext's faultable in the kernel's BTF).
    Before, a tracepoint runs its programs with preemption off, PREEMPT_RT included.
    None when the BTF cannot be read."""
    from .kernel_features import struct_has_member

    try:
        return struct_has_member("tracepoint_ext", "faultable", btf_path)
    except OSError:
        return None


def check_preemption(model: str | None, faultable: bool | None = None) -> Check:
    """Whether the programs on the syscall tracepoints can be preempted: then the kernel
    skips a program for a CPU's other tasks while one task is stopped inside it.
    faultable: faultable_syscall_tracepoints() (None: not known)."""
    name = "preemption"
    if model is None:
        return Check(name, "skip", "not checked: neither debugfs's sched/preempt nor the kernel config is readable")
    if model in ("none", "voluntary"):
        return Check(name, "ok", f"{model}: the probes run to their end once started", value=model)
    if faultable is False:
        return Check(
            name,
            "ok",
            f"{model}, but the syscall tracepoints run their programs with preemption off here (they are not"
            " faultable, as before Linux 6.13): the probes run to their end once started",
            value=model,
        )
    seen = "seen on Debian sid's 7.2" if model == "lazy" else "measured only with lazy"
    return Check(
        name,
        "warn",
        f"{model}: the probes on the syscall tracepoints can be preempted ({seen}); while a task is"
        " stopped inside one, the kernel skips it for that CPU's other tasks. Under CPU contention"
        " some of the server's requests are missed, and every skipped run, of any process, is counted"
        " as a lost event (an upper bound)",
        "where the kernel offers it (PREEMPT_DYNAMIC), boot with preempt=voluntary (sid's 7.2 offers only"
        " full and lazy); the figures are in docs/compatibility.md",
        value=model,
    )


# ---- libbpf and BTF type lookups ------------------------------------------------


def check_libbpf(version_of: Callable[[], tuple[int, int] | None] = libbpf_version) -> Check:
    """`version_of` gives (major, minor), None for a libbpf older than 0.6, or raises OSError."""
    version: tuple[int, int] | OSError | None
    try:
        version = version_of()
    except OSError as exc:
        version = exc
    if isinstance(version, OSError):
        return Check(
            "libbpf",
            "fail",
            f"libbpf.so.1 cannot be loaded ({version})",
            "install libbpf 1.x: apt-get install libbpf1 (Debian/Ubuntu), dnf install libbpf (RHEL/Fedora)",
            required=True,
        )
    if version is None or version < MIN_LIBBPF:
        found = "older than 0.6" if version is None else f"{version[0]}.{version[1]}"
        return Check(
            "libbpf",
            "fail",
            f"libbpf.so.1 is {found}; mysqlio needs >= {MIN_LIBBPF[0]}.{MIN_LIBBPF[1]}",
            "install a newer libbpf (Debian 12 / Ubuntu 22.04 and later have 1.x)",
            required=True,
            value=None if version is None else f"{version[0]}.{version[1]}",
        )
    text = f"{version[0]}.{version[1]}"
    where = " (carried by this executable)" if libbpf_name() != "libbpf.so.1" else ""
    return Check("libbpf", "ok", f"libbpf.so.1{where}, version {text}", required=True, value=text)


def btf_types_present(names: Iterable[str], path: str = preflight.BTF_PATH) -> dict[str, bool]:
    """Which of `names` the kernel's BTF defines. Raises OSError when libbpf or the
    BTF file cannot be used."""

    try:
        return kernel_btf_has(names, path)
    except BpfError as exc:  # libbpf.so.1 itself could not be loaded
        raise OSError(str(exc)) from None


def check_tracepoints(what: str, events: Sequence[str], found: dict[str, bool] | Exception, missing_fix: str) -> Check:
    """`found` maps btf_trace_<event> to presence (or says why the lookup failed)."""
    name = f"{what} tracepoints"
    if isinstance(found, Exception):
        return Check(name, "fail", f"cannot read the kernel's BTF: {found}", "see the BTF line", required=True)
    missing = [e for e in events if not found.get(f"btf_trace_{e}")]
    if missing:
        return Check(
            name,
            "fail",
            f"missing from the kernel's BTF: {', '.join(missing)} (present: "
            f"{', '.join(e for e in events if e not in missing) or 'none'})",
            missing_fix,
            required=True,
        )
    return Check(name, "ok", ", ".join(events) + " (BTF raw tracepoints; no kprobes needed)", required=True)


def tracepoint_checks(btf_path: str = preflight.BTF_PATH, io_uring_sysctl: str = IO_URING_SYSCTL) -> list[Check]:
    names = [f"btf_trace_{e}" for e in (*SYSCALL_TRACEPOINTS, *IO_URING_TRACEPOINTS)]
    found: dict[str, bool] | Exception
    try:
        found = btf_types_present(names, btf_path)
    except OSError as exc:
        found = exc
    io_uring = check_tracepoints(
        "io_uring",
        IO_URING_TRACEPOINTS,
        found,
        "io_uring requests are counted at io_uring_complete (CONFIG_IO_URING): use a newer kernel, or --backend stap",
    )
    if io_uring.status == "fail" and not isinstance(found, Exception):
        io_uring = optional_io_uring(io_uring, io_uring_unavailable(btf_path, io_uring_sysctl))
    return [
        check_tracepoints(
            "syscall",
            SYSCALL_TRACEPOINTS,
            found,
            "the kernel lacks raw syscall tracepoints (CONFIG_FTRACE_SYSCALLS): use --backend stap",
        ),
        io_uring,
    ]


def syscall_hook_checks(
    dirs: tuple[str, ...] = syscall_hook.TRACEFS_DIRS, mount: Callable[[str], None] = syscall_hook.mount_tracefs
) -> list[Check]:
    """Where tracefs is (libbpf's place; mounted there now if nothing was, as
    mysqlio does before it traces) and which syscall hook the probes will use:
    the per-syscall tracepoints cost nothing to the syscalls mysqlio does not
    account, of any process; the raw pair runs for all of them."""
    choice = syscall_hook.choose(dirs, mount, quiet=True)
    return [check_tracefs(choice), check_syscall_hook(choice)]


def check_tracefs(choice: syscall_hook.HookChoice) -> Check:
    name = "tracefs"
    tracefs = choice.tracefs
    if tracefs is None:
        return Check(name, "skip", f"not looked at: {syscall_hook.HOOK_ENV}=raw")
    if tracefs.events:
        debugfs = tracefs.path == syscall_hook.DEBUGFS_TRACING
        where = tracefs.path + (" (under debugfs, where libbpf looks first)" if debugfs else "")
        how = {
            "now": "was not mounted: mounted by mysqlio just now",
            "mysqlio": "mounted by mysqlio (an earlier run)",
        }.get(tracefs.mounted_by, "found mounted")
        return Check(name, "ok", f"{where}, {how}", value=tracefs.path)
    if _root_only(tracefs):
        return Check(name, "skip", f"not checked: tracefs at {tracefs.path} is readable by root only")
    return Check(name, "warn", tracefs.problem, tracefs.fix, value=tracefs.path if tracefs.mounted else None)


def _root_only(tracefs: syscall_hook.Tracefs) -> bool:
    return tracefs.mounted and not tracefs.events and not os.access(tracefs.path, os.R_OK | os.X_OK)


def check_syscall_hook(choice: syscall_hook.HookChoice) -> Check:
    name = "syscall hook"
    tracefs = choice.tracefs
    forced = f" (forced by {syscall_hook.HOOK_ENV})" if choice.forced else ""
    if tracefs is not None and _root_only(tracefs):
        return Check(name, "skip", "not checked: tracefs is readable by root only")
    if choice.refused:
        # the kernel's BTF lacks their context, or the kernel refused one at attach
        # (doctor's probe attach, made before this check is read)
        return Check(
            name,
            "warn",
            f"{syscall_hook.describe(choice.hook)}{forced}: {choice.refused}",
            f"unset {syscall_hook.HOOK_ENV}: the raw hook counts the same"
            if choice.forced
            else "nothing to do: the raw hook counts the same, at a cost to every syscall on the machine",
            value=choice.hook,
        )
    if choice.hook == "tracepoints":
        if tracefs is not None and not tracefs.events:
            return Check(
                name,
                "warn",
                f"{syscall_hook.describe(choice.hook)}{forced}, but tracefs lacks them: attaching will fail",
                "see the tracefs line",
                value=choice.hook,
            )
        return Check(name, "ok", syscall_hook.describe(choice.hook) + forced, value=choice.hook)
    return Check(
        name,
        "warn",
        syscall_hook.describe(choice.hook) + (forced or " (no per-syscall tracepoints: see the tracefs line)"),
        f"unset {syscall_hook.HOOK_ENV}" if choice.forced else "see the tracefs line",
        value=choice.hook,
    )
