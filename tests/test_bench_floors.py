"""Each variant's in-kernel cost is compared with empty programs on the hooks it uses:
untimed top attaches no enter program, so its floor has exit programs only; record and
top --latency time requests at enter and exit, so theirs has both."""

from __future__ import annotations

import pytest
from bench_server import floor_of
from bench_tracers import Tracer, base_name

ON_DISK = {"floor": 270.0, "floor-exits": 140.0, "floor-pc": 420.0, "floor-pc-exits": 300.0}
ON_TMPFS = {"floor": 190.0, "floor-exits": 95.0}


@pytest.mark.parametrize(
    ("variant", "measured", "floor"),
    [
        ("top", ON_TMPFS, "floor-exits"),
        ("top", ON_DISK, "floor-pc-exits"),
        ("top-nopc", ON_DISK, "floor-exits"),
        ("top-lat", ON_TMPFS, "floor"),
        ("top-lat", ON_DISK, "floor-pc"),
        ("record", ON_TMPFS, "floor"),
        ("record", ON_DISK, "floor-pc"),
        ("record-nopc", ON_DISK, "floor"),
    ],
)
def test_a_variant_is_compared_with_the_floor_on_its_hooks(
    variant: str, measured: dict[str, float], floor: str
) -> None:
    assert floor_of(variant, measured) == floor


@pytest.mark.parametrize(
    ("variant", "page_cache", "exits_only"),
    [("floor", False, False), ("floor-exits", False, True), ("floor-pc", True, False), ("floor-pc-exits", True, True)],
)
def test_floor_variants_name_their_hooks(variant: str, page_cache: bool, exits_only: bool) -> None:
    tracer = Tracer(variant, pid=1, tmp="/nonexistent")
    assert (tracer.name, tracer.floor_page_cache, tracer.exits_only) == ("floor", page_cache, exits_only)
    assert base_name(variant) == "floor"
