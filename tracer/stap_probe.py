"""The SystemTap backend: the eBPF probes' counts and events from stap/*.stp, for
kernels where eBPF is missing or too old (RHEL / CentOS 7) but SystemTap works.

`StapProbe` has the interface `top` and `record` use of `probe.IoProbe`:
`drain()` (rows of one interval), `drops()`, `kernel_name()`, `thread_name()`,
`forget_name()`, and for record `events_reader()` (the `RingBufferReader`
interface: `read()` -> EVENT_DTYPE array, `close()`). Its records come from a
`StapProcess` (staprun running a script's module on the live system) or, for
tests and offline analysis of a capture, from the lines of one (`replay_probe`).

The module is compiled once per kernel and script (`stap -p4`; stap caches it)
and loaded for one pid by `staprun -R -x PID`: target() is a module parameter,
so no pid is compiled in. Each interval is requested by writing to the
module's procfs file `flush`; the script answers with the interval's rows and
a mark (see stap_protocol).
File names come from the script at each open (walked from the dentry to the
root of its filesystem; the mount point is found in /proc/PID/mountinfo) and,
for files opened before tracing, from /proc/PID/fd through `FileResolver`.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import numpy as np

from . import preflight
from . import stap_protocol as proto
from .bpf_types import Api, Drops, Op
from .errors import UserError
from .events import EVENT_DTYPE
from .probe import FileIdentity, IoProbe, KernelName, LatencyRow, OpCount

BACKENDS = ("auto", "bpf", "stap")
MODES = ("top", "record")
SCRIPTS = {"top": "mysqlio-top.stp", "record": "mysqlio-record.stp"}
# Compiled into the modules. Statements per probe hit: a flush prints up to 8192 rows,
# io_submit walks 64 iocbs. Lock waits: a handler that does not get a global's lock within
# MAXTRYLOCK tries 10 us apart is skipped (stap's default, 100 tries = 1 ms, skipped both
# requests arriving during a long flush and flushes among busy writers: see
# docs/systemtap.md); 5000 tries = 50 ms. Skipped probes are counted in every mark, not fatal.
STAP_DEFINES = ("MAXACTION=100000", "MAXSKIPPED=1000000", "MAXTRYLOCK=5000")
RECORD_BUFFER_MB = 64  # staprun -b: kernel-to-user buffer of the record script
COMPILE_TIMEOUT_S = 900.0  # the first compile on a kernel: a minute or two on a small machine
LOAD_TIMEOUT_S = 120.0  # staprun: load the module, register the probes
ANSWER_TIMEOUT_S = 30.0  # from a flush request to its mark
ANSWER_RETRY_S = 3.0  # no mark yet: ask again (a flush stap skipped prints nothing)
MOUNTS_REFRESH_S = 1.0
DROP_KEYS = proto.DROP_FIELDS  # the marks' counters; stap's own two also come from its exit message
_PR_SET_PDEATHSIG = 1
_LOG_LINES = 40


class StapError(UserError):
    """stap / staprun could not start, or stopped; `log` holds the end of what they said."""

    exit_code = 3

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


# ---- where things are ----


def script_dir() -> Path:
    """stap/ of the source tree (or of the package), or MYSQLIO_STAP_DIR."""
    override = os.environ.get("MYSQLIO_STAP_DIR")
    if override:
        return Path(override)
    packaged = Path(__file__).resolve().parent / "stap"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "stap"


def script_path(mode: str) -> Path:
    return script_dir() / SCRIPTS[mode]


def tapset_dir() -> Path:
    return script_dir() / "tapset"


def stap_runtime_dir() -> Path:
    """The runtime stap compiles into every module (its C library)."""
    override = os.environ.get("SYSTEMTAP_RUNTIME")
    if override:
        return Path(override)
    stap = shutil.which("stap") or "/usr/bin/stap"
    return Path(stap).resolve().parent.parent / "share" / "systemtap" / "runtime"


def _header_declares(release: str, header: str, symbol: str) -> bool:
    for tree in ("build", "source"):
        try:
            text = Path(f"/lib/modules/{release}/{tree}/include/{header}").read_text(errors="replace")
        except OSError:
            continue
        if re.search(rf"\b{re.escape(symbol)}\s*\(", text):
            return True
    return False


def _cache_base() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mysqlio"


def compat_runtime(release: str, cache_dir: Path | None = None) -> Path | None:
    """A copy of stap's runtime that builds against this kernel, or None when the
    installed one does.

    Linux 6.11 renamed task_work_cancel() to task_work_cancel_func() and gave
    task_work_cancel() a new signature (commit 68cbd415dd4b); the change went to
    the stable kernels too (Debian 12's 6.1.1xx). SystemTap releases from before
    the fix (Debian 12 has 4.8) then fail to compile any module. The copy makes
    the change upstream SystemTap made: call task_work_cancel_func().
    """
    runtime = stap_runtime_dir()
    try:
        original = (runtime / "stp_task_work.c").read_text()
    except OSError:
        return None
    if "task_work_cancel_func" in original or not _header_declares(
        release, "linux/task_work.h", "task_work_cancel_func"
    ):
        return None
    patched = re.sub(r"\btask_work_cancel\b", "task_work_cancel_func", original)
    digest = hashlib.sha256(f"{runtime}\0{original}".encode()).hexdigest()[:16]
    base = cache_dir or _cache_base()
    target = base / f"stap-runtime-{digest}"
    if (target / "stp_task_work.c").is_file():
        return target
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="stap-runtime-", dir=base))
    shutil.copytree(runtime, staging, dirs_exist_ok=True, symlinks=True)
    (staging / "stp_task_work.c").write_text(patched)
    try:
        staging.rename(target)
    except OSError:  # another mysqlio made it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def compile_command(
    mode: str,
    *,
    release: str | None = None,
    runtime: Path | None = None,
    module: str | None = None,
    last_pass: int = 4,
    kbuild: Iterable[str] = (),
) -> list[str]:
    """stap translating and compiling a script (-p4): it prints the module's path (in its
    cache: once compiled, later runs return at once). The live backend and the compile
    test use this one."""
    cmd = [shutil.which("stap") or "stap", "-I", str(tapset_dir()), f"-p{last_pass}"]
    if runtime is not None:
        cmd += ["-R", str(runtime)]
    if release is not None:
        cmd += ["-r", release]
    if module is not None:
        cmd += ["-m", module]
    for setting in kbuild:  # NAME=VALUE for kbuild's make, e.g. CC=gcc-12
        cmd += ["-B", setting]
    cmd += [f"-D{d}" for d in STAP_DEFINES]
    cmd.append(str(script_path(mode)))
    return cmd


def staprun_command(module: Path, pid: int, mode: str) -> list[str]:
    """staprun loading a compiled module for one process: -x sets target(), -R gives the
    module a unique name (two mysqlio can trace at once)."""
    cmd = [shutil.which("staprun") or "staprun", "-R", "-x", str(pid)]
    if mode == "record":
        cmd += ["-b", str(RECORD_BUFFER_MB)]
    cmd.append(str(module))
    return cmd


def _telling(log: Iterable[str]) -> str:
    """The line of stap's messages that says what went wrong: the first error, else the last line."""
    lines = [ln.strip() for ln in log if ln.strip()]
    errors = [ln for ln in lines if re.match(r"(ERROR:|semantic error:|parse error:|\S+: error: )", ln)]
    return (errors[:1] or lines[-1:] or ["no message"])[0]


def compile_module(mode: str, stop: threading.Event | None = None, quiet: bool = False) -> Path:
    """The compiled module of a script for the running kernel (compiled now if stap has not cached it)."""
    release = platform.release()

    def say_compiling() -> None:  # only when it is not a cache hit
        if not quiet:
            print(
                f"mysqlio: compiling the SystemTap module for kernel {release} "
                "(once per kernel; the first compile takes a minute or two)",
                file=sys.stderr,
            )

    return _run_compile(compile_command(mode, runtime=compat_runtime(release)), mode, stop, say_compiling)


def _run_compile(
    cmd: list[str], mode: str, stop: threading.Event | None, say_compiling: Callable[[], None] | None
) -> Path:
    """Run stap -p4: the path of the module it made (or had cached), kept out of its temporary
    working directory."""
    announce = threading.Timer(2.0, say_compiling) if say_compiling is not None else None
    with tempfile.TemporaryDirectory(prefix="mysqlio-stap-") as work:
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            raise StapError(f"cannot run stap: {exc.strerror or exc}") from None
        if announce is not None:
            announce.start()
        try:
            deadline = time.monotonic() + COMPILE_TIMEOUT_S
            while True:
                try:
                    out, err = proc.communicate(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if (stop is not None and stop.is_set()) or time.monotonic() >= deadline:
                        proc.terminate()
                        proc.communicate()
                        if stop is not None and stop.is_set():
                            raise UserError("interrupted while SystemTap was compiling") from None
                        raise StapError(f"stap did not compile within {COMPILE_TIMEOUT_S:.0f} s") from None
        finally:
            if announce is not None:
                announce.cancel()
        log = err.decode(errors="replace").splitlines()
        if proc.returncode != 0:
            raise StapError(
                f"stap could not compile {script_path(mode).name}: {_telling(log)}", "\n".join(log[-_LOG_LINES:])
            )
        printed = [ln.strip() for ln in out.decode(errors="replace").splitlines() if ln.strip().endswith(".ko")]
        module = Path(work, printed[-1]) if printed else None  # absolute: in stap's cache
        if module is None or not module.is_file():
            raise StapError(f"stap compiled {script_path(mode).name} but printed no module path", "\n".join(log))
        if module.is_relative_to(work):  # stap's cache is off: keep the module out of the temporary directory
            kept = _cache_base() / "modules" / module.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(module, kept)
            module = kept
        return module


# ---- modules built on one machine, run on another (stap-build, --stap-module) ----

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
MODULE_NAMES = {"top": "mysqlio_top", "record": "mysqlio_record"}  # stap -m: also the .ko's name


def headers_compiler(release: str) -> str | None:
    """The compiler a Debian kernel's headers name for modules (gcc-10 for Debian 11's), from
    their .kernelvariables; None when they do not say (other distributions: kbuild's gcc)."""
    try:
        text = Path(f"/lib/modules/{release}/build/.kernelvariables").read_text(errors="replace")
    except OSError:
        return None
    match = re.search(r"^CC\s*=.*?\b((?:gcc|clang)-\d+)\s*$", text, re.M)
    return match.group(1) if match else None


def scripts_digest() -> str:
    """What a compiled module depends on besides the kernel: the scripts, the tapset, the
    defines compiled in and stap's version (sha256, hex)."""
    h = hashlib.sha256()
    base = script_dir()
    for path in sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".stp", ".stpm")):
        h.update(f"{path.relative_to(base)}\0".encode())
        h.update(path.read_bytes())
        h.update(b"\0")
    h.update("\0".join(STAP_DEFINES).encode())
    h.update(f"\0protocol {proto.PROTOCOL_VERSION}\0{stap_version()}".encode())
    return h.hexdigest()


def stap_version() -> str:
    """`stap --version`'s first line ("" without stap)."""
    stap = shutil.which("stap")
    if stap is None:
        return ""
    try:
        proc = subprocess.run([stap, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return ((proc.stdout or proc.stderr).splitlines() or [""])[0].strip()


def module_info(path: Path) -> dict[str, str]:
    """The .modinfo section of a kernel module (vermagic=..., name=...); ValueError when the
    file is not a 64-bit little-endian ELF object with one."""
    data = path.read_bytes()
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    try:
        shoff = int.from_bytes(data[0x28:0x30], "little")
        shentsize = int.from_bytes(data[0x3A:0x3C], "little")
        shnum = int.from_bytes(data[0x3C:0x3E], "little")
        shstrndx = int.from_bytes(data[0x3E:0x40], "little")
        if shentsize < 64 or not 0 < shnum < 65536 or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
            raise ValueError("bad section table")

        def section(i: int) -> tuple[int, int, int]:  # (name offset, file offset, size)
            base = shoff + i * shentsize
            name, off, size = (
                int.from_bytes(data[base : base + 4], "little"),
                int.from_bytes(data[base + 24 : base + 32], "little"),
                int.from_bytes(data[base + 32 : base + 40], "little"),
            )
            if off + size > len(data):
                raise ValueError("section beyond the end of the file")
            return name, off, size

        _, str_off, str_size = section(shstrndx)
        names = data[str_off : str_off + str_size]
        for i in range(shnum):
            name, off, size = section(i)
            end = names.find(b"\0", name)
            if names[name:end] == b".modinfo":
                entries = data[off : off + size].split(b"\0")
                return dict(e.decode(errors="replace").partition("=")[::2] for e in entries if b"=" in e)
    except (IndexError, ValueError) as exc:
        raise ValueError(f"corrupt ELF file ({exc})") from None
    raise ValueError("no .modinfo section: not a kernel module")


def module_release(path: Path) -> str:
    """The kernel release a module was built for (the first word of its vermagic)."""
    vermagic = module_info(path).get("vermagic", "").split()
    if not vermagic:
        raise ValueError("no vermagic in its .modinfo: not a kernel module")
    return vermagic[0]


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_modules(
    release: str,
    out_dir: Path,
    modes: Iterable[str] = MODES,
    stop: threading.Event | None = None,
    progress: Callable[[str], None] | None = None,
    cc: str | None = None,
) -> dict:
    """`mysqlio stap-build`: compile the scripts for a kernel release (its headers in
    /lib/modules/RELEASE/build on this machine) into out_dir, as MODULE.ko files and a
    manifest.json naming the release, each module's script and checksum, and mysqlio's version.
    The modules run anywhere that kernel runs, with only staprun (--stap-module)."""
    from . import __version__

    if platform.machine() != "x86_64":
        raise UserError(f"the SystemTap scripts support x86_64 only, this machine is {platform.machine()}")
    if shutil.which("stap") is None:
        raise UserError("stap-build needs stap (Debian/Ubuntu: apt-get install systemtap; RHEL: yum install systemtap)")
    if not os.path.isdir(f"/lib/modules/{release}/build"):
        raise UserError(
            f"no headers for kernel {release} here (/lib/modules/{release}/build is missing): install "
            f"linux-headers-{release} (Debian/Ubuntu) or kernel-devel-{release} (RHEL/CentOS) on this build host"
        )
    wanted = headers_compiler(release)
    if cc is None and wanted is not None and shutil.which(wanted) is None:
        raise UserError(
            f"the headers of kernel {release} build modules with {wanted}, which is not installed here: "
            f"install it, or name another compiler with --cc (e.g. --cc gcc)"
        )
    if cc is not None and shutil.which(cc) is None:
        raise UserError(f"--cc {cc}: no such compiler here")
    out_dir.mkdir(parents=True, exist_ok=True)
    runtime = compat_runtime(release)
    manifest: dict = {
        "format": MANIFEST_FORMAT,
        "kernel_release": release,
        "mysqlio_version": __version__,
        "protocol_version": proto.PROTOCOL_VERSION,
        "stap_version": stap_version(),
        "scripts_sha256": scripts_digest(),
        "built_on": platform.node(),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cc": cc or wanted or "gcc",
        "modules": {},
    }
    for mode in modes:
        start = time.monotonic()
        if progress is not None:
            progress(f"compiling {SCRIPTS[mode]} for kernel {release}")
        kbuild = [f"CC={cc}"] if cc else []
        cmd = compile_command(mode, release=release, runtime=runtime, module=MODULE_NAMES[mode], kbuild=kbuild)
        built = _run_compile(cmd, mode, stop, None)
        try:
            got = module_release(built)
        except ValueError as exc:
            raise StapError(f"stap made {built}, which is unusable: {exc}") from None
        if got != release:
            raise StapError(f"stap made a module for kernel {got}, not {release}")
        name = MODULE_NAMES[mode] + ".ko"
        staging = out_dir / f".{name}.tmp"
        shutil.copyfile(built, staging)
        staging.replace(out_dir / name)
        manifest["modules"][mode] = {
            "file": name,
            "script": SCRIPTS[mode],
            "sha256": _sha256_file(out_dir / name),
            "size": (out_dir / name).stat().st_size,
            "compile_s": round(time.monotonic() - start, 1),
        }
    staging = out_dir / f".{MANIFEST}.tmp"
    staging.write_text(json.dumps(manifest, indent=1) + "\n")
    staging.replace(out_dir / MANIFEST)
    return manifest


@dataclass(frozen=True)
class Prebuilt:
    """A module of `mysqlio stap-build`, checked for this machine."""

    module: Path
    mode: str
    release: str
    manifest: dict | None


def _read_manifest(path: Path, shown: str) -> dict:
    try:
        manifest = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"--stap-module {shown}: cannot read {path.name}: {exc.strerror or exc}") from None
    except ValueError:
        raise UserError(f"--stap-module {shown}: {path.name} is corrupt (not JSON)") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("modules"), dict):
        raise UserError(f"--stap-module {shown}: {path.name} is not a manifest of mysqlio stap-build")
    if manifest.get("format") != MANIFEST_FORMAT:
        raise UserError(
            f"--stap-module {shown}: manifest format {manifest.get('format')!r}, this mysqlio reads "
            f"{MANIFEST_FORMAT}: build the module with this mysqlio's stap-build"
        )
    return manifest


def prebuilt_module(path: str, mode: str, release: str | None = None) -> Prebuilt:
    """--stap-module DIR_OR_KO for top or record, checked: the file is there and whole, it is
    a kernel module of this mysqlio's protocol, built for the running kernel. UserError (one
    line) otherwise."""
    release = release or platform.release()
    given = Path(path)
    manifest: dict | None = None
    if given.is_dir():
        manifest = _read_manifest(given / MANIFEST, path)
        entry = manifest["modules"].get(mode)
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            built = ", ".join(sorted(manifest["modules"])) or "nothing"
            raise UserError(f"--stap-module {path}: no module for {mode} in it (built: {built}); run stap-build again")
        module = given / Path(entry["file"]).name
    elif given.exists():
        module = given
        beside = given.parent / MANIFEST
        if beside.is_file():
            candidate = _read_manifest(beside, path)
            for m, entry in candidate["modules"].items():
                if isinstance(entry, dict) and entry.get("file") == given.name:
                    if m != mode:
                        raise UserError(
                            f"--stap-module {path}: this is the {m} module, {mode} needs {MODULE_NAMES[mode]}.ko"
                        )
                    manifest = candidate
    else:
        raise UserError(f"--stap-module {path}: no such file or directory")
    if not module.is_file():
        raise UserError(f"--stap-module {path}: {module.name} is missing")
    try:
        built_for = module_release(module)
    except OSError as exc:
        raise UserError(f"--stap-module {path}: cannot read {module.name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserError(f"--stap-module {path}: {module.name} is not a usable kernel module: {exc}") from None
    if manifest is not None:
        entry = manifest["modules"][mode]
        if entry.get("sha256") != _sha256_file(module):
            raise UserError(
                f"--stap-module {path}: {module.name} is corrupt (its checksum differs from the manifest's); copy it again"
            )
        if manifest.get("protocol_version") != proto.PROTOCOL_VERSION:
            raise UserError(
                f"--stap-module {path}: built by mysqlio {manifest.get('mysqlio_version')} (protocol "
                f"{manifest.get('protocol_version')}), this mysqlio speaks protocol {proto.PROTOCOL_VERSION}: "
                "build it again with this mysqlio's stap-build"
            )
    if built_for != release:
        raise UserError(
            f"--stap-module {path}: built for kernel {built_for}, this machine runs {release}: "
            f"build it with 'mysqlio stap-build --kernel {release} -o DIR' on a host with that kernel's headers"
        )
    return Prebuilt(module, mode, built_for, manifest)


# modules given with --stap-module, by mode (set by select_backend, used by open_probe)
_prebuilt: dict[str, Prebuilt] = {}


# ---- can it run here ----


def stap_problem(release: str | None = None, prebuilt: bool = False) -> str | None:
    """Why the SystemTap backend cannot run on this machine (one line), or None. prebuilt: a
    module built elsewhere (--stap-module) runs with staprun alone: no stap, no headers."""
    release = release or platform.release()
    machine = platform.machine()
    if machine != "x86_64":
        return f"the SystemTap scripts support x86_64 only, this machine is {machine}"
    if not prebuilt and shutil.which("stap") is None:
        return (
            "the SystemTap backend needs stap, which is not installed "
            f"(RHEL/CentOS: yum install systemtap kernel-devel-{release}; "
            f"Debian/Ubuntu: apt-get install systemtap linux-headers-{release}; "
            "or run a module built elsewhere with 'mysqlio stap-build': --stap-module)"
        )
    if shutil.which("staprun") is None:
        return "the SystemTap backend needs staprun (package systemtap-runtime), which is not installed"
    if not os.path.exists("/proc/modules"):
        return "this kernel cannot load modules (no /proc/modules); SystemTap needs loadable kernel modules"
    try:
        disabled = Path("/proc/sys/kernel/modules_disabled").read_text().strip() == "1"
    except OSError:
        disabled = False
    if disabled:
        return "this kernel refuses new modules (kernel.modules_disabled=1); SystemTap needs to load one"
    if not prebuilt and not os.path.isdir(f"/lib/modules/{release}/build"):
        return (
            f"SystemTap needs the headers of the running kernel {release} (/lib/modules/{release}/build "
            f"is missing): install kernel-devel-{release} (RHEL/CentOS) or linux-headers-{release} (Debian/Ubuntu), "
            "or build the module on another host with 'mysqlio stap-build' and pass it with --stap-module"
        )
    if os.geteuid() != 0:
        return "the SystemTap backend needs root (it loads a kernel module): run with sudo"
    return None


def check_stap_environment() -> None:
    problem = stap_problem()
    if problem:
        raise UserError(problem)


def bpf_problem() -> str | None:
    try:
        preflight.check_bpf_environment()
    except UserError as exc:
        return str(exc)
    return None


def select_backend(requested: str, prebuilt: str | None = None, mode: str = "top") -> str:
    """The backend for --backend bpf|stap|auto ("bpf" or "stap"), checked; auto prefers eBPF.
    prebuilt (--stap-module DIR_OR_KO): the stap backend with that module for `mode`, run by
    staprun alone."""
    if prebuilt is not None:
        if requested == "bpf":
            raise UserError("--stap-module runs a SystemTap module: use it with --backend stap (or auto)")
        if requested not in ("stap", "auto"):
            raise UserError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
        module = prebuilt_module(prebuilt, mode)
        problem = stap_problem(prebuilt=True)
        if problem:
            raise UserError(problem)
        _prebuilt[mode] = module
        return "stap"
    if requested == "bpf":
        preflight.check_bpf_environment()
        return "bpf"
    if requested == "stap":
        check_stap_environment()
        return "stap"
    if requested != "auto":
        raise UserError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    no_bpf = bpf_problem()
    if no_bpf is None:
        return "bpf"
    no_stap = stap_problem()
    if no_stap is None:
        return "stap"
    raise UserError(f"no tracing backend can run here: eBPF: {no_bpf}; SystemTap: {no_stap}")


def open_probe(
    backend: str, pid: int, record_ring_bytes: int = 0, stop: threading.Event | None = None
) -> IoProbe | StapProbe:
    """The probe of a selected backend ("bpf" | "stap") for top (record_ring_bytes 0) or record."""
    if backend == "stap":
        return StapProbe.start(pid, "record" if record_ring_bytes else "top", stop=stop)
    return IoProbe(pid, record_ring_bytes=record_ring_bytes)


# ---- mount points ----


@dataclass(frozen=True)
class Mount:
    dev: int  # st_dev encoding
    root: str  # the directory of the filesystem that is mounted
    point: str  # where, in the process's mount namespace


def _unescape(field: bytes) -> str:
    raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)
    return raw.decode(errors="surrogateescape")


class MountTable:
    """/proc/PID/mountinfo: from a path relative to a filesystem's root to the
    process's absolute path."""

    def __init__(self, mounts: Iterable[Mount] = ()) -> None:
        self.mounts = list(mounts)

    @classmethod
    def parse(cls, text: bytes | str) -> MountTable:
        data = text.encode(errors="surrogateescape") if isinstance(text, str) else text
        mounts = []
        for line in data.splitlines():
            fields = line.split()
            if len(fields) < 5 or b":" not in fields[2]:
                continue
            major, _, minor = fields[2].partition(b":")
            try:
                dev = os.makedev(int(major), int(minor))
            except ValueError:
                continue
            mounts.append(Mount(dev, _unescape(fields[3]), _unescape(fields[4])))
        return cls(mounts)

    @classmethod
    def of_process(cls, pid: int) -> MountTable:
        try:
            with open(f"/proc/{pid}/mountinfo", "rb") as f:
                return cls.parse(f.read())
        except OSError:
            return cls()

    def absolute(self, dev: int, relative: str) -> str | None:
        """The path of `relative` (to the root of dev's filesystem), or None when no mount shows it."""
        in_fs = "/" + relative.strip("/")
        best: Mount | None = None
        for m in self.mounts:
            root = m.root.rstrip("/")
            if m.dev != dev or not (root == "" or in_fs == root or in_fs.startswith(root + "/")):
                continue
            if best is None or len(root) > len(best.root.rstrip("/")):
                best = m
        if best is None:
            return None
        rest = in_fs[len(best.root.rstrip("/")) :]
        return (best.point.rstrip("/") + rest) or "/"


# ---- where the records come from ----


class RecordSource(Protocol):
    def request_mark(self, again: bool = False) -> None: ...

    def get(self, timeout: float | None) -> proto.Record | None:
        """The next record; None at the end of the stream. Raises queue.Empty when
        nothing came within timeout (0: do not wait)."""
        ...

    def close(self) -> None: ...


class ReplaySource:
    """The lines of a captured run; a requested mark is simply the next one in them."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)

    def request_mark(self, again: bool = False) -> None:
        pass

    def get(self, timeout: float | None) -> proto.Record | None:
        for line in self._lines:
            if line.strip():
                return proto.parse_line(line)
        return None

    def close(self) -> None:
        pass


def _die_with_parent() -> None:
    """In the child before exec: stop stap (it unloads its module) when mysqlio dies, even by kill -9."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


_END = object()


class StapProcess:
    """staprun running a module: its lines parsed on a thread, its stderr kept for errors."""

    def __init__(self, cmd: list[str], stop: threading.Event | None = None, mode: str = "top") -> None:
        self.cmd = cmd
        self.mode = mode
        self._stop = stop
        self._queue: queue.Queue[object] = queue.Queue()
        self._log: deque[str] = deque(maxlen=_LOG_LINES)
        self.skipped_probes = 0
        self.transport_failures = 0
        self.procfs_dir: str | None = None  # /proc/systemtap/MODULE, once the module said hello
        self._parity = 0  # top: the aggregate the next flip retires
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C goes to mysqlio, which stops stap cleanly
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            raise StapError(f"cannot run staprun: {exc.strerror or exc}") from None
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_stdout, args=(self._proc.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self._proc.stderr,), daemon=True),
        ]
        for t in self._readers:
            t.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read_stdout(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace")
            if not line.strip():
                continue
            try:
                self._queue.put(proto.parse_line(line))
            except proto.ProtocolError as exc:
                self._queue.put(exc)
                break
        self._queue.put(_END)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            self._log.append(line)
            skipped = re.search(r"skipped probes: (\d+)", line)
            if skipped:
                self.skipped_probes = int(skipped.group(1))
            failures = re.search(r"There were (\d+) transport failures", line)
            if failures:
                self.transport_failures = int(failures.group(1))

    @property
    def log(self) -> str:
        return "\n".join(self._log)

    def failure(self, what: str) -> StapError:
        """An error naming the most telling line stap printed."""
        return StapError(f"{what}: {_telling(self._log)}", self.log)

    def request_mark(self, again: bool = False) -> None:
        """top: `flip` (requests go to the other aggregate), then the flush of the retired one
        (flush0, flush1 in turn); again: that flush once more, no flip. record: `flush` (a mark)."""
        if self.procfs_dir is None:
            return
        if self.mode != "top":
            self._write_procfs("flush")
        elif again:
            self._write_procfs(f"flush{self._parity ^ 1}")
        else:
            self._write_procfs("flip")
            self._write_procfs(f"flush{self._parity}")
            self._parity ^= 1

    def _write_procfs(self, name: str) -> None:
        path = f"{self.procfs_dir}/{name}"
        deadline = time.monotonic() + 2.0  # the procfs files appear as the module finishes loading
        while True:
            try:
                with open(path, "w") as f:
                    f.write("1\n")
                return
            except FileNotFoundError:
                if self._proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                self._wait_exit(2.0)
                raise self.failure("the SystemTap module is gone") from None
            except OSError as exc:
                self._wait_exit(2.0)
                raise self.failure(f"cannot ask the SystemTap module for an interval ({exc.strerror})") from None

    def get(self, timeout: float | None) -> proto.Record | None:
        if timeout == 0:
            item = self._queue.get(block=False)
        else:
            # in steps, so that a stop request (signal) ends a long wait (compilation)
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                step = 0.2 if deadline is None else min(0.2, max(0.001, deadline - time.monotonic()))
                try:
                    item = self._queue.get(timeout=step)
                    break
                except queue.Empty:
                    stopped = self._stop is not None and self._stop.is_set()
                    if stopped or (deadline is not None and time.monotonic() >= deadline):
                        raise
        if item is _END:
            self._queue.put(_END)  # every later get sees the end too
            self._wait_exit(5.0)
            if self._proc.returncode not in (0, None):
                raise self.failure(f"SystemTap stopped (staprun exit status {self._proc.returncode})")
            return None
        if isinstance(item, proto.ProtocolError):
            raise StapError(f"unexpected output from stap: {item}", self.log)
        return item  # type: ignore[return-value]

    def _wait_exit(self, timeout_s: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout_s)
        for t in self._readers:
            t.join(timeout_s)

    def close(self) -> None:
        """SIGINT: staprun has the end probes run, unloads the module and exits."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.terminate()
                try:
                    self._proc.wait(30)
                except subprocess.TimeoutExpired:
                    print(
                        f"mysqlio: staprun (pid {self._proc.pid}) does not exit; its module may stay loaded",
                        file=sys.stderr,
                    )
        for t in self._readers:
            t.join(5)


# ---- the probe ----


class StapProbe:
    """IoProbe's interface over the records of a SystemTap script."""

    def __init__(
        self,
        source: RecordSource,
        pid: int,
        mode: str,
        mounts: MountTable | None = None,
        clock_offset_ns: int | None = None,
        startup_timeout_s: float = LOAD_TIMEOUT_S,
    ) -> None:
        """mounts None: read /proc/PID/mountinfo (live). clock_offset_ns: CLOCK_REALTIME
        minus CLOCK_MONOTONIC, to put the scripts' times on the trace's clock (None: now)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.pid = pid
        self.mode = mode
        self._source = source
        self._live_mounts = mounts is None
        self._mounts = MountTable.of_process(pid) if mounts is None else mounts
        self._mounts_read = time.monotonic()
        self._offset = time.time_ns() - time.monotonic_ns() if clock_offset_ns is None else clock_offset_ns
        self._names: dict[tuple[int, int], proto.Name] = {}
        self._rows: list[proto.Row] = []
        self._events: list[proto.Event] = []
        self._drops = dict.fromkeys(DROP_KEYS, 0)
        self._last_mark = 0
        self.ended = False
        first = source.get(startup_timeout_s)
        if not isinstance(first, proto.Hello):
            raise StapError(f"the SystemTap script did not start as expected (first record {first!r})")
        if first.version != proto.PROTOCOL_VERSION or first.mode != mode:
            raise StapError(
                f"the SystemTap script speaks protocol {first.version} for {first.mode}, "
                f"mysqlio expects {proto.PROTOCOL_VERSION} for {mode}: scripts and mysqlio differ"
            )
        self.hello = first
        self.uses_io_uring = False  # the process uses io_uring (told once)
        self.io_uring_calls = 0  # io_uring_setup / io_uring_enter calls the script counted

    @classmethod
    def start(cls, pid: int, mode: str, quiet: bool = False, stop: threading.Event | None = None) -> StapProbe:
        """Compile the script (first run on a kernel only) and load it for one process.
        `stop` set meanwhile (a signal) abandons the start."""
        prebuilt = _prebuilt.get(mode)
        module = prebuilt.module if prebuilt is not None else compile_module(mode, stop, quiet)
        process = StapProcess(staprun_command(module, pid, mode), stop, mode)
        try:
            probe = cls(process, pid, mode, startup_timeout_s=LOAD_TIMEOUT_S)
        except queue.Empty:
            process.close()
            if stop is not None and stop.is_set():
                raise UserError("interrupted while SystemTap was starting") from None
            raise process.failure(f"the SystemTap module did not start within {LOAD_TIMEOUT_S:.0f} s") from None
        except BaseException:
            process.close()
            raise
        procfs = os.environ.get("MYSQLIO_STAP_PROCFS", "/proc/systemtap")  # tests point it elsewhere
        process.procfs_dir = f"{procfs}/{probe.hello.module}"
        probe.check_io_uring(always_tell=True)
        return probe

    def check_io_uring(self, always_tell: bool = False) -> bool:
        """Tell once, on stderr, that the process uses io_uring, whose requests the scripts cannot
        see: an io_uring instance among its fds at start, or io_uring calls the script counted
        (told later only when stderr is not the terminal of top's screen)."""
        if self.uses_io_uring:
            return True
        rings = 0
        if always_tell and isinstance(self._source, StapProcess):
            rings = io_uring_instances(self.pid)
        if not rings and not self.io_uring_calls:
            return False
        self.uses_io_uring = True
        if always_tell or not sys.stderr.isatty():
            seen = (
                f"holds {rings} io_uring instance{'s' if rings > 1 else ''}"
                if rings
                else f"made {self.io_uring_calls} io_uring call{'s' if self.io_uring_calls > 1 else ''}"
            )
            print(
                f"mysqlio: pid {self.pid} {seen}: the SystemTap backend does not see io_uring requests, "
                "which are missing from these counts (the eBPF backend traces them)",
                file=sys.stderr,
            )
        return True

    # -- reading --

    def _take(self, record: proto.Record) -> None:
        if isinstance(record, proto.Name):
            self._names[(record.dev, record.ino)] = record
        elif isinstance(record, proto.Row):
            self._rows.append(record)
        elif isinstance(record, proto.Event):
            self._events.append(record)
        elif isinstance(record, proto.Mark):
            self._last_mark = record.seq
            self._drops.update(record.drops)
            self.io_uring_calls = record.io_uring_calls
        else:
            raise StapError(f"unexpected record {record!r} from the SystemTap script")

    def _pump(self, until_mark: bool, timeout_s: float, after: int = 0) -> None:
        """Take records: up to a mark newer than `after`, or (until_mark False) those already
        there. Without a mark for ANSWER_RETRY_S the flush is asked for again: a flush stap
        skipped answers nothing, and one that was only slow answers twice (the second mark then
        ends the next interval early: late, not lost)."""
        deadline = time.monotonic() + timeout_s
        retry = time.monotonic() + ANSWER_RETRY_S
        while not self.ended:
            try:
                if not until_mark:
                    record = self._source.get(0)
                elif self._last_mark > after:
                    return
                elif time.monotonic() >= deadline:
                    raise StapError(f"the SystemTap module did not answer within {timeout_s:.0f} s")
                else:
                    if time.monotonic() >= retry:
                        self._source.request_mark(again=True)
                        retry = time.monotonic() + ANSWER_RETRY_S
                    record = self._source.get(max(0.0, min(deadline, retry) - time.monotonic()))
            except queue.Empty:
                if not until_mark:
                    return
                continue
            if record is None:
                self.ended = True
                self._collect_exit_counts()
                return
            self._take(record)

    def _collect_exit_counts(self) -> None:
        """stap's exit message: its counters at the very end (the marks have them up to the last one)."""
        if isinstance(self._source, StapProcess):
            for key, value in (
                ("skipped_probes", self._source.skipped_probes),
                ("transport_failures", self._source.transport_failures),
            ):
                self._drops[key] = max(self._drops[key], value)

    def drain(self) -> list[OpCount]:
        """Everything counted since the previous drain (top); record: the loss counters only."""
        after = self._last_mark
        if not self.ended:
            self._source.request_mark()
        self._pump(until_mark=True, timeout_s=ANSWER_TIMEOUT_S, after=after)
        self.check_io_uring()
        rows, self._rows = self._rows, []
        return [_op_count(r) for r in rows]

    def drain_latency(self) -> list[LatencyRow]:
        """The scripts keep no latency histograms (record events carry latency)."""
        return []

    def drops(self) -> Drops:
        return Drops(self._drops)

    def read(self) -> np.ndarray:
        """record: the events that arrived since the last read, as EVENT_DTYPE records."""
        self._pump(until_mark=False, timeout_s=0)
        events, self._events = self._events, []
        return events_array(events, self._offset)

    def events_reader(self) -> StapProbe:
        """The RingBufferReader interface (read(), close()) of the record mode."""
        return self

    # -- names --

    def kernel_name(self, file: FileIdentity) -> KernelName | None:
        """The path the script walked when the process opened the file."""
        kdev = (os.major(file.dev) << 20) | os.minor(file.dev)
        name = self._names.get((kdev, file.ino))
        if name is None:
            return None
        relative = "/".join(c.decode(errors="surrogateescape") for c in name.components)
        path = None
        if name.complete:
            path = self._mounts.absolute(file.dev, relative)
            if path is None and self._live_mounts and time.monotonic() - self._mounts_read >= MOUNTS_REFRESH_S:
                self._mounts = MountTable.of_process(self.pid)
                self._mounts_read = time.monotonic()
                path = self._mounts.absolute(file.dev, relative)
        if path is None:
            return KernelName(path=".../" + relative, complete=False, deleted=name.nlink == 0)
        return KernelName(path=path, complete=True, deleted=name.nlink == 0)

    def thread_name(self, tid: int) -> str | None:
        """Not known to the scripts: the caller reads /proc/PID/task/TID/comm."""
        return None

    def forget_name(self, file: FileIdentity) -> None:
        """Names are walked at open, not per interval: nothing to forget."""

    # -- lifetime --

    def close(self) -> None:
        self._source.close()
        self._collect_exit_counts()

    def __enter__(self) -> StapProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def io_uring_instances(pid: int) -> int:
    """How many io_uring instances the process holds open (fds to anon_inode:[io_uring])."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    rings = 0
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[io_uring]":
                rings += 1
    return rings


def _op_count(row: proto.Row) -> OpCount:
    try:
        op, api = Op(row.op), Api(row.api)
    except ValueError:
        raise StapError(f"the SystemTap script sent op {row.op} api {row.api}, which mysqlio does not know") from None
    return OpCount(
        file=FileIdentity.from_kernel(row.dev, row.ino),
        tid=row.tid,
        op=op,
        api=api,
        bytes=row.bytes,
        ops=row.ops,
        errors=row.errors,
    )


def events_array(events: list[proto.Event], clock_offset_ns: int) -> np.ndarray:
    """Events as the ring buffer's records (EVENT_DTYPE), on CLOCK_MONOTONIC."""
    out = np.zeros(len(events), dtype=EVENT_DTYPE)
    if not events:
        return out
    cols = np.array(
        [(e.time_ns, e.latency_ns, e.ino, e.offset, e.result, e.dev, e.tid, e.op, e.api) for e in events],
        dtype=np.int64,
    )
    if int(cols[:, 7].max()) > max(Op) or int(cols[:, 8].max()) > max(Api) or int(cols[:, 7:9].min()) < 0:
        raise StapError("the SystemTap script sent an op or api code mysqlio does not know")
    out["ts_ns"] = np.maximum(cols[:, 0] - clock_offset_ns, 0)
    out["latency_ns"] = np.maximum(cols[:, 1], 0)
    out["ino"] = cols[:, 2]
    out["offset"] = cols[:, 3]
    out["result"] = cols[:, 4]
    out["dev"] = cols[:, 5]
    out["tid"] = cols[:, 6]
    out["op"] = cols[:, 7]
    out["api"] = cols[:, 8]
    return out


def replay_probe(lines: Iterable[str], pid: int, mode: str, mounts: MountTable, clock_offset_ns: int = 0) -> StapProbe:
    """A probe that reads a script's captured output (`stap ... -o FILE`) instead of a live stap:
    each drain() takes the lines up to the next mark."""
    return StapProbe(ReplaySource(lines), pid, mode, mounts=mounts, clock_offset_ns=clock_offset_ns)
