"""Notebook 05's figure: where the values went in each open-book round (figure 9)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from compaction_lab.exam.readers import DECOYS_NOT_MEASURED
from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import no_data
from compaction_lab.report.theme import use_theme

OUTCOME_COLORS: dict[str, str] = {
    "from_projection": "#4c78a8",
    "recovered_by_search": "#54a24b",
    "in_archive_never_looked": "#f58518",
    "wrong": "#e45756",
    "decoy_abstained": "#bab0ac",
}


@register(
    "fig9_open_book",
    rank=90,
    title="can retrieval recover the loss?",
    seed=9,
    notebook="05_open_book_exam",
)
def fig9_open_book(outcomes: pd.DataFrame, *, width: int = 520) -> alt.Chart:
    """Figure 9: where the values went in each open-book round.

    Parameters
    ----------
    outcomes : DataFrame
        `exam.exams.open_book.outcome_table` (index round; columns arm, search,
        reader, one count column per outcome). A ``decoy_abstained`` of <NA>
        (only a stand-in answered the decoys) draws no bar; the subtitle says
        `DECOYS_NOT_MEASURED`.
    """
    if outcomes.empty:
        return no_data(title_of("fig9_open_book"))
    use_theme()
    wide = outcomes.reset_index()
    if "decoy_abstained" in wide.columns and "reader" in wide.columns:
        # A table saved before decoys could be <NA>: a stand-in's round still says nothing about decoys.
        stand_in = wide["reader"].astype(str).str.contains("stand-in", regex=False)
        wide["decoy_abstained"] = wide["decoy_abstained"].astype("Int64").mask(stand_in)
    # A stand-in's decoys are not measured (<NA>): no bar, and the subtitle says so, never "abstained".
    unmeasured = "decoy_abstained" in wide.columns and bool(wide["decoy_abstained"].isna().any())
    kinds = [k for k in OUTCOME_COLORS if k in wide.columns and wide[k].notna().any()]
    wide["round_label"] = wide.apply(lambda r: f"round {r['round']}: {r['book']} book, search {r['search']}", axis=1)
    long = wide.melt(id_vars=["round", "round_label"], value_vars=kinds, var_name="outcome", value_name="count")
    long = long[long["count"].notna()].astype({"count": "int64"})
    long["outcome_order"] = long["outcome"].map({k: i for i, k in enumerate(kinds)})
    readers = ", ".join(sorted(set(wide["reader"]))) if "reader" in wide else ""
    subtitle = [f"reader: {readers}" if readers else "where the values went, per round"]
    if unmeasured:
        subtitle.append(DECOYS_NOT_MEASURED)
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y(
                "round_label:N",
                sort=list(wide.sort_values("round")["round_label"]),
                title=None,
                axis=alt.Axis(labelLimit=360),
            ),
            x=alt.X("count:Q", title="values"),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(domain=kinds, range=[OUTCOME_COLORS[k] for k in kinds]),
                legend=alt.Legend(title="where the value went", orient="bottom", columns=3),
            ),
            order=alt.Order("outcome_order:Q"),
            tooltip=["round_label", "outcome", "count"],
        )
        .properties(
            width=width,
            title=alt.TitleParams(
                title_of("fig9_open_book"),
                subtitle=subtitle if len(subtitle) > 1 else subtitle[0],
            ),
        )
    )
