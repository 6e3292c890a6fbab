#!/usr/bin/env python3
"""A BPF object's CO-RE relocations resolved against a kernel's BTF file, without loading it.

    python3 tools/core_relos.py OBJECT BTF [--against OBJECT2 BTF2]

`bpftool -d gen min_core_btf BTF OUT OBJECT` runs libbpf's own CO-RE relocation of
every program of OBJECT against BTF (bpf_core_calc_relo_insn) and logs each result;
this reads that log. A relocation that finds no target does not fail there, nor at
load: libbpf turns its instruction into an invalid call, which the verifier accepts
only where it is dead code (a field read behind bpf_core_field_exists, a program the
loader leaves out on that kernel). So what may stay unresolved is what stays
unresolved for an object known to load: `unexpected(arch, reference)` names the
relocations of one object that resolve nowhere on its kernel, are no existence check
(those are meant to come out 0), and are not among the unresolved ones of the
reference object (the same probes for x86-64, booted on the same Debian kernel by
the kernel matrix) on its kernel.

Exit codes: 0 none unexpected, 1 some (listed on stdout) or bpftool failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

BPFTOOL = os.environ.get("BPFTOOL", "bpftool")
# kinds that test for a field, type or enum value: unresolved, they give 0 and patch nothing
EXISTENCE_KINDS = frozenset({"field_exists", "type_exists", "type_matches", "enumval_exists"})
# libbpf: prog 'SECTION': relo #N: <KIND> [ID] SPEC (ACCESS @ offset OFF)  (the local side)
_LOCAL = re.compile(r"^libbpf: prog '([^']+)': relo #(\d+): <([a-z0-9_]+)> \[\d+\] (.+?)(?: \(.*\)| = .*)?$")
_OUTCOME = re.compile(r"^libbpf: prog '([^']+)': relo #(\d+): (matching candidate|no matching targets found)")


class RelocationError(RuntimeError):
    """bpftool could not relocate the object against the BTF; the message says why."""


@dataclass(frozen=True)
class Relo:
    section: str  # the program's ELF section (min_core_btf names programs by it)
    kind: str  # libbpf's name: byte_off, byte_sz, field_exists, enumval_value, target_type_id, ...
    spec: str  # the local access by name: "struct pt_regs.syscallno", "enum pageflags::PG_head"
    resolved: bool

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.section, self.kind, self.spec)


def parse(log: str) -> list[Relo]:
    """The relocations of a `bpftool -d gen min_core_btf` log, one per (section, relo #)."""
    local: dict[tuple[str, int], tuple[str, str]] = {}
    resolved: set[tuple[str, int]] = set()
    for line in log.splitlines():
        if m := _OUTCOME.match(line):
            if m.group(3) == "matching candidate":
                resolved.add((m.group(1), int(m.group(2))))
        elif m := _LOCAL.match(line):
            local.setdefault((m.group(1), int(m.group(2))), (m.group(3), m.group(4)))
    # a kind without candidates to match (type_id_local) is resolved by construction
    return [
        Relo(section, kind, spec, (section, n) in resolved or kind == "local_type_id")
        for (section, n), (kind, spec) in sorted(local.items())
    ]


def relocate(obj: str, btf: str) -> list[Relo]:
    """Every CO-RE relocation of OBJ, resolved against the BTF file BTF by libbpf (bpftool)."""
    with tempfile.TemporaryDirectory(prefix="core_relos.") as tmp:
        proc = subprocess.run(
            [BPFTOOL, "-d", "gen", "min_core_btf", btf, os.path.join(tmp, "min.btf"), obj],
            capture_output=True,
            text=True,
        )
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        tail = [line for line in log.splitlines() if "libbpf: prog" not in line][-5:]
        raise RelocationError(f"bpftool gen min_core_btf {btf} {obj} failed: " + " / ".join(tail))
    relos = parse(log)
    if not relos:
        raise RelocationError(f"bpftool logged no CO-RE relocation of {obj} against {btf}")
    return relos


def unexpected(relos: Iterable[Relo], reference: Iterable[Relo]) -> list[Relo]:
    """RELOS' unresolved relocations that are no existence check and that stay resolved
    (or do not occur) in REFERENCE."""
    allowed = {r.key for r in reference if not r.resolved}
    return [r for r in relos if not r.resolved and r.kind not in EXISTENCE_KINDS and r.key not in allowed]


def section_names(obj: str) -> list[str]:
    """The ELF section names of a (little-endian, 64-bit) BPF object."""
    data = Path(obj).read_bytes()
    if data[:6] != b"\x7fELF\x02\x01":
        raise RelocationError(f"{obj} is no little-endian 64-bit ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    return [data[strtab + h[0] : data.index(b"\0", strtab + h[0])].decode() for h in headers]


def tp_btf_targets(obj: str) -> set[str]:
    """The BTF tracepoints the object's programs attach to (SEC("tp_btf/NAME")); a kernel
    takes such a program only where its BTF has the typedef btf_trace_NAME."""
    return {name.split("/", 1)[1] for name in section_names(obj) if name.startswith("tp_btf/")}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("object")
    ap.add_argument("btf")
    ap.add_argument("--against", nargs=2, metavar=("OBJECT", "BTF"), help="the reference object and its kernel")
    args = ap.parse_args(argv)
    try:
        relos = relocate(args.object, args.btf)
        reference = relocate(*args.against) if args.against else []
    except (RelocationError, OSError) as e:
        print(f"core_relos: {e}", file=sys.stderr)
        return 1
    bad = unexpected(relos, reference)
    unresolved = sum(not r.resolved for r in relos)
    print(f"{len(relos)} relocations, {unresolved} unresolved, {len(bad)} unexpected")
    for key in sorted({r.key for r in bad}):
        section, kind, spec = key
        print(f"  {section}: <{kind}> {spec} (x{sum(r.key == key for r in bad)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
