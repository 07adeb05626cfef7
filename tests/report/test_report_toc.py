"""report.html can be navigated (issue 48): a table of contents to every section, long tables collapsed."""

from __future__ import annotations

import re


def test_the_page_opens_with_contents_that_reach_every_section(smoke_run):
    page = (smoke_run.run_dir / "report.html").read_text(encoding="utf-8")
    nav = re.search(r'<nav class="toc">(.*?)</nav>', page, re.S)
    assert nav, "no table of contents"
    targets = re.findall(r'href="#([^"]+)"', nav.group(1))
    assert {"measured", "headline", "figures", "notebooks", "parameters"} <= set(targets)
    for t in targets:  # every entry leads somewhere on the page
        assert f'<h2 id="{t}">' in page, t
    assert page.index('<nav class="toc">') < page.index('<h2 id="measured">')


def test_the_per_session_tables_are_collapsed_under_their_title(smoke_run):
    page = (smoke_run.run_dir / "report.html").read_text(encoding="utf-8")
    questions = page.split('<h2 id="questions">', 1)[1].split("<h2", 1)[0]
    assert "<table" in questions
    # every table of the block sits inside a <details> whose summary names it and its rows
    assert questions.count("<table") == questions.count("<details>") == questions.count("</details>")
    assert re.search(r"<summary><b>[^<]+</b> \(\d[\d,]* rows?\)</summary>", questions)


def test_figures_that_measured_nothing_are_one_collapsed_line_after_the_others(smoke_run):
    """The smoke run records no compaction (no recorded figure), asks each question once (no figure 13):
    their placeholders are listed in one line, collapsed, after every figure that drew something."""
    import html

    from compaction_lab.report import share

    page = (smoke_run.run_dir / "report.html").read_text(encoding="utf-8")
    figs = share.figures(smoke_run.run_dir)
    empty = [f for f in figs if not share.measured_figure(f)]
    drawn = [f for f in figs if share.measured_figure(f)]
    assert {f.stem for f in empty} >= {"fig_recorded", "fig13_consistency"} and drawn
    folded = page.split('<details class="unmeasured">', 1)[1].split("</details>", 1)[0]
    summary = folded.split("</summary>", 1)[0]
    assert f"Not measured in this run ({len(empty)})" in summary
    for f in empty:
        assert f'id="{f.stem}"' in folded and f.title in html.unescape(summary)
    for f in drawn:
        assert f'id="{f.stem}"' not in folded and page.index(f'id="{f.stem}"') < page.index('class="unmeasured"')
