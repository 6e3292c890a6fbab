"""ctypes bindings to libbpf.so.1: open, configure, load and attach a BPF object.

Only the calls mysqlio uses are declared. libbpf's own messages (the verifier
log among them) are captured through libbpf_set_print so that a failure shows
them in the exception instead of on the terminal (libbpf prints to fd 2).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import verifier_log
from .errors import BpfError

BTF_KIND_DATASEC = 15
BPF_F_MMAPABLE = 1 << 10
BPF_MAP_TYPE_RINGBUF = 27
_LOG_LIMIT = 200_000


def libbpf_name() -> str:
    """The versioned soname (the bare libbpf.so only exists with -dev installed); in the single-file
    build (`make dist`), the libbpf.so.1 it carries, by path (the host's, if any, may be older)."""
    carried = os.path.join(getattr(sys, "_MEIPASS", ""), "libbpf.so.1")
    return carried if getattr(sys, "frozen", False) and os.path.exists(carried) else "libbpf.so.1"


def _load_libbpf() -> ctypes.CDLL:
    try:
        return ctypes.CDLL(libbpf_name(), use_errno=True)
    except OSError as exc:
        raise BpfError(f"cannot load libbpf.so.1 ({exc}); install Debian's libbpf1") from exc


_DRAIN_CHUNK = 1024  # entries read per batch call
_ENOTSUPP = 524  # the kernel's internal "not supported" (no batch ops for a map type), not in errno


class BtfType(ctypes.Structure):
    """struct btf_type's head (its size / type union as `size`)."""

    _fields_ = [("name_off", ctypes.c_uint32), ("info", ctypes.c_uint32), ("size", ctypes.c_uint32)]


class _BtfVarSecinfo(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("offset", ctypes.c_uint32), ("size", ctypes.c_uint32)]


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class _Lib:
    """The loaded library with argument and return types declared once."""

    def __init__(self) -> None:
        lib = _load_libbpf()
        vp, cp, i, u32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32
        sigs: dict[str, tuple[Any, list[Any]]] = {
            "libbpf_set_print": (vp, [_PRINT_FN]),
            "bpf_object__open_file": (vp, [cp, vp]),
            "bpf_object__load": (i, [vp]),
            "bpf_object__close": (None, [vp]),
            "bpf_object__btf": (vp, [vp]),
            "bpf_object__next_map": (vp, [vp, vp]),
            "bpf_object__next_program": (vp, [vp, vp]),
            "bpf_object__find_map_by_name": (vp, [vp, cp]),
            "bpf_map__name": (cp, [vp]),
            "bpf_map__fd": (i, [vp]),
            "bpf_map__key_size": (u32, [vp]),
            "bpf_map__value_size": (u32, [vp]),
            "bpf_map__max_entries": (u32, [vp]),
            "bpf_map__set_max_entries": (i, [vp, u32]),
            "bpf_map__set_type": (i, [vp, i]),
            "bpf_map__set_map_flags": (i, [vp, u32]),
            "bpf_map__map_flags": (u32, [vp]),
            "bpf_map__set_key_size": (i, [vp, u32]),
            "bpf_map__set_value_size": (i, [vp, u32]),
            "bpf_program__set_attach_target": (i, [vp, i, cp]),
            "libbpf_probe_bpf_helper": (i, [i, i, vp]),
            "libbpf_probe_bpf_map_type": (i, [i, vp]),
            "libbpf_num_possible_cpus": (i, []),
            "bpf_prog_load": (i, [i, cp, cp, vp, ctypes.c_size_t, vp]),
            "bpf_map__initial_value": (vp, [vp, ctypes.POINTER(ctypes.c_size_t)]),
            "bpf_program__name": (cp, [vp]),
            "bpf_program__fd": (i, [vp]),
            "bpf_object__find_program_by_name": (vp, [vp, cp]),
            "bpf_program__set_autoload": (i, [vp, ctypes.c_bool]),
            "bpf_program__autoload": (ctypes.c_bool, [vp]),
            "btf__parse": (vp, [cp, vp]),
            "btf__free": (None, [vp]),
            "bpf_program__attach": (vp, [vp]),
            "bpf_program__attach_tracepoint": (vp, [vp, cp, cp]),
            "bpf_program__section_name": (cp, [vp]),
            "bpf_link__destroy": (i, [vp]),
            "btf__find_by_name_kind": (i, [vp, cp, u32]),
            "btf__type_by_id": (ctypes.POINTER(BtfType), [vp, u32]),
            "btf__name_by_offset": (cp, [vp, u32]),
            "btf__resolve_size": (ctypes.c_long, [vp, u32]),
            "bpf_map_create": (i, [i, cp, u32, u32, u32, vp]),
            "bpf_map_lookup_elem": (i, [i, vp, vp]),
            "bpf_map_update_elem": (i, [i, vp, vp, ctypes.c_uint64]),
            "bpf_map_delete_elem": (i, [i, vp]),
            "bpf_map_get_next_key": (i, [i, vp, vp]),
            "bpf_obj_get_info_by_fd": (i, [i, vp, ctypes.POINTER(u32)]),
            "bpf_map_lookup_and_delete_batch": (
                i,
                [i, vp, vp, vp, vp, ctypes.POINTER(u32), vp],
            ),
            "bpf_map_lookup_batch": (i, [i, vp, vp, vp, vp, ctypes.POINTER(u32), vp]),
        }
        for name, (restype, argtypes) in sigs.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        self.lib = lib
        # the C library already loaded: one found on disk may not be it (make dist carries its own)
        libc = ctypes.CDLL(None)
        self.vsnprintf = libc.vsnprintf
        self.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, vp]
        self.vsnprintf.restype = ctypes.c_int


_lib: _Lib | None = None
_log: list[str] = []
_log_size = [0]  # characters in _log (summing it at every line was quadratic)


# The size of a va_list as the callback receives it: x86_64 passes a pointer
# to a 24-byte struct, arm64 (a 32-byte struct by value) a pointer to a copy.
_VA_LIST_SIZE = 32 if platform.machine() in ("aarch64", "arm64") else 24
_LINE_BUF = 4096
_MESSAGE_HEAD = 20_000  # of a message longer than _LOG_LIMIT: its head and tail are kept


def _format(fmt: bytes, va_list: int) -> str:
    """One libbpf message. libbpf prints a whole verifier log in one message
    (megabytes when a program is refused); its reason is at the end, so a
    message longer than the line buffer is formatted again at full length
    from a saved copy of the va_list (vsnprintf consumes it)."""
    lib = _get()
    saved = ctypes.string_at(va_list, _VA_LIST_SIZE)
    buf = ctypes.create_string_buffer(_LINE_BUF)
    n = lib.vsnprintf(buf, len(buf), fmt, va_list)
    if n >= len(buf):
        ctypes.memmove(va_list, saved, _VA_LIST_SIZE)
        buf = ctypes.create_string_buffer(n + 1)
        lib.vsnprintf(buf, len(buf), fmt, va_list)
    text = buf.value.decode(errors="replace")
    if len(text) > _LOG_LIMIT:
        cut = len(text) - _LOG_LIMIT
        text = f"{text[:_MESSAGE_HEAD]}\n... [{cut} characters of the log left out] ...\n{text[_MESSAGE_HEAD + cut :]}"
    return text


def _print_to_log(level: int, fmt: bytes, va_list: int) -> int:
    if _log_size[0] < _LOG_LIMIT * 2:
        line = _format(fmt, va_list)
        _log.append(line)
        _log_size[0] += len(line)
    return 0


# ctypes callbacks must outlive every call that may use them.
_print_cb = _PRINT_FN(_print_to_log)


def _get() -> _Lib:
    global _lib
    if _lib is None:
        _lib = _Lib()
        _lib.lib.libbpf_set_print(_print_cb)
    return _lib


def _errno_error(what: str) -> BpfError:
    err = ctypes.get_errno()
    return BpfError(f"{what}: {os.strerror(err) if err else 'failed'}", log="".join(_log))


class BpfMap:
    """A loaded map, reached by fd through the raw BPF syscall wrappers."""

    def __init__(self, handle: int) -> None:
        lib = _get().lib
        self.handle = handle
        self.name = lib.bpf_map__name(handle).decode()
        self.key_size = lib.bpf_map__key_size(handle)
        self.value_size = lib.bpf_map__value_size(handle)
        self.max_entries = lib.bpf_map__max_entries(handle)
        self._no_batch = False  # the kernel has no batch lookup for this map type

    @property
    def fd(self) -> int:
        """Valid once the object is loaded."""
        return _get().lib.bpf_map__fd(self.handle)

    def lookup(self, key: ctypes.Structure | ctypes.c_uint32, value: Any) -> bool:
        """Fill value from the map; False when the key is absent."""
        return _get().lib.bpf_map_lookup_elem(self.fd, ctypes.byref(key), ctypes.byref(value)) == 0

    def update(self, key: Any, value: Any, flags: int = 0) -> None:
        if _get().lib.bpf_map_update_elem(self.fd, ctypes.byref(key), ctypes.byref(value), flags):
            raise _errno_error(f"update of map {self.name}")

    def delete(self, key: Any) -> bool:
        return _get().lib.bpf_map_delete_elem(self.fd, ctypes.byref(key)) == 0

    def keys(self, key_type: type[ctypes.Structure]) -> Iterator[ctypes.Structure]:
        lib = _get().lib
        prev: Any = None
        while True:
            nxt = key_type()
            if lib.bpf_map_get_next_key(self.fd, ctypes.byref(prev) if prev is not None else None, ctypes.byref(nxt)):
                return
            yield nxt
            prev = nxt

    def items(self, key_type: type[Any], value_type: type[Any]) -> list[tuple[Any, Any]]:
        """Every (key, value) now, left in place (small maps of cumulative counters)."""
        out = []
        for key in self.keys(key_type):
            value = value_type()
            if self.lookup(key, value):  # gone between the two calls: skipped
                out.append((key, value))
        return out

    def per_cpu_array(self, words: int) -> Any:
        """Every index of a per-CPU array of `words` 64-bit words a value: [index][cpu][word],
        flat. In one call where the kernel has the batch lookup of per-CPU arrays (not
        5.10: ENOTSUPP), else index by index. The kernel copies each CPU's value at a
        stride of 8 bytes, so a value here is whole words."""
        lib = _get().lib
        if self.value_size != 8 * words:
            raise BpfError(f"map {self.name}: values of {self.value_size} bytes, not {words} words")
        per_index = possible_cpus() * words
        values = (ctypes.c_uint64 * (self.max_entries * per_index))()
        if not self._no_batch:
            keys = (ctypes.c_uint32 * self.max_entries)()
            count = ctypes.c_uint32(self.max_entries)
            token = ctypes.c_uint32(0)
            rc = lib.bpf_map_lookup_batch(self.fd, None, ctypes.byref(token), keys, values, ctypes.byref(count), None)
            err = ctypes.get_errno() if rc else 0
            if not rc or err == errno.ENOENT:  # ENOENT: the walk reached the end
                if count.value == self.max_entries:
                    return values
                raise BpfError(f"reading map {self.name}: {count.value} of its {self.max_entries} indexes")
            # ENOTSUPP: no batch ops for the map type (5.10); EINVAL: no batch command (before 5.6)
            if err not in (_ENOTSUPP, errno.EOPNOTSUPP, errno.EINVAL):
                raise BpfError(f"reading map {self.name}: {os.strerror(err)}")
            self._no_batch = True
        stride = per_index * 8
        for index in range(self.max_entries):
            key = ctypes.c_uint32(index)
            if lib.bpf_map_lookup_elem(self.fd, ctypes.byref(key), ctypes.byref(values, index * stride)):
                raise _errno_error(f"reading index {index} of map {self.name}")
        return values

    def drain(self, key_type: type[Any], value_type: type[Any]) -> list[tuple[Any, Any]]:
        """Read and delete every entry. The map must be quiescent (no writer).

        Reads in chunks (a map of 1 KiB values and thousands of entries would
        otherwise need megabytes of buffer at every drain); a chunk smaller than
        one hash bucket fails with ENOSPC and is then doubled."""
        lib = _get().lib
        chunk = min(self.max_entries, _DRAIN_CHUNK)
        keys: Any = (key_type * chunk)()
        values: Any = (value_type * chunk)()
        out: list[tuple[Any, Any]] = []
        token_in = ctypes.c_uint64(0)
        token_out = ctypes.c_uint64(0)
        first = True
        while True:
            count = ctypes.c_uint32(chunk)
            rc = lib.bpf_map_lookup_and_delete_batch(
                self.fd,
                None if first else ctypes.byref(token_in),
                ctypes.byref(token_out),
                keys,
                values,
                ctypes.byref(count),
                None,
            )
            err = ctypes.get_errno() if rc else 0
            out.extend(
                (key_type.from_buffer_copy(keys[n]), value_type.from_buffer_copy(values[n])) for n in range(count.value)
            )
            if rc and err == errno.ENOSPC and count.value == 0 and chunk < self.max_entries:
                chunk = min(self.max_entries, chunk * 2)
                keys = (key_type * chunk)()
                values = (value_type * chunk)()
                continue
            if rc and err != 0:
                if err == errno.ENOENT:  # the whole map was walked
                    return out
                raise BpfError(f"draining map {self.name}: {os.strerror(err)}")
            if count.value == 0:
                return out
            token_in.value = token_out.value
            first = False


# struct bpf_prog_info (include/uapi/linux/bpf.h; fields are only ever appended):
# run_time_ns and run_cnt (Linux 5.1, with kernel.bpf_stats_enabled), then
# recursion_misses (5.12). A longer buffer than the kernel's struct is accepted
# when its tail is zero; the kernel says how much it filled.
_PROG_INFO_SIZE = 256
_PROG_INFO_RUN_TIME_NS = 192
_PROG_INFO_RUN_CNT = 200
_PROG_INFO_RECURSION_MISSES = 208


@dataclass(frozen=True)
class ProgramCounters:
    run_time_ns: int
    run_cnt: int
    recursion_misses: int  # runs skipped: the same program already running on that CPU


def program_counters(prog_fd: int) -> ProgramCounters:
    """A loaded program's counters, in one syscall (zero where the kernel has none)."""
    buf = ctypes.create_string_buffer(_PROG_INFO_SIZE)
    size = ctypes.c_uint32(_PROG_INFO_SIZE)
    if _get().lib.bpf_obj_get_info_by_fd(prog_fd, buf, ctypes.byref(size)):
        raise _errno_error(f"reading the counters of program fd {prog_fd}")

    def u64_at(offset: int) -> int:
        return ctypes.c_uint64.from_buffer_copy(buf, offset).value if size.value >= offset + 8 else 0

    return ProgramCounters(
        u64_at(_PROG_INFO_RUN_TIME_NS), u64_at(_PROG_INFO_RUN_CNT), u64_at(_PROG_INFO_RECURSION_MISSES)
    )


class BpfObject:
    """One .bpf.o through its lifecycle: open -> set_rodata -> load -> attach -> close."""

    def __init__(self, path: str) -> None:
        if not os.path.exists(path):
            raise BpfError(f"BPF object {path} is missing; run 'make setup' to build it")
        self._lib = _get().lib
        _log.clear()
        _log_size[0] = 0
        ctypes.set_errno(0)
        self._obj = self._lib.bpf_object__open_file(path.encode(), None)
        if not self._obj:
            raise _errno_error(f"opening {path}")
        self._links: list[int] = []
        self._maps = {m.name: m for m in self._iter_maps()}
        self._datasecs: dict[str, tuple[BpfMap, dict[str, tuple[int, int]]]] = {}

    def _iter_maps(self) -> Iterator[BpfMap]:
        handle = self._lib.bpf_object__next_map(self._obj, None)
        while handle:
            yield BpfMap(handle)
            handle = self._lib.bpf_object__next_map(self._obj, handle)

    def _datasec_offsets(self, section_suffix: str) -> tuple[BpfMap, dict[str, tuple[int, int]]]:
        """The map backing a global-data section and its variables' (offset, size),
        read from the object's BTF once (top reads .bss every second)."""
        if section_suffix not in self._datasecs:
            self._datasecs[section_suffix] = self._read_datasec(section_suffix)
        return self._datasecs[section_suffix]

    def _read_datasec(self, section_suffix: str) -> tuple[BpfMap, dict[str, tuple[int, int]]]:
        matches = [m for m in self._maps.values() if m.name.endswith(section_suffix)]
        if not matches:
            raise BpfError(f"the BPF object has no {section_suffix} section")
        btf = self._lib.bpf_object__btf(self._obj)
        sec_id = self._lib.btf__find_by_name_kind(btf, section_suffix.encode(), BTF_KIND_DATASEC)
        if sec_id < 0:
            raise BpfError(f"no BTF for section {section_suffix}")
        sec = self._lib.btf__type_by_id(btf, sec_id)
        vlen = sec.contents.info & 0xFFFF
        infos = ctypes.cast(
            ctypes.addressof(sec.contents) + ctypes.sizeof(BtfType),
            ctypes.POINTER(_BtfVarSecinfo * vlen),
        ).contents
        offsets = {}
        for info in infos:
            var = self._lib.btf__type_by_id(btf, info.type).contents
            name = self._lib.btf__name_by_offset(btf, var.name_off).decode()
            offsets[name] = (info.offset, info.size)
        return matches[0], offsets

    def set_rodata(self, name: str, value: ctypes._SimpleCData) -> None:
        """Set a `const volatile` global before load."""
        bpf_map, offsets = self._datasec_offsets(".rodata")
        if name not in offsets:
            raise BpfError(f"no const volatile {name} in the BPF object")
        offset, size = offsets[name]
        if size != ctypes.sizeof(value):
            raise BpfError(f"{name} is {size} bytes in BPF, {ctypes.sizeof(value)} in Python")
        length = ctypes.c_size_t()
        base = self._lib.bpf_map__initial_value(bpf_map.handle, ctypes.byref(length))
        ctypes.memmove(base + offset, ctypes.byref(value), size)

    def read_bss(self, name: str, ctype: type[Any]) -> Any:
        """Read a global variable of .bss after load."""
        bpf_map, offsets = self._datasec_offsets(".bss")
        offset, size = offsets[name]
        buf = ctypes.create_string_buffer(bpf_map.value_size)
        if not bpf_map.lookup(ctypes.c_uint32(0), buf):
            raise _errno_error(f"reading {name}")
        return ctype.from_buffer_copy(buf.raw[offset : offset + size])

    def unmappable_global_data(self) -> None:
        """Before load: the global-data maps (.rodata, .bss, .data) without the
        BPF_F_MMAPABLE libbpf gives them. A mappable array's values are vmalloc'd,
        4 KiB pages each with a TLB entry of its own; a small unmappable one is
        kmalloc'd, in the kernel's direct map (huge pages). Every program reads
        .rodata (issue 19). Nothing here maps them: set_rodata and read_bss do not."""
        lib = self._lib
        for bpf_map in self._maps.values():
            if any(bpf_map.name.endswith(s) or f"{s}." in bpf_map.name for s in (".rodata", ".bss", ".data")):
                flags = lib.bpf_map__map_flags(bpf_map.handle)
                if flags & BPF_F_MMAPABLE and lib.bpf_map__set_map_flags(bpf_map.handle, flags & ~BPF_F_MMAPABLE):
                    raise _errno_error(f"flags of map {bpf_map.name}")

    def set_max_entries(self, name: str, entries: int) -> None:
        """Resize a map before load (for a ring buffer: its size in bytes, a power of 2 pages)."""
        bpf_map = self._maps[name]
        if _get().lib.bpf_map__set_max_entries(bpf_map.handle, entries):
            raise _errno_error(f"resizing map {name}")
        bpf_map.max_entries = entries

    def retype_map(self, name: str, map_type: int, max_entries: int, flags: int = 0) -> None:
        """Before load: give a map another type (a fallback for a map type the
        kernel lacks), with its entry count and flags."""
        bpf_map = self._maps[name]
        lib = self._lib
        if (
            lib.bpf_map__set_type(bpf_map.handle, map_type)
            or lib.bpf_map__set_map_flags(bpf_map.handle, flags)
            or lib.bpf_map__set_max_entries(bpf_map.handle, max_entries)
        ):
            raise _errno_error(f"retyping map {name}")
        bpf_map.max_entries = max_entries

    def set_key_size(self, name: str, size: int) -> None:
        if self._lib.bpf_map__set_key_size(self._maps[name].handle, size):
            raise _errno_error(f"resizing the keys of map {name}")
        self._maps[name].key_size = size

    def set_value_size(self, name: str, size: int) -> None:
        if self._lib.bpf_map__set_value_size(self._maps[name].handle, size):
            raise _errno_error(f"resizing the values of map {name}")
        self._maps[name].value_size = size

    def set_attach_target(self, program: str, target: str) -> None:
        """Before load: attach a tp_btf program to another tracepoint than its section names."""
        prog = self._program(program)
        if self._lib.bpf_program__set_attach_target(prog, 0, target.encode()):
            raise _errno_error(f"retargeting {program} to {target}")

    def _program(self, name: str) -> int:
        prog = self._lib.bpf_object__find_program_by_name(self._obj, name.encode())
        if not prog:
            raise BpfError(f"no program {name} in the BPF object")
        return prog

    def load(self) -> None:
        ctypes.set_errno(0)
        if self._lib.bpf_object__load(self._obj):
            err = _errno_error("loading the BPF programs into the kernel")
            refusal = verifier_log.refusal(err.log)
            if refusal:
                raise BpfError(f"the kernel refused the probes: {refusal}", log=err.log)
            raise err

    def disable_program(self, name: str) -> None:
        """Before load: leave a program out (not loaded, not attached)."""
        if self._lib.bpf_program__set_autoload(self._program(name), False):
            raise BpfError(f"cannot leave out program {name}")

    def attach_all(self, later: tuple[str, ...] = ()) -> None:
        """Attach every loaded program that names its attach point in its section,
        but those named in later (attach_program attaches them when wanted);
        programs in a bare SEC("tracepoint") are attached with attach_tracepoint."""
        prog = self._lib.bpf_object__next_program(self._obj, None)
        while prog:
            name = self._lib.bpf_program__name(prog).decode()
            if (
                self._lib.bpf_program__autoload(prog)
                and self._lib.bpf_program__section_name(prog) != b"tracepoint"
                and name not in later
            ):
                self._attach(prog, name)
            prog = self._lib.bpf_object__next_program(self._obj, prog)

    def attach_program(self, name: str) -> None:
        """Attach one loaded program at the point its section names."""
        self._attach(self._program(name), name)

    def _attach(self, prog: int, name: str) -> None:
        ctypes.set_errno(0)
        link = self._lib.bpf_program__attach(prog)
        if not link:
            raise _errno_error(f"attaching {name}")
        self._links.append(link)

    def program_fds(self) -> dict[str, int]:
        """name -> fd of each loaded program."""
        out = {}
        prog = self._lib.bpf_object__next_program(self._obj, None)
        while prog:
            if self._lib.bpf_program__autoload(prog):
                fd = self._lib.bpf_program__fd(prog)
                if fd >= 0:
                    out[self._lib.bpf_program__name(prog).decode()] = fd
            prog = self._lib.bpf_object__next_program(self._obj, prog)
        return out

    def attach_tracepoint(self, program: str, category: str, event: str) -> None:
        """Attach a loaded program to tracefs event category:event (one program
        can be attached to many)."""
        prog = self._program(program)
        ctypes.set_errno(0)
        link = self._lib.bpf_program__attach_tracepoint(prog, category.encode(), event.encode())
        if not link:
            raise _errno_error(f"attaching {program} to {category}:{event}")
        self._links.append(link)

    def map(self, name: str) -> BpfMap:
        return self._maps[name]

    def has_map(self, name: str) -> bool:
        return name in self._maps

    def close(self) -> None:
        """Detach every program and free the object; safe to call twice."""
        # Detaching a program from a syscall tracepoint waits for the kernel's
        # readers of it to finish: ~70 ms a link on Linux 6.18, 2.3 s for the 34
        # links one after the other. From threads (ctypes drops the GIL) the
        # waits overlap. Each link is destroyed once: by its thread, or here when
        # no thread can start (interpreter shutdown).
        threads = []
        for link in self._links:
            thread = threading.Thread(target=self._lib.bpf_link__destroy, args=(link,), daemon=True)
            try:
                thread.start()
            except RuntimeError:
                self._lib.bpf_link__destroy(link)
            else:
                threads.append(thread)
        for thread in threads:
            thread.join()
        self._links.clear()
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self) -> BpfObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_ring_buffer(name: str, size: int) -> int:
    """A new BPF ring buffer of `size` bytes (a power of two, whole pages): its fd."""
    fd = _get().lib.bpf_map_create(BPF_MAP_TYPE_RINGBUF, name.encode(), 0, 0, size, None)
    if fd < 0:
        raise BpfError(f"creating a ring buffer of {size} bytes: {os.strerror(-fd)}", log="".join(_log))
    return fd


def possible_cpus() -> int:
    """The CPUs a per-CPU map holds a value for (libbpf's count of /sys's possible CPUs)."""
    count = _get().lib.libbpf_num_possible_cpus()
    if count <= 0:
        raise BpfError(f"possible CPUs: {os.strerror(-count) if count < 0 else 'none'}")
    return count


def lib() -> Any:
    """The libbpf CDLL with its signatures declared."""
    return _get().lib


def libbpf_version() -> tuple[int, int] | None:
    """(major, minor) of the loadable libbpf.so.1; None when it is older than 0.6
    (no libbpf_major_version). Raises OSError when it cannot be loaded."""
    # Not through _Lib: an old libbpf lacks symbols it declares. A second CDLL of the
    # same library shares its handle.
    cdll = ctypes.CDLL(libbpf_name(), use_errno=True)
    if not hasattr(cdll, "libbpf_major_version"):
        return None
    cdll.libbpf_major_version.restype = ctypes.c_uint32
    cdll.libbpf_minor_version.restype = ctypes.c_uint32
    return int(cdll.libbpf_major_version()), int(cdll.libbpf_minor_version())
