"""A whole chain's run carries the split of recall end to end (issue 47): tables, headline, report page."""

from __future__ import annotations

import pandas as pd

from compaction_lab.core.projection import STAND_IN_LABEL
from compaction_lab.report import share


def test_every_arm_of_the_headline_has_scope_and_summary_recall_with_intervals(smoke_run):
    """Acceptance 2 on a real run of the chain: every arm of the headline has both parts, each with its 95%
    interval, adding up to the total (the verbatim reader); the summarising arms name the stand-in."""
    h = pd.read_parquet(smoke_run.run_dir / "headline.parquet")
    recall = pd.read_parquet(smoke_run.run_dir / "exam_recall.parquet")
    assert len(h) == len(recall) > 5
    for part in ("scope", "summary"):
        cols = [f"{part}_retained", f"{part}_recall", f"{part}_ci_low", f"{part}_ci_high"]
        assert h[cols].notna().all().all(), part
        assert (h[f"{part}_ci_low"] <= h[f"{part}_recall"]).all() and (
            h[f"{part}_recall"] <= h[f"{part}_ci_high"]
        ).all()
        assert (h[f"{part}_ci_high"] > h[f"{part}_ci_low"]).all()  # never of zero width
    assert (h["scope_retained"] + h["summary_retained"] == h["retained"]).all()
    summarising = h[h["strategy_label"].str.contains(STAND_IN_LABEL, regex=False) & (h["summary_retained"] > 0)]
    assert len(summarising) and (summarising["summary_by"] == STAND_IN_LABEL).all()
    # the uncompacted reference keeps everything by design
    full = h.set_index("strategy").loc["full"]
    assert full["scope_retained"] == full["retained"] and full["summary_retained"] == 0
    # where it was found, answer by answer: found somewhere exactly where the verbatim reader was right
    answers = pd.read_parquet(smoke_run.run_dir / "exam_closed.parquet")
    real = answers[~answers["decoy"]]
    assert (real["correct"] == real["found_in"].ne("nowhere")).all()


def test_the_report_page_ranks_by_scope_recall_offline(smoke_run):
    """Acceptance 3: offline (every summary the stand-in's) the report's ranking sentence is the scope ranking,
    and the page says summary recall needs a model summariser; the headline shows both parts."""
    page = (smoke_run.run_dir / "report.html").read_text(encoding="utf-8")
    assert "Most kept by design (scope recall)" in page
    lines = share.measured_text(share.headline_table(smoke_run.run_dir))
    ranking = [line for line in lines if line.startswith(("Most kept by design", "Only one arm compacted"))]
    assert ranking and not any(line.startswith("Most retained") for line in lines)
    assert share.STAND_IN_SUMMARY_RECALL in lines
    assert "kept by design (scope recall, 95% CI)" in page and "pointing at assistant text" in page
