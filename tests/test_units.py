from __future__ import annotations

import os

import pytest

from mysqlio.units import human_bytes, human_rate, printable


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0B"), (1023, "1023B"), (1024, "1.0KiB"), (1536, "1.5KiB"), (80 * 2**20, "80.0MiB"), (3 * 2**40, "3.0TiB")],
)
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text


@pytest.mark.parametrize(("n", "text"), [(0, "0"), (2.5, "2.5"), (150.4, "150"), (1500, "1.5k"), (2_000_000, "2.0M")])
def test_human_rate(n: float, text: str) -> None:
    assert human_rate(n) == text


def _escaped_one_by_one(text: str) -> str:
    """printable's rule applied to each character: C0/C1 controls and DEL as \\xNN, a
    surrogateescape'd byte as the byte's \\xNN, anything else kept."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        else:
            out.append(ch)
    return "".join(out)


def test_printable_escapes_every_unsafe_character_and_keeps_the_rest() -> None:
    """Every code point around the rule's ranges (the first 2,048, all surrogates, the
    planes' ends), alone and inside a name: printable's fast path (a name with nothing to
    escape returned as it is) gives what the rule gives character by character."""
    for code in [*range(0x800), *range(0xD800, 0xE000), 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF]:
        ch = chr(code)
        for text in (ch, f"/var/lib/mysql/db/t{ch}1.ibd"):
            assert printable(text) == _escaped_one_by_one(text), hex(code)
    raw = os.fsdecode(b"/d/\xff\x1b[2J.ibd")
    assert printable(raw) == "/d/\\xff\\x1b[2J.ibd"
