"""The machine the probes run on: which BPF object it loads, and its page size.

The probes are built once per architecture (Makefile): a syscall's number and
arguments sit in arch-specific registers (struct pt_regs), and the syscall
numbers differ. Each object is named after `platform.machine()`.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

BPF_DIR = Path(__file__).parent / "bpf"
# platform.machine() -> the name the objects are built under (Makefile)
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# the native object under its name before objects were per architecture: the single-file
# build (tools/build_dist.py) still packs only that one
LEGACY_OBJECT = BPF_DIR / "mysqlio.bpf.o"


def object_name(machine: str | None = None) -> str:
    """mysqlio.x86_64.bpf.o, mysqlio.aarch64.bpf.o; another machine's name names no
    object, so that loading says it is not built."""
    m = machine or platform.machine()
    return f"mysqlio.{MACHINES.get(m, m)}.bpf.o"


def default_object() -> Path:
    """This machine's object (the legacy name only where no per-architecture one ships)."""
    path = BPF_DIR / object_name()
    return path if path.exists() or not LEGACY_OBJECT.exists() else LEGACY_OBJECT


def page_shift(page_size: int | None = None) -> int:
    """log2 of the kernel's page size, for the probes' targ_page_shift: 12 on x86-64,
    12, 14 or 16 on arm64 (a 64 KiB kernel counted in 4 KiB pages would be 16x low)."""
    size = page_size if page_size is not None else os.sysconf("SC_PAGE_SIZE")
    if size <= 0 or size & (size - 1):
        raise ValueError(f"a page size of {size} bytes is not a power of two")
    return size.bit_length() - 1
