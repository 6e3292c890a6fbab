"""Files that are one series: MySQL's redo directory.

MySQL >= 8.0.30 keeps its redo log in 32 files of `#innodb_redo/` and moves on to the next
one every few seconds under load, renaming them as it goes (`#ib_redoN_tmp` -> `#ib_redoN`
-> back to a spare). A train of the redo log's syncs (once a second with
innodb_flush_log_at_trx_commit=2) therefore falls on many short-lived files, each with a
few of its beats: the detector takes the directory's files as one series (`report` and
`top`), and the live screen shows them as one row (view.py), both by `redo_dir`."""

from __future__ import annotations

import os

REDO_DIR = "#innodb_redo"
# the key of a folded series or row, before its directory: no file's path nor "dev:ino" key
FOLDED_KEY = "folded:"


def redo_dir(path: str, kind: str) -> str | None:
    """The redo directory (MySQL's #innodb_redo) a file of the redo log is in, else None."""
    if kind != "redo":  # (first: the live tracker asks for every file of every interval)
        return None
    directory = os.path.dirname(path)
    return directory if os.path.basename(directory) == REDO_DIR else None


def folded_label(name: str, files: int) -> str:
    """A folded series or row by its name and the files in it: "#innodb_redo (5 files)"."""
    return f"{name} ({files} file{'s' * (files != 1)})"
