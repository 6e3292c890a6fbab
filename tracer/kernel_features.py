"""What this kernel's BPF can do, found by probing it, never by its version.

Vendor kernels (RHEL 8's 4.18, RHEL 9's 5.14) carry backports, so a version
number says little. Each feature is asked of the kernel itself: a helper or
map type through libbpf's probes (a tiny program or map is loaded), an
instruction by loading a program that uses it, a tracepoint's arguments from
the kernel's BTF. The probe object adapts to the answers before load
(tracer/probe.py): a map retyped, a program left out or retargeted, a
`const volatile` switch. `degraded()` says what a missing feature costs.

MYSQLIO_KERNEL_FEATURES=-atomics,-task_pt_regs,... pretends a feature is
missing, so the fallbacks are tested on any kernel (they also run for real on
the old kernels of the kernel matrix).
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass, replace

from . import libbpf
from .btf import (
    BTF_KIND_FUNC,
    BTF_KIND_FUNC_PROTO,
    BTF_KIND_PTR,
    BTF_KIND_STRUCT,
    BTF_KIND_TYPEDEF,
    BTF_KIND_UNION,
    read_btf,
)

BTF_PATH = "/sys/kernel/btf/vmlinux"
FEATURES_ENV = "MYSQLIO_KERNEL_FEATURES"

# uapi enum values (stable)
BPF_PROG_TYPE_SOCKET_FILTER = 1
BPF_PROG_TYPE_TRACEPOINT = 5
BPF_FUNC_get_current_task_btf = 158
BPF_FUNC_task_pt_regs = 175
BPF_FUNC_find_vma = 180

BPF_PSEUDO_KFUNC_CALL = 2


@dataclass(frozen=True)
class KernelFeatures:
    """The answers; each field names its upstream floor for the docs, not for a check."""

    task_btf: bool  # bpf_get_current_task_btf (5.11)
    atomics: bool  # BPF_ATOMIC compare-and-swap (5.12)
    ringbuf: bool  # BPF_MAP_TYPE_RINGBUF (5.8)
    # position of the request among io_uring_complete's arguments (None: the
    # tracepoint has no request pointer, as before 5.15, or no tracepoint)
    uring_complete_req_arg: int | None
    # the tracepoint that sees an io_uring request at submission and the
    # request's position there (io_uring_submit_req from 6.4, _sqe before)
    uring_submit: tuple[str, int] | None
    # io_uring_complete(ctx, user_data, res, ...) without the request, but a
    # submission tracepoint with it: requests matched by ring and user_data
    uring_complete_by_user_data: bool = False
    # msync's file from its address: "find_vma" (bpf_find_vma, 5.17), "mm_rb" (a
    # walk down the VMA rb-tree, before 6.1), or None (msync not counted)
    msync_vma: str | None = None
    # page cache and devices: the dirtying tracepoint (writeback_dirty_folio from
    # 5.18, writeback_dirty_page before), block_bio_queue's argument count (2 before
    # 5.11: the queue first), writeback_start present
    dirty_event: str | None = None
    bio_queue_args: int | None = None
    writeback_start: bool = False
    # bpf_task_pt_regs (5.15): syscall arguments read at exit, enter programs only to time
    task_pt_regs: bool = False
    # the bpf_rdonly_cast kfunc (6.2): a request's file (inode, super block) read by plain loads
    rdonly_cast: bool = False

    @property
    def page_cache(self) -> bool:
        """Every hook the page-cache and device accounting needs."""
        return bool(self.dirty_event and self.bio_queue_args and self.writeback_start)

    def degraded(self) -> list[str]:
        """What this kernel costs the user, one sentence each (empty: nothing)."""
        out = []
        if not self.task_btf:
            out.append("no bpf_get_current_task_btf (Linux 5.11): the fd table is read with probe reads")
        if not self.task_pt_regs:
            out.append(
                "no bpf_task_pt_regs (Linux 5.15): every traced syscall also runs an enter program, "
                "even when requests are not timed"
            )
        if not self.rdonly_cast:
            out.append("no bpf_rdonly_cast (Linux 6.2): a request's file is read with probe reads")
        if not self.atomics:
            out.append(
                "no BPF compare-and-swap (Linux 5.12): a latency maximum can miss a larger value "
                "written at the same instant by another CPU"
            )
        if not self.ringbuf:
            out.append("no BPF ring buffer (Linux 5.8): `record` cannot run; top and exporter can")
        if self.uring_complete_by_user_data:
            out.append(
                "io_uring_complete names no request (before Linux 5.15): each completion is matched to its "
                "submission by ring and user_data; not counted: a request already in flight when tracing "
                "starts, and one refused while being prepared (e.g. EBADF), which never reaches the "
                "submission tracepoint"
            )
        elif self.uring_complete_req_arg is None:
            out.append(
                "io_uring_complete names no request and no submission tracepoint does either: io_uring "
                "requests are NOT counted on this kernel"
            )
        elif self.uring_submit is None:
            out.append("no io_uring submission tracepoint with the request: io_uring requests are counted, not timed")
        if self.msync_vma is None:
            out.append(
                "neither bpf_find_vma (Linux 5.17) nor a VMA rb-tree: msync(2) names no file here and is not counted"
            )
        if not self.page_cache:
            out.append(
                "a writeback or block tracepoint is missing: page-cache dirtying, writeback and device "
                "counters are not available on this kernel"
            )
        return out


def probe() -> KernelFeatures:
    """Ask the running kernel (needs the privileges the probes need)."""
    params = {
        tp: tracepoint_params(tp)
        for tp in (
            "io_uring_complete",
            "io_uring_submit_req",
            "io_uring_submit_sqe",
            "writeback_dirty_folio",
            "writeback_dirty_page",
            "block_bio_queue",
            "writeback_start",
        )
    }
    bio_queue = params["block_bio_queue"]
    found = KernelFeatures(
        task_btf=_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_get_current_task_btf),
        atomics=_loads(_CMPXCHG_PROGRAM),
        ringbuf=libbpf.lib().libbpf_probe_bpf_map_type(libbpf.BPF_MAP_TYPE_RINGBUF, None) == 1,
        uring_complete_req_arg=uring_complete_req_arg(params["io_uring_complete"]),
        uring_submit=uring_submit(params["io_uring_submit_req"], params["io_uring_submit_sqe"]),
        msync_vma=msync_vma(
            _helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_find_vma), struct_has_member("mm_struct", "mm_rb")
        ),
        dirty_event=next(
            (tp for tp in ("writeback_dirty_folio", "writeback_dirty_page") if params[tp] is not None), None
        ),
        bio_queue_args=len(bio_queue) if bio_queue and len(bio_queue) in (1, 2) else None,
        writeback_start=params["writeback_start"] is not None,
        task_pt_regs=_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_task_pt_regs),
        rdonly_cast=_rdonly_cast(),
    )
    found = replace(
        found,
        uring_complete_by_user_data=found.uring_complete_req_arg is None
        and found.uring_submit is not None
        and complete_by_user_data(params["io_uring_complete"]),
    )
    return _pretend(found, os.environ.get(FEATURES_ENV, ""))


def _pretend(found: KernelFeatures, spec: str) -> KernelFeatures:
    """Features named "-name" in MYSQLIO_KERNEL_FEATURES taken as missing."""
    missing: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name = item.lstrip("-")
        if name in (
            "task_btf",
            "task_pt_regs",
            "rdonly_cast",
            "atomics",
            "ringbuf",
            "writeback_start",
        ):
            missing[name] = False
        elif name in ("msync_vma", "dirty_event", "bio_queue_args"):
            missing[name] = None
        elif name == "find_vma":
            # the rb-tree walk is only there before 6.1: without find_vma, msync goes uncounted
            missing["msync_vma"] = None
        elif name == "uring_submit":
            missing[name] = None
        elif name == "uring_complete":
            # no usable completion tracepoint: io_uring not counted. (The 5.10
            # matching by user_data needs that kernel's tracepoint arguments, so
            # it runs only there, in the kernel matrix.)
            missing["uring_complete_req_arg"] = None
            missing["uring_complete_by_user_data"] = False
        else:
            raise ValueError(f"{FEATURES_ENV}: unknown feature {name!r}")
    return replace(found, **missing)  # type: ignore[arg-type]


def msync_vma(find_vma: bool, mm_rb: bool) -> str | None:
    if find_vma:
        return "find_vma"
    return "mm_rb" if mm_rb else None


def struct_has_member(struct: str, member: str, path: str = BTF_PATH) -> bool:
    """The kernel's struct has a member of that name (BTF), also inside its anonymous
    structs and unions (5.10's mm_struct keeps mm_rb in one), as CO-RE finds it."""
    with read_btf(path) as btf:
        type_id = btf.find(struct, BTF_KIND_STRUCT)
        todo = [type_id] if type_id > 0 else []
        while todo:
            for name, _offset, member_type in btf.members(todo.pop()):
                if name == member:
                    return True
                if not name:  # an anonymous struct or union: its members are the struct's
                    resolved = btf.resolve(member_type)
                    if btf.kind(resolved) in (BTF_KIND_STRUCT, BTF_KIND_UNION):
                        todo.append(resolved)
        return False


def _helper(prog_type: int, helper: int) -> bool:
    return libbpf.lib().libbpf_probe_bpf_helper(prog_type, helper, None) == 1


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, dst | (src << 4), off, imm)


# r0 = 0; *(u64 *)(r10 - 8) = 0; r1 = 1; r0 = cmpxchg_64(r10 - 8, r0, r1); r0 = 0; exit
_CMPXCHG_PROGRAM = b"".join(
    (
        _insn(0xB7, dst=0, imm=0),  # BPF_ALU64 | BPF_MOV | BPF_K
        _insn(0x7A, dst=10, off=-8, imm=0),  # BPF_ST | BPF_MEM | BPF_DW
        _insn(0xB7, dst=1, imm=1),
        _insn(0xDB, dst=10, src=1, off=-8, imm=0xF1),  # BPF_STX | BPF_ATOMIC | BPF_DW, BPF_CMPXCHG
        _insn(0xB7, dst=0, imm=0),
        _insn(0x95),  # BPF_JMP | BPF_EXIT
    )
)


def _rdonly_cast(path: str = BTF_PATH) -> bool:
    """Whether the kernel takes what the *_cast programs do with the kfunc
    bpf_rdonly_cast: cast to struct file, and cast an fd table's slot to struct
    fd to load its first 8 bytes. Asked with one program doing both
    (bpf_rdonly_cast(0, <struct file>); r0 = *(u64 *)bpf_rdonly_cast(0, <struct fd>);
    r0 = 0; exit), loaded, never run."""
    with read_btf(path) as btf:
        func = btf.find("bpf_rdonly_cast", BTF_KIND_FUNC)
        file = btf.find("file", BTF_KIND_STRUCT)
        fd = btf.find("fd", BTF_KIND_STRUCT)
    if func <= 0 or file <= 0 or fd <= 0:
        return False
    return _loads(
        b"".join(
            (
                _insn(0xB7, dst=1, imm=0),
                _insn(0xB7, dst=2, imm=file),
                _insn(0x85, src=BPF_PSEUDO_KFUNC_CALL, imm=func),  # BPF_JMP | BPF_CALL
                _insn(0xB7, dst=1, imm=0),
                _insn(0xB7, dst=2, imm=fd),
                _insn(0x85, src=BPF_PSEUDO_KFUNC_CALL, imm=func),
                _insn(0x79, dst=0, src=0, off=0),  # BPF_LDX | BPF_MEM | BPF_DW
                _insn(0xB7, dst=0, imm=0),
                _insn(0x95),
            )
        )
    )


def _loads(program: bytes) -> bool:
    """Whether the kernel accepts this socket-filter program (then unloaded)."""
    insns = ctypes.create_string_buffer(program, len(program))
    fd = libbpf.lib().bpf_prog_load(
        BPF_PROG_TYPE_SOCKET_FILTER, b"mio_probe", b"GPL", ctypes.addressof(insns), len(program) // 8, None
    )
    if fd < 0:
        return False
    os.close(fd)
    return True


@dataclass(frozen=True)
class Param:
    """One argument of a tracepoint, as BTF types it."""

    pointer: bool
    pointee: str  # "struct io_kiocb", "void", ... ("" when not a pointer)


def tracepoint_params(tracepoint: str, path: str = BTF_PATH) -> list[Param] | None:
    """The arguments of a BTF tracepoint (btf_trace_<name>, without its leading
    `void *__data`), or None when the kernel has no such tracepoint."""
    btf_types = read_btf(path)
    with btf_types as btf:
        type_id = btf.find(f"btf_trace_{tracepoint}", BTF_KIND_TYPEDEF)
        if type_id <= 0:
            return None
        proto = btf.resolve(btf.target(type_id))  # typedef -> pointer
        proto = btf.resolve(btf.target(proto))  # pointer -> func proto
        if btf.kind(proto) != BTF_KIND_FUNC_PROTO:
            return None
        params = []
        for param_type in btf.func_params(proto)[1:]:
            resolved = btf.resolve(param_type)
            if btf.kind(resolved) != BTF_KIND_PTR:
                params.append(Param(pointer=False, pointee=""))
                continue
            target = btf.resolve(btf.target(resolved))
            name = btf.name(target) if target else ""
            kind = "struct " if target and btf.kind(target) == BTF_KIND_STRUCT else ""
            params.append(Param(pointer=True, pointee=f"{kind}{name}" if name else "void"))
        return params


def _request_arg(params: list[Param] | None) -> int | None:
    """Position of the io_uring request: the argument typed struct io_kiocb *,
    else (kernels that pass it as void *) a void * second argument after the
    ring's context."""
    if not params:
        return None
    for i, p in enumerate(params):
        if p.pointee == "struct io_kiocb":
            return i
    if len(params) >= 2 and params[0].pointer and params[1].pointer and params[1].pointee == "void":
        return 1
    return None


def uring_complete_req_arg(params: list[Param] | None) -> int | None:
    # io_uring_complete(ctx, req, user_data, res, cflags, ...) since 5.15;
    # (ctx, user_data, res) before: no request, so nothing to count from
    return _request_arg(params)


def complete_by_user_data(params: list[Param] | None) -> bool:
    # Linux 5.10: io_uring_complete(void *ctx, u64 user_data, long res, ...)
    return bool(params) and len(params) >= 3 and params[0].pointer and not params[1].pointer and not params[2].pointer


def uring_submit(submit_req: list[Param] | None, submit_sqe: list[Param] | None) -> tuple[str, int] | None:
    if (arg := _request_arg(submit_req)) is not None:
        return ("io_uring_submit_req", arg)
    if (arg := _request_arg(submit_sqe)) is not None:
        return ("io_uring_submit_sqe", arg)
    return None
