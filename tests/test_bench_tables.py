"""tools/bench_tables.py (issue 60's 20,000 tables) reads top's JSON lines without decoding
their files (tens of MB a line at 20,000 files, on 2 cores): what it reads must be what
json.loads reads, on lines output.write_json writes. And it is optional in tools/bench.py
(about 20 minutes: never in a plain `make bench`)."""

from __future__ import annotations

import io
import json

import pytest
from bench import FIXED_ESTIMATE_S, OPTIONAL_SCENARIOS, SCENARIOS, estimate_s
from bench_tables import server_settings, split_line

from mysqlio.model import FileActivity, Interval
from mysqlio.output import write_json
from mysqlio.probe import FileIdentity

PATHS = ["/d/sbtest/sbtest1.ibd", '/d/we"ird\\name.ibd', "/d/é\n.ibd", "/d/mysql-bin.000001"]


def _line(paths: list[str]) -> str:
    files = [FileActivity(file=FileIdentity(2049, n + 1), path=p, kind="table") for n, p in enumerate(paths)]
    for f in files:
        f.write_bytes, f.write_ops = 16384, 1
    interval = Interval(time=1.0, interval_s=1.0, pid=42, lost_events=7, drops={"stats_full": 7}, files=files)
    out = io.StringIO()
    write_json(interval, out, tables={"stats": {"entries": 131072}})
    return out.getvalue()


@pytest.mark.parametrize("paths", [[], PATHS], ids=["no file", "files"])
def test_split_line_reads_what_json_reads(paths: list[str]) -> None:
    line = _line(paths)
    head, found = split_line(line)
    whole = json.loads(line)
    assert head["lost_events"] == whole["lost_events"] == 7
    assert head["drops"] == whole["drops"] == {"stats_full": 7}
    assert found == [f["path"] for f in whole["files"]] == paths


def test_tables_is_optional() -> None:
    assert "tables" in OPTIONAL_SCENARIOS and "tables" not in SCENARIOS
    assert estimate_s(["tables"], smoke=False) == FIXED_ESTIMATE_S["tables"][0] > 10 * 60


def test_variants_keep_innodb_open_files_below_the_fd_limit() -> None:
    many, defaults = server_settings(20_000, "open"), server_settings(20_000, "churn")
    assert int(many["innodb_open_files"]) < int(many["open_files_limit"])
    assert "innodb_open_files" not in defaults
    with pytest.raises(ValueError, match="variant is one of open, churn"):
        server_settings(10, "all")
