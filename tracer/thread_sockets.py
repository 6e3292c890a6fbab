"""Which connection a socket is (--mysql): the name of the `conn` the probes give each
request (probes/connection.bpf.h: the inode of the socket its thread last read).

performance_schema's `socket_instances` lists each client connection's socket with the
THREAD_ID of its connection and its fd (SOCKET_ID), whatever its instruments' setting
(MariaDB 10.11 and MySQL 9.7 list them with every wait/io/socket instrument off);
/proc/PID/fd/FD names the socket's inode. An fd number is reused as soon as it is
closed (a cached thread's next connection often gets the very same one), so a
(THREAD_ID, fd) pair is taken only when socket_instances lists it both before and after
the fd is read: a THREAD_ID is one connection, never reused, which keeps its socket
until it ends, so the socket the fd named in between is that connection's. A connection
that ends before a second listing is not learnt: its requests are "(unknown connection)",
never another connection's.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pymysql

from .mysql_conn import query
from .server_threads import ServerThread, optional_int, runs_server_work

# each client connection's socket, with its thread's row as performance_schema.threads has it
CLIENT_SOCKETS_SQL = (
    "SELECT s.THREAD_ID, s.SOCKET_ID, t.NAME, t.TYPE, t.PROCESSLIST_ID, t.PROCESSLIST_USER, t.PROCESSLIST_HOST,"
    " t.PROCESSLIST_DB FROM performance_schema.socket_instances s JOIN performance_schema.threads t"
    " ON t.THREAD_ID = s.THREAD_ID WHERE s.EVENT_NAME = 'wait/io/socket/sql/client_connection'"
)
_SOCKET_LINK = re.compile(r"socket:\[(\d+)\]")
_NO_TABLE = (1142, 1143, 1146)  # no privilege on it, or no such table


def socket_inode(pid: int, fd: int, proc: str = "/proc") -> int | None:
    """The inode of the socket process pid's fd names now; None if it names none."""
    try:
        link = os.readlink(f"{proc}/{pid}/fd/{fd}")
    except OSError:
        return None
    match = _SOCKET_LINK.fullmatch(link)
    return int(match.group(1)) if match else None


def _rows(rows: list[dict[str, Any]]) -> dict[tuple[int, int], ServerThread]:
    """(THREAD_ID, fd) -> the connection's thread row (tid 0: a connection is named by its
    socket, not by the OS thread that serves it)."""
    out = {}
    for row in rows:
        r = {k.upper(): v for k, v in row.items()}
        thread_id, fd = r.get("THREAD_ID"), r.get("SOCKET_ID")
        if not isinstance(thread_id, int) or not isinstance(fd, int) or fd < 0:
            continue
        out[(thread_id, fd)] = ServerThread(
            tid=0,
            thread_id=thread_id,
            name=str(r.get("NAME")),
            background=str(r.get("TYPE")).upper() == "BACKGROUND",
            connection_id=optional_int(r.get("PROCESSLIST_ID")),
            user=r.get("PROCESSLIST_USER"),
            host=r.get("PROCESSLIST_HOST"),
            db=r.get("PROCESSLIST_DB"),
            client_socket=True,
        )
    return out


class SocketLearner:
    """Learns each connection's socket inode, once per connection."""

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self._known: set[tuple[int, int]] = set()  # (THREAD_ID, fd) learnt, while listed
        self.usable = True  # socket_instances can be read

    def learn(
        self, conn: pymysql.connections.Connection, pid: int
    ) -> tuple[dict[int, ServerThread], list[tuple[int, int]]]:
        """(THREAD_ID -> row of each connection that holds a client socket now, the
        (THREAD_ID, inode) learnt now) for process pid."""
        if not self.usable:
            return {}, []
        try:
            listed = _rows(query(conn, CLIENT_SOCKETS_SQL))
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] in _NO_TABLE:
                self.usable = False
                return {}, []
            raise
        self._known &= set(listed)  # a pair no longer listed has ended: the set stays bounded
        inodes = {}
        for pair, row in listed.items():
            # a connection's own thread (the acceptor holds a socket a moment before it)
            if pair not in self._known and row.connection_id is not None and not runs_server_work(row):
                ino = socket_inode(pid, pair[1], self._proc)
                if ino is not None:
                    inodes[pair] = ino
        owners = {row.thread_id: row for row in listed.values()}
        if not inodes:
            return owners, []
        ids = sorted({thread_id for thread_id, _ in inodes})
        marks = ", ".join(["%s"] * len(ids))
        again = _rows(query(conn, f"{CLIENT_SOCKETS_SQL} AND s.THREAD_ID IN ({marks})", ids))
        learnt = []
        for pair, ino in inodes.items():
            if pair in again:
                self._known.add(pair)
                learnt.append((pair[0], ino))
                owners[pair[0]] = again[pair]  # the later row: its user, once logged in
        return owners, learnt
