"""open_book (issue 45): decoys only a stand-in answered are "not measured", never "2/2 abstained"."""

import pandas as pd

from compaction_lab.exam.exams import open_book


def _answers(reader="searcher", stand_in=True, fallen=0):
    """One round: three real answers from the projection and two decoys (`fallen` of them fallen for)."""
    rows = [{"outcome": "from_projection", "decoy": False} for _ in range(3)]
    rows += [{"outcome": "wrong" if i < fallen else "decoy_abstained", "decoy": True} for i in range(2)]
    return pd.DataFrame(rows).assign(
        round=1, book="open", search="allowed", reader=reader, reader_label=f"{reader} (test)", stand_in=stand_in
    )


def test_a_stand_in_round_leaves_its_decoys_null_and_the_view_says_not_measured():
    t = open_book.outcome_table(_answers())
    assert pd.isna(t.loc[1, "decoy_abstained"]) and t.loc[1, "decoys"] == 2 and t.loc[1, "questions"] == 5
    assert str(t["decoy_abstained"].dtype) == "Int64"
    view = open_book.outcome_view(t)
    assert view.loc[1, "decoy_abstained"] == open_book.DECOYS_NOT_MEASURED == "not measured"
    assert "2" not in str(view.loc[1, "decoy_abstained"])


def test_a_model_reader_round_counts_its_decoys():
    t = open_book.outcome_table(_answers("model", stand_in=False, fallen=1))
    assert (t.loc[1, "decoy_abstained"], t.loc[1, "wrong"], t.loc[1, "decoys"]) == (1, 1, 2)
    assert open_book.outcome_view(t).loc[1, "decoy_abstained"] == "1"
    # A registered decoy-blind reader is not measured even when its answers do not say stand_in.
    assert pd.isna(open_book.outcome_table(_answers("verbatim", stand_in=False)).loc[1, "decoy_abstained"])
