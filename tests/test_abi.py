"""probes/mysqlio.h is the one source of the kernel ABI: tracer/abi.py and the
constants of stap/tapset/mysqlio.stpm are generated from it (tools/gen_abi.py),
and the BPF object's BTF is checked against abi.py before it loads."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mysqlio import abi, abi_check
from mysqlio.bpf_probe import bpf_object_path
from mysqlio.btf import BtfTypes
from mysqlio.errors import BpfError

REPO = Path(__file__).resolve().parent.parent
GEN = REPO / "tools" / "gen_abi.py"
HEADER = REPO / "probes" / "mysqlio.h"
STPM = REPO / "stap" / "tapset" / "mysqlio.stpm"


def gen(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GEN), *map(str, args)], capture_output=True, text=True)


def drifted_copy(tmp_path: Path, old: str, new: str) -> tuple[Path, Path, Path]:
    """The header with one edit, and copies of the files generated from the real one."""
    header = tmp_path / "mysqlio.h"
    text = HEADER.read_text()
    assert text.count(old) == 1
    header.write_text(text.replace(old, new))
    python, stap = tmp_path / "abi.py", tmp_path / "mysqlio.stpm"
    shutil.copy(REPO / "tracer" / "abi.py", python)
    shutil.copy(STPM, stap)
    return header, python, stap


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("drifted_abi", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_fresh() -> None:
    result = gen("--check")
    assert result.returncode == 0, result.stderr


def test_a_changed_struct_makes_abi_py_stale_and_regenerates(tmp_path: Path) -> None:
    header, python, stap = drifted_copy(tmp_path, "\t__u8 api;\n\t__u16 pad;\n};", "\t__u8 api;\n\t__u32 pad;\n};")
    result = gen("--check", "--header", header, "--python", python, "--stap", stap)
    assert result.returncode == 1 and f"{python} is stale" in result.stderr
    assert str(stap) not in result.stderr  # no constant the scripts use changed
    assert gen("--header", header, "--python", python, "--stap", stap).returncode == 0
    assert ctypes.sizeof(load_module(python).LatKey) == 24 != ctypes.sizeof(abi.LatKey)


def test_a_changed_code_makes_the_tapset_stale(tmp_path: Path) -> None:
    header, python, stap = drifted_copy(tmp_path, "MIO_API_LIBAIO = 1,", "MIO_API_LIBAIO = 5,")
    result = gen("--check", "--header", header, "--python", python, "--stap", stap)
    assert result.returncode == 1 and str(stap) in result.stderr and str(python) in result.stderr
    gen("--header", header, "--python", python, "--stap", stap)
    assert "@define MIO_API_LIBAIO %( 5 %)" in stap.read_text()
    assert load_module(python).Api.LIBAIO == 5


def test_a_construct_the_generator_cannot_map_is_an_error(tmp_path: Path) -> None:
    header, python, stap = drifted_copy(tmp_path, "\t__u32 conn; /* the connection", "\tint *conn; /* the connection")
    result = gen("--check", "--header", header, "--python", python, "--stap", stap)
    assert result.returncode == 2 and "struct file_op_key" in result.stderr


def test_the_header_constants_reach_python() -> None:
    assert abi.LATENCY_UNKNOWN == (1 << 64) - 1
    assert abi.LAT_SUB == 1 << abi.LAT_SUB_BITS
    assert [op.name for op in abi.Op] == [
        "WRITE",
        "READ",
        "FSYNC",
        "FDATASYNC",
        "SYNC_FILE_RANGE",
        "MSYNC",
        "DIRTY",
        "WRITEBACK",
        "DISK_READ",
        "READAHEAD",
        "DIRECT_READ",
    ]
    assert ctypes.sizeof(abi.Event) == 56 and ctypes.sizeof(abi.FileName) == 400


@pytest.fixture
def bpf_object() -> str:
    path = bpf_object_path()
    if not Path(path).exists():
        pytest.skip(f"{path} is not built (make bpf)")
    return path


def test_the_built_object_matches_abi_py(bpf_object: str) -> None:
    with BtfTypes(bpf_object) as btf:
        described = [name for name in abi.STRUCTS if btf.find(name, abi_check.BTF_KIND_STRUCT) > 0]
        assert abi_check.layout_differences(btf, abi.STRUCTS) == []
    # every one, mio_event through the event slots' struct event_slot (x86-64 objects)
    assert sorted(described) == sorted(abi.STRUCTS)
    abi_check.check_object(bpf_object)


def test_a_drifted_abi_cannot_load(tmp_path: Path, bpf_object: str) -> None:
    """abi.py generated from a header the object was not built from: the check refuses it."""
    header, python, stap = drifted_copy(tmp_path, "\t__u64 unmatched;", "\t__u32 unmatched;")
    gen("--header", header, "--python", python, "--stap", stap)
    drifted = load_module(python)
    with pytest.raises(BpfError) as caught:
        abi_check.check_object(bpf_object, drifted.STRUCTS)
    message = str(caught.value)
    assert "struct drop_counters" in message and "make bpf" in message
    assert "struct file_op_key" not in message  # only what differs is named
