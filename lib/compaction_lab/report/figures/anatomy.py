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
#: Figure 8's colours of the trigger curves, in rank order: distinct enough for every listed strategy (twelve).
_CURVE_COLORS: list[str] = [
    "#4c78a8",
    "#f58518",
    "#e45756",
    "#72b7b2",
    "#54a24b",
    "#b279a2",
    "#9d755d",
    "#eeca3b",
    "#ff9da6",
    "#17becf",
    "#393b79",
    "#7f7f7f",
]


@register(
    "fig8_trigger_budgets",
    rank=80,
    title="the trigger and the budgets",
    seed=8,
    notebook="02_projection_anatomy",
)
def fig8_trigger_budgets(triggers: pd.DataFrame, budgets: pd.DataFrame, *, width: int = 520) -> alt.VConcatChart:
    """Figure 8: top, each strategy's trigger across windows and output ceilings; bottom, FutureOS budgets.

    A trigger curve is a colour: strategies whose triggers are the same at every (W, O) of the table share
    one (the table's ``curve``, named after all of them); one that never fires up to W is no curve, the
    subtitle names it. An output ceiling is a line's dash and its points' shape, named in the legend (two
    ceilings that give the same trigger share stay two marks).

    Parameters
    ----------
    triggers : DataFrame
        `strategies.trigger.trigger_table` output (without a ``curve`` column, each strategy is its own).
    budgets : DataFrame
        `strategies.trigger.budget_table` output (part, budget, used).
    """
    use_theme()
    t = triggers.copy()
    if "curve" not in t.columns:
        t["curve"] = t["strategy"]
    never = [str(n) for n, g in t.groupby("strategy", sort=False) if g["trigger"].isna().all()]
    t = t[t["trigger"].notna()]
    # One row per curve and (W, O): its tooltip names the curve's strategies and their rules.
    keys = ["curve", "window", "output_ceiling"]
    joined = t.groupby(keys, sort=False).agg(
        strategies=("strategy", ", ".join), bound=("bound", lambda b: "; ".join(dict.fromkeys(map(str, b))))
    )
    t = t.drop_duplicates(keys).drop(columns=["strategy", "bound"]).merge(joined.reset_index(), on=keys)
    t["ceiling"] = t["output_ceiling"].map(lambda o: f"O = {o:,}")
    # Each output ceiling its own dash and its own point shape, in one legend that shows both: two ceilings
    # whose points fall together (the same share of W) stay two marks.
    ceilings = list(dict.fromkeys(t.sort_values("output_ceiling", ascending=False)["ceiling"]))
    dashes = [_DASHES[i % len(_DASHES)] for i in range(len(ceilings))]
    shapes = [_SHAPES[i % len(_SHAPES)] for i in range(len(ceilings))]
    curves = list(dict.fromkeys(t["curve"]))
    x = alt.X(
        "window:Q",
        scale=alt.Scale(type="log", domain=list(log_domain(t["window"]))),
        title="context window W (tokens, log)",
        axis=alt.Axis(values=log_ticks(log_domain(t["window"]), width), format=",.0f"),
    )
    y = alt.Y("share:Q", axis=alt.Axis(format="%"), title="compaction trigger / W")
    color = alt.Color(
        "curve:N",
        title="strategy",
        sort=curves,
        scale=alt.Scale(domain=curves, range=[_CURVE_COLORS[i % len(_CURVE_COLORS)] for i in range(len(curves))]),
        legend=alt.Legend(labelLimit=320),
    )
    tooltip = ["strategies", "window", "output_ceiling", "trigger", "bound", alt.Tooltip("share:Q", format=".1%")]
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
        height=240,
        title=alt.TitleParams(
            "When each strategy compacts",
            subtitle=[
                "the smallest input at which each strategy's own trigger fires (its rule: the tooltip's bound)",
                "never up to W: " + ", ".join(never) if never else "every strategy fires up to W",
            ],
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
