"""The sweep's comparison table, read: ranks (ties share the better rank), the seed spread, strategy names."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from compaction_lab.report import charts, sweep_table
from tests.report.test_charts import comparison_table


def test_sweep_ranks_share_the_better_rank_on_ties_and_show_overtaking():

    ranks = sweep_table.sweep_ranks(comparison_table(), "window")
    got = {(r.window, r.strategy): r.rank for r in ranks.itertuples()}
    assert got == {
        (1000, "codex"): 1,
        (1000, "pi"): 1,  # a tie: both take the better rank ("min")
        (2000, "pi"): 1,  # pi overtakes codex
        (2000, "codex"): 2,
    }  # full, the uncompacted reference, is never ranked
    assert set(ranks["n_strategies"]) == {2}  # nor the failed run (NaN strategy)
    labels = charts.sweep_rank_labels(ranks, "window")
    # The right-end labels: one per rank at the last window.
    assert dict(zip(labels["rank"], labels["label"], strict=True)) == {1: "pi", 2: "codex"}
    tied = charts.sweep_rank_labels(sweep_table.sweep_ranks(comparison_table(windows=(1000,)), "window"), "window")
    assert "codex, pi" in set(tied["label"]) or "pi, codex" in set(tied["label"])


def test_sweep_ranks_within_each_facet():

    ranks = sweep_table.sweep_ranks(comparison_table(("seed", [7, 8])), "window", "seed")
    # seed 8 lowers every recall by 0.1, so the ranks are the same in both panels.
    for _seed, part in ranks.groupby("seed"):
        assert {(r.window, r.strategy): r.rank for r in part.itertuples()} == {
            (1000, "codex"): 1,
            (1000, "pi"): 1,
            (2000, "pi"): 1,
            (2000, "codex"): 2,
        }


def test_seed_spread_by_hand():
    table = pd.DataFrame(
        {
            "seed": [1, 2, 3, 1, 2, 3],
            "run": ["a", "b", "c", "a", "b", "c"],
            "status": "ok",
            "strategy": ["x", "x", "x", "y", "y", "y"],
            "strategy_label": ["x"] * 3 + ["y (extractive stand-in)"] * 3,
            "recall": [0.5, 1.0, 0.75, 0.2, 0.2, 0.2],
            "ci_low": [0.25, 0.8, 0.5, 0.0, 0.1, 0.0],
            "ci_high": [0.75, 1.0, 1.0, 0.4, 0.3, 0.6],
            "reader_label": "verbatim reader (retention ceiling)",
        }
    )
    spread = sweep_table.seed_spread(table).set_index("strategy")
    x = spread.loc["x"]
    assert x["n_seeds"] == 3 and x["recall_mean"] == pytest.approx(0.75)
    assert x["recall_sd"] == pytest.approx(0.25)  # sqrt(((-.25)^2 + .25^2 + 0) / 2)
    assert (x["recall_min"], x["recall_max"]) == (0.5, 1.0)
    # 95% prediction interval for a 4th seed: t(0.975, 2 df) = 4.303, times sd, times sqrt(1 + 1/3).
    assert x["across_low"] == pytest.approx(max(0.0, 0.75 - 4.302653 * 0.25 * math.sqrt(4 / 3)))
    assert x["across_high"] == 1.0  # clipped
    assert x["boot_half_width"] == pytest.approx((0.25 + 0.1 + 0.25) / 3)
    y = spread.loc["y"]
    assert y["recall_sd"] == 0 and y["across_low"] == y["across_high"] == pytest.approx(0.2)
    assert y["boot_half_width"] == pytest.approx((0.2 + 0.1 + 0.3) / 3)
    assert y["strategy_name"] == "y (extractive stand-in)"
    one = sweep_table.seed_spread(table[table["seed"] == 1])
    assert one["n_seeds"].tolist() == [1, 1] and all(math.isnan(v) for v in one["recall_sd"])
    assert one[["across_low", "across_high"]].isna().all().all()  # one seed: no range, not a zero-width one


def test_seed_spread_per_other_swept_value_and_one_name_per_strategy_with_its_other_labels_noted():
    table = comparison_table(("seed", [7, 8]))
    spread = sweep_table.seed_spread(table, by=["window"])
    assert len(spread) == 4 and set(spread["n_seeds"]) == {2}  # full, the uncompacted reference, is in no mean
    pi = spread[(spread["window"] == 2000) & (spread["strategy"] == "pi")].iloc[0]
    assert pi["recall_mean"] == pytest.approx((0.75 + 0.65) / 2)
    # pi is a stand-in in three runs and a model's summary in one: named by the most common label, marked.
    model_run = (table["strategy"] == "pi") & (table["run"] == "p-window=2000-seed=8")
    relabelled = table.assign(strategy_label=table["strategy_label"].where(~model_run, "pi (model: m)"))
    names = sweep_table.strategy_names(relabelled)
    assert names["pi"] == f"pi (extractive stand-in) {sweep_table.RELABELLED}" and names["full"] == "full"
    notes = sweep_table.label_notes(relabelled)
    assert notes == {"pi": f"{names['pi']}: labelled pi (model: m) in run p-window=2000-seed=8"}
    # The other way round, the stand-in is the minority label and still named once beside the name.
    flipped = table.copy()
    flipped.loc[table["strategy"] == "pi", "strategy_label"] = "pi (model: m)"
    flipped.loc[model_run, "strategy_label"] = "pi (extractive stand-in)"
    assert "labelled pi (extractive stand-in) in run p-window=2000-seed=8" in sweep_table.label_notes(flipped)["pi"]


def test_not_ranked_counts_the_reference_the_over_window_and_the_uncompacted_rows():
    table = comparison_table(failed=False).assign(over_window=False, compacted=True)
    table.loc[table["strategy"] == "full", "compacted"] = False
    table.loc[(table["strategy"] == "pi") & (table["window"] == 1000), "over_window"] = True
    table.loc[(table["strategy"] == "codex") & (table["window"] == 2000), "compacted"] = False
    reasons = sweep_table.not_ranked_reason(table)
    assert reasons[table["strategy"] == "full"].eq(sweep_table.REFERENCE).all()
    left = sweep_table.not_ranked(table)
    assert [(r.strategy, r.reason, r.runs) for r in left.itertuples()] == [
        ("full", sweep_table.REFERENCE, 2),
        ("pi", sweep_table.OVER_WINDOW, 1),
        ("codex", sweep_table.NOT_COMPACTED, 1),
    ]
    means = sweep_table.sweep_means(table, ["window"])
    assert {(r.window, r.strategy) for r in means.itertuples()} == {(1000, "codex"), (2000, "pi")}
    assert "full: 2 runs uncompacted reference" in sweep_table.not_ranked_text(table)
