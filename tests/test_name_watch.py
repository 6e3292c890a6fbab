"""A checked name stays trusted (no stat) until inotify says something touched it: renamed
away, unlinked, replaced by a rename onto it, or a directory on its path renamed (issue 60)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mysqlio import resolve
from mysqlio.name_watch import NameWatch
from mysqlio.probe import FileIdentity
from mysqlio.resolve import FileResolver


def _identity(path: Path) -> FileIdentity:
    st = os.stat(path)
    return FileIdentity(st.st_dev, st.st_ino)


def _checked(tmp_path: Path) -> tuple[NameWatch, Path, FileIdentity]:
    path = tmp_path / "db" / "t1.ibd"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x")
    names = NameWatch()
    assert names.watch(str(path))
    names.checked(str(path), _identity(path))
    return names, path, _identity(path)


def test_an_untouched_name_stays_fresh_beside_other_changes(tmp_path: Path) -> None:
    names, path, file = _checked(tmp_path)
    (path.parent / "other.ibd").write_bytes(b"y")
    os.rename(path.parent / "other.ibd", path.parent / "other2.ibd")
    os.unlink(path.parent / "other2.ibd")
    names.poll()
    assert names.fresh(str(path), file)
    assert not names.fresh(str(path), FileIdentity(file.dev, file.ino + 1))  # another file: no
    names.close()


def _rename_away(path: Path) -> None:
    os.rename(path, path.with_name("t2.ibd"))


def _replace(path: Path) -> None:
    other = path.with_name("new.ibd")
    other.write_bytes(b"n")
    os.rename(other, path)


def _rename_parent(path: Path) -> None:
    os.rename(path.parent, path.parent.with_name("db2"))


def _rename_grandparent(path: Path) -> None:
    top = path.parent.parent
    os.rename(top, top.with_name(top.name + "-moved"))


@pytest.mark.parametrize(
    "change", [_rename_away, os.unlink, _replace, _rename_parent, _rename_grandparent], ids=lambda f: f.__name__
)
def test_a_touched_name_is_checked_again(tmp_path: Path, change: Callable[[Path], None]) -> None:
    names, path, file = _checked(tmp_path / "top")
    change(path)
    assert names.fresh(str(path), file)  # the events are read at the next poll (an interval's)
    names.poll()
    assert not names.fresh(str(path), file)
    names.close()


def test_an_unwatchable_directory_is_said(tmp_path: Path) -> None:
    names = NameWatch()
    assert not names.watch(str(tmp_path / "missing" / "t.ibd"))
    names.close()


def test_the_resolver_stats_an_open_files_name_once_until_it_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stats: list[str] = []
    real = resolve._is_same_file

    def counted(path: str, file: FileIdentity) -> bool:
        stats.append(path)
        return real(path, file)

    monkeypatch.setattr(resolve, "_is_same_file", counted)
    spare, live = tmp_path / "#ib_redo7_tmp", tmp_path / "#ib_redo7"
    spare.write_bytes(b"r")
    file = _identity(spare)
    fd = os.open(spare, os.O_RDONLY)
    try:
        resolver = FileResolver(os.getpid(), lambda _: None)
        for _ in range(5):
            assert resolver.resolve(file).path == str(spare)
            resolver.new_interval()
        assert stats == [str(spare)]  # once, then trusted
        os.rename(spare, live)
        resolver.new_interval()
        got = resolver.resolve(file)
        assert (got.path, got.deleted, got.source) == (str(live), False, "fd")
        resolver.new_interval()
        assert resolver.resolve(file).path == str(live)
        resolver.new_interval()
        assert resolver.resolve(file).path == str(live)
        assert stats == [str(spare), str(spare), str(live)]
    finally:
        os.close(fd)
