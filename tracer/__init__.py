"""mysqlio: per-file write, read and sync accounting for MySQL / MariaDB servers."""

__version__ = "0.1.0"
