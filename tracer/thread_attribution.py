"""Who an OS thread was, and what it ran, at a time: `top` and `report --group user|connection|query`.

A `Timeline` is built from `server_threads.ThreadSample`s (live, or stored in a trace by
`record --mysql`). The rules, the same live and offline:

- identity (user, connection), where the probes know connections (eBPF with --mysql):
  the connection the request's thread served (`conn`, the socket it last read:
  probes/connection.bpf.h), named by the socket learnt from performance_schema
  (connections.py); conn 0 (no socket read since the attach) of a thread whose start
  connection is known (the one it served at the attach: connections.StartConnections),
  that connection. A connection never learnt, or conn 0 of another thread holding a
  client socket, is "(unknown connection)": never a guess
  from the samples, which a cached thread that serves the next connection between two
  of them would make wrong. A thread holding no client socket (an event worker) keeps
  the rule below.
- identity otherwise (SystemTap, traces recorded before): the thread's row in the sample
  in force, i.e. the latest sample at or before the time that listed the thread (the
  first one that did, before it); a thread's identity changes only when a sample shows
  it changed.
- background threads (performance_schema TYPE BACKGROUND) are never a user's: user
  "(background)", connection their readable name (page cleaner, InnoDB tpool, …), query
  "(background)". The kernel's own writeback (tid 0, "[kernel]") goes there too. Threads
  performance_schema does not list (io_uring workers, uninstrumented ones) are
  "(unknown thread)" in all three.
- query: a thread's statements are spans [start, end] (end: when it ended, or the last
  sample that saw it running). In `top`, the interval's rows of a thread go to the
  statement with the longest overlap with the interval (ties: the later one); none
  overlaps: "(no statement)". In `report`, each event goes to the span that holds its
  time, within `SLACK_S` (the clocks are matched to about a millisecond). A request of a
  known connection takes only that connection's statements.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .connections import Connections
from .server_threads import ServerThread, ThreadSample, readable_name, runs_server_work

BACKGROUND = "(background)"
UNKNOWN = "(unknown thread)"
UNKNOWN_CONNECTION = "(unknown connection)"
NO_STATEMENT = "(no statement)"
KERNEL = "[kernel]"
KERNEL_TID = 0
SLACK_S = 0.005
RUNNING_KEEP_S = 60.0  # a statement last seen running, and never seen to end (a disconnect), is forgotten after this


@dataclass(frozen=True)
class ThreadView:
    """A thread over some time, as the server sees it: the labels of its three groups."""

    user: str
    connection: str
    query: str
    digest: str | None = None
    query_key: str | None = None  # server_threads.query_key of the statement
    connection_id: int | None = None
    db: str | None = None
    server_thread: str | None = None  # performance_schema NAME

    def key(self, group: str) -> str:
        if group == "query":
            return self.query_key or self.query
        return str(getattr(self, group))

    def label(self, group: str) -> str:
        return str(getattr(self, group))

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "connection": self.connection,
            "connection_id": self.connection_id,
            "db": self.db,
            "query": self.query,
            "digest": self.digest,
            "query_key": self.query_key,
            "server_thread": self.server_thread,
        }


UNKNOWN_VIEW = ThreadView(UNKNOWN, UNKNOWN, UNKNOWN)
UNKNOWN_CONNECTION_VIEW = ThreadView(UNKNOWN_CONNECTION, UNKNOWN_CONNECTION, UNKNOWN_CONNECTION)
KERNEL_VIEW = ThreadView(BACKGROUND, KERNEL, BACKGROUND)


def _identity(thread: ServerThread | None) -> tuple[str, str, ThreadView | None]:
    """(user, connection) labels, or a complete view for threads that run no statements."""
    if thread is None:
        return UNKNOWN, UNKNOWN, UNKNOWN_VIEW
    if runs_server_work(thread):
        name = readable_name(thread.name)
        return BACKGROUND, name, ThreadView(BACKGROUND, name, BACKGROUND, server_thread=thread.name)
    user = f"{thread.user}@{thread.host}" if thread.user else f"(no user: {readable_name(thread.name)})"
    conn = f"conn {thread.connection_id} {user}" if thread.connection_id is not None else user
    return user, conn, None


class _Span:
    __slots__ = ("digest", "end", "key", "running", "start", "text", "thread_id")

    def __init__(
        self, start: float, end: float, digest: str | None, text: str, key: str, running: bool, thread_id: int | None
    ) -> None:
        self.start, self.end, self.digest, self.text, self.key = start, end, digest, text, key
        self.running = running  # last seen running: `end` is that sample's time
        self.thread_id = thread_id  # its connection's performance_schema THREAD_ID (None: not stored)

    def of(self, thread_id: int | None) -> bool:
        """A statement of that connection (None: of any)."""
        return thread_id is None or self.thread_id is None or self.thread_id == thread_id


class Timeline:
    """Thread identities and statement spans over time; `prune()` forgets what no later
    time can need (top, every interval); report keeps everything. `connections`: the
    probes gave each request its connection (eBPF with --mysql; a trace's meta says)."""

    def __init__(self, connections: bool = False) -> None:
        self.connections = connections
        self.conns = Connections()
        self._who: dict[int, tuple[list[float], list[ServerThread]]] = {}  # tid -> (times, identities)
        self._listed: set[int] = set()  # the tids of the latest thread table
        self._gone: dict[int, float] = {}  # tid -> the first sample that no longer listed it
        # (tid, THREAD_ID, event id): event ids count per connection, and a cached OS thread
        # serves several (THREAD_ID None: traces recorded before it was kept)
        self._spans: dict[tuple[int, int | None, int], _Span] = {}
        self._by_tid: dict[int, list[_Span]] | None = None  # spans by start, built on demand
        self.samples = 0
        self.last_error: str | None = None
        self.warning: str | None = None  # a sample's: the server's threads are not the traced process's

    def add(self, sample: ThreadSample) -> None:
        self.warning = sample.warning or self.warning
        if sample.error:
            self.last_error = sample.error
            return
        self.samples += 1
        self.last_error = None
        self.conns.add(sample)
        if sample.threads is not None:
            listed = {t.tid for t in sample.threads}
            for tid in self._listed - listed:
                self._gone[tid] = sample.time
            for tid in listed:
                self._gone.pop(tid, None)
            self._listed = listed
        for thread in sample.threads or ():
            times, who = self._who.setdefault(thread.tid, ([], []))
            if not who or who[-1] != thread:
                times.append(sample.time)
                who.append(thread)
        for stmt in sample.statements:
            key = (stmt.tid, stmt.thread_id, stmt.event_id)
            end = stmt.end if stmt.end is not None else sample.time
            span = self._spans.get(key)
            if span is None:
                self._spans[key] = _Span(
                    stmt.start, end, stmt.digest, stmt.text, stmt.key, stmt.end is None, stmt.thread_id
                )
                continue
            span.end = end if stmt.end is not None else max(span.end, end)
            span.running = stmt.end is None
            # the later row is the more refined one (pfs renames a statement as it learns its
            # command: the sampler drops the abstract names, a trace of an older version may
            # hold them); a digest, once seen, is never traded for none
            if stmt.digest or not span.digest:
                span.digest, span.text, span.key = stmt.digest, stmt.text, stmt.key
        self._by_tid = None

    def prune(self, before: float) -> None:
        """Forget statements that ended, and threads that were gone, before `before` (a
        statement last seen running is kept a minute: it may still be running)."""
        self._spans = {
            k: s for k, s in self._spans.items() if s.end >= before or (s.running and s.end >= before - RUNNING_KEEP_S)
        }
        for tid, gone in list(self._gone.items()):
            if gone < before:
                del self._gone[tid]
                self._who.pop(tid, None)
                self.conns.forget_threads({tid})
        self._by_tid = None

    def add_all(self, samples: Iterable[ThreadSample]) -> None:
        for sample in samples:
            self.add(sample)

    def thread(self, tid: int, t: float) -> ServerThread | None:
        entry = self._who.get(tid)
        if entry is None:
            return None
        times, who = entry
        return who[max(0, bisect.bisect_right(times, t) - 1)]

    def _spans_of(self, tid: int) -> list[_Span]:
        if self._by_tid is None:
            by: dict[int, list[_Span]] = {}
            for (span_tid, _, _), span in self._spans.items():
                by.setdefault(span_tid, []).append(span)
            for spans in by.values():
                spans.sort(key=lambda s: s.start)
            self._by_tid = by
        return self._by_tid.get(tid, [])

    def owner(self, tid: int, conn: int, thread: ServerThread | None) -> ServerThread | ThreadView | None:
        """Whose a request of thread tid (its row `thread` in the sample in force) with
        probes' connection `conn` is, where the probes know connections: the connection's
        row, or UNKNOWN_CONNECTION_VIEW; None: the thread's own row decides (no connection
        is known, a thread of the server's own work, or a thread holding no client socket)."""
        if not self.connections or (thread is not None and runs_server_work(thread)):
            return None
        conn = conn or self.conns.seeded.get(tid, 0)
        if conn:
            return self.conns.owner(conn) or UNKNOWN_CONNECTION_VIEW
        if thread is not None and thread.client_socket:
            return UNKNOWN_CONNECTION_VIEW
        return None

    def view(self, tid: int, t0: float, t1: float, conn: int = 0) -> ThreadView | None:
        """The thread over [t0, t1] (top's interval), its requests of connection `conn`
        (the probes'); None before any sample."""
        if not self.samples and not self._who:
            return None
        if tid == KERNEL_TID:
            return KERNEL_VIEW
        thread = self.thread(tid, t1)
        owner = self.owner(tid, conn, thread)
        if isinstance(owner, ThreadView):
            return owner
        thread_id = None
        if owner is not None:
            thread, thread_id = owner, owner.thread_id
        user, conn_label, fixed = _identity(thread)
        if fixed is not None:
            return fixed
        assert thread is not None
        best, best_overlap = None, -1.0
        for span in self._spans_of(tid):
            if span.start > t1:
                break
            overlap = min(span.end, t1) - max(span.start, t0)
            if overlap >= 0 and overlap >= best_overlap and span.of(thread_id):
                best, best_overlap = span, overlap
        return ThreadView(
            user=user,
            connection=conn_label,
            query=best.text if best else NO_STATEMENT,
            digest=best.digest if best else None,
            query_key=best.key if best else None,
            connection_id=thread.connection_id,
            db=thread.db,
            server_thread=thread.name,
        )

    def keys(
        self, tid: np.ndarray, t: np.ndarray, group: str, conn: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[str], list[str]]:
        """Each event's group (report): codes into (keys, labels) of `group`. `conn`: each
        event's connection as the probes gave it (None: a trace without)."""
        codes = np.zeros(len(tid), np.int64)
        keys: list[str] = []
        labels: list[str] = []
        index: dict[str, int] = {}
        conns = np.zeros(len(tid), np.int64) if conn is None else conn.astype(np.int64)

        def code(view: ThreadView) -> int:
            k = view.key(group)
            c = index.get(k)
            if c is None:
                c = index[k] = len(keys)
                keys.append(k)
                labels.append(view.label(group))
            return c

        order = np.argsort(tid, kind="stable")
        uniq, starts = np.unique(tid[order], return_index=True)
        bounds = [*starts.tolist(), len(order)]
        for i, u in enumerate(uniq.tolist()):
            rows = order[bounds[i] : bounds[i + 1]]
            codes[rows] = self._codes_of(int(u), t[rows], conns[rows], group, code)
        return codes, keys, labels

    def _codes_of(self, tid: int, t: np.ndarray, conn: np.ndarray, group: str, code: Any) -> np.ndarray:
        if tid == KERNEL_TID:
            return np.full(len(t), code(KERNEL_VIEW), np.int64)
        entry = self._who.get(tid)
        who: list[ServerThread | None] = [None]
        which = np.zeros(len(t), np.int64)
        if entry is not None:
            times, who = entry[0], list(entry[1])
            which = np.maximum(0, np.searchsorted(np.asarray(times), t, side="right") - 1)
        out = np.empty(len(t), np.int64)
        seeded = self.conns.seeded.get(tid, 0)
        if seeded:
            conn = np.where(conn == 0, seeded, conn)
        for w in np.unique(which).tolist():
            thread = who[w]
            mask = which == w
            for value in np.unique(conn[mask]).tolist() if self.connections else [0]:
                sub = mask & (conn == value) if self.connections else mask
                owner = self.owner(tid, int(value), thread)
                if isinstance(owner, ThreadView):
                    out[sub] = code(owner)
                elif owner is not None:
                    out[sub] = self._row_codes(owner, tid, owner.thread_id, t[sub], group, code)
                else:
                    out[sub] = self._row_codes(thread, tid, None, t[sub], group, code)
        return out

    def _row_codes(
        self, row: ServerThread | None, tid: int, thread_id: int | None, t: np.ndarray, group: str, code: Any
    ) -> np.ndarray:
        """Codes of events at times t of thread tid, whose identity is `row`; for the query
        group, the statements of that connection (`thread_id`; None: of any)."""
        user, conn, fixed = _identity(row)
        if fixed is not None or group != "query":
            return np.full(len(t), code(fixed or ThreadView(user, conn, "")), np.int64)
        out = np.full(len(t), code(ThreadView(user, conn, NO_STATEMENT)), np.int64)
        spans = [s for s in self._spans_of(tid) if s.of(thread_id)]
        if not spans:
            return out
        starts = np.asarray([s.start for s in spans])
        ends = np.asarray([s.end for s in spans])
        at = np.searchsorted(starts, t + SLACK_S, side="right") - 1
        inside = (at >= 0) & (ends[np.maximum(at, 0)] + SLACK_S >= t)
        for s in np.unique(at[inside]).tolist():
            span = spans[s]
            out[inside & (at == s)] = code(ThreadView(user, conn, span.text, span.digest, span.key))
        return out
