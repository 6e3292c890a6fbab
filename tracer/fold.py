"""An interval's drained rows (a stats_cells.ROW array) folded into one FileActivity per file
with numpy (issue 60): each file's and each of its threads' counters are summed as columns,
and one object is made per file and per thread at the end, where model.aggregate adds
OpCount rows one at a time (~10 us a row: a third of top's CPU at 19,000 active files).
The same files, counters, threads and order as model.aggregate's, which still folds the
rows of probes that drain no array (SystemTap)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .abi import Api, By, Op, Region
from .classify import Classifier
from .events import API_NAMES
from .ibdata_regions import region_name
from .model import COUNTER_FIELDS, Counts, FileActivity, ThreadActivity, aggregate
from .probe import FileIdentity, LatencyRow, OpCount, dev_from_kernel
from .resolve import FileResolver, ResolvedPath

_N_BY = max(By) + 1
_N_API = max(Api) + 1
_COUNTS = ("bytes", "ops", "errors")
# COUNTER_FIELDS as Counts holds them: attributes, and the wb_* ones in writeback_by
_PLAIN = [(k, name) for k, name in enumerate(COUNTER_FIELDS) if not name.startswith("wb_")]
_CAUSES = [(k, name[3:-6]) for k, name in enumerate(COUNTER_FIELDS) if name.startswith("wb_")]


# the sums' columns: the attributes' first, then the causes'
_COLUMNS = [k for k, _ in _PLAIN] + [k for k, _ in _CAUSES]
_NAMES = tuple(name for _, name in _PLAIN)
_N_PLAIN = len(_NAMES)
_CAUSE_NAMES = tuple(cause for _, cause in _CAUSES)


def _with_counts(counts: Counts, sums: list[int]) -> Counts:
    """counts (just made: zero) holding the sums of COUNTER_FIELDS in _COLUMNS' order; set in
    its __dict__ (a dataclass's attributes): ~20 keyword arguments cost 3 us a file"""
    held = counts.__dict__
    held.update(zip(_NAMES, sums, strict=False))  # the causes follow
    if any(sums[_N_PLAIN:]):
        held["writeback_by"] = {cause: n for cause, n in zip(_CAUSE_NAMES, sums[_N_PLAIN:], strict=True) if n}
    return counts


def _learn() -> tuple[np.ndarray, np.ndarray, bool]:
    """What a row of each (op, by) adds to each counter per byte, per request and per error,
    and whether its requests name its API: asked of Counts.add, the one place that says it,
    so a counter or an op added there flows through here. Exact: False when Counts.add
    changes more than COUNTER_FIELDS and apis (fold then leaves the rows to aggregate)."""
    weights = np.zeros((len(_COUNTS), (max(Op) + 1) * _N_BY, len(COUNTER_FIELDS)), np.int64)
    names_api = np.zeros((max(Op) + 1) * _N_BY, bool)
    exact = True
    for op in Op:
        for by in By:
            at = op * _N_BY + by
            for k in range(len(_COUNTS)):
                unit = [int(k == j) for j in range(len(_COUNTS))]
                got = Counts()
                try:
                    got.add(OpCount(FileIdentity(0, 0), 0, op, Api.SYSCALL, *unit, by=by))
                except KeyError:  # an op no counter takes: aggregate would stop on its row too
                    break
                weights[k, at] = [got.counter(name) for name in COUNTER_FIELDS]
                names_api[at] |= bool(got.apis)
                rebuilt = _with_counts(Counts(), weights[k, at, _COLUMNS].tolist())
                rebuilt.apis = got.apis
                exact &= rebuilt == got
    return weights[:, :, _COLUMNS], names_api, exact


_WEIGHTS, _NAMES_API, EXACT = _learn()


def _groups(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by equal values of `cols`: each group's first row, groups in the order
    of their first rows, and each row's group."""
    order = np.lexsort(cols[::-1])  # stable: a group's first row in this order is its earliest
    new = np.zeros(len(order), bool)
    new[:1] = True
    for col in cols:
        s = col[order]
        new[1:] |= s[1:] != s[:-1]
    first = order[new]
    appear = np.argsort(first, kind="stable")
    rank = np.empty_like(appear)
    rank[appear] = np.arange(len(appear))
    group = np.empty(len(order), np.int64)
    group[order] = rank[np.cumsum(new) - 1]
    return first[appear], group


def _sums(amounts: list[np.ndarray], kind: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """COUNTER_FIELDS' sums (in _COLUMNS' order) of each group (0..n-1, every group with
    rows): each amount summed by group and by the (op, by) kinds present, then weighed (a
    row x counter matrix would take 200 bytes a row, 13 MiB at 64,000 cells)."""
    out = np.zeros((n, len(COUNTER_FIELDS)), np.int64)
    if not n:
        return out
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(n))
    for k, amount in enumerate(amounts):
        for present in np.unique(kind).tolist():
            columns = np.flatnonzero(_WEIGHTS[k, present])
            if len(columns):
                by_group = np.add.reduceat(np.where(kind == present, amount, 0)[order], starts)
                out[:, columns] += by_group[:, None] * _WEIGHTS[k, present, columns]
    return out


# the APIs of each mask of (1 << api) bits
_API_SETS = [frozenset(name for a, name in enumerate(API_NAMES) if mask >> a & 1) for mask in range(1 << _N_API)]


def _apis(named: np.ndarray, api: np.ndarray, group: np.ndarray, n: int) -> list[set[str]]:
    """The APIs named by each group's requests (a set each: Counts.merge adds to it)."""
    masks = np.zeros(n, np.int64)
    np.bitwise_or.at(masks, group[named], 1 << api[named])
    return [set(_API_SETS[m]) for m in masks.tolist()]


class Memo:
    """What fold keeps from one interval to the next (a sampler's): each (dev, ino)'s
    FileIdentity, and a file's shown name, kind and table while the resolver names it by
    the same ResolvedPath (it checks the name every interval; the classifier's answer for
    a path never changes). Emptied when it holds more than MOST of either."""

    MOST = 1 << 17

    def __init__(self) -> None:
        self.files: dict[tuple[int, int], FileIdentity] = {}
        # by (id(resolved), region, fold_partitions): (that resolved, a FileActivity's keywords
        # from `path` to `region`: its path as shown, kind, table, deleted, region name)
        self.names: dict[tuple[int, int, bool], tuple[ResolvedPath, dict[str, Any]]] = {}

    def file(self, kdev: int, ino: int) -> FileIdentity:
        file = self.files.get((kdev, ino))
        if file is None:
            file = self.files[(kdev, ino)] = FileIdentity(dev_from_kernel(kdev), ino)
        return file

    def trim(self) -> None:
        for held in (self.files, self.names):
            if len(held) > self.MOST:
                held.clear()


def fold(
    table: np.ndarray,
    resolver: FileResolver,
    classifier: Classifier,
    thread_name: Callable[[int], str],
    fold_partitions: bool = False,
    latencies: list[LatencyRow] | None = None,
    fold_regions: bool = False,
    memo: Memo | None = None,
) -> list[FileActivity]:
    """model.aggregate of the rows of `table`."""
    memo = memo if memo is not None else Memo()
    memo.trim()
    if not EXACT:
        rows = [OpCount(*_op_count(r)) for r in table.tolist()]
        return aggregate(rows, resolver, classifier, thread_name, fold_partitions, latencies, fold_regions)
    ino = table["ino"].astype(np.uint64)
    dev = table["dev"].astype(np.uint64)
    first, kernel_file = _groups(dev, ino)
    files = [memo.file(d, i) for d, i in zip(dev[first].tolist(), ino[first].tolist(), strict=True)]
    # a file on overlayfs: its page-cache rows (upper inode) joined to its requests' (overlay inode)
    joined = resolver.join_overlays(files)
    index: dict[FileIdentity, int] = {}
    if joined:
        files = [joined.get(f, f) for f in files]
        file_of = np.array([index.setdefault(f, len(index)) for f in files], np.int64)[kernel_file]
        distinct = list(index)
    else:  # distinct (dev, ino): distinct files already (`index` made below if latencies ask)
        file_of, distinct = kernel_file, files
    region = np.zeros(len(table), np.int64) if fold_regions else table["region"].astype(np.int64)
    kind = table["op"].astype(np.int64) * _N_BY + table["by"].astype(np.int64)
    amounts = [table[c].astype(np.int64) for c in _COUNTS]
    named = (amounts[1] > 0) & _NAMES_API[kind]
    api = table["api"].astype(np.int64)

    first, in_file = _groups(file_of, region)
    # by (the file's index in `distinct`, its region): ints hash faster than FileIdentity
    by_file: dict[tuple[int, int], FileActivity] = {}

    def activity_of(f: int, at: int = Region.NONE, counted: list[Any] | None = None) -> FileActivity:
        activity = by_file.get((f, at))
        if activity is not None:
            return activity
        file = distinct[f]
        resolved = resolver.resolve(file)
        known = memo.names.get((id(resolved), at, fold_partitions))
        if known is None or known[0] is not resolved:  # (the id of an object held there is its own)
            known = memo.names[(id(resolved), at, fold_partitions)] = (
                resolved,
                {
                    "path": resolver.shown(resolved.path),  # classified by its path here, as the layout's
                    "kind": classifier.kind(resolved.path),
                    "table": classifier.table(resolved.path, fold_partitions),
                    "deleted": resolved.deleted,
                    "region": region_name(at),
                },
            )
        # the counters positional, in one call (issue 60): keywords, then the counters written
        # into the object, cost ~1.4 us more an object; a __dict__ made whole and set was no
        # faster and ~600 bytes bigger (a dict of its own, not sharing the class's keys)
        activity = by_file[(f, at)] = FileActivity(
            *(counted if counted is not None else _counted((_NONE, None), set())), file=file, **known[1]
        )
        return activity

    n_files = len(first)
    sums, apis = _sums(amounts, kind, in_file, n_files), _apis(named, api, in_file, n_files)
    # (the sums as lists at once: a tolist() a file cost more)
    activities = [
        activity_of(f, r, _counted(counted, used))
        for f, r, counted, used in zip(file_of[first].tolist(), region[first].tolist(), _rows(sums), apis, strict=True)
    ]
    busiest = [sums[:, _WRITE], sums[:, _READ], sums[:, _SYNCS].sum(axis=1)]

    tid, conn = table["tid"].astype(np.int64), table["conn"].astype(np.uint64)
    first, in_thread = _groups(in_file, tid, conn.view(np.int64))
    sums, apis = _sums(amounts, kind, in_thread, len(first)), _apis(named, api, in_thread, len(first))
    names: dict[int, str] = {}  # one name asked a thread
    for g, who, on, counted, used in zip(
        in_file[first].tolist(), tid[first].tolist(), conn[first].tolist(), _rows(sums), apis, strict=True
    ):
        name = names.get(who)
        if name is None:
            name = names[who] = thread_name(who)
        activities[g].threads[(who, on)] = ThreadActivity(*_counted(counted, used), tid=who, name=name, conn=on)
    # latencies are per file: a file split by region has them on its first region's row
    first_of = {file: activity for (file, _), activity in reversed(by_file.items())}
    if latencies and not index:
        index = {f: at for at, f in enumerate(distinct)}
        distinct = list(distinct)  # (files with latencies only are added to it)
    for lat in latencies or ():
        if lat.file not in index:
            distinct.append(lat.file)
            index[lat.file] = len(distinct) - 1
        (first_of.get(index[lat.file]) or activity_of(index[lat.file])).add_latency(lat)
    # sorted by model._busiest, then path (stable: ties in the order made), in numpy
    made = list(by_file.values())
    extra = len(made) - n_files  # files with latencies only: no counts
    keys = [np.concatenate([k, np.zeros(extra, np.int64)]) for k in busiest]
    paths = [a.path for a in made]
    by_path = np.empty(len(made), np.int64)
    by_path[sorted(range(len(made)), key=paths.__getitem__)] = np.arange(len(made))
    order = np.lexsort((by_path, -keys[2], -keys[1], -keys[0]))
    return [made[k] for k in order.tolist()]


_NONE = [0] * _N_PLAIN
# the columns of the sums _busiest reads (sync_ops: the sum of four)
_WRITE, _READ = _NAMES.index("write_bytes"), _NAMES.index("read_bytes")
_SYNCS = [_NAMES.index(n) for n in ("fsync_ops", "fdatasync_ops", "sync_file_range_ops", "msync_ops")]
# Counts' fields, which fold passes by position: its counters in _NAMES' order, writeback_by
# after writeback_bytes, apis last (else the rows are left to aggregate)
_WB_AT = _NAMES.index("writeback_bytes") + 1
EXACT &= list(Counts.__dataclass_fields__) == [*_NAMES[:_WB_AT], "writeback_by", *_NAMES[_WB_AT:], "apis"]


def _rows(sums: np.ndarray) -> Iterator[tuple[list[int], dict[str, int] | None]]:
    """Each group's counters (a list, _NAMES' order) and its writeback by cause (None: none)."""
    plain = sums[:, :_N_PLAIN].tolist()
    causes = sums[:, _N_PLAIN:]
    some = causes.any(axis=1)
    by: list[dict[str, int] | None] = [None] * len(plain)
    for at in np.flatnonzero(some).tolist():
        by[at] = {cause: n for cause, n in zip(_CAUSE_NAMES, causes[at].tolist(), strict=True) if n}
    return zip(plain, by, strict=True)


def _counted(counted: tuple[list[int], dict[str, int] | None], apis: set[str]) -> list[Any]:
    """Counts' fields in order (its positional arguments) holding these counters and APIs."""
    plain, by = counted
    return [*plain[:_WB_AT], by if by is not None else {}, *plain[_WB_AT:], apis]


def _op_count(row: tuple[int, ...]) -> tuple[object, ...]:
    """OpCount's fields of a ROW row (ino, dev, tid, op, api, by, region, conn, bytes, ops, errors)."""
    ino, dev, tid, op, api, by, region, conn, nbytes, ops, errors = row
    return (
        FileIdentity.from_kernel(dev, ino),
        tid,
        Op(op),
        Api(api),
        nbytes,
        ops,
        errors,
        By(by),
        Region(region),
        conn,
    )
