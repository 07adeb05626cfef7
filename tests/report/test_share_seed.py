"""The report introduces FutureOS as the seed report's own design where it first names it (issue 48)."""

from __future__ import annotations

from compaction_lab.report import share
from tests.report.test_share_found import _exam_recall, _run


def test_futureos_is_introduced_as_the_seed_reports_design(tmp_path):
    recall = _exam_recall()
    recall.loc[recall["strategy"] == "keeper", "strategy"] = "futureos-deterministic"
    lines = share.measured_text(share.headline_table(_run(tmp_path / "a", recall)))
    said = [line for line in lines if share.SEED_DESIGN in line]
    assert said == [f"futureos-deterministic: {share.SEED_DESIGN}."]
    # before any ranking sentence: where a reader first meets the name
    assert lines.index(said[0]) < min(i for i, line in enumerate(lines) if line.startswith("Most "))
    # a run without a FutureOS arm says nothing of it
    assert not any(
        share.SEED_DESIGN in line
        for line in share.measured_text(share.headline_table(_run(tmp_path / "b", _exam_recall())))
    )
