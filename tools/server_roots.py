#!/usr/bin/env python3
"""Debian roots holding another release's MariaDB, or Oracle MySQL, to trace a server in
its own root.

    python3 tools/server_roots.py bullseye trixie sid-mysql   # build what is missing, print the roots

Each root is `debootstrap --variant=minbase --include=SERVER,procps SUITE
DIR MIRROR` from the Debian mirror this machine's apt sources use, cached as a
directory under /var/cache/mysqlio/roots/NAME (--cache-dir or
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

    ROOTS: bullseye (Debian 11, MariaDB 10.5), trixie (Debian 13, MariaDB 11.8),
           sid-mysql (Debian sid, Oracle MySQL 9.7: mysql-server)

The machinery (mirror, debootstrap, trim, stamp, lock, rename) takes any RootSpec:
tools/build_roots.py makes SystemTap build hosts with it (a root's packages are part of
its stamp, so a root of other packages is rebuilt; RootSpec.later installs a few packages
from a later suite with the root's own apt), and run_in_root runs a command chrooted in a
root, in a mount namespace of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kernels import source_entries  # tools/ is on sys.path wherever this runs

SUITES = {"bullseye": "10.5", "trixie": "11.8"}  # MariaDB's roots: name = suite
# every server root: name -> (suite, server package, its server binary, what it holds)
ROOTS = {
    "bullseye": ("bullseye", "mariadb-server", "usr/sbin/mariadbd", "MariaDB 10.5"),
    "trixie": ("trixie", "mariadb-server", "usr/sbin/mariadbd", "MariaDB 11.8"),
    "sid-mysql": ("sid", "mysql-server", "usr/sbin/mysqld", "Oracle MySQL 9.7"),
}
CACHE_DIR = "/var/cache/mysqlio/roots"
PACKAGES = ("mariadb-server", "procps")
FALLBACK_MIRROR = "http://deb.debian.org/debian"
STAMP = ".mysqlio-root.json"
FORMAT = 1  # bump when what a root must contain changes: old roots are rebuilt
BUILD_TIMEOUT_S = 900.0
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
TRIM_APT = ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*")


@dataclass(frozen=True)
class RootSpec:
    """What one cached root is: `debootstrap --variant=minbase --include=PACKAGES SUITE`
    into CACHE/NAME, then TRIM (globs in the root) removed. It is ready when its stamp
    names the same FORMAT, suite and packages, and the file READY is in it: a root whose
    packages changed (e.g. another kernel release's headers) is built again.
    tools/build_roots.py makes the roots that compile SystemTap modules with this."""

    name: str
    suite: str
    packages: tuple[str, ...]
    ready: str  # a path inside the root
    purpose: str  # for the log
    trim: tuple[str, ...] = TRIM_APT
    versions_of: tuple[str, ...] = ()  # packages whose installed versions the stamp records
    # (SUITE, PACKAGES): after debootstrap, PACKAGES from a later SUITE (e.g. a newer systemtap),
    # installed by the root's apt with that suite pinned low, so nothing else moves to it
    later: tuple[str, tuple[str, ...]] | None = None

    def key(self) -> object:
        """What the stamp must repeat for the root to be this one (JSON-shaped)."""
        return [self.suite, list(self.packages), [self.later[0], list(self.later[1])] if self.later else None]


def server_spec(name: str) -> RootSpec:
    suite, package, binary, purpose = ROOTS[name]
    return RootSpec(
        name=name,
        suite=suite,
        packages=(package, "procps"),
        ready=binary,
        purpose=purpose,
        trim=(*TRIM_APT, "var/lib/mysql/*"),
        versions_of=(package,),
    )


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


def is_ready(root: str, suite: str, spec: RootSpec | None = None) -> bool:
    spec = spec or server_spec(suite)
    stamp = read_stamp(root)
    return (
        stamp is not None
        and stamp.get("format") == FORMAT
        and [stamp.get("suite"), list(stamp.get("packages") or ()), stamp.get("later")] == spec.key()
        and os.path.lexists(os.path.join(root, spec.ready))
    )


def run_in_root(
    root: str,
    argv: Sequence[str],
    binds: dict[str, str] | None = None,
    read_only: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """ARGV chrooted in ROOT, in a mount namespace of its own (nothing stays mounted, and the
    host never sees the mounts): /proc, /dev and BINDS (host path -> path in the root; those
    in READ_ONLY bound read-only) mounted first. ENV: the whole environment (PATH, HOME, LC_ALL
    set by default)."""
    script = ["set -e"]
    for host, inside in {"/proc": "/proc", "/dev": "/dev", **(binds or {})}.items():
        target = os.path.join(root, inside.lstrip("/"))
        script.append(f"mkdir -p {shlex.quote(target)}")
        script.append(f"mount --rbind {shlex.quote(host)} {shlex.quote(target)}")
        if host in read_only:
            script.append(f"mount -o remount,bind,ro {shlex.quote(target)}")
    full = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        **(env or {}),
    }
    script.append(
        f"exec chroot {shlex.quote(root)} /usr/bin/env -i "
        + shlex.join([f"{k}={v}" for k, v in full.items()] + list(argv))
    )
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _install_later(work: str, spec: RootSpec, mirror: str, log_path: str) -> None:
    """spec.later's packages from its suite, by the root's own apt (network: the mirror's)."""
    assert spec.later is not None
    suite, packages = spec.later
    # check-valid-until=no: a testing suite's Release can be past its Valid-Until on a mirror
    # (forky's was, by 17 days, here); its signature is still checked
    Path(work, "etc/apt/sources.list.d/mysqlio-later.list").write_text(
        f"deb [check-valid-until=no] {mirror} {suite} main\n"
    )
    Path(work, "etc/apt/preferences.d").mkdir(parents=True, exist_ok=True)
    Path(work, "etc/apt/preferences.d/mysqlio-later").write_text(
        f"Package: *\nPin: release n={suite}\nPin-Priority: 100\n"
    )
    wanted = " ".join(f"{p}/{suite}" for p in packages)
    cmd = f"apt-get -q update && apt-get -q -y --no-install-recommends install {wanted}"
    log(f"{spec.name}: {cmd}")
    proc = run_in_root(work, ["sh", "-c", cmd], env={"DEBIAN_FRONTEND": "noninteractive"})
    with open(log_path, "a") as out:
        out.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise RuntimeError(f"installing {wanted} in the {spec.name} root failed (exit {proc.returncode}):\n{tail}")


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def installed_version(root: str, package: str) -> str:
    """PACKAGE's version as dpkg recorded it in the root ("?" when not installed)."""
    try:
        text = Path(root, "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return "?"
    found = re.search(rf"^Package: {re.escape(package)}\n(?:[^\n]+\n)*?Version: (\S+)", text, re.MULTILINE)
    return found[1] if found else "?"


def build(suite: str, target: str, mirror: str, spec: RootSpec | None = None) -> None:
    """debootstrap into target.build, trim it, stamp it, rename it to target."""
    spec = spec or server_spec(suite)
    work = target + ".build"
    _remove_tree(work)
    started = time.monotonic()
    cmd = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(spec.packages)}",
        spec.suite,
        work,
        mirror,
    ]
    log(f"building the {spec.name} root ({spec.purpose}): {' '.join(cmd)}")
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
        raise RuntimeError(f"debootstrap {spec.suite} failed (exit {code}); {log_path} ends:\n{tail}")
    left = _mounts_under(work)
    if left:
        raise RuntimeError(f"debootstrap left mounts in {work}: {', '.join(left)}")
    if spec.later:
        try:
            _install_later(work, spec, mirror, log_path)
        except BaseException:
            _remove_tree(work)
            raise
    for pattern in spec.trim:
        for path in glob.glob(os.path.join(work, pattern)):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    Path(work, "etc/hosts").write_text(HOSTS)
    versions = {p: installed_version(work, p) for p in spec.versions_of}
    stamp = {
        "format": FORMAT,
        "suite": spec.suite,
        "mirror": mirror,
        "packages": list(spec.packages),
        **({"later": spec.key()[2]} if spec.later else {}),
        **({"mariadb_server": versions.get("mariadb-server", "?")} if spec.name == spec.suite else {}),
        "versions": versions,
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "build_s": round(time.monotonic() - started, 1),
    }
    Path(work, STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    _remove_tree(target)
    os.rename(work, target)
    shown = ", ".join(f"{p} {v}" for p, v in versions.items())
    log(f"{spec.name} root ready in {stamp['build_s']} s: {target}" + (f" ({shown})" if shown else ""))


def cache_dir_of(cache_dir: str | None = None) -> str:
    return cache_dir or os.environ.get("MYSQLIO_ROOTS_DIR") or CACHE_DIR


def ensure_spec(spec: RootSpec, cache_dir: str | None = None, mirror: str | None = None) -> str:
    """The root SPEC describes, built first when missing, incomplete or of other packages."""
    cache = cache_dir_of(cache_dir)
    os.makedirs(cache, exist_ok=True)
    target = os.path.join(cache, spec.name)
    if is_ready(target, spec.suite, spec):
        return target
    if shutil.which("debootstrap", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"])) is None:
        raise RuntimeError("debootstrap is not installed (make setup installs it: tools/install-deps.sh)")
    if os.geteuid() != 0:
        raise RuntimeError(f"building the {spec.name} root needs root (debootstrap)")
    with _locked(target + ".lock"):
        if not is_ready(target, spec.suite, spec):  # another process may have built it meanwhile
            build(spec.suite, target, mirror or find_mirror(), spec)
    return target


def ensure_root(name: str, cache_dir: str | None = None, mirror: str | None = None) -> str:
    """The server root `name` (ROOTS), built first when missing or incomplete."""
    if name not in ROOTS:
        raise ValueError(f"unknown root {name!r}; known: {', '.join(ROOTS)}")
    return ensure_spec(server_spec(name), cache_dir, mirror)


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
