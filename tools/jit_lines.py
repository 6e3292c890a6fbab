#!/usr/bin/env python3
"""Where a loaded BPF program spends its time, by line of its C source: perf's samples
in the program's JIT image mapped through the kernel's line info (issue 19).

    sudo mysqlio top -p $(pidof mariadbd) --json > /dev/null &     # the program loaded
    perf record -a -F 9999 -o /tmp/p.data -- sleep 20                 # under load
    .venv/bin/python tools/jit_lines.py handle_exit_cast /tmp/p.data [--top 25]

perf cannot annotate BPF without binutils' libopcodes (Debian's perf has none), nor
bpftool disassemble without libbfd; the program's info (BPF_OBJ_GET_INFO_BY_FD) gives the
JIT address of each line-info record, whose line is named by the program's BTF. A sample
counts for the line whose code holds its address: the line of the instruction after a
load that missed the cache (where the CPU waited) more often than that of the load.
Machines without a PMU sample on the timer (cpu-clock), which is enough for this.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import ctypes
import os
import struct
import subprocess
import sys

_lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
_lib.btf__load_from_kernel_by_id.restype = ctypes.c_void_p
_lib.btf__load_from_kernel_by_id.argtypes = [ctypes.c_uint32]
_lib.btf__name_by_offset.restype = ctypes.c_char_p
_lib.btf__name_by_offset.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
_lib.btf__free.argtypes = [ctypes.c_void_p]

# struct bpf_prog_info (include/uapi/linux/bpf.h): offsets of the fields used here
_INFO_SIZE = 256
_NAME = 64
_NR_KSYMS, _KSYMS = 104, 112
_BTF_ID, _NR_LINE_INFO, _LINE_INFO = 128, 148, 152
_JITED_LINE_INFO, _NR_JITED_LINE_INFO, _LINE_INFO_REC, _JITED_LINE_INFO_REC = 160, 168, 172, 176


def _info(fd: int, fill: bytearray | None = None) -> bytearray:
    buf = ctypes.create_string_buffer(bytes(fill or bytearray(_INFO_SIZE)), _INFO_SIZE)
    size = ctypes.c_uint32(_INFO_SIZE)
    if _lib.bpf_obj_get_info_by_fd(fd, buf, ctypes.byref(size)) != 0:
        raise OSError(ctypes.get_errno(), "bpf_obj_get_info_by_fd")
    return bytearray(buf.raw)


def _find_program(name: str) -> tuple[int, bytearray]:
    """The fd and info of the first loaded program called `name` (the kernel keeps 15 characters)."""
    prog_id = ctypes.c_uint32(0)
    while _lib.bpf_prog_get_next_id(prog_id, ctypes.byref(prog_id)) == 0:
        fd = _lib.bpf_prog_get_fd_by_id(prog_id)
        if fd < 0:
            continue
        info = _info(fd)
        if info[_NAME : _NAME + 16].split(b"\0")[0].decode() == name[:15]:
            return fd, info
        os.close(fd)
    raise SystemExit(f"jit_lines: no loaded BPF program is called {name}")


def source_lines(fd: int, info: bytearray) -> list[tuple[int, str]]:
    """The program's (JIT offset, "file:line  text") records, sorted."""
    (n_lines,) = struct.unpack_from("<I", info, _NR_LINE_INFO)
    (n_jited,) = struct.unpack_from("<I", info, _NR_JITED_LINE_INFO)
    (line_rec,) = struct.unpack_from("<I", info, _LINE_INFO_REC)
    (jited_rec,) = struct.unpack_from("<I", info, _JITED_LINE_INFO_REC)
    (n_ksyms,) = struct.unpack_from("<I", info, _NR_KSYMS)
    if not n_lines or n_jited != n_lines:
        raise SystemExit("jit_lines: the program has no line info (built without -g?)")
    lines = ctypes.create_string_buffer(n_lines * line_rec)
    jited = ctypes.create_string_buffer(n_jited * jited_rec)
    ksyms = ctypes.create_string_buffer(n_ksyms * 8)
    ask = bytearray(_INFO_SIZE)
    for fmt, at, value in (
        ("<I", _NR_LINE_INFO, n_lines),
        ("<Q", _LINE_INFO, ctypes.addressof(lines)),
        ("<I", _LINE_INFO_REC, line_rec),
        ("<Q", _JITED_LINE_INFO, ctypes.addressof(jited)),
        ("<I", _NR_JITED_LINE_INFO, n_jited),
        ("<I", _JITED_LINE_INFO_REC, jited_rec),
        ("<I", _NR_KSYMS, n_ksyms),
        ("<Q", _KSYMS, ctypes.addressof(ksyms)),
    ):
        struct.pack_into(fmt, ask, at, value)
    got = _info(fd, ask)
    (btf_id,) = struct.unpack_from("<I", got, _BTF_ID)
    btf = _lib.btf__load_from_kernel_by_id(btf_id)
    if not btf:
        raise SystemExit("jit_lines: the program's BTF cannot be read")
    try:
        (base,) = struct.unpack_from("<Q", ksyms.raw, 0)  # the main function's start
        records = []
        for i in range(n_lines):
            (addr,) = struct.unpack_from("<Q", jited.raw, i * jited_rec)
            _, file_off, line_off, line_col = struct.unpack_from("<IIII", lines.raw, i * line_rec)
            file = (_lib.btf__name_by_offset(btf, file_off) or b"?").decode().rsplit("/", 1)[-1]
            text = (_lib.btf__name_by_offset(btf, line_off) or b"").decode().strip()
            # a subprogram's lines lie in its own image (its own perf symbol): below the
            # main one they are dropped here, above it they are past its every sample
            if addr >= base:
                records.append((addr - base, f"{file}:{line_col >> 10}  {text}"))
    finally:
        _lib.btf__free(btf)
    return sorted(records)


def sample_offsets(perf_data: str, program: str) -> collections.Counter[int]:
    """perf's samples in the program, by offset from its start. perf names it
    bpf_prog_<tag>_<name>, and its tag is not always the loaded program's (perf 6.1
    on Linux 6.18): matched by name, so the recording must hold one load of it."""
    out = subprocess.run(
        ["perf", "script", "-i", perf_data, "-F", "ip,sym,symoff"], capture_output=True, text=True, check=True
    ).stdout
    offsets: collections.Counter[int] = collections.Counter()
    for line in out.splitlines():
        sym = line.split()[-1] if line.strip() else ""
        name, _, off = sym.partition("+")
        if name.startswith("bpf_prog_") and name.split("_", 3)[-1] == program and off:
            offsets[int(off, 16)] += 1
    return offsets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program", help="the BPF program's name, e.g. handle_exit_cast")
    ap.add_argument("perf_data", help="perf record -a output taken while that program was loaded")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    fd, info = _find_program(args.program)
    records = source_lines(fd, info)
    offsets = sample_offsets(args.perf_data, args.program)
    total = sum(offsets.values())
    if not total:
        print(f"jit_lines: no sample in {args.program} in {args.perf_data}", file=sys.stderr)
        return 1
    starts = [off for off, _ in records]
    by_line: collections.Counter[str] = collections.Counter()
    for off, n in offsets.items():
        i = bisect.bisect_right(starts, off) - 1
        by_line[records[i][1] if i >= 0 else "(prologue)"] += n
    print(f"{args.program}: {total} samples")
    for where, n in by_line.most_common(args.top):
        print(f"{100 * n / total:5.1f} %  {n:6}  {where[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
