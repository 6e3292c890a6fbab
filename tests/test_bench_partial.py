"""A benchmark run that stops early (a stalled server, a tool's failure) keeps the rows it
had made: make bench takes almost two hours, and one stalled run lost them all once."""

from __future__ import annotations

from pathlib import Path

import bench
import pytest


def test_a_failed_scenario_keeps_the_rows_before_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def measured(suite: bench.Suite) -> None:
        suite.add(bench.Result("first scenario", "speed", [3.0, 1.0, 2.0], "ops"))

    def stalled(suite: bench.Suite) -> None:
        raise RuntimeError("sysbench oltp_write_only under top did not finish\nits output")

    monkeypatch.setattr(bench, "SCENARIOS", {"first": measured, "second": stalled})
    monkeypatch.setattr(bench, "estimate_s", lambda chosen, smoke: 60.0)
    out = tmp_path / "benchmarks.md"
    assert bench.main(["--out", str(out)]) == 1
    text = out.read_text()
    assert "**Incomplete**: the run stopped at second: sysbench oltp_write_only under top did not finish;" in text
    assert "| first scenario | speed | 2 ops | 1–3 |  |  |" in text
