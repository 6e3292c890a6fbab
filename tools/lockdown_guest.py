#!/usr/bin/env python3
"""One boot through the kernel lockdown levels and io_uring's refusal (tests/test_lockdown_guest.py).

Run as root with the project's venv inside a guest on a Debian kernel with the lockdown LSM
(tools/guest.py). The kernel's state is raised stage by stage (lockdown is never lowered):

  none             as booted
  io_uring_off     kernel.io_uring_disabled = 2
  integrity        `integrity` written to securityfs's lockdown file
  confidentiality  `confidentiality` written there

At each stage it records what mysqlio says and does: `mysqlio doctor --json` (exit code,
JSON, stderr); what select_backend answers for --backend auto, bpf and stap (in this
process: no probe is loaded for it); `mysqlio top` where it must refuse (exit code,
stderr). The commands run as `python -m mysqlio` would, in forked children of this process. And the kernel's own answer to what doctor claims: io_uring_setup(2) itself
(none, io_uring_off); an unsigned copy of one of the kernel's own modules, and the signed
original, given to finit_module(2) (none, integrity); the eBPF probes loaded directly,
past the preflight, for the verifier's words (confidentiality).

    .venv/bin/python tools/lockdown_guest.py --out build/lockdown/RELEASE.json

Exit status: 0 when every stage ran (the judging is the test's), 1 otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import lzma
import os
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from mysqlio import backend, cli, lockdown
from mysqlio import doctor as _doctor  # noqa: F401  (imported once, before the forks)
from mysqlio.errors import UserError

SYS_IO_URING_SETUP = 425  # x86_64
SYS_FINIT_MODULE = 313
SYS_DELETE_MODULE = 176
O_NONBLOCK = 0o4000
MODULE = "dummy"  # drivers/net/dummy: no dependencies, loads without hardware
IO_URING_SYSCTL = "/proc/sys/kernel/io_uring_disabled"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def log(msg: str) -> None:
    print(f"lockdown_guest: {msg}", file=sys.stderr, flush=True)


def syscall(number: int, *args: Any) -> int:
    """The syscall's result, or -errno."""
    ret = libc.syscall(number, *args)
    return -ctypes.get_errno() if ret < 0 else ret


def io_uring_setup() -> int:
    """0 when an io_uring instance can be created (then closed), else -errno."""
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = syscall(SYS_IO_URING_SETUP, ctypes.c_uint(1), params)
    if fd >= 0:
        os.close(fd)
        return 0
    return fd


def module_files(work: Path) -> tuple[Path, Path]:
    """The kernel's own signed module and a copy with its signature cut off."""
    release = os.uname().release
    packed = next(Path(f"/lib/modules/{release}/kernel/drivers/net").glob(f"{MODULE}.ko*"))
    raw = lzma.decompress(packed.read_bytes()) if packed.suffix == ".xz" else packed.read_bytes()
    signed, unsigned = work / f"{MODULE}-signed.ko", work / f"{MODULE}-unsigned.ko"
    signed.write_bytes(raw)
    marker = lockdown.MODULE_SIGNATURE
    assert raw.endswith(marker), f"{packed} carries no signature"
    # struct module_signature (12 bytes, sig_len big-endian last) before the marker
    sig_len = struct.unpack(">I", raw[-len(marker) - 4 : -len(marker)])[0]
    unsigned.write_bytes(raw[: -len(marker) - 12 - sig_len])
    return signed, unsigned


def load_module(path: Path, unload: bool) -> int:
    """finit_module's result (0 or -errno); unloaded again when loaded and `unload`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        ret = syscall(SYS_FINIT_MODULE, fd, b"", 0)
    finally:
        os.close(fd)
    if ret == 0 and unload:
        gone = syscall(SYS_DELETE_MODULE, MODULE.encode(), O_NONBLOCK)
        assert gone == 0, f"delete_module({MODULE}): {os.strerror(-gone)}"
    return ret


def mysqlio(*args: str) -> dict[str, Any]:
    """`mysqlio ARGS` as `python -m mysqlio` runs it (cli.main), in a forked child of this
    process with its stdout and stderr to files: its exit code and what it printed. (A
    fresh interpreter in the guest costs 20-30 s of imports over 9p under emulation.)"""
    t0 = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                code = cli.main(list(args))
            except BaseException:  # a traceback is a finding: printed, exit 1
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {
            "argv": list(args),
            "returncode": os.waitstatus_to_exitcode(status),
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "seconds": round(time.monotonic() - t0, 1),
        }


def doctor() -> dict[str, Any]:
    out = mysqlio("doctor", "--json")
    try:
        out["json"] = json.loads(out["stdout"])
    except ValueError:
        out["json"] = None
    return out


def choices() -> dict[str, str]:
    """--backend auto|bpf|stap as select_backend answers: the backend, or "error: <line>"."""
    out = {}
    for requested in ("auto", "bpf", "stap"):
        try:
            out[requested] = backend.select_backend(requested)
        except UserError as exc:
            out[requested] = f"error: {exc}"
    return out


def bpf_refusal() -> str:
    """The probes loaded on this process past the preflight: the kernel's refusal, or "loaded"."""
    from mysqlio.bpf_probe import BpfProbe
    from mysqlio.errors import BpfError

    try:
        with BpfProbe(os.getpid()):
            return "loaded"
    except BpfError as exc:
        return f"{exc}\n{exc.log}"


def raise_lockdown(rw: Path, level: str) -> str:
    (rw / "lockdown").write_text(level)
    return (rw / "lockdown").read_text().strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.monotonic()
    result: dict[str, Any] = {"kernel": os.uname().release, "stages": {}}
    stages = result["stages"]
    me = str(os.getpid())
    with tempfile.TemporaryDirectory(prefix="mysqlio-lockdown-") as tmp:
        work = Path(tmp)
        # doctor's test write on a tmpfs: on the guest's overlay /tmp the kernel names a file
        # by another inode than stat(2) gives (tools/guest.py)
        scratch = work / "scratch"
        scratch.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(scratch)], check=True)
        os.environ["TMPDIR"] = tempfile.tempdir = str(scratch)  # tempfile caches its directory
        signed, unsigned = module_files(work)
        result["securityfs_mounted_at_boot"] = lockdown.securityfs_mounted()

        log("stage none")
        stages["none"] = {
            "io_uring_setup": io_uring_setup(),
            "unsigned_module": load_module(unsigned, unload=True),
            "doctor": doctor(),  # before securityfs is mounted here (when the guest had none)
            "choices": choices(),
        }
        # a securityfs of our own to raise the level
        rw = work / "securityfs"
        rw.mkdir()
        subprocess.run(["mount", "-t", "securityfs", "securityfs", str(rw)], check=True)

        log("stage io_uring_off")
        Path(IO_URING_SYSCTL).write_text("2")
        stages["io_uring_off"] = {
            "io_uring_setup": io_uring_setup(),
            "doctor": doctor(),
            "choices": choices(),
        }

        log("stage integrity")
        stages["integrity"] = {"lockdown": raise_lockdown(rw, "integrity")}
        stages["integrity"].update(
            unsigned_module=load_module(unsigned, unload=False),
            signed_module=load_module(signed, unload=True),
            doctor=doctor(),
            choices=choices(),
            top_stap=mysqlio("top", "--backend", "stap", "-p", me),
        )

        log("stage confidentiality")
        stages["confidentiality"] = {"lockdown": raise_lockdown(rw, "confidentiality")}
        stages["confidentiality"].update(
            doctor=doctor(),
            choices=choices(),
            top_auto=mysqlio("top", "-p", me),
            bpf_refusal=bpf_refusal(),
        )
        subprocess.run(["umount", str(rw)], check=False)
        subprocess.run(["umount", str(scratch)], check=False)
    result["seconds"] = round(time.monotonic() - t0, 1)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    log(f"done in {result['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
