"""SystemTap modules built on one machine and run on another: `mysqlio stap-build` compiles
the scripts for a kernel release into MODULE.ko files and a manifest.json (release, scripts'
digest, protocol, checksums); `--stap-module` checks such a module for this machine before
staprun loads it. A module's kernel release is read from its ELF .modinfo section.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import stap_protocol as proto
from .errors import StapError, UserError
from .stap_compile import MODES, SCRIPTS, STAP_DEFINES, compat_runtime, compile_command, run_compile, script_dir

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
        built = run_compile(cmd, mode, stop, None)
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
