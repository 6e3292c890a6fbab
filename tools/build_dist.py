#!/usr/bin/env python3
"""`make dist`: dist/mysqlio, one executable file that runs mysqlio as root on a host with
nothing installed (no Python, no libbpf, no clang), glibc or not as old as 2.28.

    .venv/bin/python tools/build_dist.py --out dist/mysqlio     # the Makefile runs it

Two steps, both from PyPI packages the Makefile installs into the project's venv:
1. PyInstaller (tools/dist/mysqlio.spec) freezes this venv's Python, mysqlio and its runtime
   dependencies (matplotlib left out: only `plot` needs it), the compiled probes
   (every tracer/bpf/*.bpf.o), the SystemTap scripts and the build host's libbpf.so.1 (Debian's
   libbpf1) with the libraries it needs, into one onefile executable. It unpacks itself into
   $TMPDIR at each start and still needs the host's C library, of the build host's version.
2. staticx wraps that executable with the build host's C library and dynamic loader: the
   result loads no library of the host at all, so it runs where glibc is older than the build
   host's (Debian 11's 2.31, RHEL 8's 2.28). Uncompressed (--no-compress): PyInstaller's
   archive is already compressed, and xz over it costs seconds at every start.

Prints one JSON line: the file, its size and each step's seconds. A failure is one line on
stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "tools" / "dist" / "mysqlio.spec"
STEP_TIMEOUT_S = 1200.0


class DistError(RuntimeError):
    pass


def libbpf_path() -> str:
    """The build host's libbpf.so.1 (x86-64), from the loader's cache."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise DistError(f"cannot list the shared libraries (ldconfig -p): {exc}") from None
    for line in listing.splitlines():
        found = re.match(r"\s*libbpf\.so\.1 \((.*?)\) => (\S+)", line)
        if found and "x86-64" in found[1]:
            return found[2]
    raise DistError("libbpf.so.1 is not installed on the build host (make setup installs Debian's libbpf1)")


def run(step: str, argv: Sequence[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=STEP_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise DistError(f"{step} failed (exit {proc.returncode}): {lines[-1] if lines else 'no output'}")
    return time.monotonic() - started


def build(out: Path, work: Path) -> dict[str, object]:
    if not list((REPO / "tracer" / "bpf").glob("mysqlio*.bpf.o")):
        raise DistError("tracer/bpf/ holds no built probes (make bpf)")
    bindir = Path(sys.executable).parent
    if not (bindir / "staticx").exists():
        raise DistError(f"staticx is not installed in {bindir.parent} (make dist installs it)")
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    link = src / "mysqlio"  # PyInstaller finds the package here, not through the editable install
    if not link.is_symlink():
        link.symlink_to(REPO / "tracer")
    env = {
        **os.environ,
        "MYSQLIO_DIST_SRC": str(src),
        "MYSQLIO_DIST_LIBBPF": libbpf_path(),
        "MYSQLIO_DIST_WORK": str(work),
        # zlib level 6, not PyInstaller's 9 for the archive: 0.6 % larger, 2.6 times faster
        # (pyarrow's libarrow.so here), which is half of the build's time
        "PYINSTALLER_ZLIB_COMPRESSION_LEVEL": os.environ.get("PYINSTALLER_ZLIB_COMPRESSION_LEVEL", "6"),
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",  # staticx runs patchelf
    }
    frozen = work / "pyinstaller" / "mysqlio"
    pyinstaller_s = run(
        "PyInstaller",
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level=WARN",
            f"--distpath={frozen.parent}",
            f"--workpath={work / 'work'}",
            str(SPEC),
        ],
        env,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    staticx_s = run("staticx", [str(bindir / "staticx"), "--no-compress", str(frozen), str(tmp)], env)
    tmp.chmod(0o755)
    tmp.replace(out)
    return {
        "file": str(out),
        "bytes": out.stat().st_size,
        "pyinstaller_s": round(pyinstaller_s, 1),
        "staticx_s": round(staticx_s, 1),
        "libbpf": env["MYSQLIO_DIST_LIBBPF"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "dist" / "mysqlio"), help="the executable to write")
    ap.add_argument("--work", default=str(REPO / "build" / "dist"), help="PyInstaller's work directory")
    args = ap.parse_args(argv)
    if shutil.which("objcopy") is None:
        print("build_dist: objcopy is missing (Debian package binutils): staticx needs it", file=sys.stderr)
        return 1
    try:
        result = build(Path(args.out), Path(args.work))
    except (DistError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"build_dist: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
