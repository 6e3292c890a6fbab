"""`mysqlio doctor`: what works on this machine, what does not, and the fix for each.

Every check is a small function returning a `Check`; the pure ones take their
inputs (capabilities, a file's text, an error log) as arguments so the tests can
feed them crafted cases. `run_checks()` gathers them in three sections:

- **ebpf**: the kernel and what the eBPF backend needs. Checks marked `required`
  decide the exit code (0: the eBPF backend works here, 1: it does not). The
  last one loads and attaches the real probes to doctor's own pid and counts a
  test write; the others are informational (a "warn" there never fails). As
  `top` would, doctor mounts tracefs where libbpf looks if nothing is mounted
  there, and its tracefs line says so.
- **tools**: clang / bpftool (only to build probes/) and SystemTap (the fallback).
- **server**: the target mysqld / mariadbd, read from /proc and its files only:
  doctor never connects to the server and never runs its binary.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from . import kernel_features, mapped_files, preflight, syscall_hook
from . import layout as layout_mod
from .errors import BpfError, UserError
from .kernel_features import KernelFeatures
from .units import human_bytes, printable

STATUSES = ("ok", "warn", "fail", "skip")
SECTIONS = {"ebpf": "Kernel and eBPF backend", "tools": "Build tools and SystemTap fallback", "server": "Server"}

# The probes attach to these BTF raw tracepoints (probes/mysqlio.bpf.c, SEC("tp_btf/...")).
SYSCALL_TRACEPOINTS = ("sys_enter", "sys_exit")
IO_URING_TRACEPOINTS = ("io_uring_complete",)
BTF_KIND_TYPEDEF = 8
# bpf_object__next_map / __next_program, the newest symbols mysqlio.libbpf calls, came in 0.6
# (as did libbpf_major_version, so a libbpf without it is too old anyway).
MIN_LIBBPF = (0, 6)
# the probes call bpf_get_current_task_btf and keep each syscall in task-local
# storage from tracing programs: both since Linux 5.11 (CAP_BPF and the ring buffer: 5.8)
JIT_PATH = "/proc/sys/net/core/bpf_jit_enable"
IO_URING_SYSCTL = "/proc/sys/kernel/io_uring_disabled"
TEST_WRITE_BYTES = 4096
LOG_SCAN_BYTES = 64 << 20  # of an error log's end: a run's start is searched there
_RUN_TOOL_TIMEOUT_S = 15.0

# Error-log lines naming InnoDB's I/O implementation, in the words of MariaDB 10.x/11.x and
# MySQL 5.7/8.x. Values are the names mysqlio.sandbox uses: io_uring, aio (libaio), pwrite
# (simulated AIO: threads doing synchronous pread/pwrite). The last match of a run wins.
AIO_LOG_LINES = (
    ("InnoDB: Using io_uring", "io_uring"),  # MariaDB >= 10.11.12 (innodb_linux_aio)
    ("InnoDB: Using liburing", "io_uring"),  # MariaDB 10.6 - 11.x built with liburing
    ("InnoDB: Using Linux native AIO", "aio"),
    ("Linux Native AIO disabled", "pwrite"),  # native AIO requested but unusable
    ("falling back to innodb_use_native_aio=OFF", "pwrite"),  # MariaDB: io_uring unusable
)
AIO_NAMES = {
    "io_uring": "io_uring",
    "aio": "Linux native AIO (libaio)",
    "pwrite": "simulated AIO (threads doing pread/pwrite)",
}
# Start of a run: "Starting MariaDB 10.11.6-MariaDB ... as process 1234",
# "mysqld (mysqld 8.0.36) starting as process 1234".
_RUN_START = re.compile(rb"(?:Starting MariaDB|starting as process)[^\n]*")


@dataclass(frozen=True)
class Check:
    """One line of the doctor's output."""

    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str = ""
    required: bool = False  # a "fail" here means the eBPF backend cannot run
    value: str | None = None  # the finding for scripts (a version, a backend, a setting)
    section: str = "ebpf"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} not in {STATUSES}")


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
    return Check(
        "io_uring allowed",
        "warn",
        "no (kernel.io_uring_disabled = 2): MariaDB falls back to libaio or simulated AIO",
        "sysctl -w kernel.io_uring_disabled=0 if you want InnoDB to use io_uring (mysqlio traces all three)",
        value=value,
    )


# ---- libbpf and BTF type lookups ------------------------------------------------


def _libbpf() -> ctypes.CDLL:
    # The versioned soname, as mysqlio.libbpf loads it. A second CDLL of the same
    # library shares its handle; only the calls doctor needs are declared here.
    return ctypes.CDLL("libbpf.so.1", use_errno=True)


def libbpf_version() -> tuple[int, int] | None:
    """(major, minor) of the loadable libbpf.so.1; None when it is older than 0.6
    (no libbpf_major_version). Raises OSError when it cannot be loaded."""
    lib = _libbpf()
    if not hasattr(lib, "libbpf_major_version"):
        return None
    lib.libbpf_major_version.restype = ctypes.c_uint32
    lib.libbpf_minor_version.restype = ctypes.c_uint32
    return int(lib.libbpf_major_version()), int(lib.libbpf_minor_version())


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
    return Check("libbpf", "ok", f"libbpf.so.1, version {text}", required=True, value=text)


def btf_types_present(names: Iterable[str], path: str = preflight.BTF_PATH) -> dict[str, bool]:
    """Which of `names` the kernel's BTF defines. Raises OSError when libbpf or the
    BTF file cannot be used."""
    from .libbpf import kernel_btf_has

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


def tracepoint_checks(btf_path: str = preflight.BTF_PATH) -> list[Check]:
    names = [f"btf_trace_{e}" for e in (*SYSCALL_TRACEPOINTS, *IO_URING_TRACEPOINTS)]
    found: dict[str, bool] | Exception
    try:
        found = btf_types_present(names, btf_path)
    except OSError as exc:
        found = exc
    return [
        check_tracepoints(
            "syscall",
            SYSCALL_TRACEPOINTS,
            found,
            "the kernel lacks raw syscall tracepoints (CONFIG_FTRACE_SYSCALLS): use --backend stap",
        ),
        check_tracepoints(
            "io_uring",
            IO_URING_TRACEPOINTS,
            found,
            "io_uring requests are counted at io_uring_complete (CONFIG_IO_URING): use a newer kernel, "
            "or --backend stap",
        ),
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


def kernel_feature_checks(features: KernelFeatures | Exception) -> list[Check]:
    """What the kernel's BPF can do, probed, and the fallback where it cannot:
    none of these stops the eBPF backend; each says what a fallback costs."""
    if isinstance(features, Exception):
        return [Check("BPF features", "fail", f"cannot probe the kernel: {features}", "see the lines above")]

    def feature(name: str, have: bool, detail_ok: str, detail_missing: str, fix: str = "") -> Check:
        if have:
            return Check(name, "ok", detail_ok, value="yes")
        return Check(name, "warn", detail_missing, fix, value="fallback")

    checks = [
        feature(
            "task storage",
            features.task_storage,
            "bpf_task_storage_get in tracing programs: in-flight syscalls in task-local storage",
            "no task storage for tracing programs (Linux 5.13): in-flight syscalls in a bounded per-thread LRU "
            "hash instead (a little slower; nothing lost)",
        ),
        feature(
            "task BTF",
            features.task_btf,
            "bpf_get_current_task_btf: the fd table read with plain loads",
            "no bpf_get_current_task_btf (Linux 5.11): the fd table read with CO-RE probe reads instead",
        ),
        feature(
            "BPF atomics",
            features.atomics,
            "compare-and-swap: latency maxima exact under concurrent updates",
            "no BPF compare-and-swap (Linux 5.12): programs built without it are loaded; a latency maximum can "
            "miss a larger value written at the same instant by another CPU",
        ),
        feature(
            "BPF ring buffer",
            features.ringbuf,
            "record streams events through a BPF ring buffer",
            "no BPF ring buffer (Linux 5.8): `mysqlio record` cannot run here; top and exporter can",
            "record with --backend stap, or a kernel with the BPF ring buffer",
        ),
    ]
    if features.uring_complete_req_arg is not None:
        checks.append(Check("io_uring counts", "ok", "io_uring_complete names the request", value="yes"))
    elif features.uring_complete_by_user_data:
        checks.append(
            Check(
                "io_uring counts",
                "warn",
                "io_uring_complete names no request (before Linux 5.15): completions matched to their submission "
                "by ring and user_data; not counted: a request in flight when tracing starts, and one refused "
                "while being prepared (e.g. EBADF), which never reaches the submission tracepoint",
                value="fallback",
            )
        )
    else:
        checks.append(
            Check(
                "io_uring counts",
                "warn",
                "no io_uring tracepoint names the request: io_uring requests are NOT counted on this kernel",
                "a kernel with io_uring tracepoints that carry the request (5.15+), or MariaDB with libaio "
                "(innodb_linux_aio=aio)",
                value="no",
            )
        )
    if features.uring_submit is not None:
        tracepoint, _ = features.uring_submit
        checks.append(
            Check("io_uring latency", "ok", f"{tracepoint}: io_uring requests are timed from submission", value="yes")
        )
    else:
        checks.append(
            Check(
                "io_uring latency",
                "warn",
                "no io_uring submission tracepoint with the request: io_uring requests are counted, not timed",
                "syscall and libaio latency work here",
                value="no",
            )
        )
    return checks


def probe_kernel_features() -> KernelFeatures | Exception:
    try:
        return kernel_features.probe()
    except (OSError, BpfError, ValueError) as exc:
        return exc


# ---- the BPF object and a real attach --------------------------------------------


def check_bpf_object(path: str | None = None) -> Check:
    from .probe import bpf_object_path

    path = path or bpf_object_path()
    if os.path.isfile(path):
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(path)))
        return Check("BPF object", "ok", f"{path} (built {stamp})", required=True, value=path)
    return Check(
        "BPF object",
        "fail",
        f"{path} is missing",
        "build it: make setup (needs clang and bpftool), or set MYSQLIO_BPF_OBJECT to a built mysqlio.bpf.o",
        required=True,
    )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def probe_test_write() -> tuple[int, int, int, float]:
    """Load and attach the real probes to this process, pwrite and fsync a test file.

    Returns (bytes written, bytes counted, fsyncs counted, load time in ms)."""
    from .bpf_types import Op
    from .probe import FileIdentity, IoProbe

    # The test file exists (and is unlinked) before the probes load: its inode stays
    # ours, so no earlier file with the same (dev, inode) can add to its counts.
    # (tempfile's first call writes and deletes a probe file of its own.)
    fd, path = tempfile.mkstemp(prefix="mysqlio-doctor-")
    try:
        os.unlink(path)
        identity = FileIdentity(os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        started = time.monotonic()
        with IoProbe(os.getpid()) as probe:
            load_ms = (time.monotonic() - started) * 1000
            written = os.pwrite(fd, b"\0" * TEST_WRITE_BYTES, 0)
            os.fsync(fd)
            rows = [r for r in probe.drain() if r.file == identity]
    finally:
        os.close(fd)
    counted = sum(r.bytes for r in rows if r.op == Op.WRITE)
    syncs = sum(r.ops for r in rows if r.op == Op.FSYNC)
    return written, counted, syncs, load_ms


def check_probe_attach(
    blockers: Sequence[Check], test: Callable[[], tuple[int, int, int, float]] = probe_test_write
) -> Check:
    """The most convincing check: the probes load, attach and count a known write
    exactly. Not tried when a prerequisite failed."""

    failed = [c.name for c in blockers if c.status == "fail"]
    if failed:
        return Check("probe attach", "skip", f"not tried: {', '.join(failed)} failed", required=True)
    try:
        written, counted, syncs, load_ms = test()
    except Exception as exc:
        if isinstance(exc, (BpfError, OSError)):
            log = getattr(exc, "log", "").strip()
            said = f" (libbpf: {log.splitlines()[-1]})" if log else ""
            message, fix = (
                _first_line(str(exc)) + said,
                "run 'sudo mysqlio top -p <pid>' to see libbpf's full message; --backend stap works without eBPF",
            )
        else:  # most likely a BPF object built from other sources than this mysqlio
            message, fix = (
                f"{type(exc).__name__}: {_first_line(str(exc))}",
                "rebuild the BPF object from this source tree: make setup",
            )
        return Check("probe attach", "fail", message, fix, required=True)
    if counted == written and syncs == 1:
        return Check(
            "probe attach",
            "ok",
            f"loaded and attached in {load_ms:.0f} ms; counted a {written}-byte test write and its fsync exactly",
            required=True,
            value="ok",
        )
    return Check(
        "probe attach",
        "fail",
        f"attached, but a {written}-byte write and 1 fsync were counted as {counted} bytes and {syncs} fsyncs",
        "report this as a bug with the output of 'mysqlio doctor --json'",
        required=True,
    )


# ---- tools ------------------------------------------------------------------------------


def tool_version(argv: Sequence[str], pattern: str) -> str | None:
    """The version a tool prints for `argv` (the first match of `pattern`), or None."""
    try:
        out = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=_RUN_TOOL_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out.stdout + out.stderr)
    return match[1] if match else None


def check_build_tool(name: str, object_built: bool, which: Callable[[str], str | None] = shutil.which) -> Check:
    """clang or bpftool: needed only to build probes/ (and bpftool to dump vmlinux.h)."""
    path = which(name)
    if path:
        pattern = r"clang version (\S+)" if name == "clang" else r"bpftool v?(\S+)"
        version = tool_version([path, "--version"], pattern)
        return Check(
            name, "ok", f"{path}" + (f", version {version}" if version else ""), value=version, section="tools"
        )
    if object_built:
        return Check(
            name, "skip", "not installed; only needed to rebuild the BPF object, which is built", section="tools"
        )
    return Check(
        name,
        "warn",
        "not installed, and the BPF object is not built",
        f"apt-get install {name} (Debian/Ubuntu) or dnf install {name} (RHEL/Fedora), then make setup",
        section="tools",
    )


def check_stap(ebpf_works: bool, problem: Callable[[], str | None] | None = None) -> Check:
    """The SystemTap fallback (--backend stap; auto picks it when eBPF cannot run)."""
    if problem is None:
        from .stap import stap_problem as problem
    path = shutil.which("stap")
    version = tool_version([path, "--version"], r"version (\d[\w.]*)") if path else None
    why_not = problem()
    found = f"stap {version} ({path})" if version else (path or "stap")
    if why_not is None:
        use = "fallback usable" if ebpf_works else "usable: --backend auto will use it"
        return Check(
            "SystemTap",
            "ok",
            f"{found}; {use} (its first run compiles a module: minutes)",
            value=version,
            section="tools",
        )
    if ebpf_works:
        return Check(
            "SystemTap", "skip", f"not usable ({why_not}); not needed, eBPF works", value=version, section="tools"
        )
    detail = f"{found}, but not usable here either" if path else "not installed"
    return Check("SystemTap", "warn", detail, why_not, value=version, section="tools")


# ---- the target server: error log ----------------------------------------------------


def current_run(log: bytes, ns_pid: int | None) -> tuple[bytes, str]:
    """The part of an error log written by the running server, and how it was found.

    The run starts at the last line saying "... as process <pid>" with the server's
    pid as it sees it (its own pid namespace) and ends where another start begins
    (say a second mysqld that failed to start on the same datadir); without such a
    line, the last run in the log is taken."""
    starts = list(_RUN_START.finditer(log))
    if ns_pid is not None:
        own = [i for i, m in enumerate(starts) if re.search(rb"as process %d\b" % ns_pid, m[0])]
        if own:
            i = own[-1]
            end = starts[i + 1].start() if i + 1 < len(starts) else len(log)
            return log[starts[i].start() : end], f"this run (process {ns_pid})"
    if starts:
        return log[starts[-1].start() :], "the last run in the log (no start line names this process)"
    return log, "the whole log (no start line found: rotated since?)"


def aio_from_log(run_log: bytes) -> tuple[str | None, str | None]:
    """(backend, the line that says so) from an error log's run; (None, None) if silent."""
    found: tuple[str | None, str | None] = (None, None)
    for raw in run_log.splitlines():
        line = raw.decode(errors="replace")
        for needle, backend in AIO_LOG_LINES:
            at = line.find(needle)
            if at >= 0:  # the message without the timestamp and level before it
                found = (backend, line[at:].strip())
    return found


def aio_rings(maps_text: str) -> int:
    """libaio contexts (io_setup) of a process: each maps its ring as "/[aio] (deleted)"."""
    return sum(1 for line in maps_text.splitlines() if line.rstrip().endswith("/[aio] (deleted)"))


def io_uring_instances(fd_targets: Iterable[str]) -> int:
    return sum(1 for target in fd_targets if target == "anon_inode:[io_uring]")


@dataclass
class KernelAioEvidence:
    """What the kernel shows of a process's asynchronous I/O (None: unreadable)."""

    io_uring: int | None
    aio: int | None

    def backend(self) -> str | None:
        if self.io_uring is None or self.aio is None:
            return None
        if self.io_uring and not self.aio:
            return "io_uring"
        if self.aio and not self.io_uring:
            return "aio"
        if not self.io_uring and not self.aio:
            return "pwrite"
        return None  # both: cannot tell


def kernel_aio_evidence(pid: int) -> KernelAioEvidence:
    uring: int | None = None
    aio: int | None = None
    try:
        targets = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        uring = io_uring_instances(targets)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps") as f:
            aio = aio_rings(f.read())
    except OSError:
        pass
    return KernelAioEvidence(uring, aio)


def check_aio_backend(
    log_backend: str | None,
    log_line: str | None,
    evidence: KernelAioEvidence,
    native_aio: str | None,
    log_problem: str | None = None,
) -> Check:
    """InnoDB's I/O implementation: the error log first, the kernel's view as a cross-check.

    native_aio: innodb_use_native_aio as set ("ON" / "OFF") or None (default ON)."""
    seen = evidence.backend()
    kernel = (
        f"the process holds {evidence.io_uring} io_uring instance(s) and {evidence.aio} libaio ring(s)"
        if evidence.io_uring is not None and evidence.aio is not None
        else "the process's fd table and memory maps are unreadable"
    )
    note = "; mysqlio traces all three backends"
    if log_backend:
        detail = f"{AIO_NAMES[log_backend]}: error log says {printable(log_line or '')!r}; {kernel}"
        if seen is not None and seen != log_backend:
            return Check(
                "InnoDB AIO",
                "warn",
                detail + f", which looks like {seen}",
                "the log may belong to an older run: check log_error",
                value=log_backend,
                section="server",
            )
        return Check("InnoDB AIO", "ok", detail + note, value=log_backend, section="server")
    why = log_problem or "the error log names no AIO backend for this run"
    if seen in ("io_uring", "aio"):
        return Check("InnoDB AIO", "ok", f"{AIO_NAMES[seen]}: {kernel} ({why})", value=seen, section="server")
    if seen == "pwrite" or native_aio == "OFF":
        reasons = ["innodb_use_native_aio=OFF"] if native_aio == "OFF" else []
        reasons += [kernel] if seen == "pwrite" else []
        detail = f"{AIO_NAMES['pwrite']}: {'; '.join(reasons)} ({why})"
        return Check("InnoDB AIO", "ok", detail + note, value="pwrite", section="server")
    return Check(
        "InnoDB AIO",
        "warn",
        f"unknown: {why}, and {kernel}",
        "run doctor as root, or point log_error at a file so its start-up lines can be read",
        section="server",
    )


def _ns_pid(pid: int) -> int | None:
    """The server's pid in its own pid namespace (what its error log prints)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return pid


def read_tail(path: str, limit: int = LOG_SCAN_BYTES) -> bytes:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
            f.readline()  # resume at a line start
        return f.read()


def error_log_location(pid: int, configured: str | None) -> tuple[str | None, str | None, str]:
    """(where to read it from here, the path to show, or why there is none).

    mysqld points its stderr at the error log (freopen), so /proc/PID/fd/2 opens it
    even in another mount namespace; when stderr is a pipe or the journal, the
    configured log_error file is tried."""
    fd2 = f"/proc/{pid}/fd/2"
    try:
        target = os.readlink(fd2)
        if os.path.isfile(fd2):
            return fd2, target.removesuffix(" (deleted)"), ""
        why = f"stderr is {target}, not a file (systemd journal or a pipe?)"
    except OSError as exc:
        why = f"cannot read {fd2}: {exc.strerror} (run as root)"
    if configured and os.path.isfile(configured):  # a path here, also for a server in another root
        return configured, configured, ""
    return None, None, why


def check_error_log(shown: str | None, readable_from: str | None, why: str) -> Check:
    if readable_from and shown:
        try:
            size = f" ({human_bytes(os.path.getsize(readable_from))})"
        except OSError:  # the server just exited
            size = ""
        return Check("error log", "ok", printable(shown) + size, value=shown, section="server")
    return Check(
        "error log",
        "warn",
        why,
        "set log_error = /path/to/error.log in [mysqld] so its start-up lines can be read "
        "(or look for 'InnoDB: Using' in journalctl -u mariadb / mysql)",
        section="server",
    )


# ---- the target server: settings --------------------------------------------------


def _read_cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="surrogateescape") for a in f.read().split(b"\0")[:-1]]


@dataclass
class ServerOptions:
    """The options mysqld merged from its option files and command line (names
    normalised as in mysqlio.layout; switched-off options read "OFF")."""

    values: dict[str, str]
    on_cmdline: set[str]  # known even when option files cannot be read
    unreadable: list[str]  # option files that exist but could not be read (permissions)


def _unreadable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return False
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True


def server_options(pid: int, version: str | None) -> ServerOptions:
    """Read the server's options as mysqld does.

    This repeats the first half of layout.layout_from with its helpers; once
    ServerLayout carries the merged options, this becomes `read_layout(pid).options`."""
    try:
        cmdline = _read_cmdline(pid)
    except OSError:
        return ServerOptions({}, set(), [f"/proc/{pid}/cmdline"])
    env = layout_mod._read_environ(pid)
    root, _ = layout_mod._root(pid)
    argv = layout_mod._parse_cmdline(cmdline)
    meta: dict[str, str] = {}
    layout_mod._apply(meta, argv)
    flavor = layout_mod._flavor(version, layout_mod._readlink(f"/proc/{pid}/exe") or (cmdline[0] if cmdline else None))
    suffix = meta.get("defaults_group_suffix") or env.get("MARIADB_GROUP_SUFFIX") or env.get("MYSQL_GROUP_SUFFIX", "")
    files = layout_mod._OptionFiles(root, layout_mod._group_filter(version, flavor, suffix))
    tried: list[str] = []
    if "no_defaults" not in meta:
        if meta.get("defaults_file"):
            tried.append(meta["defaults_file"])
        else:
            home = env.get("MARIADB_HOME") or env.get("MYSQL_HOME")
            dirs = [*layout_mod._SYSCONF_DIRS, *([home] if home else [])]
            tried += dict.fromkeys(os.path.join(d, "my.cnf") for d in dirs)
            if meta.get("defaults_extra_file"):
                tried.append(meta["defaults_extra_file"])
    for path in tried:
        files.read(path)
    opts: dict[str, str] = {}
    layout_mod._apply(opts, files.options)
    layout_mod._apply(opts, argv)
    unreadable = [p for p in tried if p not in files.files and _unreadable(files.real(p))]
    return ServerOptions(
        {k: ("OFF" if v == layout_mod._OFF else v) for k, v in opts.items()},
        {layout_mod._norm(name)[0] for name, _ in argv},
        unreadable,
    )


_BOOL_VALUES = {
    "": "ON",
    "1": "ON",
    "ON": "ON",
    "TRUE": "ON",
    "YES": "ON",
    "0": "OFF",
    "OFF": "OFF",
    "FALSE": "OFF",
    "NO": "OFF",
}


def _version_key(version: str | None) -> tuple[str | None, tuple[int, ...]]:
    if not version:
        return None, ()
    numbers = tuple(int(n) for n in re.findall(r"\d+", version.split("-")[0])[:3])
    return ("mariadb" if "MariaDB" in version else "mysql"), numbers


def server_default(option: str, version: str | None) -> str | None:
    """The compiled-in default of a few settings on Linux, where it is known for this version."""
    flavor, v = _version_key(version)
    if flavor is None or not v:
        return None
    if option == "innodb_flush_method":
        if flavor == "mariadb":
            return "O_DIRECT" if v >= (10, 6) else "fsync"
        return "O_DIRECT" if v >= (8, 4) else "fsync"
    if option == "innodb_flush_log_at_trx_commit":
        return "1"
    if option == "innodb_use_native_aio":
        return "ON"
    if option == "sync_binlog":
        return "1" if flavor == "mysql" and v >= (5, 7, 7) else "0"
    if option == "performance_schema":
        return "ON" if flavor == "mysql" and v >= (5, 6, 6) else "OFF"
    return None


SETTING_NOTES = {
    "innodb_flush_method": "how InnoDB opens and syncs data files",
    "innodb_use_native_aio": "OFF means simulated AIO",
    "innodb_flush_log_at_trx_commit": "1: redo synced at each commit",
    "sync_binlog": "N: binlog synced every N commit groups, 0: never",
    "performance_schema": "needed by mysqlio verify",
}
BOOLEAN_SETTINGS = {"innodb_use_native_aio", "performance_schema"}


def check_setting(option: str, options: ServerOptions, version: str | None, context: str = "") -> Check:
    """A server setting as configured, else its default; `context` is added to the detail."""
    raw = options.values.get(option)
    if raw is None and options.unreadable and option not in options.on_cmdline:
        return Check(
            option,
            "warn",
            f"unknown: cannot read {', '.join(printable(p) for p in options.unreadable)}",
            "run doctor as root",
            section="server",
        )
    value = raw.strip() if raw is not None else None
    if value is not None and option in BOOLEAN_SETTINGS:
        value = _BOOL_VALUES.get(value.upper(), value)
    source = "configured"
    if value is None:
        value = server_default(option, version)
        source = "default"
    detail = f"{value} ({source})" if value is not None else "not set: the default of this server version"
    if option == "performance_schema" and value == "OFF":
        return Check(
            option,
            "warn",
            f"{detail}: mysqlio verify cannot cross-check the counts",
            "performance_schema = ON in [mysqld] and restart (only mysqlio verify needs it)",
            value=value,
            section="server",
        )
    note = SETTING_NOTES.get(option)
    detail += f"; {note}" if note else ""
    return Check(option, "ok", detail + (f" ({context})" if context else ""), value=value, section="server")


def check_option_files(read: Sequence[str], unreadable: Sequence[str]) -> Check:
    shown = ", ".join(printable(p) for p in read) or "none"
    if unreadable:
        return Check(
            "option files",
            "warn",
            f"read: {shown}; cannot read: {', '.join(printable(p) for p in unreadable)}",
            "run doctor as root",
            section="server",
        )
    return Check("option files", "ok", shown, section="server")


# ---- the target server: all of it --------------------------------------------------


def find_target(pid: int | None, finder: Callable[[], int] | None = None) -> tuple[int | None, Check]:
    """The server to inspect and the line saying which (or why none)."""
    from . import target

    if pid is None:
        try:
            pid = (finder or target.find_server)()
        except UserError as exc:
            message = str(exc)
            if message.startswith("no running"):
                return None, Check("server", "skip", "no mysqld or mariadbd is running", section="server")
            return None, Check(
                "server", "warn", message, "give the server's pid: mysqlio doctor -p PID", section="server"
            )
        explicit = False
    else:
        explicit = True
        pid = target.tgid_of(pid)  # a thread id names its process, as in top
    if not target.is_alive(pid):
        return None, Check(
            "server", "fail", f"no process with pid {pid}", "check the pid (pgrep -a 'mysqld|mariadbd')",
            required=explicit, section="server",
        )  # fmt: skip
    name = target.process_name(pid)
    exe = layout_mod._readlink(f"/proc/{pid}/exe")
    if name not in target.SERVER_NAMES:
        return None, Check(
            "server",
            "warn",
            f"pid {pid} is {printable(name)!r}, not mysqld / mariadbd: mysqlio can trace it, "
            "but the file kinds and these server checks do not apply",
            section="server",
        )
    return pid, Check(
        "server", "ok", f"{name}, pid {pid}" + (f", {printable(exe)}" if exe else ""), value=str(pid), section="server"
    )


def server_checks(pid: int | None, finder: Callable[[], int] | None = None) -> list[Check]:
    found, head = find_target(pid, finder)
    if found is None:
        return [head]
    lay = layout_mod.read_layout(found)
    checks = [head]
    if lay.version:
        checks.append(Check("version", "ok", lay.version, value=lay.version, section="server"))
    else:
        checks.append(
            Check(
                "version",
                "warn",
                f"unknown: /proc/{found}/exe is unreadable or holds no version string",
                "run doctor as root",
                section="server",
            )
        )
    checks.append(
        Check("datadir", "ok", printable(lay.datadir), value=lay.datadir, section="server")
        if lay.datadir
        else Check(
            "datadir", "warn", f"unknown: /proc/{found}/cwd is unreadable", "run doctor as root", section="server"
        )
    )
    options = server_options(found, lay.version)
    checks.append(check_option_files(lay.option_files, options.unreadable))
    readable_from, shown, why = error_log_location(found, lay.log_error)
    checks.append(check_error_log(shown, readable_from, why))
    log_backend = log_line = log_problem = None
    run = b""
    if readable_from:
        try:
            run, how = current_run(read_tail(readable_from), _ns_pid(found))
            log_backend, log_line = aio_from_log(run)
            if not log_backend:
                log_problem = f"the error log names no AIO backend in {how}"
        except OSError as exc:
            log_problem = f"cannot read the error log: {exc.strerror}"
    else:
        log_problem = "no readable error log"
    native = options.values.get("innodb_use_native_aio")
    native = _BOOL_VALUES.get(native.upper(), native) if native is not None else None
    checks.append(check_aio_backend(log_backend, log_line, kernel_aio_evidence(found), native, log_problem))
    checks.append(Check(**mapped_files.doctor_check(mapped_files.mapped_redo(found, lay), run), section="server"))
    for option in (
        "innodb_flush_method",
        "innodb_use_native_aio",
        "innodb_flush_log_at_trx_commit",
        "sync_binlog",
        "performance_schema",
    ):
        context = (
            "the binary log is off" if option == "sync_binlog" and not lay.log_bin and not options.unreadable else ""
        )
        checks.append(check_setting(option, options, lay.version, context))
    return checks


# ---- all of it, and the verdict --------------------------------------------------------


def system_checks() -> list[Check]:
    privileges = check_privileges()
    btf = check_btf()
    libbpf = check_libbpf()
    if btf.status == "ok" and libbpf.status == "ok":
        tracepoints = tracepoint_checks()
    else:
        why = f"not checked: {'BTF' if btf.status != 'ok' else 'libbpf'} failed"
        tracepoints = [Check(f"{what} tracepoints", "skip", why, required=True) for what in ("syscall", "io_uring")]
    bpf_object = check_bpf_object()
    features = (
        kernel_feature_checks(probe_kernel_features())
        if btf.status == "ok" and libbpf.status == "ok" and privileges.status == "ok"
        else [Check("BPF features", "skip", "not checked: needs root, BTF and libbpf")]
    )
    checks = [
        privileges,
        check_kernel(),
        btf,
        check_jit(),
        libbpf,
        *tracepoints,
        *features,
        *syscall_hook_checks(),
        bpf_object,
    ]
    checks.append(check_probe_attach([privileges, btf, libbpf, *tracepoints, bpf_object]))
    checks.append(check_io_uring_sysctl())
    ebpf = ebpf_ready(checks)
    built = bpf_object.status == "ok"
    checks += [check_build_tool("clang", built), check_build_tool("bpftool", built), check_stap(ebpf)]
    return checks


def run_checks(pid: int | None = None) -> list[Check]:
    return [*system_checks(), *server_checks(pid)]


def ebpf_ready(checks: Iterable[Check]) -> bool:
    return not any(c.required and c.status == "fail" for c in checks)


def exit_code(checks: Sequence[Check]) -> int:
    """0 when every required check passed (the eBPF backend works), else 1."""
    return 0 if ebpf_ready(checks) else 1


def auto_backend(checks: Sequence[Check]) -> str | None:
    """What --backend auto would use, as seen by these checks."""
    if ebpf_ready(checks):
        return "bpf"
    stap = next((c for c in checks if c.name == "SystemTap"), None)
    return "stap" if stap is not None and stap.status == "ok" else None


def doctor_json(checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "ebpf_ready": ebpf_ready(checks),
        "backend": auto_backend(checks),
        "exit_code": exit_code(checks),
        "checks": [asdict(c) for c in checks],
    }


# ---- text --------------------------------------------------------------------------------

_STATUS_STYLE = {
    "ok": ("ok", "green"),
    "warn": ("WARN", "yellow"),
    "fail": ("FAIL", "bold red"),
    "skip": ("skip", "dim"),
}


def verdict(checks: Sequence[Check]) -> str:
    backend = auto_backend(checks)
    if backend == "bpf":
        return "eBPF backend: ready (--backend auto uses eBPF)."
    failed = ", ".join(c.name for c in checks if c.required and c.status == "fail")
    if backend == "stap":
        return f"eBPF backend: not usable ({failed}); --backend auto will use SystemTap."
    return f"eBPF backend: not usable ({failed}); no tracing backend can run here until the fixes above are applied."


def render_checks(checks: Sequence[Check]) -> RenderableType:
    """The checks as a rich renderable: a table per section, fixes under failing lines."""
    parts: list[RenderableType] = []
    name_width = max((len(c.name) for c in checks), default=8)
    for section, title in SECTIONS.items():
        rows = [c for c in checks if c.section == section]
        if not rows:
            continue
        if section == "server":
            head = next((c for c in rows if c.name == "server" and c.value), None)
            title = f"{title} (pid {head.value})" if head else title
        parts.append(Text(title, style="bold"))
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0), expand=False)
        table.add_column("status", width=4, no_wrap=True)
        table.add_column("check", no_wrap=True, min_width=name_width)
        table.add_column("detail", overflow="fold")
        for c in rows:
            label, style = _STATUS_STYLE[c.status]
            table.add_row(Text(label, style=style), Text(c.name), Text(c.detail))
            if c.fix and c.status in ("warn", "fail"):
                table.add_row(Text(""), Text(""), Text("fix: " + c.fix, style="cyan"))
        parts += [table, Text("")]
    parts.append(Text(verdict(checks), style="bold"))
    return Group(*parts)


def format_text(checks: Sequence[Check], width: int = 120) -> str:
    """Plain text (no colour, no trailing blanks) of render_checks at `width` columns."""
    console = Console(width=width, color_system=None, highlight=False, soft_wrap=False)
    with console.capture() as capture:
        console.print(render_checks(checks))
    return "".join(line.rstrip() + "\n" for line in capture.get().splitlines())


def print_text(checks: Sequence[Check], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if out.isatty():
        Console(file=out, highlight=False).print(render_checks(checks))
    else:
        out.write(format_text(checks))


def run_doctor(args: Any) -> int:
    checks = run_checks(args.pid)
    if args.json:
        sys.stdout.write(json.dumps(doctor_json(checks), indent=1) + "\n")
    else:
        print_text(checks)
    return exit_code(checks)
