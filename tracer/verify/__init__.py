"""`mysqlio verify`: our per-file bytes against the server's own performance_schema.

Over a window of `-d` seconds, mysqlio traces the server while
performance_schema.file_summary_by_instance is read at both edges; per file
and direction the two byte counts are compared. Each edge reads
performance_schema twice, just before and just after mysqlio's drain, so what
the server did between those two reads is the edge's uncertainty: the
performance_schema figure printed is the middle of the range between the inner
window (after the first drain .. before the last) and the outer one (before ..
after), and `±` half its width. A file agrees when the difference minus that allowance is
within TOLERANCE of performance_schema's figure; only files with more than
MIN_BYTES in the window are judged.

performance_schema names files as the server sees them: relative names are
joined with the server's own datadir, and a server in its own root (chroot,
container) has its names resolved inside that root and given as the paths here
that mysqlio reports (`server_paths`, the mapping mysqlio.layout uses).

Known reasons for small differences, printed with the result:
- requests in flight at an edge: InnoDB's asynchronous writes count in
  performance_schema when submitted; mysqlio counts io_uring requests when they
  complete (libaio ones when submitted), so a page-cleaner batch in flight at one
  edge lands on different sides of it;
- performance_schema only knows instrumented files: MariaDB 10.11 and 11.8 do not
  instrument the redo log (10.5 does); when mysqlio sees it written, it is shown
  next to Innodb_os_log_written for reference; files past
  performance_schema_max_file_instances are lost (Performance_schema_file_instances_lost,
  which MariaDB also counts with room to spare: mysqlio.verify.lost reads it);
- a file deleted during the window loses its performance_schema row.

A file the server writes through a shared memory mapping (MariaDB 11.8's redo
log, innodb_log_file_mmap; see mysqlio.mapped_files) is never judged: no system
call carries its writes, so mysqlio cannot count them. verify names it, in the
text, the JSON ("mapped", "mapped_note") and the verdict, and claims neither
agreement nor difference for it.

When the server is idle at both edges the comparison is exact (tests/test_verify.py).
"""
