"""The shipped Prometheus rules (contrib/prometheus): valid for Debian's promtool, their
unit tests pass, and every exporter metric they query is one the exporter exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mysqlio.exporter import ExporterState

RULES_DIR = Path(__file__).resolve().parent.parent / "contrib" / "prometheus"
RULES = RULES_DIR / "mysqlio-rules.yml"
RULE_TESTS = RULES_DIR / "mysqlio-rules.test.yml"


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: Debian's prometheus package (make setup installs it)")
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120)


def test_rules_are_valid() -> None:
    result = _run("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rule_unit_tests_pass() -> None:
    result = _run("test", "rules", RULE_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _exported_sample_names() -> set[str]:
    """The sample names the exporter can produce, from its metric families' types."""
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
    state = ExporterState(top_files=5, interval_s=1.0, backend="bpf", follow=True, pid=1)
    names = set()
    for family in state.families():
        for suffix in suffixes[family.type]:
            names.add(family.name + suffix)
    return names


def test_rules_query_only_exported_metrics() -> None:
    """A typo in a metric name is an empty panel or an alert that never fires: refuse it."""
    text = RULES.read_text() + RULE_TESTS.read_text()
    queried = set(re.findall(r"\bmysqlio_[a-z_]+", text))
    exported = _exported_sample_names()
    assert queried, "the rules query no exporter metric"
    assert queried <= exported, f"not exported: {sorted(queried - exported)}"
