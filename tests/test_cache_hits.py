"""Page-cache hits (issue 61), derived from a file's counters by mysqlio.cache_hits, and where
they are shown: top's JSON, the `p` view's hit % column, the report's, the exporter's
counters. Pure: the rows are the kernel's rows as the probes make them (a direct read is a
READ row and a DIRECT_READ row of the same bytes); tests/test_coldread.py checks the counts
themselves against iogen on a real disk."""

from __future__ import annotations

import io
import json

from rich.console import Console
from test_exporter import _scrape_state

from mysqlio.abi import Api, Op
from mysqlio.cache_hits import hit_bytes, hit_ratio
from mysqlio.exporter import ExporterState
from mysqlio.model import FileActivity, Interval
from mysqlio.output import write_json
from mysqlio.probe import FileIdentity, OpCount
from mysqlio.render import Header, render_screen
from mysqlio.report.model import Stats
from mysqlio.report.text import _hit
from mysqlio.stap_probe import StapProbe
from mysqlio.view import ScreenState

MIB = 1 << 20


def _file(ino: int, name: str, *rows: tuple[Op, Api, int, int]) -> FileActivity:
    f = FileActivity(file=FileIdentity(2049, ino), path=f"/var/lib/mysql/{name}", kind="table", table=name)
    for op, api, nbytes, ops in rows:
        f.add(OpCount(f.file, 100, op, api, nbytes, ops, 0))
    return f


def _files() -> list[FileActivity]:
    # buffered: 4 MiB read, 1 MiB of it from the disk (768 KiB of that by readahead)
    warm = _file(1, "warm.ibd", (Op.READ, Api.SYSCALL, 4 * MIB, 64), (Op.DISK_READ, Api.KERNEL, MIB // 4, 2),
                 (Op.READAHEAD, Api.KERNEL, 3 * MIB // 4, 3))  # fmt: skip
    # O_DIRECT only: 2 MiB read, all from the disk
    direct = _file(2, "direct.ibd", (Op.READ, Api.LIBAIO, 2 * MIB, 128), (Op.DIRECT_READ, Api.LIBAIO, 2 * MIB, 128))
    # both: 1 MiB O_DIRECT, 1 MiB buffered of which 512 KiB from the disk
    mixed = _file(3, "mixed.ibd", (Op.READ, Api.SYSCALL, 2 * MIB, 32), (Op.DIRECT_READ, Api.SYSCALL, MIB, 16),
                  (Op.DISK_READ, Api.KERNEL, MIB // 2, 4))  # fmt: skip
    # readahead past what was asked: more from the disk than read, no hit (never below 0)
    ahead = _file(4, "ahead.ibd", (Op.READ, Api.SYSCALL, 16384, 4), (Op.READAHEAD, Api.KERNEL, 131072, 1))
    return [warm, direct, mixed, ahead]


def test_hits_derived_once_from_the_counters() -> None:
    warm, direct, mixed, ahead = _files()
    assert (warm.disk_read_bytes, warm.readahead_bytes, warm.direct_read_bytes) == (MIB, 3 * MIB // 4, 0)
    assert (direct.read_bytes, direct.disk_read_bytes, direct.direct_read_bytes) == (2 * MIB, 2 * MIB, 2 * MIB)
    assert direct.read_ops == 128 and direct.apis == {"libaio"}  # the DIRECT_READ row is no second request
    assert [f.cache_hit_bytes for f in (warm, direct, mixed, ahead)] == [3 * MIB, 0, MIB // 2, 0]
    assert [f.counters_json()["cache_hit_bytes"] for f in (warm, direct, mixed, ahead)] == [3 * MIB, 0, MIB // 2, 0]
    ratios = [hit_ratio(f.read_bytes, f.disk_read_bytes, f.direct_read_bytes) for f in (warm, direct, mixed, ahead)]
    assert ratios == [0.75, None, 0.5, 0.0]
    assert hit_bytes(0, 0) == 0 and hit_ratio(0, 0, 0) is None


def test_page_cache_view_hit_column() -> None:
    rows = ScreenState(view="page cache").update(
        Interval(time=0.0, interval_s=1.0, pid=4242, lost_events=0, drops={}, files=_files())
    )
    header = Header(
        4242, "MariaDB 11.8.3", 1.0, 1.0, 0.0, 0.0, 0, 0, "file", "write", "/var/lib/mysql", view="page cache",
        page_cache=True,
    )  # fmt: skip
    console = Console(width=160, force_terminal=True, color_system=None, record=True, legacy_windows=False)
    console.print(render_screen(header, rows, 160))
    lines = console.export_text().splitlines()
    head = next(line for line in lines if line.startswith("kind"))
    end = head.index("hit %") + len("hit %")  # right-justified under its title
    shown = {line.split()[-1]: line[end - 5 : end].strip() for line in lines if line.startswith("table ")}
    assert shown == {"warm.ibd": "75%", "direct.ibd": "-", "mixed.ibd": "50%", "ahead.ibd": "0%"}, lines


def test_report_hit_column() -> None:
    cells = []
    for f in _files():
        stats = Stats()
        stats.merge(f)
        cells.append(_hit(stats))
    assert cells == ["75%", "-", "50%", "0%"]


def test_exporter_hit_bytes_are_summed_per_interval() -> None:
    """A counter: each interval's hits added, never the hits of the totals (which can fall
    when readahead read ahead in one interval what the next one reads)."""
    state = ExporterState(top_files=8, interval_s=1.0, backend="bpf", follow=True, pid=1)
    ahead = _file(1, "t.ibd", (Op.READ, Api.SYSCALL, 16384, 4), (Op.READAHEAD, Api.KERNEL, 131072, 1))
    later = _file(1, "t.ibd", (Op.READ, Api.SYSCALL, 65536, 16))  # the pages read ahead: all hits
    for t, f in ((1.0, ahead), (2.0, later)):
        state.add(Interval(time=t, interval_s=1.0, pid=1, lost_events=0, drops={}, files=[f]))
    m = _scrape_state(state)
    assert m.by_path("mysqlio_file_cache_hit_bytes_total") == {"/var/lib/mysql/t.ibd": 65536}
    assert m.value("mysqlio_cache_hit_bytes_total", kind="table") == 65536
    assert m.value("mysqlio_disk_read_bytes_total", kind="table") == 131072
    assert m.value("mysqlio_readahead_bytes_total", kind="table") == 131072
    assert m.value("mysqlio_direct_read_bytes_total", kind="table") == 0
    assert m.by_path("mysqlio_file_read_bytes_total") == {"/var/lib/mysql/t.ibd": 16384 + 65536}
    # SystemTap counts no disk read: no hit served (each read would look like one)
    stap = ExporterState(top_files=8, interval_s=1.0, backend="stap", follow=True, pid=1)
    stap.add(Interval(time=1.0, interval_s=1.0, pid=1, lost_events=0, drops={}, files=[later], disk_reads=False))
    m = _scrape_state(stap)
    assert "mysqlio_cache_hit_bytes_total" not in m.samples and "mysqlio_file_cache_hit_bytes_total" not in m.samples
    assert m.value("mysqlio_read_bytes_total", kind="table") == 65536


def test_report_totals_hits_of_the_summed_counters() -> None:
    stats = Stats()
    for f in _files():
        stats.merge(f)
    # read 8 MiB + 16 KiB; from the disk 1 + 2 + 1.5 MiB + 128 KiB
    assert stats.counters_json()["cache_hit_bytes"] == 8 * MIB + 16384 - (MIB + 2 * MIB + 3 * MIB // 2 + 131072)


def test_systemtap_says_it_counts_none_of_it() -> None:
    probe = StapProbe.__new__(StapProbe)  # uncounted() reads one attribute: no script started
    probe._regions_asked = False
    (line,) = probe.uncounted()
    assert "disk reads (O_DIRECT ones too), page-cache hits" in line and line.endswith("not SystemTap")


def test_no_hit_where_the_disk_reads_are_not_counted() -> None:
    """SystemTap, --no-page-cache, a kernel without the hooks (Interval.disk_reads False):
    top's JSON gives cache_hit_bytes null, in the fast writer's
    path as in the dicts'; the exporter serves no hit series. Where they are counted the
    fast path's bytes equal the dicts'."""
    files = _files()
    for disk_reads in (True, False):
        interval = Interval(
            time=1.0, interval_s=1.0, pid=1, lost_events=0, drops={}, files=files, disk_reads=disk_reads
        )
        out = io.StringIO()
        write_json(interval, out)
        line = out.getvalue()
        assert json.loads(line) == json.loads(json.dumps(interval.to_json()))
        hits = [f["cache_hit_bytes"] for f in json.loads(line)["files"]]
        # (their threads: tests/test_coldread.py, on a real top's rows)
        assert hits == ([3 * MIB, 0, MIB // 2, 0] if disk_reads else [None] * 4)
    bpf = ExporterState(top_files=8, interval_s=1.0, backend="bpf", follow=True, pid=1)  # --no-page-cache
    bpf.add(Interval(time=1.0, interval_s=1.0, pid=1, lost_events=0, drops={}, files=files, disk_reads=False))
    m = _scrape_state(bpf)
    assert "mysqlio_cache_hit_bytes_total" not in m.samples and "mysqlio_file_cache_hit_bytes_total" not in m.samples
    assert m.value("mysqlio_direct_read_bytes_total", kind="table") == 3 * MIB  # still counted
