#!/usr/bin/env python3
"""A Debian kernel's BTF for any architecture, read from its image package without booting it.

    python3 tools/arch_btf.py btf arm64 6.1             # the cached raw BTF's path (JSON on stdout)
    python3 tools/arch_btf.py vmlinux-h arm64 sid OUT.h # `bpftool btf dump … format c` of it

The arm64 probes are built with the types of Debian's newest arm64 kernel (Makefile) and
their CO-RE relocations checked against Debian's arm64 kernels (tests/test_arm64.py), on a
machine of another architecture. Packages come through tools/kernels.py (its private apt
per suite, its cache: a package the kernel matrix fetched is not fetched again); only the
image's vmlinuz is read out of the package, and its BTF found by the header's magic:

- arm64: vmlinuz is a gzip'd Image, or an EFI zboot image ("zimg": a compressed payload at
  the offset its header gives);
- x86-64: a bzImage whose header gives the payload (xz up to Debian 12, zstd after);
- in the decompressed image the BTF blob (`.BTF`) starts with magic 0xeB9F, version 1 and
  a 24-byte header whose lengths give its size.

The BTF is kept as CACHE_DIR/btf/RELEASE.btf. Exit codes: 0 ok, 1 a fetch or extraction
failed (one line on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import struct
import subprocess
import sys
import tarfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernels import (  # tools/ is on sys.path: run from there, or by pytest (pythonpath)
    ALIASES,
    CACHE_DIR,
    FLAVOURS,
    LISTS_MAX_AGE_S,
    KernelFetchError,
    PrivateApt,
    _closure,
    _locked,
    _release_of,
    _resolve_image,
    log,
)

ARCHES = ("arm64", "amd64")  # Debian's names
BTF_HEADER = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type_off/len, str_off/len
BTF_MAGIC = 0xEB9F
BPFTOOL = os.environ.get("BPFTOOL", "bpftool")


@dataclass(frozen=True)
class KernelBtf:
    alias: str
    arch: str
    release: str  # e.g. "6.1.0-50-arm64"
    package: str  # the package the image came from
    version: str
    path: Path  # the raw BTF


def find_btf(image: bytes) -> bytes:
    """The largest well-formed BTF blob in a decompressed kernel image."""
    best = b""
    needle = struct.pack("<HBBI", BTF_MAGIC, 1, 0, BTF_HEADER.size)
    at = image.find(needle)
    while at >= 0:
        _, _, _, hdr_len, type_off, type_len, str_off, str_len = BTF_HEADER.unpack_from(image, at)
        end = at + hdr_len + str_off + str_len
        strings = image[at + hdr_len + str_off : end]
        # the kernel's own layout: types, then strings, which open and close with NUL
        well_formed = type_off == 0 and str_off == type_len and end <= len(image)
        if well_formed and strings[:1] == strings[-1:] == b"\0" and end - at > len(best):
            best = image[at:end]
        at = image.find(needle, at + 1)
    return best


def _zstd(data: bytes) -> bytes:
    proc = subprocess.run(["zstd", "-dc"], input=data, capture_output=True)
    if not proc.stdout:
        raise KernelFetchError(f"zstd -dc failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout  # the frame's output; bytes after the frame (padding) are no frame


def _decompress(data: bytes) -> bytes:
    """The payload by its magic: gzip, xz or zstd (one stream; what follows it is ignored)."""
    if data[:2] == b"\x1f\x8b":
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
    if data[:6] == b"\xfd7zXZ\0":
        return lzma.LZMADecompressor().decompress(data)
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return _zstd(data)
    raise KernelFetchError(f"an unknown compression (magic {data[:6].hex()})")


def kernel_image(vmlinuz: bytes) -> bytes:
    """The decompressed kernel of an arm64 vmlinuz (gzip'd Image, EFI zboot) or an x86 bzImage."""
    if vmlinuz[:2] == b"\x1f\x8b":
        return _decompress(vmlinuz)
    if vmlinuz[4:8] == b"zimg":  # EFI zboot: payload offset and size at 8 and 12
        offset, size = struct.unpack_from("<II", vmlinuz, 8)
        return _decompress(vmlinuz[offset : offset + size])
    if vmlinuz[0x202:0x206] == b"HdrS":  # bzImage: the protected-mode code after the setup sectors
        setup = ((vmlinuz[0x1F1] or 4) + 1) * 512
        offset, size = struct.unpack_from("<II", vmlinuz, 0x248)
        return _decompress(vmlinuz[setup + offset : setup + offset + size])
    return vmlinuz  # an uncompressed Image


def vmlinuz_of(deb: Path, release: str) -> bytes:
    """boot/vmlinuz-RELEASE (or usr/lib/modules/RELEASE/vmlinuz) of a kernel package, read
    as the package's data streams by: ./boot sorts first, so the rest is never unpacked."""
    names = {f"./boot/vmlinuz-{release}", f"./usr/lib/modules/{release}/vmlinuz"}
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    if member.name in names and member.isfile():
                        f = tar.extractfile(member)
                        if f is not None:
                            return f.read()
        finally:
            proc.kill()
    raise KernelFetchError(f"{deb.name} holds no vmlinuz-{release}")


def kernel_btf(alias: str, arch: str, *, refresh: bool = False) -> KernelBtf:
    """ALIAS's Debian kernel for ARCH ("arm64", "amd64"): its BTF, fetched and extracted once."""
    if alias not in ALIASES:
        raise KernelFetchError(f"unknown kernel alias {alias!r} (one of {', '.join(ALIASES)})")
    if arch not in ARCHES:
        raise KernelFetchError(f"unknown architecture {arch!r} (one of {', '.join(ARCHES)})")
    suite = ALIASES[alias]
    # which release ALIAS is, as resolved within the lists' age: no apt call at all
    # (apt-cache costs seconds a kernel on a loaded machine)
    known = CACHE_DIR / "btf" / f"{alias}-{arch}.json"
    if not refresh and known.exists() and time.time() - known.stat().st_mtime < LISTS_MAX_AGE_S:
        k = json.loads(known.read_text())
        if Path(k["path"]).exists():
            return KernelBtf(**{**k, "path": Path(k["path"])})
    with _locked(CACHE_DIR):
        apt = PrivateApt(suite, arch=arch)
        apt.update(force=refresh)
        package, fields = _resolve_image(apt, FLAVOURS.get(alias, ""))
        release = _release_of(package)
        out = CACHE_DIR / "btf" / f"{release}.btf"
        if not out.exists():
            wanted = _closure(apt, package, fields, release, headers=False)
            # sid splits the image: vmlinuz is in linux-binary-REL; up to Debian 13 in the image itself
            carrier = next((n for n in wanted if n.startswith("linux-binary-")), package)
            deb = apt.download(carrier, wanted[carrier]["Version"], CACHE_DIR / "debs" / suite)
            log(f"reading the BTF of {deb.name}")
            blob = find_btf(kernel_image(vmlinuz_of(deb, release)))
            if not blob:
                raise KernelFetchError(f"no BTF in the kernel of {deb.name} (built without CONFIG_DEBUG_INFO_BTF?)")
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            tmp.write_bytes(blob)
            tmp.rename(out)
    k = KernelBtf(alias, arch, release, package, fields["Version"], out)
    known.write_text(json.dumps({**k.__dict__, "path": str(out)}))
    return k


def write_vmlinux_h(btf: Path, out: Path) -> None:
    """The C types of a BTF (bpftool), for building probes of its architecture."""
    proc = subprocess.run([BPFTOOL, "btf", "dump", "file", str(btf), "format", "c"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelFetchError(f"bpftool btf dump {btf} failed: {proc.stderr.strip()}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(proc.stdout)
    tmp.rename(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("btf", "vmlinux-h"):
        p = sub.add_parser(name)
        p.add_argument("arch", choices=ARCHES)
        p.add_argument("alias", choices=list(ALIASES))
        if name == "vmlinux-h":
            p.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    try:
        k = kernel_btf(args.alias, args.arch)
        if args.cmd == "vmlinux-h":
            write_vmlinux_h(k.path, args.out)
            log(f"{args.out}: the types of {k.release} ({k.package} {k.version})")
        else:
            print(json.dumps({**k.__dict__, "path": str(k.path)}, indent=2))
    except (KernelFetchError, OSError) as e:
        print(f"arch_btf: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
