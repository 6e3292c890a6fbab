"""The probes' map of the connection each thread serves (`conns`, probes/connection.bpf.h):
tid -> the inode of the socket it last read and when it first read one, written by the
kernel at each recvfrom; read and pruned here (connections.StartConnections decides when)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable

from . import abi
from .libbpf import BpfMap

# the program that sees a recvfrom where the per-syscall tracepoints are the hook (the raw
# hook's sys_exit program sees it itself), and its twin of bpf_rdonly_cast (6.2)
CONN_PROGRAM = "handle_conn_recvfrom"
CONN_PROGRAMS = (CONN_PROGRAM, CONN_PROGRAM + "_cast")


def unused_conn_programs(connections: bool, raw_hook: bool, rdonly_cast: bool) -> list[str]:
    """The recvfrom programs a probe leaves out: both without connections or on the raw
    hook, else the twin this kernel does not take."""
    if not connections or raw_hook:
        return list(CONN_PROGRAMS)
    return [CONN_PROGRAMS[0] if rdonly_cast else CONN_PROGRAMS[1]]


class ConnectionMap:
    def __init__(self, conns: BpfMap) -> None:
        self._conns = conns

    def first_reads(self, tids: Iterable[int]) -> dict[int, int | None]:
        """tid -> when the thread first read a socket since the probes attached
        (CLOCK_MONOTONIC ns), None if it read none (or exited)."""
        state = abi.ConnState()
        return {tid: state.first_ns if self._conns.lookup(ctypes.c_uint32(tid), state) else None for tid in tids}

    def prune(self, alive: set[int]) -> int:
        """Forget the connections of threads not in `alive` (exited): the map stays
        bounded. Returns how many were forgotten."""
        gone = [key.value for key in self._conns.keys(ctypes.c_uint32) if key.value not in alive]
        return sum(self._conns.delete(ctypes.c_uint32(tid)) for tid in gone)
