"""The kernel's names of many files forgotten in one call (BPF_MAP_DELETE_BATCH, Linux 5.6;
key by key where the kernel has no batch command): top forgets the name of every file of
an interval (mysqlio.sampling), 20,000 syscalls and ctypes keys an interval at 20,000
active files otherwise. The keys are built with numpy (struct file_id: ino, dev, pad)."""

from __future__ import annotations

import ctypes
import errno
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import abi
from .libbpf import BpfMap, _get
from .probe import FileIdentity, dev_to_kernel

_ENOTSUPP = 524  # the kernel's internal "not supported" (no batch ops for a map type)
FILE_ID = np.dtype(abi.FileId)  # struct file_id, as generated from probes/mysqlio.h
_unbatched: set[int] = set()  # maps (by fd) whose kernel has no batch delete


def file_ids(files: Iterable[FileIdentity]) -> np.ndarray:
    """struct file_id of each file, as the probes key them."""
    files = list(files)
    keys = np.zeros(len(files), FILE_ID)
    keys["ino"] = [f.ino for f in files]
    kernel = {dev: dev_to_kernel(dev) for dev in {f.dev for f in files}}
    keys["dev"] = [kernel[f.dev] for f in files]
    return keys


def _lib() -> Any:
    lib = _get().lib
    fn = lib.bpf_map_delete_batch
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
    return lib


def delete_keys(bpf_map: BpfMap, keys: np.ndarray) -> None:
    """Delete `keys` (a numpy array of the map's key layout) where present."""
    if not len(keys):
        return
    lib, fd, size = _lib(), bpf_map.fd, keys.dtype.itemsize
    keys = np.ascontiguousarray(keys)
    base = keys.ctypes.data
    at = 0
    while at < len(keys) and fd not in _unbatched:
        count = ctypes.c_uint32(len(keys) - at)
        rc = lib.bpf_map_delete_batch(fd, base + at * size, ctypes.byref(count), None)
        err = ctypes.get_errno() if rc else 0
        if not rc:
            return
        if err == errno.ENOENT:  # keys[at + count] is not in the map (never named, or evicted)
            at += count.value + 1
        elif err in (_ENOTSUPP, errno.EOPNOTSUPP, errno.EINVAL):
            _unbatched.add(fd)  # before 5.6 no batch command (count untouched): key by key
        else:
            raise OSError(err, f"deleting keys of map {bpf_map.name}: {errno.errorcode.get(err, err)}")
    for i in range(at, len(keys)):
        lib.bpf_map_delete_elem(fd, ctypes.c_void_p(base + i * size))


def clear(bpf_map: BpfMap) -> None:
    """Delete every entry of a hash map (its keys read first: deleting while walking them
    would restart the walk)."""
    raw = ctypes.c_ubyte * bpf_map.key_size
    keys = b"".join(bytes(key) for key in bpf_map.keys(raw))  # type: ignore[arg-type]
    delete_keys(bpf_map, np.frombuffer(keys, dtype=np.dtype((np.void, bpf_map.key_size))))
