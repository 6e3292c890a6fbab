#!/usr/bin/env python3
"""Run a command in a virtme-ng guest booted on one of Debian's stock kernels (tools/kernels.py).

    python3 tools/guest.py --kernel 6.1 -- uname -r
    python3 tools/guest.py --kernel 5.10 --rwdir build -- .venv/bin/python -m mysqlio doctor
    python3 tools/guest.py --kernel sid --timeout 600 -- 'cd tests && ../.venv/bin/pytest -x'

    from guest import run_in_guest                       # tools/ on sys.path
    from kernels import ensure_kernel
    r = run_in_guest(ensure_kernel("6.1"), ["uname", "-r"], timeout_s=300, rwdirs=["build"])
    r.returncode, r.output, r.seconds                     # 0, "6.1.0-41-amd64\\n", 24.7

The guest (`vng --disable-kvm`: plain TCG emulation, KVM does not work on these machines)
sees the host's root filesystem read-only, with throwaway overlays on /etc, /tmp, /var, …
(writes there vanish with the guest). RWDIRS are shared read-write with the host. The
command runs as root, in the caller's working directory, under `sh -c`, with the caller's
PATH and the `env` given; the repository and its .venv work there unchanged.

`returncode` is the guest command's own exit status (read from a file the guest writes in
a private read-write directory, not from vng, whose exit status is not the command's when
the guest has no udev), `output` its stdout and stderr interleaved as written. When the
guest never got to write a status (a boot failure, a kernel panic, the timeout), returncode
is 124 on timeout, else 125, and `output` ends with guest.py's notes: the kernel's first report
of a stuck or broken kernel on its console (a soft lockup's carries every CPU's stack), on a
timeout where each vCPU was (its RIP three times, named from the guest's /proc/kallsyms, read
from QEMU's monitor), and the tail of vng's own console output (guest_failure_text shows them).
Emulation is 5–10× slower than the host; a boot to the command takes 20–60 s (more when the
machine is busy), and each Python start in the guest a few seconds (the root is shared over 9p).

Found in such guests (Debian's 5.10, 6.1, 6.1-rt, 6.12 and sid's 7.2): tracefs is mounted at
/sys/kernel/tracing and debugfs at /sys/kernel/debug (so /sys/kernel/debug/tracing works too);
/sys/kernel/btf/vmlinux is there; the guest's /tmp, /var, /srv... are overlays on the host's
(a file on an overlay is named by other inodes in the kernel than stat(2) gives: write test
files to an rwdir, a tmpfs or a loop-mounted ext4). vng starts udev in the guest only when
the host has it installed (tools/install-deps.sh does not install it: its coldplug triples the
boot); modprobe works (vng links /lib/modules/RELEASE to the unpacked modules).

CLI exit status: the guest command's.
"""

from __future__ import annotations

import argparse
import bisect
import compileall
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kernels import Kernel, ensure_kernel  # tools/ is on sys.path: run from there, or by pytest (pythonpath)

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_RC = 124
NO_STATUS_RC = 125


@dataclass(frozen=True)
class GuestResult:
    """returncode: the guest command's exit status (124 timeout, 125 no status: see vng_output);
    output: what it wrote to stdout and stderr; seconds: wall time from vng's start to its end,
    boot and power-off included."""

    returncode: int
    output: str
    seconds: float
    timed_out: bool = False
    vng_output: str = ""


def _vng() -> str:
    """The vng of this interpreter's environment (the project's .venv), else one on PATH."""
    here = Path(sys.executable).parent / "vng"
    for cand in (here, REPO / ".venv" / "bin" / "vng"):
        if cand.exists():
            return str(cand)
    found = shutil.which("vng")
    if found is None:
        raise FileNotFoundError("vng (PyPI virtme-ng) is missing: 'make setup' installs it into .venv")
    return found


def _follow(path: Path, stream: TextIO | None, done: threading.Event) -> None:
    """Copy what the guest appends to PATH (a shared directory) to STREAM until DONE."""
    pos = 0
    while stream is not None:
        finished = done.wait(1.0)
        try:
            with open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except OSError:
            chunk = b""
        if chunk:
            pos += len(chunk)
            stream.write(chunk.decode(errors="replace"))
            stream.flush()
        if finished:
            return


def run_in_guest(
    kernel: Kernel | str,
    command: str | Sequence[str],
    timeout_s: float,
    rwdirs: Sequence[str | os.PathLike[str]] = (),
    cpus: int = 2,
    memory: str = "2G",
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stream: TextIO | None = None,
) -> GuestResult:
    """Boot KERNEL (a Kernel, or an alias for ensure_kernel) and run COMMAND in it as root.

    COMMAND: a shell string, or an argv list (quoted with shlex.join). RWDIRS: host directories
    the guest may write (created if missing). ENV: extra environment for the command. CWD: where
    the command starts (default: the caller's working directory). STREAM: where to copy the
    command's output while it runs (e.g. sys.stderr; the result has all of it either way).

    A guest that ends without the command's exit status (vng exit 255, nothing on the console:
    seen three times in a day of emulated boots, on Debian 13's and sid's kernels) is booted once
    more; the first attempt's tail stays at the head of the output. A timeout is not retried.
    """
    if isinstance(kernel, str):
        kernel = ensure_kernel(kernel)
    if not isinstance(command, str):
        command = shlex.join(command)
    cwd = Path(cwd or os.getcwd()).resolve()
    compile_sources()
    first = _boot(kernel, command, timeout_s, rwdirs, cpus, memory, env, cwd, stream)
    if first.returncode != NO_STATUS_RC or first.timed_out:
        return first
    if stream is not None:
        stream.write("[guest.py: the guest ended without an exit status; booting it once more]\n")
    again = _boot(kernel, command, timeout_s, rwdirs, cpus, memory, env, cwd, stream)
    note = f"[guest.py: first attempt, {first.seconds:.0f} s:]\n{first.output}\n[guest.py: second attempt:]\n"
    return GuestResult(
        again.returncode, note + again.output, first.seconds + again.seconds, again.timed_out, again.vng_output
    )


def compile_sources() -> None:
    """The repository's bytecode written on the host before a boot: the guest sees the root
    read-only and would compile every module of every Python it starts (about 2 s of a TCG
    vCPU per process for mysqlio's); the host may run with PYTHONDONTWRITEBYTECODE, which
    compileall does not heed."""
    for sub in ("tracer", "tools", "tests"):
        compileall.compile_dir(REPO / sub, quiet=1, workers=1)


def _boot(
    kernel: Kernel,
    command: str,
    timeout_s: float,
    rwdirs: Sequence[str | os.PathLike[str]],
    cpus: int,
    memory: str,
    env: Mapping[str, str] | None,
    cwd: Path,
    stream: TextIO | None,
) -> GuestResult:
    """One boot of run_in_guest."""
    vng = _vng()
    with tempfile.TemporaryDirectory(prefix="mysqlio-guest-") as tmp:
        box = Path(tmp)
        script = box / "run.sh"
        exports = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), **(env or {})}
        lines = ["#!/bin/sh"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
        lines += [
            # the kernel's text symbols, for naming where a stuck guest's vCPUs are (vcpu_places)
            f"grep ' [tT] ' /proc/kallsyms > {box}/kallsyms 2>/dev/null",
            f"cd {shlex.quote(str(cwd))} || exit 125",
            f"sh -c {shlex.quote(command)} > {box}/output 2>&1 < /dev/null",
            f"echo $? > {box}/rc.tmp && mv {box}/rc.tmp {box}/rc",
            "sync",
        ]
        script.write_text("\n".join(lines) + "\n")
        monitor = box / "monitor"
        # --verbose: the guest's console in vng's output, which says why a guest ended early.
        # A soft lockup's report then carries every CPU's stack; QEMU's monitor gives each
        # vCPU's registers when the guest times out (see vcpu_places).
        argv = [vng, "--verbose", "--disable-kvm", "--cpus", str(cpus), "--memory", memory, "--rwdir", str(box)]
        argv += ["--append", "softlockup_all_cpu_backtrace=1"]
        # One host thread for all vCPUs (TCG without MTTCG): with a thread per vCPU, a
        # guest's code patching (text_poke_bp's int3, as a tracepoint is attached) left
        # both vCPUs of Debian's 5.10 and 6.1 trapping at the same patched instruction
        # until the watchdog's soft lockup, in about one boot in three (issue 19's
        # kernel matrix runs; the vCPUs' places from the monitor, see vcpu_places).
        argv += [f"--qemu-opts=-monitor unix:{monitor},server=on,wait=off -accel tcg,thread=single"]
        for d in rwdirs:
            p = Path(d).resolve()
            p.mkdir(parents=True, exist_ok=True)
            argv += ["--rwdir", str(p)]
        argv += ["-r", str(kernel.vmlinuz), "--exec", f"sh {box}/run.sh"]
        # vng starts virtme-run / qemu found on PATH: the venv's bin first
        venv_env = {**os.environ, "PATH": f"{Path(vng).parent}:{os.environ.get('PATH', '')}"}
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=venv_env,
            cwd=str(box),
            start_new_session=True,
        )
        timed_out = False
        vcpus = ""
        done = threading.Event()
        tail = threading.Thread(target=_follow, args=(box / "output", stream, done), daemon=True)
        if stream is not None:
            tail.start()
        try:
            vng_out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            vcpus = vcpu_places(monitor, box / "kallsyms")
            os.killpg(proc.pid, signal.SIGKILL)
            vng_out, _ = proc.communicate()
        finally:
            done.set()
            if tail.is_alive():
                tail.join(10)
        seconds = time.monotonic() - t0
        vng_text = vng_out.decode(errors="replace")
        out_file = box / "output"
        output = out_file.read_bytes().decode(errors="replace") if out_file.exists() else ""
        rc_file = box / "rc"
        if rc_file.exists() and not timed_out:
            returncode = int(rc_file.read_text().strip() or NO_STATUS_RC)
        else:
            returncode = TIMEOUT_RC if timed_out else NO_STATUS_RC
            why = f"timed out after {timeout_s:.0f} s" if timed_out else f"no exit status (vng exit {proc.returncode})"
            tail = "\n".join(vng_text.strip().splitlines()[-30:])
            report = first_kernel_report(vng_text)
            if report:
                output += f"\n[guest.py: the kernel's first report on its console:]\n{report}\n"
            if vcpus:
                output += f"\n[guest.py: where each vCPU was when the guest was stopped (QEMU's monitor):]\n{vcpus}\n"
            output += f"\n[guest.py: {why}; the tail of vng's output:]\n{tail}\n"
    return GuestResult(returncode, output, seconds, timed_out, vng_text)


def guest_failure_text(output: str, command_chars: int = 2000, notes_chars: int = 16000) -> str:
    """What to show of a failed guest's OUTPUT (GuestResult.output): the end of its command's
    own output and guest.py's notes after it (the kernel's report, the vCPUs, vng's tail),
    each cut to a bound from its start or end, whichever says more."""
    cut = output.find("\n[guest.py:")
    command, notes = (output, "") if cut < 0 else (output[:cut], output[cut:])
    return command[-command_chars:] + notes[:notes_chars]


# the first line of the kernel's reports of a stuck or broken kernel
_REPORT = re.compile(
    r"\] (BUG: |watchdog: |rcu: INFO|INFO: task |INFO: rcu|Oops|general protection|Kernel panic|"
    r"WARNING: |NMI backtrace|kernel BUG)"
)


def first_kernel_report(console: str, max_lines: int = 120) -> str:
    """The first report of a stuck or broken kernel on CONSOLE (vng's output), up to MAX_LINES
    lines, and how many more such reports followed; "" when there is none."""
    lines = console.splitlines()
    starts = [i for i, line in enumerate(lines) if _REPORT.search(line)]
    if not starts:
        return ""
    # a WARN's own message comes before its "WARNING:" line, after "[ cut here ]"
    head = next((i for i in range(starts[0] - 1, max(starts[0] - 4, -1), -1) if "[ cut here ]" in lines[i]), starts[0])
    first = lines[head : starts[0] + max_lines]
    later = [lines[i].strip() for i in starts[1:] if i >= starts[0] + max_lines]
    if later:
        first.append(f"[... {len(later)} more such lines after these; the last: {later[-1]}]")
    return "\n".join(first)


def vcpu_places(monitor: Path, kallsyms: Path, samples: int = 3, wait_s: float = 5.0) -> str:
    """Each vCPU's instruction pointer, SAMPLES times a second apart, read from QEMU's monitor
    socket MONITOR and named from KALLSYMS (the guest's text symbols, which it wrote as it
    booted; Debian's System.map is a stub); "" when the monitor does not answer. Says where a
    guest that stopped printing is spinning."""
    symbols = _text_symbols(kallsyms)
    places = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(wait_s)
            sock.connect(str(monitor))
            for n in range(samples):
                if n:
                    time.sleep(1.0)
                text = _monitor_command(sock, b"info registers -a\n", wait_s)
                for cpu, rip in re.findall(r"CPU#(\d+).*?RIP=([0-9a-f]+)", text, flags=re.S):
                    places.append(f"sample {n + 1}, vCPU {cpu}: RIP {rip} {_symbolize(int(rip, 16), symbols)}")
    except OSError:
        pass
    return "\n".join(places)


def _monitor_command(sock: socket.socket, command: bytes, wait_s: float) -> str:
    """Send COMMAND to QEMU's human monitor on SOCK; its answer, up to the next prompt."""
    sock.sendall(command)
    chunks: list[bytes] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        got = b"".join(chunks)
        if b"CPU#" in got and got.rstrip().endswith(b"(qemu)"):
            break
    return b"".join(chunks).decode(errors="replace")


def _text_symbols(kallsyms: Path) -> list[tuple[int, str]]:
    """(address, name) of the text symbols in KALLSYMS (/proc/kallsyms' format), sorted."""
    out = []
    try:
        text = kallsyms.read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("t", "T"):
            out.append((int(parts[0], 16), parts[2]))
    return sorted(out)


def _symbolize(addr: int, symbols: list[tuple[int, str]]) -> str:
    """NAME+0xOFFSET of ADDR in SYMBOLS, "(user space)" below the kernel's half, else "?"."""
    if addr < 1 << 63:
        return "(user space)"
    i = bisect.bisect_right(symbols, (addr, "\uffff")) - 1
    if i < 0:
        return "?"
    base, name = symbols[i]
    return f"{name}+{addr - base:#x}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Run a command in a guest on a Debian stock kernel (see the module docstring).",
        usage="%(prog)s --kernel ALIAS [--rwdir DIR]... [--timeout S] -- CMD...",
    )
    ap.add_argument("--kernel", required=True, help="5.10, 6.1, 6.12, sid or 6.1-rt (tools/kernels.py)")
    ap.add_argument("--headers", action="store_true", help="fetch the kernel's headers too")
    ap.add_argument("--rwdir", action="append", default=[], help="a host directory the guest may write")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before the guest is killed (default 900)")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--memory", default="2G")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command (put it after --)")
    kernel = ensure_kernel(args.kernel, headers=args.headers)
    res = run_in_guest(
        kernel,
        cmd[0] if len(cmd) == 1 else cmd,
        args.timeout,
        args.rwdir,
        cpus=args.cpus,
        memory=args.memory,
        stream=sys.stdout,  # live, as the guest writes it
    )
    if res.returncode in (TIMEOUT_RC, NO_STATUS_RC):
        sys.stdout.write(res.output[res.output.find("\n[guest.py:") :])
    print(f"guest.py: {kernel.release}: exit {res.returncode} in {res.seconds:.1f} s", file=sys.stderr)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
