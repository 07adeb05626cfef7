"""Figures never overlap text (issue 48, acceptance 2).

Every figure of a `default` run and of a redacted `my_sessions` run (the public fixture sessions, one of
them with compactions pi recorded: `tests.redaction_pair`'s) is opened as SVG in headless Chromium and each
text measured (`tests.svg_text`):
no two texts overlap, none is clipped (past the canvas, or a point's or bar's label past its plot area),
and no two neighbouring tick labels of an axis touch. A figure the run did not measure is its "not
measured" placeholder, checked the same way. The runs are lighter than a real one (fewer bootstrap
resamples, priced turns and cost cases; three synthetic chains): the layout is checked, not the numbers.
Each run is a session fixture grouped for xdist (`tests.conftest.SHARED_SESSION_FIXTURES`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import vl_convert as vlc

from compaction_lab.report import charts, figures
from compaction_lab.run import runner
from compaction_lab.strategies import trigger
from tests import svg_text
from tests.conftest import SHARED_SESSION_FIXTURES
from tests.helpers import LIGHTER
from tests.report.test_charts_feasible import recorded_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def default_figures(tmp_path_factory, warm_kernels) -> Path:
    """The figures folder of a `default` run (three synthetic chains, nine cases), run once per test session."""
    res = runner.run_profile(
        "default",
        results=tmp_path_factory.mktemp("figure-text-default"),
        progress=False,
        kernels=2,
        overrides={**LIGHTER, "n_chains": 3, "n_cases": 9},
        notebook_html=False,  # the figures and report.html are read
        launch=warm_kernels,
    )
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks)
    return res.run_dir / "figures"


@pytest.fixture(scope="session")
def my_sessions_figures(redaction_pair) -> Path:
    """The figures folder of a redacted `my_sessions` run on the public fixtures (`tests.redaction_pair`).

    pi's sessions (one compacts at the profile's window, the other holds compactions pi recorded: the
    recorded-compactions figure, figures 10 and 11), the short Claude Code and SWE-agent sessions (listed,
    not cut) and a planted one; its labels are masked where they named an account or a secret.
    """
    red, _ = redaction_pair
    assert json.loads((red / "run.json").read_text(encoding="utf-8"))["status"] == "ok"
    return red / "figures"


def _every_figure_reads(folder: Path) -> None:
    """Measure every run figure's SVG in `folder` and fail listing each problem of each figure."""
    stems = [spec.stem for spec in figures.run_figures()]
    missing = [s for s in stems if not (folder / f"{s}.svg").is_file()]
    assert not missing, f"figures the run did not draw (not even as 'not measured'): {missing}"
    measured = svg_text.measure([folder / f"{s}.svg" for s in stems])
    assert all(m.boxes for m in measured), [m.path.name for m in measured if not m.boxes]
    found = {m.path.name: svg_text.problems(m) for m in measured}
    report = "\n".join(f"{name}:\n  " + "\n  ".join(p) for name, p in found.items() if p)
    assert not report, f"figures whose text cannot be read:\n{report}"


def test_every_figure_of_a_default_run_can_be_read(default_figures, chromium):
    _every_figure_reads(default_figures)


def test_every_figure_of_a_my_sessions_run_can_be_read(my_sessions_figures, chromium):
    """The own-sessions run: figures 4 and 10 piled their labels in a corner, figure 8 drew two output
    ceilings as the same dots, the recorded compactions' panels spent half the width on a cut session id."""
    _every_figure_reads(my_sessions_figures)
    for measured in ("fig_recorded", "fig10_continuation", "fig4_size_recall"):  # drawn, not a placeholder
        assert "not measured" not in (my_sessions_figures / f"{measured}.svg").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the checker itself

#: Hand-made SVG: two texts on each other, one past the right edge, two tick labels 1 px apart, a label
#: past its plot area, a hidden text on the first, and two rotated labels whose upright boxes overlap
#: although they do not.
_BAD = """<svg xmlns="http://www.w3.org/2000/svg" width="300" height="200" viewBox="0 0 300 200">
<g class="mark-group role-title"><text x="10" y="20" font-size="12">overlapping title</text></g>
<g class="mark-group role-legend"><text x="30" y="24" font-size="12">legend on it</text></g>
<text x="250" y="60" font-size="12">clipped at the edge</text>
<g class="mark-group role-axis"><g class="mark-text role-axis-label">
  <text x="20" y="190" font-size="11">1,000</text><text x="52" y="190" font-size="11">2,000</text>
  <text x="200" y="190" font-size="11" opacity="0">hidden</text>
</g></g>
<g transform="translate(100,80)"><path class="background" d="M0,0h60v40h-60Z"/>
  <g class="mark-text role-mark"><text x="40" y="20" font-size="11">past its plot</text></g></g>
<text x="15" y="22" font-size="12" opacity="0">hidden on the title</text>
<g transform="translate(200,150) rotate(-45)"><text font-size="11">rotated one</text></g>
<g transform="translate(225,150) rotate(-45)"><text font-size="11">rotated two</text></g>
</svg>"""


def test_the_checker_finds_overlaps_clipped_text_and_touching_ticks(tmp_path, chromium):
    bad = tmp_path / "bad.svg"
    bad.write_text(_BAD, encoding="utf-8")
    (m,) = svg_text.measure([bad])
    assert "hidden" not in {b.text for b in m.boxes} and "hidden on the title" not in {b.text for b in m.boxes}
    assert {b.role for b in m.boxes if b.text == "1,000"} == {"axis-label"}
    overlaps = svg_text.overlaps(m)
    assert len(overlaps) == 1 and "overlapping title" in overlaps[0] and "legend on it" in overlaps[0]
    clipped = svg_text.clipped(m)
    assert len(clipped) == 2
    assert any("canvas" in c and "clipped at the edge" in c for c in clipped)
    assert any("plot area" in c and "past its plot" in c for c in clipped)
    ticks = svg_text.touching_ticks(m)
    assert len(ticks) == 1 and "'1,000' and '2,000'" in ticks[0]
    # The rotated labels' upright boxes overlap; the labels themselves do not.
    one, two = (b for b in m.boxes if b.text.startswith("rotated"))
    a, b = one.bounds, two.bounds
    assert a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    assert svg_text.separation(one, two) > 0


def test_the_checker_passes_text_that_can_be_read(tmp_path, chromium):
    good = tmp_path / "good.svg"
    good.write_text(
        """<svg xmlns="http://www.w3.org/2000/svg" width="300" height="100">
        <g class="mark-group role-axis"><g class="mark-text role-axis-label">
        <text x="20" y="90" font-size="11">1,000</text><text x="120" y="90" font-size="11">10,000</text></g></g>
        <text x="10" y="20" font-size="12">a title<tspan x="10" dy="14">its second line</tspan></text></svg>""",
        encoding="utf-8",
    )
    (m,) = svg_text.measure([good])
    assert len(m.boxes) == 3 and svg_text.problems(m) == []
    assert next(b for b in m.boxes if b.text.startswith("a title")).text == "a title / its second line"


# --------------------------------------------------------------------------- the figures' own defects


def test_fig8_draws_each_output_ceiling_with_its_own_shape_and_a_legend_of_them():
    """O = 32,000 and O = 4,000 were two identical black dots, and the legend that should tell them apart
    was gone: each ceiling now has its own dash and point shape, and the legend shows the shapes."""
    triggers = trigger.trigger_table([8_000, 32_000, 128_000, 1_000_000], [4_000, 32_000])
    budgets = pd.DataFrame({"part": ["system", "history", "tail"], "budget": [500, 30_000, 8_000], "used": [1, 2, 3]})
    spec = charts.fig8_trigger_budgets(triggers, budgets).to_dict()
    lines, points = spec["vconcat"][0]["layer"]
    dash, shape = lines["encoding"]["strokeDash"], points["encoding"]["shape"]
    assert dash["field"] == shape["field"] == "ceiling" and dash["title"] == shape["title"] == "output ceiling"
    assert shape.get("legend", {}) is not None
    assert len(set(map(str, dash["scale"]["range"]))) == len(set(shape["scale"]["range"])) == 2
    svg = vlc.vegalite_to_svg(spec)
    legend = svg[svg.index("output ceiling") :]
    assert "O = 32,000" in legend and "O = 4,000" in legend
    # Two different symbol paths among the points (Vega writes each shape as its own path).
    assert len(set(re.findall(r'aria-roledescription="point"[^>]*d="([^"]+)"', svg))) >= 2


def test_fig_recorded_heads_each_panel_with_a_short_session_id_and_keeps_the_full_one_in_the_tooltip():
    table = recorded_table()
    long_id = "ffae836b-9420-4060-ac13-7745215f90ff"
    table["session_id"] = long_id
    spec = charts.fig_recorded(table).to_dict()
    rows = [r for rows in spec["datasets"].values() for r in rows if "compaction_label" in r]
    labels = sorted({r["compaction_label"] for r in rows})
    assert labels[0].startswith("#1 · session ffae836b… · compaction 1") and labels[1].startswith("#2 · session")
    assert all(long_id not in label for label in labels) and {r["session_id"] for r in rows} == {long_id}
    assert {"field": "session_id", "type": "nominal", "title": "session"} in spec["spec"]["layer"][2]["encoding"][
        "tooltip"
    ]
    header = spec["facet"]["row"]["header"]
    assert header["labelOrient"] == "top"  # above its panel: the plot keeps the width


def test_fig_recorded_stays_narrow_whatever_the_log_names_its_model():
    """A header is as wide as its text: a 2,000-character model name from a log once made a 292,390-pixel
    PNG no browser draws. Names are cut in the header (whole in the tooltip) and the header is limited."""
    table = recorded_table()
    table["model"] = "m" * 2000
    chart = charts.fig_recorded(table)
    labels = {
        r["compaction_label"] for rows in chart.to_dict()["datasets"].values() for r in rows if "compaction_label" in r
    }
    assert labels and all(len(label) < 160 for label in labels)
    svg = vlc.vegalite_to_svg(chart.to_dict())
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))
    assert width < 1500


#: Each run's test on the worker that holds the run (its fixture is asked for by name, so the conftest's
#: grouping, which reads a test's fixtures, does not see it).
RUNS = [
    pytest.param(name, marks=[pytest.mark.xdist_group(SHARED_SESSION_FIXTURES[name]), pytest.mark.slow])
    for name in ("default_figures", "my_sessions_figures")
]


@pytest.mark.parametrize("run", RUNS)
def test_the_report_opens_with_contents_and_the_decision_and_numbers_figures_down_the_page(run, request):
    """Issue 48, acceptance 1, on both runs: a table of contents, the decision section above the figures with
    a named Pareto set (or the sentence that no arm is separable), figure numbers increasing down the page."""
    page = (request.getfixturevalue(run).parent / "report.html").read_text(encoding="utf-8")
    nav = re.search(r'<nav class="toc">(.*?)</nav>', page, re.S)
    assert nav and {"decision", "headline", "figures"} <= set(re.findall(r'href="#([^"]+)"', nav.group(1)))
    decision = page.index('<h2 id="decision">')
    assert page.index('<nav class="toc">') < decision < page.index('<h2 id="figures">')
    section = page[decision:].split("<h2", 2)[1]
    verdict = re.search(r'<p class="verdict"><b>(.*?)</b></p>', section, re.S)
    assert verdict and re.match(r"(Pareto set \(.*\): \S|No arm is separable)", verdict.group(1)), section[:600]
    numbers = [int(n) for n in re.findall(r"<figcaption>Figure (\d+) — ", page)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) == len(figures.run_figures())
