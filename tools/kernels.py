#!/usr/bin/env python3
"""Fetch Debian's stock kernels (and on request their headers) for booting under emulation.

    python3 tools/kernels.py fetch 5.10 6.1 6.12 sid 6.1-rt  # images + modules, JSON on stdout
    python3 tools/kernels.py fetch --headers 6.1             # + linux-headers-REL, -common, linux-kbuild
    python3 tools/kernels.py aliases                         # the aliases and their Debian suites

    from kernels import ensure_kernel                        # tools/ on sys.path
    k = ensure_kernel("6.1", headers=True)
    k.release, k.vmlinuz, k.modules, k.headers               # "6.1.0-41-amd64", Path(...), ...

Aliases (resolved at fetch time from the suite's metapackage `linux-image-ARCH`, so
"6.1" is whatever 6.1.0-NN Debian 12 ships today):

    "5.10" Debian 11 (bullseye)   "6.1" Debian 12 (bookworm)
    "6.12" Debian 13 (trixie)     "sid" the newest kernel in unstable
    "6.1-rt" Debian 12's PREEMPT_RT flavour (`linux-image-rt-ARCH`): the syscall tracepoints'
             layout of RHEL 9.3+ (a longer struct trace_entry: probes/mysqlio.bpf.c, enter_tracepoint)

How (stdlib only, as root):
- A PRIVATE apt configuration per suite (its own sources.list, lists, cache and an empty
  dpkg status under CACHE_DIR/apt/SUITE, `-o Dir::Etc::sourcelist=… -o Dir::Etc::sourceparts=- …`), with
  the mirror host the machine's own /etc/apt sources use. The system's sources, lists and
  cache are never touched. Lists are refreshed when older than a day (or `refresh=True`).
- `apt-get download` into CACHE_DIR/debs (kept: a second run downloads nothing), then
  `dpkg-deb -x` into KERNELS_DIR/RELEASE, a tree the guest can see (an unpacked kernel
  under /var/cache boots, but its module links dangle in a virtme-ng guest; /srv works).
- `depmod` on the unpacked modules; /lib/modules/RELEASE on the host becomes a link to
  them (or, when it already is a real directory, e.g. made by an installed headers
  package of the same release, gets links to their entries). With headers,
  `build` and `source` in that modules directory point at the unpacked
  usr/src/linux-headers-RELEASE and its -common tree (SystemTap's `stap -r RELEASE` and
  kbuild look there); the compiler the headers were built for is reported
  (`Kernel.compiler`, e.g. "gcc-12"), not installed.

Environment: MYSQLIO_KERNEL_CACHE (default /var/cache/mysqlio), MYSQLIO_KERNELS_DIR
(default /srv/mysqlio/kernels). Idempotent; one process at a time (a lock file).
Exit codes of the CLI: 0 ok, 1 a fetch failed (message on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# alias -> Debian suite
ALIASES: dict[str, str] = {"5.10": "bullseye", "6.1": "bookworm", "6.12": "trixie", "sid": "sid", "6.1-rt": "bookworm"}
# alias -> the image metapackage's flavour prefix (linux-image-FLAVOUR-ARCH); "" for the stock one
FLAVOURS: dict[str, str] = {"6.1-rt": "rt-"}
DEBIAN_RELEASE = {"bullseye": "Debian 11", "bookworm": "Debian 12", "trixie": "Debian 13", "sid": "Debian unstable"}
CACHE_DIR = Path(os.environ.get("MYSQLIO_KERNEL_CACHE", "/var/cache/mysqlio"))
KERNELS_DIR = Path(os.environ.get("MYSQLIO_KERNELS_DIR", "/srv/mysqlio/kernels"))
LISTS_MAX_AGE_S = 24 * 3600
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
HOST_MODULES = Path("/lib/modules")


class KernelFetchError(RuntimeError):
    """A kernel could not be fetched or unpacked; the message says which step and why."""


@dataclass(frozen=True)
class Kernel:
    """One unpacked Debian kernel.

    alias     "5.10", "6.1", "6.12", "sid" or "6.1-rt"
    release   `uname -r` of that kernel, e.g. "6.1.0-41-amd64" ("6.1.0-41-rt-amd64")
    vmlinuz   the bootable image (KERNELS_DIR/RELEASE/boot/vmlinuz-RELEASE, or in packages
              newer than Debian 13 …/usr/lib/modules/RELEASE/vmlinuz)
    modules   its unpacked modules directory (…/lib/modules/RELEASE; /lib/modules/RELEASE
              on the host leads there)
    headers   …/usr/src/linux-headers-RELEASE when fetched with headers, else None
    suite     the Debian suite it came from; package: the image package's name
    version   the Debian package version; root: the unpacked tree
    headers_common   …/usr/src/linux-headers-…-common (with headers), else None
    compiler  the compiler the kernel was built with, from the headers' dependencies
              (e.g. "gcc-12"), when headers were fetched, else None
    """

    alias: str
    release: str
    vmlinuz: Path
    modules: Path
    headers: Path | None
    suite: str = ""
    package: str = ""
    version: str = ""
    root: Path | None = None
    headers_common: Path | None = None
    compiler: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def log(msg: str) -> None:
    print(f"kernels: {msg}", file=sys.stderr, flush=True)


def _run(cmd: Sequence[str], *, cwd: Path | None = None, what: str = "", env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise KernelFetchError(f"{what or cmd[0]} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


# --- the machine's own Debian mirror ------------------------------------------------


def source_entries(etc_apt: str = "/etc/apt") -> Iterator[tuple[str, list[str], str | None]]:
    """(uri, suites, signed_by) of every `deb` entry in apt's sources (both formats)."""
    etc = Path(etc_apt)
    files = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*"))]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.name.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.strip()
                if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    yield uri, fields.get("suites", "").split(), fields.get("signed-by")
        elif f.name.endswith(".list"):
            for line in text.splitlines():
                line = line.split("#", 1)[0].strip()
                m = re.match(r"deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line)
                if not m:
                    continue
                opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
                yield m.group(2), [m.group(3)], opts.get("signed-by")


def debian_mirror() -> tuple[str, str | None]:
    """The Debian archive URI the machine's own apt sources use, and its keyring."""
    for uri, suites, signed_by in source_entries():
        if uri.rstrip("/").endswith("/debian") and any(
            s.split("-")[0] in (*ALIASES.values(), "stable", "testing", "unstable", "oldstable") for s in suites
        ):
            return uri.rstrip("/"), signed_by
    return DEFAULT_MIRROR, None


# --- a private apt per suite ----------------------------------------------------------


def _host_arch() -> str:
    return _run(["dpkg", "--print-architecture"]).strip()


class PrivateApt:
    """apt-get / apt-cache on one Debian suite, with lists and cache of its own; ARCH: another
    Debian architecture's packages (tools/arch_btf.py reads their kernels' BTF)."""

    def __init__(self, suite: str, cache_dir: Path = CACHE_DIR, arch: str | None = None) -> None:
        self.suite = suite
        host = _host_arch()
        self.arch = arch or host
        # another architecture's lists apart: apt's list cleanup would drop the host's
        self.foreign = self.arch != host
        self.dir = cache_dir / "apt" / (f"{suite}-{self.arch}" if self.foreign else suite)
        self.lists = self.dir / "lists"
        self.cache = self.dir / "cache"
        self.sources = self.dir / "sources.list"
        self.conf = self.dir / "apt.conf"
        self.parts = self.dir / "apt.conf.d"  # empty: the system's hooks and extra index targets stay out
        self.prefs = self.dir / "preferences.d"
        self.stamp = self.lists / ".mysqlio-updated"
        # an empty dpkg status: candidates come from the suite alone, never from what this
        # machine has installed (an installed version may not be downloadable from it)
        self.status = self.dir / "status"

    def _write_config(self) -> None:
        for d in (self.lists / "partial", self.cache / "archives" / "partial", self.parts, self.prefs):
            d.mkdir(parents=True, exist_ok=True)
        self.status.touch()
        mirror, signed_by = debian_mirror()
        keyring = signed_by or (DEFAULT_KEYRING if Path(DEFAULT_KEYRING).exists() else None)
        opts = f"[signed-by={keyring}] " if keyring else ""
        text = f"deb {opts}{mirror} {self.suite} main\n"
        if not self.sources.exists() or self.sources.read_text() != text:
            self.sources.write_text(text)
        # The system's Acquire settings (proxies, retries, timeouts) carry over; nothing else does.
        dump = subprocess.run(["apt-config", "dump", "Acquire"], capture_output=True, text=True).stdout
        keep = [
            line
            for line in dump.splitlines()
            if line.startswith("Acquire::") and not line.startswith(("Acquire::IndexTargets", "Acquire::Languages"))
        ]
        keep.append('Acquire::Languages "none";')
        # Read through APT_CONFIG before anything else, so that these Dir settings decide which
        # further files apt reads (an -o on the command line comes too late for that).
        keep += [f'Dir::Etc::parts "{self.parts}";', 'Dir::Etc::main "/dev/null";']
        self.conf.write_text("\n".join(keep) + "\n")

    def _env(self) -> dict[str, str]:
        return {**os.environ, "APT_CONFIG": str(self.conf), "LC_ALL": "C"}

    def options(self) -> list[str]:
        return [
            "-o",
            f"Dir::Etc::sourcelist={self.sources}",
            "-o",
            "Dir::Etc::sourceparts=-",
            "-o",
            f"Dir::Etc::preferencesparts={self.prefs}",
            "-o",
            "Dir::Etc::preferences=/dev/null",
            "-o",
            f"Dir::State::Lists={self.lists}",
            "-o",
            f"Dir::State::status={self.status}",
            "-o",
            f"Dir::Cache={self.cache}",
            "-o",
            "Acquire::Languages=none",
            "-o",
            "APT::Get::List-Cleanup=true",
            *(
                ["-o", f"APT::Architecture={self.arch}", "-o", f"APT::Architectures={self.arch}"]
                if self.foreign
                else []
            ),
        ]

    def update(self, *, force: bool = False) -> None:
        self._write_config()
        fresh = self.stamp.exists() and time.time() - self.stamp.stat().st_mtime < LISTS_MAX_AGE_S
        if fresh and not force and any(self.lists.glob("*Packages*")):
            return
        log(f"apt-get update ({self.suite})")
        _run(
            ["apt-get", "-q", *self.options(), "--error-on=any", "update"],
            what=f"apt-get update ({self.suite})",
            env=self._env(),
        )
        self.stamp.touch()

    def show(self, package: str) -> dict[str, str] | None:
        """The candidate's control fields, or None when the suite has no such package."""
        proc = subprocess.run(
            ["apt-cache", *self.options(), "show", "--no-all-versions", package],
            capture_output=True,
            text=True,
            env=self._env(),
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            return None
        fields: dict[str, str] = {}
        key = ""
        for line in proc.stdout.splitlines():
            if line[:1].isspace() and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        return fields

    def download(self, package: str, version: str, dest: Path) -> Path:
        """PACKAGE=VERSION's .deb in DEST, downloaded only when not already there."""
        arch = self.arch
        deb = dest / f"{package}_{version.replace(':', '%3a')}_{arch}.deb"
        alt = dest / f"{package}_{version.replace(':', '%3a')}_all.deb"
        for d in (deb, alt):
            if d.exists() and d.stat().st_size > 0:
                return d
        dest.mkdir(parents=True, exist_ok=True)
        _chown_to_apt(dest)
        log(f"apt-get download {package}={version} ({self.suite})")
        _run(
            ["apt-get", "-q", *self.options(), "download", f"{package}={version}"],
            cwd=dest,
            what="apt-get download",
            env=self._env(),
        )
        for d in (deb, alt):
            if d.exists():
                return d
        found = sorted(dest.glob(f"{package}_*.deb"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise KernelFetchError(f"apt-get download {package}={version} left no .deb in {dest}")
        return found[-1]


def _chown_to_apt(path: Path) -> None:
    """apt downloads as the unprivileged _apt user when it can write there (else it warns)."""
    if os.geteuid() == 0:
        with suppress(LookupError, OSError):
            shutil.chown(path, user="_apt")


# --- resolving, unpacking, linking -------------------------------------------------


def _deps(fields: dict[str, str]) -> list[str]:
    """Package names in Depends (every alternative), in order."""
    return re.findall(r"(?:^|[,|]\s*)([a-z0-9][a-z0-9.+-]+)", fields.get("Depends", ""))


def _resolve_image(apt: PrivateApt, flavour: str = "") -> tuple[str, dict[str, str]]:
    arch = apt.arch
    meta = apt.show(f"linux-image-{flavour}{arch}")
    if meta is None:
        raise KernelFetchError(f"{apt.suite} has no linux-image-{flavour}{arch} metapackage")
    names = [d for d in _deps(meta) if d.startswith("linux-image-")]
    candidates: list[str] = []
    for name in names:
        candidates += [name] if name.endswith("-unsigned") else [name, f"{name}-unsigned"]
    for name in candidates:
        fields = apt.show(name)
        if fields is not None:
            return name, fields
    raise KernelFetchError(
        f"linux-image-{arch} in {apt.suite} depends on {names or meta.get('Depends')}, none of which is downloadable"
    )


def _closure(
    apt: PrivateApt, package: str, fields: dict[str, str], release: str, *, headers: bool
) -> dict[str, dict[str, str]]:
    """PACKAGE and the dependencies that carry its files, name -> control fields.

    Up to Debian 13 linux-image-REL holds the kernel and its modules itself; in sid it is a
    small package depending on linux-binary-REL (vmlinuz), linux-modules-REL and
    linux-base-REL. Headers: linux-headers-REL, its -common package and linux-kbuild.
    """
    out = {package: fields}
    todo = [fields]
    while todo:
        for dep in _deps(todo.pop()):
            if dep in out:
                continue
            payload = release in dep and dep.startswith(
                ("linux-binary-", "linux-modules-", "linux-base-", "linux-image-")
            )
            if not (payload or (headers and dep.startswith(("linux-headers-", "linux-kbuild-")))):
                continue
            f = apt.show(dep)
            if f is None:
                if dep.endswith("-unsigned"):
                    continue  # the other half of "signed | unsigned"
                raise KernelFetchError(f"{apt.suite} has no {dep} (a dependency of {package})")
            out[dep] = f
            todo.append(f)
    return out


def _compiler(wanted: dict[str, dict[str, str]]) -> str | None:
    """The compiler the kernel was built with, from the headers' Depends (gcc-12, gcc-16-for-host, ...)."""
    for fields in wanted.values():
        for dep in _deps(fields):
            m = re.match(r"(?:linux-compiler-)?(gcc-\d+|clang-\d+)(?:-x86|-for-host)?$", dep)
            if m:
                return m.group(1)
    return None


def _release_of(package: str) -> str:
    rel = package.removeprefix("linux-image-")
    return rel.removesuffix("-unsigned")


def _unpack(deb: Path, root: Path) -> None:
    stamps = root / ".mysqlio-unpacked"
    stamp = stamps / deb.name
    if stamp.exists():
        return
    log(f"dpkg-deb -x {deb.name} {root}")
    root.mkdir(parents=True, exist_ok=True)
    _run(["dpkg-deb", "-x", str(deb), str(root)], what="dpkg-deb -x")
    stamps.mkdir(exist_ok=True)
    stamp.touch()


def _modules_dir(root: Path, release: str) -> Path:
    for d in (root / "lib" / "modules" / release, root / "usr" / "lib" / "modules" / release):
        if d.is_dir():
            return d
    raise KernelFetchError(f"no lib/modules/{release} in {root}")


def _depmod(modules: Path, release: str) -> None:
    if (modules / "modules.dep").exists() and (modules / "modules.dep").stat().st_size > 0:
        return
    base = modules.parent.parent.parent  # BASE/lib/modules/REL
    depmod = shutil.which("depmod") or "/usr/sbin/depmod"
    if not Path(depmod).exists():
        raise KernelFetchError("depmod is missing (Debian package kmod; 'make setup' installs it)")
    _run([depmod, "-a", "-b", str(base), release], what="depmod")


def _made_by_us(link_target: Path) -> bool:
    """A link into another kernels directory of this tool: DIR/RELEASE/[usr/]lib/modules/RELEASE[/...].

    A run with other MYSQLIO_KERNELS_DIR (CI's isolated caches) must re-point it: kept, it sent
    SystemTap to a tree fetched without headers."""
    parts = link_target.parts
    for i in range(len(parts) - 3):
        if parts[i + 1 : i + 3] == ("lib", "modules") or parts[i + 1 : i + 4] == ("usr", "lib", "modules"):
            release = parts[i]
            tail = parts[i + 3] if parts[i + 1] == "lib" else (parts[i + 4] if len(parts) > i + 4 else "")
            return bool(release) and tail == release
    return False


def _link(path: Path, target: Path) -> None:
    """PATH -> TARGET, replacing a link of ours (or a dangling one), never a real file."""
    if path.is_symlink():
        if Path(os.readlink(path)) == target:
            return
        current = Path(os.readlink(path))
        ours = any(str(current).startswith(str(d)) for d in (KERNELS_DIR, CACHE_DIR)) or _made_by_us(current)
        if not ours and path.exists():
            log(f"leaving {path} -> {current} as it is (not ours)")
            return
        path.unlink()
    elif path.exists():
        return
    path.symlink_to(target)


def _link_host_modules(modules: Path, release: str) -> None:
    host = HOST_MODULES / release
    if host.is_dir() and not host.is_symlink():
        # e.g. an installed linux-headers-RELEASE made it (with build/source): add the modules beside
        for entry in modules.iterdir():
            _link(host / entry.name, entry)
    else:
        HOST_MODULES.mkdir(parents=True, exist_ok=True)
        _link(host, modules)


def _link_headers(root: Path, modules: Path, release: str) -> tuple[Path, Path | None]:
    src = root / "usr" / "src"
    headers = src / f"linux-headers-{release}"
    if not headers.is_dir():
        raise KernelFetchError(f"no usr/src/linux-headers-{release} in {root}")
    common = sorted(p for p in src.glob("linux-headers-*common*") if p.is_dir())
    source = common[-1] if common else None
    for name, target in (("build", headers), ("source", source or headers)):
        link = modules / name
        if link.is_symlink() or link.exists():
            # the package's own links are absolute host paths (/usr/src/...): re-root them
            if link.is_symlink() and Path(os.readlink(link)) != target:
                link.unlink()
            else:
                continue
        link.symlink_to(target)
    host = HOST_MODULES / release
    if host.is_dir() and not host.is_symlink():
        for name, target in (("build", headers), ("source", source or headers)):
            link = host / name
            if link.is_symlink() and not link.exists():
                link.unlink()  # dangling
            if not link.exists():
                link.symlink_to(target)
    return headers, source


@contextmanager
def _locked(cache_dir: Path) -> Iterator[None]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_kernel(alias: str, headers: bool = False, *, refresh: bool = False, _locked_already: bool = False) -> Kernel:
    """Download (once) and unpack (once) ALIAS's stock Debian kernel; with HEADERS its headers too.

    Needs root (writes CACHE_DIR, KERNELS_DIR and /lib/modules). Raises KernelFetchError with
    the failing step's output. `refresh=True` re-reads the suite's package lists now.
    """
    if alias not in ALIASES:
        raise KernelFetchError(f"unknown kernel alias {alias!r} (one of {', '.join(ALIASES)})")
    if os.geteuid() != 0:
        raise KernelFetchError("fetching kernels needs root (it writes /var/cache, /srv and /lib/modules)")
    suite = ALIASES[alias]
    with nullcontext() if _locked_already else _locked(CACHE_DIR):
        apt = PrivateApt(suite)
        apt.update(force=refresh)
        try:
            package, fields = _resolve_image(apt, FLAVOURS.get(alias, ""))
        except KernelFetchError:
            if refresh:
                raise
            apt.update(force=True)
            package, fields = _resolve_image(apt, FLAVOURS.get(alias, ""))
        release, version = _release_of(package), fields["Version"]
        debs_dir = CACHE_DIR / "debs" / suite
        wanted = _closure(apt, package, fields, release, headers=False)
        if headers:
            hdr = apt.show(f"linux-headers-{release}")
            if hdr is None:
                raise KernelFetchError(f"{suite} has no linux-headers-{release}")
            wanted.update(_closure(apt, f"linux-headers-{release}", hdr, release, headers=True))
        try:
            debs = [apt.download(name, f["Version"], debs_dir) for name, f in wanted.items()]
        except KernelFetchError:
            if refresh:
                raise
            return ensure_kernel(alias, headers, refresh=True, _locked_already=True)  # lists older than the mirror
        compiler = _compiler(wanted) if headers else None
        root = KERNELS_DIR / release
        for deb in debs:
            _unpack(deb, root)
        modules = _modules_dir(root, release)
        # boot/vmlinuz-REL up to Debian 13; newer packages put it beside the modules
        vmlinuz = next((p for p in (root / "boot" / f"vmlinuz-{release}", modules / "vmlinuz") if p.exists()), None)
        if vmlinuz is None:
            raise KernelFetchError(f"{package} unpacked no boot/vmlinuz-{release} nor {modules}/vmlinuz")
        _depmod(modules, release)
        hdr_dir = common = None
        if headers:
            hdr_dir, common = _link_headers(root, modules, release)
        _link_host_modules(modules, release)
    return Kernel(
        alias=alias,
        release=release,
        vmlinuz=vmlinuz,
        modules=modules,
        headers=hdr_dir,
        suite=suite,
        package=package,
        version=version,
        root=root,
        headers_common=common,
        compiler=compiler,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and unpack kernels; prints a JSON list of them")
    f.add_argument("--headers", action="store_true", help="also linux-headers-REL, its -common and linux-kbuild")
    f.add_argument("--refresh", action="store_true", help="re-read the package lists even if fresh")
    f.add_argument("aliases", nargs="+", metavar="ALIAS", choices=list(ALIASES))
    sub.add_parser("aliases", help="print the aliases and their Debian suites as JSON")
    args = ap.parse_args(argv)
    if args.cmd == "aliases":
        print(json.dumps({a: {"suite": s, "distro": DEBIAN_RELEASE[s]} for a, s in ALIASES.items()}, indent=2))
        return 0
    out = []
    try:
        for alias in args.aliases:
            t0 = time.monotonic()
            k = ensure_kernel(alias, headers=args.headers, refresh=args.refresh)
            log(f"{alias}: {k.release} ready in {time.monotonic() - t0:.1f} s")
            out.append(k.to_json())
    except KernelFetchError as e:
        print(f"kernels: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
