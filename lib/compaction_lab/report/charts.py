"""Figures: one function per figure, one registered theme, one `save_chart()`.

Every figure function takes tidy DataFrames (the run folder's tables) and
returns an Altair chart; nothing here reads files or computes results.
`save_chart` writes PNG + SVG (rendered by vl-convert, no browser, no network)
and a self-contained HTML (the Vega JavaScript inlined), so figures open
offline.

`FIGURES` is the registry of every figure: its file stem in a run folder's
``figures/``, its title (the one the chart and the report both show), the
function here that draws it and the notebook that saves it. `share` and the
report read it; every figure's code is one hop from its entry.

In notebooks, `setup_notebook()` enables the theme and a renderer that emits
both the interactive Vega-Lite spec (JupyterLab) and a PNG (nbconvert HTML,
GitHub, any viewer that cannot run Vega), so a rendered report needs no CDN.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import vl_convert as vlc

THEME = "compaction_lab"
RENDERER = "compaction_lab"

#: One colour per record kind, fixed so every chart of every run agrees.
KIND_COLORS: dict[str, str] = {
    "tool_output": "#4c78a8",
    "tool_call": "#9ecae9",
    "assistant": "#f58518",
    "reasoning": "#ffbf79",
    "user": "#54a24b",
    "system": "#bab0ac",
    "summary": "#b279a2",
}
POINTER_COLORS: dict[str, str] = {"assistant": "#f58518", "user": "#54a24b", "tool": "#4c78a8"}

_FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"


@alt.theme.register(THEME, enable=False)
def _theme() -> alt.theme.ThemeConfig:
    """House style: quiet axes, readable sizes, white background (PNG and SVG alike)."""
    return {
        "config": {
            "background": "white",
            "font": _FONT,
            "view": {"stroke": None, "continuousWidth": 360, "continuousHeight": 240},
            "title": {"fontSize": 15, "anchor": "start", "subtitleFontSize": 11, "subtitleColor": "#555"},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#eee", "domainColor": "#888"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12},
            "header": {"labelFontSize": 12, "titleFontSize": 12},
        }
    }


def _vegalite_mimetype() -> str:
    major = alt.SCHEMA_VERSION.lstrip("v").split(".")[0]
    return f"application/vnd.vegalite.v{major}+json"


def _renderer(spec: dict, **metadata) -> dict:
    """Display bundle: the Vega-Lite spec for live frontends plus a PNG fallback."""
    png = vlc.vegalite_to_png(spec, scale=2, vl_version=_vl_version())
    return {
        _vegalite_mimetype(): spec,
        "image/png": base64.b64encode(png).decode("ascii"),
        "text/plain": f"<{spec.get('$schema', 'Vega-Lite').rsplit('/', 1)[-1]} chart>",
    }


alt.renderers.register(RENDERER, _renderer)


def _vl_version() -> str:
    # vl-convert wants "6.1"-style versions; Altair's schema says "v6.1.0".
    parts = alt.SCHEMA_VERSION.lstrip("v").split(".")
    return f"{parts[0]}.{parts[1]}"


def use_theme() -> None:
    """Enable the house theme (idempotent)."""
    alt.theme.enable(THEME)


def setup_notebook() -> None:
    """Theme plus the PNG-carrying renderer; call once at the top of a notebook."""
    use_theme()
    alt.renderers.enable(RENDERER)


def save_chart(
    chart: alt.TopLevelMixin, stem: str | Path, formats: Iterable[str] = ("png", "svg", "html")
) -> dict[str, Path]:
    """Write a chart as PNG, SVG and self-contained HTML next to each other.

    Parameters
    ----------
    chart : altair chart
    stem : path without suffix, e.g. ``run/figures/fig2_composition``
    formats : which of png, svg, html to write

    Returns
    -------
    dict mapping format to written path.
    """
    use_theme()
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        if fmt == "png":
            chart.save(path, format="png", scale_factor=2)
        elif fmt == "svg":
            chart.save(path, format="svg")
        elif fmt == "html":
            # inline=True bundles Vega's JavaScript (from vl-convert): no CDN needed.
            chart.save(path, format="html", inline=True)
        else:
            raise ValueError(f"unknown chart format {fmt!r}; expected png, svg or html")
        written[fmt] = path
    return written


# --------------------------------------------------------------------------- figure 2


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
    base = alt.Chart(p).encode(
        y=alt.Y("pointer:N", sort=list(POINTER_COLORS), title=None),
        x=alt.X("share:Q", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]), title="share of follow-ups"),
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
    subtitle = f"{_plural(n_resolved, 'follow-up')} attributed (lexical heuristic)"
    if n_unresolved:
        subtitle += f"; {n_unresolved} unresolved, not shown"
    right = (bars + text).properties(
        width=width * 2 // 3, title=alt.TitleParams("Where follow-ups point", subtitle=subtitle)
    )
    return (
        alt.hconcat(left, right, spacing=40)
        # Kinds and pointers are different variables: never merge their colour scales.
        .resolve_scale(color="independent")
        .properties(title=alt.TitleParams(title_of("fig2_composition"), fontSize=17))
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --------------------------------------------------------------------------- figures 7 and 8

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


def fig8_trigger_and_budgets(triggers: pd.DataFrame, budgets: pd.DataFrame, *, width: int = 520) -> alt.VConcatChart:
    """Figure 8: top, each strategy's trigger across windows and output ceilings; bottom, FutureOS budgets.

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
    top = (
        alt.Chart(t)
        .mark_line(point=True)
        .encode(
            x=alt.X("window:Q", scale=alt.Scale(type="log"), title="context window W (tokens, log)"),
            y=alt.Y("share:Q", axis=alt.Axis(format="%"), title="compaction trigger / W"),
            color=alt.Color("strategy:N", title="strategy"),
            strokeDash=alt.StrokeDash("ceiling:N", title="output ceiling"),
            tooltip=["strategy", "window", "output_ceiling", "trigger", "bound", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(
            width=width,
            height=200,
            title=alt.TitleParams(
                "When each strategy compacts",
                subtitle="FutureOS: min(floor(0.8W), W − O − min(2048, W/16)); Codex 0.9W; OpenCode W − min(O, 32k)",
            ),
        )
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


# --------------------------------------------------------------------------- exam figures 1, 3, 4, 9

#: What an exam or cost figure says when the run asked no question (sessions too short for a
#: question before the recent tail, or nothing exact-valued in them): a chart, never an error.
NO_QUESTIONS = (
    "No question could be asked of these sessions, so nothing was measured here.",
    "Questions point before the recent tail (tail_tokens): shorter sessions, or none with",
    "exact values before the tail, give none. The exam notebook lists why, per session.",
)


def no_data(title: str, lines: Iterable[str] = NO_QUESTIONS, *, width: int = 520) -> alt.Chart:
    """A figure that says, in words, why there is nothing to draw (the same title as the figure it stands for).

    Parameters
    ----------
    title : str
        The title the figure would have had.
    lines : iterable of str
        The explanation, one line each.
    """
    use_theme()
    rows = pd.DataFrame({"i": range(len(list(lines))), "text": list(lines)})
    return (
        alt.Chart(rows)
        .mark_text(align="left", baseline="top", fontSize=13, color="#555")
        .encode(
            x=alt.value(0),
            y=alt.Y("i:O", axis=None),
            text="text:N",
        )
        .properties(width=width, height=24 * max(len(rows), 1), title=alt.TitleParams(title, subtitle="not measured"))
    )


PALETTE_POINTERS = POINTER_COLORS


def fig1_retained(answers: pd.DataFrame, *, width: int = 520) -> alt.LayerChart | alt.Chart:
    """Figure 1: questions still answerable after compaction, per strategy, split by pointer.

    Parameters
    ----------
    answers : DataFrame
        Closed-book answers (strategy_label, reader_label, pointer, decoy, correct).
    """
    if "decoy" not in answers or not (~answers["decoy"].astype(bool)).any():
        return no_data(title_of("fig1_retained"))
    use_theme()
    real = answers[~answers["decoy"]]
    n = real.groupby("strategy_label").size()
    parts = real[real["correct"]].groupby(["strategy_label", "pointer"]).size().rename("retained").reset_index()
    fallen = answers[answers["decoy"] & ~answers["correct"]].groupby("strategy_label").size()
    decoys = answers[answers["decoy"]].groupby("strategy_label").size()
    totals = pd.DataFrame({"n": n}).reset_index()
    totals["retained"] = totals["strategy_label"].map(real[real["correct"]].groupby("strategy_label").size()).fillna(0)
    totals["fallen"] = totals["strategy_label"].map(fallen).fillna(0).astype(int)
    totals["decoys"] = totals["strategy_label"].map(decoys).fillna(0).astype(int)
    totals["label"] = totals.apply(
        lambda r: (
            f"{int(r['retained'])}/{int(r['n'])} ({r['retained'] / max(r['n'], 1):.0%}) · decoys fallen for: "
            f"{r['fallen']}/{r['decoys']}"
        ),
        axis=1,
    )
    order = list(totals.sort_values("retained", ascending=False)["strategy_label"])
    reader = ", ".join(sorted(set(answers["reader_label"]))) if "reader_label" in answers else ""
    bars = (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("retained:Q", title="questions still answerable", scale=alt.Scale(domain=[0, int(n.max() or 1)])),
            color=alt.Color(
                "pointer:N",
                scale=alt.Scale(domain=list(POINTER_COLORS), range=list(POINTER_COLORS.values())),
                legend=alt.Legend(title="answer was in", orient="bottom"),
            ),
            order=alt.Order("pointer:N"),
            tooltip=["strategy_label", "pointer", "retained"],
        )
    )
    text = (
        alt.Chart(totals)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=alt.Y("strategy_label:N", sort=order), x="retained:Q", text="label:N")
    )
    return (bars + text).properties(
        width=width,
        title=alt.TitleParams(
            title_of("fig1_retained"),
            subtitle=f"closed book; reader: {reader}" if reader else "closed book",
        ),
    )


def _fig3_panels(recall: pd.DataFrame, width: int) -> tuple[alt.Chart, alt.Chart]:
    """The retained and tokens panels of figure 3 (each with its own data)."""
    order = list(recall.sort_values("retained", ascending=False)["strategy_label"])
    base = alt.Chart(recall).encode(y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)))
    left = (
        base.mark_bar(color="#54a24b")
        .encode(x=alt.X("retained:Q", title="questions retained"), tooltip=["strategy_label", "retained", "n"])
        .properties(width=width, title="information retained")
    )
    right = (
        base.mark_bar(color="#4c78a8")
        .encode(
            x=alt.X("projection_tokens:Q", title="projection tokens (mean per case)"),
            tooltip=["strategy_label", alt.Tooltip("projection_tokens:Q", format=",.0f")],
        )
        .properties(width=width, title="what it costs in tokens")
    )
    return left, right


def _who_answered(df: pd.DataFrame, note: str) -> str:
    """A subtitle that names who answered (a model, or an offline stand-in), after `note`."""
    if "reader_label" not in df.columns or df.empty:
        return note
    return f"{note}; reader: {', '.join(sorted(set(map(str, df['reader_label']))))}"


def fig3_retained_tokens(recall: pd.DataFrame, *, width: int = 260) -> alt.HConcatChart | alt.Chart:
    """Figure 3 (recall part): retained questions and projection tokens per strategy, side by side.

    The money part (cost per point of recall) joins when the cost model runs (`fig3_complete`).

    Parameters
    ----------
    recall : DataFrame
        `exam.stats.recall_table` output (strategy_label, retained, n, projection_tokens).
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig3_recall_tokens"))
    use_theme()
    left, right = _fig3_panels(recall, width)
    return alt.hconcat(left, right, spacing=20).properties(
        title=alt.TitleParams(
            title_of("fig3_recall_tokens"),
            subtitle=_who_answered(recall, "money per point of recall: see the cost notebook"),
        )
    )


def fig4_size_vs_recall(recall: pd.DataFrame, *, width: int = 480) -> alt.LayerChart | alt.Chart:
    """Figure 4: projection size (log x) against recall, one point per strategy, with 95% intervals.

    Parameters
    ----------
    recall : DataFrame
        strategy_label, projection_tokens, recall, ci_low, ci_high.
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig4_size_recall"))
    use_theme()
    data = recall[recall["projection_tokens"] > 0]
    base = alt.Chart(data).encode(
        x=alt.X("projection_tokens:Q", scale=alt.Scale(type="log"), title="projection tokens (mean per case, log)")
    )
    rule = base.mark_rule(color="#888").encode(
        y=alt.Y("ci_low:Q", axis=alt.Axis(format="%"), title="recall"), y2="ci_high:Q"
    )
    pts = base.mark_point(filled=True, size=90).encode(
        y="recall:Q",
        color=alt.Color("strategy_label:N", legend=None),
        tooltip=[
            "strategy_label",
            alt.Tooltip("recall:Q", format=".1%"),
            alt.Tooltip("ci_low:Q", format=".1%"),
            alt.Tooltip("ci_high:Q", format=".1%"),
            alt.Tooltip("projection_tokens:Q", format=",.0f"),
        ],
    )
    labels = base.mark_text(align="left", dx=7, dy=-7, fontSize=10).encode(y="recall:Q", text="strategy_label:N")
    return (rule + pts + labels).properties(
        width=width,
        height=300,
        title=alt.TitleParams(
            title_of("fig4_size_recall"),
            subtitle=_who_answered(recall, "bars: 95% bootstrap intervals over questions"),
        ),
    )


OUTCOME_COLORS: dict[str, str] = {
    "from_projection": "#4c78a8",
    "recovered_by_search": "#54a24b",
    "in_archive_never_looked": "#f58518",
    "wrong": "#e45756",
    "decoy_abstained": "#bab0ac",
}


def fig9_open_book(outcomes: pd.DataFrame, *, width: int = 520) -> alt.Chart:
    """Figure 9: where the values went in each open-book round.

    Parameters
    ----------
    outcomes : DataFrame
        `exam.open_book.outcome_table` (index round; columns arm, search,
        reader, one count column per outcome).
    """
    if outcomes.empty:
        return no_data(title_of("fig9_open_book"))
    use_theme()
    wide = outcomes.reset_index()
    kinds = [k for k in OUTCOME_COLORS if k in wide.columns]
    wide["round_label"] = wide.apply(lambda r: f"round {r['round']}: {r['arm']} book, search {r['search']}", axis=1)
    long = wide.melt(id_vars=["round", "round_label"], value_vars=kinds, var_name="outcome", value_name="count")
    long["outcome_order"] = long["outcome"].map({k: i for i, k in enumerate(kinds)})
    readers = ", ".join(sorted(set(wide["reader"]))) if "reader" in wide else ""
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
                subtitle=f"reader: {readers}" if readers else "where the values went, per round",
            ),
        )
    )


def pointer_mix_sensitivity(sens: pd.DataFrame, *, width: int = 480) -> alt.Chart:
    """How recall and the ranking move as the pointer mix slides from all-tool to all-assistant.

    Parameters
    ----------
    sens : DataFrame
        `exam.stats.sensitivity_table` output (s, default, strategy_label, recall, rank).
    """
    if sens.empty:
        return no_data(title_of("sensitivity_mix"))
    use_theme()
    line = sens[~sens["default"].astype(bool)].copy()
    return (
        alt.Chart(line)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "s:Q",
                title="share of questions pointing at the assistant (the rest at tool output)",
                axis=alt.Axis(format="%"),
            ),
            y=alt.Y("recall:Q", axis=alt.Axis(format="%"), title="recall under that mix"),
            color=alt.Color("strategy_label:N", title="strategy", legend=alt.Legend(labelLimit=320)),
            tooltip=["strategy_label", alt.Tooltip("s:Q", format=".0%"), alt.Tooltip("recall:Q", format=".1%"), "rank"],
        )
        .properties(
            width=width,
            height=260,
            title=alt.TitleParams(
                title_of("sensitivity_mix"), subtitle="where lines cross, the ranking of strategies changes"
            ),
        )
    )


# --------------------------------------------------------------------------- cost figures 3 (money), 5, 6


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
    base = alt.Chart(data).encode(
        y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
        x=alt.X("cost_per_point:Q", title=f"{cur} per point of recall"),
    )
    return (base.mark_bar(color="#b279a2") + base.mark_text(align="left", dx=4).encode(text="label:N")).properties(
        width=width,
        title=alt.TitleParams(
            title_of("fig6_cost_per_point").replace("T turns", f"{turns} turns"),
            subtitle="recall from the closed-book exam; cache simulated",
        ),
    )


def fig3_complete(recall: pd.DataFrame, cost: pd.DataFrame, *, width: int = 220) -> alt.HConcatChart | alt.Chart:
    """Figure 3, complete: retained | tokens | money per point of recall (one price table and simulator)."""
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig3_complete"))
    use_theme()
    left, right = _fig3_panels(recall, width)
    order = list(recall.sort_values("retained", ascending=False)["strategy_label"])
    data = cost[cost["cost_per_point"].notna()]
    cur = data["currency"].iloc[0] if len(data) else ""
    money = (
        alt.Chart(data)
        .mark_bar(color="#b279a2")
        .encode(
            y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("cost_per_point:Q", title=f"{cur} per point of recall"),
            tooltip=["strategy_label", alt.Tooltip("cost_per_point:Q", format=".5f")],
        )
        .properties(width=width, title="the money behind each point")
    )
    return alt.hconcat(left, right, money, spacing=20).properties(
        title=alt.TitleParams(
            title_of("fig3_complete"),
            subtitle=_who_answered(
                recall, "money: one compaction + later turns, cache simulated on the real token sequences"
            ),
        )
    )


NO_RECORDED: tuple[str, ...] = (
    "Not measured: no session of this run holds a compaction its agent recorded",
    "(pi compaction entries, Claude Code compact summaries, Codex compacted items, OpenCode summary messages).",
)


def fig_recorded(table: pd.DataFrame, *, width: int = 420) -> alt.Chart:
    """The real compactions found in the logs: recall of the agent's own compaction beside every arm.

    One panel per recorded compaction (its session, the agent and the model
    from the log), one row per arm with its 95% interval; the recorded
    compaction is drawn dark, the arm reimplementing that agent outlined.

    Parameters
    ----------
    table : DataFrame
        `exam.recorded.comparison_table` (case_id, agent, model, strategy_label,
        recorded, own_agent, recall, ci_low, ci_high, retained, n).
    """
    title = title_of("fig_recorded")
    if table.empty or not (table["n"] > 0).any():
        return no_data(title, NO_RECORDED)
    use_theme()
    data = table[table["n"] > 0].copy()
    data["compaction_label"] = data.apply(
        lambda r: f"{r['session_id'][:24]} · compaction {int(r['compaction']) + 1} ({r['agent']}, {r['model']})", axis=1
    )
    data["arm"] = data.apply(
        lambda r: (
            "recorded (the agent's own)"
            if r["recorded"]
            else ("reimplementation of that agent" if r["own_agent"] else "other arm")
        ),
        axis=1,
    )
    data["retained_of"] = data.apply(lambda r: f"{int(r['retained'])}/{int(r['n'])}", axis=1)
    order = list(dict.fromkeys(data.sort_values(["recorded", "own_agent"], ascending=False)["strategy_label"]))
    arms = ["recorded (the agent's own)", "reimplementation of that agent", "other arm"]
    base = alt.Chart().encode(y=alt.Y("strategy_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    rule = base.mark_rule(color="#888").encode(
        x=alt.X("ci_low:Q", axis=alt.Axis(format="%"), title="recall", scale=alt.Scale(domain=[0, 1])), x2="ci_high:Q"
    )
    pts = base.mark_point(filled=True, size=80).encode(
        x="recall:Q",
        color=alt.Color(
            "arm:N",
            scale=alt.Scale(domain=arms, range=["#222222", "#e45756", "#4c78a8"]),
            legend=alt.Legend(title=None, orient="bottom"),
        ),
        tooltip=[
            "strategy_label",
            "retained_of",
            alt.Tooltip("recall:Q", format=".1%"),
            alt.Tooltip("ci_low:Q", format=".1%"),
            alt.Tooltip("ci_high:Q", format=".1%"),
        ],
    )
    text = base.mark_text(align="left", dx=8, fontSize=10).encode(x="recall:Q", text="retained_of:N")
    return (
        alt.layer(rule, pts, text, data=data)
        .properties(width=width)
        .facet(
            row=alt.Row(
                "compaction_label:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=600)
            )
        )
        .resolve_scale(y="independent")
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=_who_answered(
                    data, "questions mined from the records before each compaction; bars: 95% bootstrap intervals"
                ),
            )
        )
    )


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the suite.

    Attributes
    ----------
    stem : str
        Its file name (without extension) in a run folder's ``figures/``.
    title : str
        The title the chart shows and the report captions it with.
    draw : callable
        The function here that draws it.
    notebook : str
        The notebook that draws and saves it.
    """

    stem: str
    title: str
    draw: Callable[..., Any]
    notebook: str


#: Every figure, in reading order (figure 3 comes twice: recall-only from notebook 03, with its money
#: panel from notebook 04).
FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "fig1_retained", "Figure 1 — what can still be answered after compaction", fig1_retained, "03_closed_book_exam"
    ),
    FigureSpec("fig2_composition", "Figure 2 — context composition", fig2_composition, "01_context_composition"),
    FigureSpec("fig3_complete", "Figure 3 — recall, tokens and money", fig3_complete, "04_cost_model"),
    FigureSpec("fig3_recall_tokens", "Figure 3 — recall and tokens", fig3_retained_tokens, "03_closed_book_exam"),
    FigureSpec(
        "fig4_size_recall", "Figure 4 — projection size against recall", fig4_size_vs_recall, "03_closed_book_exam"
    ),
    FigureSpec(
        "fig5_compaction_cost",
        "Figure 5 — compaction cost, cold vs cache-served",
        fig5_compaction_cost,
        "04_cost_model",
    ),
    FigureSpec(
        "fig6_cost_per_point",
        "Figure 6 — one compaction + T turns, per point of recall",
        fig6_cost_per_point,
        "04_cost_model",
    ),
    FigureSpec(
        "fig7_projection_anatomy",
        "Figure 7 — one complete projection per strategy",
        fig7_projection_anatomy,
        "02_projection_anatomy",
    ),
    FigureSpec(
        "fig8_trigger_budgets",
        "Figure 8 — the trigger and the budgets",
        fig8_trigger_and_budgets,
        "02_projection_anatomy",
    ),
    FigureSpec("fig9_open_book", "Figure 9 — can retrieval recover the loss?", fig9_open_book, "05_open_book_exam"),
    FigureSpec("sensitivity_mix", "Sensitivity to the question mix", pointer_mix_sensitivity, "03_closed_book_exam"),
    FigureSpec(
        "fig_recorded",
        "Real compactions — what the agent's own compaction kept, beside every arm",
        fig_recorded,
        "03_closed_book_exam",
    ),
)

_BY_STEM: dict[str, FigureSpec] = {f.stem: f for f in FIGURES}


def figure(stem: str) -> FigureSpec:
    """The registry entry of a figure, by its file stem."""
    try:
        return _BY_STEM[stem]
    except KeyError:
        raise KeyError(f"no figure {stem!r}; known: {', '.join(_BY_STEM)}") from None


def title_of(stem: str) -> str:
    """A figure's title, from the registry."""
    return figure(stem).title
