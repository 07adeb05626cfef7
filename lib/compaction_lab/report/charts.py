"""The notebooks' one import for figures: the theme, `save_chart`, `draw` and every figure function by name.

The theme and the writing of PNG + SVG + HTML are in `compaction_lab.report.theme`; the figures, one
module per notebook, each registered where it is drawn, and their drawing (name a figure once: drawn,
saved under the run folder's name for it, returned to show) are in `compaction_lab.report.figures`.
Defined here is only `draw`, which masks a redacted run's figures first (docs/architecture.md,
"Redaction"). A notebook reads::

    from compaction_lab.report import charts

    charts.setup_notebook()
    ...
    charts.draw(out, "fig2_composition", comp, pointers)
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from compaction_lab.core import runfolder
from compaction_lab.ingest import sources
from compaction_lab.privacy.redactor import Redactor
from compaction_lab.report import figures
from compaction_lab.report.figures import FigureSpec, figure, run_figures, sweep_figures, title_of
from compaction_lab.report.figures._common import NO_QUESTIONS, NOT_SENDABLE, NOT_SENDABLE_NOTE, no_data
from compaction_lab.report.figures.anatomy import SEGMENT_COLORS, fig7_projection_anatomy, fig8_trigger_budgets
from compaction_lab.report.figures.composition import fig2_composition
from compaction_lab.report.figures.continuation import fig10_continuation, fig11_rediscovery
from compaction_lab.report.figures.cost import fig3_complete, fig5_compaction_cost, fig6_cost_per_point
from compaction_lab.report.figures.decision import fig_decision
from compaction_lab.report.figures.exam import (
    NO_RECORDED,
    POOL_NOTE,
    fig1_retained,
    fig3_recall_tokens,
    fig4_size_recall,
    fig12_readers,
    fig13_consistency,
    fig_recorded,
    sensitivity_mix,
)
from compaction_lab.report.figures.open_book import OUTCOME_COLORS, fig9_open_book
from compaction_lab.report.figures.sweep import (
    ORDINAL_PARAMS,
    SWEEP_X,
    fig_sweep_lines,
    fig_sweep_ranks,
    fig_sweep_seeds,
    fig_sweep_small_multiples,
    sweep_rank_labels,
)
from compaction_lab.report.theme import (
    KIND_COLORS,
    PNG_SCALE,
    POINTER_COLORS,
    RENDERER,
    THEME,
    each_string,
    page_safe,
    save_chart,
    script_safe,
    setup_notebook,
    use_theme,
    vega_safe,
)


def draw(run: str | os.PathLike[str] | Any, stem: str, *data: Any, **kw: Any) -> Any:
    """Draw a registered figure, save it under the run folder's name for it, and return the chart to show.

    As `compaction_lab.report.figures.draw`, with one step first: in a redacted run folder
    (`sources.run_redactor`) every string of the figure's arguments -- a session id, a label, a
    column name -- is masked by the run's redactor, as the final sweep masks every other file. Its PNG
    cannot be rewritten afterwards, and the numbers are never touched.

    Parameters
    ----------
    run : str, Path or run result
        The run folder (a notebook's ``out``), or anything with a ``run_dir`` attribute.
    stem : str
        The figure's registered stem (``"fig2_composition"``).
    *data, **kw
        What the figure's function takes (its tables, then options such as ``width``).
    """
    red = _run_redactor(Path(getattr(run, "run_dir", run)))
    if red is not None:
        data = each_string(data, red.text)
        kw = each_string(kw, red.text)
    return figures.draw(run, stem, *data, **kw)


def draw_registered(run: str | os.PathLike[str] | Any) -> dict[str, Any]:
    """Draw every figure that names the run-folder tables it reads (``register(reads=...)``), and save each.

    The share notebook's one generic cell: each such figure (`run_figures` order) is drawn from its tables,
    made into its arguments by its ``arguments`` function when it has one, as `draw` draws (masked in a
    redacted run). A figure whose table the run folder lacks is saved as the chart that says it was not
    measured (`no_data`), naming the missing tables, so the page still lists it.

    Parameters
    ----------
    run : str, Path or run result
        The run folder (a notebook's ``out``), or anything with a ``run_dir`` attribute.

    Returns
    -------
    dict of str to altair chart
        The charts by stem, in the report's order (empty when no figure reads tables).
    """
    folder = Path(getattr(run, "run_dir", run))
    drawn: dict[str, Any] = {}
    for spec in run_figures():
        if not spec.reads:
            continue
        missing = [t for t in spec.reads if not runfolder.table_path(folder, t).exists()]
        if missing:
            why = (
                f"This run folder has no {', '.join(missing)} table, so nothing was measured here:",
                "the notebook that writes it did not run, or ran with other parameters.",
            )
            chart = no_data(spec.title, why)
            save_chart(chart, runfolder.figure_stem(folder, spec.stem))
        else:
            tables = [runfolder.load_table(folder, t) for t in spec.reads]
            args = tuple(spec.arguments(*tables)) if spec.arguments is not None else tuple(tables)
            chart = draw(run, spec.stem, *args)
        drawn[spec.stem] = chart
    return drawn


def _run_redactor(folder: Path) -> Redactor | None:
    """Return the run folder's redactor (`sources.run_redactor`), built once per state of its files."""
    try:
        marker = (folder / sources.REDACTION_FILE).stat().st_mtime_ns
    except OSError:
        return None
    try:
        saved = (folder / runfolder.SESSIONS).stat().st_mtime_ns
    except OSError:
        saved = 0
    return _cached_redactor(str(folder.resolve()), marker, saved)


@functools.lru_cache(maxsize=8)
def _cached_redactor(folder: str, marker: int, saved: int) -> Redactor | None:
    del marker, saved  # the cache key: a new redaction file or new sessions build it again
    return sources.run_redactor(Path(folder))


__all__ = [
    "KIND_COLORS",
    "NOT_SENDABLE",
    "NOT_SENDABLE_NOTE",
    "NO_QUESTIONS",
    "NO_RECORDED",
    "ORDINAL_PARAMS",
    "OUTCOME_COLORS",
    "PNG_SCALE",
    "POINTER_COLORS",
    "POOL_NOTE",
    "RENDERER",
    "SEGMENT_COLORS",
    "SWEEP_X",
    "THEME",
    "FigureSpec",
    "draw",
    "draw_registered",
    "fig1_retained",
    "fig2_composition",
    "fig3_complete",
    "fig3_recall_tokens",
    "fig4_size_recall",
    "fig5_compaction_cost",
    "fig6_cost_per_point",
    "fig7_projection_anatomy",
    "fig8_trigger_budgets",
    "fig9_open_book",
    "fig10_continuation",
    "fig11_rediscovery",
    "fig12_readers",
    "fig13_consistency",
    "fig_decision",
    "fig_recorded",
    "fig_sweep_lines",
    "fig_sweep_ranks",
    "fig_sweep_seeds",
    "fig_sweep_small_multiples",
    "figure",
    "no_data",
    "page_safe",
    "sensitivity_mix",
    "run_figures",
    "save_chart",
    "script_safe",
    "setup_notebook",
    "sweep_figures",
    "sweep_rank_labels",
    "title_of",
    "use_theme",
    "vega_safe",
]
