"""A throwaway MariaDB (the host's mariadbd) whose datadir is an overlayfs, as in a
container whose image holds a bootstrapped datadir.

mariadb-install-db runs once into a plain directory, which then becomes the overlay's
lower layer (`layers/lower`); `layers/upper` and `layers/work` are beside it, on the same
filesystem as overlayfs requires. The server starts in a mount namespace of its own
(`unshare --mount`, as a container runtime does) where the overlay is mounted at the
datadir's place (`data`, an empty directory here): only the server sees the merged view,
and the mount goes away with it. unshare execs (no --fork), so `pid` is mariadbd.

A lower file is copied up to the upper layer (a new inode) when the server first opens it
for writing: ibdata1, the redo log, the Aria logs and the system tables it opens at start
(10.11 opens every InnoDB tablespace then, bootstrap_sql's too); a MyISAM or Aria table
when a statement first opens it (always for writing, even to read). New files (the
binlog, a table made by CREATE TABLE) are made in the upper layer.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from .mariadb import MariaDB, MariaDBOptions
from .processes import find_binary


class OverlayMariaDB(MariaDB):
    """MariaDB with `datadir` an overlay (lower: the bootstrapped datadir) mounted in the
    server's mount namespace only. `lower`, `upper`, `work`: the layers' directories here."""

    def __init__(self, options: MariaDBOptions | None = None, bootstrap_sql: str = "") -> None:
        super().__init__(options)
        self.bootstrap_sql = bootstrap_sql  # run by mariadb-install-db: its files are in the lower layer
        self.lower = self.upper = self.work = ""
        self._bootstrapped = False

    def _install_db(self, server: str, deadline: float) -> None:
        super()._install_db(server, deadline)
        layers = os.path.join(self.base_dir, "layers")
        self.lower, self.upper, self.work = (os.path.join(layers, d) for d in ("lower", "upper", "work"))
        os.mkdir(layers)
        os.rename(self.datadir, self.lower)
        for directory in (self.upper, self.work, self.datadir):
            os.mkdir(directory)
        self._bootstrapped = True

    def _command(self, argv: list[str]) -> list[str]:
        if not self._bootstrapped:  # mariadb-install-db: into the plain directory, the future lower layer
            if not self.bootstrap_sql:
                return argv
            extra = os.path.join(self.base_dir, "bootstrap.sql")
            Path(extra).write_text(self.bootstrap_sql)
            return [*argv, f"--extra-file={extra}"]
        options = f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work}"
        mount = shlex.join([find_binary("mount"), "-t", "overlay", "overlay", "-o", options, self.datadir])
        return [
            find_binary("unshare"),
            "--mount",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            f'{mount} || exit 125; exec "$@"',
            "sh",
            *argv,
        ]
