"""The line protocol of the SystemTap scripts (stap/*.stp): one definition of every record.

Each record is one line of space-separated fields, the first a one-letter tag.
Numbers are decimal; the only text fields are the mode and module name of the
hello line and the hex-encoded path of a name line, so no field ever holds a
space or a newline. `RecordType.printf_format()` is the exact `printf` format
the scripts use for each record: tests/test_stap.py extracts every `printf` of
the scripts and compares them with these, so the scripts and this parser
cannot drift apart.

    H version mode pid module                      hello: the module is loaded and tracing
    N dev ino nlink complete path                  a regular file or block device the process opened
    A dev ino tid op api bytes ops errors          top: one (file, thread, op, api) of the interval
    E time_ns latency_ns tid op api dev ino offset result     record: one request
    I seq time_ns read_faults iocbs_truncated rows_full pending_full unmatched skipped_probes transport_failures
      io_uring_calls                               end of an interval; cumulative loss counters, then
                                                   the io_uring system calls seen (not traced: a note)

`dev` is the kernel's dev_t (major << 20 | minor), as in the eBPF maps. `op`
and `api` are the codes of mysqlio.abi.Op and Api. A name's `path` is
relative to the root of its filesystem: the hex encoding of each component,
root first, joined by "/" ("-" for none); `complete` is 0 when components at
the root end are missing (too deep, or too long for one stap string). The
times are CLOCK_REALTIME nanoseconds (gettimeofday_ns(): it exists in every
SystemTap release, ktime_get_ns() not on RHEL 7 kernels).

The last two counters of a mark are SystemTap's own: probe hits it skipped (a
lock not had within MAXTRYLOCK, too little stack, ...) and lines its transport
could not take. stap itself tells them only when it exits; in the marks every
interval shows its losses.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_VERSION = 2  # 2: the marks carry skipped_probes, transport_failures, io_uring_calls


class ProtocolError(ValueError):
    """A line that does not follow the protocol."""


@dataclass(frozen=True)
class RecordType:
    """One kind of line: its tag and its fields, in order."""

    tag: str
    fields: tuple[str, ...]
    text_fields: tuple[str, ...] = ()

    def printf_format(self) -> str:
        """The format string as written inside the quotes of the scripts' printf."""
        conversions = ["%s" if name in self.text_fields else "%d" for name in self.fields]
        return " ".join([self.tag, *conversions]) + "\\n"


HELLO = RecordType("H", ("version", "mode", "pid", "module"), text_fields=("mode", "module"))
NAME = RecordType("N", ("dev", "ino", "nlink", "complete", "path"), text_fields=("path",))
ROW = RecordType("A", ("dev", "ino", "tid", "op", "api", "bytes", "ops", "errors"))
EVENT = RecordType("E", ("time_ns", "latency_ns", "tid", "op", "api", "dev", "ino", "offset", "result"))
MARK = RecordType(
    "I",
    (
        "seq",
        "time_ns",
        "read_faults",
        "iocbs_truncated",
        "rows_full",
        "pending_full",
        "unmatched",
        "skipped_probes",
        "transport_failures",
        "io_uring_calls",
    ),
)
RECORD_TYPES: dict[str, RecordType] = {r.tag: r for r in (HELLO, NAME, ROW, EVENT, MARK)}

# which script prints which records
SCRIPT_RECORDS: dict[str, tuple[str, ...]] = {
    "top": ("H", "N", "A", "I"),
    "record": ("H", "N", "E", "I"),
}

# the counters of a mark, in order: what the scripts could not account
DROP_FIELDS = MARK.fields[2:-1]


@dataclass(frozen=True)
class Hello:
    version: int
    mode: str
    pid: int
    module: str


@dataclass(frozen=True)
class Name:
    dev: int
    ino: int
    nlink: int
    complete: bool
    components: tuple[bytes, ...]  # root first, relative to the filesystem's root


@dataclass(frozen=True)
class Row:
    dev: int
    ino: int
    tid: int
    op: int
    api: int
    bytes: int
    ops: int
    errors: int


@dataclass(frozen=True)
class Event:
    time_ns: int
    latency_ns: int
    tid: int
    op: int
    api: int
    dev: int
    ino: int
    offset: int
    result: int


@dataclass(frozen=True)
class Mark:
    seq: int
    time_ns: int
    drops: dict[str, int]
    io_uring_calls: int = 0  # io_uring_setup / io_uring_enter calls so far: requests the scripts cannot see


Record = Hello | Name | Row | Event | Mark


def encode_path(components: tuple[bytes, ...]) -> str:
    """The path field of a name line (what the scripts print)."""
    return "/".join(c.hex() for c in components) or "-"


def decode_path(field: str) -> tuple[bytes, ...]:
    if field == "-":
        return ()
    try:
        return tuple(bytes.fromhex(part) for part in field.split("/"))
    except ValueError:
        raise ProtocolError(f"bad hex path {field!r}") from None


def parse_line(line: str) -> Record:
    """One line of a script's output -> its record; ProtocolError if malformed."""
    parts = line.split()
    if not parts:
        raise ProtocolError("empty line")
    rtype = RECORD_TYPES.get(parts[0])
    if rtype is None:
        raise ProtocolError(f"unknown record {parts[0]!r} in {line.rstrip()!r}")
    values = parts[1:]
    if len(values) != len(rtype.fields):
        raise ProtocolError(f"record {rtype.tag} has {len(values)} fields, not {len(rtype.fields)}: {line.rstrip()!r}")
    try:
        ints = [0 if name in rtype.text_fields else int(v) for name, v in zip(rtype.fields, values, strict=True)]
    except ValueError:
        raise ProtocolError(f"not a number in {line.rstrip()!r}") from None
    if rtype is ROW:
        return Row(*ints)
    if rtype is EVENT:
        return Event(*ints)
    if rtype is MARK:
        return Mark(ints[0], ints[1], dict(zip(DROP_FIELDS, ints[2:-1], strict=True)), ints[-1])
    if rtype is NAME:
        return Name(ints[0], ints[1], ints[2], bool(ints[3]), decode_path(values[4]))
    return Hello(ints[0], values[1], ints[2], values[3])


def format_record(record: Record) -> str:
    """The line a script prints for this record (for fixtures and tests)."""
    if isinstance(record, Hello):
        values: list[object] = [record.version, record.mode, record.pid, record.module]
        rtype = HELLO
    elif isinstance(record, Name):
        values = [record.dev, record.ino, record.nlink, int(record.complete), encode_path(record.components)]
        rtype = NAME
    elif isinstance(record, Row):
        values = [getattr(record, f) for f in ROW.fields]
        rtype = ROW
    elif isinstance(record, Event):
        values = [getattr(record, f) for f in EVENT.fields]
        rtype = EVENT
    else:
        values = [record.seq, record.time_ns, *(record.drops.get(f, 0) for f in DROP_FIELDS), record.io_uring_calls]
        rtype = MARK
    return " ".join([rtype.tag, *(str(v) for v in values)]) + "\n"
