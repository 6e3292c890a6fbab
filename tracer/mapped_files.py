"""Files a server writes through a shared memory mapping: no system call carries those bytes.

MariaDB 11.x can map its redo log (`innodb_log_file_mmap`, ON by default in
11.8): `ib_logfile0` is mapped MAP_SHARED, has no open fd, and redo records
are stores into the mapping. They reach the disk through page-cache writeback
(the kernel's flusher threads, or an msync / fsync), never as a write(2) or
pwrite(2) of the server. Its error log says so at start-up: "InnoDB: log
sequence number ... (memory-mapped)".

With the eBPF backend counting the page cache (its hooks present, not
--no-page-cache), such a file has a row: the bytes its stores dirtied and the
bytes the kernel wrote back (by cause: msync, fsync, the flusher ...), and its
msyncs as syncs, but no write requests. Without it (SystemTap, a kernel without
the writeback tracepoints), mysqlio sees nothing of them: no bytes, no syncs,
not even a row for the file.

This module finds such mappings in /proc/PID/maps (a file-backed mapping with
`s` in its permissions, writable) and states what is and is not seen in one
sentence, for `mysqlio top` (stderr, --json, the live header) and `mysqlio doctor`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from .classify import Classifier
from .layout import ServerLayout
from .units import human_bytes, printable

LOG_MARK = "(memory-mapped)"  # MariaDB 11.x: "InnoDB: log sequence number 45538 (memory-mapped); ..."
FIX = (
    "set innodb_log_file_mmap=OFF (MariaDB) in [mysqld] and restart: the redo log is then written "
    "with pwrite and synced with fdatasync, which mysqlio counts"
)
_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+)\s+(\S{4})\s+\S+\s+\S+\s+(\d+)\s+(/.*)$")


@dataclass(frozen=True)
class MappedFile:
    path: str  # as /proc/PID/maps names it (a path here for a server in a chroot)
    kind: str
    mapped_bytes: int


def shared_writable_maps(maps_text: str) -> dict[str, int]:
    """Files mapped shared and writable by a process: path -> bytes mapped (all its mappings)."""
    found: dict[str, int] = {}
    for line in maps_text.splitlines():
        m = _MAPS_LINE.match(line)
        if not m or m[3][1] != "w" or m[3][3] != "s" or m[4] == "0":
            continue  # private, read-only, or not a file (anon_inode:, shared anonymous memory)
        path = m[5].rstrip()
        if path.endswith(" (deleted)") or path.startswith("/[aio]"):
            continue  # libaio rings, memfd and deleted files are no server file
        found[path] = found.get(path, 0) + int(m[2], 16) - int(m[1], 16)
    return found


def mapped_files(pid: int, classifier: Classifier) -> list[MappedFile] | None:
    """The server files `pid` writes through shared mappings; None when its maps are unreadable."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            text = f.read()
    except OSError:
        return None
    files = [MappedFile(path, classifier.kind(path), size) for path, size in shared_writable_maps(text).items()]
    return [f for f in files if f.kind != "other"]


def mapped_redo(pid: int, layout: ServerLayout) -> list[MappedFile] | None:
    """The redo log files `pid` has mapped shared and writable (None: maps unreadable)."""
    found = mapped_files(pid, Classifier(layout))
    return None if found is None else [f for f in found if f.kind == "redo"]


def log_line(run_log: bytes) -> str | None:
    """The error-log line of this run that says the redo log is memory-mapped, without its timestamp."""
    for raw in reversed(run_log.splitlines()):
        line = raw.decode(errors="replace")
        if LOG_MARK in line:
            at = line.find("InnoDB:")
            return line[at if at >= 0 else 0 :].strip()
    return None


def _names(files: list[MappedFile]) -> str:
    return ", ".join(printable(os.path.basename(f.path)) for f in files)


def redo_note(files: list[MappedFile] | None, page_cache: bool = False) -> str | None:
    """The one-line statement for `mysqlio top`, or None when nothing is mapped. `page_cache`:
    the probe counts the page cache (BpfProbe.page_cache, and its uncounted() does not say
    otherwise), so the redo log's writes show as dirtied and written-back bytes."""
    if not files:
        return None
    if page_cache:
        return (
            f"the redo log ({_names(files)}) is memory-mapped (innodb_log_file_mmap): the server writes it by "
            "storing into the mapping, with no system call, so its writes show as page-cache bytes dirtied "
            "and written back (and its msyncs as syncs), not as write requests; every other file is counted"
        )
    return (
        f"the redo log ({_names(files)}) is memory-mapped (innodb_log_file_mmap): the server writes it by "
        "storing into the mapping and the kernel writes it back, with no system call, so mysqlio shows "
        "no redo writes or syncs; every other file is counted"
    )


def doctor_check(files: list[MappedFile] | None, run_log: bytes | None, page_cache: bool = False) -> dict[str, Any]:
    """The fields of doctor's "redo log" check (name, status, detail, fix, value). `page_cache`:
    this kernel has the hooks of the eBPF page-cache accounting (KernelFeatures.page_cache)."""
    said = log_line(run_log) if run_log else None
    evidence = []
    if files:
        size = human_bytes(sum(f.mapped_bytes for f in files))
        evidence.append(f"{_names(files)} mapped shared and writable ({size})")
    if said:
        evidence.append(f"error log: {printable(said)!r}")
    if evidence and page_cache:
        return {
            "name": "redo log",
            "status": "ok",
            "detail": f"memory-mapped: {'; '.join(evidence)}. Redo records are stores into the mapping, "
            "with no system call: mysqlio (eBPF) shows them as page-cache bytes dirtied and written back, "
            "and msync as a sync, not as write requests (SystemTap would not see them)",
            "value": "mmap",
        }
    if evidence:
        return {
            "name": "redo log",
            "status": "warn",
            "detail": f"memory-mapped: {'; '.join(evidence)}. Redo records are stores into the mapping that "
            "reach the disk by page-cache writeback, never by a system call: mysqlio cannot see the redo "
            "log's writes or syncs (every other file is counted)",
            "fix": FIX,
            "value": "mmap",
        }
    if files is None:
        return {
            "name": "redo log",
            "status": "skip",
            "detail": "cannot tell whether it is memory-mapped: the process's memory maps are unreadable",
            "fix": "run doctor as root",
        }
    return {
        "name": "redo log",
        "status": "ok",
        "detail": "not memory-mapped: written and synced by system calls, which mysqlio counts",
        "value": "syscalls",
    }
