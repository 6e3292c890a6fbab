"""verify pairs a file renamed in its window (MySQL ≥ 8.0.30 recycles redo files by
renaming them, and performance_schema keeps the instance's counters across the rename):
unit tests on readings shaped like the one measured on MySQL 9.7, where `#ib_redo55`
showed 6,129 writes in performance_schema, 2,791 of them from its life as
`#ib_redo55_tmp` before the window, and mysqlio counted the other 3,338. The real server's
check is tests/test_mysql.py."""

from __future__ import annotations

from mysqlio.verify.compare import compare
from mysqlio.verify.pfs import FileIo, Instance, follow_renames, snapshot_of
from mysqlio.verify.window import Reading, TracedFile, Window, by_path

REDO = "/d/#innodb_redo"
DATA = "/d/sbtest1.ibd"
EV = "wait/io/file/innodb/innodb_log_file"
BLOCK = 512


def _reading(*rows: tuple[int, str, tuple[int, int] | None, FileIo]) -> Reading:
    instances = {(address, EV): Instance(path, file, io) for address, path, file, io in rows}
    return Reading(snapshot_of(instances), None, instances)


def _writes(n: int) -> FileIo:
    return FileIo(n * BLOCK, n)


def test_a_recycled_redo_file_is_counted_from_under_its_new_name() -> None:
    start = _reading(
        (1, f"{REDO}/#ib_redo55_tmp", (8, 55), _writes(2791)),
        (2, f"{REDO}/#ib_redo54", (8, 54), _writes(100)),
        (3, DATA, (8, 7), _writes(4000)),
    )
    # the spare became #ib_redo55 and was written; #ib_redo54, consumed, became a spare
    end = _reading(
        (1, f"{REDO}/#ib_redo55", (8, 55), _writes(6129)),
        (2, f"{REDO}/#ib_redo54_tmp", (8, 54), _writes(100 + 5)),
        (3, DATA, (8, 7), _writes(4000 + 3000)),
    )
    assert follow_renames(start.files, start.instances, end.instances) == {
        f"{REDO}/#ib_redo55": _writes(2791),
        f"{REDO}/#ib_redo54_tmp": _writes(100),
        DATA: _writes(4000),
    }
    # mysqlio named #ib_redo55 by its old name (resolved before the rename), #ib_redo54 by its new one
    traced = {
        (8, 55): TracedFile(f"{REDO}/#ib_redo55_tmp", "redo", io=_writes(3338), file=(8, 55)),
        (8, 54): TracedFile(f"{REDO}/#ib_redo54_tmp", "redo", io=_writes(5), file=(8, 54)),
        (8, 7): TracedFile(DATA, "table", io=_writes(3000), file=(8, 7)),
    }
    window = Window((start, start), (end, end), by_path(traced, end), 5.0)
    rows = {r.name: r for r in compare(window, "/d", lambda _p: "other", min_bytes=0) if r.op == "write"}
    assert set(rows) == {"#innodb_redo/#ib_redo55", "#innodb_redo/#ib_redo54_tmp", "sbtest1.ibd"}
    for row in rows.values():
        assert row.agrees and row.pfs_bytes == row.mysqlio_bytes and row.pfs_ops == row.mysqlio_ops, row
        assert row.note == "", row
    assert rows["#innodb_redo/#ib_redo55"].pfs_ops == 3338


def test_a_name_reused_by_another_file_or_slot_is_no_rename() -> None:
    """Same instance and another name but another inode (the slot reused by a new file), or
    a file that could not be stat'ed: the counts stay under their own names."""
    start = _reading(
        (1, "/d/a.ibd", (8, 1), _writes(10)),
        (2, "/d/gone.ibd", None, _writes(20)),
    )
    end = _reading(
        (1, "/d/b.ibd", (8, 2), _writes(3)),
        (2, "/d/c.ibd", None, _writes(25)),
    )
    assert follow_renames(start.files, start.instances, end.instances) == start.files
    # both old names disappear from the end: not compared as a rename, their rows are dropped
    window = Window((start, start), (end, end), {}, 5.0)
    rows = {r.name: r for r in compare(window, "/d", lambda _p: "other", min_bytes=0) if r.op == "write"}
    assert rows["a.ibd"].pfs_bytes is None and "dropped its row" in rows["a.ibd"].note
    assert rows["b.ibd"].pfs_bytes == 3 * BLOCK


def test_traced_files_keep_one_row_per_inode_across_names() -> None:
    """mysqlio's side: a renamed file's intervals are one file, under the name
    performance_schema gives its inode at the end; two inodes that shared a name are added."""
    end = _reading((1, "/d/new", (8, 1), _writes(0)))
    traced = {
        (8, 1): TracedFile("/d/old", "redo", io=_writes(2), file=(8, 1)),
        (8, 2): TracedFile("/d/x", "tmp", deleted=True, io=_writes(1), file=(8, 2)),
        (8, 3): TracedFile("/d/x", "tmp", io=_writes(4), file=(8, 3)),
    }
    out = by_path(traced, end)
    assert set(out) == {"/d/new", "/d/x"}
    assert out["/d/new"].io == _writes(2)
    assert out["/d/x"].io == _writes(5) and not out["/d/x"].deleted
