"""The one choice of price table and cache rule (issue 48): the sessions' model family, recorded in the cost table."""

import random

import pandas as pd
import pytest

from compaction_lab.core.session import Session
from compaction_lab.cost import choice
from compaction_lab.cost import model as cost
from compaction_lab.endpoints import prices
from compaction_lab.ingest import synthetic

ALL = ["deepseek-flash", "deepseek-v4-pro", "gpt-4.1", "claude-sonnet-4-6"]


def _imported(i: int, model: str | None = None, fmt: str = "claude_code", **meta) -> Session:
    if model is not None:
        meta["model"] = model
    return Session(id=f"s{i}", source_format=fmt, records=(), metadata=meta)


def _synthetic(i: int) -> Session:
    return Session(id=f"syn{i}", source_format="synthetic", records=(), metadata={"generator": "x"})


def test_family_tables_are_shipped_and_of_their_family():
    for family, name in choice.FAMILY_TABLES:
        assert prices.load_price_table(name).provider == family
    assert prices.load_price_table(choice.SEED_TABLE).currency == "CNY"


def test_generated_chains_get_the_seeds_cny_table():
    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=20_000))
    pick = choice.choose_figure([chain.session], "auto", "auto", ALL)
    assert (pick.table, pick.simulator) == ("deepseek-flash", "deepseek")
    assert "synthetic" in pick.reason and pick.reason in pick.line and "deepseek-flash prices (CNY)" in pick.line
    assert pick.price_tables == tuple(ALL)


@pytest.mark.parametrize(
    "models, table, rule",
    [
        (["claude-sonnet-4-5-20250929", "claude-opus-4-1"], "claude-sonnet-4-6", "anthropic"),
        (["anthropic/claude-haiku-4-5"], "claude-sonnet-4-6", "anthropic"),
        (["gpt-5-codex", "gpt-4.1-mini"], "gpt-4.1", "openai"),
        (["o3", "o4-mini"], "gpt-4.1", "openai"),
        (["deepseek-chat", "deepseek-v4-pro"], "deepseek-flash", "deepseek"),
    ],
)
def test_imported_logs_get_their_model_familys_table(models, table, rule):
    sessions = [_imported(i, m) for i, m in enumerate(models)]
    pick = choice.choose_figure(sessions, "auto", "auto", ALL)
    assert (pick.table, pick.simulator, pick.currency) == (table, rule, prices.load_price_table(table).currency)
    family = prices.load_price_table(table).provider
    assert f"model family is {family}" in pick.reason and "most sessions" in pick.reason


def test_the_family_of_most_sessions_wins_and_unknown_models_do_not_vote():
    sessions = [_imported(0, "gpt-5"), _imported(1, "claude-sonnet-4-6"), _imported(2, "gpt-4o")]
    sessions += [_imported(3 + i, m) for i, m in enumerate(["llama-3-70b", None, "mystery"])]
    table, why = choice.table_for_sessions(sessions)
    assert table == "gpt-4.1"
    assert "OpenAI 2" in why and "Anthropic 1" in why and "3 with no model of a priced family" in why
    # The order of the sessions does not matter.
    shuffled = sessions[:]
    random.Random(7).shuffle(shuffled)
    assert choice.table_for_sessions(shuffled) == (table, why)


def test_a_tie_is_broken_by_the_fixed_order():
    order = [name for _, name in choice.FAMILY_TABLES]
    for a, b in [("claude-sonnet-4-6", "gpt-5"), ("gpt-5", "claude-sonnet-4-6")]:
        table, why = choice.table_for_sessions([_imported(0, a), _imported(1, b)])
        assert table == min("claude-sonnet-4-6", "gpt-4.1", key=order.index) and "tie broken" in why
    # A synthetic session counts for the seed's family, which comes first.
    table, why = choice.table_for_sessions([_synthetic(0), _imported(1, "claude-sonnet-4-6")])
    assert table == choice.SEED_TABLE and "tie broken" in why


def test_no_priced_family_falls_back_to_the_seeds_table():
    sessions = [_imported(0, None, "chat_jsonl"), _imported(1, "qwen3-coder", "opencode"), _imported(2, "")]
    table, why = choice.table_for_sessions(sessions)
    assert table == choice.SEED_TABLE and "none of the 3 imported sessions" in why
    assert choice.table_for_sessions([]) == (choice.SEED_TABLE, "no sessions: the seed report's table")


def test_the_models_list_is_read_when_model_is_missing():
    s = _imported(0, None, models=["gpt-5-codex", "claude-sonnet-4-6"])
    assert choice.session_model(s) == "gpt-5-codex"
    assert choice.table_for_sessions([s])[0] == "gpt-4.1"


def test_auto_adds_its_table_to_the_tables_priced():
    pick = choice.choose_figure([_imported(0, "claude-sonnet-4-6")], "auto", "auto", ["deepseek-flash"])
    assert pick.table == "claude-sonnet-4-6" and pick.price_tables == ("deepseek-flash", "claude-sonnet-4-6")
    assert "added to price_tables" in pick.reason


def test_an_explicit_table_is_kept_and_must_be_priced():
    pick = choice.choose_figure([_imported(0, "claude-sonnet-4-6")], "gpt-4.1", "auto", ALL)
    assert (pick.table, pick.simulator) == ("gpt-4.1", "openai") and "as given" in pick.reason
    with pytest.raises(ValueError, match=r"figure_table = 'gpt-4.1': not among price_tables"):
        choice.choose_figure([], "gpt-4.1", "auto", ["deepseek-flash"])


def test_the_simulator_must_be_one_the_table_is_priced_under():
    claude = [_imported(0, "claude-sonnet-4-6")]
    with pytest.raises(ValueError, match=r"figure_simulator = 'deepseek': figure_table 'claude-sonnet-4-6'"):
        choice.choose_figure(claude, "auto", "deepseek", ALL)
    assert choice.choose_figure(claude, "auto", "none", ALL).simulator == "none"
    # Listed simulators without the table's own rule: auto takes the first listed one but `none`.
    pick = choice.choose_figure(claude, "auto", "auto", ALL, ["none", "openai"])
    assert pick.simulator == "openai" and "'anthropic' not priced" in pick.reason
    assert choice.choose_figure(claude, "auto", "auto", ALL, ["none"]).simulator == "none"


def _cost_rows() -> pd.DataFrame:
    rows = [
        {"strategy": s, "price_table": t, "simulator": sim, "total_cost": float(i)}
        for i, (s, t, sim) in enumerate(
            (s, t, sim)
            for s in ("codex", "det")
            for t, sims in (("deepseek-flash", ("deepseek", "none")), ("gpt-4.1", ("openai", "none")))
            for sim in sims
        )
    ]
    return pd.DataFrame(rows)


def test_mark_shown_records_the_pair_and_shown_pair_reads_it_back():
    raw = _cost_rows()
    assert choice.shown_pair(raw) is None  # no record (an older run)
    marked = choice.mark_shown(raw, "gpt-4.1", "none")
    assert "shown" not in raw.columns  # a copy
    assert marked["shown"].dtype == bool and marked["shown"].sum() == 2
    assert set(marked[marked["shown"]]["strategy"]) == {"codex", "det"}
    assert choice.shown_pair(marked) == ("gpt-4.1", "none")
    assert choice.shown_pair(choice.mark_shown(raw, "nope", "none")) is None  # marks nothing


def test_marking_keeps_the_cost_tables_columns():
    assert "shown" in cost.COST_COLUMNS
    empty = pd.DataFrame([], columns=cost.COST_COLUMNS)
    assert list(choice.mark_shown(empty, "deepseek-flash", "deepseek").columns) == cost.COST_COLUMNS
