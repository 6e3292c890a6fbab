"""arm64, checked on an x86-64 machine without booting an arm64 kernel.

- The probes are built once per architecture (Makefile): tracer/bpf/mysqlio.aarch64.bpf.o
  with arm64's registers and syscall numbers and the types of Debian's newest arm64
  kernel; the loader picks the object by platform.machine() (mysqlio.bpf_arch).
- Each program's CO-RE relocations are resolved by libbpf (`bpftool gen min_core_btf`,
  tools/core_relos.py) against the BTF of Debian's arm64 kernels (12 and unstable: read
  out of their image packages, tools/arch_btf.py). What stays unresolved (existence checks
  aside) must stay unresolved for the x86-64 object on the same Debian kernel's amd64 build,
  which the kernel matrix boots and traces with (tests/test_kernel_matrix.py): the
  guarded reads of other kernels' layouts. The same for the BTF tracepoints attached to.
- The check fails on a BTF that lacks a field the arm64 programs read (syscallno renamed).
- arm64's syscallno is an s32 (the word after it is pmr on newer kernels): the programs
  read it with its own size and sign, as the kernels' BTF has it.
- Page-cache bytes are counted in the running kernel's pages (targ_page_shift, from the
  loader), not in 4 KiB ones: exact against the bytes written, on this kernel and as a
  64 KiB-page kernel's programs would count them.

Not checked here: the verifier of an arm64 kernel (nothing is loaded on one) and a trace
on arm64 hardware (docs/compatibility.md).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import pytest
from arch_btf import KernelBtf, kernel_btf
from core_relos import Relo, RelocationError, relocate, tp_btf_targets, unexpected
from kernels import KernelFetchError

from mysqlio import abi, bpf_arch
from mysqlio.abi import Op
from mysqlio.btf import BTF_KIND_STRUCT, kernel_btf_has, read_btf

REPO = Path(__file__).resolve().parent.parent
OBJECTS = {
    "arm64": REPO / "tracer" / "bpf" / "mysqlio.aarch64.bpf.o",
    "amd64": REPO / "tracer" / "bpf" / "mysqlio.x86_64.bpf.o",
}
# Debian 12 (syscallno, then unused2) and unstable (then pmr); Debian 13's 6.12 passes too
# (`python3 tools/core_relos.py`), left out of make test for its 93 MB package
KERNELS = ("6.1", "sid")


@pytest.fixture(scope="module")
def objects() -> dict[str, str]:
    missing = [str(p) for p in OBJECTS.values() if not p.exists()]
    if missing:
        pytest.fail(f"not built (make setup): {', '.join(missing)}")
    return {arch: str(p) for arch, p in OBJECTS.items()}


@pytest.fixture(scope="module")
def btfs() -> dict[tuple[str, str], KernelBtf]:
    """(alias, arch) -> that Debian kernel's BTF, fetched once (cached as the matrix's kernels are)."""
    if os.geteuid() != 0:
        pytest.fail("the arm64 checks fetch Debian's kernels into /var/cache/mysqlio: run as root")
    try:
        return {(a, arch): kernel_btf(a, arch) for a in KERNELS for arch in ("arm64", "amd64")}
    except KernelFetchError as e:
        pytest.fail(f"a Debian kernel's BTF could not be had: {e}")


def _relocate(obj: str, btf: Path) -> list[Relo]:
    try:
        return relocate(obj, str(btf))
    except RelocationError as e:
        pytest.fail(str(e))


def test_objects_are_named_for_the_machine() -> None:
    assert bpf_arch.object_name("aarch64") == bpf_arch.object_name("arm64") == OBJECTS["arm64"].name
    assert bpf_arch.object_name("x86_64") == OBJECTS["amd64"].name
    assert bpf_arch.object_name("riscv64") == "mysqlio.riscv64.bpf.o"  # none built: "not built (make setup)"
    assert bpf_arch.default_object().name == bpf_arch.object_name()


def test_each_object_reads_its_architectures_registers(objects: dict[str, str], btfs: dict) -> None:
    """The arm64 object reads arm64's struct pt_regs (syscallno, orig_x0 for the first
    argument), the x86-64 one x86's (orig_ax, di), each resolved on its own kernel."""
    fields = {}
    for arch in ("arm64", "amd64"):
        relos = _relocate(objects[arch], btfs[("6.1", arch)].path)
        fields[arch] = {r.spec for r in relos if "pt_regs" in r.spec and r.resolved}
        assert all(r.resolved for r in relos if "pt_regs" in r.spec), arch
    assert {"struct pt_regs.syscallno", "struct pt_regs___arm64.orig_x0"} <= fields["arm64"]
    assert not any("orig_ax" in f for f in fields["arm64"])
    assert {"struct pt_regs.orig_ax", "struct pt_regs.di"} <= fields["amd64"]
    assert not any("syscallno" in f or "orig_x0" in f for f in fields["amd64"])


@pytest.mark.parametrize("alias", KERNELS)
def test_arm64_relocations_resolve_as_on_x86(alias: str, objects: dict[str, str], btfs: dict) -> None:
    arm = _relocate(objects["arm64"], btfs[(alias, "arm64")].path)
    x86 = _relocate(objects["amd64"], btfs[(alias, "amd64")].path)
    assert unexpected(arm, x86) == []
    # and the same BTF tracepoints there to attach to
    targets = sorted(tp_btf_targets(objects["arm64"]))
    assert targets == sorted(tp_btf_targets(objects["amd64"]))
    names = [f"btf_trace_{t}" for t in targets]
    on_arm = kernel_btf_has(names, str(btfs[(alias, "arm64")].path))
    assert on_arm == kernel_btf_has(names, str(btfs[(alias, "amd64")].path))
    assert on_arm["btf_trace_sys_enter"] and on_arm["btf_trace_sys_exit"] and on_arm["btf_trace_block_bio_queue"]


def _renamed(btf: bytes, name: bytes, new: bytes) -> bytes:
    """The BTF with the string NAME (every member or type of that name) renamed NEW."""
    _, _, _, hdr_len, _, _, str_off, str_len = struct.unpack_from("<HBBIIIII", btf)
    start = hdr_len + str_off
    strings = btf[start : start + str_len]
    assert len(new) == len(name) and strings.count(b"\0" + name + b"\0") == 1
    return btf[:start] + strings.replace(b"\0" + name + b"\0", b"\0" + new + b"\0") + btf[start + str_len :]


def test_the_check_fails_on_a_kernel_lacking_a_field(objects: dict[str, str], btfs: dict, tmp_path: Path) -> None:
    """Debian 12's arm64 BTF with pt_regs' syscallno renamed: every read of it is named."""
    lacking = tmp_path / "no-syscallno.btf"
    lacking.write_bytes(_renamed(btfs[("6.1", "arm64")].path.read_bytes(), b"syscallno", b"syscallnX"))
    bad = unexpected(_relocate(objects["arm64"], lacking), _relocate(objects["amd64"], btfs[("6.1", "amd64")].path))
    assert {r.spec for r in bad} == {"struct pt_regs.syscallno"}
    # the exit programs' loads, and current_syscall_nr's read with its size and sign
    assert {r.kind for r in bad} == {"byte_off", "byte_sz", "signed", "lshift_u64", "rshift_u64"}
    assert {"tp_btf/sys_exit", "tp_btf/block_bio_queue"} <= {r.section for r in bad}


def _member_size(btf_path: str, struct_name: str, member: str) -> int:
    with read_btf(btf_path) as btf:
        sid = btf.find(struct_name, BTF_KIND_STRUCT)
        assert sid > 0, (btf_path, struct_name)
        found = [t for name, _, t in btf.members(sid) if name == member]
        assert len(found) == 1, (btf_path, struct_name, member)
        return btf.size(found[0])


def test_syscallno_is_read_with_the_kernels_size(objects: dict[str, str], btfs: dict) -> None:
    """The direct loads take the size of the object's syscallno; it is the kernels' (an
    8-byte read would take pmr's word with it). The probe read's size is relocated."""
    built = _member_size(objects["arm64"], "pt_regs", "syscallno")
    assert built == 4
    for alias in KERNELS:
        assert _member_size(str(btfs[(alias, "arm64")].path), "pt_regs", "syscallno") == built, alias
    relos = _relocate(objects["arm64"], btfs[("sid", "arm64")].path)
    read = {r.kind for r in relos if r.spec == "struct pt_regs.syscallno" and r.section == "tp_btf/block_bio_queue"}
    assert {"byte_sz", "signed"} <= read


def test_page_shift() -> None:
    assert [bpf_arch.page_shift(s) for s in (4096, 16384, 65536)] == [12, 14, 16]
    assert 1 << bpf_arch.page_shift() == mmap.PAGESIZE
    assert 1 << abi.DEFAULT_PAGE_SHIFT == 4096  # the probes' default: x86-64's page
    with pytest.raises(ValueError, match="not a power of two"):
        bpf_arch.page_shift(3000)


@pytest.mark.bpf
@pytest.mark.parametrize("shift", [None, 16], ids=["this-kernel", "64k-pages"])
def test_dirtied_bytes_in_the_kernels_pages(
    bpf_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shift: int | None
) -> None:
    """A new file's pages written and synced: the bytes dirtied are the bytes written, in
    the kernel's own pages. With the loader saying 64 KiB pages (as on RHEL's arm64
    kernels), each 4 KiB page the programs see counts 64 KiB: the value reaches them."""
    from mysqlio.bpf_probe import BpfProbe

    page = mmap.PAGESIZE
    if shift is not None:
        monkeypatch.setattr(bpf_arch, "page_shift", lambda page_size=None: shift)
    scale = (1 << shift) // page if shift is not None else 1
    pages = 6
    fd = os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        ino = os.fstat(fd).st_ino
        with BpfProbe(os.getpid(), page_cache=True, timed=False) as probe:
            assert probe.page_cache
            assert os.pwrite(fd, b"d" * (pages * page), 0) == pages * page
            os.fsync(fd)
            rows = [r for r in probe.drain() if r.file.ino == ino]
    finally:
        os.close(fd)
    totals = {op: sum(r.bytes for r in rows if r.op == op) for op in (Op.WRITE, Op.DIRTY, Op.WRITEBACK)}
    assert totals[Op.WRITE] == pages * page
    assert totals[Op.DIRTY] == pages * page * scale
    assert totals[Op.WRITEBACK] == pages * page  # bios' own sizes: no page arithmetic
