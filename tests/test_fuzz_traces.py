"""Corrupt, truncated, foreign and empty traces: only one-line user errors, never a crash.
10,000+ generated cases over mutations of a real trace and over random bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysqlio.errors import UserError
from mysqlio.report.build import build_report
from mysqlio.report.to_json import report_json
from mysqlio.trace import TraceReader

FIXTURE = (Path(__file__).parent / "fixtures" / "example.trace").read_bytes()
SETTINGS = settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))


def _read(tmp: Path, data: bytes) -> None:
    path = tmp / "fuzz.trace"
    path.write_bytes(data)
    try:
        report_json(build_report(TraceReader(str(path))))
    except UserError as exc:
        message = str(exc)
        assert message and "\n" not in message


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@SETTINGS
@given(
    cut=st.integers(min_value=0, max_value=len(FIXTURE)),
    flips=st.lists(st.tuples(st.integers(0, len(FIXTURE) - 1), st.integers(1, 255)), max_size=8),
)
def test_mutated_real_trace(scratch: Path, cut: int, flips: list[tuple[int, int]]) -> None:
    data = bytearray(FIXTURE)
    for pos, xor in flips:
        data[pos] ^= xor
    _read(scratch, bytes(data[:cut]))


@SETTINGS
@given(data=st.binary(max_size=4096))
def test_random_bytes(scratch: Path, data: bytes) -> None:
    _read(scratch, data)
