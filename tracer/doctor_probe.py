"""Doctor's proof: the BPF object is built, and the real probes load, attach to doctor
itself and count a test write exactly."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence

from .doctor_check import Check
from .errors import BpfError
from .syscall_hook import HOOK_ENV, TracepointsRefused

TEST_WRITE_BYTES = 4096


def check_bpf_object(path: str | None = None) -> Check:
    from .bpf_probe import bpf_object_path

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
    from .abi import Op
    from .bpf_probe import BpfProbe
    from .probe import FileIdentity

    # The test file exists (and is unlinked) before the probes load: its inode stays
    # ours, so no earlier file with the same (dev, inode) can add to its counts.
    # (tempfile's first call writes and deletes a probe file of its own.)
    fd, path = tempfile.mkstemp(prefix="mysqlio-doctor-")
    try:
        os.unlink(path)
        identity = FileIdentity(os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        started = time.monotonic()
        with BpfProbe(os.getpid()) as probe:
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
        if isinstance(exc, TracepointsRefused):  # only where the hook was forced to them
            return Check(
                "probe attach",
                "fail",
                f"the kernel refused the per-syscall tracepoints: {_first_line(str(exc))}",
                f"unset {HOOK_ENV}: mysqlio then falls back to the raw hook, which counts the same",
                required=True,
            )
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
