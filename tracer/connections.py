"""The connections the probes see threads serve (--mysql), as the samples name them.

The probes give each request the connection its thread served: `conn`, the inode of the
socket the thread last read (probes/connection.bpf.h), 0 before it first read one since
they attached. `Connections` keeps, from the samples (server_threads.ThreadSample):

- each learnt socket's connection (thread_sockets.py): inode -> its performance_schema
  THREAD_ID, and that thread's row (user, host, processlist id; the latest one with a
  user), kept after the connection ends so that its last requests are still named;
- the start connections (`seeded`): tid -> the inode of the connection the thread served
  when the probes attached, to which its requests of conn 0 belong (`StartConnections`).

A thread changes connection only by reading the new one's socket (its login), so a thread
that a sample shows serving a logged-in connection, that sample begun after the attach
and ended before the thread's first socket read (the probes keep that time), served that
connection from the attach to its first read: a statement that began before `top` or
`record` did, a client connected before.

Both are bounded: the oldest learnt connections are forgotten first.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from .probe import Drops
from .server_threads import ServerThread, ThreadSample

KEEP = 1 << 16  # connections remembered (a few MB)
V = TypeVar("V")


def _bounded_set(table: OrderedDict[int, V], key: int, value: V) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > KEEP:
        table.popitem(last=False)


class Connections:
    """Socket inode -> the connection's thread row; tid -> start connection."""

    def __init__(self) -> None:
        self._owner: OrderedDict[int, int] = OrderedDict()  # inode -> THREAD_ID
        self._socket: OrderedDict[int, int] = OrderedDict()  # THREAD_ID -> inode
        self._rows: OrderedDict[int, ServerThread] = OrderedDict()  # THREAD_ID -> its row
        self._listed: dict[int, ServerThread] = {}  # THREAD_ID -> its row in the latest listing
        # tid -> [(inode, when listed, when learnt)]: the samples since the last
        # start_candidates() that showed the thread serving a logged-in connection
        self._untried: dict[int, list[tuple[int, float, float]]] = {}
        self._decided: set[int] = set()  # tids whose start connection is known, or never will be
        self.seeded: dict[int, int] = {}  # tid -> the inode of its start connection

    def add(self, sample: ThreadSample) -> None:
        if sample.threads is not None:
            self._listed = {t.thread_id: t for t in sample.threads}
        # the connections' rows: as listed with their thread, and as listed with their socket
        for t in [*(sample.threads or ()), *sample.owners]:
            known = self._rows.get(t.thread_id)
            # a connection's row gains its user at login: the one with a user is kept
            if known is None or t.user or not known.user:
                _bounded_set(self._rows, t.thread_id, t)
        for thread_id, ino in sample.sockets:
            _bounded_set(self._owner, ino, thread_id)
            _bounded_set(self._socket, thread_id, ino)
        self._start_candidates(sample)
        for tid, ino in sample.seeded:
            self.seeded[tid] = ino

    def _start_candidates(self, sample: ThreadSample) -> None:
        """The threads this sample shows serving a logged-in connection whose socket is
        known, each on an OS thread no other listed connection claims (a pool's idle
        connection may name a worker it left)."""
        listed_at = sample.time if sample.listed_at is None else sample.listed_at
        learnt_at = sample.time if sample.learnt_at is None else sample.learnt_at
        claims = Counter(t.tid for t in self._listed.values() if t.client_socket)
        for row in self._listed.values():
            ino = self._socket.get(row.thread_id)
            if ino is None or not row.client_socket or not row.user or claims[row.tid] != 1:
                continue
            if row.tid not in self._decided:
                self._untried.setdefault(row.tid, []).append((ino, listed_at, learnt_at))

    def start_candidates(self, since: float) -> dict[int, tuple[int, float]]:
        """tid -> (inode, learnt at) of the threads seen serving a connection in a sample
        begun at `since` or later (the attach: a thread may have changed connection before,
        unseen), each once; those seen only before are dropped."""
        out = {}
        for tid, seen in self._untried.items():
            after = [(learnt_at, ino) for ino, listed_at, learnt_at in seen if listed_at >= since]
            if after:
                learnt_at, ino = min(after)
                out[tid] = (ino, learnt_at)
        self._untried = {}
        return out

    def decided(self, tids: Iterable[int]) -> None:
        self._decided.update(tids)

    def owner(self, ino: int) -> ServerThread | None:
        """The row of the connection whose socket is inode `ino`; None: not learnt."""
        thread_id = self._owner.get(ino)
        return None if thread_id is None else self._rows.get(thread_id)

    def forget_threads(self, tids: set[int]) -> None:
        """Threads that exited: their start connections go (a tid may name a new thread one day)."""
        for tid in tids:
            self.seeded.pop(tid, None)
            self._decided.discard(tid)


class ConnectionMap(Protocol):
    """The probes' map of threads' connections (conn_map.ConnectionMap)."""

    def first_reads(self, tids: Iterable[int]) -> dict[int, int | None]: ...

    def prune(self, alive: set[int]) -> int: ...


class ConnectionProbe(Protocol):
    """What of a probe the start connections need (bpf_probe.BpfProbe with connections)."""

    conn_map: ConnectionMap

    def drops(self) -> Drops: ...


# with connections, top labels an interval (record writes its last batch) after a thread sample
# begun once it ended, waited for at most this long: the connections that began in its last
# sampling period are named too
FRESH_S = 0.25
PRUNE_EVERY_S = 10.0  # the probes' map of threads' connections is cleared of exited threads this often


class StartConnections:
    """Names the connection each thread served when the probes attached (its requests of
    conn 0, before its first socket read since), and clears the probes' map of exited
    threads; one per traced process. `clock` is the samples' (seconds), `ns_to_clock`
    turns the probes' CLOCK_MONOTONIC ns into it."""

    def __init__(
        self,
        probe: ConnectionProbe,
        pid: int,
        clock: Callable[[], float] = time.monotonic,
        ns_to_clock: Callable[[int], float] = lambda ns: ns / 1e9,
    ) -> None:
        self._probe = probe
        self._pid = pid
        self._clock = clock
        self._ns_to_clock = ns_to_clock
        self._next_prune = clock() + PRUNE_EVERY_S
        self._since = clock()  # the probe is attached: samples begun from now on count

    def resolve(self, conns: Connections) -> dict[int, int]:
        """The start connections the samples added to `conns` since the last call show
        (tid -> inode): a thread seen serving a logged-in connection before its first
        socket read served it since the attach. Added to its `seeded`, and returned. None
        once the probes' map was ever full: a thread whose entry did not fit would look
        as if it read no socket."""
        candidates = conns.start_candidates(self._since)
        if self._clock() >= self._next_prune:
            self._next_prune = self._clock() + PRUNE_EVERY_S
            with contextlib.suppress(OSError):  # gone: the session ends anyway
                self._probe.conn_map.prune({int(t) for t in os.listdir(f"/proc/{self._pid}/task")})
        if not candidates or self._probe.drops().as_dict().get("conn_full", 0):
            return {}
        first = self._probe.conn_map.first_reads(candidates)
        found = {}
        for tid, (ino, learnt_at) in candidates.items():
            read_at = first.get(tid)
            if read_at is None or learnt_at <= self._ns_to_clock(read_at):
                found[tid] = ino
        # a thread that read a socket before it was seen: its requests of conn 0 stay unknown
        conns.decided(candidates)
        conns.seeded.update(found)
        return found
