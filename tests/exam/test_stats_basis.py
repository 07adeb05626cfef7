"""stats (issue 45): decoys a stand-in answered are not measured; one rule for the rank-agreement verdict."""

import pandas as pd
import pytest

from compaction_lab.exam.statistics import stats

NAN = float("nan")


def _answers(reader="verbatim", stand_in=None, decoys=((True,), (True,))):
    """Three real questions and the given decoys (each ``(correct,)``) of one arm."""
    rows = [
        {"strategy": "a", "case_id": "c", "question_id": f"q{i}", "pointer": "tool", "decoy": False, "correct": True}
        for i in range(3)
    ]
    rows += [
        {"strategy": "a", "case_id": "c", "question_id": f"d{i}", "pointer": "tool", "decoy": True, "correct": c}
        for i, (c,) in enumerate(decoys)
    ]
    df = pd.DataFrame(rows).assign(reader=reader, reader_label=str(reader))
    if stand_in is not None:
        df["stand_in"] = stand_in
    return df


@pytest.mark.parametrize("reader", ["verbatim", "searcher"])
def test_decoys_of_a_stand_in_reader_are_null_never_all_abstained(reader):
    r = stats.recall_table(_answers(reader)).iloc[0]
    assert pd.isna(r["decoys_fallen"]) and pd.isna(r["decoys_n"])
    assert (r["retained"], r["n"]) == (3, 3)  # the real questions are counted as before


def test_the_stand_in_column_says_not_measured_even_for_an_unregistered_reader():
    t = stats.recall_table(_answers("model", stand_in=True))
    assert t[["decoys_fallen", "decoys_n"]].isna().all().all()
    assert str(t["decoys_fallen"].dtype) == "Int64" and str(t["decoys_n"].dtype) == "Int64"


def test_a_model_reader_counts_its_decoys_and_only_those_it_could_fall_for():
    r = stats.recall_table(_answers("model", stand_in=False, decoys=((False,), (True,)))).iloc[0]
    assert (r["decoys_fallen"], r["decoys_n"]) == (1, 2)
    mixed = _answers("model", decoys=((False,), (True,)))
    mixed["stand_in"] = [False] * 3 + [False, True]  # the second decoy came from a stand-in: left out
    r = stats.recall_table(mixed).iloc[0]
    assert (r["decoys_fallen"], r["decoys_n"]) == (1, 1)


def test_no_decoy_asked_is_zero_of_zero_not_null():
    r = stats.recall_table(_answers("verbatim", decoys=())).iloc[0]
    assert (r["decoys_fallen"], r["decoys_n"]) == (0, 0)


@pytest.mark.parametrize(
    ("agreement", "verdict"),
    [
        (stats.RankAgreement(NAN, NAN, NAN, 1, 3, "1 arm"), stats.NOT_MEASURED),
        (stats.RankAgreement(0.88, NAN, NAN, 10, 1, "one session"), stats.CANNOT_TELL),
        (stats.RankAgreement(0.2, -0.45, 0.8, 5, 6, "m"), stats.CANNOT_TELL),
        (stats.RankAgreement(0.5, 0.0, 0.9, 5, 6, "m"), stats.CANNOT_TELL),  # a bound on 0 does not exclude it
        (stats.RankAgreement(0.51, 0.12, 1.0, 5, 3, "m"), stats.AGREE),
        (stats.RankAgreement(-0.7, -0.95, -0.1, 5, 6, "m"), stats.DISAGREE),
    ],
)
def test_the_verdict_rule_covers_every_branch(agreement, verdict):
    assert agreement.verdict == verdict
