"""Notebook 01's figure: what fills the window, and where follow-ups point (figure 2)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import end_label_room, plural, ticks_upto
from compaction_lab.report.theme import KIND_COLORS, POINTER_COLORS, use_theme


@register(
    "fig2_composition",
    rank=20,
    title="context composition",
    seed=2,
    notebook="01_context_composition",
)
def fig2_composition(comp: pd.DataFrame, pointers: pd.DataFrame, *, width: int = 380) -> alt.HConcatChart:
    """Figure 2: what fills the window (left) and where follow-ups point (right).

    Parameters
    ----------
    comp : DataFrame
        `composition.composition_table` output (session_id, kind, chars, ...).
    pointers : DataFrame
        `composition.pointer_table` output (pointer, followups, share).
    width : int
        Width of each panel in pixels.
    """
    use_theme()
    kinds = [k for k in KIND_COLORS if k in set(comp.loc[comp["chars"] > 0, "kind"])]
    c = comp[comp["kind"].isin(kinds)]
    allrow = c.groupby("kind", as_index=False)[["records", "chars", "tokens"]].sum()
    allrow["session_id"] = "ALL"
    data = pd.concat([c[["session_id", "kind", "records", "chars", "tokens"]], allrow], ignore_index=True)
    totals = data.groupby("session_id")["chars"].transform("sum")
    data["share"] = data["chars"] / totals.where(totals > 0)
    data["order"] = data["kind"].map({k: i for i, k in enumerate(kinds)})
    sessions = list(dict.fromkeys(c["session_id"])) + ["ALL"]

    left = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("session_id:N", sort=sessions, title=None),
            x=alt.X("share:Q", stack="normalize", axis=alt.Axis(format="%"), title="share of characters"),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=[KIND_COLORS[k] for k in kinds]),
                legend=alt.Legend(title="record kind", orient="bottom", columns=4),
            ),
            order=alt.Order("order:Q"),
            tooltip=["session_id", "kind", "records", "chars", "tokens", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(
            width=width,
            title=alt.TitleParams("What fills the window", subtitle="characters by record kind, per session"),
        )
    )

    p = pointers[pointers["pointer"].isin(POINTER_COLORS)].copy()
    n_resolved = int(p["followups"].sum())
    n_unresolved = int(pointers.loc[pointers["pointer"] == "unresolved", "followups"].sum())
    p["share"] = p["share"].fillna(0.0)
    p["label"] = p.apply(lambda r: f"{r['share']:.0%} ({int(r['followups'])})", axis=1)
    # Room after each bar for its label, inside the panel (`end_label_room`); the axis still ends at 100%.
    top, panel = end_label_room(p["share"], p["label"], width * 2 // 3, floor=1.0)
    base = alt.Chart(p).encode(
        y=alt.Y("pointer:N", sort=list(POINTER_COLORS), title=None),
        x=alt.X(
            "share:Q",
            axis=alt.Axis(format="%", values=ticks_upto(1.0, 6)),
            scale=alt.Scale(domain=[0, top]),
            title="share of follow-ups",
        ),
    )
    bars = base.mark_bar().encode(
        color=alt.Color(
            "pointer:N",
            scale=alt.Scale(domain=list(POINTER_COLORS), range=list(POINTER_COLORS.values())),
            legend=None,
        ),
        tooltip=["pointer", "followups", alt.Tooltip("share:Q", format=".1%")],
    )
    text = base.mark_text(align="left", dx=4).encode(text="label:N")
    subtitle = f"{plural(n_resolved, 'follow-up')} attributed (lexical heuristic)"
    if n_unresolved:
        subtitle += f"; {n_unresolved} unresolved, not shown"
    right = (bars + text).properties(width=panel, title=alt.TitleParams("Where follow-ups point", subtitle=subtitle))
    return (
        alt.hconcat(left, right, spacing=40)
        # Kinds and pointers are different variables: never merge their colour scales.
        .resolve_scale(color="independent")
        .properties(title=alt.TitleParams(title_of("fig2_composition"), fontSize=17))
    )
