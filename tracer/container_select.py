"""`--pod NAMESPACE/NAME` and `--container ID|NAME`: the traced server chosen by its
container, as `-p PID` chooses it by pid.

Every running mysqld / mariadbd is matched on the identity mysqlio.container_identity
reads from files (cgroup path, runtime state): the pod by its Kubernetes namespace and
name, the container by its full id or a prefix of it, or by its docker / podman name. Exactly one server must match;
none or several is one line naming what was found.
"""

from __future__ import annotations

import argparse

from .container_identity import ContainerIdentity, container_identity
from .errors import UserError

COMMANDS = ("top", "record", "exporter", "doctor")  # the commands that take the selectors


def add_selectors(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """--pod and --container on each of COMMANDS' parsers."""
    for name in COMMANDS:
        p = sub.choices[name]
        p.add_argument("--pod", metavar="NAMESPACE/NAME", help="the server of this Kubernetes pod (instead of -p)")
        p.add_argument(
            "--container",
            metavar="ID|NAME",
            help="the server of this container: its id, a unique prefix, or its docker / podman name",
        )


def apply_selectors(args: argparse.Namespace) -> None:
    """args.pid set to the server --pod / --container select (nothing to do without them)."""
    pod, cid = getattr(args, "pod", None), getattr(args, "container", None)
    if pod is None and cid is None:
        return
    if args.pid is not None or getattr(args, "all", False):
        raise UserError("--pod and --container choose one server: give them instead of -p PID or --all")
    args.pid = select_server(pod, cid, servers())


def servers() -> list[tuple[int, ContainerIdentity]]:
    """Every running mysqld / mariadbd with its container identity."""
    # imported here: the CLI imports this module, and `mysqlio stap-build` runs in build
    # roots that have Python's standard library only (tools/build_roots.py)
    import psutil

    from .target import SERVER_NAMES

    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] in SERVER_NAMES:
            found.append((proc.pid, container_identity(proc.pid)))
    return found


def select_server(pod: str | None, container: str | None, candidates: list[tuple[int, ContainerIdentity]]) -> int:
    """The pid of the one server among `candidates` that is in `pod` ("NAMESPACE/NAME")
    and whose container id starts with `container`, or whose docker / podman name it is
    (each when given)."""
    namespace, sep, name = (pod or "").partition("/")
    if pod is not None and (not sep or not namespace or not name or "/" in name):
        raise UserError(f"--pod wants NAMESPACE/NAME, not {pod!r}")
    if container is not None and not container:
        raise UserError("--container wants a container id, a prefix of one, or a container name")
    wanted = " and ".join(
        [*([f"pod {pod}"] if pod is not None else []), *([f"container {container}"] if container is not None else [])]
    )
    matches = [
        (pid, c)
        for pid, c in candidates
        if (pod is None or (c.namespace, c.pod) == (namespace, name))
        and (container is None or _is_container(c, container))
    ]
    if len(matches) == 1:
        return matches[0][0]
    if not matches:
        seen = ", ".join(_describe(pid, c) for pid, c in candidates) or "none"
        raise UserError(f"no mysqld or mariadbd in {wanted}; servers running: {seen}")
    listing = ", ".join(_describe(pid, c) for pid, c in matches)
    raise UserError(f"{len(matches)} servers are in {wanted}: {listing}; choose one with -p PID or --container")


def _is_container(c: ContainerIdentity, wanted: str) -> bool:
    """`wanted` is the container's name, its id or a prefix of the id (any case)."""
    return bool(c.container_id) and (wanted == c.name or c.container_id.startswith(wanted.lower()))


def _describe(pid: int, c: ContainerIdentity) -> str:
    where = c.describe() or "the host"
    return f"pid {pid} ({where}{f', container {c.container_id[:12]}' if c.named or c.name else ''})"
