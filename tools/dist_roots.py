#!/usr/bin/env python3
"""The single-file build (dist/mysqlio, `make dist`) as the tracer in Debian roots, judged by
the kernel matrix's iogen scenarios on this machine's kernel.

    python3 tools/dist_roots.py bullseye bookworm sid      # JSON per root on stdout

Each root is another Debian release: Debian 11 (tools/server_roots.py's `bullseye`),
Debian 12 (`bookworm`: minbase and procps only, made here with the same machinery as the
others) and sid (server_roots' `sid-mysql`). None of them has Python. A root is made the
root of a mount namespace of its own (root_namespace(): pivot_root, as if the machine were
that root), with /proc, /dev, /sys and the temp directory (where iogen writes, the trace
goes and the executable unpacks itself) mounted in; the cached root itself is not changed:
dist/mysqlio and tools/iogen-static are bound into a tmpfs there.

tools/matrix_guest.py runs on the host (the judging, and `mysqlio report` of record's trace:
report is not what is tested) with --tracer and --iogen naming `in_root_argv()`'s commands:
top, record, the exporter, doctor and a static iogen (the traced process shares the
tracers' root, as a server on such a host would) run inside that namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import server_roots

REPO = Path(__file__).resolve().parent.parent
DIST = REPO / "dist" / "mysqlio"
IOGEN_STATIC = REPO / "tools" / "iogen-static"  # make -C tools iogen-static
RESULTS = REPO / "build" / "dist-matrix"
INSIDE = "/run/mysqlio-dist"  # a tmpfs in the run's mount namespace, holding the executables
MATRIX_TIMEOUT_S = 600.0
# root name -> (the release, how server_roots names it)
ROOTS = {
    "bullseye": ("Debian 11", "bullseye"),
    "bookworm": ("Debian 12", "bookworm"),
    "sid": ("Debian sid", "sid-mysql"),
}
BOOKWORM = server_roots.RootSpec(
    name="bookworm",
    suite="bookworm",
    packages=("procps",),
    ready="usr/bin/ps",
    purpose="Debian 12 with nothing else (the single-file build's root)",
    versions_of=("libc6",),
)


def ensure_root(name: str) -> str:
    """The root directory of NAME (ROOTS), built first when missing."""
    if name not in ROOTS:
        raise ValueError(f"unknown root {name!r}; known: {', '.join(ROOTS)}")
    if name == "bookworm":
        return server_roots.ensure_spec(BOOKWORM)
    return server_roots.ensure_root(ROOTS[name][1])


@contextlib.contextmanager
def root_namespace(root: str, files: Sequence[Path], binds: Sequence[str] = ()) -> Iterator[int]:
    """A mount namespace whose root is ROOT, as a host's own (pivot_root, not chroot: the kernel
    names files up to a namespace's root, so a traced process and the tracer see the same
    names, as on a machine that is this root): /proc, /dev, /sys and BINDS (host directories,
    at their own paths) mounted in, FILES bound into a tmpfs at INSIDE. Yields the pid of the
    process that holds it; everything is unmounted when it ends."""
    r, q = root.rstrip("/"), shlex.quote
    script = ["set -e", f"mount --bind {q(r)} {q(r)}"]
    for path in ("/proc", "/dev", "/sys", *binds):
        script += [f"mkdir -p {q(r + path)}", f"mount --rbind {q(path)} {q(r + path)}"]
    script += [f"mkdir -p {q(r + INSIDE)}", f"mount -t tmpfs -o size=1m,mode=0755 mysqlio-dist {q(r + INSIDE)}"]
    for f in files:
        script += [f"touch {q(f'{r}{INSIDE}/{f.name}')}", f"mount --bind {q(str(f))} {q(f'{r}{INSIDE}/{f.name}')}"]
    script += [f"cd {q(r)}", "pivot_root . mnt", "umount -l /mnt", "echo ready", "exec sleep infinity"]
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "ready":
            holder.kill()
            raise RuntimeError(f"cannot make the {root} namespace: {holder.communicate()[1].strip()[-500:]}")
        yield holder.pid
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()


def in_root_argv(holder: int, name: str) -> list[str]:
    """A command prefix that runs INSIDE/NAME in HOLDER's namespace (root_namespace()) with the
    arguments that follow, in an empty environment but PATH, HOME, LC_ALL and TMPDIR. nsenter
    execs: its pid is the program's (whose own processes, for dist/mysqlio its bootloaders, follow)."""
    return [
        "nsenter",
        f"--mount=/proc/{holder}/ns/mnt",
        "/usr/bin/env",
        "-i",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "LC_ALL=C.UTF-8",
        f"TMPDIR={tempfile.gettempdir()}",
        f"{INSIDE}/{name}",
    ]


def run_matrix(name: str, root: str, exe: Path = DIST, out_dir: Path = RESULTS) -> tuple[int, dict[str, Any], str]:
    """tools/matrix_guest.py on this kernel with EXE and a static iogen in ROOT: (exit status,
    its JSON result, its stderr)."""
    tmp = tempfile.gettempdir()
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.json"
    out.unlink(missing_ok=True)
    with root_namespace(root, [exe, IOGEN_STATIC], [tmp]) as holder:
        proc = subprocess.run(
            [
                sys.executable,
                str(REPO / "tools" / "matrix_guest.py"),
                "--alias",
                "host",
                "--scratch",
                "tmp",
                "--tracer",
                shlex.join(in_root_argv(holder, exe.name)),
                "--iogen",
                shlex.join(in_root_argv(holder, IOGEN_STATIC.name)),
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=MATRIX_TIMEOUT_S,
            cwd=REPO,
            check=False,
        )
    result = json.loads(out.read_text()) if out.exists() else {}
    return proc.returncode, result, proc.stderr


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="+", choices=list(ROOTS), metavar="ROOT")
    ap.add_argument("--exe", default=str(DIST), help="the executable (default: dist/mysqlio)")
    args = ap.parse_args(argv)
    exe = Path(args.exe).resolve()
    for need, how in ((exe, "make dist"), (IOGEN_STATIC, "make -C tools iogen-static")):
        if not need.is_file():
            print(f"dist_roots: {need} is not built ({how})", file=sys.stderr)
            return 2
    code = 0
    for name in args.roots:
        try:
            root = ensure_root(name)
        except (RuntimeError, OSError) as exc:
            print(f"dist_roots: the {name} root: {exc}", file=sys.stderr)
            code = 1
            continue
        rc, result, stderr = run_matrix(name, root, exe)
        if not result:
            print(f"dist_roots: {name}: matrix_guest wrote no result (exit {rc}):\n{stderr[-2000:]}", file=sys.stderr)
        code = code or rc
        cells = {f"{mode}/{s}": v for mode, run in result.get("ebpf", {}).items() for s, v in run["cells"].items()}
        print(json.dumps({"root": name, "exit": rc, "cells": cells}))
    return code


if __name__ == "__main__":
    sys.exit(main())
