#!/usr/bin/env python3
"""Debian roots holding another release's MariaDB, to trace a server in its own root.

    python3 tools/server_roots.py bullseye trixie     # build what is missing, print the roots

Each root is `debootstrap --variant=minbase --include=mariadb-server,procps SUITE
DIR MIRROR` from the Debian mirror this machine's apt sources use, cached as a
directory under /var/cache/mysqlio/roots/SUITE (--cache-dir or
$MYSQLIO_ROOTS_DIR elsewhere). A root is complete when its stamp file is there:
a second run only checks it (milliseconds); several suites are built in
parallel; a lock per suite lets concurrent runs wait for one build. A build
goes to SUITE.build and is renamed when done, so an interrupted build is never
taken for a root.

After debootstrap the root gets an /etc/hosts naming localhost (as a container
runtime writes one; mariadb-install-db refuses to run when neither the host name
nor localhost resolves), and loses the package archives, apt lists and the
datadir its mariadb-server postinst created (the sandbox makes its own:
mysqlio.sandbox.RootedMariaDB).

    SUITES: bullseye (Debian 11, MariaDB 10.5), trixie (Debian 13, MariaDB 11.8)
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernels import source_entries  # tools/ is on sys.path wherever this runs

SUITES = {"bullseye": "10.5", "trixie": "11.8"}
CACHE_DIR = "/var/cache/mysqlio/roots"
PACKAGES = ("mariadb-server", "procps")
FALLBACK_MIRROR = "http://deb.debian.org/debian"
STAMP = ".mysqlio-root.json"
FORMAT = 1  # bump when what a root must contain changes: old roots are rebuilt
BUILD_TIMEOUT_S = 900.0
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
_TRIM = ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "var/lib/mysql/*")


def log(message: str) -> None:
    print(f"server_roots: {message}", file=sys.stderr, flush=True)


# -- the mirror ----------------------------------------------------------------


def _host_codename() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    found = re.search(r"^VERSION_CODENAME=\"?([\w-]+)", text, re.MULTILINE)
    return found[1] if found else ""


def apt_entries(etc: str = "/etc/apt") -> list[tuple[str, list[str]]]:
    """(uri, suites) of every `deb` entry of apt's sources (tools/kernels.py reads them)."""
    return [(uri, suites) for uri, suites, _ in source_entries(etc)]


def find_mirror(etc: str = "/etc/apt", codename: str | None = None) -> str:
    """The Debian mirror of this machine's apt sources: the URI that serves the host's
    own release (not -security / -updates); $MYSQLIO_DEBIAN_MIRROR overrides."""
    override = os.environ.get("MYSQLIO_DEBIAN_MIRROR")
    if override:
        return override
    codename = _host_codename() if codename is None else codename
    entries = apt_entries(etc)
    for uri, suites in entries:
        if codename and codename in suites:
            return uri.rstrip("/")
    for uri, suites in entries:  # not Debian's own release: any mirror of a Debian suite
        if uri.rstrip("/").endswith("/debian") and any(s in SUITES or "-" not in s for s in suites):
            return uri.rstrip("/")
    return FALLBACK_MIRROR


# -- building --------------------------------------------------------------------


def _mounts_under(path: str) -> list[str]:
    """Mount points at or below `path` (a failed debootstrap can leave proc / sys mounted)."""
    prefix = path.rstrip("/") + "/"
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split()[4].encode().decode("unicode_escape")
                if point == path or point.startswith(prefix):
                    found.append(point)
    except OSError:
        pass
    return found


def _remove_tree(path: str) -> None:
    """rm -rf a build directory, unmounting what debootstrap left mounted in it first."""
    if not os.path.lexists(path):
        return
    for point in sorted(_mounts_under(path), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)
    left = _mounts_under(path)
    if left:
        raise RuntimeError(f"cannot remove {path}: still mounted there: {', '.join(left)}")
    shutil.rmtree(path)


def read_stamp(root: str) -> dict[str, object] | None:
    try:
        stamp = json.loads(Path(root, STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def is_ready(root: str, suite: str) -> bool:
    stamp = read_stamp(root)
    return (
        stamp is not None
        and stamp.get("format") == FORMAT
        and stamp.get("suite") == suite
        and os.path.isfile(os.path.join(root, "usr/sbin/mariadbd"))
    )


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _server_version(root: str) -> str:
    """mariadb-server's version as dpkg recorded it in the root."""
    try:
        text = Path(root, "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return "?"
    found = re.search(r"^Package: mariadb-server\nStatus: [^\n]*\n(?:[^\n]+\n)*?Version: (\S+)", text, re.MULTILINE)
    return found[1] if found else "?"


def build(suite: str, target: str, mirror: str) -> None:
    """debootstrap into target.build, trim it, stamp it, rename it to target."""
    work = target + ".build"
    _remove_tree(work)
    started = time.monotonic()
    cmd = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        suite,
        work,
        mirror,
    ]
    log(f"building the {suite} root (MariaDB {SUITES.get(suite, '?')}): {' '.join(cmd)}")
    log_path = target + ".log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(timeout=BUILD_TIMEOUT_S)
        except BaseException:
            proc.kill()
            proc.wait()
            _remove_tree(work)
            raise
    if code != 0:
        tail = "\n".join(Path(log_path).read_text(errors="replace").splitlines()[-15:])
        _remove_tree(work)
        raise RuntimeError(f"debootstrap {suite} failed (exit {code}); {log_path} ends:\n{tail}")
    left = _mounts_under(work)
    if left:
        raise RuntimeError(f"debootstrap left mounts in {work}: {', '.join(left)}")
    for pattern in _TRIM:
        for path in glob.glob(os.path.join(work, pattern)):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    Path(work, "etc/hosts").write_text(HOSTS)
    stamp = {
        "format": FORMAT,
        "suite": suite,
        "mirror": mirror,
        "packages": list(PACKAGES),
        "mariadb_server": _server_version(work),
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "build_s": round(time.monotonic() - started, 1),
    }
    Path(work, STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    _remove_tree(target)
    os.rename(work, target)
    log(f"{suite} root ready in {stamp['build_s']} s: {target} (mariadb-server {stamp['mariadb_server']})")


def ensure_root(suite: str, cache_dir: str | None = None, mirror: str | None = None) -> str:
    """The root of `suite`, built first when missing or incomplete."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    cache = cache_dir or os.environ.get("MYSQLIO_ROOTS_DIR") or CACHE_DIR
    os.makedirs(cache, exist_ok=True)
    target = os.path.join(cache, suite)
    if is_ready(target, suite):
        return target
    if shutil.which("debootstrap", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"])) is None:
        raise RuntimeError("debootstrap is not installed (make setup installs it: tools/install-deps.sh)")
    if os.geteuid() != 0:
        raise RuntimeError(f"building the {suite} root needs root (debootstrap)")
    with _locked(target + ".lock"):
        if not is_ready(target, suite):  # another process may have built it meanwhile
            build(suite, target, mirror or find_mirror())
    return target


def ensure_roots(suites: Sequence[str], cache_dir: str | None = None, mirror: str | None = None) -> dict[str, str]:
    """Several roots, built in parallel (each debootstrap mostly waits on the network)."""
    with ThreadPoolExecutor(max_workers=max(1, len(suites))) as pool:
        futures = {s: pool.submit(ensure_root, s, cache_dir, mirror) for s in dict.fromkeys(suites)}
        return {s: f.result() for s, f in futures.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", default=list(SUITES), help=f"default: {' '.join(SUITES)}")
    parser.add_argument("--cache-dir", help=f"default: $MYSQLIO_ROOTS_DIR or {CACHE_DIR}")
    parser.add_argument("--mirror", help="default: the Debian mirror of /etc/apt's sources")
    parser.add_argument("--json", action="store_true", help="print {suite: root} as JSON")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        roots = ensure_roots(args.suites, args.cache_dir, args.mirror)
    except (RuntimeError, ValueError, OSError) as exc:
        log(str(exc))
        return 1
    if args.json:
        print(json.dumps(roots))
    else:
        for suite, root in roots.items():
            print(f"{suite}\t{root}")
    log(f"{len(roots)} root(s) in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
