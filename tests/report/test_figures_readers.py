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
