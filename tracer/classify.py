"""Name the kind of a file mysqld touches from its path (first cut).

Patterns follow the file names of MySQL 5.5 - 8.4 and MariaDB 10.x / 11.x
(see docs/architecture.md). Anything not matched is "other": never guessed.
"""

from __future__ import annotations

import re

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
        ("relay_index", r"^.+-relay-bin(-.+)?\.index$"),
        ("relay_log", r"^.+-relay-bin(-.+)?\.\d{6}$"),
        ("binlog_index", r"^.+-bin\.index$"),
        ("binlog_index", r"^binlog\.index$"),
        ("binlog", r"^.+-bin\.\d{6}$"),
        ("binlog", r"^binlog\.\d{6}$"),
        ("replication_info", r"^(master|relay-log|multi-master)\.info$"),
        ("aria", r"^aria_log(\.\d{8}|_control)$"),
        ("aria", r"^.+\.MA[ID]$"),
        ("myisam", r"^.+\.MY[ID]$"),
        ("ddl_log", r"^(ddl_recovery|ddl_log)\.log$"),
        ("server_log", r"^.+\.(err|log)$"),
        ("tmp", r"^#sql.*$"),
        ("tmp", r"^#\d+$"),
        ("tmp", r"^ML.*$"),
    ]
]


def classify(path: str) -> str:
    """The kind of file at path; "other" when unsure."""
    base = path.rsplit("/", 1)[-1]
    for kind, rx in _BASENAME_RULES:
        if rx.match(base):
            return kind
    return "other"
