"""Full validation of a trace's record batches, its dictionaries validated once.

A damaged batch can decode (out-of-range dictionary indices, bad offsets, a string that
is not UTF-8), so the reader validates each batch in full. With dictionary deltas every
batch carries its column's whole dictionary, each path of the trace: `validate(full=True)`
checked 100k paths again for each batch of a trace of 100k files, time in files x batches
(issue 60). Here a batch is validated in full when a dictionary of it is new (the first, or
one a delta made), and the dictionaries kept: the same ones in later batches are recognised
by their buffers, and only the rest of those batches is validated in full, their indices
checked against the dictionaries' lengths as Arrow's full validation does."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


class BatchValidator:
    """`validate(batch)`: what `batch.validate(full=True)` checks, raising pa.ArrowInvalid."""

    def __init__(self) -> None:
        # column -> (its dictionary's buffers' addresses, the dictionary): holding it keeps
        # its buffers alive, so no other array can have the same addresses
        self._known: dict[int, tuple[tuple[int, ...], pa.Array]] = {}

    def validate(self, batch: pa.RecordBatch) -> None:
        columns = batch.columns
        dictionaries = {i: c.dictionary for i, c in enumerate(columns) if isinstance(c, pa.DictionaryArray)}
        seen = {i: _buffers(d) for i, d in dictionaries.items()}
        if any(self._known.get(i, ((), None))[0] != seen[i] for i in dictionaries):
            # a dictionary not validated yet: the whole batch, as Arrow does (the stream's
            # schema, the same for every batch, is checked with it)
            batch.validate(full=True)
            self._known = {i: (seen[i], d) for i, d in dictionaries.items()}
            return
        batch.validate()  # the structure: columns' lengths and types
        for i, column in enumerate(columns):
            if i not in dictionaries:
                column.validate(full=True)
                continue
            indices = column.indices
            indices.validate(full=True)
            if indices.null_count < len(indices):
                bounds = pc.min_max(indices)
                if bounds["min"].as_py() < 0 or bounds["max"].as_py() >= len(dictionaries[i]):
                    raise pa.ArrowInvalid(f"column {i}: dictionary index out of bounds")


def _buffers(array: pa.Array) -> tuple[int, ...]:
    """The array's identity: its length, offset, and its buffers' addresses and sizes."""
    buffers = [(0, 0) if b is None else (b.address, b.size) for b in array.buffers()]
    return (len(array), array.offset, *(x for pair in buffers for x in pair))
