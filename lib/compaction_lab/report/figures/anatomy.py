"""Notebook 02's figures: one complete projection per strategy (figure 7), the trigger and the budgets (figure 8)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import log_domain, log_ticks
from compaction_lab.report.theme import use_theme

#: One colour per projection segment kind.
SEGMENT_COLORS: dict[str, str] = {
    "system": "#bab0ac",
    "tools": "#d8d2ce",
    "header": "#9d755d",
    "user_original": "#54a24b",
    "assistant_original": "#f58518",
    "omitted_marker": "#e45756",
    "evidence_index": "#72b7b2",
    "summary": "#b279a2",
    "tail": "#4c78a8",
    "continue": "#eeca3b",
}


@register(
    "fig7_projection_anatomy",
    rank=70,
    title="one complete projection per strategy",
    seed=7,
    notebook="02_projection_anatomy",
)
def fig7_projection_anatomy(table: pd.DataFrame, *, width: int = 560) -> alt.Chart:
    """Figure 7: one complete projection per strategy, segments in order with their token sizes.

    Parameters
    ----------
    table : DataFrame
        `anatomy.projections_table` rows for ONE case (strategy, strategy_label,
        position, segment_kind, tokens, entry_ids, label).
    """
    use_theme()
    data = table.copy()
    data["entries"] = data["entry_ids"].map(lambda ids: ", ".join(list(ids)[:3]) + (" …" if len(ids) > 3 else ""))
    kinds = [k for k in SEGMENT_COLORS if k in set(data["segment_kind"])]
    order = list(dict.fromkeys(data["strategy_label"]))
    return (
        alt.Chart(data)
        .mark_bar(stroke="white", strokeWidth=0.3)
        .encode(
            y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("sum(tokens):Q", title="projection tokens (report tokenizer), segments in order"),
            color=alt.Color(
                "segment_kind:N",
                scale=alt.Scale(domain=kinds, range=[SEGMENT_COLORS[k] for k in kinds]),
                legend=alt.Legend(title="segment", orient="bottom", columns=5),
            ),
            order=alt.Order("position:Q"),
            tooltip=["strategy_label", "position", "segment_kind", "record_kind", "tokens", "entries", "label"],
        )
        .properties(
            width=width,
            title=alt.TitleParams(
                title_of("fig7_projection_anatomy"),
                subtitle="originals are never deleted: segments show what the next request sees and where it came from",
            ),
        )
    )


#: Figure 8's looks of the output ceilings, in order (largest ceiling first): a line's dash, its points' shape.
_DASHES: list[list[int]] = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3]]
_SHAPES: list[str] = ["circle", "square", "triangle-up", "diamond", "cross"]


@register(
    "fig8_trigger_budgets",
    rank=80,
    title="the trigger and the budgets",
    seed=8,
    notebook="02_projection_anatomy",
)
def fig8_trigger_budgets(triggers: pd.DataFrame, budgets: pd.DataFrame, *, width: int = 520) -> alt.VConcatChart:
    """Figure 8: top, each strategy's trigger across windows and output ceilings; bottom, FutureOS budgets.

    A strategy is a colour; an output ceiling is a line's dash and its points' shape, named in the legend
    (two ceilings that give the same trigger share stay two marks).

    Parameters
    ----------
    triggers : DataFrame
        `strategies.trigger.trigger_table` output.
    budgets : DataFrame
        `strategies.trigger.budget_table` output (part, budget, used).
    """
    use_theme()
    t = triggers.copy()
    t["ceiling"] = t["output_ceiling"].map(lambda o: f"O = {o:,}")
    # Each output ceiling its own dash and its own point shape, in one legend that shows both: two ceilings
    # whose points fall together (the same share of W) stay two marks.
    ceilings = list(dict.fromkeys(t.sort_values("output_ceiling", ascending=False)["ceiling"]))
    dashes = [_DASHES[i % len(_DASHES)] for i in range(len(ceilings))]
    shapes = [_SHAPES[i % len(_SHAPES)] for i in range(len(ceilings))]
    x = alt.X(
        "window:Q",
        scale=alt.Scale(type="log", domain=list(log_domain(t["window"]))),
        title="context window W (tokens, log)",
        axis=alt.Axis(values=log_ticks(log_domain(t["window"]), width), format=",.0f"),
    )
    y = alt.Y("share:Q", axis=alt.Axis(format="%"), title="compaction trigger / W")
    color = alt.Color("strategy:N", title="strategy")
    tooltip = ["strategy", "window", "output_ceiling", "trigger", "bound", alt.Tooltip("share:Q", format=".1%")]
    lines = (
        alt.Chart(t)
        .mark_line()
        .encode(
            x=x,
            y=y,
            color=color,
            strokeDash=alt.StrokeDash(
                "ceiling:N", title="output ceiling", sort=ceilings, scale=alt.Scale(domain=ceilings, range=dashes)
            ),
            detail="ceiling:N",
        )
    )
    points = (
        alt.Chart(t)
        .mark_point(filled=True, size=45, opacity=1)
        .encode(
            x=x,
            y=y,
            color=color,
            # The legend of the ceilings: one symbol per shape (the dash of each line is merged into it).
            shape=alt.Shape(
                "ceiling:N", title="output ceiling", sort=ceilings, scale=alt.Scale(domain=ceilings, range=shapes)
            ),
            tooltip=tooltip,
        )
    )
    top = alt.layer(lines, points).properties(
        width=width,
        height=200,
        title=alt.TitleParams(
            "When each strategy compacts",
            subtitle="FutureOS: min(floor(0.8W), W − O − min(2048, W/16)); Codex 0.9W; OpenCode W − min(O, 32k)",
        ),
    )
    b = budgets.copy()
    b["order"] = range(len(b))
    bottom = (
        alt.Chart(b)
        .mark_bar()
        .encode(
            x=alt.X("budget:Q", stack="zero", title="tokens up to the effective trigger"),
            color=alt.Color("part:N", sort=list(b["part"]), title="budget"),
            order=alt.Order("order:Q"),
            tooltip=["part", "budget", "used"],
        )
        .properties(
            width=width,
            height=50,
            title=alt.TitleParams(
                "Budgets inside a FutureOS projection",
                subtitle="tail, evidence and summary caps; history target within real capacity",
            ),
        )
    )
    return (
        alt.vconcat(top, bottom, spacing=30)
        .resolve_scale(color="independent")
        .properties(title=alt.TitleParams(title_of("fig8_trigger_budgets"), fontSize=17))
    )
