"""A file's JSON (FileActivity.to_json, as `json.dumps(..., separators=(",", ":"))` writes
it) spelt out from its attributes, without the dicts (issue 60): making each file's and
thread's dicts and encoding them cost ~7 us a file, a fifth of top's CPU at 19,000
active files. The same bytes: checked at import on a file with every part (threads,
latency, page-cache causes, a server view); where they differ (a field added to to_json
and not here), `FAST` is False and output.py dumps the dicts as before."""

from __future__ import annotations

import json
import operator
from json.encoder import encode_basestring_ascii as _str  # what json.dumps uses (ensure_ascii)
from typing import Any

from .model import WRITEBACK_CAUSES, Counts, FileActivity, ThreadActivity, _busiest
from .probe import dev_label

_dumps = json.JSONEncoder(separators=(",", ":")).encode
_KEYS = list(Counts().counters_json())  # counters_json's keys, in its order
# every key but writeback_by (the one dict, spelt by _wb) an attribute of Counts (sync_ops a property)
_NUMBERS = operator.attrgetter(*(k for k in _KEYS if k != "writeback_by"))
_COUNTERS = ",".join('"writeback_by":%s' if k == "writeback_by" else f'"{k}":%d' for k in _KEYS)
_WB_AT = _KEYS.index("writeback_by") if "writeback_by" in _KEYS else len(_KEYS)
# the text of counters already written, by their values: many files and threads of an
# interval hold the same counters (one page written, the rest 0); emptied when full
_SPELT: dict[tuple[Any, ...], str] = {}
_SPELT_MOST = 4096  # ~2 MiB of text at most
_APIS: dict[frozenset[str], str] = {}


def _wb(by: dict[str, int]) -> str:
    return "{" + ",".join(f'"{c}":{by[c]}' for c in WRITEBACK_CAUSES if c in by) + "}"


def _counters(c: Counts) -> str:
    values = _NUMBERS(c)
    if c.writeback_by:
        values = (*values[:_WB_AT], _wb(c.writeback_by), *values[_WB_AT:])
        return _COUNTERS % values
    text = _SPELT.get(values)
    if text is None:
        if len(_SPELT) >= _SPELT_MOST:
            _SPELT.clear()
        text = _SPELT[values] = _COUNTERS % (*values[:_WB_AT], "{}", *values[_WB_AT:])
    return text


def _apis(apis: set[str]) -> str:
    key = frozenset(apis)
    text = _APIS.get(key)
    if text is None:  # a few sets of APIs at most
        text = _APIS[key] = "[" + ",".join(_str(a) for a in sorted(apis)) + "]"
    return text


def thread_json(t: ThreadActivity) -> str:
    if t.server is not None:  # --mysql: its view's fields too
        return _dumps(t.to_json())
    return f'{{"tid":{t.tid},"name":{_str(t.name)},{_counters(t)},"apis":{_apis(t.apis)}}}'


def file_json(f: FileActivity) -> str:
    """f.to_json() as JSON text."""
    threads = f.threads.values() if len(f.threads) < 2 else sorted(f.threads.values(), key=_busiest)
    return (
        f'{{"path":{_str(f.path)},"kind":{_str(f.kind)},"table":{"null" if f.table is None else _str(f.table)},'
        f'"deleted":{"true" if f.deleted else "false"},"region":{_str(f.region)},"dev":"{dev_label(f.file.dev)}",'
        f'"ino":{f.file.ino},{_counters(f)},"apis":{_apis(f.apis)},'
        f'"latency":{_dumps(f.latency_json()) if f.latency else "{}"},'
        f'"threads":[{",".join(thread_json(t) for t in threads)}]}}'
    )


def _same_bytes() -> bool:
    """Whether file_json writes what json.dumps of to_json does, on a file with every part."""
    from .latency import Histogram
    from .probe import FileIdentity

    f = FileActivity(file=FileIdentity(2049, 7), path='/d/"é"\n.ibd', kind="table", table="d.t", region="system")
    f.deleted = True
    for k, name in enumerate(Counts.__dataclass_fields__):
        if name not in ("writeback_by", "apis"):
            setattr(f, name, k + 1)
    f.writeback_by = {WRITEBACK_CAUSES[-1]: 5, WRITEBACK_CAUSES[0]: 3}
    f.apis = {"syscall", "libaio"}
    hist = Histogram(sum_ns=3000, max_ns=2000)
    hist.counts[len(hist.counts) // 2] = 2
    f.latency = {"write": hist}
    for tid in (1, 2):
        t = f.threads[(tid, 0)] = ThreadActivity(tid=tid, name="t\u00e9", write_bytes=tid)
        t.apis = {"io_uring"}
    f.threads[(3, 9)] = ThreadActivity(tid=3, name="s", conn=9, server=_View())
    plain = FileActivity(file=FileIdentity(1, 1), path="p", kind="other")
    return all(file_json(x) == _dumps(x.to_json()) for x in (f, plain))


class _View:
    """A thread's server view (thread_attribution.ThreadView) as to_json sees it."""

    def to_json(self) -> dict[str, Any]:
        return {"user": "u", "query": None}


try:
    FAST = _same_bytes()
except (AttributeError, TypeError, ValueError):  # a key of counters_json that is no attribute
    FAST = False
