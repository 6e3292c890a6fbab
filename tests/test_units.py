from __future__ import annotations

import pytest

from mysqlio.units import human_bytes, human_rate


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0B"), (1023, "1023B"), (1024, "1.0KiB"), (1536, "1.5KiB"), (80 * 2**20, "80.0MiB"), (3 * 2**40, "3.0TiB")],
)
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text


@pytest.mark.parametrize(("n", "text"), [(0, "0"), (2.5, "2.5"), (150.4, "150"), (1500, "1.5k"), (2_000_000, "2.0M")])
def test_human_rate(n: float, text: str) -> None:
    assert human_rate(n) == text
