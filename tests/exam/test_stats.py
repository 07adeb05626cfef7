import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from compaction_lab.exam.statistics import stats


def _frame(spec, case_id="c1", tokens=None):
    """Answers from {strategy: [(pointer, correct) | (pointer, correct, decoy), ...]}; questions paired by position."""
    rows = []
    for strat, items in spec.items():
        for i, item in enumerate(items):
            pointer, correct = item[0], item[1]
            decoy = item[2] if len(item) > 2 else False
            rows.append(
                {
                    "strategy": strat,
                    "strategy_label": strat,
                    "reader": "verbatim",
                    "reader_label": "verbatim reader (retention ceiling)",
                    "case_id": case_id,
                    "question_id": f"q{i}",
                    "pointer": pointer,
                    "category": "x",
                    "decoy": decoy,
                    "answer": "v",
                    "given": "v" if correct else "NOT_FOUND",
                    "correct": correct,
                    "projection_tokens": (tokens or {}).get(strat, 100),
                }
            )
    return pd.DataFrame(rows)


def test_recall_counts_interval_and_decoys():
    items = [("assistant", True)] * 6 + [("assistant", False)] * 2 + [("tool", True), ("user", False)]
    items += [("assistant", False, True), ("assistant", True, True)]  # one decoy fallen for, one abstained
    t = stats.recall_table(_frame({"a": items}, tokens={"a": 321}).assign(reader="model"))
    r = t.iloc[0]
    assert (r["retained"], r["n"], r["recall"]) == (7, 10, 0.7)
    assert (r["decoys_fallen"], r["decoys_n"]) == (1, 2)  # a model reader can fall for a decoy: counted
    assert r["projection_tokens"] == 321
    assert (r["retained_assistant"], r["n_assistant"]) == (6, 8)
    assert (r["retained_tool"], r["n_tool"], r["retained_user"], r["n_user"]) == (1, 1, 0, 1)
    assert 0.0 <= r["ci_low"] <= r["recall"] <= r["ci_high"] <= 1.0
    assert r["ci_low"] < r["ci_high"]
    assert r["strategy_label"] == "a" and r["reader_label"].startswith("verbatim")
    # The verbatim reader cannot fall for a decoy: its decoys are not measured (<NA>), never 0 or 1 of 2.
    blind = stats.recall_table(_frame({"a": items})).iloc[0]
    assert pd.isna(blind["decoys_fallen"]) and pd.isna(blind["decoys_n"])


def test_same_seed_same_interval():
    items = [("assistant", bool(i % 3)) for i in range(30)]
    df = _frame({"a": items})
    t1, t2 = stats.recall_table(df, seed=11), stats.recall_table(df, seed=11)
    pd.testing.assert_frame_equal(t1, t2)
    correct = [bool(i % 3) for i in range(30)]
    clusters = [i // 5 for i in range(30)]
    iv = stats.proportion_interval(correct, clusters, n_boot=500, seed=1)
    assert iv == stats.proportion_interval(correct, clusters, n_boot=500, seed=1)
    # the seed reaches the cluster bootstrap: another seed moves at least one bound of an interval it decides
    assert stats.proportion_interval(correct, clusters, n_boot=500, seed=2) != iv


def test_degenerate_results_get_exact_intervals_of_nonzero_width_without_warnings():
    # The percentile bootstrap gave (1, 1), (0, 0) and (1, 1) here: as if 5 questions settled the matter.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = stats.recall_table(
            _frame({"all": [("tool", True)] * 5, "none": [("tool", False)] * 5, "one": [("tool", True)]})
        )
    got = t.set_index("strategy")
    for strat, k, n in (("all", 5, 5), ("none", 0, 5), ("one", 1, 1)):
        exact = st.binomtest(k, n).proportion_ci(method="exact")
        assert (got.loc[strat, "ci_low"], got.loc[strat, "ci_high"]) == pytest.approx((exact.low, exact.high))
        assert got.loc[strat, "ci_low"] < got.loc[strat, "ci_high"]
    assert got.loc["all", "ci_high"] == 1.0 and got.loc["none", "ci_low"] == 0.0
    assert (got["ci_method"] == "Clopper–Pearson (questions independent)").all()
    iv = stats.proportion_interval([])
    assert math.isnan(iv.low) and math.isnan(iv.high)


def test_projection_tokens_mean_counts_each_case_once():
    a = _frame({"s": [("tool", True)] * 3}, case_id="c1", tokens={"s": 100})
    b = _frame({"s": [("tool", True)]}, case_id="c2", tokens={"s": 400})
    t = stats.recall_table(pd.concat([a, b], ignore_index=True))
    assert t.iloc[0]["projection_tokens"] == 250


def test_label_that_differs_between_cases_is_kept_visible():
    a = _frame({"s": [("tool", True)]}, case_id="c1")
    b = _frame({"s": [("tool", True)]}, case_id="c2").assign(strategy_label="s (fallback: deterministic)")
    t = stats.recall_table(pd.concat([a, b], ignore_index=True))
    assert len(t) == 1 and t.iloc[0]["strategy_label"] == "s / s (fallback: deterministic)"


def test_mcnemar_counts_and_p_value_match_binomtest():
    # a right & b wrong on 7 questions, a wrong & b right on 2, 3 both right, 1 both wrong
    a = [True] * 7 + [False] * 2 + [True] * 3 + [False]
    b = [False] * 7 + [True] * 2 + [True] * 3 + [False]
    df = _frame({"A": [("tool", x) for x in a], "B": [("tool", x) for x in b]})
    # decoys are never paired
    df = pd.concat(
        [df, _frame({"A": [("tool", False, True)], "B": [("tool", True, True)]}).assign(question_id="d0")],
        ignore_index=True,
    )
    m = stats.paired_table(df)
    assert len(m) == 1
    r = m.iloc[0]
    assert (r["strategy_a"], r["strategy_b"], r["b"], r["c"]) == ("A", "B", 7, 2)
    assert (r["n_paired"], r["both_correct"], r["both_wrong"]) == (13, 3, 1)
    assert r["p_value"] == pytest.approx(st.binomtest(7, 9, 0.5).pvalue)
    assert r["ahead"] == "A"
    assert (r["test"], r["n_sessions"], r["note"]) == ("exact McNemar", 1, "")


def test_mcnemar_pairs_only_shared_questions_and_no_discordance_gives_p_one():
    df = _frame(
        {
            "A": [("tool", True), ("tool", False)],
            "B": [("tool", True), ("tool", False), ("tool", True)],
            "C": [("tool", True), ("tool", False)],
        }
    )
    m = stats.paired_table(df)
    assert list(zip(m["strategy_a"], m["strategy_b"], strict=False)) == [("A", "B"), ("A", "C"), ("B", "C")]
    assert (m["n_paired"] == 2).all()
    assert (m["p_value"] == 1.0).all() and (m["ahead"] == "tie").all()
    assert (m["b"] + m["c"] == 0).all()


def test_paired_table_rejects_duplicate_answers():
    df = _frame({"A": [("tool", True)], "B": [("tool", True)]})
    for unit in stats.UNITS:
        with pytest.raises(ValueError, match="twice"):
            stats.paired_table(pd.concat([df, df.iloc[:1]], ignore_index=True), unit=unit)


def _crossing():
    # A: tool 4/4, assistant 1/4. B: tool 1/4, assistant 4/4. user: none.
    A = [("tool", True)] * 4 + [("assistant", True)] + [("assistant", False)] * 3
    B = [("tool", True)] + [("tool", False)] * 3 + [("assistant", True)] * 4
    return _frame({"A": A, "B": B})


def test_sensitivity_endpoints_are_tool_and_assistant_recall_and_ranking_flips():
    t = stats.sensitivity_table(_crossing(), steps=5)
    sweep = t[~t["default"]]
    assert sorted(sweep["s"].unique()) == [0.0, 0.25, 0.5, 0.75, 1.0]
    rec = stats.recall_table(_crossing()).set_index("strategy")
    at = lambda s, k: sweep[(sweep["s"] == s) & (sweep["strategy"] == k)].iloc[0]
    for k in ("A", "B"):
        assert at(0.0, k)["recall"] == rec.loc[k, "recall_tool"]
        assert at(1.0, k)["recall"] == rec.loc[k, "recall_assistant"]
    assert (at(0.0, "A")["rank"], at(0.0, "B")["rank"]) == (1, 2)
    assert (at(1.0, "A")["rank"], at(1.0, "B")["rank"]) == (2, 1)
    # the midpoint ties (0.625 each): ties share the smallest rank
    assert at(0.5, "A")["rank"] == at(0.5, "B")["rank"] == 1
    assert at(0.5, "A")["recall"] == pytest.approx(0.625)


def test_sensitivity_default_point_redistributes_missing_pointer_weight():
    t = stats.sensitivity_table(_crossing(), steps=3)
    d = t[t["default"]].set_index("strategy")
    assert len(d) == 2 and d["s"].isna().all()
    assert tuple(d.loc["A", ["w_assistant", "w_user", "w_tool"]]) == (0.8, 0.1, 0.1)
    # no user questions: its 0.1 is spread over assistant and tool in proportion (8:1)
    assert d.loc["A", "recall"] == pytest.approx((0.8 * 0.25 + 0.1 * 1.0) / 0.9)
    assert d.loc["B", "recall"] == pytest.approx((0.8 * 1.0 + 0.1 * 0.25) / 0.9)
    assert (d.loc["B", "rank"], d.loc["A", "rank"]) == (1, 2)
    assert len(t) == 2 * (3 + 1)
    assert (d["mix_label"] == "synthetic 80/10/10").all()
    assert list(t.loc[~t["default"], "mix_label"].unique()) == ["sweep 0/0/100", "sweep 50/0/50", "sweep 100/0/0"]


def test_sensitivity_default_rows_say_which_mix_they_are():
    natural = {"assistant": 0.1, "user": 0.07, "tool": 0.83}
    t = stats.sensitivity_table(_crossing(), steps=2, default_mix=natural, mix_label="natural (pool)")
    d = t[t["default"]].set_index("strategy")
    assert (d["mix_label"] == "natural (pool)").all()
    assert tuple(d.loc["A", ["w_assistant", "w_user", "w_tool"]]) == (0.1, 0.07, 0.83)
    # the pool's mix, not 80/10/10, decides the default ranking here: A is ahead on tool values
    assert d.loc["A", "recall"] == pytest.approx((0.1 * 0.25 + 0.83 * 1.0) / 0.93)
    assert (d.loc["A", "rank"], d.loc["B", "rank"]) == (1, 2)
    unnamed = stats.sensitivity_table(_crossing(), steps=2, default_mix=natural)
    assert (unnamed.loc[unnamed["default"], "mix_label"] == "default 10/7/83").all()


def test_sensitivity_nan_when_mix_weighs_only_missing_pointers():
    t = stats.sensitivity_table(_frame({"A": [("assistant", True)], "B": [("assistant", False)]}), steps=2)
    at0 = t[t["s"] == 0.0]
    assert at0["recall"].isna().all() and at0["rank"].isna().all()
    at1 = t[t["s"] == 1.0].set_index("strategy")
    assert (at1.loc["A", "rank"], at1.loc["B", "rank"]) == (1, 2)


def test_readers_are_separate_units():
    df = pd.concat([_crossing(), _crossing().assign(reader="other", reader_label="other")], ignore_index=True)
    assert len(stats.recall_table(df)) == 4
    assert len(stats.paired_table(df)) == 2 and len(stats.paired_table(df, unit="session")) == 2
    assert len(stats.session_table(df)) == 4
    t = stats.sensitivity_table(df, steps=2)
    assert set(t.groupby(["s", "reader"], dropna=False)["rank"].max().dropna()) == {2}


def test_frames_without_optional_columns_and_empty_frames():
    df = _crossing()[["strategy", "case_id", "question_id", "pointer", "decoy", "correct"]]
    t = stats.recall_table(df)
    assert list(t["strategy_label"]) == ["A", "B"] and t["projection_tokens"].isna().all()
    # without session_id / source_order / over_window: each case a session, records unknown, not over the window
    assert (t["n_sessions"] == 1).all() and t["n_records"].isna().all() and not t["over_window"].any()
    assert "reader" not in stats.paired_table(df).columns and "reader" not in stats.session_table(df).columns
    assert len(stats.sensitivity_table(df, steps=2)) == 2 * 3
    empty = df.iloc[:0]
    for unit in stats.UNITS:
        assert stats.recall_table(empty, unit=unit).empty and stats.paired_table(empty, unit=unit).empty
    assert stats.sensitivity_table(empty).empty and stats.session_table(empty).empty
    with pytest.raises(ValueError, match="lacks"):
        stats.recall_table(df.drop(columns="pointer"))


def test_deterministic_outputs():
    df = _crossing()
    for f in (stats.recall_table, stats.paired_table, stats.sensitivity_table, stats.session_table):
        pd.testing.assert_frame_equal(f(df), f(df))
    assert np.isclose(stats.mixed_recall({"assistant": (1, 2), "tool": (0, 0)}, {"assistant": 0.5, "tool": 0.5}), 0.5)
