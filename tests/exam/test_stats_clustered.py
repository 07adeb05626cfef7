"""Intervals and paired tests at the session unit, per-session results, and the intervals' edge cases."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from compaction_lab.exam.statistics import stats


def _answers(spec, reader=True):
    """Answers from {strategy: [(session_id, source_order, correct) | (..., decoy), ...]}; questions paired by position.

    Each session is one case; ``over_window`` is True for strategies whose name ends in "!".
    """
    rows = []
    for strat, items in spec.items():
        for i, item in enumerate(items):
            session, order, correct = item[:3]
            decoy = item[3] if len(item) > 3 else False
            row = {
                "strategy": strat,
                "strategy_label": strat,
                "case_id": f"case-{session}",
                "question_id": f"q{i}",
                "pointer": "tool",
                "category": "x",
                "decoy": decoy,
                "correct": correct,
                "projection_tokens": 100,
                "session_id": session,
                "source_order": -1 if decoy else order,
                "over_window": strat.endswith("!"),
            }
            if reader:
                row.update({"reader": "verbatim", "reader_label": "verbatim reader (retention ceiling)"})
            rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- proportion_interval


@pytest.mark.parametrize("n", [1, 2, 5, 27, 100, 999])
def test_no_zero_width_interval_below_a_thousand_questions(n):
    for k in (0, n, n // 2):
        correct = np.arange(n) < k
        for clusters in (None, ["only"] * n, [i % 3 for i in range(n)], list(range(n))):
            iv = stats.proportion_interval(correct, clusters, n_boot=200)
            assert 0.0 <= iv.low < iv.high <= 1.0, (n, k, clusters is None, iv)


def test_27_of_27_is_not_certainty():
    iv = stats.proportion_interval([True] * 27)
    assert iv.low < 0.9 and iv.high == 1.0
    exact = st.binomtest(27, 27).proportion_ci(method="exact")
    assert (iv.low, iv.high) == pytest.approx((exact.low, exact.high))
    # spread over 4 sessions: every session is perfect, so nothing varies; the exact interval still stands
    clustered = stats.proportion_interval([True] * 27, [i % 4 for i in range(27)])
    assert clustered.low == pytest.approx(iv.low) and clustered.high == 1.0


def test_clustered_interval_is_never_narrower_than_clopper_pearson_and_widens_with_clustering():
    rng = np.random.default_rng(3)
    for seed in range(30):
        sizes = rng.integers(3, 15, size=int(rng.integers(2, 8)))
        correct = rng.random(sizes.sum()) < rng.uniform(0.2, 0.9)
        clusters = np.repeat(np.arange(sizes.size), sizes)
        iv = stats.proportion_interval(correct, clusters, n_boot=300, seed=seed)
        cp = stats.clopper_pearson(int(correct.sum()), int(correct.size))
        assert iv.low <= cp[0] and iv.high >= cp[1]
    # three sessions that disagree completely: 10/10, 0/10, 10/10 -- far wider than 20/30 as independent questions
    correct = [True] * 10 + [False] * 10 + [True] * 10
    iv = stats.proportion_interval(correct, np.repeat(["a", "b", "c"], 10))
    cp = stats.proportion_interval(correct)
    assert iv.high - iv.low > 2 * (cp.high - cp.low)
    assert iv.low < 0.1  # two of three sessions perfect, one all wrong: a mean near 0 is not ruled out


def test_one_cluster_falls_back_to_clopper_pearson_and_says_so():
    iv = stats.proportion_interval([True, False, True], ["s", "s", "s"], cluster_name="sessions")
    assert (iv.low, iv.high) == stats.clopper_pearson(2, 3)
    assert "one cluster" in iv.method and "sessions" in iv.method
    with pytest.raises(ValueError, match="labels"):
        stats.proportion_interval([True, False], ["s"])
    empty = stats.proportion_interval([], [])
    assert math.isnan(empty.low) and math.isnan(empty.high) and empty.method == "no questions"


# --------------------------------------------------------------------------- recall_table at the session unit


def test_recall_table_reports_units_share_and_window():
    spec = {
        "a": [("s1", 0, True)] * 6
        + [("s1", 1, False)] * 2
        + [("s2", 5, True), ("s3", 9, False), ("s3", 9, True, True)],
        "full!": [("s1", 0, True)] * 8 + [("s2", 5, True), ("s3", 9, True), ("s3", 9, True, True)],
    }
    df = _answers(spec)
    t = stats.recall_table(df, unit="session").set_index("strategy")
    a = t.loc["a"]
    assert (a["retained"], a["n"], a["n_sessions"], a["n_records"]) == (7, 10, 3, 4)
    assert a["top_session_share"] == pytest.approx(0.8)
    # 10 questions from 4 records: never narrower than Clopper–Pearson over those 4 records
    assert (
        a["ci_method"]
        == "cluster bootstrap ∪ cluster t over 3 sessions ∪ Clopper–Pearson ∪ Clopper–Pearson over 4 records"
    )
    low, high = stats.clopper_pearson(0.7 * 4, 4)
    assert a["ci_low"] <= low + 1e-12 and a["ci_high"] >= high - 1e-12
    assert pd.isna(a["decoys_fallen"]) and pd.isna(a["decoys_n"])  # the verbatim reader: not measured
    assert t["over_window"].tolist() == [False, True]
    # the same frame at the question unit: same counts, the exact interval, narrower than the session one
    q = stats.recall_table(df, unit="question").set_index("strategy").loc["a"]
    assert (q["n_sessions"], q["n_records"], q["top_session_share"]) == (3, 4, pytest.approx(0.8))
    assert q["ci_method"] == "Clopper–Pearson (questions independent)"
    assert q["ci_high"] - q["ci_low"] < a["ci_high"] - a["ci_low"]
    with pytest.raises(ValueError, match="unit"):
        stats.recall_table(df, unit="case")


def test_one_session_steps_down_to_its_records_then_to_clopper_pearson():
    many = _answers({"a": [("s1", i // 3, i % 2 == 0) for i in range(12)]})
    r = stats.recall_table(many, unit="session").iloc[0]
    assert r["ci_method"] == (
        "one session: cluster bootstrap ∪ cluster t over 4 records ∪ Clopper–Pearson ∪ Clopper–Pearson over 4 records"
    )
    assert (r["n_sessions"], r["n_records"], r["top_session_share"]) == (1, 4, 1.0)
    one = _answers({"a": [("s1", 3, True), ("s1", 3, False), ("s1", 3, True)]})
    r = stats.recall_table(one, unit="session").iloc[0]
    # three questions of one record are one observation: the interval is Clopper–Pearson over 1 record
    assert r["ci_method"] == (
        "one session, one record: Clopper–Pearson (questions as if independent) ∪ Clopper–Pearson over 1 record"
    )
    assert (r["ci_low"], r["ci_high"]) == pytest.approx(stats.clopper_pearson(2 / 3, 1))
    assert r["ci_low"] < stats.clopper_pearson(2, 3)[0]
    unknown = stats.recall_table(one.drop(columns="source_order"), unit="session").iloc[0]
    assert unknown["ci_method"].startswith("one session, records unknown") and pd.isna(unknown["n_records"])


def test_without_session_id_cases_stand_in_for_sessions():
    df = _answers({"a": [("s1", 0, True), ("s2", 0, False), ("s2", 1, True)]}).drop(columns="session_id")
    r = stats.recall_table(df, unit="session").iloc[0]
    assert r["n_sessions"] == 2 and r["ci_method"].endswith(
        "over 2 sessions ∪ Clopper–Pearson ∪ Clopper–Pearson over 3 records"
    )


# --------------------------------------------------------------------------- session_table


def test_session_table_sums_to_the_recall_table():
    spec = {
        "a": [("s1", i, i % 3 != 0) for i in range(9)] + [("s2", 0, True), ("s2", 0, False), ("s3", 2, True)],
        "b": [("s1", i, True) for i in range(9)] + [("s2", 0, False), ("s2", 0, False), ("s3", 2, True, True)],
    }
    df = _answers(spec)
    per = stats.session_table(df)
    assert list(per["strategy"]) == ["a", "a", "a", "b", "b"]  # b's s3 has only a decoy: no row
    assert list(per["session_id"]) == ["s1", "s2", "s3", "s1", "s2"]
    rec = stats.recall_table(df).set_index("strategy")
    sums = per.groupby("strategy")[["n", "retained", "n_records"]].sum()
    for strat in ("a", "b"):
        assert tuple(sums.loc[strat]) == tuple(rec.loc[strat, ["n", "retained", "n_records"]])
    row = per[(per["strategy"] == "a") & (per["session_id"] == "s1")].iloc[0]
    assert (row["n"], row["retained"], row["recall"], row["n_records"]) == (9, 6, 6 / 9, 9)
    assert (row["ci_low"], row["ci_high"]) == stats.clopper_pearson(6, 9)
    assert (per["ci_low"] < per["ci_high"]).all() and list(per.columns[:2]) == ["reader", "reader_label"]


# --------------------------------------------------------------------------- paired_table at the session unit


def test_three_sessions_all_favouring_a_give_p_one_quarter():
    # 30 discordant questions, all for A: McNemar would say p ≈ 2e-9; three sessions can say no less than 2/8
    a = (
        [("s1", i, True) for i in range(10)]
        + [("s2", i, True) for i in range(10)]
        + [("s3", i, True) for i in range(10)]
    )
    b = [(s, o, False) for s, o, _ in a]
    df = _answers({"A": a, "B": b})
    r = stats.paired_table(df, unit="session").iloc[0]
    assert r["p_value"] == 0.25 and (r["b"], r["c"], r["n_sessions"], r["ahead"]) == (30, 0, 3, "A")
    assert r["test"] == "sign-flip permutation over sessions (exact)" and r["note"] == ""
    q = stats.paired_table(df, unit="question").iloc[0]
    assert q["p_value"] == pytest.approx(st.binomtest(30, 30).pvalue) and q["test"] == "exact McNemar"


def test_sign_flip_weighs_sessions_by_their_differences():
    # d = (3, 1, −1): |Σ| = 3; of the 8 patterns ±3 ±1 ±1 six reach |3| (5, 3, 3 and their negatives)
    assert stats.sign_flip_p([3, 1, -1]) == (0.75, True)
    assert stats.sign_flip_p([0, 0]) == (1.0, True)
    assert stats.sign_flip_p([2, 0, 0, 0]) == (1.0, True)  # sessions without a difference flip to themselves


def test_one_question_per_session_is_exact_mcnemar():
    flags = [True] * 7 + [False] * 2 + [True] * 3
    a = [(f"s{i}", 0, x) for i, x in enumerate(flags)]
    b = [(f"s{i}", 0, i >= 7) for i in range(len(flags))]
    df = _answers({"A": a, "B": b})
    s, q = stats.paired_table(df, unit="session").iloc[0], stats.paired_table(df, unit="question").iloc[0]
    assert (s["b"], s["c"]) == (q["b"], q["c"]) == (7, 2)
    assert s["p_value"] == pytest.approx(q["p_value"]) == pytest.approx(st.binomtest(7, 9).pvalue)


def test_one_session_gives_p_one_and_says_why():
    df = _answers({"A": [("s1", i, True) for i in range(20)], "B": [("s1", i, False) for i in range(20)]})
    r = stats.paired_table(df, unit="session").iloc[0]
    assert r["p_value"] == 1.0 and r["n_sessions"] == 1 and r["note"].startswith("one session")
    assert stats.paired_table(df, unit="question").iloc[0]["p_value"] < 1e-5


def test_many_sessions_use_a_seeded_monte_carlo_close_to_the_exact_value():
    # 17 sessions with one discordant question each: the exact value is the binomial McNemar p
    a = [(f"s{i}", 0, i < 12) for i in range(17)]
    b = [(f"s{i}", 0, i >= 12) for i in range(17)]
    df = _answers({"A": a, "B": b})
    r = stats.paired_table(df, unit="session", n_perm=20_000, seed=3).iloc[0]
    assert r["test"] == "sign-flip permutation over sessions (Monte Carlo, 20000 draws)"
    assert r["p_value"] == pytest.approx(st.binomtest(12, 17).pvalue, abs=0.015)
    again = stats.paired_table(df, unit="session", n_perm=20_000, seed=3).iloc[0]
    assert again["p_value"] == r["p_value"]
    # every one of 20 sessions for A: no random pattern reaches it, p is the smallest a Monte Carlo can give
    p, exact = stats.sign_flip_p([1] * 20, n_perm=999, seed=1)
    assert (p, exact) == (1 / 1000, False)
