"""Figure 12 and the report's Inspect block: models run through Inspect AI beside the suite's readers."""

from __future__ import annotations

import vl_convert as vlc

from compaction_lab.exam import imported
from compaction_lab.report import charts, figures, share
from tests.exam.test_imported import _closed, _folder, _inspect

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png(chart) -> bytes:
    return vlc.vegalite_to_png(chart.to_dict(), scale=1)


def test_fig12_is_notebook_03s_and_draws_every_reader(tmp_path):
    assert figures.figure("fig12_readers").notebook == "03_closed_book_exam"
    closed = _closed()
    d = _folder(tmp_path, closed, _inspect(closed, 3, {"q0": 3}))
    chart = charts.fig12_readers(imported.readers_table(d, n_boot=100))
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert spec["title"]["text"] == figures.title_of("fig12_readers")
    values = spec["datasets"][next(iter(spec["datasets"]))]
    assert {v["who"] for v in values} == {"verbatim reader (retention ceiling)", "openai/m (Inspect)"}
    assert imported.NONE_IMPORTED_SHORT not in str(spec["title"].get("subtitle"))
    assert _png(chart).startswith(PNG_SIGNATURE)


def test_fig12_without_imported_answers_says_how_to_add_them_and_empty_is_no_data(tmp_path):
    spec = charts.fig12_readers(imported.readers_table(_folder(tmp_path, _closed()), n_boot=100)).to_dict()
    assert imported.NONE_IMPORTED_SHORT in str(spec["title"]["subtitle"])
    empty = charts.fig12_readers(imported.readers_table(tmp_path / "none", n_boot=10))
    assert _png(empty).startswith(PNG_SIGNATURE)


def test_the_report_block_names_the_model_its_logs_and_every_reader(tmp_path):
    assert share.inspect_block(_folder(tmp_path / "a", _closed())) is None  # nothing imported: no block
    closed = _closed()
    block = share.inspect_block(_folder(tmp_path / "b", closed, _inspect(closed, 2, {"q0": 2, "q1": 1})))
    assert block is not None and "openai/m (Inspect)" in block.lines[0] and "a.eval" in block.lines[0]
    assert list(block.readers.columns) == list(share.READERS_VIEW.values())
    assert list(block.readers["answers from"]) == [imported.SUITE, imported.INSPECT]
    assert "3 of 6 × 2" in block.html() and "<script" not in block.html()


def test_fig13_counts_noisy_questions_per_arm_and_one_draw_is_no_data():
    import numpy as np

    from tests.exam.test_draws import _draw_answers

    answers = _draw_answers(np.linspace(0.1, 0.9, 12), np.r_[np.ones(6), np.zeros(6)], 3).assign(
        reader="model", reader_label="model reader: m"
    )
    chart = charts.fig13_consistency(answers)
    spec = chart.to_dict()
    assert spec["title"]["text"] == figures.title_of("fig13_consistency")
    values = spec["datasets"][next(iter(spec["datasets"]))]
    b = {v["column"]: v["questions"] for v in values if v["row"] == "b"}
    assert b == {"0 of 3": 6, "1 of 3": 0, "2 of 3": 0, "3 of 3": 6}  # b's questions never disagree
    assert _png(chart).startswith(PNG_SIGNATURE)
    one = charts.fig13_consistency(answers[answers["draw"] == 0]).to_dict()
    assert "One draw per question" in str(one)


def test_the_report_says_which_pair_this_sample_can_resolve():
    import numpy as np

    from compaction_lab.exam.exams import closed
    from tests.exam.test_draws import _draw_answers

    answers = _draw_answers(np.full(40, 0.9), np.full(40, 0.1), 3).assign(
        reader="model", reader_label="model reader: m"
    )
    table = closed.draws_tables(answers, n_boot=50)["exam_power"]
    (line,) = share.power_lines(table)
    assert line.startswith("model reader: m, 3 draws per question: 1 of 1 pairs") and "is resolvable" in line
    close = _draw_answers(np.full(8, 0.7), np.full(8, 0.4), 2).assign(reader="model", reader_label="model reader: m")
    (line,) = share.power_lines(closed.draws_tables(close, n_boot=50)["exam_power"])  # +31% of 8 questions
    assert "is not resolvable; it would take about 17 questions at these draws or 5 draws per question" in line
    assert share.power_lines(None) == [] and share.power_lines(table.iloc[0:0]) == []
