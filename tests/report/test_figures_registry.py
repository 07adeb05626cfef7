"""Issue 28, acceptance 3 (figures): a figure added in its own module, and nowhere else, is drawn by `draw`,
listed by the chain for its notebook and shown by the report, in its place in reading order."""

from __future__ import annotations

import sys
import textwrap
import uuid

import altair as alt
import pandas as pd
import pytest

from compaction_lab.report import charts, figures, share
from compaction_lab.run import chain

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STEM = "fig_throwaway"
TITLE = "Throwaway — a figure no other file names"

#: The whole of the new figure's module: its registration and its drawing, as an extension would write it.
MODULE = f'''
import altair as alt
import pandas as pd

from compaction_lab.report.figures import register, title_of


@register("{STEM}", rank=75, title="{TITLE}", notebook="02_projection_anatomy")
def fig_throwaway(table: pd.DataFrame, *, width: int = 200) -> alt.Chart:
    return (
        alt.Chart(table)
        .mark_bar()
        .encode(x="n:Q", y="name:N")
        .properties(width=width, title=title_of("{STEM}"))
    )
'''


@pytest.fixture
def throwaway_figure(tmp_path, monkeypatch):
    """A package in a temporary folder holding one figure module, pointed at by the figure registry."""
    before = chain.step("02_projection_anatomy").figures
    package = f"throwaway_figures_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "extra.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    figures.FIGURES.add_package(package)
    yield package
    figures.FIGURES.remove(STEM)
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]
    # Cleaned up: the registry and the chain are as the suite defines them again.
    assert STEM not in figures.FIGURES and STEM not in before
    assert chain.step("02_projection_anatomy").figures == before


def test_a_figure_in_its_own_module_is_drawn_listed_and_shown(throwaway_figure, tmp_path):
    table = pd.DataFrame({"name": ["a", "b"], "n": [3, 5]})

    chart = charts.draw(tmp_path / "run", STEM, table, width=240)

    assert isinstance(chart, alt.Chart) and chart.to_dict()["title"] == TITLE  # a valid Vega-Lite spec
    saved = tmp_path / "run" / "figures"
    assert (saved / f"{STEM}.png").read_bytes().startswith(PNG_SIGNATURE)
    assert (saved / f"{STEM}.svg").read_text(encoding="utf-8").lstrip().startswith("<svg")
    assert "vegaEmbed" in (saved / f"{STEM}.html").read_text(encoding="utf-8")
    # The chain lists it for the notebook it names, in reading order (rank 75: between figures 7 and 8).
    assert chain.step("02_projection_anatomy").figures == ("fig7_projection_anatomy", STEM, "fig8_trigger_budgets")
    assert STEM not in chain.step("03_closed_book_exam").figures
    # The report shows it under its registered title, not as an unknown file.
    assert [(f.stem, f.title) for f in share.figures(tmp_path / "run")] == [(STEM, TITLE)]
