"""Several draws per question (issue 31): each its own request, rows per draw, intervals and tests that know it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from compaction_lab import summarize
from compaction_lab.endpoints import shared
from compaction_lab.exam.exams import closed
from compaction_lab.exam.readers import VerbatimReader
from compaction_lab.exam.readers.model import ModelReader
from compaction_lab.exam.statistics import power, stats
from compaction_lab.ingest import synthetic
from compaction_lab.run import params, runner
from compaction_lab.store.ledger import open_ledger
from compaction_lab.strategies import CompactionContext
from tests.fake_openai_server import FakeOpenAIServer
from tests.helpers import case_at_end

CTX = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("extractive"))
ARMS = ["full", "codex"]


@pytest.fixture(scope="module")
def setup():
    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=12000))
    return case_at_end(chain, 3000, 3)


def test_each_draw_is_its_own_request_recorded_apart_and_a_rerun_sends_nothing(setup, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    case, sessions = setup
    shared._CLIENTS.clear()
    with FakeOpenAIServer() as server:
        cfg = {"base_url": server.base_url, "model": "m", "api_key_env": "", "max_retries": 0, "concurrency": 2}
        cfg["ledger"] = str(tmp_path / "ledger.sqlite")
        first = closed.run_closed([case], sessions, ARMS, CTX, ModelReader(cfg, temperature=0.7), draws=3).answers
        sent = server.count()
        shared._CLIENTS.clear()  # a resumed run: a new client on the same ledger
        again = closed.run_closed([case], sessions, ARMS, CTX, ModelReader(cfg, temperature=0.7), draws=3).answers
        assert server.count() == sent  # nothing sent twice
        bodies = Counter(server.fingerprints())
        temperatures = {r["body"].get("temperature") for r in server.requests}
    n = len(case.questions) * len(ARMS)
    assert len(first) == n * 3
    drawn = first.groupby(["strategy", "question_id"])["draw"].apply(sorted)
    assert all(d == [0, 1, 2] for d in drawn)
    pd.testing.assert_frame_equal(first, again)
    # The same body asked three times on purpose: sent three times, each a ledger entry of its own.
    assert set(bodies.values()) == {3} and sent == 3 * len(bodies)
    assert temperatures == {0.7}
    calls = open_ledger(cfg["ledger"]).calls()
    assert len(calls) == sent and calls["request_fingerprint"].is_unique
    shared._CLIENTS.clear()


def test_more_than_one_draw_needs_a_model_reader(setup):
    case, sessions = setup
    with pytest.raises(ValueError, match="draws=2 needs a model reader"):
        closed.run_closed([case], sessions, ARMS, CTX, VerbatimReader(), draws=2)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="draws must be a whole number"):
            closed.run_closed([case], sessions, ARMS, CTX, VerbatimReader(), draws=bad)


def test_a_profile_with_draws_and_a_stand_in_reader_is_an_error_naming_draws():
    smoke = runner.load_profile("smoke")
    problems = params.problems(smoke.with_parameters({"draws": 3}))
    assert any(p.startswith("draws = 3") and "reader = model" in p for p in problems), problems
    assert any("draws = 0" in p for p in params.problems(smoke.with_parameters({"draws": 0})))
    hot = params.problems(smoke.with_parameters({"reader_temperature": 2.5}))
    assert any(p.startswith("reader_temperature = 2.5") for p in hot), hot
    assert not params.problems(smoke.with_parameters({"reader_temperature": 0.7}))


def _draw_answers(rates_a, rates_b, draws, seed=0, sessions=4):
    """Answers of two arms whose per-question accuracies are given, `draws` draws each."""
    rng = np.random.default_rng(seed)
    rows = []
    for q, (pa, pb) in enumerate(zip(rates_a, rates_b, strict=True)):
        for arm, pr in (("a", pa), ("b", pb)):
            for d in range(draws):
                rows.append(
                    {
                        "strategy": arm,
                        "strategy_label": arm,
                        "session_id": f"s{q % sessions}",
                        "case_id": f"c{q % sessions}",
                        "question_id": f"q{q}",
                        "source_order": q,
                        "pointer": "assistant",
                        "category": "id",
                        "decoy": False,
                        "correct": bool(rng.random() < pr),
                        "projection_tokens": 100,
                        "over_window": False,
                        "draw": d,
                    }
                )
    return pd.DataFrame(rows)


def test_with_draws_a_question_counts_once_in_the_paired_test():
    answers = _draw_answers([0.9] * 30, [0.2] * 30, draws=3)
    (row,) = stats.paired_table(answers).to_dict("records")
    assert row["test"].startswith("sign-flip permutation over questions (draws summed)")
    assert row["n_paired"] == 30  # questions, not question x draw
    assert row["b"] + row["c"] <= 30 and row["b"] > row["c"]
    k = answers.groupby(["strategy", "question_id"])["correct"].sum()
    assert row["b"] == int((k["a"] > k["b"]).sum()) and row["c"] == int((k["a"] < k["b"]).sum())
    assert row["recall_a"] == pytest.approx(answers[answers.strategy == "a"]["correct"].mean())
    assert row["p_value"] < 0.01 and row["ahead"] == "a"
    same = _draw_answers([0.5] * 30, [0.5] * 30, draws=3, seed=1)
    assert stats.paired_table(same).iloc[0]["p_value"] > 0.01


def test_with_draws_recall_intervals_resample_questions_not_answers():
    # Questions either always or never right: 3 draws add no information, so the interval must not shrink.
    rates = [1.0] * 10 + [0.0] * 10
    one = _draw_answers(rates, rates, draws=1)
    three = _draw_answers(rates, rates, draws=3)
    r1 = stats.recall_table(one, n_boot=500).set_index("strategy").loc["a"]
    r3 = stats.recall_table(three, n_boot=500).set_index("strategy").loc["a"]
    assert "hierarchical" in r3["ci_method"]
    assert r3["ci_high"] - r3["ci_low"] >= 0.9 * (r1["ci_high"] - r1["ci_low"])


def test_the_draw_tables_give_consistency_and_the_detectable_difference_per_reader():
    steady = _draw_answers([1.0] * 10 + [0.0] * 10, [0.0] * 20, draws=3)  # arm a never changes its answer
    noisy = _draw_answers([0.5] * 20, [0.5] * 20, draws=3, seed=2)
    both = pd.concat(
        [steady.assign(reader="model", reader_label="model reader: x"), noisy.assign(reader="m2", reader_label="y")]
    )
    both.loc[both["question_id"] == "q0", "decoy"] = True  # decoys measure abstention: left out of both tables
    tables = closed.draws_tables(both, n_boot=200)
    draws = tables["exam_draws"].set_index(["reader", "strategy"])
    assert draws.loc[("model", "a"), "consistent"] == 1.0 and draws.loc[("model", "a"), "draws"] == 3
    assert draws.loc[("m2", "a"), "consistent"] < 0.8  # coin flips rarely agree three times
    assert draws.loc[("model", "a"), "n_questions"] == 19  # the decoy's question left out
    power_rows = tables["exam_power"].set_index("reader")
    assert list(tables["exam_power"].columns[:2]) == ["reader", "reader_label"] and len(power_rows) == 2
    assert power_rows.loc["model", "resolvable"] and power_rows.loc["model", "mdd"] > 0
    assert not power_rows.loc["m2", "resolvable"]


def test_with_draws_a_session_row_counts_questions_not_answers():
    answers = _draw_answers([1.0] * 8, [0.0] * 8, draws=3, sessions=2)
    one = _draw_answers([1.0] * 8, [0.0] * 8, draws=1, sessions=2)
    by3 = stats.session_table(answers).set_index(["strategy", "session_id"])
    by1 = stats.session_table(one).set_index(["strategy", "session_id"])
    assert (by3["n"] == 4).all() and by3.loc[("a", "s0"), "retained"] == 4.0
    # Three identical draws of 4 questions are still 4 questions: the same interval as one draw each.
    pd.testing.assert_frame_equal(by3[["ci_low", "ci_high"]], by1[["ci_low", "ci_high"]])


def test_question_consistency_counts_questions_by_draws_right():
    """Which questions are noisy: right in some of their draws and not in others (`power.question_consistency`)."""
    rows = _draw_answers([1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], 3)
    # Question q1 of arm a: right in exactly one of three draws.
    rows.loc[(rows["strategy"] == "a") & (rows["question_id"] == "q1") & (rows["draw"] == 0), "correct"] = True
    t = power.question_consistency(rows, by=("strategy",))
    a = t[t["strategy"] == "a"].set_index("right")
    assert list(a.index) == [0, 1, 2, 3] and list(a["questions"]) == [1, 1, 0, 2]
    assert list(a["noisy"]) == [False, True, True, False] and a["share"].sum() == pytest.approx(1.0)
    b = t[t["strategy"] == "b"].set_index("right")
    assert list(b["questions"]) == [0, 0, 0, 4]  # always right: nothing noisy


def test_the_open_book_asks_each_question_every_draw_in_every_round(setup, tmp_path, monkeypatch):
    """The open book's model reader is asked `draws` times per question and round, each a ledger entry of its own;
    a stand-in with draws > 1 is refused."""
    from compaction_lab import strategies
    from compaction_lab.exam.exams import open_book
    from compaction_lab.exam.readers import SearcherReader, reader_factory
    from compaction_lab.store.archive import Archive

    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    case, sessions = setup
    proj = strategies.compact(sessions[case.session_id], "codex", case.cut, CTX)
    rounds = open_book.make_rounds(open_book.DEFAULT_WORDINGS)[3:4]  # the closed arm: one request per answer
    shared._CLIENTS.clear()
    with Archive(tmp_path / "archive.sqlite") as archive, FakeOpenAIServer() as server:
        cfg = {"base_url": server.base_url, "model": "m", "api_key_env": "", "max_retries": 0, "concurrency": 2}
        cfg["ledger"] = str(tmp_path / "ledger.sqlite")
        factory = reader_factory("model", model=cfg, temperature=0.7)
        df = open_book.run_open_book([case], sessions, {case.id: proj}, archive, factory, rounds=rounds, draws=3)
        sent = server.count()
        with pytest.raises(ValueError, match="draws=2 needs a model reader"):
            open_book.run_open_book([case], sessions, {case.id: proj}, archive, SearcherReader, rounds=rounds, draws=2)
    assert len(df) == len(case.questions) * 3 and sent == len(df)
    assert all(sorted(d) == [0, 1, 2] for d in df.groupby("question_id")["draw"].apply(list))
    outcomes = open_book.outcome_table(df)
    assert int(outcomes["questions"].iloc[0]) == len(df) and int(outcomes["draws"].iloc[0]) == 3
    assert "draws" not in open_book.outcome_table(df[df["draw"] == 0]).columns  # one draw: the table as before
    shared._CLIENTS.clear()
