"""The regions of InnoDB's system tablespace (ibdata1), read from the file itself, read-only.

InnoDB keeps fixed structures at fixed page numbers of the system tablespace's first
file, and the doublewrite buffer where its own header says (storage/innobase/include/
trx0sys.h, fsp0types.h, fsp0fsp.h of MariaDB and MySQL):

- page 0, FSP header: FSP_SPACE_FLAGS at byte 38 + 16 (big-endian u32) give the page
  size. MariaDB's `full_crc32` format (10.5+, the default for new files) marks itself
  with bit 4 and keeps the page size shift in bits 0-3; the classic format (MySQL,
  older MariaDB) keeps it in bits 6-9, 0 meaning 16 KiB. Page size = 512 << shift.
- page 5, TRX_SYS: the doublewrite header at byte (page size - 200): a 10-byte segment
  header, then MAGIC (536853855), BLOCK1 and BLOCK2 (page numbers of the two blocks),
  big-endian u32. A block is one extent: 1 MiB of pages up to 16 KiB pages, 64 pages
  above.
- pages 3 and 4: the change buffer's header and root; 5 and 6: the transaction system
  header and the first rollback segment; 7: the data dictionary header. Every other
  page (undo logs, system tables, free space, pages 0-2) is "system".

When page 5 cannot be read or holds no doublewrite magic, the doublewrite buffer is
assumed at its documented place (extents 1 and 2), and `assumed` says so. MySQL 8.0.20+
keeps its doublewrite in `#ib_*.dblwr` files, yet still creates the old buffer (magic
and extents) with ibdata1 and never reads or writes it after (srv0start.cc, buf0rea.cc):
its extents are mapped, and no request lands there (tests/test_mysql.py). A request
belongs to the region holding its first byte (InnoDB's writes never straddle one:
a doublewrite batch lies inside the buffer, a page write is one page).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, replace

from .abi import MAX_REGION_RANGES, Region

FSP_SPACE_FLAGS_AT = 38 + 16
FCRC32_MARKER = 1 << 4
CLASSIC_SSIZE_SHIFT = 6
TRX_SYS_PAGE = 5
DOUBLEWRITE_FROM_END = 200
FSEG_HEADER_SIZE = 10
DOUBLEWRITE_MAGIC = 536853855
DEFAULT_PAGE_SIZE = 16384

# fixed pages of the system tablespace (fsp0types.h, ibuf0ibuf.h, trx0sys.h, dict0boot.h)
FIXED_PAGES = (
    (3, 5, Region.CHANGE_BUFFER),  # FSP_IBUF_HEADER_PAGE_NO, FSP_IBUF_TREE_ROOT_PAGE_NO
    (5, 7, Region.TRX_SYS),  # FSP_TRX_SYS_PAGE_NO, FSP_FIRST_RSEG_PAGE_NO
    (7, 8, Region.DICTIONARY),  # FSP_DICT_HDR_PAGE_NO
)

# how people read a region (top, report, JSON, the exporter's label)
REGION_NAMES = {
    Region.NONE: "",
    Region.SYSTEM: "system",
    Region.DOUBLEWRITE: "doublewrite",
    Region.CHANGE_BUFFER: "change buffer",
    Region.TRX_SYS: "transaction system",
    Region.DICTIONARY: "dictionary",
}


def region_name(region: int) -> str:
    """The name of a region code ("" for NONE: the whole file)."""
    try:
        return REGION_NAMES[Region(region)]
    except ValueError:
        return f"region {region}"


def region_of_name(name: str) -> Region:
    """The region code of a name written by region_name()."""
    for region, text in REGION_NAMES.items():
        if text == name:
            return region
    return Region.NONE


@dataclass(frozen=True)
class Range:
    """Bytes [start, end) of the file belong to region."""

    start: int
    end: int
    region: Region


@dataclass(frozen=True)
class RegionMap:
    """The regions of one system tablespace file; any byte in no range is SYSTEM."""

    page_size: int
    ranges: tuple[Range, ...]
    assumed: str = ""  # why the doublewrite position was assumed ("" = read from page 5)
    path: str = ""  # the file read
    fsp_header: bool = True  # page 0 was read and is an FSP header (a system tablespace)

    def region_at(self, offset: int) -> Region:
        """The region of the byte at offset (NONE when the offset is unknown: < 0)."""
        if offset < 0:
            return Region.NONE
        for r in self.ranges:
            if r.start <= offset < r.end:
                return r.region
        return Region.SYSTEM

    def to_json(self) -> dict[str, object]:
        return {
            "page_size": self.page_size,
            "ranges": [[r.start, r.end, r.region.name.lower()] for r in self.ranges],
            "assumed": self.assumed,
            "path": self.path,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> RegionMap:
        raw = d.get("ranges")
        ranges = (
            tuple(Range(int(a), int(b), Region[str(n).upper()]) for a, b, n in raw) if isinstance(raw, list) else ()
        )
        page_size = d.get("page_size")
        return cls(
            page_size=int(page_size) if isinstance(page_size, int) else DEFAULT_PAGE_SIZE,
            ranges=ranges,
            assumed=str(d.get("assumed") or ""),
            path=str(d.get("path") or ""),
        )


def page_size_of(flags: int) -> int | None:
    """The page size FSP_SPACE_FLAGS encode (MariaDB full_crc32 or classic), or None."""
    if flags & FCRC32_MARKER:
        ssize = flags & 0xF
    else:
        ssize = (flags >> CLASSIC_SSIZE_SHIFT) & 0xF
        if ssize == 0:
            return DEFAULT_PAGE_SIZE
    if not 3 <= ssize <= 7:  # 4 KiB .. 64 KiB
        return None
    return 512 << ssize


def extent_pages(page_size: int) -> int:
    """Pages of one extent (FSP_EXTENT_SIZE): 1 MiB up to 16 KiB pages, else 64."""
    return (1 << 20) // page_size if page_size <= 16384 else 64


def separate_doublewrite(version: str | None) -> bool:
    """Whether this server version keeps its doublewrite buffer outside the system
    tablespace (MySQL 8.0.20+: #ib_*.dblwr files); MariaDB (10.x and later) never does."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version or "")
    if not m:
        return False
    major, minor, patch = (int(g) for g in m.groups())
    return (major, minor, patch) >= (8, 0, 20) and major < 10


def parse(
    page0: bytes, trx_sys_tail: bytes | None, page_size_hint: int | None = None, assume_doublewrite: bool = True
) -> RegionMap:
    """The regions, from page 0's first bytes and the doublewrite header of page 5
    (the DOUBLEWRITE_FROM_END bytes from page 5's end - 200; None: unreadable).
    assume_doublewrite False (MySQL 8.0.20+): without the magic, no doublewrite region."""
    page_size = None
    # FIL_PAGE_TYPE (byte 24) of page 0 is FIL_PAGE_TYPE_FSP_HDR (8)
    if len(page0) >= FSP_SPACE_FLAGS_AT + 4 and struct.unpack_from(">H", page0, 24)[0] == 8:
        page_size = page_size_of(struct.unpack_from(">I", page0, FSP_SPACE_FLAGS_AT)[0])
    notes = []
    fsp_header = page_size is not None
    if page_size is None:
        page_size = page_size_hint or DEFAULT_PAGE_SIZE
        notes.append(f"page size {page_size} assumed (page 0 unreadable or not an FSP header)")
    block = extent_pages(page_size)
    block1, block2 = block, 2 * block  # the documented place: extents 1 and 2
    hdr = trx_sys_tail or b""
    magic = struct.unpack_from(">I", hdr, FSEG_HEADER_SIZE)[0] if len(hdr) >= FSEG_HEADER_SIZE + 12 else None
    if magic == DOUBLEWRITE_MAGIC:
        b1, b2 = struct.unpack_from(">II", hdr, FSEG_HEADER_SIZE + 4)
        if b1 > 7 and b2 > 7 and (b2 >= b1 + block or b1 >= b2 + block):
            block1, block2 = b1, b2
        else:
            notes.append(f"doublewrite position assumed (page 5 names blocks {b1} and {b2})")
    elif assume_doublewrite:
        notes.append("doublewrite position assumed (page 5 unreadable or without the doublewrite magic)")
    else:
        block1 = block2 = -1  # the server keeps it in files of its own
    ranges = [Range(a * page_size, b * page_size, region) for a, b, region in FIXED_PAGES]
    if block1 < 0:
        pass
    elif block2 == block1 + block:  # always so far: one range
        ranges.append(Range(block1 * page_size, (block2 + block) * page_size, Region.DOUBLEWRITE))
    else:
        ranges += [Range(b * page_size, (b + block) * page_size, Region.DOUBLEWRITE) for b in (block1, block2)]
    assert len(ranges) <= MAX_REGION_RANGES
    return RegionMap(page_size=page_size, ranges=tuple(ranges), assumed="; ".join(notes), fsp_header=fsp_header)


def read_regions(path: str, page_size_hint: int | None = None, assume_doublewrite: bool = True) -> RegionMap:
    """The regions of the system tablespace file at path (opened read-only; what cannot
    be read is assumed, and said in `assumed`)."""
    page0 = b""
    tail: bytes | None = None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return replace(parse(b"", None, page_size_hint, assume_doublewrite), path=path)
    try:
        page0 = os.pread(fd, 64, 0)
        flags_size = parse(page0, None, page_size_hint).page_size
        at = TRX_SYS_PAGE * flags_size + flags_size - DOUBLEWRITE_FROM_END
        tail = os.pread(fd, DOUBLEWRITE_FROM_END, at)
    except OSError:
        pass
    finally:
        os.close(fd)
    return replace(parse(page0, tail, page_size_hint, assume_doublewrite), path=path)
