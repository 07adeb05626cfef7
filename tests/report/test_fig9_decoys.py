"""Figure 9 (issue 45): decoys only a stand-in answered read "not measured", never "2/2 abstained"."""

import json

import pandas as pd

from compaction_lab.exam import readers
from compaction_lab.exam.exams import open_book
from compaction_lab.report.figures.open_book import fig9_open_book


def _answers(stand_in=True, reader="searcher"):
    rows = [{"outcome": "from_projection", "decoy": False}] * 3 + [{"outcome": "decoy_abstained", "decoy": True}] * 2
    return pd.DataFrame(rows).assign(
        round=1, book="open", search="allowed", reader=reader, reader_label="searcher stand-in", stand_in=stand_in
    )


def test_a_stand_in_round_draws_no_decoy_bar_and_says_not_measured():
    spec = fig9_open_book(open_book.outcome_table(_answers())).to_dict()
    text = json.dumps(spec, ensure_ascii=False)
    assert readers.DECOYS_NOT_MEASURED in spec["title"]["subtitle"]
    assert "decoy_abstained" not in text


def test_a_table_saved_before_decoys_could_be_null_still_says_not_measured():
    old = open_book.outcome_table(_answers()).assign(decoy_abstained=2, questions=5)  # as stored before issue 45
    spec = fig9_open_book(old).to_dict()
    assert readers.DECOYS_NOT_MEASURED in spec["title"]["subtitle"]
    assert "decoy_abstained" not in json.dumps(spec)


def test_a_model_reader_round_keeps_its_decoy_bar():
    table = open_book.outcome_table(_answers(stand_in=False, reader="model").assign(reader_label="model reader: m"))
    spec = fig9_open_book(table).to_dict()
    assert "decoy_abstained" in json.dumps(spec) and readers.DECOYS_NOT_MEASURED not in json.dumps(spec)
