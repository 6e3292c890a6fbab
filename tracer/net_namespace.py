"""TCP inside the traced server's own network namespace (a pod, a container with its own
network): where it listens, and a connection made from inside that namespace.

/proc/net/tcp is the *reader's* namespace: a server in a pod is not in it, and 127.0.0.1
there is another machine's loopback as far as the server is concerned (a connection to
it may reach another server). /proc/PID/net/tcp is the server's namespace; a socket
created by a thread that has entered it (setns(2), CLONE_NEWNET: per thread) belongs to
it for the rest of its life, whichever thread uses it then.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

CLONE_NEWNET = 0x40000000
_TCP_LISTEN = "0A"  # include/net/tcp_states.h, as /proc/net/tcp prints it


def socket_inodes(pid: int) -> set[str]:
    """The inode numbers of the sockets process `pid` holds open."""
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def _address(hex_addr: str) -> tuple[str, int]:
    """'0100007F:0CEA' (IPv4) or 32 hex digits + port (IPv6), as /proc/net/tcp* print them:
    each 32-bit word in the host's byte order."""
    ip_hex, port_hex = hex_addr.split(":")
    raw = bytes.fromhex(ip_hex)
    words = b"".join(int.from_bytes(raw[i : i + 4], "big").to_bytes(4, "little") for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words), int(port_hex, 16)


def listening_tcp(pid: int) -> list[tuple[str, int]]:
    """The TCP addresses process `pid` listens on, seen in its own network namespace."""
    inodes = socket_inodes(pid)
    found: list[tuple[str, int]] = []
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == _TCP_LISTEN and parts[9] in inodes:
                found.append(_address(parts[1]))
    return found


def other_netns(pid: int) -> str | None:
    """/proc/PID/ns/net when process `pid` is in another network namespace than ours."""
    path = f"/proc/{pid}/ns/net"
    try:
        theirs, ours = os.stat(path), os.stat("/proc/self/ns/net")
    except OSError:
        return None
    return None if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino) else path


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def connect_in(netns: str, host: str, port: int, timeout_s: float) -> socket.socket:
    """A TCP connection to host:port made from inside the network namespace `netns`
    (a /proc/PID/ns/net path), by a thread of its own that enters it and ends."""
    result: list[socket.socket | BaseException] = []

    def enter_and_connect() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            result.append(socket.create_connection((host, port), timeout=timeout_s))
        except BaseException as exc:  # handed to the caller's thread
            result.append(exc)

    thread = threading.Thread(target=enter_and_connect, name="mysqlio-netns", daemon=True)
    thread.start()
    thread.join()
    (outcome,) = result
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
