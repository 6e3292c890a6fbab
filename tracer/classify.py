"""Name the kind of a file mysqld touches, and the table of a data file.

`classify(path)` uses basename rules for the file names of MySQL 5.5 - 9.7,
Percona and MariaDB 10.x / 11.x (docs/architecture.md). `Classifier(layout)`
first applies the server's own layout (`mysqlio.layout.ServerLayout`): the
configured error / slow / general log, binlog and relay-log basenames and
indexes, master_info_file and relay_log_info_file, InnoDB data and temp files,
the Percona doublewrite file, MySQL's data dictionary `<datadir>/mysql.ibd`; then
the basename rules; a file still unknown that sits directly in a tmpdir is "tmp".
The InnoDB directories add no rule: InnoDB's names in them are fixed and the
basename rules know them.

Kinds (KINDS, described in kinds.py): redo, doublewrite, system, dictionary, undo,
temp, alter, table, table_definition, binlog, binlog_index (also its companions
while binlogs are purged or the index is rewritten: `*.~rec~`, MySQL's
`*.index_crash_safe`), binlog_gtid_index (MariaDB 11.4+ `*.NNNNNN.idx`), relay_log,
relay_index, replication_info, aria, myisam, ddl_log, tc_log (`tc.log`, the
XA coordinator log), error_log, slow_log, general_log, server_log, config,
buffer_pool_dump, pid_file, tmp, other.
`mysql.ibd` is "dictionary" only in the datadir, so only with a layout that
names it: without one it is "table" (the dictionary tablespace holds the mysql.*
tables too; a table `db.mysql` is `db/mysql.ibd`). Table definitions: `.frm`,
`.par`, `.TRG` / `.TRN`, `.isl`, `db.opt`, MySQL 8's `.sdi` (non-InnoDB tables)
and `.cfg` (FLUSH TABLES ... FOR EXPORT); a `#sql*` one is a temporary or ALTER
table's, "tmp" as before. The log tables `mysql/general_log.CSV` / `.CSM` and
`mysql/slow_log.*` are general_log / slow_log.
Server logs by basename: `*.err`, `[*-]error.log` are error_log; `[*-]slow[-*].log`
slow_log; `[*-]general[-*].log` general_log (`-` or `_`); any other
`*.log` is server_log (a server log, which one is not knowable from the
name: the general log's default is `<host>.log`, RHEL's error log
`mysqld.log`). Anything else unmatched is "other": never guessed.

`Classifier.table()` names `<datadir>/<schema>/<table>.{ibd,MYD,MYI,MAD,MAI}`
as `schema.table`, undoing MySQL's file-name encoding (`@XXXX` hex code points,
`@@@` empty; its two-letter codes for accented letters, e.g. `@0G`, are kept as
written). Partitions `t#p#p0[#sp#s0]` (any case) read `schema.t (p0)` /
`schema.t (p0, s0)`, or `schema.t` with fold_partitions=True.
"""

from __future__ import annotations

import os
import re

from .kinds import KINDS as KINDS  # re-exported: the one list of kind names
from .layout import ServerLayout

# (kind, regex on the basename), first match wins
_BASENAME_RULES: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(rx))
    for kind, rx in [
        ("redo", r"^ib_logfile\d+$"),
        ("redo", r"^#ib_redo\d+(_tmp)?$"),
        ("doublewrite", r"^#ib_\d+_\d+\.b?dblwr$"),
        ("doublewrite", r"^xb_doublewrite$"),
        ("system", r"^ibdata\d+$"),
        ("undo", r"^undo_?\d{3}(\.ibu)?$"),
        ("undo", r"^.*\.ibu$"),
        ("temp", r"^ibtmp\d+$"),
        ("temp", r"^temp_\d+\.ibt$"),
        ("alter", r"^#sql-ib.*\.ibd$"),
        ("alter", r"^#sql.*\.ibd$"),
        ("table", r"^.+\.ibd$"),
        # not #sql*: a temporary or ALTER table's definition, "tmp" below
        ("table_definition", r"^(?!#sql).+\.(frm|par|TRG|TRN|isl|sdi|cfg)$"),
        ("table_definition", r"^db\.opt$"),
        ("relay_index", r"^.+-relay-bin(-.+)?\.index$"),
        ("relay_index", r"^.+-relay-bin(-.+)?\.(~rec~|index_crash_safe)$"),
        ("relay_log", r"^.+-relay-bin(-.+)?\.\d{6}$"),
        ("binlog_index", r"^.+-bin\.index$"),
        ("binlog_index", r"^binlog\.index$"),
        ("binlog_index", r"^(.+-bin|binlog)\.(~rec~|index_crash_safe)$"),
        ("binlog", r"^.+-bin\.\d{6}$"),
        ("binlog", r"^binlog\.\d{6}$"),
        ("binlog_gtid_index", r"^(.+-bin|binlog)\.\d{6}\.idx$"),
        ("replication_info", r"^(master|relay-log)(-.+)?\.info$"),
        ("replication_info", r"^multi-master\.info$"),
        ("replication_info", r"^worker-relay-log\.info\.\d+$"),
        ("aria", r"^aria_log(\.\d{8}|_control)$"),
        ("aria", r"^.+\.MA[ID]$"),
        ("myisam", r"^.+\.MY[ID]$"),
        ("ddl_log", r"^(ddl_recovery|ddl_log)\.log$"),
        ("tc_log", r"^tc\.log$"),
        ("error_log", r"^.+\.err$"),
        ("error_log", r"^(.+[-_])?error\.log$"),
        ("slow_log", r"^(.+[-_])?slow([-_].+)?\.log$"),
        ("general_log", r"^(.+[-_])?general([-_].+)?\.log$"),
        ("server_log", r"^.+\.log$"),
        ("server_log", r"^innodb_status\.\d+$"),  # innodb_status_file=ON
        ("config", r"^.+\.cnf$"),  # auto.cnf, mysqld-auto.cnf, option files
        ("config", r"^mysqld-auto\.cnf\.backup$"),  # SET PERSIST writes it first
        ("config", r"^.+\.pem$"),  # auto_generate_certs, sha256/caching_sha2 RSA keys
        ("config", r"^(mysql|mariadb)_upgrade_(info|history)$"),
        ("buffer_pool_dump", r"^ib_buffer_pool(\.incomplete)?$"),  # written as .incomplete, then renamed
        ("pid_file", r"^.+\.pid$"),
        ("pid_file", r"^.+\.sock\.lock$"),  # MySQL's lock on its socket holds its pid
        ("tmp", r"^#sql.*$"),
        ("tmp", r"^#\d+$"),
        ("tmp", r"^ML.*$"),
    ]
]

# the log tables of log_output=TABLE (CSV engine), by schema directory and basename
_LOG_TABLE = re.compile(r"(?:^|/)mysql/(general|slow)_log\.CS[VM]$")
_TABLE_FILE = re.compile(r"(.+)\.(ibd|MYD|MYI|MAD|MAI)")
_PARTITION = re.compile(r"#p#", re.IGNORECASE)
_SUBPARTITION = re.compile(r"#sp#", re.IGNORECASE)
_ENCODED = re.compile(r"@([0-9a-fA-F]{4}|@@)")
_MEMO_MAX = 1 << 18  # paths remembered (a server's files; a churn of temporary names starts it again)


def classify(path: str) -> str:
    """The kind of file at path by its basename (a log table's by its schema directory too);
    "other" when unsure."""
    log_table = _LOG_TABLE.search(path)
    if log_table:
        return f"{log_table[1]}_log"
    base = path.rsplit("/", 1)[-1]
    for kind, rx in _BASENAME_RULES:
        if rx.match(base):
            return kind
    return "other"


def decode_filename(name: str) -> str:
    """Undo MySQL's file-name encoding of a schema / table name (`@002d` -> '-')."""
    return _ENCODED.sub(lambda m: "" if m[1] == "@@" else chr(int(m[1], 16)), name)


def _candidates(name: str, dirs: list[str]) -> list[str]:
    """Absolute paths a configured InnoDB file name can stand for."""
    if os.path.isabs(name):
        return [os.path.normpath(name)]
    return [os.path.normpath(os.path.join(d, name)) for d in dirs]


class Classifier:
    """Kinds and table names of one server's files, from its layout."""

    def __init__(self, layout: ServerLayout | None = None) -> None:
        lay = layout or ServerLayout()
        self.layout = lay
        self._exact: dict[str, str] = {}
        self._rules: list[tuple[str, re.Pattern[str]]] = []
        innodb_dirs = [d for d in (lay.data_home_dir, lay.datadir) if d]
        for names, kind in ((lay.data_files, "system"), (lay.temp_data_files, "temp")):
            for name in names:
                self._exact.update(dict.fromkeys(_candidates(name, innodb_dirs), kind))
        singles = [
            (lay.doublewrite_file, "doublewrite"),
            (lay.log_bin_index, "binlog_index"),
            (lay.tc_log, "tc_log"),
            (lay.general_log, "general_log"),
            (lay.slow_log, "slow_log"),
            (lay.log_error, "error_log"),
        ]
        self._exact.update({path: kind for path, kind in singles if path})
        if lay.datadir:  # only the datadir's own: a table `mysql` of a schema is <schema>/mysql.ibd
            self._exact[os.path.join(lay.datadir, "mysql.ibd")] = "dictionary"
        for index, kind in ((lay.log_bin_index, "binlog_index"), (lay.relay_log_index, "relay_index")):
            if index:  # the purge register and the crash-safe copy of an index (the index's name, new extension)
                stem = os.path.splitext(index)[0]
                self._exact.update({stem + ".~rec~": kind, stem + ".index_crash_safe": kind})
        if lay.log_bin_basename:
            base = re.escape(lay.log_bin_basename)
            self._rules += [
                ("binlog", re.compile(rf"{base}\.\d{{6,}}")),
                ("binlog_gtid_index", re.compile(rf"{base}\.\d{{6,}}\.idx")),
                ("binlog_index", re.compile(rf"{base}\.index")),
            ]
        if lay.relay_log_basename:  # multi-source: <basename>-<channel>.NNNNNN
            base = re.escape(lay.relay_log_basename)
            self._rules += [
                ("relay_log", re.compile(rf"{base}(-[^/]+)?\.\d{{6,}}")),
                ("relay_index", re.compile(rf"{base}(-[^/]+)?\.index")),
            ]
        # a named connection's files insert -<name> before the extension (MariaDB multi-source)
        for name, kind in (
            (lay.relay_log_index, "relay_index"),
            (lay.master_info_file, "replication_info"),
            (lay.relay_log_info_file, "replication_info"),
        ):
            if name:
                stem, ext = os.path.splitext(name)
                self._rules.append((kind, re.compile(rf"{re.escape(stem)}(-[^/]+)?{re.escape(ext)}")))
        self._tmpdirs = {d for d in lay.tmpdir if d not in ("/", lay.datadir)}
        # kind and table of each path seen: top names the same files every interval, and
        # the rules cost ~50 us a path (20,000 active files: a second of CPU an interval)
        self._kinds: dict[str, str] = {}
        self._tables: dict[tuple[str, bool], str | None] = {}

    def kind(self, path: str) -> str:
        """The kind of file at path; "other" when unsure."""
        kind = self._kinds.get(path)
        if kind is None:
            if len(self._kinds) >= _MEMO_MAX:
                self._kinds.clear()
            kind = self._kinds[path] = self._kind(path)
        return kind

    def table(self, path: str, fold_partitions: bool = False) -> str | None:
        """`schema.table` of a table file under the datadir, else None."""
        key = (path, fold_partitions)
        if key not in self._tables:
            if len(self._tables) >= _MEMO_MAX:
                self._tables.clear()
            self._tables[key] = self._table(path, fold_partitions)
        return self._tables[key]

    def _kind(self, path: str) -> str:
        exact = self._exact.get(path)
        if exact:
            return exact
        for kind, rx in self._rules:
            if rx.fullmatch(path):
                return kind
        kind = classify(path)
        if kind == "other" and os.path.dirname(path) in self._tmpdirs:
            return "tmp"
        return kind

    def _table(self, path: str, fold_partitions: bool) -> str | None:
        datadir = self.layout.datadir
        schema_dir, base = os.path.split(path)
        if not datadir or os.path.dirname(schema_dir) != datadir:
            return None
        match = _TABLE_FILE.fullmatch(base)
        if not match or match[1].startswith("#sql"):
            return None
        table, *partition = _PARTITION.split(match[1], maxsplit=1)
        name = f"{decode_filename(os.path.basename(schema_dir))}.{decode_filename(table)}"
        if not partition or fold_partitions:
            return name
        parts = _SUBPARTITION.split(partition[0], maxsplit=1)
        return f"{name} ({', '.join(decode_filename(p) for p in parts)})"
