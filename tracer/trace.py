"""The trace file: one row per I/O request, as an Arrow IPC stream.

A trace is a sequence of record batches, one per `TraceWriter.write()` call
(the recorder calls it about every 0.5 s), each flushed as soon as it is
written. The stream format is append-only: a writer killed at any moment
leaves a file whose complete batches read back; `TraceReader` stops at the
first incomplete message and says so (`truncated`).

String columns are dictionary-encoded with *dictionary deltas*: each batch
carries only the paths, kinds, tables and thread names that are new since the
previous one, and every event stores a small integer index. The writer only
ever appends to a dictionary, so an index means the same string in every
batch of a trace (the report relies on that, and checks it).

The schema metadata holds a `mysqlio` magic key, the format version and the
`TraceMeta` as JSON. Each batch's custom metadata carries `lost_total`, and may
carry `lost_by` (the same total by the probe's counter that lost them, as JSON; traces
before it have none), the server's counters sampled meanwhile (`server_status`, record --mysql), the
server's view of its threads (`server_threads`: server_threads.ThreadSample.to_json()
samples, record --mysql; optional, so format 1 still holds; older traces have none)
and the block devices' activity since the previous batch (`devices`: one
sample, `t` seconds since the start when it was read, `interval_s` since the
previous one, and per device `devices.DeviceActivity.to_json()`); `close()`
appends an empty batch marked `end`, so a reader can tell a trace that was
closed cleanly from one whose writer died.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from .errors import UserError
from .events import API_NAMES, BY_NAMES, EVENT_DTYPE, OP_NAMES
from .ibdata_regions import RegionMap
from .probe import dev_from_kernel, dev_label
from .trace_batch_meta import device_sample, float_or_none, gap_note, lost_by_counter, status_samples
from .trace_validate import BatchValidator

FORMAT_VERSION = 1
MAGIC_KEY = b"mysqlio"
MAGIC_VALUE = b"trace"
VERSION_KEY = b"mysqlio.format_version"
META_KEY = b"mysqlio.meta"

_STR_DICT = pa.dictionary(pa.int32(), pa.string())
_SMALL_DICT = pa.dictionary(pa.int8(), pa.string())

# The column schema of every trace (format version 1); one row per request.
COLUMNS = pa.schema(
    [
        pa.field("ts_ns", pa.uint64(), nullable=False),  # completion time, CLOCK_MONOTONIC ns
        pa.field("t", pa.float64(), nullable=False),  # seconds since TraceMeta.start_mono_ns
        pa.field("tid", pa.uint32(), nullable=False),
        pa.field("thread", _STR_DICT, nullable=False),  # thread name
        pa.field("op", _SMALL_DICT, nullable=False),  # events.OP_NAMES
        pa.field("api", _SMALL_DICT, nullable=False),  # events.API_NAMES
        pa.field("path", _STR_DICT, nullable=False),
        pa.field("kind", _STR_DICT, nullable=False),
        pa.field("table", _STR_DICT, nullable=True),  # schema.table of table files, else null
        pa.field("deleted", pa.bool_(), nullable=False),
        pa.field("dev", pa.uint64(), nullable=False),  # st_dev encoding (os.makedev)
        pa.field("ino", pa.uint64(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),  # -1 when unknown
        pa.field("bytes", pa.int64(), nullable=False),  # bytes transferred; 0 for syncs and errors
        pa.field("errno", pa.int32(), nullable=False),  # 0, or the error of a failed request
        pa.field("latency_ns", pa.uint64(), nullable=False),
        # page-cache writeback events: what made the kernel write (events.BY_NAMES); "none"
        # for every other event. Traces recorded before it have no such column.
        pa.field("by", _SMALL_DICT, nullable=False),
        # the connection the thread served (record --mysql with eBPF: the inode of the socket it
        # last read, probes/connection.bpf.h), 0 when none; traces recorded before have none
        pa.field("conn", pa.uint32(), nullable=False),
    ]
)
# columns a trace may lack (read as their default)
OPTIONAL_COLUMNS = frozenset({"by", "conn"})


@dataclass
class TraceMeta:
    """Where and when a trace was recorded."""

    host: str
    kernel: str
    pid: int
    server_exe: str | None
    server_version: str | None
    datadir: str | None
    start_wall: float  # unix time at start
    start_mono_ns: int  # CLOCK_MONOTONIC ns at start (the clock of the events' ts_ns)
    command: str  # the command line that recorded it
    format_version: int = FORMAT_VERSION
    # ibdata1's regions: [{"dev": st_dev, "ino": ino, **RegionMap.to_json()}] (traces
    # recorded before have none: their ibdata1 is one row)
    regions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # the probes gave each event its connection (the `conn` column; record --mysql with eBPF):
    # report's user and connection groups name the connection, not the thread's last sample
    connections: bool = False

    def region_maps(self) -> dict[tuple[int, int], RegionMap]:
        """(st_dev, ino) -> the regions of that file, as recorded."""
        out = {}
        for r in self.regions:
            if isinstance(r, dict) and isinstance(r.get("dev"), int) and isinstance(r.get("ino"), int):
                try:
                    out[(r["dev"], r["ino"])] = RegionMap.from_json(r)
                except (KeyError, TypeError, ValueError):  # a damaged entry: that file stays whole
                    continue
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TraceMeta:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in known})


@dataclass(frozen=True)
class FileInfo:
    """What the recorder knows of a (dev, ino): its path now and its classification."""

    path: str
    kind: str
    table: str | None
    deleted: bool


_UNKNOWN_KIND = "other"


def _text(s: str) -> str:
    """A str Arrow can store: undecodable bytes of a file name (surrogate escapes)
    become visible backslash escapes instead of failing the whole batch."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class _Dictionary:
    """An append-only string dictionary: value -> index, and the values in order."""

    def __init__(self, initial: tuple[str, ...] = ()) -> None:
        self.values: list[str] = list(initial)
        self.index: dict[str, int] = {v: i for i, v in enumerate(initial)}
        self._array: pa.Array = pa.array(self.values, pa.string())

    def get(self, value: str) -> int:
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(_text(value))
        return i

    def array(self) -> pa.Array:
        if len(self._array) != len(self.values):
            self._array = pa.array(self.values, pa.string())
        return self._array


def _write_options() -> ipc.IpcWriteOptions:
    # zstd (per buffer) stores about a third of the raw 82 bytes per event at ~4M events/s;
    # readers decompress transparently. Without zstd in this pyarrow, plain buffers.
    codec = "zstd" if pa.Codec.is_available("zstd") else None
    return ipc.IpcWriteOptions(emit_dictionary_deltas=True, compression=codec)


def open_private(path: str, what: str) -> BinaryIO:
    """Create or truncate `path` with mode 0600 (also when it existed), for writing."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UserError(f"cannot write {what} {path}: {exc.strerror}") from None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # never chmod a device (-o /dev/null) for everyone
            os.fchmod(fd, 0o600)
    except OSError as exc:
        os.close(fd)
        raise UserError(f"cannot write {what} {path}: {exc.strerror}") from None
    return os.fdopen(fd, "wb", buffering=1 << 20)


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a batch's column (in order of first appearance) and each
    element's index into them. A hash (pyarrow's dictionary_encode), not np.unique's sort:
    4-5x faster on a batch of 30k events' column (issue 19: record's own CPU)."""
    encoded = pa.array(values).dictionary_encode()
    return (
        encoded.dictionary.to_numpy(zero_copy_only=False),
        encoded.indices.to_numpy(zero_copy_only=False),
    )


def file_keys(dev: np.ndarray, ino: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (dev, ino) pairs of a batch, and each event's index into them."""
    u_ino, inverse = distinct(ino)
    u_dev = np.zeros(len(u_ino), np.uint32)
    u_dev[inverse] = dev
    if np.array_equal(u_dev[inverse], dev):  # the usual case: an inode number names one file
        return u_dev, u_ino, inverse
    u_devs, dev_inverse = distinct(dev)
    combined = inverse.astype(np.int64) * len(u_devs) + dev_inverse
    u_comb, inverse = distinct(combined)
    return u_devs[u_comb % len(u_devs)], u_ino[u_comb // len(u_devs)], inverse


@dataclass(frozen=True)
class BatchKeys:
    """A batch's distinct files (kernel dev, ino) and threads, and each event's index into
    them: found once per batch, for the names record learns and for the writer's columns."""

    u_dev: np.ndarray
    u_ino: np.ndarray
    file_inv: np.ndarray
    u_tid: np.ndarray
    tid_inv: np.ndarray

    @classmethod
    def of(cls, events: np.ndarray) -> BatchKeys:
        u_dev, u_ino, file_inv = file_keys(events["dev"], events["ino"])
        u_tid, tid_inv = distinct(np.ascontiguousarray(events["tid"]))
        return cls(u_dev, u_ino, file_inv, u_tid, tid_inv)


class TraceWriter:
    """Appends batches of events to a new trace file (mode 0600)."""

    def __init__(self, path: str, meta: TraceMeta) -> None:
        self.path = path
        self.meta = meta
        self.bytes_written = 0
        self.events_written = 0
        self._closed = False
        self._threads = _Dictionary()
        self._paths = _Dictionary()
        self._kinds = _Dictionary()
        self._tables = _Dictionary()
        self._op_dict = pa.array(OP_NAMES, pa.string())
        self._api_dict = pa.array(API_NAMES, pa.string())
        self._by_dict = pa.array(BY_NAMES, pa.string())
        metadata = {
            MAGIC_KEY: MAGIC_VALUE,
            VERSION_KEY: str(FORMAT_VERSION).encode(),
            META_KEY: json.dumps(asdict(meta)).encode(),
        }
        self.schema = COLUMNS.with_metadata(metadata)
        self._file = open_private(path, "trace")
        try:
            self._writer = ipc.new_stream(self._file, self.schema, options=_write_options())
        except OSError as exc:
            self._file.close()
            raise UserError(f"cannot write trace {path}: {exc.strerror or exc}") from None
        # pyarrow writes the schema with the first batch: an empty one now puts the
        # header on disk, so a recorder killed before its first events leaves a valid trace.
        # (pyarrow 26 sends the first non-empty dictionary after this empty one as a
        # "replacement", not a delta; same content, and every later one is a delta.)
        self._append(self._batch(np.zeros(0, EVENT_DTYPE), {}, {}), {"lost_total": "0"})

    def write(
        self,
        events: np.ndarray,
        files: Mapping[tuple[int, int], FileInfo],
        threads: Mapping[int, str],
        lost_total: int,
        server_status: list[dict[str, Any]] | None = None,
        devices: dict[str, Any] | None = None,
        server_threads: list[dict[str, Any]] | None = None,
        keys: BatchKeys | None = None,
        lost_by: Mapping[str, int] | None = None,
    ) -> None:
        """Append one batch: `files` is keyed by (kernel dev, ino) as in the events,
        `threads` maps tid -> name, `server_status` the server's counters sampled
        meanwhile (--mysql), `devices` the block devices' sample since the previous
        batch ({"t", "interval_s", "devices": [DeviceActivity.to_json(), ...]}), `keys`
        the batch's BatchKeys when the caller found them already (record does).
        The batch is on disk (flushed) when this returns."""
        if self._closed:
            raise ValueError("trace writer is closed")
        if events.dtype != EVENT_DTYPE:
            raise TypeError(f"events must have dtype EVENT_DTYPE, not {events.dtype}")
        batch = self._batch(events, files, threads, keys)
        custom = _lost(lost_total, lost_by)
        if server_status:
            custom["server_status"] = json.dumps(server_status)
        if devices:
            custom["devices"] = json.dumps(devices)
        if server_threads:
            custom["server_threads"] = json.dumps(server_threads, separators=(",", ":"))
        self._append(batch, custom)
        self.events_written += len(events)

    def note_gap(
        self,
        from_t: float,
        to_t: float,
        old_pid: int,
        new_pid: int,
        lost_total: int,
        lost_by: Mapping[str, int] | None = None,
    ) -> None:
        """The traced server restarted (record --follow): nothing was traced from
        from_t to to_t (seconds since the start); an empty batch carries the note."""
        gap = {"from_t": round(from_t, 6), "to_t": round(to_t, 6), "old_pid": old_pid, "new_pid": new_pid}
        self._append(
            self._batch(np.zeros(0, EVENT_DTYPE), {}, {}), {"gap": json.dumps(gap), **_lost(lost_total, lost_by)}
        )

    def close(self, lost_total: int, end_wall: float | None = None, lost_by: Mapping[str, int] | None = None) -> None:
        """Mark the trace complete (a final empty batch), end the stream and sync it to disk."""
        if self._closed:
            return
        empty = self._batch(np.zeros(0, EVENT_DTYPE), {}, {})
        end = {"end": "1", **_lost(lost_total, lost_by)}
        if end_wall is not None:
            end["end_wall"] = repr(float(end_wall))
        self._append(empty, end)
        try:
            self._writer.close()
            self._flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise UserError(f"cannot write trace {self.path}: {exc.strerror or exc}") from None
        finally:
            self._closed = True
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close(0)

    # -- internals --

    def _append(self, batch: pa.RecordBatch, custom: dict[str, str]) -> None:
        try:
            self._writer.write_batch(batch, custom_metadata=custom)
            self._flush()
        except OSError as exc:
            raise UserError(f"cannot write trace {self.path}: {exc.strerror or exc}") from None

    def _flush(self) -> None:
        self._file.flush()
        self.bytes_written = self._file.tell()

    def _batch(
        self,
        events: np.ndarray,
        files: Mapping[tuple[int, int], FileInfo],
        threads: Mapping[int, str],
        keys: BatchKeys | None = None,
    ) -> pa.RecordBatch:
        n = len(events)
        ino = events["ino"]
        if keys is None:
            keys = BatchKeys.of(events)
        # per unique file of the batch (a few hundred at most): path, kind, table, deleted, st_dev
        u_dev, u_ino, file_inv = keys.u_dev, keys.u_ino, keys.file_inv
        nu = len(u_ino)
        path_u = np.empty(nu, np.int32)
        kind_u = np.empty(nu, np.int32)
        table_u = np.empty(nu, np.int32)
        deleted_u = np.empty(nu, np.bool_)
        stdev_u = np.empty(nu, np.uint64)
        for i, (d, n_ino) in enumerate(zip(u_dev.tolist(), u_ino.tolist(), strict=True)):
            info = files.get((d, n_ino))
            if info is None:
                info = FileInfo(f"<unknown {dev_label(dev_from_kernel(d))} inode {n_ino}>", _UNKNOWN_KIND, None, False)
            path_u[i] = self._paths.get(info.path)
            kind_u[i] = self._kinds.get(info.kind)
            table_u[i] = -1 if info.table is None else self._tables.get(info.table)
            deleted_u[i] = info.deleted
            stdev_u[i] = dev_from_kernel(d)

        tid = np.ascontiguousarray(events["tid"])
        u_tid, tid_inv = keys.u_tid, keys.tid_inv
        thread_u = np.array([self._threads.get(threads.get(t, "?")) for t in u_tid.tolist()], np.int32)

        op = events["op"]
        api = events["api"]
        by = events["by"]
        if n and (int(op.max()) >= len(OP_NAMES) or int(api.max()) >= len(API_NAMES) or int(by.max()) >= len(BY_NAMES)):
            raise ValueError("event with an unknown op, api or cause code")
        result = events["result"]
        table_idx = table_u[file_inv]
        table_col = pa.DictionaryArray.from_arrays(
            pa.array(table_idx, pa.int32(), mask=table_idx < 0), self._tables.array()
        )
        ts = np.ascontiguousarray(events["ts_ns"])
        t = (ts.astype(np.int64) - np.int64(self.meta.start_mono_ns)) / 1e9
        columns = [
            pa.array(ts, pa.uint64()),
            pa.array(t, pa.float64()),
            pa.array(tid, pa.uint32()),
            pa.DictionaryArray.from_arrays(pa.array(thread_u[tid_inv], pa.int32()), self._threads.array()),
            pa.DictionaryArray.from_arrays(pa.array(op.astype(np.int8), pa.int8()), self._op_dict),
            pa.DictionaryArray.from_arrays(pa.array(api.astype(np.int8), pa.int8()), self._api_dict),
            pa.DictionaryArray.from_arrays(pa.array(path_u[file_inv], pa.int32()), self._paths.array()),
            pa.DictionaryArray.from_arrays(pa.array(kind_u[file_inv], pa.int32()), self._kinds.array()),
            table_col,
            pa.array(deleted_u[file_inv], pa.bool_()),
            pa.array(stdev_u[file_inv], pa.uint64()),
            pa.array(np.ascontiguousarray(ino), pa.uint64()),
            pa.array(np.ascontiguousarray(events["offset"]), pa.int64()),
            pa.array(np.maximum(result, 0), pa.int64()),
            pa.array(np.where(result < 0, -result, 0).astype(np.int32), pa.int32()),
            pa.array(np.ascontiguousarray(events["latency_ns"]), pa.uint64()),
            pa.DictionaryArray.from_arrays(pa.array(by.astype(np.int8), pa.int8()), self._by_dict),
            pa.array(np.ascontiguousarray(events["conn"]), pa.uint32()),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _lost(lost_total: int, lost_by: Mapping[str, int] | None) -> dict[str, str]:
    """A batch's custom metadata of what was lost so far: the total, and by counter."""
    custom = {"lost_total": str(int(lost_total))}
    if lost_by:
        custom["lost_by"] = json.dumps({k: int(v) for k, v in sorted(lost_by.items())}, separators=(",", ":"))
    return custom


class TraceReader:
    """Reads a trace batch by batch; memory does not grow with the trace's length."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.truncated = False
        self.complete = False
        self.lost_total = 0
        self.lost_by: dict[str, int] = {}  # lost_total by counter (traces before it: empty)
        self.end_wall: float | None = None
        self.batches_read = 0
        self.gaps: list[dict[str, Any]] = []  # server restarts (record --follow), as read so far
        self.server_status: list[dict[str, Any]] = []  # the server's counters (record --mysql)
        # the server's view of its threads (record --mysql), server_threads.ThreadSample.to_json()
        self.server_threads: list[dict[str, Any]] = []
        # block devices, one sample per batch that carried one (see device_sample), as read so far
        self.devices: list[dict[str, Any]] = []
        try:
            st = os.stat(path)
        except OSError as exc:
            raise UserError(f"cannot read trace {path}: {exc.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise UserError(f"cannot read trace {path}: Is a directory")
        if st.st_size == 0:
            raise UserError(f"{path}: empty file, not a mysqlio trace")
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                f.seek(0)
                schema = ipc.open_stream(f).schema
        except OSError as exc:
            raise UserError(f"cannot read trace {path}: {exc.strerror or exc}") from None
        except (pa.ArrowException, ValueError):
            raise UserError(_not_a_stream(path, head)) from None
        self.schema = schema
        self.meta = _check_schema(path, schema)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The trace's non-empty batches, in order. A cut-off or corrupt tail ends the
        iteration (`truncated` is then True); `lost_total` and `complete` are updated
        as batches are read."""
        try:
            f = pa.OSFile(self.path, "rb")
        except OSError as exc:
            raise UserError(f"cannot read trace {self.path}: {exc.strerror or exc}") from None
        with f:
            try:
                reader = ipc.open_stream(f)
            except (pa.ArrowException, OSError, ValueError):
                raise UserError(f"{self.path}: trace header is truncated or corrupt") from None
            validator = BatchValidator()
            while True:
                try:
                    batch, custom = reader.read_next_batch_with_custom_metadata()
                    # a damaged batch can decode: out-of-range dictionary indices, bad offsets,
                    # a field name that is not UTF-8, fewer columns than the schema
                    validator.validate(batch)
                    batch = _with_optional_columns(batch)
                except StopIteration:
                    return
                except (pa.ArrowException, OSError, ValueError):
                    # a message cut short (writer killed) or damaged; a cut inside the
                    # end-of-stream marker after the end batch loses nothing
                    self.truncated = not self.complete
                    return
                if custom is not None:
                    lost = custom.get(b"lost_total")
                    if lost is not None:
                        if not lost.isdigit():  # damaged: what was lost is unknown from here on
                            self.truncated = not self.complete
                            return
                        self.lost_total = int(lost)
                    lost_by = custom.get(b"lost_by")
                    if lost_by is not None:
                        counts = lost_by_counter(lost_by)
                        if counts is None:  # damaged, as a damaged lost_total
                            self.truncated = not self.complete
                            return
                        self.lost_by = counts
                    status = custom.get(b"server_status")
                    if status is not None:
                        self.server_status.extend(status_samples(status))
                    threads = custom.get(b"server_threads")
                    if threads is not None:
                        self.server_threads.extend(status_samples(threads))
                    devices = custom.get(b"devices")
                    if devices is not None:
                        sample = device_sample(devices)
                        if sample is not None:
                            self.devices.append(sample)
                    gap = custom.get(b"gap")
                    if gap is not None:
                        self.gaps.append(gap_note(gap))
                    if custom.get(b"end") == b"1":
                        self.complete = True
                        end_wall = custom.get(b"end_wall")
                        self.end_wall = float_or_none(end_wall)
                self.batches_read += 1
                if batch.num_rows:
                    yield batch


def _with_optional_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of an older trace, completed with the columns it lacks (as their default)."""
    if all(batch.schema.get_field_index(name) >= 0 for name in OPTIONAL_COLUMNS):
        return batch
    n = batch.num_rows
    defaults = {
        "by": pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n, np.int8), pa.int8()), pa.array(BY_NAMES, pa.string())
        ),
        "conn": pa.array(np.zeros(n, np.uint32), pa.uint32()),
    }
    columns = [
        batch.column(field.name) if batch.schema.get_field_index(field.name) >= 0 else defaults[field.name]
        for field in COLUMNS
    ]
    return pa.RecordBatch.from_arrays(columns, schema=COLUMNS)


def _not_a_stream(path: str, head: bytes) -> str:
    if head.startswith(b"ARROW1"):
        return f"{path}: an Arrow IPC file, not a mysqlio trace (which is an Arrow stream)"
    if b"\xff\xff\xff\xff".startswith(head[:4]):  # an Arrow stream cut inside its schema
        return f"{path}: trace header is truncated or corrupt"
    return f"{path}: not a mysqlio trace"


def _check_schema(path: str, schema: pa.Schema) -> TraceMeta:
    metadata = schema.metadata or {}
    if metadata.get(MAGIC_KEY) != MAGIC_VALUE:
        raise UserError(f"{path}: an Arrow stream, but not a mysqlio trace (no mysqlio metadata)")
    try:
        version = int(metadata.get(VERSION_KEY, b"0"))
    except ValueError:
        version = 0
    if version < 1:
        raise UserError(f"{path}: mysqlio trace with a bad format version")
    if version > FORMAT_VERSION:
        raise UserError(
            f"{path}: mysqlio trace format {version} is newer than this mysqlio reads ({FORMAT_VERSION}); upgrade mysqlio"
        )
    try:
        meta = TraceMeta.from_json(json.loads(metadata[META_KEY]))
    except (KeyError, ValueError, TypeError):
        raise UserError(f"{path}: mysqlio trace with corrupt metadata") from None
    for field in COLUMNS:
        if field.name in OPTIONAL_COLUMNS and schema.get_field_index(field.name) < 0:
            continue
        if schema.get_field_index(field.name) < 0 or schema.field(field.name).type != field.type:
            raise UserError(f"{path}: mysqlio trace without a valid {field.name!r} column")
    return meta
