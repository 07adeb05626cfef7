"""share.cost_view follows the price table and rule notebook 04's figures showed (issue 48); older runs keep working."""

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.cost import choice
from compaction_lab.report import share

# Two tables, each under its own rule and `none`; the first row's table is the CNY one.
ROWS = [
    (strategy, table, sim, currency, cost)
    for strategy, base in (("codex", 1.0), ("det", 2.0))
    for table, currency, sims in (
        ("deepseek-flash", "CNY", ("deepseek", "none")),
        ("gpt-4.1", "USD", ("openai", "none")),
    )
    for sim, cost in zip(sims, (base, base * 10), strict=True)
]


def _cost() -> pd.DataFrame:
    return pd.DataFrame(ROWS, columns=["strategy", "price_table", "simulator", "currency", "compaction_cost_cold"])


def test_the_default_is_the_pair_the_figures_showed():
    marked = choice.mark_shown(_cost(), "gpt-4.1", "openai")
    view = share.cost_view(marked)
    assert set(view["price_table"]) == {"gpt-4.1"} and set(view["simulator"]) == {"openai"}
    assert set(view["currency"]) == {"USD"} and len(view) == 2
    # Even a `none` rule, when that is what the figures showed.
    view = share.cost_view(choice.mark_shown(_cost(), "gpt-4.1", "none"))
    assert set(view["simulator"]) == {"none"}


def test_naming_the_table_keeps_the_shown_rule_only_for_that_table():
    marked = choice.mark_shown(_cost(), "gpt-4.1", "none")
    assert set(share.cost_view(marked, "gpt-4.1")["simulator"]) == {"none"}
    assert set(share.cost_view(marked, "deepseek-flash")["simulator"]) == {"deepseek"}  # its own rule
    assert set(share.cost_view(marked, None, "openai")["simulator"]) == {"openai"}
    with pytest.raises(ValueError, match="not priced"):
        share.cost_view(marked, None, "deepseek")  # gpt-4.1 (the shown table) was not priced under it


def test_without_a_record_the_first_table_under_its_own_rule():
    for cost in (_cost(), choice.mark_shown(_cost(), "nope", "none")):  # no column; a column marking nothing
        view = share.cost_view(cost)
        assert set(view["price_table"]) == {"deepseek-flash"} and set(view["simulator"]) == {"deepseek"}


def _recall() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("codex", "codex", 22, 40, 0.55, 0.4, 0.7, 4_000, "verbatim reader (retention ceiling)"),
            ("det", "det", 36, 40, 0.9, 0.8, 0.975, 16_000, "verbatim reader (retention ceiling)"),
        ],
        columns=[
            "strategy",
            "strategy_label",
            "retained",
            "n",
            "recall",
            "ci_low",
            "ci_high",
            "projection_tokens",
            "reader_label",
        ],
    )


def _run(tmp_path, cost: pd.DataFrame):
    d = runfolder.resolve(tmp_path / "run")
    runfolder.save_table(_recall(), d, "exam_recall")
    full = cost.assign(compaction_cost_cached=cost["compaction_cost_cold"], break_even="never", cost_per_point=0.01)
    runfolder.save_table(full, d, "cost")
    return d


def test_the_headline_of_a_run_folder_follows_its_record(tmp_path):
    d = _run(tmp_path, choice.mark_shown(_cost(), "gpt-4.1", "openai"))
    h = share.headline_table(d).set_index("strategy")
    assert set(h["currency"]) == {"USD"} and h.loc["det", "compaction_cost_cold"] == 2.0


def test_an_old_run_folder_without_the_record_keeps_todays_default(tmp_path):
    d = _run(tmp_path, _cost())  # written before the `shown` column existed
    h = share.headline_table(d).set_index("strategy")
    assert set(h["currency"]) == {"CNY"} and set(h["simulator"]) == {"deepseek"}
    assert h.loc["codex", "compaction_cost_cold"] == 1.0
