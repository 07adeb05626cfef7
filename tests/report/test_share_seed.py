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


def test_the_report_page_introduces_futureos_before_it_first_names_it(smoke_run):
    """The page opens with the decision, which names arms before "What this run measured" does: the
    introduction comes with the first mention, wherever on the page that is."""
    import html
    import re

    page = html.unescape(
        re.sub(r"<svg.*?</svg>", "", (smoke_run.run_dir / "report.html").read_text("utf-8"), flags=re.S)
    )
    body = page[page.index("<body>") :]
    first = body.index(share.SEED_PREFIX + "-")
    intro = body.index(share.SEED_DESIGN)
    # The introduction is the sentence that names the arms: it starts right before its own first mention.
    assert intro - first < 80 and body.rfind("<p>", 0, first) == body.rfind("<p>", 0, intro)
