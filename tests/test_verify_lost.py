"""verify's reading of Performance_schema_file_instances_lost (mysqlio.verify.lost): the
setting is blamed only when the file instances in use reach it. The figures of the
below-the-limit case are those measured on MariaDB 10.11 with 20,000 sysbench tables
(docs/benchmarks.md: 20,000 lost, one per CREATE INDEX, 40,073 of 90,000 in use)."""

from __future__ import annotations

from mysqlio.verify.lost import LIMIT_VARIABLE, LostInstances, lost_warning

ROWLESS = ["/var/log/mysql/error.log"]


def test_nothing_to_explain() -> None:
    assert lost_warning(LostInstances(0, 0, 100, 1000), ROWLESS) is None  # nothing lost
    assert lost_warning(LostInstances(5, 9, 1000, 1000), []) is None  # every file has its row


def test_at_the_limit_the_setting_is_blamed() -> None:
    note = lost_warning(LostInstances(10, 12, 90_000, 90_000), ROWLESS)
    assert note is not None
    assert f"raise {LIMIT_VARIABLE}" in note
    assert "12 (2 during the window)" in note and "90,000 file instances" in note
    assert ROWLESS[0] in note


def test_below_the_limit_before_the_window_it_is_not_the_cause() -> None:
    note = lost_warning(LostInstances(20_000, 20_000, 40_073, 90_000), ROWLESS)
    assert note is not None
    assert f"raise {LIMIT_VARIABLE}" not in note
    assert "(none during the window)" in note and "40,073 of 90,000 file instances in use" in note
    assert f"not why {ROWLESS[0]} has no row" in note


def test_below_the_limit_during_the_window_an_untracked_file() -> None:
    note = lost_warning(LostInstances(20_000, 20_001, 40_073, 90_000), ROWLESS)
    assert note is not None
    assert f"raise {LIMIT_VARIABLE}" not in note
    assert "(1 during the window)" in note and "not for want of room" in note
    assert f"{ROWLESS[0]} may be such a file" in note


def test_sized_automatically_is_never_full() -> None:
    lost = LostInstances(3, 3, 79, -1)
    assert not lost.at_limit()
    note = lost_warning(lost, ROWLESS)
    assert note is not None and f"raise {LIMIT_VARIABLE}" not in note and "sized automatically" in note


def test_instances_unreadable_says_what_the_counter_can_mean() -> None:
    before = lost_warning(LostInstances(7, 7), ROWLESS)
    during = lost_warning(LostInstances(7, 8), ROWLESS)
    assert before is not None and "all before the window" in before and LIMIT_VARIABLE in before
    assert during is not None and "(during the window)" in during


def test_many_rowless_files_are_cut_to_five() -> None:
    names = [f"/data/f{i}" for i in range(8)]
    note = lost_warning(LostInstances(1, 1, 10, 100), names)
    assert note is not None and "/data/f4, ..." in note and "/data/f5" not in note
