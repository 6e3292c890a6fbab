"""contrib/kubernetes: the manifests parse, the DaemonSet grants exactly the capabilities
the code needs (mysqlio.capabilities, their numbers those of the kernel's header) and
mounts what doctor's deploy checks look for.

PyYAML is no dependency: the manifests are read by `block_yaml`, a strict reader of the
block-style subset they are written in (anything else fails the test)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mysqlio import capabilities, syscall_hook
from mysqlio.container_identity import RUN
from mysqlio.doctor_deploy import RUNTIME_STATE
from mysqlio.preflight import BTF_PATH

DIR = Path(__file__).resolve().parent.parent / "contrib" / "kubernetes"
CAPABILITY_H = Path("/usr/include/linux/capability.h")  # linux-libc-dev, as libbpf-dev needs
_KEY = re.compile(r"([A-Za-z0-9_./-]+):(?: (.*))?$")


def _scalar(text: str) -> Any:
    if text.startswith(("[", "{", '"')):
        return json.loads(text)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return {"true": True, "false": False}.get(text, text)


def block_yaml(text: str) -> list[Any]:
    """The documents of a block-style YAML file: mappings, `- ` sequences, plain or JSON
    scalars; comments and `---` separators."""
    docs: list[list[tuple[int, str]]] = [[]]
    for raw in text.splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line == "---":
            docs.append([])
        elif line:
            docs[-1].append((len(line) - len(line.lstrip()), line.strip()))

    def node(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
        if lines[i][1].startswith("- "):
            seq = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                rest = lines[i][1][2:]
                if _KEY.match(rest):  # a mapping item: its first key on the dash's line
                    sub = [(indent + 2, rest), *lines[i + 1 :]]
                    value, used = node(sub, 0, indent + 2)
                    i += used
                else:
                    value, i = _scalar(rest), i + 1
                seq.append(value)
            return seq, i
        out: dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            m = _KEY.match(lines[i][1])
            assert m, f"not block YAML: {lines[i][1]!r}"
            if m[2] is not None:
                out[m[1]], i = _scalar(m[2]), i + 1
            else:
                assert i + 1 < len(lines) and lines[i + 1][0] >= indent, lines[i]
                child = lines[i + 1][0]
                out[m[1]], i = node(lines, i + 1, child)
        assert i == len(lines) or lines[i][0] < indent, f"bad indentation: {lines[i]}"
        return out, i

    found = []
    for doc in docs:
        if doc:
            value, used = node(doc, 0, doc[0][0])
            assert used == len(doc), f"unread from: {doc[used]}"
            found.append(value)
    return found


def _manifests() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for f in sorted(DIR.glob("*.yaml")) for d in block_yaml(f.read_text())}


def test_block_yaml_reads_what_it_should() -> None:
    text = 'a: 1\nb:\n  - x\n  - name: n\n    v: [1, "2"]\n  - y\nc:\n  d: true\n---\n# only\ne: f\n'
    assert block_yaml(text) == [{"a": 1, "b": ["x", {"name": "n", "v": [1, "2"]}, "y"], "c": {"d": True}}, {"e": "f"}]


def test_manifests_parse() -> None:
    found = _manifests()
    assert set(found) == {"Namespace", "DaemonSet", "Service", "ServiceMonitor"}
    ds, service, monitor = found["DaemonSet"], found["Service"], found["ServiceMonitor"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert ds["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


def test_daemonset_grants_what_the_code_needs() -> None:
    spec = _manifests()["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["hostPID"] is True  # doctor_deploy.check_host_pid
    (container,) = spec["containers"]
    assert container["command"][:3] == ["mysqlio", "exporter", "--all"]
    caps = container["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"]
    assert caps["add"] == [c.name for c in capabilities.NEEDED]
    # each number the kernel's own
    header = dict(re.findall(r"#define CAP_(\w+)\s+(\d+)", CAPABILITY_H.read_text()))
    assert {c.name: c.number for c in capabilities.NEEDED} == {c.name: int(header[c.name]) for c in capabilities.NEEDED}
    # mounted where the code reads: tracefs (libbpf's second place, the first being under
    # debugfs), the BTF, the runtimes' state; each read-only, each a hostPath of the same path
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    wanted = {syscall_hook.TRACEFS, str(Path(BTF_PATH).parent), *(f"{RUN}/{d}" for d in RUNTIME_STATE)}
    assert set(mounts) == wanted
    assert all(m["readOnly"] is True and volumes[m["name"]] == path for path, m in mounts.items())
