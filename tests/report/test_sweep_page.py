"""sweep.html: the sweep figures inlined, the parameters swept, every run linked, the spread across seeds."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from compaction_lab.report import sweep_page
from tests.report.test_charts import comparison_table


def _ok_runs(table: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(table.loc[table["status"] == "ok", "run"]))


@pytest.fixture(scope="module")
def seeded_page(tmp_path_factory):
    """Two swept keys (window, seed), one failed run: the page and its table."""
    folder = tmp_path_factory.mktemp("sweeps") / "sweep-p-1"
    folder.mkdir()
    table = comparison_table(("seed", [7, 8]))
    runs = [({"window": 3000, "seed": 7}, None, "failed: 03_closed_book_exam raised ValueError <boom>")]
    out = sweep_page.render_sweep_page(folder, "p", "a <b>test</b> profile", ["window", "seed"], table, runs)
    return folder, table, out.read_text(encoding="utf-8")


def test_page_names_the_parameters_swept_and_their_values(seeded_page):
    folder, _, html = seeded_page
    assert (folder / "sweep.html").exists()
    assert "<code>window</code></td><td>1000, 2000, 3000</td>" in html
    assert "<code>seed</code></td><td>7, 8</td>" in html
    assert "Every number below was computed in these runs" in html


def test_page_links_every_finished_run_and_lists_the_failed_one_without_a_link(seeded_page):
    _, table, html = seeded_page
    for run in _ok_runs(table):
        assert f'href="../{run}/report.html"' in html
    assert "../p-window=3000/report.html" not in html
    failed = re.search(r"<li>window=3000, seed=7: (.*?)</li>", html)
    assert failed and "failed" in failed.group(1) and "<a " not in failed.group(1)
    assert "ValueError &lt;boom&gt;" in failed.group(1)  # the detail from `runs`, escaped


def test_page_inlines_every_figure_as_svg_offline(seeded_page):
    folder, _, html = seeded_page
    stems = re.findall(r'<figure class="cl-figure" id="([^"]+)"><svg', html)
    # Two swept keys, one a seed: small multiples, ranks faceted by seed, lines, the seed figure.
    assert [s.split("-")[0] for s in stems] == [
        "fig_sweep_small_multiples",
        "fig_sweep_ranks",
        "fig_sweep_lines",
        "fig_sweep_seeds",
    ]
    for stem in stems:
        assert (folder / "figures" / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (folder / "figures" / f"{stem}.svg").exists() and (folder / "figures" / f"{stem}.html").exists()
    assert "<script" not in html and "cdn." not in html


def test_page_shows_the_seed_spread_and_the_table_by_strategy(seeded_page):
    _, _, html = seeded_page
    assert "<h2>Spread across seeds</h2>" in html and "interval half-width" in html
    groups = re.findall(r'<tbody class="cl-group">\s*<tr><th colspan="\d+">(.*?) <small>', html)
    # Best mean recall first; full, the uncompacted reference, in no mean, last.
    assert groups == ["pi (extractive stand-in)", "codex (extractive stand-in)", "full"]
    assert "full: 4 runs uncompacted reference" in html  # counted, not silently dropped
    assert "n/a; 4 runs uncompacted reference, not ranked" in html
    # Who answered heads each strategy's rows; the currency heads the money columns.
    assert html.count("· reader: verbatim reader (retention ceiling)") == 3
    assert "<th>cost per point of recall (CNY)</th>" in html
    assert "Reader: verbatim reader (retention ceiling)." in html  # the spread table's caption


def test_strings_are_escaped(seeded_page):
    _, _, html = seeded_page
    assert "a &lt;b&gt;test&lt;/b&gt; profile" in html and "<b>test</b>" not in html


def test_one_parameter_gets_lines_and_ranks_and_no_seed_table(tmp_path):
    table = comparison_table(failed=False)
    out = sweep_page.render_sweep_page(tmp_path, "p", "", ["window"], table, [])
    html = out.read_text(encoding="utf-8")
    stems = re.findall(r'<figure class="cl-figure" id="([^"]+)"><svg', html)
    assert stems == ["fig_sweep_lines-window", "fig_sweep_ranks-window"]
    assert "Spread across seeds" not in html


def test_more_than_two_parameters_average_and_say_so():
    table = comparison_table(("summarizer", ["extractive", "none"])).assign(output_ceiling=500)
    figs, notes = sweep_page.plan_figures(table, ["window", "summarizer", "output_ceiling"])
    assert [f.stem for f in figs] == [
        "fig_sweep_lines-window",
        "fig_sweep_lines-summarizer",
        "fig_sweep_lines-output_ceiling",
    ]
    assert any("averages over the other parameters" in n for n in notes)
    assert "mean over summarizer, output_ceiling" in figs[0].caption


def test_a_page_with_no_finished_run_still_renders(tmp_path):
    table = pd.DataFrame([{"window": 1000, "run": None, "status": "interrupted"}])
    out = sweep_page.render_sweep_page(
        tmp_path, "p", "", ["window"], table, [({"window": 1000}, None, "interrupted by SIGTERM")]
    )
    html = out.read_text(encoding="utf-8")
    assert "nothing to draw" in html and "interrupted by SIGTERM" in html and "href=" not in html
