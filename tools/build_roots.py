#!/usr/bin/env python3
"""Build hosts for SystemTap modules: Debian roots of the target kernel's own release.

    python3 tools/build_roots.py 6.12 sid          # roots + modules for those kernels, JSON on stdout

    from build_roots import ensure_modules         # tools/ on sys.path
    built = ensure_modules("6.12")                 # Built(release, modules=Path(...), compile_s, root, ...)

A DBA compiles a SystemTap module on a build host that runs the servers' distribution
(its systemtap, its gcc, the linux-headers of the servers' exact kernel) and copies the
module to the servers, which have only staprun. Here the build host is a chroot:

- the root: `debootstrap --variant=minbase --include=systemtap,make,python3,python3-numpy,
  GCC,linux-headers-RELEASE SUITE` (GCC: the compiler its kernel was built with, as the
  headers name it: gcc-14 for Debian 13, gcc-16 for sid), made and cached by tools/server_roots.py
  (mirror, lock, stamp, rename when done) as /var/cache/mysqlio/roots/stap-SUITE. RELEASE is
  what tools/kernels.py resolves for the alias today; when it changes, the root is rebuilt.
  SUITE is the kernel's own (kernels.ALIASES); where that release's systemtap cannot build
  for its kernel, LATER_STAP names a later release whose systemtap is installed instead
  (server_roots.RootSpec.later: the root's own apt, that suite pinned low).
- the compile: mysqlio's own `stap-build --kernel RELEASE -o DIR`, run by the root's python3
  inside the root (`unshare --mount`, then /proc, /dev and this checkout, read-only, bound into
  it, and `chroot`): the stap command line is mysqlio's own, the stap, runtime, gcc and
  headers are the root's (python3-numpy: mysqlio's stap code imports numpy).
- the cache: /var/cache/mysqlio/stap/RELEASE-KEY, KEY over the scripts and mysqlio's stap
  code (sources_digest) and the root's stamp (suite, packages, the installed versions of
  systemtap and the headers) and its compiler's version: a second run compiles nothing.

A failed compile raises BuildError with stap's (or the compiler's) telling line and the tail
of its output: the test records that line as the kernel's result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import server_roots
from kernels import ALIASES, ensure_kernel

REPO = Path(__file__).resolve().parent.parent
STAP_CACHE = Path(os.environ.get("MYSQLIO_STAP_CACHE", "/var/cache/mysqlio/stap"))
# a kernel whose own release's systemtap cannot build for it: SystemTap from a later release.
# Debian 13's systemtap 5.1-5 cannot build mysqlio's scripts for its own 6.12.117 kernel: its
# tracepoint query for include/trace/events/syscalls.h fails to compile ('"COUNT_ARGS"
# redefined' and '"__COUNT_ARGS" redefined', under -Werror), so stap-build stops with
# "semantic error: while resolving probe point: identifier 'kernel'" at
# kernel.trace("raw_syscalls:sys_exit"). forky's systemtap 5.6-1 builds them.
LATER_STAP: dict[str, str] = {"6.12": "forky"}
STAP_PACKAGES = ("systemtap", "systemtap-common", "systemtap-runtime")
BASE_PACKAGES = ("systemtap", "make", "python3", "python3-numpy")
SRC = "/opt/mysqlio"  # this checkout, read-only, inside the root
PYPATH = "/opt/mysqlio-path"  # holds mysqlio -> SRC/tracer
OUT = "/opt/mysqlio-out"  # stap-build's output directory, bound from the cache
COMPILE_TIMEOUT_S = 1800.0


class BuildError(RuntimeError):
    """stap-build failed in the root; `line` is the line that says why."""

    def __init__(self, message: str, line: str, output: str) -> None:
        super().__init__(message)
        self.line = line
        self.output = output


@dataclass(frozen=True)
class Built:
    alias: str
    release: str
    suite: str
    root: str
    modules: Path
    compile_s: float | None  # None: from the cache
    root_s: float  # finding (or building) the root
    versions: dict[str, str]
    stap_suite: str = ""  # where its systemtap came from (the root's suite, or LATER_STAP's)


def log(message: str) -> None:
    print(f"build_roots: {message}", file=sys.stderr, flush=True)


def spec_for(alias: str, release: str, compiler: str | None) -> server_roots.RootSpec:
    """COMPILER: the one the headers name (kernels.Kernel.compiler): its package is included,
    as the headers depend only on a variant without the plain name (sid's gcc-16-for-host
    installs x86_64-linux-gnu-gcc-16, the headers' Makefile calls gcc-16)."""
    suite = ALIASES[alias]
    later = LATER_STAP.get(alias)
    headers = f"linux-headers-{release}"
    return server_roots.RootSpec(
        name=f"stap-{suite}",
        suite=suite,
        packages=(*BASE_PACKAGES, *([compiler] if compiler else []), headers),
        ready=f"lib/modules/{release}/build",
        purpose=f"SystemTap build host for {release}",
        versions_of=("systemtap", headers, "python3"),
        later=(later, STAP_PACKAGES) if later else None,
    )


def compiler_versions(root: str, release: str) -> dict[str, str]:
    """The compiler the headers name (from their .kernelvariables) and its version in the root."""
    try:
        text = Path(root, f"usr/src/linux-headers-{release}/.kernelvariables").read_text(errors="replace")
    except OSError:
        return {}
    found = re.search(r"^CC\s*=.*?\b((?:gcc|clang)-\d+)\s*$", text, re.M)
    if not found:
        return {}
    return {found[1]: server_roots.installed_version(root, found[1])}


def _telling(output: str) -> str:
    """The line that says why: the first error line of stap / the compiler / mysqlio."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for pattern in (r"\berror:", r"^ERROR:", r"^semantic error", r"^mysqlio: ", r"^Pass \d: .*failed"):
        for line in lines:
            if re.search(pattern, line):
                return line
    return lines[-1] if lines else "no output"


def sources_digest(stap_version: str = "") -> str:
    """What a module depends on in this checkout: the scripts and tapset (stap/), mysqlio's
    stap modules (their defines, line protocol and stap command line: tracer/stap*.py) and
    the stap that compiles them (sha256, hex). Read as files: nothing of mysqlio is imported
    for it (the host's python may lack mysqlio's dependencies)."""
    h = hashlib.sha256()
    files = sorted(p for p in (REPO / "stap").rglob("*") if p.is_file() and p.suffix in (".stp", ".stpm"))
    files += sorted((REPO / "tracer").glob("stap*.py"))
    for path in files:
        h.update(f"{path.relative_to(REPO)}\0".encode())
        h.update(path.read_bytes())
        h.update(b"\0")
    h.update(stap_version.encode())
    return h.hexdigest()


def _module_key(root: str, release: str) -> str:
    stamp = server_roots.read_stamp(root) or {}
    h = hashlib.sha256(sources_digest().encode())
    h.update(json.dumps([stamp.get("suite"), stamp.get("packages"), stamp.get("versions")]).encode())
    h.update(json.dumps(compiler_versions(root, release), sort_keys=True).encode())
    return h.hexdigest()[:16]


def ensure_modules(alias: str, cache: Path = STAP_CACHE) -> Built:
    """mysqlio's modules for ALIAS's kernel, compiled in a root of its Debian release (built
    and compiled only when not cached). Raises BuildError when the compile fails."""
    # the release the guest boots, and the compiler its headers name (read from the headers'
    # package, fetched here for that only: the compile uses the root's own)
    kernel = ensure_kernel(alias, headers=True)
    release = kernel.release
    spec = spec_for(alias, release, kernel.compiler)
    started = time.monotonic()
    root = server_roots.ensure_spec(spec)
    root_s = time.monotonic() - started
    versions = {**((server_roots.read_stamp(root) or {}).get("versions") or {}), **compiler_versions(root, release)}
    stap_suite = spec.later[0] if spec.later else spec.suite
    target = cache / f"{release}-{_module_key(root, release)}"
    if (target / "manifest.json").is_file():
        return Built(alias, release, spec.suite, root, target, None, root_s, versions, stap_suite)
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{release}-", dir=cache))
    link = Path(root) / PYPATH.lstrip("/") / "mysqlio"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(f"{SRC}/tracer")
    log(f"stap-build --kernel {release} in {root} (systemtap {versions.get('systemtap', '?')})")
    started = time.monotonic()
    proc = server_roots.run_in_root(
        root,
        ["python3", "-m", "mysqlio", "stap-build", "--kernel", release, "-o", OUT],
        binds={str(REPO): SRC, str(staging): OUT},
        read_only=[str(REPO)],
        env={"PYTHONPATH": PYPATH, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout_s=COMPILE_TIMEOUT_S,
    )
    compile_s = time.monotonic() - started
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 or not (staging / "manifest.json").is_file():
        shutil.rmtree(staging, ignore_errors=True)
        line = _telling(proc.stderr or proc.stdout)
        raise BuildError(
            f"stap-build for {release} in the {spec.suite} root failed (exit {proc.returncode}): {line}",
            line,
            output[-4000:],
        )
    try:
        staging.rename(target)
    except OSError:  # another run made it first
        shutil.rmtree(staging, ignore_errors=True)
    log(f"{release}: modules in {target} ({compile_s:.0f} s)")
    return Built(alias, release, spec.suite, root, target, compile_s, root_s, versions, stap_suite)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("aliases", nargs="+", choices=list(ALIASES), metavar="ALIAS")
    args = ap.parse_args(argv)
    out = []
    code = 0
    for alias in args.aliases:
        try:
            b = ensure_modules(alias)
        except BuildError as exc:
            log(str(exc))
            print(exc.output, file=sys.stderr)
            code = 1
            continue
        except (RuntimeError, OSError) as exc:
            log(f"{alias}: {exc}")
            code = 1
            continue
        out.append({**b.__dict__, "modules": str(b.modules)})
    print(json.dumps(out, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
