"""Test and demo fixtures, outside the runtime: a throwaway MariaDB (mariadb, rooted_mariadb),
sysbench load and a periodic bulk writer against it, and `mysqlio demo`, which runs them
under `top`. The commands that trace a server never import this package; only the demo
command, the tests and tools/ do."""
