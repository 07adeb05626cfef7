"""report.html and every page beside it render their figures offline in headless Chromium.

Acceptance: a run produces ``report.html``; opened in Debian's chromium with the
network cut, every figure renders (SVG or image with a non-zero box) and no
request leaves the machine. ``make test`` installs chromium first (``make
browser``); outside CI a machine without it skips these tests, under CI it fails.
"""

from __future__ import annotations

import pytest

from tests.browser import check_pages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_pages(chromium, smoke_run):
    """report.html, the other pages in the run folder and every figures/*.html, checked."""
    run_dir = smoke_run.run_dir
    assert smoke_run.report is not None and smoke_run.report.exists(), "the run wrote no report.html"
    others = sorted(p for p in run_dir.glob("*.html") if p != smoke_run.report)
    figures = sorted((run_dir / "figures").glob("*.html"))
    return {
        c.path.name if c.path.parent == run_dir else f"figures/{c.path.name}": c
        for c in check_pages([smoke_run.report, *others, *figures])
    }


def _report(checks) -> str:
    return "\n" + "\n".join(c.describe() for c in checks)


def test_pages_checked_include_report_notebooks_and_figures(smoke_run, run_pages):
    assert "report.html" in run_pages
    assert any(name.startswith("figures/") for name in run_pages), "no figures/*.html in the run"
    assert len([n for n in run_pages if n != "report.html" and "/" not in n]) >= 1, "no per-notebook pages"


def test_every_page_renders_figures(run_pages):
    bad = [c for c in run_pages.values() if c.figures < 1 or c.empty_figures]
    assert not bad, "pages with no figure or with empty figures:" + _report(bad)


def test_no_request_leaves_the_machine(run_pages):
    bad = [c for c in run_pages.values() if c.external_requests]
    assert not bad, "pages that asked for non-local URLs (all were blocked):" + _report(bad)


def test_report_shows_every_figure_of_the_run(smoke_run, run_pages):
    # Every figure the run wrote to figures/ must appear in the index. The
    # index (report.py) is being rewritten to embed each figure's SVG; this
    # counts rendered figures in report.html against distinct figure stems.
    stems = {p.stem for p in (smoke_run.run_dir / "figures").iterdir() if p.is_file()}
    shown = run_pages["report.html"].figures
    assert stems, "the run wrote no figures"
    assert shown >= len(stems), f"report.html renders {shown} figures; the run has {len(stems)}: {sorted(stems)}"


@pytest.mark.parametrize("stem", ["fig10_continuation", "fig11_rediscovery"])
def test_notebook_07_figures_render_in_the_offline_report(smoke_run, run_pages, stem):
    """Issue 29, acceptance 2: figure 10 (and the rediscovery figure, "not measured" on synthetic chains) is
    drawn by the chain's notebook 06, shown in report.html under its id with nothing empty in it, and its own
    page renders offline."""
    assert (smoke_run.run_dir / "figures" / f"{stem}.svg").exists(), f"the smoke run drew no {stem}"
    assert f'id="{stem}"' in smoke_run.report.read_text(encoding="utf-8"), f"report.html does not show {stem}"
    report = run_pages["report.html"]
    assert not [e for e in report.empty_figures if stem in e], _report([report])
    own = run_pages[f"figures/{stem}.html"]
    assert own.figures >= 1 and not own.empty_figures and not own.external_requests, _report([own])


def test_checker_catches_external_requests_and_broken_images(tmp_path, chromium):
    """Negative control: the checker fails a page that reaches out or shows a broken image."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!doctype html><html><body>"
        '<img src="https://example.com/x.png" width="200" height="100">'
        '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>'
        '<img src="data:image/png;base64,AAAA">'
        "</body></html>",
        encoding="utf-8",
    )
    (check,) = check_pages([page])
    assert not check.ok
    assert check.external_requests, check.describe()
    assert any("example.com" in u for u in check.external_requests), check.describe()
    assert any("cdn.jsdelivr.net" in u for u in check.external_requests), check.describe()
    assert check.empty_figures, check.describe()
    assert any("data:image/png" in e for e in check.empty_figures), check.describe()


def test_checker_counts_svg_figures_and_ignores_icons(tmp_path, chromium):
    """An inline SVG chart counts, a 16px icon does not, a blank SVG is empty, hidden images are skipped."""
    page = tmp_path / "svg.html"
    page.write_text(
        "<!doctype html><html><body>"
        '<svg width="300" height="200"><rect width="100" height="50"/><svg width="50" height="50">'
        '<circle r="5"/></svg></svg>'
        '<button><svg width="16" height="16"><path d="M0 0L8 8"/></svg></button>'
        '<svg id="blank" width="300" height="200"></svg>'
        '<div style="display:none"><img src="data:image/png;base64,AAAA"></div>'
        "</body></html>",
        encoding="utf-8",
    )
    (check,) = check_pages([page])
    assert check.figures == 1, check.describe()
    assert len(check.empty_figures) == 1 and "#blank" in check.empty_figures[0], check.describe()
    assert not check.external_requests, check.describe()


# --------------------------------------------------------------------------- sweep.html (issue 18 part A)


@pytest.fixture(scope="module")
def sweep_check(chromium, smoke_sweep):
    """The shared two-parameter sweep (`tests.smoke_sweep`: seed x window, 4 runs), its page checked."""
    (check,) = check_pages([smoke_sweep.report])
    return smoke_sweep, check


def test_sweep_page_renders_every_figure_offline(sweep_check):
    res, check = sweep_check
    assert [status for _, _, status in res.runs] == ["ok"] * 4
    stems = sorted({p.stem for p in (res.folder / "figures").iterdir()})
    # Two parameters, one of them the seed: small multiples, ranks faceted by seed, lines, the seed figure.
    assert [s.split("-")[0] for s in stems] == [
        "fig_sweep_lines",
        "fig_sweep_ranks",
        "fig_sweep_seeds",
        "fig_sweep_small_multiples",
    ], stems
    assert check.figures == len(stems), _report([check])
    assert not check.empty_figures, _report([check])
    assert not check.external_requests, _report([check])


def test_sweep_page_links_every_run(sweep_check):
    res, _ = sweep_check
    html = res.report.read_text(encoding="utf-8")
    for _, run, _ in res.runs:
        assert f'href="../{run.run_dir.name}/report.html"' in html
        assert (run.run_dir / "report.html").exists()
