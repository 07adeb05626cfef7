"""stats.rank_agreement: do the closed book and the continuation exam rank the arms alike (issue 29)?"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from compaction_lab.exam.statistics import stats


def _rows(spec, **extra):
    """One row per answer from {session: {arm: (correct, total)}}, plus constant `extra` columns."""
    rows = []
    for session, arms in spec.items():
        for arm, (k, n) in arms.items():
            rows += [{"strategy": arm, "session_id": session, "correct": i < k, **extra} for i in range(n)]
    return pd.DataFrame(rows)


def _closed(spec):
    return _rows(spec, decoy=False, reader="verbatim")


def _sessions(rates, n_sessions, n=10, seed=0):
    """{session: {arm: (k, n)}} with each arm's hits drawn around its rate, so sessions differ a little."""
    rng = np.random.default_rng(seed)
    return {f"s{s}": {arm: (int(rng.binomial(n, p)), n) for arm, p in rates.items()} for s in range(n_sessions)}


RATES = {"full": 0.95, "det": 0.75, "codex": 0.5, "pi": 0.3, "none": 0.1}


def test_rho_is_spearman_of_the_pooled_recalls_and_the_interval_is_a_real_interval():
    closed, cont = _closed(_sessions(RATES, 8, seed=1)), _rows(_sessions(RATES, 8, seed=2))
    r = stats.rank_agreement(closed, cont, n_boot=500)
    expected = st.spearmanr(
        closed.groupby("strategy")["correct"].mean().sort_index(),
        cont.groupby("strategy")["correct"].mean().sort_index(),
    ).statistic
    assert math.isclose(r.rho, expected)
    assert (r.n_strategies, r.n_units) == (5, 8)
    assert -1.0 <= r.ci_low < r.ci_high <= 1.0 and r.ci_low <= r.rho
    assert r.verdict == "agree" and "8 sessions" in r.method and "500 resamples" in r.method
    # Reversing one exam's ranking reverses ρ.
    flipped = _rows(_sessions(dict(zip(RATES, reversed(RATES.values()), strict=True)), 8, seed=2))
    rev = stats.rank_agreement(closed, flipped, n_boot=500)
    assert rev.rho < -0.8 and rev.verdict == "disagree"


def test_same_seed_same_interval_and_rows_repeated_within_a_session_change_nothing():
    """The bootstrap resamples sessions, not rows: repeating every row of every session ten times leaves each
    session's recalls, and so every resample, unchanged (a bootstrap over rows would narrow the interval)."""
    closed, cont = _closed(_sessions(RATES, 5, seed=3)), _rows(_sessions(RATES, 5, seed=4))
    r = stats.rank_agreement(closed, cont, n_boot=400, seed=11)
    assert r == stats.rank_agreement(closed, cont, n_boot=400, seed=11)
    assert not math.isnan(r.ci_low) and r.ci_low < r.ci_high
    tenfold = stats.rank_agreement(
        pd.concat([closed] * 10, ignore_index=True), pd.concat([cont] * 10, ignore_index=True), n_boot=400, seed=11
    )
    assert (tenfold.rho, tenfold.ci_low, tenfold.ci_high) == pytest.approx((r.rho, r.ci_low, r.ci_high))


def test_only_arms_scored_in_both_count_and_over_window_arms_and_decoys_are_left_out():
    spec = _sessions({"a": 0.9, "b": 0.6, "c": 0.3}, 4, seed=5)
    closed, cont = _closed(spec), _rows(spec)
    base = stats.rank_agreement(closed, cont, n_boot=200)
    assert base.n_strategies == 3 and base.rho == pytest.approx(1.0)
    # An arm only the closed book scored, an over-window arm that would reverse the ranking, and decoy rows
    # that would too: none of them moves ρ.
    only_closed = _closed({"s0": {"x": (3, 10)}})
    over_c = _closed({s: {"big": (10, 10)} for s in spec}).assign(over_window=True)
    over_k = _rows({s: {"big": (0, 10)} for s in spec})
    decoys = _closed({s: {"a": (0, 50), "c": (50, 50)} for s in spec}).assign(decoy=True)
    r = stats.rank_agreement(
        pd.concat([closed, only_closed, over_c, decoys], ignore_index=True),
        pd.concat([cont, over_k], ignore_index=True),
        n_boot=200,
    )
    assert (r.rho, r.n_strategies, r.n_units) == (base.rho, 3, 4)
    assert "over-window arms left out: big" in r.method
    # Flagged in the continuation frame only, it is left out as well.
    r2 = stats.rank_agreement(
        pd.concat([closed, over_c.drop(columns="over_window")], ignore_index=True),
        pd.concat([cont, over_k.assign(over_window=True)], ignore_index=True),
        n_boot=200,
    )
    assert r2.n_strategies == 3 and "big" in r2.method


def test_too_few_arms_or_sessions_give_no_interval_never_a_zero_width_one():
    spec = _sessions({"a": 0.9, "b": 0.5, "c": 0.2}, 3, seed=6)
    two = {s: {k: v for k, v in arms.items() if k != "c"} for s, arms in spec.items()}
    r = stats.rank_agreement(_closed(two), _rows(two))
    assert abs(r.rho) == pytest.approx(1.0) and math.isnan(r.ci_low) and math.isnan(r.ci_high)
    assert r.n_strategies == 2 and "two arms" in r.method and r.verdict == "cannot tell"  # a ρ, but no interval
    one_session = {"s0": spec["s0"]}
    r = stats.rank_agreement(_closed(one_session), _rows(one_session))
    assert not math.isnan(r.rho) and math.isnan(r.ci_low) and r.n_units == 1 and "one of the sessions" in r.method
    one_strategy = {s: {"a": arms["a"]} for s, arms in spec.items()}
    r = stats.rank_agreement(_closed(one_strategy), _rows(one_strategy))
    assert math.isnan(r.rho) and math.isnan(r.ci_low) and "nothing to rank" in r.method
    tied = {s: {arm: (5, 10) for arm in arms} for s, arms in spec.items()}
    r = stats.rank_agreement(_closed(spec), _rows(tied))
    assert math.isnan(r.rho) and math.isnan(r.ci_high) and "same recall" in r.method


def test_sessions_are_resampled_with_both_exams_rows_together():
    """Session s0 ranks a > b > c in both exams, s1 the reverse in both; s0 weighs more. Drawn together, every
    resample agrees (ρ = 1: each draw pools the same sessions in both exams); drawn apart, a resample pairing
    s1's closed book with s0's continuation would give −1. Every resample giving 1 is no interval."""
    s0 = {"a": (20, 20), "b": (10, 20), "c": (0, 20)}
    s1 = {"a": (0, 10), "b": (5, 10), "c": (10, 10)}
    spec = {"s0": s0, "s1": s1}
    r = stats.rank_agreement(_closed(spec), _rows(spec), n_boot=300)
    assert r.rho == pytest.approx(1.0)
    assert math.isnan(r.ci_low) and math.isnan(r.ci_high) and "all gave ρ = 1.00" in r.method


def test_bad_frames_are_refused():
    spec = _sessions({"a": 0.9, "b": 0.5, "c": 0.2}, 3)
    closed, cont = _closed(spec), _rows(spec)
    with pytest.raises(ValueError, match="lacks columns"):
        stats.rank_agreement(closed.drop(columns="session_id"), cont)
    with pytest.raises(ValueError, match="several readers"):
        stats.rank_agreement(pd.concat([closed, closed.assign(reader="model")]), cont)
    # Another unit column works the same way.
    r = stats.rank_agreement(
        closed.rename(columns={"session_id": "case"}),
        cont.rename(columns={"session_id": "case"}),
        unit_col="case",
        n_boot=100,
    )
    assert r.n_units == 3 and "case values" in r.method


def test_rank_rows_are_scipys_average_ranks_with_ties():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, size=(200, 6)) / 4  # many ties
    b = rng.integers(0, 4, size=(200, 6)) / 4
    got = stats._spearman_rows(a, b)
    for row_a, row_b, rho in zip(a, b, got, strict=True):
        want = st.spearmanr(row_a, row_b).statistic
        assert (math.isnan(rho) and math.isnan(want)) or math.isclose(rho, want, abs_tol=1e-12)
