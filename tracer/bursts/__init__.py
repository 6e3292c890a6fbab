"""Periodic bursts: "every 10 s, ibdata1 takes about 80 writes of 1 MiB", "ibdata1:
80 MiB written back every 10.0 s by fsync".

Pure functions on per-file series (no BPF): `detect()` finds trains of bursts
in whole series (a recorded trace: `trains_from_trace`, `SeriesBuilder`),
`BurstTracker` does it one interval at a time for the live screen of `top`,
and `explain()` names the cause from the periodic InnoDB behaviour documented
in mysql-io-paths.md (5.5 master thread's 1 s / 10 s loops, 5.6/5.7 checkpoint
every 7 s, innodb_flush_log_at_trx_commit=2's once-a-second redo sync, Aria's
30 s checkpoint) and the kernel flusher's timers (vm.dirty_writeback_centisecs,
vm.dirty_expire_centisecs), and says "unknown" for any other period.

The algorithm, per file and metric (write bytes, syncs, or bytes written back from
the page cache to the device: the disk's spike, which a sync or the flusher makes
periodic even when the writes were spread out):

1. Bursts: from the median and MAD of the file's bins, a burst starts in a bin
   above median + K_MAD * 1.4826 * MAD (and 1.5 x the median, and above 0) and
   lasts while above median + K_STAY robust deviations. Its time is its onset.
   A burst whose peak is below PROMINENCE x the threshold is noise. A series
   with more than MAX_DUTY of its bins in bursts is busy, not bursty.
2. Candidate periods: clusters (within 10 %) of the gaps between bursts one,
   two and three apart (with few bursts, every gap); among a trickle of tiny
   bursts (a page written back now and then), also of the bursts not tiny
   (OTHERS_MIN_REL of the largest), which are then chained on their own.
3. For each candidate P, dynamic programming over the onsets finds the best
   chain: each burst follows one P (within TOL_REL * P + one bin) or, one burst
   missed, 2P after the previous; then once more with the chain's fitted P.
4. A chain is a train when it has at least three bursts (six if they are of
   one to three requests), at most one miss (and one more per MISS_EVERY
   bursts), bursts short compared with P, regular gaps (standard deviation
   within 12 % of P and the bins' quantization), alike if few (none tiny beside
   the others), and is unlikely by chance: with q1 (q2) the chance that one of
   the file's other prominent bursts (not tiny beside the chain's) falls in the
   window of a one-period (two-period) step,
   E = N * 12 * q1**(one-period steps - 1) * ((1-q1) q2)**(two-period steps)
   (times the orders of the steps) < ALPHA; a long chain must also be
   unlikely if all bursts, its own too, came at random. The
   period is the least-squares slope of onset against period index. An
   accepted train's bursts are set aside and the search repeats (two trains in
   one file). A file's write and writeback trains of one period are both kept, as
   twins (`Train.twin`): the writeback train's explanation says it is the disk's
   spike of those writes (the write train's reads as without it).
5. The live tracker (`LIVE` rules: stricter about other bursts, periods of at
   least four intervals) keeps each file's baseline over its last `history`
   intervals and looks for a train that ends with each new burst; a train
   leaves when no burst came for more than two periods.

One sync in every interval (`top` at 1 s with innodb_flush_log_at_trx_commit=2)
cannot show as bursts at that resolution: a run of at least METRONOME_MIN such
intervals, where the file has no syncs otherwise, is a train of its own
(`Train.metronome`). A recorded trace has writes, syncs and writeback in 0.1 s bins instead.

The modules, in the order of the data:
- `fold`: which files are one series (MySQL's redo directory), shared with the live screen's rows;
- `train`: the data (`Series` in, `Burst` and `Train` out) and its JSON;
- `rules`: the detector's tuning constants and `Rules` (`BATCH`, `LIVE`);
- `find`: step 1, the bursts of one series;
- `chains`: steps 2 to 4, chains of bursts spaced by a period;
- `detect`: whole series to trains (`detect()`), metronomes and twins included;
- `explain`: the cause of a train, in one line;
- `live`: step 5, `BurstTracker` for the live screen of `top`;
- `series`: a recorded trace's per-file series (`SeriesBuilder`, `trains_from_trace`);
- `render`: trains as a rich table (`report`) and as spans (`plot`).
"""
