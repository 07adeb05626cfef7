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
