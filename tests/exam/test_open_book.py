from dataclasses import dataclass

import pytest

from compaction_lab import strategies
from compaction_lab.exam.exams.open_book import (
    COLUMNS,
    DEFAULT_WORDINGS,
    OUTCOMES,
    REQUIRED_WORDING,
    classify,
    make_rounds,
    outcome_table,
    run_open_book,
    shape_tools_of,
    stand_in_note,
    tool_calls_per_round,
)
from compaction_lab.exam.readers import ReaderAnswer, SearcherReader
from compaction_lab.exam.types import NOT_FOUND, Case, Question
from compaction_lab.ingest.synthetic import SyntheticSpec, generate_chains
from compaction_lab.store.archive import Archive
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import question_of


@pytest.fixture(scope="module")
def exam(tmp_path_factory):
    """One small synthetic chain compacted by Codex (no summariser: values really are dropped), its archive."""
    chain = generate_chains(SyntheticSpec(n_chains=1, window_tokens=20000))[0]
    s = chain.session
    cut = int(len(s.records) * 0.8)
    facts = [f for f in chain.facts if f.source_order < cut] + list(chain.decoys)
    case_id = f"{s.id}-c0"
    questions = tuple(question_of(f, case_id) for f in facts)
    case = Case(id=case_id, session_id=s.id, cut=cut, tail_start=cut, questions=questions)
    # without a summariser Codex does not compact (issue 27 item 6); the placeholder compaction drops values
    ctx = CompactionContext(window=20000, output_ceiling=4000, params={"on_failure": "placeholder"})
    proj = strategies.compact(s, "codex", cut, ctx)
    archive = Archive(tmp_path_factory.mktemp("open_book") / "archive.sqlite")
    df = run_open_book([case], {s.id: s}, {case.id: proj}, archive, k=3)
    yield case, s, proj, archive, df
    archive.close()


def test_rounds():
    ROUNDS = make_rounds()
    assert [r.number for r in ROUNDS] == [1, 2, 3, 4, 5]
    assert [r.wording for r in ROUNDS[:3]] == list(DEFAULT_WORDINGS)
    assert [r.book for r in ROUNDS] == ["open", "open", "open", "closed", "open"]
    assert [r.search for r in ROUNDS] == ["allowed", "allowed", "allowed", "never", "required"]
    assert ROUNDS[3].wording == ROUNDS[2].wording  # the control repeats round 3's wording
    assert ROUNDS[4].wording == REQUIRED_WORDING
    custom = make_rounds(["a", "b", "c"], "must")
    assert [r.wording for r in custom] == ["a", "b", "c", "c", "must"]
    with pytest.raises(ValueError):
        make_rounds(["a", "b"])


def test_all_five_rounds_run(exam):
    case, _, _, _, df = exam
    assert list(df.columns) == COLUMNS
    assert sorted(df["round"].unique()) == [1, 2, 3, 4, 5]
    assert (df.groupby("round").size() == len(case.questions)).all()
    assert set(df["outcome"]) <= set(OUTCOMES)
    assert (df["strategy"] == "codex").all()


def test_outcomes_sum_to_the_questions_per_round(exam):
    case, _, _, _, df = exam
    t = outcome_table(df)
    assert list(t.index) == [1, 2, 3, 4, 5]
    # The searcher stand-in cannot fall for a decoy: its decoys are counted, their outcome not measured.
    assert t["decoy_abstained"].isna().all() and (t["decoys"] == len(case.decoys)).all()
    assert (t[list(OUTCOMES)].sum(axis=1) + t["decoys"] == len(case.questions)).all()
    assert (t["questions"] == len(case.questions)).all()
    assert t.loc[4, "recovered_by_search"] == 0


def test_search_recovers_values_the_projection_dropped(exam):
    case, _, proj, _, df = exam
    r1 = df[df["round"] == 1]
    assert (r1["outcome"] == "recovered_by_search").sum() > 0
    recovered = r1[r1["outcome"] == "recovered_by_search"]
    assert not recovered["in_projection"].any() and recovered["in_archive"].all()
    assert (recovered["tool_calls"] > 0).all()
    # the control (no tools) leaves exactly those values in the archive, never looked up
    r4 = df[df["round"] == 4].set_index("question_id")
    assert (r4.loc[recovered["question_id"], "outcome"] == "in_archive_never_looked").all()
    # the projection really dropped most values: Codex without a summariser keeps user turns only
    assert (~df.loc[(df["round"] == 1) & ~df["decoy"], "in_projection"]).sum() >= 3


def test_round_4_makes_no_tool_calls_and_round_5_always_searches(exam):
    case, _, _, _, df = exam
    calls = tool_calls_per_round(df)
    assert calls.loc[4, "tool_calls"] == 0 and calls.loc[4, "book"] == "closed"
    assert calls.loc[5, "questions_with_calls"] == len(case.questions)
    assert (calls.loc[[1, 2, 3], "tool_calls"] > 0).all()
    assert (calls["tool_calls"] == calls["search_calls"] + calls["get_calls"]).all()
    # "allowed": no call for a value already in the projection
    r1 = df[df["round"] == 1]
    assert (r1.loc[r1["in_projection"], "tool_calls"] == 0).all()


def test_rounds_1_to_3_are_identical_offline(exam):
    _, _, _, _, df = exam
    cols = ["question_id", "given", "outcome", "tool_calls", "searched_entry_ids"]
    r = [df[df["round"] == n][cols].reset_index(drop=True) for n in (1, 2, 3)]
    assert r[0].equals(r[1]) and r[1].equals(r[2])
    assert "identical by construction" in stand_in_note


def test_the_stand_in_is_labelled_in_every_table(exam):
    _, _, _, _, df = exam
    assert df["stand_in"].all() and (df["reader"] == "searcher").all()
    assert df["reader_label"].str.contains("stand-in").all()
    assert outcome_table(df)["reader"].str.contains("stand-in").all()
    assert tool_calls_per_round(df)["reader"].str.contains("stand-in").all()


def test_from_projection_matches_between_the_open_and_closed_arms(exam):
    _, _, _, _, df = exam
    t = outcome_table(df)
    assert t.loc[1, "from_projection"] == t.loc[4, "from_projection"]
    assert t.loc[5, "recovered_by_search"] >= t.loc[1, "recovered_by_search"]


def test_shape_tools_come_from_the_projection(exam):
    _, _, proj, _, _ = exam
    tools = shape_tools_of(proj)
    assert tools and all("function" in t or "name" in t for t in tools)


def test_missing_inputs_raise(exam):
    case, s, proj, archive, _ = exam
    with pytest.raises(KeyError):
        run_open_book([case], {}, {case.id: proj}, archive)
    with pytest.raises(KeyError):
        run_open_book([case], {s.id: s}, {}, archive)


@dataclass(frozen=True)
class LazyReader:
    """A model-like reader that never uses its tools and abstains unless told the value (test only)."""

    search: str = "allowed"
    k: int = 3
    name: str = "lazy"
    label: str = "lazy reader (test)"
    stand_in: bool = False

    def answer(self, messages, question, tools=(), **_):
        return ReaderAnswer(NOT_FOUND)


def test_a_reader_that_never_looks_leaves_values_in_the_archive(exam):
    case, s, proj, archive, _ = exam
    df = run_open_book([case], [s], {case.id: proj}, archive, reader_factory=LazyReader, rounds=make_rounds()[:1])
    real = df[~df["decoy"]]
    assert (df["tool_calls"] == 0).all()
    assert set(real["outcome"]) <= {"in_archive_never_looked", "wrong"}
    assert (real.loc[~real["in_projection"], "outcome"] == "in_archive_never_looked").all()
    assert (real.loc[real["in_projection"], "outcome"] == "wrong").all()  # missed what it could see
    assert (df.loc[df["decoy"], "outcome"] == "decoy_abstained").all()
    assert (df["reader_label"] == "lazy reader (test)").all()


def test_classify():
    q = Question("q", "c", "tool", "tool_returned_id", "What ID?", "ORD-1", source_entry_id="e1", source_order=1)
    d = Question("d", "c", "tool", "tool_returned_id", "What ID?", "ORD-9", decoy=True)
    assert classify(q, True, "ORD-1", True, True, False, 0) == "from_projection"
    assert classify(q, True, "ORD-1", True, True, True, 3) == "from_projection"  # required round, was there anyway
    assert classify(q, True, "ORD-1", False, True, True, 2) == "recovered_by_search"
    assert classify(q, False, NOT_FOUND, False, True, False, 1) == "in_archive_never_looked"
    assert classify(q, False, NOT_FOUND, False, True, True, 2) == "wrong"  # fetched it and still missed it
    assert classify(q, False, "ORD-2", False, True, False, 0) == "wrong"  # answered a wrong value
    assert classify(q, False, NOT_FOUND, False, False, False, 0) == "wrong"  # nowhere to be found
    assert classify(q, False, NOT_FOUND, True, True, False, 0) == "wrong"  # missed what it could see
    assert classify(d, True, NOT_FOUND, False, False, False, 1) == "decoy_abstained"
    assert classify(d, False, "ORD-9", False, False, False, 1) == "wrong"


def test_searcher_factory_signature_matches():
    r = SearcherReader(search="required", k=5)
    assert (r.search, r.k) == ("required", 5)
