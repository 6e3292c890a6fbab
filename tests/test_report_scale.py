"""Issue 60's report at many files, without a trace: the sparse latency histograms give
latency.percentile's figures for every group, and the reader's validation, which checks a
dictionary only when it is new, still refuses a batch whose indices leave it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from mysqlio.latency import CLASSES, NBUCKETS, percentile
from mysqlio.report.groups import LatencyRows
from mysqlio.trace_validate import BatchValidator


def test_sparse_percentiles_equal_the_dense_ones() -> None:
    rng = np.random.default_rng(7)
    groups = 300
    rows = groups * len(CLASSES)
    dense = np.zeros((rows, NBUCKETS), np.int64)
    sparse = LatencyRows()
    for _ in range(40):  # batches, a group's requests spread over several
        n = int(rng.integers(1, 2_000))
        row = rng.integers(0, rows, n) * (rng.random(n) < 0.7)  # row 0 busy, many rows empty
        bucket = np.minimum(rng.geometric(0.05, n) + 100, NBUCKETS - 1)
        np.add.at(dense, (row, bucket), 1)
        sparse.add(row, bucket)
    p50, p99, seen = sparse.percentiles(groups)
    for r in range(rows):
        assert seen[r] == dense[r].any()
        if seen[r]:  # the cap at the maximum is applied by the caller, as here with none
            big = 1 << 62
            assert (int(p50[r]), int(p99[r])) == (percentile(dense[r], 50, big), percentile(dense[r], 99, big)), r
    by_class = dense.reshape(groups, len(CLASSES), NBUCKETS).sum(axis=0)
    assert np.array_equal(sparse.by_class(), by_class)


def _batch(indices: list[int], dictionary: pa.Array) -> pa.RecordBatch:
    column = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), dictionary, safe=False)
    return pa.RecordBatch.from_arrays([column, pa.array(range(len(indices)), pa.int64())], names=["path", "n"])


def test_a_known_dictionary_is_not_checked_again_but_its_indices_are() -> None:
    dictionary = pa.array(["a", "b", "c"], pa.string())
    validator = BatchValidator()
    validator.validate(_batch([0, 1, 2], dictionary))  # new: the whole batch in full
    validator.validate(_batch([2, 2, 0], dictionary))  # the same dictionary: its indices only
    with pytest.raises(pa.ArrowInvalid):
        validator.validate(_batch([0, 3], dictionary))  # past its end
    with pytest.raises(pa.ArrowInvalid):
        validator.validate(_batch([-1], dictionary))
    grown = pa.array(["a", "b", "c", "d"], pa.string())
    validator.validate(_batch([3], grown))  # a new dictionary, valid: accepted
    bad = pa.Array.from_buffers(
        pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)), pa.py_buffer(b"\xff\xfe")]
    )
    with pytest.raises(pa.ArrowInvalid):
        validator.validate(_batch([0], bad))  # a new dictionary that is not UTF-8
