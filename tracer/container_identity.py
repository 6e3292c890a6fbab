"""Which container a process runs in, read from files only (no runtime API, no CLI).

`container_identity(pid)` reads:

- /proc/PID/cgroup: the runtime and container id, and the pod UID under Kubernetes, from
  the cgroup path's shape (either hierarchy version; the first line that has one wins):
  kubelet's systemd driver `kubepods[-burstable|-besteffort].slice/kubepods-…-pod<UID with
  _>.slice/cri-containerd-<id>.scope` (or `crio-<id>.scope`, `docker-<id>.scope`), its
  cgroupfs driver `/kubepods[/<qos>]/pod<UID>/<id>`, plain docker
  `/system.slice/docker-<id>.scope` or `/docker/<id>`, podman `libpod-<id>.scope`;
- the Kubernetes names (namespace, pod, container) from the OCI bundle's config.json
  annotations, the bundle found through the low-level runtime's state files: containerd's
  shim task directory (/run/containerd/io.containerd.runtime.v2.task/<ns>/<id>/ is the
  bundle), runc's state.json (/run/runc/<id>/ or containerd's /run/containerd/runc/<ns>/<id>/:
  its config's `labels` are the annotations as `key=value` plus `bundle=<dir>`), crun's
  status (/run/crun/<id>/status: JSON with `bundle`);
- the name a DBA gave a docker or podman container (`docker run --name mysql-primary`),
  from the engine's own state files: docker's /var/lib/docker/containers/<id>/config.v2.json
  ("Name", with a leading "/"), containers/storage's (podman, CRI-O)
  /var/lib/containers/storage/<driver>-containers/containers.json (the entry of this id,
  its first of `names`); root's engines only (rootless podman keeps its storage in the
  user's home);
- the mount, pid and net namespace inode numbers (/proc/PID/ns/*).

On the host every field but the namespaces is empty. Unreadable files are skipped.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass
from typing import Any

RUN = "/run"  # where runtimes keep their state: the host's /run as seen here
VAR_LIB = "/var/lib"  # where docker and containers/storage keep theirs

# the id as runtimes make them: 64 hex digits (docker, containerd, CRI-O, podman)
_ID = r"[0-9a-f]{64}"
# systemd driver: a scope named after the runtime ("crio-conmon-<id>" is CRI-O's monitor, not the container)
_SCOPE = re.compile(rf"(cri-containerd|crio|docker|libpod)-({_ID})\.scope")
_SCOPE_RUNTIME = {"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker", "libpod": "podman"}
_SYSTEMD_POD = re.compile(r"kubepods(?:-[a-z]+)*-pod([0-9a-f_]{36})\.slice")
_CGROUPFS_POD = re.compile(r"pod([0-9a-f-]{36})")
_BARE_ID = re.compile(_ID)
_LIBPOD = re.compile(rf"libpod-({_ID})")

# Kubernetes' names in a container's OCI annotations: containerd's CRI plugin, then CRI-O
_NAME_KEYS = (
    (
        "io.kubernetes.cri.sandbox-namespace",
        "io.kubernetes.cri.sandbox-name",
        "io.kubernetes.cri.container-name",
        "io.kubernetes.cri.sandbox-uid",
    ),
    ("io.kubernetes.pod.namespace", "io.kubernetes.pod.name", "io.kubernetes.container.name", "io.kubernetes.pod.uid"),
)


@dataclass(frozen=True)
class ContainerIdentity:
    """A process's container; "" / 0 where unknown. `runtime`: containerd, cri-o, docker,
    podman, or the low-level runtime whose state named it (runc, crun)."""

    runtime: str = ""
    container_id: str = ""
    pod_uid: str = ""
    namespace: str = ""
    pod: str = ""
    container: str = ""
    name: str = ""  # docker's / podman's container name (`--name`), "" when not read
    mnt_ns: int = 0
    pid_ns: int = 0
    net_ns: int = 0

    @property
    def in_container(self) -> bool:
        return bool(self.container_id)

    @property
    def named(self) -> bool:
        """Kubernetes names known (the pod's and the container's)."""
        return bool(self.pod and self.container)

    def key(self) -> tuple[str, ...]:
        """What stays the same when the container is restarted: its names under Kubernetes
        (a restart makes a new container id), else its docker / podman name (`docker rm -f`
        and `docker run --name` again, as compose does on a change of settings, is the same
        server to a DBA; a name is unique per engine), else its id; () on the host."""
        if self.named:
            return ("k8s", self.namespace, self.pod, self.container)
        if self.name:
            return ("name", self.runtime, self.name)
        if self.container_id:
            return ("id", self.container_id)
        return ()

    def describe(self) -> str:
        """ "k8s prod/mysql-0/mysql", "docker mysql-primary", "containerd 0123456789ab",
        or "" on the host."""
        if self.named:
            return f"k8s {self.namespace}/{self.pod}/{self.container}"
        if self.name:
            return f"{self.runtime or 'container'} {self.name}"
        if self.container_id:
            return f"{self.runtime or 'container'} {self.container_id[:12]}"
        return ""

    def labels(self) -> dict[str, str]:
        """The exporter's `namespace`, `pod`, `container` labels: the Kubernetes names, else
        the docker / podman name as `container` (two such servers both at /var/lib/mysql
        would otherwise share every series)."""
        if self.named:
            return {"namespace": self.namespace, "pod": self.pod, "container": self.container}
        return {"namespace": "", "pod": "", "container": self.name}

    def to_json(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "id": self.container_id,
            "pod_uid": self.pod_uid,
            "namespace": self.namespace,
            "pod": self.pod,
            "container": self.container,
            "name": self.name,
            "mnt_ns": self.mnt_ns,
            "pid_ns": self.pid_ns,
            "net_ns": self.net_ns,
        }


def container_identity(pid: int | str, run: str = RUN, var_lib: str = VAR_LIB) -> ContainerIdentity:
    """The container identity of process `pid` ("self" for ours)."""
    runtime, container_id, pod_uid = from_cgroup(_read(f"/proc/{pid}/cgroup"))
    names: tuple[str, str, str, str] = ("", "", "", "")
    name = ""
    if container_id:
        state_runtime, annotations = runtime_annotations(container_id, run)
        names = kubernetes_names(annotations)
        if not names[1]:  # under Kubernetes its names are what is shown (CRI-O's big file unread)
            name = engine_name(runtime, container_id, var_lib)
        runtime = runtime or state_runtime
    return ContainerIdentity(
        runtime=runtime,
        container_id=container_id,
        pod_uid=pod_uid or names[3],
        namespace=names[0],
        pod=names[1],
        container=names[2],
        name=name,
        mnt_ns=namespace_inode(pid, "mnt"),
        pid_ns=namespace_inode(pid, "pid"),
        net_ns=namespace_inode(pid, "net"),
    )


def namespace_inode(pid: int | str, kind: str) -> int:
    """The inode number of the process's namespace `kind` (mnt, pid, net); 0 if unreadable."""
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return 0


def from_cgroup(text: str) -> tuple[str, str, str]:
    """(runtime, container id, pod UID) from a /proc/PID/cgroup; runtime is "" when the
    path's shape does not say (kubelet's cgroupfs driver)."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        found = from_cgroup_path(path)
        if found[1]:
            return found
    return "", "", ""


def from_cgroup_path(path: str) -> tuple[str, str, str]:
    parts = [p for p in path.split("/") if p]
    pod_uid = ""
    for i, part in enumerate(parts):
        systemd_pod = _SYSTEMD_POD.fullmatch(part)
        if systemd_pod:
            pod_uid = systemd_pod[1].replace("_", "-")
            continue
        scope = _SCOPE.fullmatch(part)
        if scope:
            return _SCOPE_RUNTIME[scope[1]], scope[2], pod_uid
        cgroupfs_pod = _CGROUPFS_POD.fullmatch(part)
        if cgroupfs_pod and "kubepods" in parts[:i]:
            pod_uid = cgroupfs_pod[1]
            continue
        if _BARE_ID.fullmatch(part) and (pod_uid or (i > 0 and parts[i - 1] == "docker")):
            return ("docker" if not pod_uid else ""), part, pod_uid
        libpod = _LIBPOD.fullmatch(part)
        if libpod:
            return "podman", libpod[1], pod_uid
    return "", "", ""


def runtime_annotations(container_id: str, run: str = RUN) -> tuple[str, dict[str, str]]:
    """(low-level runtime, OCI annotations) of a container, from the first state found:
    containerd's shim bundle, runc's state.json, crun's status. ("", {}) when none is readable."""
    for bundle in sorted(glob.glob(f"{run}/containerd/io.containerd.runtime.v2.task/*/{container_id}")):
        annotations = _bundle_annotations(bundle)
        if annotations is not None:
            return "", annotations
    for state in (
        f"{run}/runc/{container_id}/state.json",
        *glob.glob(f"{run}/containerd/runc/*/{container_id}/state.json"),
    ):
        labels = _json(state).get("config", {}).get("labels")
        if isinstance(labels, list):
            pairs = dict(str(label).partition("=")[::2] for label in labels)
            bundle = pairs.pop("bundle", "")
            return "runc", pairs or _bundle_annotations(bundle) or {}
    status = _json(f"{run}/crun/{container_id}/status")
    if isinstance(status.get("bundle"), str):
        return "crun", _bundle_annotations(status["bundle"]) or {}
    return "", {}


def engine_name(runtime: str, container_id: str, var_lib: str = VAR_LIB) -> str:
    """The container's name in its engine's state files (docker; podman and CRI-O through
    containers/storage), "" when not found."""
    if runtime == "docker":
        name = _json(f"{var_lib}/docker/containers/{container_id}/config.v2.json").get("Name")
        return name.lstrip("/") if isinstance(name, str) else ""
    if runtime in ("podman", "cri-o"):
        # one file per storage driver (overlay, vfs, ...): a JSON list of every container
        for path in sorted(glob.glob(f"{var_lib}/containers/storage/*-containers/containers.json")):
            for entry in _json_list(path):
                if isinstance(entry, dict) and entry.get("id") == container_id:
                    names = entry.get("names")
                    return str(names[0]) if isinstance(names, list) and names else ""
    return ""


def kubernetes_names(annotations: dict[str, str]) -> tuple[str, str, str, str]:
    """(namespace, pod, container, pod UID) from CRI annotations; empty when absent."""
    for keys in _NAME_KEYS:
        names = tuple(annotations.get(key, "") for key in keys)
        if names[1]:
            return names[0], names[1], names[2], names[3]
    return "", "", "", ""


def _bundle_annotations(bundle: str) -> dict[str, str] | None:
    if not bundle:
        return None
    annotations = _json(os.path.join(bundle, "config.json")).get("annotations")
    if not isinstance(annotations, dict):
        return None
    return {str(k): str(v) for k, v in annotations.items()}


def _json(path: str) -> dict[str, Any]:
    try:
        found = json.loads(_read(path) or "null")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _json_list(path: str) -> list[Any]:
    try:
        found = json.loads(_read(path) or "null")
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""
