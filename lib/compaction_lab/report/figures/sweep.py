"""The figures of a sweep's page (``sweep.html``).

Drawn after the runs by `compaction_lab.report.sweep_page`, by no notebook, and saved in the sweep
folder's ``figures/``. Means and ranks are over the rows `share.ranked` keeps
(`sweep_table.ranked_rows`, docs/exams.md §9); each figure's subtitle counts the
rows left out and names, once, a strategy's other labels (`sweep_table.label_notes`):
the legend has one entry per strategy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import altair as alt
import pandas as pd

from compaction_lab.report import sweep_table
from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import distinct_text, no_data, who_answered
from compaction_lab.report.theme import use_theme

#: The column a sweep figure puts the swept values in (a name no profile parameter has).
SWEEP_X = "sweep_x"

#: Swept parameters that name a replicate rather than a quantity: drawn as categories even when numeric.
ORDINAL_PARAMS: tuple[str, ...] = ("seed",)

#: Where the stand-ins are named on a sweep figure (the legend carries each strategy's label).
_SWEEP_LEGEND = alt.Legend(
    title="strategy", orient="bottom", columns=2, labelLimit=420, symbolOpacity=1, symbolType="circle"
)


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _with_x(data: pd.DataFrame, param: str) -> tuple[pd.DataFrame, alt.X, list[Any]]:
    """Put the swept values of `param` in an x column: quantitative when every value is a number, else in sweep order.

    Returns the data with column `SWEEP_X` (numbers, or the values as text), the
    x encoding, and the values in sweep order (as they appear in that column).
    """
    values = sweep_table.sweep_values(data, param)
    out = data.copy()
    if values and all(_numeric(v) for v in values) and param not in ORDINAL_PARAMS:
        out[SWEEP_X] = out[param].astype(float)
        ticks = sorted(float(v) for v in values)
        enc = alt.X(
            f"{SWEEP_X}:Q",
            title=param,
            scale=alt.Scale(zero=False, nice=False, padding=14),
            axis=alt.Axis(values=ticks),
        )
        return out, enc, ticks
    labels = [sweep_table.value_text(v) for v in values]
    out[SWEEP_X] = out[param].map(sweep_table.value_text)
    return out, alt.X(f"{SWEEP_X}:O", title=param, sort=labels, axis=alt.Axis(labelAngle=0)), labels


def _strategy_color(data: pd.DataFrame, legend: alt.Legend | None = _SWEEP_LEGEND) -> alt.Color:
    """One colour per strategy, the legend ordered best mean recall first."""
    order = list(data.groupby("strategy_name", sort=False)["recall"].mean().sort_values(ascending=False).index)
    return alt.Color("strategy_name:N", sort=order, scale=alt.Scale(scheme="tableau20"), legend=legend)


def _runs_note(data: pd.DataFrame) -> str:
    """Says when a point is a mean over several runs (the other swept values), never silently."""
    most = int(pd.to_numeric(data["runs"], errors="coerce").max()) if "runs" in data and len(data) else 1
    if most > 1:
        return f"each point: mean over {most} runs (the other swept values), its band the mean of their intervals"
    return "each point: one run"


def _subtitle(data: pd.DataFrame, note: str, table: pd.DataFrame | None) -> list[str]:
    """Write the subtitle: who answered after `note`, then what ranks and means left out, and relabels."""
    lines = [who_answered(data, note)]
    if table is not None:
        left = sweep_table.not_ranked_text(table)
        lines += [left] if left else []
        lines += list(sweep_table.label_notes(table).values())
    return lines


def _no_sweep_data(stem: str, param: str) -> alt.Chart:
    return no_data(
        title_of(stem),
        (f"No run of this sweep finished with a closed-book result, so nothing is drawn against {param}.",),
    )


@register(
    "fig_sweep_lines",
    rank=220,
    title="Sweep — recall, tokens and money",
    notebook=None,
)
def fig_sweep_lines(table: pd.DataFrame, param: str, *, width: int = 250) -> alt.HConcatChart | alt.Chart:
    """Recall (95% interval as a band), projection tokens and cost per point against one swept parameter.

    One coloured line per strategy. With other parameters swept too, pass the
    table averaged over them (`sweep_table.sweep_means`): a table without a
    ``runs`` column is averaged here, one point per value of `param`.

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table, or `sweep_table.sweep_means` output.
    param : str
        The swept key on the x axis.
    """
    raw = None if "runs" in table.columns else table
    data = table if raw is None else sweep_table.sweep_means(table, [param])
    data = data[pd.to_numeric(data["recall"], errors="coerce").notna()] if len(data) else data
    if data.empty:
        return _no_sweep_data("fig_sweep_lines", param)
    use_theme()
    data, x, _ = _with_x(data, param)
    color = _strategy_color(data)
    tip = ["strategy_name", alt.Tooltip(SWEEP_X, title=param), alt.Tooltip("runs:Q", title="runs averaged")]
    base = alt.Chart(data).encode(x=x, color=color)
    band = base.mark_area(opacity=0.07).encode(
        y=alt.Y("ci_low:Q", title="recall", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        y2="ci_high:Q",
    )
    recall = (
        band
        + base.mark_line(point=True).encode(
            y="recall:Q",
            tooltip=[
                *tip,
                alt.Tooltip("recall:Q", format=".1%"),
                alt.Tooltip("ci_low:Q", format=".1%"),
                alt.Tooltip("ci_high:Q", format=".1%"),
            ],
        )
    ).properties(width=width, title=alt.TitleParams("recall", subtitle="band: the run's 95% interval"))
    tokens = (
        base.mark_line(point=True)
        .encode(
            y=alt.Y("projection_tokens:Q", title="projection tokens (mean per case)"),
            tooltip=[*tip, alt.Tooltip("projection_tokens:Q", format=",.0f")],
        )
        .properties(width=width, title="projection tokens")
    )
    panels = [recall, tokens]
    priced = pd.to_numeric(data["cost_per_point"], errors="coerce").notna()
    if priced.any():
        cur = distinct_text(data, "currency")
        panels.append(
            base.transform_filter("isValid(datum.cost_per_point)")
            .mark_line(point=True)
            .encode(
                y=alt.Y("cost_per_point:Q", title=f"{cur} per point of recall".strip()),
                tooltip=[*tip, alt.Tooltip("cost_per_point:Q", format=".5f")],
            )
            .properties(width=width, title=alt.TitleParams("cost per point", subtitle="none where recall is 0"))
        )
        note = f"{_runs_note(data)}; money: {distinct_text(data, 'price_table')} prices, cache simulated"
    else:
        # The cost notebook did not run (or priced nothing): say so rather than draw an empty panel.
        note = f"{_runs_note(data)}; money: not measured in these runs"
    return alt.hconcat(*panels, spacing=30).properties(
        title=alt.TitleParams(f"{title_of('fig_sweep_lines')} — against {param}", subtitle=_subtitle(data, note, raw))
    )


@register(
    "fig_sweep_small_multiples",
    rank=200,
    title="Sweep — recall in small multiples",
    notebook=None,
)
def fig_sweep_small_multiples(
    table: pd.DataFrame, param_x: str, param_facet: str, *, width: int = 240
) -> alt.FacetChart | alt.Chart:
    """Recall (line, 95% interval as a band) against `param_x`, one panel per value of `param_facet`.

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table (averaged here over any third swept key).
    param_x, param_facet : str
        The swept key on the x axis and the one that splits the panels.
    """
    data = sweep_table.sweep_means(table, [param_facet, param_x])
    data = data[pd.to_numeric(data["recall"], errors="coerce").notna()]
    if data.empty:
        return _no_sweep_data("fig_sweep_small_multiples", param_x)
    use_theme()
    data, x, _ = _with_x(data, param_x)
    panels = [f"{param_facet} = {sweep_table.value_text(v)}" for v in sweep_table.sweep_values(data, param_facet)]
    data["panel"] = [f"{param_facet} = {sweep_table.value_text(v)}" for v in data[param_facet]]
    base = alt.Chart().encode(x=x, color=_strategy_color(data))
    band = base.mark_area(opacity=0.07).encode(
        y=alt.Y("ci_low:Q", title="recall", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        y2="ci_high:Q",
    )
    line = base.mark_line(point=True).encode(
        y="recall:Q",
        tooltip=[
            "strategy_name",
            "panel",
            alt.Tooltip(SWEEP_X, title=param_x),
            alt.Tooltip("recall:Q", format=".1%"),
            alt.Tooltip("ci_low:Q", format=".1%"),
            alt.Tooltip("ci_high:Q", format=".1%"),
        ],
    )
    return (
        alt.layer(band, line, data=data)
        .properties(width=width, height=200)
        .facet(column=alt.Column("panel:N", sort=panels, title=None, header=alt.Header(labelFontSize=12)))
        .properties(
            title=alt.TitleParams(
                f"{title_of('fig_sweep_small_multiples')} — against {param_x}, one panel per {param_facet}",
                subtitle=_subtitle(data, f"band: the run's 95% interval; {_runs_note(data)}", table),
            )
        )
    )


def sweep_rank_labels(ranks: pd.DataFrame, param: str, facet: str | None = None) -> pd.DataFrame:
    """Label the right end of a bump chart: strategies ending on the same rank share one label.

    Parameters
    ----------
    ranks : DataFrame
        `sweep_table.sweep_ranks` output.
    """
    cols = [*([facet] if facet else []), param, "rank", "label"]
    if ranks.empty:
        return pd.DataFrame(columns=cols)
    keys = [facet] if facet else []
    # sweep_ranks rows follow sweep order, so each strategy's last row is its right end.
    last = ranks.groupby(sweep_table.order_codes(ranks, [*keys, "strategy"]), sort=False).tail(1)
    group = sweep_table.order_codes(last, [*keys, param, "rank"])
    out = last.groupby(group, sort=True).agg(
        **{c: (c, "first") for c in [*keys, param, "rank"]}, label=("strategy", lambda s: ", ".join(map(str, s)))
    )
    return out.reset_index(drop=True)[cols]


@register(
    "fig_sweep_ranks",
    rank=210,
    title="Sweep — who leads where (rank by recall)",
    notebook=None,
)
def fig_sweep_ranks(table: pd.DataFrame, param: str, facet: str | None = None, *, width: int = 240) -> alt.Chart:
    """Bump chart: each strategy's rank by recall at each value of `param` (1 on top); where lines cross, one overtakes.

    Ties share the better rank (method ``min``). Labels at the right end name
    the strategies (their ids; the legend carries their names). Only rows
    `share.ranked` keeps are ranked; the subtitle counts the others.

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table.
    param : str
        The swept key on the x axis.
    facet : str, optional
        A second swept key: one panel per value, ranks within each.
    """
    ranks = sweep_table.sweep_ranks(table, param, facet)
    if ranks.empty:
        return _no_sweep_data("fig_sweep_ranks", param)
    use_theme()
    ranks, x, _ = _with_x(ranks, param)
    labels, _, _ = _with_x(sweep_rank_labels(ranks, param, facet), param)
    worst = int(ranks["n_strategies"].max())
    y = alt.Y(
        "rank:Q",
        title="rank by recall (1 = best)",
        scale=alt.Scale(domain=[1, worst], reverse=True, nice=False),
        axis=alt.Axis(tickMinStep=1, format="d", values=list(range(1, worst + 1)), labelOverlap=False),
    )
    base = alt.Chart().encode(x=x, y=y)
    lines = base.mark_line(point=alt.OverlayMarkDef(size=60, filled=True), strokeWidth=2.5).encode(
        color=_strategy_color(ranks),
        detail="strategy:N",
        tooltip=["strategy_name", alt.Tooltip(SWEEP_X, title=param), "rank:Q", alt.Tooltip("recall:Q", format=".1%")],
    )
    text = alt.Chart().mark_text(align="left", dx=8, fontSize=10, color="#333").encode(x=x, y=y, text="label:N")
    subtitle = _subtitle(ranks, "ties share the better rank; recall averaged over any other swept value", table)
    title = alt.TitleParams(
        f"{title_of('fig_sweep_ranks')} — against {param}" + (f", one panel per {facet}" if facet else ""),
        subtitle=subtitle,
    )
    if facet is None:
        return alt.layer(lines, text.properties(data=labels), data=ranks).properties(
            width=width, height=max(160, 22 * worst), title=title
        )
    panels = [f"{facet} = {sweep_table.value_text(v)}" for v in sweep_table.sweep_values(ranks, facet)]
    for d in (ranks, labels):
        d["panel"] = [f"{facet} = {sweep_table.value_text(v)}" for v in d[facet]]
    both = pd.concat([ranks.assign(layer="line"), labels.assign(layer="label")], ignore_index=True)
    return (
        alt.layer(
            lines.transform_filter(alt.datum.layer == "line"),
            text.transform_filter(alt.datum.layer == "label"),
            data=both,
        )
        .properties(width=width, height=max(160, 22 * worst))
        # The end labels count in each panel's bounds, so the panels make room for them themselves.
        .facet(column=alt.Column("panel:N", sort=panels, title=None), spacing=24)
        .properties(title=title)
    )


@register(
    "fig_sweep_seeds",
    rank=230,
    title="Sweep — within a run vs across seeds",
    notebook=None,
)
def fig_sweep_seeds(
    table: pd.DataFrame, seed: str = "seed", *, by: Iterable[str] = (), width: int = 300
) -> alt.VConcatChart | alt.Chart:
    """Two kinds of interval side by side: each seed's 95% interval (within a run) and the spread across seeds.

    Left, per strategy: one point per seed with its 95% interval (how
    sure one run is of its own questions). Right: the mean across seeds, the
    min–max of the seeds (thin line) and a 95% range for one more seed (thick
    bar; Student t on the seeds, `sweep_table.seed_spread`): how much a
    different draw of sessions and questions moves the result.
    One such pair per value of the other swept keys (`by`).

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table, `seed` among its columns.
    seed : str
        The swept key naming the replicate.
    by : iterable of str
        Other swept keys (one pair of panels per combination of their values).
    """
    by = list(by)
    spread = sweep_table.seed_spread(table, seed, by)
    rows = sweep_table.ranked_rows(table)
    rows = rows[pd.to_numeric(rows["recall"], errors="coerce").notna()] if len(rows) else rows
    if spread.empty:
        return _no_sweep_data("fig_sweep_seeds", seed)
    use_theme()
    names = sweep_table.strategy_names(table)
    runs = rows.assign(
        strategy_name=rows["strategy"].map(lambda s: names[str(s)]),
        seed_label=rows[seed].map(lambda v: f"{seed} {sweep_table.value_text(v)}"),
    )
    seeds = list(dict.fromkeys(runs["seed_label"]))
    order = list(spread.groupby("strategy_name", sort=False)["recall_mean"].mean().sort_values(ascending=False).index)
    xscale = alt.Scale(domain=[0, 1])
    y = alt.Y("strategy_name:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    # The same step on both sides keeps a strategy's two rows level, so the right panel needs no labels.
    height = max(18, 10 * len(set(rows[seed].map(str)))) * len(order)
    y_right = alt.Y("strategy_name:N", sort=order, title=None, axis=alt.Axis(labels=False, ticks=False))
    settings = (
        [dict(zip(by, k, strict=True)) for k in dict.fromkeys(map(tuple, spread[by].astype(str).values.tolist()))]
        if by
        else [{}]
    )
    pairs = []
    for setting in settings:
        here = runs
        there = spread
        for k, v in setting.items():
            here = here[here[k].astype(str) == v]
            there = there[there[k].astype(str) == v]
        where = ", ".join(f"{k} = {v}" for k, v in setting.items())
        within_base = alt.Chart(here).encode(y=y, yOffset=alt.YOffset("seed_label:N", sort=seeds))
        within = (
            within_base.mark_rule(strokeWidth=1.5).encode(
                x=alt.X("ci_low:Q", scale=xscale, axis=alt.Axis(format="%"), title="recall"),
                x2="ci_high:Q",
                color=alt.Color("seed_label:N", sort=seeds, title="seed", legend=alt.Legend(orient="bottom")),
            )
            + within_base.mark_point(filled=True, size=40).encode(
                x="recall:Q",
                color=alt.Color("seed_label:N", sort=seeds),
                tooltip=[
                    "strategy_name",
                    "seed_label",
                    "retained_of_n",
                    alt.Tooltip("recall:Q", format=".1%"),
                    alt.Tooltip("ci_low:Q", format=".1%"),
                    alt.Tooltip("ci_high:Q", format=".1%"),
                ],
            )
        ).properties(
            width=width,
            height=height,
            title=alt.TitleParams(
                "95% interval (within a run)" + (f" — {where}" if where else ""),
                subtitle="one point per seed; bar: that run's interval over its questions",
            ),
        )
        across_base = alt.Chart(there).encode(y=y_right)
        tip = [
            "strategy_name",
            "n_seeds",
            alt.Tooltip("recall_mean:Q", format=".1%"),
            alt.Tooltip("recall_sd:Q", format=".1%"),
            alt.Tooltip("recall_min:Q", format=".1%"),
            alt.Tooltip("recall_max:Q", format=".1%"),
        ]
        across = (
            across_base.mark_bar(height=8, opacity=0.35, color="#4c78a8").encode(
                x=alt.X("across_low:Q", scale=xscale, axis=alt.Axis(format="%"), title="recall across seeds"),
                x2="across_high:Q",
                tooltip=tip,
            )
            + across_base.mark_rule(color="#333").encode(x="recall_min:Q", x2="recall_max:Q", tooltip=tip)
            + across_base.mark_point(filled=True, size=60, color="#222").encode(x="recall_mean:Q", tooltip=tip)
        ).properties(
            width=width,
            height=height,
            title=alt.TitleParams(
                "across seeds" + (f" — {where}" if where else ""),
                subtitle="dot: mean; thin line: min–max; thick bar: 95% range for one more seed (Student t)",
            ),
        )
        pairs.append(alt.hconcat(within, across, spacing=24))
    n_seeds = int(spread["n_seeds"].max())
    return alt.vconcat(*pairs, spacing=30).properties(
        title=alt.TitleParams(
            title_of("fig_sweep_seeds"),
            subtitle=_subtitle(spread, f"{n_seeds} seeds; the two kinds of interval answer different questions", table),
        )
    )
