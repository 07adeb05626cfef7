"""Notebook 04's figures: compaction cost (5), cost per point of recall (6), and figure 3 with its money panel."""

from __future__ import annotations

import altair as alt
import pandas as pd

from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import (
    NOT_SENDABLE_NOTE,
    end_label_room,
    flag_strategies,
    no_data,
    parts_note,
    recall_panels,
    strategy_order,
    subtitle_lines,
    units_note,
    unsendable_look,
    who_answered,
)
from compaction_lab.report.theme import use_theme


@register(
    "fig5_compaction_cost",
    rank=50,
    title="compaction cost, cold vs cache-served",
    seed=5,
    notebook="04_cost_model",
)
def fig5_compaction_cost(cost: pd.DataFrame, *, width: int = 460) -> alt.Chart:
    """Figure 5: compaction cost per strategy, cold against cache-served (one price table and simulator).

    Parameters
    ----------
    cost : DataFrame
        `cost.model.cost_table` rows for ONE price table and simulator.
    """
    use_theme()
    cur = cost["currency"].iloc[0] if len(cost) else ""
    long = cost.melt(
        id_vars=["strategy_label"],
        value_vars=["compaction_cost_cold", "compaction_cost_cached"],
        var_name="cache",
        value_name="cost",
    )
    long["cache"] = long["cache"].map({"compaction_cost_cold": "cold", "compaction_cost_cached": "cache-served"})
    sub = (
        f"{cost['price_table'].iloc[0]} prices, {cost['simulator'].iloc[0]} cache rule (simulated)" if len(cost) else ""
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("strategy_label:N", title=None, axis=alt.Axis(labelLimit=360)),
            yOffset="cache:N",
            x=alt.X("cost:Q", title=f"one compaction ({cur})"),
            color=alt.Color(
                "cache:N",
                scale=alt.Scale(domain=["cold", "cache-served"], range=["#e45756", "#4c78a8"]),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
            tooltip=["strategy_label", "cache", alt.Tooltip("cost:Q", format=".5f")],
        )
        .properties(width=width, title=alt.TitleParams(title_of("fig5_compaction_cost"), subtitle=sub))
    )


@register(
    "fig6_cost_per_point",
    rank=60,
    title="one compaction + T turns, per point of recall",
    seed=6,
    notebook="04_cost_model",
)
def fig6_cost_per_point(cost: pd.DataFrame, *, width: int = 460) -> alt.Chart:
    """Figure 6: one compaction plus T later turns, per point of recall (one price table and simulator)."""
    if cost.empty or not cost["cost_per_point"].notna().any():
        return no_data(title_of("fig6_cost_per_point"))
    use_theme()
    data = cost[cost["cost_per_point"].notna()].copy()
    cur = data["currency"].iloc[0] if len(data) else ""
    turns = int(data["turns"].iloc[0]) if len(data) else 0
    data["label"] = data["cost_per_point"].map(lambda v: f"{v:.4f}")
    order = list(data.sort_values("cost_per_point")["strategy_label"])
    # Room after each bar for its label, inside the plot (`end_label_room`).
    top, width = end_label_room(data["cost_per_point"], data["label"], width)
    base = alt.Chart(data).encode(
        y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
        x=alt.X("cost_per_point:Q", title=f"{cur} per point of recall", scale=alt.Scale(domain=[0, top])),
    )
    return (base.mark_bar(color="#b279a2") + base.mark_text(align="left", dx=4).encode(text="label:N")).properties(
        width=width,
        title=alt.TitleParams(
            title_of("fig6_cost_per_point").replace("T turns", f"{turns} turns"),
            subtitle="recall from the closed-book exam; cache simulated",
        ),
    )


@register(
    "fig3_complete",
    rank=30,
    title="recall, tokens and money",
    seed=3,
    notebook="04_cost_model",
)
def fig3_complete(recall: pd.DataFrame, cost: pd.DataFrame, *, width: int = 220) -> alt.HConcatChart | alt.Chart:
    """Figure 3, complete: retained | tokens | money per point of recall (one price table and simulator).

    An arm over the window is faded, dashed, labelled `NOT_SENDABLE` and listed last in every panel (the
    money panel takes the flag from `recall`, matched by strategy label). The retained bar stacks scope
    and summary recall (`recall_panels`) when the table splits them.
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig3_complete"))
    use_theme()
    recall = flag_strategies(recall)
    left, right = recall_panels(recall, width)
    order = strategy_order(recall, ("retained", False))
    flags = recall.groupby(recall["strategy_label"].astype(str))["over_window"].any()
    data = cost[cost["cost_per_point"].notna()].copy()
    data["over_window"] = data["strategy_label"].astype(str).map(flags).astype("boolean").fillna(False).astype(bool)
    data = flag_strategies(data)
    cur = data["currency"].iloc[0] if len(data) else ""
    money = (
        alt.Chart(data)
        .mark_bar(color="#b279a2")
        .encode(
            y=alt.Y("strategy_shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("cost_per_point:Q", title=f"{cur} per point of recall"),
            tooltip=[alt.Tooltip("strategy_shown:N", title="strategy"), alt.Tooltip("cost_per_point:Q", format=".5f")],
            **unsendable_look(data),
        )
        .properties(width=width, title="the money behind each point")
    )
    return alt.hconcat(left, right, money, spacing=20).properties(
        title=alt.TitleParams(
            title_of("fig3_complete"),
            subtitle=subtitle_lines(
                who_answered(
                    recall, "money: one compaction + later turns, cache simulated on the real token sequences"
                ),
                parts_note(recall),
                units_note(recall),
                NOT_SENDABLE_NOTE if recall["over_window"].any() else None,
            ),
        )
    )
