"""MariaDB 11.8 under podman and under docker, run with their own CLIs (issue 58).

The trixie root of test_containers.py: podman runs it as the container's root directory
(`--rootfs`), docker an image imported from it (devtools/engine_mariadb.py starts a
dockerd of its own: no systemd here). For each engine, from files only
(`container_identity`): the runtime, the container's id and the name it was given
(docker's config.v2.json, containers/storage's containers.json), which `top` names
(`--container NAME` selects the server) and whose JSON carries; top's bytes written per
file over a window quiet at both edges equal the server's own performance_schema; a
recreated container (stopped, removed, run again with the same name: a new id, as compose
does on a change of settings) is the same server to `follow`, and the exporter's series,
labelled `container=NAME`, go on.

MariaDB 11.8 does not instrument its redo log in performance_schema: ib_logfile0 is not
compared.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_mysql import Instances, _delta, _instances, _quiet

from mysqlio.container_identity import container_identity
from mysqlio.container_select import select_server, servers
from mysqlio.devtools.engine_mariadb import Dockerd, EngineMariaDB, podman_cli
from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.scrape import EXPORTER_INTERVAL_S, free_port, scrape, wait_for
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import MYSQLIO_CLI, FileTotals, attached_line, read_json_line
from mysqlio.follow import ServerFollower, identity_of

ENGINES = ("podman", "docker")
DATADIR = "/var/lib/mysql/data"  # as the server names it
LOAD_S = 1
INTERVAL_S = 0.5
MIN_BYTES = 64 << 10  # files compared: more than this written in the window (test_containers.py)
QUIET = {"innodb_stats_auto_recalc": "OFF"}  # quiet edges (test_pfs_crosscheck.py)

Served = tuple[EngineMariaDB, Sysbench]


@pytest.fixture(scope="module", params=ENGINES)
def served(request: pytest.FixtureRequest, server_roots: dict[str, str]) -> Iterator[Served]:
    engine: str = request.param
    root = server_roots["trixie"]
    with contextlib.ExitStack() as stack:
        started = time.monotonic()
        if engine == "docker":
            dockerd = stack.enter_context(Dockerd())
            cli, image = dockerd.cli, dockerd.image_of(root)
        else:
            cli, image = podman_cli(), None
        db = EngineMariaDB(root, cli, engine, image, MariaDBOptions(extra=QUIET))
        stack.enter_context(db)
        print(f"\n{engine}: MariaDB up in {time.monotonic() - started:.1f}s (image: {image})")
        bench = Sysbench(db, tables=1, table_size=2000, threads=1)
        stack.callback(bench.stop)
        bench.prepare()
        yield db, bench


def _engine(db: EngineMariaDB) -> str:
    return "docker" if db.image else "podman"


@pytest.mark.mariadb
def test_identity_from_the_engines_files(served: Served) -> None:
    db, _ = served
    engine = _engine(db)
    found = container_identity(db.pid)
    assert (found.runtime, found.container_id, found.name) == (engine, db.container_id, db.name), found
    assert not found.named and found.describe() == f"{engine} {db.name}"
    assert found.key() == ("name", engine, db.name)
    assert found.labels() == {"namespace": "", "pod": "", "container": db.name}
    identity = identity_of(db.pid)
    assert identity is not None and identity.datadir == DATADIR and identity.place == found.key(), identity


def _server_paths(db: EngineMariaDB, instances: Instances) -> dict[str, int]:
    """performance_schema's bytes written per file, under the server's own paths (as top
    names them)."""
    out: dict[str, int] = {}
    for path, wbytes, _ in instances.values():
        server = os.path.normpath(os.path.join(DATADIR, db.server_path(path)))
        out[server] = out.get(server, 0) + wbytes
    return out


@pytest.mark.bpf
@pytest.mark.mariadb
def test_top_names_the_container_and_counts_exactly(
    bpf_ready: None, served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    db, bench = served
    engine = _engine(db)
    s0 = _quiet(db)
    top = subprocess.Popen(
        [*MYSQLIO_CLI, "top", "--container", db.name, "--json", "-i", str(INTERVAL_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert top.stdout is not None and top.stderr is not None
        attached = attached_line(top.stderr)
        assert attached.startswith(f"mysqlio: tracing pid {db.pid} "), attached
        assert f"(mariadbd in {engine} {db.name})" in attached, attached
        first = read_json_line(top.stdout, 30, "mysqlio top")
        s1 = _instances(db)
        bench.start(LOAD_S)
        bench.wait(timeout_s=LOAD_S + 60)
        s2 = _quiet(db)
        time.sleep(INTERVAL_S * 1.2)
        top.send_signal(signal.SIGINT)
        out, err = top.communicate(timeout=30)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    assert top.returncode == 0, err
    objects: list[dict[str, Any]] = [first] + [json.loads(line) for line in out.splitlines() if line.strip()]
    assert _delta(s0, s1) == {} and _delta(s2, _instances(db)) == {}, "written at the window's edges"
    expected = {"runtime": engine, "id": db.container_id, "name": db.name, "pod": "", "container": ""}
    for obj in objects:
        assert obj["container"] == container_identity(db.pid).to_json(), obj["container"]
        assert {k: obj["container"][k] for k in expected} == expected
    totals = FileTotals()
    for obj in objects:
        totals.add(obj)
    assert totals.lost_events == 0
    pfs = _server_paths(db, _delta(s1, s2))
    shown = {path: row["write_bytes"] for path, row in totals.totals.items() if row["write_bytes"]}
    with capsys.disabled():
        print(f"\n{engine}: write bytes per file, performance_schema / top")
        for path in sorted(pfs.keys() | shown.keys()):
            print(f"  {path:48} {pfs.get(path, 0):>12} {shown.get(path, 0):>12}")
    compared = {p: w for p, w in pfs.items() if w > MIN_BYTES}
    assert any(p.endswith("/sbtest1.ibd") for p in compared) and any("mysql-bin." in p for p in compared), compared
    assert all(p.startswith("/var/lib/mysql/") for p in shown), shown  # the server's names
    off = {p: (w, shown.get(p, 0)) for p, w in compared.items() if shown.get(p, 0) != w}
    assert not off, f"{engine}: bytes written per file differ (performance_schema, top): {off}"


@pytest.mark.bpf
@pytest.mark.mariadb
def test_the_name_selects_labels_and_survives_a_recreate(bpf_ready: None, served: Served) -> None:
    """`--container NAME` selects the server; the exporter labels its series with the name
    and, the container stopped, removed and run again under that name (a new id), goes on
    with the new server under the same labels: `follow` takes it for the same server."""
    db, _ = served
    engine, short = _engine(db), db.container_id[:12]
    res = subprocess.run(
        [*MYSQLIO_CLI, "top", "--container", "no-such-container", "--json", "-n", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode != 0 and res.stderr.count("\n") == 1, res.stderr
    assert f"pid {db.pid} ({engine} {db.name}, container {short})" in res.stderr, res.stderr
    port = free_port()
    listen = ("-i", str(EXPORTER_INTERVAL_S), "--listen", f"127.0.0.1:{port}")
    exporter = subprocess.Popen(
        [*MYSQLIO_CLI, "exporter", "--container", db.name, *listen],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    labels = {"namespace": "", "pod": "", "container": db.name}
    try:
        assert exporter.stderr is not None
        line = attached_line(exporter.stderr)
        assert line.startswith(f"mysqlio: exporting pid {db.pid} "), line
        assert _exported_pids(port, labels) == [db.pid]
        follower = ServerFollower(db.pid)
        old = (db.pid, db.container_id)
        db.recreate()
        assert (db.pid, db.container_id) != old and container_identity(db.pid).name == db.name
        assert follower.wait_for_restart(threading.Event(), timeout_s=30) == db.pid
        assert _select(db.name) == db.pid and _select(db.container_id[:12]) == db.pid
        wait_for("the recreated container exported", lambda: _exported_pids(port, labels) == [db.pid], timeout_s=30)
        assert scrape(port).value("mysqlio_target_restarts_total", **labels) == 1
        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=30)
        assert exporter.returncode == 0 and "Traceback" not in err, err
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()


def _exported_pids(port: int, labels: dict[str, str]) -> list[float]:
    """mysqlio_target_pid of the series with these labels (every series has them)."""
    m = scrape(port)
    assert all(lab.items() >= labels.items() for samples in m.samples.values() for lab, _ in samples)
    return [v for _, v in m.samples.get("mysqlio_target_pid", [])]


def _select(wanted: str) -> int:
    """The pid `--container wanted` selects, as the CLI would (in this process: cheap)."""
    return select_server(None, wanted, servers())
