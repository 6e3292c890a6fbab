"""The rules that give a thread's bytes to a user, connection and query (thread_attribution),
on samples written by hand: identity in force, longest overlap, background and unknown
threads, the per-event mapping of report; the samples' JSON as a trace stores it; the
text output's group block. (The same rules against a real server: test_server_threads.py.)"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from mysqlio.connections import Connections, StartConnections
from mysqlio.model import FileActivity, Interval, ThreadActivity
from mysqlio.output import format_groups
from mysqlio.probe import Drops, FileIdentity
from mysqlio.server_threads import (
    PREPARED,
    ServerThread,
    Statement,
    ThreadSample,
    normalise_sql,
    readable_name,
    shorten_text,
)
from mysqlio.thread_attribution import BACKGROUND, KERNEL, NO_STATEMENT, UNKNOWN, UNKNOWN_CONNECTION, Timeline

ALICE = ServerThread(101, 21, "thread/sql/one_connection", False, 7, "alice", "localhost", "shop")
BOB = ServerThread(102, 22, "thread/sql/one_connection", False, 8, "bob", "localhost", "sbtest")
CLEANER = ServerThread(90, 4, "thread/innodb/page_cleaner_thread", True)
# while it runs, a statement has no digest and shows its own normalised text; its key stays
SORT = Statement(101, 5, 10.0, None, None, "SELECT pad FROM big ORDER BY pad", key="k1")
SORT_DONE = Statement(101, 5, 10.0, 10.9, "abc123", "SELECT `pad` FROM `big` ORDER BY `pad`", key="k1")
SHORT = Statement(101, 6, 10.92, 10.95, "def456", "SELECT ?", key="k2")


def _timeline() -> Timeline:
    tl = Timeline()
    tl.add(ThreadSample(10.5, [ALICE, BOB, CLEANER], [SORT]))
    tl.add(ThreadSample(11.0, None, [SORT_DONE, SHORT]))
    return tl


def test_identity_and_longest_overlap() -> None:
    tl = _timeline()
    view = tl.view(101, 10.0, 11.0)
    assert view is not None
    assert (view.user, view.connection, view.db) == ("alice@localhost", "conn 7 alice@localhost", "shop")
    # the sort overlaps 0.9 s of the interval, the short one 0.03 s; the digest came when it ended
    assert (view.query, view.digest, view.key("query")) == (SORT_DONE.text, "abc123", "k1")
    running = Timeline()
    running.add(ThreadSample(10.5, [ALICE], [SORT]))
    first = running.view(101, 10.0, 10.5)
    assert first is not None and (first.query, first.digest, first.key("query")) == (SORT.text, None, "k1")
    later = tl.view(101, 10.91, 11.0)
    assert later is not None and later.digest == "def456"
    idle = tl.view(102, 10.0, 11.0)
    assert idle is not None and (idle.user, idle.query) == ("bob@localhost", NO_STATEMENT)


def test_a_statement_seen_before_it_was_classified_takes_its_later_name() -> None:
    # sampled between the packet's arrival and the command's dispatch, pfs names the running
    # statement statement/abstract/new_packet; the history row that ends it says Execute
    tl = Timeline()
    tl.add(ThreadSample(10.5, [BOB], [Statement(102, 9, 10.49, None, None, "(new_packet)", key="q:new")]))
    tl.add(ThreadSample(11.0, None, [Statement(102, 9, 10.49, 10.8, None, PREPARED, key="q:prep")]))
    view = tl.view(102, 10.0, 11.0)
    assert view is not None and (view.query, view.key("query")) == (PREPARED, "q:prep")
    # and a digest seen once stays when a later row has none
    tl.add(ThreadSample(11.5, None, [Statement(102, 10, 11.1, None, "d1", "UPDATE `t`", key="k9")]))
    tl.add(ThreadSample(12.0, None, [Statement(102, 10, 11.1, 11.9, None, "(statement)", key="k0")]))
    later = tl.view(102, 11.1, 12.0)
    assert later is not None and (later.query, later.digest, later.key("query")) == ("UPDATE `t`", "d1", "k9")


def test_background_unknown_and_kernel_are_never_a_user() -> None:
    tl = _timeline()
    cleaner, stranger, kernel = tl.view(90, 10.0, 11.0), tl.view(555, 10.0, 11.0), tl.view(0, 10.0, 11.0)
    assert cleaner is not None and (cleaner.user, cleaner.connection, cleaner.query) == (
        BACKGROUND,
        "page cleaner",
        BACKGROUND,
    )
    assert stranger is not None and (stranger.user, stranger.connection, stranger.query) == (UNKNOWN,) * 3
    assert kernel is not None and (kernel.user, kernel.connection) == (BACKGROUND, KERNEL)
    assert Timeline().view(101, 0.0, 1.0) is None  # no sample yet: no view


def test_replica_threads_are_the_servers_not_a_users() -> None:
    """A parallel replica worker is FOREGROUND with a processlist user (root@localhost) in
    MariaDB 10.11's performance_schema; its work is the replica's, not that user's."""
    worker = ServerThread(120, 30, "thread/sql/rpl_parallel_thread", False, 9, "root", "localhost", None)
    sql = ServerThread(121, 31, "thread/sql/slave_sql", False, 10, "system user", "", None)
    tl = Timeline()
    tl.add(ThreadSample(10.5, [worker, sql]))
    for tid, name in ((120, "replica worker"), (121, "replica SQL")):
        view = tl.view(tid, 10.0, 11.0)
        assert view is not None and (view.user, view.connection, view.query) == (BACKGROUND, name, BACKGROUND)


def test_identity_in_force_changes_with_a_later_sample() -> None:
    """A thread pool's worker given to another connection: before the change it was alice's."""
    tl = _timeline()
    tl.add(ThreadSample(12.0, [BOB, CLEANER, ServerThread(101, 21, ALICE.name, False, 9, "carol", "h", None)]))
    assert tl.thread(101, 11.5) == ALICE
    moved = tl.thread(101, 12.5)
    assert moved is not None and moved.user == "carol"
    assert tl.thread(101, 1.0) == ALICE  # before the first sample: the first one known


def test_report_maps_each_event_to_the_span_that_holds_it() -> None:
    tl = _timeline()
    tid = np.array([101, 101, 101, 102, 90, 0, 777, 101])
    t = np.array([10.2, 10.93, 10.91, 10.5, 10.5, 10.5, 10.5, 12.0])
    codes, keys, labels = tl.keys(tid, t, "query")
    got = [labels[c] for c in codes]
    assert got == [
        SORT_DONE.text,
        "SELECT ?",
        NO_STATEMENT,  # between the two statements, beyond the slack
        NO_STATEMENT,
        BACKGROUND,
        BACKGROUND,
        UNKNOWN,
        NO_STATEMENT,
    ]
    assert keys[codes[0]] == "k1"
    users = tl.keys(tid, t, "user")
    assert [users[2][c] for c in users[0]] == ["alice@localhost"] * 3 + [
        "bob@localhost",
        BACKGROUND,
        BACKGROUND,
        UNKNOWN,
        "alice@localhost",
    ]


def test_samples_round_trip_and_damage_is_dropped() -> None:
    sample = ThreadSample(10.5, [ALICE, CLEANER], [SORT_DONE], None)
    again = ThreadSample.from_json(sample.to_json())
    assert again == sample
    assert ThreadSample.from_json({"t": "x"}) is None
    assert ThreadSample.from_json({"t": 1.0, "threads": [[1, 2]]}) is None


def test_texts_and_names() -> None:
    assert normalise_sql("SELECT * FROM t WHERE a = 'x''y' AND b IN (1, 2.5)  AND c=0xFF") == (
        "SELECT * FROM t WHERE a = ? AND b IN (?, ?) AND c=?"
    )
    assert shorten_text("a " * 40, 10) == "a a a a a…"
    assert readable_name("thread/innodb/page_cleaner_thread") == "page cleaner"
    assert readable_name("thread/sql/binlog_background") == "binlog background"
    assert readable_name("thread/innodb/some_new_thread") == "some new"


def test_text_output_groups_by_user() -> None:
    tl = _timeline()
    f = FileActivity(file=FileIdentity(1, 2), path="/tmp/MYfd=12", kind="tmp", write_bytes=3 << 20, write_ops=3)
    for tid, nbytes in ((101, 3 << 20), (90, 0)):
        t = f.threads[tid] = ThreadActivity(tid=tid, name="mariadbd", write_bytes=nbytes, write_ops=nbytes >> 20)
        t.server = tl.view(tid, 10.0, 11.0)
    interval = Interval(time=0.0, interval_s=1.0, pid=1, lost_events=0, drops={}, files=[f])
    lines = format_groups(interval, "user").splitlines()
    assert lines[1].split()[1:] == ["user", "3.0MiB", "3", "0B", "0", "0", "alice@localhost"]
    assert lines[2].split()[-1] == BACKGROUND
    assert f.threads[101].to_json()["user"] == "alice@localhost"


def test_prune_keeps_what_the_next_interval_needs() -> None:
    """top prunes after each interval: ended statements and exited threads go, the running
    statement and the threads still there stay (memory bounded over days)."""
    tl = _timeline()
    tl.add(ThreadSample(12.0, [BOB, CLEANER], [Statement(102, 9, 11.8, None, None, "UPDATE t", key="k3")]))
    tl.prune(11.5)  # alice (gone at 12.0) is still needed for the interval that saw her go
    assert tl.thread(101, 11.9) == ALICE
    tl.prune(12.5)
    assert tl.thread(101, 12.6) is None and tl.thread(102, 12.6) == BOB
    bob = tl.view(102, 12.0, 13.0)
    assert bob is not None and bob.query == "UPDATE t"  # running at the last sample
    assert tl.view(101, 10.0, 11.0) == tl.view(555, 10.0, 11.0)  # alice forgotten: unknown


# ---- connections (the probes' `conn`: the socket a thread last read; issue 58) ----

# one OS thread (tid 200, from the thread cache) serves carol's connection, then dave's
CAROL = ServerThread(200, 31, "thread/sql/one_connection", False, 11, "carol", "localhost", None, True)
DAVE = ServerThread(200, 32, "thread/sql/one_connection", False, 12, "dave", "localhost", None, True)
CAROL_SOCKET, DAVE_SOCKET, NEVER_LEARNT = 9001, 9002, 9003


def _cached_thread_timeline(connections: bool = True) -> Timeline:
    tl = Timeline(connections=connections)
    tl.add(ThreadSample(10.0, [CAROL, CLEANER], [], sockets=[(31, CAROL_SOCKET)]))
    # dave's connection on the same OS thread, 0.25 s later: carol's last bytes were written
    # between the two samples, dave's first before the next one
    tl.add(ThreadSample(10.25, [DAVE, CLEANER], [], sockets=[(32, DAVE_SOCKET)]))
    return tl


def test_a_cached_thread_gives_each_connection_its_bytes() -> None:
    tl = _cached_thread_timeline()
    for conn, user in ((CAROL_SOCKET, "carol@localhost"), (DAVE_SOCKET, "dave@localhost")):
        view = tl.view(200, 10.0, 10.25, conn)
        assert view is not None and (view.user, view.connection_id) == (user, 11 if conn == CAROL_SOCKET else 12)
    # a socket never learnt, or no socket read since the attach by a thread that holds one
    assert tl.view(200, 10.0, 10.25, NEVER_LEARNT).user == UNKNOWN_CONNECTION  # type: ignore[union-attr]
    assert tl.view(200, 10.0, 10.25, 0).user == UNKNOWN_CONNECTION  # type: ignore[union-attr]
    # the server's own threads stay the server's, a thread pfs never listed is named by its socket
    assert tl.view(90, 10.0, 10.25, CAROL_SOCKET).user == BACKGROUND  # type: ignore[union-attr]
    assert tl.view(777, 10.0, 10.25, DAVE_SOCKET).user == "dave@localhost"  # type: ignore[union-attr]
    assert tl.view(777, 10.0, 10.25, 0).user == UNKNOWN  # type: ignore[union-attr]
    # without connections (SystemTap, older traces): the sample in force, dave for both
    old = _cached_thread_timeline(connections=False)
    assert {old.view(200, 10.0, 10.25, c).user for c in (CAROL_SOCKET, DAVE_SOCKET)} == {"dave@localhost"}  # type: ignore[union-attr]


def test_a_seeded_thread_is_its_connection_from_the_attach() -> None:
    """conn 0 of a thread the probes were told the connection of (it read no socket since
    they attached): that connection's; of another thread holding a socket: unknown."""
    tl = _cached_thread_timeline()
    tl.add(ThreadSample(10.5, None, [], seeded=[(200, DAVE_SOCKET)]))
    assert tl.view(200, 10.25, 10.5, 0).user == "dave@localhost"  # type: ignore[union-attr]
    codes, keys, _ = tl.keys(
        np.array([200, 200, 200, 90, 777]),
        np.array([10.1, 10.3, 10.3, 10.3, 10.3]),
        "user",
        np.array([CAROL_SOCKET, 0, NEVER_LEARNT, DAVE_SOCKET, CAROL_SOCKET]),
    )
    assert [keys[c] for c in codes] == [
        "carol@localhost",
        "dave@localhost",
        UNKNOWN_CONNECTION,
        BACKGROUND,
        "carol@localhost",
    ]


def test_a_connections_query_is_its_own() -> None:
    """The statements of a connection's thread that are another connection's (the same OS
    thread, earlier) are not this one's query."""
    tl = Timeline(connections=True)
    carol_insert = Statement(200, 1, 10.0, 10.1, "d1", "INSERT INTO `t`", key="k1", thread_id=31)
    dave_select = Statement(200, 1, 10.15, 10.2, "d2", "SELECT ?", key="k2", thread_id=32)
    tl.add(ThreadSample(10.0, [CAROL], [carol_insert], sockets=[(31, CAROL_SOCKET)]))
    tl.add(ThreadSample(10.25, [DAVE], [dave_select], sockets=[(32, DAVE_SOCKET)]))
    view = tl.view(200, 10.0, 10.25, CAROL_SOCKET)
    assert view is not None and (view.user, view.query) == ("carol@localhost", "INSERT INTO `t`")
    codes, keys, _ = tl.keys(
        np.array([200, 200]), np.array([10.17, 10.17]), "query", np.array([CAROL_SOCKET, DAVE_SOCKET])
    )
    assert [keys[c] for c in codes] == [NO_STATEMENT, "k2"]


def test_samples_with_sockets_round_trip_and_older_rows_read() -> None:
    sample = ThreadSample(10.5, [CAROL], [], sockets=[(31, CAROL_SOCKET)], owners=[DAVE], seeded=[(200, CAROL_SOCKET)])
    assert ThreadSample.from_json(sample.to_json()) == sample
    # rows of traces recorded before: 8 fields a thread, 7 a statement
    old = ThreadSample.from_json({"t": 1.0, "threads": [ALICE.to_row()[:8]], "statements": [SORT.to_row()[:7]]})
    assert old is not None and old.threads == [ALICE] and old.statements == [SORT] and old.sockets == []
    assert ThreadSample.from_json({"t": 1.0, "sockets": [[1, "x"]]}) is None


def test_start_connections() -> None:
    """A thread seen serving a logged-in connection in a sample begun after the attach and
    ended before its first socket read (the probes' first_ns) served it from the attach:
    its requests of conn 0 are that connection's; seen later, or on an OS thread two
    listed connections claim, or before the attach: none (unknown). Each thread once."""

    class Map:
        def __init__(self, first: dict[int, int]) -> None:
            self.first = first

        def first_reads(self, tids: Iterable[int]) -> dict[int, int | None]:
            return {tid: self.first.get(tid) for tid in tids}

        def prune(self, alive: set[int]) -> int:
            return 0

    class Probe:
        def __init__(self, first: dict[int, int]) -> None:
            self.conn_map = Map(first)

        def drops(self) -> Drops:
            return Drops({"conn_full": 0})

    erin = ServerThread(201, 33, "thread/sql/one_connection", False, 13, "erin", "localhost", None, True)
    frank = ServerThread(202, 34, "thread/sql/one_connection", False, 14, "frank", "localhost", None, True)
    shared = [
        ServerThread(203, i, "thread/sql/one_connection", False, i, "u", "localhost", None, True) for i in (35, 36)
    ]
    now = [9.0]
    conns = Connections()
    # carol's socket known before the attach: that sample does not count
    conns.add(ThreadSample(9.0, [CAROL], [], sockets=[(31, CAROL_SOCKET)], listed_at=8.9, learnt_at=9.0))
    # carol read a socket at 10.5 s (after this sample), frank at 10.05 s (before it ended), erin none
    starts = StartConnections(Probe({200: 10_500_000_000, 202: 10_050_000_000}), os.getpid(), clock=lambda: now[0])
    now[0] = 9.5  # attached
    conns.add(
        ThreadSample(
            10.1,
            [CAROL, erin, frank, *shared],
            [],
            sockets=[(33, 7), (34, 8), (35, 9), (36, 10)],
            listed_at=10.0,
            learnt_at=10.1,
        )
    )
    assert starts.resolve(conns) == {200: CAROL_SOCKET, 201: 7}
    assert conns.seeded == {200: CAROL_SOCKET, 201: 7}
    conns.add(ThreadSample(10.2, None, [], listed_at=10.15, learnt_at=10.2))
    assert starts.resolve(conns) == {}  # each thread once: frank's requests of conn 0 stay unknown
