"""--pod / --container: which server they select among identities, and the one line said
when none or several match (the live selection: test_containers.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mysqlio.container_identity import ContainerIdentity, engine_name
from mysqlio.container_select import apply_selectors, select_server
from mysqlio.errors import UserError
from mysqlio.root_paths import shown_path


def _pods() -> list[tuple[int, ContainerIdentity]]:
    # fixed ids (random ones shared their 7th digit one run in 16): the first two alike
    # in their first 6 digits, the third unlike both from its first digit
    ids = ["c7f3e2" + "1" + "0" * 57, "c7f3e2" + "2" + "f" * 57, "9b" + "4" * 62]
    return [
        (101, ContainerIdentity("containerd", ids[0], "u0", "prod", "mysql-0", "mysql")),
        (102, ContainerIdentity("containerd", ids[1], "u1", "prod", "mysql-1", "mysql")),
        (103, ContainerIdentity("docker", ids[2])),
        (104, ContainerIdentity()),  # on the host
    ]


def test_a_docker_or_podman_name_selects() -> None:
    """The name given with `--name` selects as an id does; only the whole name."""
    ids = ["ab" + "1" * 62, "ab" + "2" * 62, "cd" + "3" * 62]
    found = [
        (201, ContainerIdentity("docker", ids[0], name="mysql-primary")),
        (202, ContainerIdentity("podman", ids[1], name="mysql-replica")),
        (203, ContainerIdentity("containerd", ids[2])),
    ]
    assert select_server(None, "mysql-replica", found) == 202
    assert select_server(None, "mysql-primary", found) == 201
    assert select_server(None, ids[1][:3], found) == 202
    with pytest.raises(UserError) as exc:
        select_server(None, "mysql", found)
    assert str(exc.value) == (
        "no mysqld or mariadbd in container mysql; servers running: "
        f"pid 201 (docker mysql-primary, container {ids[0][:12]}), "
        f"pid 202 (podman mysql-replica, container {ids[1][:12]}), pid 203 (containerd {ids[2][:12]})"
    )


def test_names_key_and_labels() -> None:
    """A docker / podman name is what stays across `rm -f` + `run --name` (and labels the
    exporter's series); Kubernetes names win over it; an id alone is the last resort."""
    cid = "ef" * 32
    docker = ContainerIdentity("docker", cid, name="mysql-a")
    assert (docker.describe(), docker.key()) == ("docker mysql-a", ("name", "docker", "mysql-a"))
    assert docker.labels() == {"namespace": "", "pod": "", "container": "mysql-a"}
    assert docker.to_json()["name"] == "mysql-a"
    k8s = ContainerIdentity("cri-o", cid, "u", "prod", "mysql-0", "mysql", name="k8s_mysql_mysql-0_prod_u_0")
    assert (k8s.describe(), k8s.key()) == ("k8s prod/mysql-0/mysql", ("k8s", "prod", "mysql-0", "mysql"))
    assert k8s.labels() == {"namespace": "prod", "pod": "mysql-0", "container": "mysql"}
    bare = ContainerIdentity("containerd", cid)
    assert (bare.describe(), bare.key(), bare.labels()["container"]) == (f"containerd {cid[:12]}", ("id", cid), "")


def test_names_read_from_the_engines_state_files(tmp_path: Path) -> None:
    """The files' shapes as docker 20.10 and podman 4.3 (root) leave them (the live check:
    test_docker_podman.py)."""
    cid, other = "0a" * 32, "0b" * 32
    docker = tmp_path / "docker" / "containers" / cid
    docker.mkdir(parents=True)
    (docker / "config.v2.json").write_text(json.dumps({"ID": cid, "Name": "/mysql-a", "State": {"Pid": 7}}))
    storage = tmp_path / "containers" / "storage" / "overlay-containers"
    storage.mkdir(parents=True)
    entries = [{"id": other, "names": ["x"]}, {"id": cid, "names": ["mysql-b"], "layer": "l"}]
    (storage / "containers.json").write_text(json.dumps(entries))
    assert engine_name("docker", cid, str(tmp_path)) == "mysql-a"
    assert engine_name("podman", cid, str(tmp_path)) == "mysql-b"
    assert engine_name("podman", "0c" * 32, str(tmp_path)) == ""  # not there
    assert engine_name("containerd", cid, str(tmp_path)) == ""  # no names of its own
    (storage / "containers.json").write_text("{truncated")
    assert engine_name("podman", cid, str(tmp_path)) == ""


def test_selects_one_server() -> None:
    found = _pods()
    ids = [c.container_id for _, c in found]
    assert select_server("prod/mysql-1", None, found) == 102
    assert select_server(None, ids[2], found) == 103  # full id
    assert select_server(None, ids[0][:7], found) == 101  # the shortest unique prefix
    assert select_server(None, ids[2][:4].upper(), found) == 103  # as docker ps shows it, any case
    assert select_server("prod/mysql-0", ids[0][:6], found) == 101  # both: each must match


@pytest.mark.parametrize(
    ("pod", "container", "said"),
    [
        (
            "prod/mysql-9",
            None,
            "no mysqld or mariadbd in pod prod/mysql-9; servers running: pid 101 (k8s prod/mysql-0/mysql",
        ),
        ("prod/mysql-1", "ffff", "no mysqld or mariadbd in pod prod/mysql-1 and container ffff"),
        ("mysql-0", None, "--pod wants NAMESPACE/NAME, not 'mysql-0'"),
        ("prod/a/b", None, "--pod wants NAMESPACE/NAME"),
        (None, "", "--container wants a container id"),
    ],
)
def test_no_match_is_one_line(pod: str | None, container: str | None, said: str) -> None:
    with pytest.raises(UserError) as exc:
        select_server(pod, container, _pods())
    assert str(exc.value).startswith(said) and "\n" not in str(exc.value), str(exc.value)


def test_several_matches_are_named() -> None:
    found = _pods()
    prefix = found[0][1].container_id[:6]
    with pytest.raises(UserError) as exc:
        select_server(None, prefix, found)
    message = str(exc.value)
    assert message.startswith(f"2 servers are in container {prefix}: pid 101 (k8s prod/mysql-0/mysql, container ")
    assert "pid 102 (k8s prod/mysql-1/mysql" in message and "pid 103" not in message, message


def test_selectors_exclude_pid_and_all() -> None:
    args = argparse.Namespace(pid=5, pod="a/b", container=None)
    with pytest.raises(UserError, match="instead of -p PID or --all"):
        apply_selectors(args)
    args = argparse.Namespace(pid=None, all=True, pod=None, container="ab")
    with pytest.raises(UserError, match="instead of -p PID or --all"):
        apply_selectors(args)
    args = argparse.Namespace(pid=7, pod=None, container=None)
    apply_selectors(args)  # no selector: -p stays
    assert args.pid == 7


def test_shown_path() -> None:
    """Under /proc/PID/root: the server's own name; a chroot's directory here is kept."""
    assert shown_path("/proc/42/root/var/lib/mysql/ibdata1", "/proc/42/root") == "/var/lib/mysql/ibdata1"
    assert shown_path("/proc/42/root", "/proc/42/root") == "/"
    assert shown_path("/proc/42/rootless/x", "/proc/42/root") == "/proc/42/rootless/x"
    assert shown_path("/srv/jail/var/lib/mysql/x", "/srv/jail") == "/srv/jail/var/lib/mysql/x"
    assert shown_path("/var/lib/mysql/x", "") == "/var/lib/mysql/x"
