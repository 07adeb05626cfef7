"""Notebook 07's figure, the one the report opens with: recall against cost, the Pareto set filled.

Drawn from `compaction_lab.report.decision.Decision.weighed_strategies` (one row per arm weighed); design in docs/report.md.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import no_data
from compaction_lab.report.theme import use_theme

#: The decision's measures as the chart names its panels (and `report.decision` its sentences):
#: ``<key>_recall`` column prefix -> name.
PANELS = {"closed": "closed book", "needed_next": "needed-next"}


@register(
    "fig_decision",
    rank=0,
    title="which strategy: recall against cost",
    notebook="07_share",
    lead=True,
)
def fig_decision(
    weighed: pd.DataFrame, *, recall: str = "recall", currency: str = "", turns: int | None = None, width: int = 300
) -> alt.HConcatChart | alt.Chart:
    """Recall (y, with its 95% interval) against the cost of one compaction + T turns (x), one panel per exam.

    Parameters
    ----------
    arms : DataFrame
        `Decision.weighed_strategies`: ``strategy``, ``strategy_label``, ``cost``, ``<key>_recall`` / ``_low`` / ``_high`` /
        ``_of_n`` for each exam in `PANELS`, ``pareto``.
    recall : str
        Which recall it is (scope recall offline), for the axis title.
    currency, turns : the cost's unit and T, for the axis title.
    """
    panels = [k for k in PANELS if f"{k}_recall" in weighed.columns]
    if weighed.empty or not panels:
        return no_data(title_of("fig_decision"), ["no arm compacted and fits the window: nothing to weigh"])
    use_theme()
    long = pd.concat(
        [
            weighed.assign(
                exam=PANELS[k],
                value=weighed[f"{k}_recall"],
                low=weighed[f"{k}_low"],
                high=weighed[f"{k}_high"],
                of_n=weighed[f"{k}_of_n"],
            )
            for k in panels
        ],
        ignore_index=True,
    )
    long["set"] = long["pareto"].map({True: "Pareto set", False: "dominated"})
    priced = "cost" in long.columns and long["cost"].notna().all()
    x = (
        alt.X(
            "cost:Q",
            title=f"{currency} per compaction + {turns} turns" if turns else f"cost ({currency})",
            scale=alt.Scale(zero=False, nice=True, padding=12),
            axis=alt.Axis(tickCount=4, format=".3~f", labelOverlap="greedy"),
        )
        if priced
        else alt.X("strategy:N", title="not priced", axis=alt.Axis(labelAngle=-40))
    )
    colour = alt.Color("strategy_label:N", title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=320))
    tooltip = [
        alt.Tooltip("strategy_label:N", title="strategy"),
        alt.Tooltip("exam:N"),
        alt.Tooltip("of_n:N", title="retained of N (95% CI)"),
        *([alt.Tooltip("cost:Q", title=f"cost ({currency})", format=".4f")] if priced else []),
        alt.Tooltip("set:N"),
    ]

    def panel(exam: str) -> alt.LayerChart:
        data = long[long["exam"] == exam]
        base = alt.Chart(data).encode(x=x, color=colour)
        y = alt.Y("value:Q", title=f"{exam} {recall}", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%"))
        bars = base.mark_rule(strokeWidth=2, opacity=0.6).encode(
            y=alt.Y("low:Q", scale=alt.Scale(domain=[0, 1])), y2="high:Q"
        )
        dots = base.mark_point(size=90, strokeWidth=2, shape="circle").encode(
            y=y,
            fill=alt.condition("datum.pareto", "strategy_label:N", alt.value("white"), legend=None),
            tooltip=tooltip,
        )
        return alt.layer(bars, dots).properties(width=width, height=260, title=exam)

    chart = alt.hconcat(*(panel(PANELS[k]) for k in panels)).resolve_scale(x="shared")
    return chart.properties(
        title=alt.TitleParams(
            title_of("fig_decision"),
            subtitle=[
                "filled: the Pareto set (no other arm recalls as much on both exams for less); open: dominated; bars: 95% intervals"
            ],
        )
    )
