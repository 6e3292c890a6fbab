"""Paths inside a server's own root (a chroot or a container's root mount), read from here
through /proc/PID/root.

The kernel follows an absolute symbolic link met under /proc/PID/root from *our* root,
not the server's: a container image's /etc/mysql/my.cnf -> /etc/alternatives/my.cnf
opened as /proc/PID/root/etc/mysql/my.cnf reads the host's /etc/alternatives/my.cnf.
So every path of the server's is resolved here, link by link, inside its root first.
"""

from __future__ import annotations

import os


def realpath_in_root(root: str, path: str, max_links: int = 40) -> str:
    """os.path.realpath of the server path `path` inside the directory `root`
    (absolute links restart at `root`, '..' stops there); missing parts are kept."""
    resolved: list[str] = []
    todo = [p for p in path.split("/") if p not in ("", ".")]
    todo.reverse()
    links = 0
    while todo:
        part = todo.pop()
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        try:
            target = os.readlink(root + "/" + "/".join([*resolved, part]))
        except OSError:  # not a link, or missing
            resolved.append(part)
            continue
        links += 1
        if links > max_links:
            return os.path.normpath("/" + "/".join([*resolved, part, *reversed(todo)]))
        if target.startswith("/"):
            resolved = []
        todo.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
    return "/" + "/".join(resolved)


def in_root(root: str, path: str) -> str:
    """Where the server's absolute `path` is readable from here: `root` ("" when the server
    shares our root) and the path with its links resolved inside that root."""
    if not root or not path.startswith("/"):
        return path
    return root + realpath_in_root(root, path)


def shown_path(path: str, root: str) -> str:
    """The path to show for `path` here of a server whose root here is `root`
    (layout.host_root): under /proc/PID/root (a container's own root mount) the server's
    own name, which stays the same across restarts and is the one its DBA knows; a chroot's
    directory here is a real path on the host and is kept."""
    if not root.startswith("/proc/"):
        return path
    if path == root:
        return "/"
    return path[len(root) :] if path.startswith(root + "/") else path
