"""Page-cache hits of a file's reads, derived from its counters (the one place this is done).

hit bytes = read bytes - bytes read from the disk for the file, never below 0. O_DIRECT
reads are in both (their bytes were requested and read from the disk), so they cancel; the
hit ratio is over the buffered reads only (read bytes - O_DIRECT bytes).

Exact when every page the disk gave the file was asked for in the same interval: a whole
file or range read cold (readahead reads only pages the reads then take) or warm. Not
exact otherwise: readahead reads pages no read asked for yet (a random read that misses
brings its neighbours: the hits that follow on them show as disk bytes already paid), and
a read of the pages read ahead in an earlier interval counts as a hit in this one.
docs/usage.md says the same.
"""

from __future__ import annotations

from typing import Any


def disk_reads_counted(probe: Any) -> bool:
    """The probe counts each file's reads from the disk (eBPF with its page-cache and block
    hooks, not --no-page-cache). Where it does not (SystemTap, those hooks missing, turned
    off), O_DIRECT reads are still counted but buffered reads' disk bytes are not: a hit
    could not be told from a disk read, so none is derived (JSON null, no exporter series)."""
    return bool(getattr(probe, "page_cache", False)) and not any("page cache" in n for n in probe.uncounted())


def hit_bytes(read_bytes: int, disk_read_bytes: int) -> int:
    """Bytes the reads took from the page cache: requested minus read from the disk."""
    return max(0, read_bytes - disk_read_bytes)


def hit_ratio(read_bytes: int, disk_read_bytes: int, direct_read_bytes: int) -> float | None:
    """hit bytes / buffered bytes read (0..1), or None when no buffered read returned bytes."""
    buffered = read_bytes - direct_read_bytes
    if buffered <= 0:
        return None
    return hit_bytes(read_bytes, disk_read_bytes) / buffered
