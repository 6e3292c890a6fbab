"""The rules that give a thread's bytes to a user, connection and query (thread_attribution),
on samples written by hand: identity in force, longest overlap, background and unknown
threads, the per-event mapping of report; the samples' JSON as a trace stores it; the
text output's group block. (The same rules against a real server: test_server_threads.py.)"""

from __future__ import annotations

import numpy as np

from mysqlio.model import FileActivity, Interval, ThreadActivity
from mysqlio.output import format_groups
from mysqlio.probe import FileIdentity
from mysqlio.server_threads import (
    PREPARED,
    ServerThread,
    Statement,
    ThreadSample,
    normalise_sql,
    readable_name,
    shorten_text,
)
from mysqlio.thread_attribution import BACKGROUND, KERNEL, NO_STATEMENT, UNKNOWN, Timeline

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
