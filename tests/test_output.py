"""Plain-text and JSON output of one interval, including hostile file names."""

from __future__ import annotations

import io
import json

from mysqlio.abi import Api, Op
from mysqlio.model import FileActivity, Interval, ThreadActivity
from mysqlio.output import format_text, write_json
from mysqlio.probe import FileIdentity, OpCount


def _interval(path: str) -> Interval:
    f = FileActivity(file=FileIdentity(2049, 7), path=path, kind="table", table="db.t")
    row = OpCount(f.file, 42, Op.WRITE, Api.LIBAIO, 16384, 1, 0)
    f.add(row)
    f.threads[42] = ThreadActivity(tid=42, name="ib_pg_flush_co")
    f.threads[42].add(row)
    return Interval(time=1_800_000_000.0, interval_s=2.0, pid=9, lost_events=0, drops={}, files=[f])


def test_text_escapes_control_characters_in_names() -> None:
    text = format_text(_interval("/var/lib/mysql/db/t\x1b]0;pwned\x07\n.ibd"))
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07\\x0a.ibd" in text
    assert len(text.strip().splitlines()) == 3  # summary, header, one row: no injected line


def test_text_rates_are_per_second() -> None:
    line = format_text(_interval("/d/t.ibd")).splitlines()[2]
    assert "8.0KiB" in line and " 0.5 " in line


def test_json_fields() -> None:
    out = io.StringIO()
    write_json(_interval("/d/t\udcff.ibd"), out)
    obj = json.loads(out.getvalue())
    (f,) = obj["files"]
    assert f["write_bytes"] == 16384 and f["write_ops"] == 1 and f["apis"] == ["libaio"]
    assert f["table"] == "db.t" and f["threads"][0]["name"] == "ib_pg_flush_co"
