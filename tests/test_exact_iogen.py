"""End to end, real BPF: per-file bytes and op counts equal iogen's ground truth exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from mysqlio.bpf_probe import STATS_CELLS_ENV
from mysqlio.devtools.traced import IOGEN_SCENARIOS, assert_exact, run_iogen_traced

pytestmark = pytest.mark.bpf

SCENARIOS = IOGEN_SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_exact(bpf_ready: None, iogen: Path, tmp_path: Path, scenario: str) -> None:
    run = run_iogen_traced(str(iogen), str(tmp_path), ["--scenario", scenario])
    if scenario == "nonfile":
        assert run.expected["files"] == []
    else:
        assert run.expected["files"], "iogen did nothing"
    assert_exact(run, tmp_path)


def test_all_scenarios_at_once_exact(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    run = run_iogen_traced(str(iogen), str(tmp_path), [])
    assert len(run.expected["files"]) >= 15
    assert_exact(run, tmp_path)


def test_aio_iocbs_reused_before_io_submit_returns(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """Issue 60: libaio iocbs zeroed by the process before io_submit has returned (MySQL
    zeroes an iocb once another thread reaps its completion, on tmpfs while io_submit is
    still returning) count as submitted: their iocbs and iovecs are read at io_submit's
    entry. Read at its exit, the two writes counted nothing, and no drop."""
    run = run_iogen_traced(str(iogen), str(tmp_path), ["--scenario", "aio_reuse"])
    written = {Path(f["path"]).name: f["write_ops"] for f in run.expected["files"]}
    assert written == {"aio_reuse.dat": 2, "aio_reuse_zeros.dat": 1}
    assert_exact(run, tmp_path)


def test_every_api_is_seen(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """The aio and uring files are attributed through their own paths, not syscalls."""
    run = run_iogen_traced(str(iogen), str(tmp_path), ["--scenario", "aio", "--scenario", "uring"])
    apis: dict[str, set[str]] = {}
    for obj in run.intervals:
        for f in obj["files"]:
            apis.setdefault(Path(f["path"]).name, set()).update(f["apis"])
    aio = {name: a for name, a in apis.items() if name.startswith("aio")}
    uring = {name: a for name, a in apis.items() if name.startswith("uring")}
    assert aio and all("libaio" in a for a in aio.values() if a)
    assert uring and all("io_uring" in a for a in uring.values() if a)


def test_closed_file_keeps_its_name(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """A file written and closed between two intervals is reported with its full path."""
    run = run_iogen_traced(str(iogen), str(tmp_path), ["--scenario", "shortlived"], interval_s=2.0)
    (path,) = [f["path"] for f in run.expected["files"]]
    assert path in run.traced.totals
    assert run.traced.totals[path]["write_bytes"] > 0


def test_threads_are_attributed(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """Two threads, each writing its own file: each file names exactly its writer thread."""
    run = run_iogen_traced(str(iogen), str(tmp_path), ["--rate", "400", "--seconds", "1", "--threads", "2"])
    writers: dict[str, set[tuple[int, str]]] = {}
    bytes_by_thread: dict[str, int] = {}
    for obj in run.intervals:
        for f in obj["files"]:
            if f["path"].startswith(str(tmp_path)):
                writers.setdefault(f["path"], set()).update((t["tid"], t["name"]) for t in f["threads"])
                bytes_by_thread[f["path"]] = bytes_by_thread.get(f["path"], 0) + sum(
                    t["write_bytes"] for t in f["threads"]
                )
    assert len(writers) == 2
    tids = [next(iter(w))[0] for w in writers.values()]
    assert all(len(w) == 1 for w in writers.values()) and len(set(tids)) == 2
    assert run.expected["pid"] not in tids  # worker threads, not the main thread
    expected = {f["path"]: f["write_bytes"] for f in run.expected["files"]}
    assert bytes_by_thread == expected


def test_exact_when_the_stats_table_overflows(
    bpf_ready: None, iogen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 4 cells of the stats table in use, most rows of an interval go to the
    overflow hash map, and a row may sit in both: the counts still add up exactly."""
    monkeypatch.setenv(STATS_CELLS_ENV, "4")
    run = run_iogen_traced(str(iogen), str(tmp_path), [])
    assert len(run.expected["files"]) >= 15  # more rows than cells
    assert_exact(run, tmp_path)
