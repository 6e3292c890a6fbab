"""Users on short connections with the thread cache on (issue 58): each byte to its own user,
against a real MariaDB 10.11 with its default settings (thread_cache_size 151).

carol inserts into a MyISAM table and dave writes outfiles, each through a new connection
that lives half a second after its statement, side by side, so a cached OS thread serves
one, then the other. Named by 4 Hz samples of performance_schema alone (as before the
probes knew which connection a thread served), half of carol's .MYD bytes and of dave's
outfile bytes go to someone else: the sample in force names the thread's previous
connection (test_the_samples_alone_name_the_wrong_user, on the same trace). erin's outfile statement began before the tracers attached and
waits on a table lock until after: her thread reads no socket while traced, and is named
only by the connection a sample showed it serving (connections.StartConnections).

Ground truth (devtools/short_connections.py): the files' growth is exactly what was
written to them, all within what both tracers saw; `top --group user` and `report --group
user` of a `record --mysql` trace give each file set >= 99 % to its user and <= 1 % to
anyone else, "(unknown connection)" included. The same on Oracle MySQL 9.7 and MariaDB
11.8 in pid namespaces of their own: tests/test_users_in_pid_namespace.py.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
import pytest

from mysqlio.devtools import short_connections
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.short_connections import OWNERS, TracedRun, assert_each_byte_to_its_user, print_run
from mysqlio.events import OP_NAMES
from mysqlio.filters import Filters
from mysqlio.server_threads import ThreadSample
from mysqlio.thread_attribution import Timeline
from mysqlio.trace import TraceReader
from mysqlio.trace_events import Decoder

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb, pytest.mark.usefixtures("bpf_ready")]

LOAD_S = 4.0


@pytest.fixture(scope="module")
def mariadb_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TracedRun]:
    with MariaDB(MariaDBOptions()) as db:
        cache = db.sql("SELECT @@thread_cache_size")[0][0]
        assert int(cache) > 0, cache  # the default: threads are reused
        yield short_connections.trace_short_connections(db, str(tmp_path_factory.mktemp("short") / "t.mio"), LOAD_S)


def test_each_users_bytes_go_to_that_user(mariadb_run: TracedRun, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print_run("MariaDB 10.11, short connections", mariadb_run)
    assert min(mariadb_run.connections.values()) >= 4, mariadb_run.connections  # threads were reused
    assert_each_byte_to_its_user(mariadb_run)


def test_the_samples_alone_name_the_wrong_user(mariadb_run: TracedRun, capsys: pytest.CaptureFixture[str]) -> None:
    """The same trace, each event named by its thread's samples alone (what traces without
    connections get: recorded before, or by SystemTap): the thread cache makes that wrong,
    which is what the probes' connections fix (the run reproduces the issue)."""
    wrong = samples_rule_shares(mariadb_run.trace)
    with capsys.disabled():
        print(f"\nthe samples' rule on the same trace: {wrong}")
    for name in ("carol .MYD", "dave outfiles"):
        assert sum(wrong[name].values()) == sum(mariadb_run.report[name].values()), (name, wrong)
    assert any(
        wrong[name].get(f"{OWNERS[name]}@localhost", 0) < 0.99 * sum(wrong[name].values())
        for name in ("carol .MYD", "dave outfiles")
    ), wrong


def samples_rule_shares(trace: str) -> dict[str, dict[str, int]]:
    """Write bytes per user of carol's and dave's file sets, by the samples' rule."""
    reader = TraceReader(trace)
    batches = list(reader.batches())
    timeline = Timeline(connections=False)
    timeline.add_all(s for s in (ThreadSample.from_json(o) for o in reader.server_threads) if s is not None)
    out: dict[str, dict[str, int]] = {}
    for name in ("carol .MYD", "dave outfiles"):
        dec = Decoder(Filters(match=re.compile(short_connections.FILE_SETS[name])))
        by_user: dict[str, int] = defaultdict(int)
        for batch in batches:
            ev = dec.decode(batch)
            codes, keys, _ = timeline.keys(ev.tid.astype(np.int64), ev.t, "user", ev.conn)
            writes = ev.ok & (ev.op == OP_NAMES.index("write"))
            for code, nbytes in zip(codes[writes].tolist(), ev.nbytes[writes].tolist(), strict=True):
                by_user[keys[code]] += nbytes
        out[name] = dict(by_user)
    return out
