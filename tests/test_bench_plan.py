"""What a full `make bench` runs, and that it leaves a 3-hour session room for a CI run
(about 1 h) after it: the estimate tools/bench.py prints, scenario by scenario."""

from __future__ import annotations

import pytest
from bench import SCENARIOS, estimate_s
from bench_server import COMPARED, CONFIGS, NOPC, TPS_VARIANTS

# 112 since kernel_cost took 10 rounds (2026-11-29): the complete run of 2026-11-29 took
# 95 min against an estimate of 99, and a CI run about 50 min
FULL_BENCH_MAX_MIN = 112


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_other_tools_get_windows_under_the_first_workload_only(key: str) -> None:
    config = CONFIGS[key]
    first, later = config.tps_variants(True), config.tps_variants(False)
    assert set(COMPARED) <= set(first)
    assert not set(COMPARED) & set(later)
    # mysqlio's own variants, the floor and the untraced server in every workload
    assert set(TPS_VARIANTS) - set(COMPARED) <= set(later)
    assert (set(NOPC) <= set(later)) == (not config.on_tmpfs)


def test_full_bench_fits_beside_a_ci_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MYSQLIO_BENCH_CONFIGS", "MYSQLIO_BENCH_ROUNDS", "MYSQLIO_BENCH_WORKLOADS"):
        monkeypatch.delenv(var, raising=False)
    minutes = estimate_s(list(SCENARIOS), smoke=False) / 60
    assert minutes <= FULL_BENCH_MAX_MIN, f"make bench: about {minutes:.0f} min"
