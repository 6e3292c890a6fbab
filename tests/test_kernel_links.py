"""tools/kernels.py's /lib/modules links: a link another kernels directory of ours made is
re-pointed (CI's isolated caches beside a developer's), anything else is left alone."""

from __future__ import annotations

import os
from pathlib import Path

import kernels
import pytest


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    mine = tmp_path / "mine"
    other = tmp_path / "other"
    monkeypatch.setattr(kernels, "KERNELS_DIR", mine)
    monkeypatch.setattr(kernels, "CACHE_DIR", tmp_path / "cache")
    return mine, other


def _tree(base: Path, release: str, usr: bool = False) -> Path:
    modules = base / release / ("usr/lib" if usr else "lib") / "modules" / release
    modules.mkdir(parents=True)
    return modules


@pytest.mark.parametrize("usr", [False, True])
def test_link_of_another_kernels_dir_is_repointed(dirs: tuple[Path, Path], tmp_path: Path, usr: bool) -> None:
    mine, other = dirs
    release = "6.1.0-50-amd64"
    stale = _tree(other, release, usr)
    fresh = _tree(mine, release, usr)
    link = tmp_path / "host" / release
    link.parent.mkdir()
    link.symlink_to(stale)
    kernels._link(link, fresh)
    assert Path(os.readlink(link)) == fresh


def test_foreign_link_is_kept(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    mine, _ = dirs
    release = "6.1.0-50-amd64"
    foreign = tmp_path / "usr/src/linux-headers-6.1.0-50-amd64"
    foreign.mkdir(parents=True)
    link = tmp_path / "host" / release
    link.parent.mkdir()
    link.symlink_to(foreign)
    kernels._link(link, _tree(mine, release))
    assert Path(os.readlink(link)) == foreign


@pytest.mark.parametrize(
    ("target", "made_by_us"),
    [
        ("/srv/k/5.10.0-32-amd64/lib/modules/5.10.0-32-amd64", True),
        ("/srv/k/7.2.13+deb14-amd64/usr/lib/modules/7.2.13+deb14-amd64", True),
        ("/srv/k/6.1/lib/modules/6.2", False),
        ("/usr/src/linux-headers-6.1.0-57-amd64", False),
    ],
)
def test_made_by_us(target: str, made_by_us: bool) -> None:
    assert kernels._made_by_us(Path(target)) is made_by_us
