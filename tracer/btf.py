"""A BTF file read by type id: the kernel's /sys/kernel/btf/vmlinux (which
tracepoints and fields this kernel has) or a BPF object's (its structs' layout,
checked against abi.py). Through libbpf's btf__* calls."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

from .libbpf import BtfType, lib


class _BtfParam(ctypes.Structure):
    _fields_ = [("name_off", ctypes.c_uint32), ("type", ctypes.c_uint32)]


class _BtfMember(ctypes.Structure):
    _fields_ = [("name_off", ctypes.c_uint32), ("type", ctypes.c_uint32), ("offset", ctypes.c_uint32)]


# BTF kinds (include/uapi/linux/btf.h)
BTF_KIND_PTR = 2
BTF_KIND_STRUCT = 4
BTF_KIND_UNION = 5
BTF_KIND_TYPEDEF = 8
BTF_KIND_FUNC = 12
BTF_KIND_FUNC_PROTO = 13
_BTF_MODIFIERS = (8, 9, 10, 11, 18)  # typedef, volatile, const, restrict, type_tag


class BtfTypes:
    """A parsed BTF file (the kernel's /sys/kernel/btf/vmlinux, or a BPF object's), read by type id."""

    def __init__(self, path: str) -> None:
        self._lib = lib()
        ctypes.set_errno(0)
        self._btf = self._lib.btf__parse(path.encode(), None)
        if not self._btf:
            err = ctypes.get_errno()
            raise OSError(err, f"btf__parse({path}) failed: {os.strerror(err) if err else 'unknown error'}")

    def find(self, name: str, kind: int) -> int:
        """The id of the type of that name and kind, <= 0 when there is none."""
        return self._lib.btf__find_by_name_kind(self._btf, name.encode(), kind)

    def _type(self, type_id: int) -> BtfType:
        return self._lib.btf__type_by_id(self._btf, type_id).contents

    def kind(self, type_id: int) -> int:
        return (self._type(type_id).info >> 24) & 0x1F if type_id else 0

    def name(self, type_id: int) -> str:
        return self._lib.btf__name_by_offset(self._btf, self._type(type_id).name_off).decode()

    def target(self, type_id: int) -> int:
        """What a pointer, typedef or modifier refers to."""
        return self._type(type_id).size

    def resolve(self, type_id: int) -> int:
        """The type behind typedefs and const/volatile/restrict modifiers."""
        while type_id and self.kind(type_id) in _BTF_MODIFIERS:
            type_id = self.target(type_id)
        return type_id

    def func_params(self, proto_id: int) -> list[int]:
        """The parameter type ids of a FUNC_PROTO."""
        head = self._type(proto_id)
        vlen = head.info & 0xFFFF
        if not vlen:
            return []
        params = ctypes.cast(ctypes.addressof(head) + ctypes.sizeof(BtfType), ctypes.POINTER(_BtfParam * vlen))
        return [p.type for p in params.contents]

    def size(self, type_id: int) -> int:
        """The size in bytes of a type (typedefs and arrays resolved); < 0 on error."""
        return self._lib.btf__resolve_size(self._btf, type_id)

    def members(self, struct_id: int) -> list[tuple[str, int, int]]:
        """The (name, bit offset, type id) of each member of a STRUCT or UNION."""
        head = self._type(struct_id)
        vlen = head.info & 0xFFFF
        if not vlen:
            return []
        members = ctypes.cast(ctypes.addressof(head) + ctypes.sizeof(BtfType), ctypes.POINTER(_BtfMember * vlen))
        kind_flag = head.info >> 31  # then the offset's low 24 bits are the offset, the high 8 a bitfield size
        return [
            (
                self._lib.btf__name_by_offset(self._btf, m.name_off).decode(),
                m.offset & 0xFFFFFF if kind_flag else m.offset,
                m.type,
            )
            for m in members.contents
        ]

    def close(self) -> None:
        if self._btf:
            self._lib.btf__free(self._btf)
            self._btf = None

    def __enter__(self) -> BtfTypes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_btf(path: str = "/sys/kernel/btf/vmlinux") -> BtfTypes:
    return BtfTypes(path)


def kernel_btf_has(
    names: Iterable[str], path: str = "/sys/kernel/btf/vmlinux", kind: int = BTF_KIND_TYPEDEF
) -> dict[str, bool]:
    """Which of `names` the kernel's BTF defines (e.g. btf_trace_<tracepoint>
    typedefs: a tp_btf program loads only if its tracepoint's is there).
    Raises OSError when the BTF file cannot be parsed."""
    with read_btf(path) as btf:
        return {name: btf.find(name, kind) > 0 for name in names}
