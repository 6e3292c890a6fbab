"""The burst detector's tuning constants, and `Rules`: how much evidence a train needs
(`BATCH` for a whole recorded series, `LIVE` for the tracker of `top`)."""

from __future__ import annotations

from dataclasses import dataclass

K_MAD = 5.0  # threshold: median + K_MAD robust standard deviations
K_STAY = 2.0  # a burst lasts while above median + K_STAY robust standard deviations
MAD_SIGMA = 1.4826  # MAD -> standard deviation of a normal distribution
MIN_REL = 0.5  # and at least this much above the median
MAX_DUTY = 0.4  # more bins than this in bursts: a busy series, not a bursty one
TOL_REL = 0.25  # a burst matches onset + P within TOL_REL * P + one bin
TOL_MISS_REL = 0.35  # ... and onset + 2P (one missed burst) within this * P + one bin
MIN_BURSTS = 3  # a train is established after three bursts
MIN_PERIOD_BINS = 2.5  # a period spans at least this many bins
MIN_PERIOD_S = 0.25
MAX_BURST_SHARE = 0.5  # a burst lasts at most this share of the period (median)
SPREAD_REL, SPREAD_BINS = 0.12, 0.43  # gap std limit (in quadrature): jitter, and bin quantization
AMP_RATIO = 4.0  # a short train's bursts are alike: largest / smallest amount
SHORT_TRAIN = 5  # ... for trains of at most this many bursts
SMALL_EVERY = 3  # the live tracker looks for trains of small bursts at every third one
SMALL_MIN, SMALL_REQUESTS = 6, 4  # bursts of fewer requests (one write, one fsync) prove less: six of them
SIZE_SNR = 10  # a train's request size is given when its requests stand 10 sigma above the noise
PROMINENCE = 1.5  # a burst's peak rises 1.5 times as far above the median as the start threshold
# (bursts barely over the threshold are noise: they neither make a train nor count against one)
MISS_EVERY = 8  # one missed burst allowed, and one more per this many bursts
DEV_COST = 0.3  # score lost by a burst one tolerance away from its expected time
MISS_COST = 0.6  # score lost by a missed burst
MAX_OTHERS_PER_PERIOD = 0.5  # the file's other bursts: at most one per two periods
OTHERS_MIN_REL = 0.02  # ... counting those of at least this share of the train's (median) burst
LOOK_ELSEWHERE = 2 * 6  # periods tried per search (candidates, refined)
ALPHA_ALL = 0.1  # ... and a long chain, if all bursts (its own too) came at random
ALPHA = 0.005  # expected number of chains as good as this one by chance
MAX_TRAINS = 3  # per series
MAX_CANDIDATES = 6  # periods tried per search
LIVE_BURSTS = 24  # the tracker looks for trains among a file's last this many bursts
FEW_BURSTS = 8  # up to this many bursts, every gap is tried as a period too
METRONOME_MIN = 10  # intervals with exactly one sync each
METRONOME_NOISE = 0.1  # bins with syncs outside such runs, per bin inside them
WRITEBACK_PAGE = 4096  # writeback bursts count their bytes in pages of this size as requests
TWIN_TOL = 0.1  # a file's write and writeback trains are twins when their periods agree within 10 %


@dataclass(frozen=True)
class Rules:
    """How much evidence a train needs. The live tracker sees a short window and
    no future, so it is stricter about other bursts than a whole recorded series."""

    min_bursts: int = MIN_BURSTS
    max_others_per_period: float = MAX_OTHERS_PER_PERIOD
    alpha: float = ALPHA
    amp_ratio: float = AMP_RATIO
    min_period_bins: float = MIN_PERIOD_BINS
    alpha_all: float = ALPHA_ALL
    whole_series: bool = True  # the bursts are all the file's (a trace), not a window of a stream


BATCH = Rules()
# live: a short window and no future, so stricter; periods of at least 4 intervals
# (3 bursts 2 bins apart happen by chance in a busy file)
LIVE = Rules(
    max_others_per_period=0.3,
    alpha=ALPHA / 10,
    amp_ratio=2.5,
    min_period_bins=4.0,
    alpha_all=ALPHA_ALL / 100,
    whole_series=False,
)
