"""A throwaway MariaDB run by docker or podman, started with the engine's own CLI as a DBA
starts one (`docker run --name NAME ...`), from a Debian root of tools/server_roots.py:
podman runs the root directory itself (`--rootfs`), docker an image imported from it once
(`docker import`, tagged by the root's stamp, kept by the daemon). As under crun
(crun_mariadb.py), the server's base directory (datadir, socket, logs) is a host directory
bind-mounted at /var/lib/mysql, there is no network (`--network none`: the socket only),
and mariadb-install-db runs in a container of the same image first.

`Dockerd` starts a docker daemon of its own for a test (no systemd here to start one):
no iptables rules, no bridge, its own socket and pidfile, the default data root (where
mysqlio reads a container's name: /var/lib/docker/containers/<id>/config.v2.json).

Both engines use runc where crun 1.8 refuses the machine's hybrid cgroup hierarchy
(crun_mariadb.crun_sees_hybrid), and podman gets the open-files limit this process has:
its default (1048576) needs CAP_SYS_RESOURCE, which a sandbox may not hold."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from .crun_mariadb import crun_sees_hybrid
from .mariadb import POLL_S, MariaDB, MariaDBOptions
from .processes import die_with_parent, find_binary, wait_or_kill
from .rooted_mariadb import MountedMariaDB

# names of the servers' containers: mysqlio-<creator pid>-<label>, so that the next start
# removes those a killed test left running
_NAME = re.compile(r"mysqlio-(\d+)-[\w.-]+")
# podman 4.3 lowers its own RLIMIT_NPROC hard limit to 32768 before it starts the runtime
# (strace), which then may not set a container's higher: its default is 1048576
_PODMAN_NPROC = 32768


class Dockerd:
    """dockerd run from here, for as long as the `with` block: `cli` is the docker command
    line that talks to it."""

    START_TIMEOUT_S = 60.0
    STOP_TIMEOUT_S = 30.0

    def __init__(self) -> None:
        self._dir = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self.cli: list[str] = []

    def __enter__(self) -> Dockerd:
        self._dir = tempfile.mkdtemp(prefix="mysqlio-dockerd-")
        sock = os.path.join(self._dir, "docker.sock")
        argv = [find_binary("dockerd"), "--iptables=false", "--ip6tables=false", "--bridge=none"]
        argv += [f"--pidfile={self._dir}/docker.pid", f"--host=unix://{sock}"]
        with open(os.path.join(self._dir, "dockerd.log"), "ab") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(die_with_parent, signal.SIGTERM),
            )
        self.cli = [find_binary("docker"), f"--host=unix://{sock}"]
        deadline = time.monotonic() + self.START_TIMEOUT_S
        while subprocess.run([*self.cli, "version"], capture_output=True, timeout=30, check=False).returncode:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                log_text = Path(self._dir, "dockerd.log").read_text(errors="replace")
                self.__exit__(None, None, None)
                raise RuntimeError(f"dockerd did not start: {' '.join(argv)}\n{log_text[-2000:]}")
            time.sleep(0.2)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()  # dockerd stops its containers and its containerd
            wait_or_kill(proc, self.STOP_TIMEOUT_S, group=True)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def image_of(self, root: str) -> str:
        """The image of `root` (a server root's directory), imported unless the daemon has
        it: tagged by the root's stamp, so a rebuilt root is imported again."""
        stamp = Path(root, ".mysqlio-root.json").read_bytes()
        tag = f"mysqlio-root-{os.path.basename(os.path.realpath(root))}:{hashlib.sha256(stamp).hexdigest()[:12]}"
        if subprocess.run([*self.cli, "image", "inspect", tag], capture_output=True, timeout=60).returncode == 0:
            return tag
        # the servers' base directories (srv/) and /proc are not the image's
        tar = subprocess.Popen(
            [find_binary("tar"), "-C", root, "--exclude=./srv/*", "--exclude=./proc/*", "-c", "."],
            stdout=subprocess.PIPE,
        )
        imported = subprocess.run(
            [*self.cli, "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True, timeout=300
        )
        if tar.wait() or imported.returncode:
            raise RuntimeError(f"docker import of {root} failed: {imported.stderr.strip()}")
        return tag


def podman_cli() -> list[str]:
    """podman without systemd (cgroupfs), on runc where crun cannot manage the cgroups."""
    cli = [find_binary("podman"), "--cgroup-manager=cgroupfs", "--events-backend=file"]
    return [*cli, "--runtime=runc"] if crun_sees_hybrid() else cli


class EngineMariaDB(MountedMariaDB):
    """RootedMariaDB's server (same root, base directory ROOT/srv/mysqlio-…, its
    /var/lib/mysql in the container) run by `cli` (docker's or podman's command line) as
    container `name` (mysqlio-<our pid>-<label>); `image` is docker's image of the root,
    None for podman's --rootfs. `pid` is mariadbd (pid 1 of the container), `cli_pid` the
    attached `run` waiting for it, `container_id` the container's id (new at each
    start: restart() and recreate() run a new container; `--rm` removes the old one)."""

    PARENT_DEATH_SIGNAL = signal.SIGKILL
    SPAWN_TIMEOUT_S = 30.0

    def __init__(
        self, root: str, cli: list[str], label: str, image: str | None = None, options: MariaDBOptions | None = None
    ) -> None:
        super().__init__(root, options)
        self.cli = cli
        self.image = image
        self.name = f"mysqlio-{os.getpid()}-{label}"
        self.container_id = ""
        self.cli_pid = 0

    # -- running programs in containers
    def _make_layout(self) -> None:
        self._remove_stale_containers()
        super()._make_layout()

    def _command(self, argv: list[str]) -> list[str]:
        run = [*self.cli, "run", "--rm", "--network=none", f"--volume={self.base_dir}:{self.MOUNT}"]
        if self.image is None:  # podman
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            hard_nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
            nproc = _PODMAN_NPROC if hard_nproc == resource.RLIM_INFINITY else min(hard_nproc, _PODMAN_NPROC)
            run += [f"--ulimit=nofile={soft}:{hard}", f"--ulimit=nproc={nproc}:{nproc}"]
        if argv[0] == self._server_binary(self.SERVER):
            run.append(f"--name={self.name}")
        # the image, or the root directory (podman: its first argument after --rootfs)
        return [*run, *(["--rootfs", self.root] if self.image is None else [self.image]), *argv]

    def _spawn(self, mariadbd: str) -> None:
        MariaDB._spawn(self, mariadbd)
        self.cli_pid = self.pid
        self.pid, self.container_id = self._container_pid()

    def _container_pid(self) -> tuple[int, str]:
        """(mariadbd's pid, the container's id) once the engine names a process of the
        container and it runs mariadbd."""
        assert self._proc is not None
        deadline = time.monotonic() + self.SPAWN_TIMEOUT_S
        inspect = [*self.cli, "inspect", "--format={{.State.Pid}} {{.Id}}", self.name]
        while True:
            found = subprocess.run(inspect, capture_output=True, text=True, timeout=30, check=False)
            with contextlib.suppress(OSError, ValueError):
                pid, cid = found.stdout.split()
                if int(pid) and Path(f"/proc/{pid}/comm").read_text().strip() == self.SERVER:
                    return int(pid), cid
            code = self._proc.poll()
            if code is not None:
                self._fail(f"{os.path.basename(self.cli[0])} run exited with code {code} before mariadbd started")
            if time.monotonic() > deadline:
                self._fail(f"no mariadbd in container {self.name} after {self.SPAWN_TIMEOUT_S:g}s")
            time.sleep(POLL_S)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if self.pid and self.pid != self.cli_pid:
            os.kill(self.pid, signal.SIGTERM)  # pid 1 of its namespace: it handles SIGTERM
        else:
            proc.kill()

    def recreate(self, timeout_s: float = 60) -> None:
        """Stop and remove the container and `run --name` the same server again (a new
        container id and pid, same name and files), as compose recreates a service; wait
        until it answers."""
        self._run_again(timeout_s, while_down=self._remove_container)  # (gone already: --rm)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._remove_container()

    def _remove_container(self, name: str = "") -> None:
        subprocess.run([*self.cli, "rm", "--force", name or self.name], capture_output=True, timeout=60, check=False)

    def _remove_stale_containers(self) -> None:
        """Containers of an EngineMariaDB whose creator died (a killed test)."""
        names = subprocess.run([*self.cli, "ps", "--all", "--format={{.Names}}"], capture_output=True, text=True)
        for name in names.stdout.split():
            found = _NAME.fullmatch(name)
            if found and not os.path.exists(f"/proc/{found[1]}"):
                self._remove_container(name)
