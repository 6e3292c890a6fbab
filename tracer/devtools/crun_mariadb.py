"""A throwaway MariaDB run by crun (an OCI runtime, as under containerd) from an OCI
bundle written here, shaped like one container of a Kubernetes pod: the image is a
Debian root of tools/server_roots.py, the server's directory a host directory bind-mounted
at /var/lib/mysql, the cgroup kubelet's cgroupfs-driver path, the annotations containerd's
CRI ones. No network namespace (hostNetwork-like): the server listens on a socket only.

crun makes the cgroups itself (`--cgroup-manager=cgroupfs`). On a hybrid hierarchy
(cgroup v1 plus a v2 mount whose root has a controller, which crun 1.8 refuses) it is run
in a mount namespace of its own without the v2 mount: it sees and manages v1 alone.
Capabilities are those a container runtime gives by default, CAP_SYS_RESOURCE left out
(a sandbox may not hold it), rlimits inherited.

image_defaults=True starts mariadbd as a Debian/Ubuntu image does, without
--defaults-file: it reads the root's /etc/mysql/my.cnf -> /etc/alternatives/my.cnf (an
absolute link) -> /etc/mysql/mariadb.cnf, which includes /etc/mysql/mariadb.conf.d/. The
pod's own settings (the generated my.cnf) are bind-mounted there by crun as POD_CNF, as a
ConfigMap is, since the root is shared by every pod (crun creates the empty mount point
in the root once; it stays, read as an empty file by anything outside a pod)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .mariadb import MariaDB, MariaDBOptions
from .processes import find_binary
from .rooted_mariadb import MountedMariaDB

CRUN_RUN = "/run/crun"  # crun's state directory when run as root
# after Debian's 50-server.cnf and 60-galera.cnf, so the pod's settings win
POD_CNF = "/etc/mysql/mariadb.conf.d/99-pod.cnf"
_BUNDLE_PREFIX = "mysqlio-crun-"
_BUNDLE = re.compile(rf"{_BUNDLE_PREFIX}(\d+)-\w+")
_CAPS = [
    f"CAP_{c}"
    for c in [
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "NET_BIND_SERVICE",
        "SYS_CHROOT",
        "SYS_NICE",
        "IPC_LOCK",
        "AUDIT_WRITE",
    ]
]


@dataclass(frozen=True)
class Pod:
    """A pod's names, as kubelet gives them to containerd's CRI plugin."""

    namespace: str
    name: str
    container: str = "mariadb"
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    qos: str = "besteffort"

    def annotations(self, sandbox_id: str) -> dict[str, str]:
        return {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.container-name": self.container,
            "io.kubernetes.cri.sandbox-id": sandbox_id,
            "io.kubernetes.cri.sandbox-name": self.name,
            "io.kubernetes.cri.sandbox-namespace": self.namespace,
            "io.kubernetes.cri.sandbox-uid": self.uid,
        }

    def cgroup_parent(self) -> str:
        return f"/kubepods/{self.qos}/pod{self.uid}"


class CrunMariaDB(MountedMariaDB):
    """RootedMariaDB's server (same root, same base directory ROOT/srv/mysqlio-…), started
    with `crun run` instead of unshare + chroot: its base directory is its /var/lib/mysql.
    `container_id` is the running container's (64 hex digits, new at each start and
    restart()); `pid` is mariadbd (pid 1 of the container), `crun_pid` the `crun run`
    waiting for it. restart() stops the container and runs the same server (same pod,
    same files) in a new one. Needs root and crun."""

    PARENT_DEATH_SIGNAL = signal.SIGKILL

    def __init__(
        self, root: str, pod: Pod, options: MariaDBOptions | None = None, image_defaults: bool = False
    ) -> None:
        super().__init__(root, options)
        self.pod = pod
        self.image_defaults = image_defaults
        self.sandbox_id = os.urandom(32).hex()
        self.container_id = ""
        self.crun_pid = 0
        self._bundles = ""
        self._ids: list[str] = []  # every container this object ran (deleted by stop())

    # -- running programs in containers
    def _make_layout(self) -> None:
        _delete_stale_containers()
        self._bundles = tempfile.mkdtemp(prefix=f"{_BUNDLE_PREFIX}{os.getpid()}-")
        super()._make_layout()

    def _command(self, argv: list[str]) -> list[str]:
        if self.image_defaults and argv[0] == self._server_binary(self.SERVER):
            # the image's way: mariadbd finds its settings through /etc/mysql/my.cnf (POD_CNF)
            argv = [a for a in argv if not a.startswith("--defaults-file=")]
        cid = os.urandom(32).hex()
        bundle = os.path.join(self._bundles, cid[:12])
        os.mkdir(bundle)
        Path(bundle, "config.json").write_text(json.dumps(self._spec(argv, cid), indent=1))
        self._ids.append(cid)
        self.container_id = cid
        crun = [find_binary("crun"), "--cgroup-manager=cgroupfs", "run", "--bundle", bundle, cid]
        if crun_sees_hybrid():
            # crun 1.8 refuses a hybrid hierarchy (cgroup v1 + a v2 mount whose root has
            # controllers): run it where the v2 mount is not, a mount namespace of its own
            # (private: ours keeps it), so that it sees and manages cgroup v1 alone
            script = 'umount /sys/fs/cgroup/unified || exit 125; exec "$@"'
            return [find_binary("unshare"), "--mount", "/bin/sh", "-c", script, "sh", *crun]
        return crun

    def _spec(self, argv: list[str], cid: str) -> dict[str, object]:
        caps = {k: _CAPS for k in ("bounding", "effective", "permitted")}
        return {
            "ociVersion": "1.0.2",
            "process": {
                "terminal": False,
                "user": {"uid": 0, "gid": 0},
                "args": argv,
                "env": [f"PATH={self._PATH}", "HOME=/"],
                "cwd": "/",
                "capabilities": caps,
                "noNewPrivileges": False,
            },
            "root": {"path": self.root, "readonly": False},
            "hostname": self.pod.name,
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]},
                {
                    "destination": "/dev/shm",
                    "type": "tmpfs",
                    "source": "shm",
                    "options": ["nosuid", "nodev", "mode=1777"],
                },
                {"destination": self.MOUNT, "type": "bind", "source": self.base_dir, "options": ["rbind", "rw"]},
                *self._config_mounts(),
            ],
            "annotations": self.pod.annotations(self.sandbox_id),
            "linux": {
                "cgroupsPath": f"{self.pod.cgroup_parent()}/{cid}",
                "namespaces": [{"type": t} for t in ("pid", "mount", "ipc", "uts")],
            },
        }

    def _config_mounts(self) -> list[dict[str, object]]:
        if not self.image_defaults:
            return []
        return [{"destination": POD_CNF, "type": "bind", "source": self.config_file, "options": ["bind", "ro"]}]

    def _spawn(self, mariadbd: str) -> None:
        MariaDB._spawn(self, mariadbd)
        self.crun_pid = self.pid
        self.pid = self._container_pid(mariadbd)

    def _container_pid(self, mariadbd: str) -> int:
        """mariadbd, once crun's state names the container's process and it runs mariadbd."""
        assert self._proc is not None
        want = os.stat(self.root + mariadbd)
        deadline = time.monotonic() + self.SPAWN_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError, ValueError, KeyError):
                pid = int(json.loads(Path(CRUN_RUN, self.container_id, "status").read_text())["pid"])
                exe = os.stat(f"/proc/{pid}/exe")
                if (exe.st_dev, exe.st_ino) == (want.st_dev, want.st_ino):
                    return pid
            code = self._proc.poll()
            if code is not None:
                self._fail(f"crun run exited with code {code} before mariadbd started")
            if time.monotonic() > deadline:
                self._fail(f"no mariadbd in container {self.container_id} after {self.SPAWN_TIMEOUT_S:g}s")
            time.sleep(0.05)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if self.pid and self.pid != self.crun_pid:
            os.kill(self.pid, signal.SIGTERM)  # pid 1 of its namespace: it handles SIGTERM
        else:
            proc.kill()

    def restart(self, timeout_s: float = 60) -> None:
        """Stop the container and start the same server in a new one (new container id,
        same pod names and files), as kubelet restarts a container; wait until it answers."""
        self._run_again(timeout_s)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            for cid in self._ids:
                _crun_delete(cid)
            self._ids = []
            _remove_cgroup_dirs(self.pod.cgroup_parent())
            if self._bundles:
                shutil.rmtree(self._bundles, ignore_errors=True)


def crun_sees_hybrid() -> bool:
    """cgroup v1 with a v2 mount whose root has controllers, which crun 1.8 refuses
    ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2")."""
    try:
        return bool(Path("/sys/fs/cgroup/unified/cgroup.controllers").read_text().split())
    except OSError:
        return False


def _hierarchies() -> list[str]:
    """The mount points of every cgroup hierarchy (v1 and v2)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            out.append(fields[4])
    return out


def _crun_delete(cid: str) -> None:
    if os.path.exists(os.path.join(CRUN_RUN, cid)):
        subprocess.run([find_binary("crun"), "delete", "--force", cid], capture_output=True, timeout=30, check=False)


def _delete_stale_containers() -> None:
    """Containers of a CrunMariaDB whose creator died (a killed test): crun run was killed
    with it, the container was not."""
    with contextlib.suppress(OSError):
        for cid in os.listdir(CRUN_RUN):
            with contextlib.suppress(OSError, ValueError):
                bundle = json.loads(Path(CRUN_RUN, cid, "status").read_text()).get("bundle", "")
                found = _BUNDLE.fullmatch(os.path.basename(os.path.dirname(bundle)))
                if found and not os.path.exists(f"/proc/{found[1]}"):
                    _crun_delete(cid)
                    shutil.rmtree(os.path.dirname(bundle), ignore_errors=True)


def _remove_cgroup_dirs(parent: str) -> None:
    """The pod's cgroup directories, its containers' first (crun removes those it made,
    not those made here), then the QoS and kubepods ones when empty, in every hierarchy."""
    parts = parent.strip("/").split("/")
    for mount in _hierarchies():
        pod = Path(mount, *parts)
        for leaf in pod.glob("*") if pod.is_dir() else []:
            if leaf.is_dir():
                with contextlib.suppress(OSError):
                    leaf.rmdir()
        for depth in range(len(parts), 0, -1):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(mount, *parts[:depth]))
