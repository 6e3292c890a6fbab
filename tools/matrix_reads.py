"""The kernel matrix's disk reads (issue 61): iogen's `coldread` scenario judged per file in
each mode of tools/matrix_guest.py, as tests/test_coldread.py judges it on the host.

iogen gives a coldread file's `disk_read_bytes` (every byte read from the disk for it) and
`direct_read_bytes` (its O_DIRECT reads' part; for its preallocated file, the written range
only: the zeros of its unwritten extents and hole come from no disk): those are judged with
the file's other counters (`iogen_reads`, `exported_reads` for the exporter's per-file
counters). What iogen
cannot know is bounded (`read_issues`): the readahead's part of a file's disk reads within
them, none for O_DIRECT, some for the file read cold sequentially; and the read files' disk
reads must sum to the kernel's own /proc/PID/io read_bytes over iogen's reads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mysqlio.devtools.scrape import Metrics
from mysqlio.devtools.traced import DISK_READ_COUNTERS

# iogen's scenarios that read from the disk: a real block device under the scratch, as the
# page-cache ones
READ_SCENARIOS = ("coldread",)
# what iogen gives per read file
IOGEN_READ_COUNTERS = ("disk_read_bytes", "direct_read_bytes")
# the file coldread reads cold, sequentially, buffered: some of it by readahead
SEQUENTIAL_COLD = "coldread.dat"


def iogen_reads(f: dict[str, Any]) -> dict[str, int]:
    """iogen's disk read counters of one of its files (none but for coldread's)."""
    return {c: int(f[c]) for c in IOGEN_READ_COUNTERS if c in f}


def traced_reads(row: dict[str, Any]) -> dict[str, int]:
    """A traced file's disk read counters (top's totals, a report's file row)."""
    return {c: int(row.get(c, 0)) for c in DISK_READ_COUNTERS}


def exported_reads(
    m: Metrics,
    workdir: Path,
    expected: dict[str, Any],
    got: dict[str, dict[str, int]],
    want: dict[str, dict[str, int]],
) -> None:
    """The exporter's per-file disk read counters (mysqlio_file_<counter>_total) into got, and
    iogen's into want, for the files it gives them for."""
    prefix = str(workdir) + "/"
    for c in DISK_READ_COUNTERS:
        for path, value in m.by_path(f"mysqlio_file_{c}_total").items():
            if path.startswith(prefix) and path in got:
                got[path][c] = int(value)
    for f in expected["files"]:
        if f["path"] in want:
            want[f["path"]].update(iogen_reads(f))


def read_issues(got: dict[str, dict[str, int]], expected: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, what) for the disk reads beyond the counters iogen gives (judged with the
    others): the readahead's part, and the process's disk reads against /proc/PID/io."""
    out: list[tuple[str, str]] = []
    read = [f for f in expected["files"] if "disk_read_bytes" in f]
    for f in read:
        g = got.get(f["path"])
        if g is None:
            continue  # judged as not traced
        ra, disk = g.get("readahead_bytes", 0), g.get("disk_read_bytes", 0)
        if not 0 <= ra <= disk:
            out.append((f["path"], f"readahead_bytes {ra} not within disk_read_bytes {disk}"))
        if f["direct_read_bytes"] and ra:
            out.append((f["path"], f"readahead_bytes {ra} for O_DIRECT reads (0)"))
        if os.path.basename(f["path"]) == SEQUENTIAL_COLD and not ra:
            out.append((f["path"], "readahead_bytes 0 for a cold sequential read"))
    if read and "proc_io_read_bytes" in expected:
        total = sum(got.get(f["path"], {}).get("disk_read_bytes", 0) for f in read)
        if total != expected["proc_io_read_bytes"]:
            out.append(
                (read[0]["path"], f"disk reads of its files {total} (/proc/PID/io {expected['proc_io_read_bytes']})")
            )
    return out


def unnamed_reads(rows: dict[str, Any]) -> dict[str, int]:
    """The rows with disk reads that no name was found for (path "<dev M:N inode I>"): a
    page fault's read (iogen's cold text, coldread_mapped.dat) taken for a read of the
    process's file would be one. By path, its disk_read_bytes."""
    return {
        path: int(row.get("disk_read_bytes", 0))
        for path, row in rows.items()
        if path.startswith("<") and row.get("disk_read_bytes", 0)
    }


def reads_seen(got: dict[str, dict[str, int]], expected: dict[str, Any]) -> dict[str, Any]:
    """The figures behind the verdict, for the result's JSON: per read file what the mode gave
    beside iogen's, and /proc/PID/io's read_bytes over iogen's reads."""
    files = {
        os.path.basename(f["path"]): {
            "traced": {c: got.get(f["path"], {}).get(c) for c in DISK_READ_COUNTERS},
            "iogen": iogen_reads(f),
        }
        for f in expected["files"]
        if "disk_read_bytes" in f
    }
    return {"disk_reads": files, "proc_io_read_bytes": expected.get("proc_io_read_bytes")} if files else {}
