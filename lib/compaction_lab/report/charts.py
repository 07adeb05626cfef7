"""The notebooks' one import for figures: the theme, `save_chart`, `draw` and every figure function by name.

Nothing is defined here. The theme and the writing of PNG + SVG + HTML are in
`compaction_lab.report.theme`; the figures, one module per notebook, each registered where it is drawn,
and `draw` (name a figure once: drawn, saved under the run folder's name for it, returned to show) are in
`compaction_lab.report.figures`. A notebook reads::

    from compaction_lab.report import charts

    charts.setup_notebook()
    ...
    charts.draw(out, "fig2_composition", comp, pointers)
"""

from __future__ import annotations

from compaction_lab.report.figures import FigureSpec, draw, figure, run_figures, sweep_figures, title_of
from compaction_lab.report.figures._common import NO_QUESTIONS, NOT_SENDABLE, NOT_SENDABLE_NOTE, no_data
from compaction_lab.report.figures.anatomy import SEGMENT_COLORS, fig7_projection_anatomy, fig8_trigger_and_budgets
from compaction_lab.report.figures.composition import fig2_composition
from compaction_lab.report.figures.continuation import fig10_continuation, fig11_rediscovery
from compaction_lab.report.figures.cost import fig3_complete, fig5_compaction_cost, fig6_cost_per_point
from compaction_lab.report.figures.exam import (
    NO_RECORDED,
    POOL_NOTE,
    fig1_retained,
    fig3_retained_tokens,
    fig4_size_vs_recall,
    fig12_readers,
    fig13_consistency,
    fig_recorded,
    pointer_mix_sensitivity,
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
    page_safe,
    save_chart,
    script_safe,
    setup_notebook,
    use_theme,
    vega_safe,
)

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
    "fig1_retained",
    "fig2_composition",
    "fig3_complete",
    "fig3_retained_tokens",
    "fig4_size_vs_recall",
    "fig5_compaction_cost",
    "fig6_cost_per_point",
    "fig7_projection_anatomy",
    "fig8_trigger_and_budgets",
    "fig9_open_book",
    "fig10_continuation",
    "fig11_rediscovery",
    "fig12_readers",
    "fig13_consistency",
    "fig_recorded",
    "fig_sweep_lines",
    "fig_sweep_ranks",
    "fig_sweep_seeds",
    "fig_sweep_small_multiples",
    "figure",
    "no_data",
    "page_safe",
    "pointer_mix_sensitivity",
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
