"""The BPF object against tracer/abi.py: a struct whose layout differs cannot load.

tracer/abi.py is generated from probes/mysqlio.h (tools/gen_abi.py), and so is the
object (clang). Both come from the same header only if both were rebuilt after its
last change: this compares every struct of abi.STRUCTS that the object's BTF
describes (size; each member's name, offset and size) before the object is loaded.
(struct mio_event travels through the ring buffer and is not in the BTF: the
ring buffer reader checks each record's size.)
"""

from __future__ import annotations

import ctypes

from . import abi
from .btf import BTF_KIND_STRUCT, BtfTypes
from .errors import BpfError


def layout_differences(btf: BtfTypes, structs: dict[str, type[ctypes.Structure]]) -> list[str]:
    """What differs between the object's BTF and the ctypes structs, one line each
    (empty when they agree); structs the BTF does not describe are not compared."""
    differences = []
    for c_name, struct in structs.items():
        type_id = btf.find(c_name, BTF_KIND_STRUCT)
        if type_id <= 0:
            continue
        where = f"struct {c_name}"
        if btf.size(type_id) != ctypes.sizeof(struct):
            differences.append(f"{where}: {btf.size(type_id)} bytes in the object, {ctypes.sizeof(struct)} in Python")
        btf_members = [(name, offset // 8, btf.size(member)) for name, offset, member in btf.members(type_id)]
        py_members = [(name, getattr(struct, name).offset, getattr(struct, name).size) for name, *_ in struct._fields_]
        if btf_members != py_members:
            differences.append(
                f"{where}: members (name, offset, size) {btf_members} in the object, {py_members} in Python"
            )
    return differences


def check_object(path: str, structs: dict[str, type[ctypes.Structure]] | None = None) -> None:
    """Raise BpfError when the object at `path` and abi.py (or `structs`) disagree."""
    try:
        btf = BtfTypes(path)
    except OSError as exc:
        raise BpfError(f"{path}: cannot read its BTF to check its layout against mysqlio.abi ({exc})") from exc
    with btf:
        differences = layout_differences(btf, abi.STRUCTS if structs is None else structs)
    if differences:
        raise BpfError(
            f"{path} and mysqlio/abi.py were built from different versions of probes/mysqlio.h; "
            "rebuild both (make bpf) or reinstall mysqlio:\n  " + "\n  ".join(differences)
        )
