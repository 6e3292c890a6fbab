"""SystemTap's compiler: where the scripts, the tapset and stap's runtime are, the stap -p4
command that compiles a script into a kernel module (cached by stap: once per kernel and
script), and a copy of the runtime patched for kernels the installed stap predates.

The module is compiled once per kernel and script and loaded for one pid by staprun
(stap_process): target() is a module parameter, so no pid is compiled in.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import StapError, UserError
from .stap_process import LOG_LINES, die_with_parent, telling

MODES = ("top", "record")
SCRIPTS = {"top": "mysqlio-top.stp", "record": "mysqlio-record.stp"}
# Compiled into the modules. Statements per probe hit: a flush prints up to 8192 rows,
# io_submit walks 64 iocbs. Lock waits: a handler that does not get a global's lock within
# MAXTRYLOCK tries 10 us apart is skipped (stap's default, 100 tries = 1 ms, skipped both
# requests arriving during a long flush and flushes among busy writers: see
# docs/systemtap.md); 5000 tries = 50 ms. Skipped probes are counted in every mark, not fatal.
STAP_DEFINES = ("MAXACTION=100000", "MAXSKIPPED=1000000", "MAXTRYLOCK=5000")
COMPILE_TIMEOUT_S = 900.0  # the first compile on a kernel: a minute or two on a small machine


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

    return run_compile(compile_command(mode, runtime=compat_runtime(release)), mode, stop, say_compiling)


def run_compile(
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
                preexec_fn=die_with_parent,
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
                f"stap could not compile {script_path(mode).name}: {telling(log)}", "\n".join(log[-LOG_LINES:])
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
