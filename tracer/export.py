"""Export a trace's events as CSV, JSON lines or Parquet, batch by batch.

Every column of the trace is written, dictionary columns decoded to plain
strings (`by`, the cause of a page-cache writeback, is "none" for every other
event; a trace recorded before it had the column exports "none" throughout);
an unknown latency (page-cache events, abi.LATENCY_UNKNOWN) is null, not 2^64-1.
Memory stays at one batch. The output file is created mode 0600.
JSON lines are built column-wise with Arrow string kernels (strings are
JSON-escaped once per dictionary entry), not row by row in Python.
"""

from __future__ import annotations

import json
import os
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .abi import LATENCY_UNKNOWN
from .errors import UserError
from .trace import COLUMNS, TraceReader, open_private

FORMATS = ("csv", "jsonl", "parquet")
_SUFFIXES = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}

# columns whose value may be unknown, exported as null (the trace's marker of it)
_UNKNOWN = {"latency_ns": pa.scalar(LATENCY_UNKNOWN, pa.uint64())}
# the exported schema: the trace's columns with strings in place of dictionaries
PLAIN = pa.schema(
    [
        pa.field(
            f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type, f.nullable or f.name in _UNKNOWN
        )
        for f in COLUMNS
    ]
)


def format_of(path: str, fmt: str | None) -> str:
    """The format asked for, or the one the output's suffix names."""
    if fmt:
        return fmt
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    raise UserError(f"cannot tell the format of {path} from its name; use --format {'|'.join(FORMATS)}")


def plain(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its dictionary columns decoded to strings, unknown values null."""
    columns = []
    for field, col in zip(PLAIN, batch.columns, strict=True):
        if isinstance(col, pa.DictionaryArray):
            col = col.dictionary_decode()
        elif field.name in _UNKNOWN:
            col = _null_unknown(field.name, col)
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=PLAIN)


def _null_unknown(name: str, col: pa.Array) -> pa.Array:
    unknown = pc.equal(col, _UNKNOWN[name])
    return pc.if_else(unknown, pa.scalar(None, col.type), col) if pc.any(unknown).as_py() else col


def export_trace(reader: TraceReader, out: str, fmt: str) -> int:
    """Write every event of the trace to `out`; returns the number of rows."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}; formats: {', '.join(FORMATS)}")
    rows = 0
    f = open_private(out, "export")
    try:
        if fmt == "parquet":
            with pq.ParquetWriter(f, PLAIN, compression="zstd") as writer:
                for batch in reader.batches():
                    writer.write_batch(plain(batch))
                    rows += batch.num_rows
        elif fmt == "csv":
            with pacsv.CSVWriter(f, PLAIN) as writer:
                for batch in reader.batches():
                    writer.write_batch(plain(batch))
                    rows += batch.num_rows
        else:
            jsonl = _JsonLines()
            for batch in reader.batches():
                jsonl.write(batch, f)
                rows += batch.num_rows
        f.flush()
    except OSError as exc:
        raise UserError(f"cannot write export {out}: {exc.strerror or exc}") from None
    finally:
        f.close()
    return rows


class _JsonLines:
    """One JSON object per event, assembled column-wise."""

    def __init__(self) -> None:
        self._escaped: dict[str, tuple[pa.Array, pa.Array]] = {}

    def _strings(self, name: str, col: pa.DictionaryArray) -> pa.Array:
        cached = self._escaped.get(name)
        if cached is None or not cached[0].equals(col.dictionary):
            escaped = pa.array([json.dumps(s) for s in col.dictionary.to_pylist()], pa.string())
            cached = self._escaped[name] = (col.dictionary, escaped)
        return pc.fill_null(pc.take(cached[1], col.indices), "null")

    def write(self, batch: pa.RecordBatch, f: BinaryIO) -> None:
        parts: list[pa.Array | str] = []
        for i, field in enumerate(PLAIN):
            col = batch.column(i)
            parts.append(("{" if i == 0 else ",") + json.dumps(field.name) + ":")
            if isinstance(col, pa.DictionaryArray):
                parts.append(self._strings(field.name, col))
            elif field.name in _UNKNOWN:
                parts.append(pc.fill_null(pc.cast(_null_unknown(field.name, col), pa.string()), "null"))
            else:
                parts.append(pc.cast(col, pa.string()))
        parts.append("}\n")
        n = batch.num_rows
        lines = pc.binary_join_element_wise(*parts, "")  # str parts broadcast as scalars
        if isinstance(lines, pa.ChunkedArray):
            lines = lines.combine_chunks()
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + n + 1]
        data = lines.buffers()[2]
        if data is not None and n:
            f.write(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
