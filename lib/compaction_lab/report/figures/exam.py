"""Notebook 03's figures: the closed-book exam (figures 1, 3 and 4, the question mix) and the recorded compactions."""

from __future__ import annotations

import math
import re

import altair as alt
import pandas as pd

from compaction_lab.exam import found, imported, readers
from compaction_lab.exam.statistics import power
from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import (
    ELSEWHERE_COLOR,
    ELSEWHERE_NOTE,
    NOT_SENDABLE_NOTE,
    NOT_SENDABLE_WHY,
    answers_split,
    distinct_text,
    end_label_room,
    flag_strategies,
    hatched,
    hatched_bars,
    label_layers,
    log_domain,
    log_ticks,
    no_data,
    parts_note,
    place_labels,
    plural,
    recall_panels,
    recall_split,
    split_label,
    strategy_order,
    subtitle_lines,
    summarisers,
    summary_note,
    ticks_upto,
    units_note,
    unsendable_look,
    who_answered,
)
from compaction_lab.report.theme import POINTER_COLORS, use_theme


def _decoys_measured(answers: pd.DataFrame) -> pd.Series:
    """Per answer: whether its reader could fall for a decoy (`readers.measures_decoys`); False without readers."""
    if "reader" not in answers.columns:
        return pd.Series(False, index=answers.index)
    return answers["reader"].map(lambda r: readers.measures_decoys(str(r))).astype(bool)


@register(
    "fig1_retained",
    rank=10,
    title="what can still be answered after compaction",
    seed=1,
    notebook="03_closed_book_exam",
)
def fig1_retained(answers: pd.DataFrame, *, width: int = 520) -> alt.LayerChart | alt.Chart:
    """Figure 1: questions still answerable after compaction, per strategy, split by pointer and by part.

    Where the answers say where each value was found (``found_in``), each bar stacks its scope part
    (kept by design: solid, one colour per pointer), then its summary part (only the summary held it:
    `hatched` in the pointer's colour, the subtitle naming who wrote the summary, `summary_note`), then
    right answers found in neither (a model reader's: plain grey, `ELSEWHERE_NOTE`, only when any); the
    label gives the total and the split (`split_label`). Without ``found_in`` (older run folders) every
    right answer is one solid segment per pointer, as before.
    An arm over the window (``over_window``: its projection is larger than W − O) is faded, outlined
    with a dash, labelled `NOT_SENDABLE` and listed after every sendable arm. Decoys fallen for are
    counted per bar only over the answers of readers that can fall for one (`readers.measures_decoys`);
    when no reader can, the subtitle says `readers.DECOYS_NOT_MEASURED` once instead.

    Parameters
    ----------
    answers : DataFrame
        Closed-book answers (strategy_label, reader, reader_label, pointer, decoy, correct; found_in,
        summary_by, over_window when the run records them).
    """
    if "decoy" not in answers or not (~answers["decoy"].astype(bool)).any():
        return no_data(title_of("fig1_retained"))
    use_theme()
    answers = flag_strategies(answers, by="strategy_label")
    decoy = answers["decoy"].astype(bool)
    correct = answers["correct"].astype(bool)
    real = answers[~decoy]
    right = real[correct[~decoy]].copy()
    split = answers_split(answers)
    # Which part of recall each right answer counts toward (`found.part`); all one solid part without `found_in`.
    right["part"] = [found.part(str(f), True) for f in right["found_in"]] if split else "scope"
    flags = answers.groupby("strategy_shown")["over_window"].first()
    n = real.groupby("strategy_shown").size()
    parts = _stacked(right)
    parts["over_window"] = parts["strategy_shown"].map(flags).astype(bool)
    totals = pd.DataFrame({"n": n}).reset_index()
    for name in ("retained", *found.PARTS):
        counted = right if name == "retained" else right[right["part"].eq(name)]
        totals[name] = totals["strategy_shown"].map(counted.groupby("strategy_shown").size()).fillna(0).astype(int)
    totals["over_window"] = totals["strategy_shown"].map(flags).astype(bool)
    # Only a reader that could have fallen for a decoy says anything by not falling for it.
    judged = decoy & _decoys_measured(answers)
    measured = bool(judged.any())
    fallen = answers[judged & ~correct].groupby("strategy_shown").size()
    asked = answers[judged].groupby("strategy_shown").size()
    totals["fallen"] = totals["strategy_shown"].map(fallen).fillna(0).astype(int)
    totals["decoys"] = totals["strategy_shown"].map(asked).fillna(0).astype(int)
    totals["label"] = totals.apply(
        lambda r: (
            (
                split_label(int(r["retained"]), int(r["n"]), int(r["scope"]), int(r["summary"]))
                if split
                else f"{int(r['retained'])}/{int(r['n'])} ({r['retained'] / max(r['n'], 1):.0%})"
            )
            + (f" · decoys fallen for: {r['fallen']}/{r['decoys']}" if r["decoys"] else "")
        ),
        axis=1,
    )
    order = strategy_order(totals, ("retained", False))
    reader = ", ".join(sorted(set(answers["reader_label"]))) if "reader_label" in answers else ""
    decoy_note = None if measured or not decoy.any() else readers.DECOYS_NOT_MEASURED
    y = alt.Y("strategy_shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    # Room after each bar for its label, inside the plot (`end_label_room`).
    x_max, width = end_label_room(totals["retained"], totals["label"], width, floor=float(n.max() or 1))
    x = alt.X(
        "x:Q",
        title="questions still answerable",
        scale=alt.Scale(domain=[0, x_max]),
        axis=alt.Axis(values=ticks_upto(float(n.max() or 1))),
    )
    tooltip = [alt.Tooltip("strategy_shown:N", title="strategy"), "pointer", "part", "retained"]
    solid = parts[parts["part"].eq("scope")].reset_index(drop=True)
    bars = (
        alt.Chart(solid)
        .mark_bar()
        .encode(
            y=y,
            x=x,
            x2="x2:Q",
            color=alt.Color(
                "pointer:N",
                scale=alt.Scale(domain=list(POINTER_COLORS), range=list(POINTER_COLORS.values())),
                legend=alt.Legend(title="answer was in", orient="bottom"),
            ),
            tooltip=tooltip,
            **unsendable_look(parts),
        )
    )
    layers: list[alt.Chart] = [bars]
    # Hatched: one layer per segment, its stripes in its pointer's colour (`hatched_bars`).
    summary = parts[parts["part"].eq("summary")].reset_index(drop=True)
    layers += hatched_bars(
        summary,
        lambda r: POINTER_COLORS.get(str(r["pointer"]), ELSEWHERE_COLOR),
        x_max=x_max,
        width=width,
        y=y,
        x=x,
        x2="x2:Q",
        tooltip=tooltip,
    )
    elsewhere = parts[parts["part"].eq("elsewhere")].reset_index(drop=True)
    if len(elsewhere):
        layers.append(
            alt.Chart(elsewhere)
            .mark_bar(fill=ELSEWHERE_COLOR)
            .encode(y=y, x=x, x2="x2:Q", tooltip=tooltip, **unsendable_look(elsewhere))
        )
    text = (
        alt.Chart(totals)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=alt.Y("strategy_shown:N", sort=order), x="retained:Q", text="label:N")
    )
    held = right["part"].eq("summary")
    return alt.layer(*layers, text).properties(
        width=width,
        title=alt.TitleParams(
            title_of("fig1_retained"),
            subtitle=subtitle_lines(
                f"closed book; reader: {reader}" if reader else "closed book",
                summary_note(summarisers(right, held if held.any() else None)) if split else None,
                ELSEWHERE_NOTE if split and right["part"].eq("elsewhere").any() else None,
                decoy_note,
                NOT_SENDABLE_NOTE if totals["over_window"].any() else None,
            ),
        ),
    )


def _stacked(right: pd.DataFrame) -> pd.DataFrame:
    """Count right answers per arm, part and pointer, stacked: every scope segment, then summary, then elsewhere.

    ``x`` / ``x2`` are each segment's start and end along its arm's bar (layers do not stack together), so
    the solid length reads as scope recall.
    """
    counts = right.groupby(["strategy_shown", "part", "pointer"]).size().rename("retained").reset_index()
    rank = {p: i for i, p in enumerate(POINTER_COLORS)}
    counts["part_rank"] = counts["part"].map({"scope": 0, "summary": 1}).fillna(2)
    counts["pointer_rank"] = counts["pointer"].map(rank).fillna(len(rank))
    counts = counts.sort_values(["strategy_shown", "part_rank", "pointer_rank", "pointer"], kind="stable")
    counts["x2"] = counts.groupby("strategy_shown")["retained"].cumsum()
    counts["x"] = counts["x2"] - counts["retained"]
    return counts.drop(columns=["part_rank", "pointer_rank"]).reset_index(drop=True)


@register(
    "fig3_recall_tokens",
    rank=31,
    title="recall and tokens",
    seed=3,
    notebook="03_closed_book_exam",
)
def fig3_recall_tokens(recall: pd.DataFrame, *, width: int = 260) -> alt.HConcatChart | alt.Chart:
    """Figure 3 (recall part): retained questions and projection tokens per strategy, side by side.

    The money part (cost per point of recall) joins when the cost model runs (`fig3_complete`). An arm
    over the window is faded, dashed, labelled `NOT_SENDABLE` and listed last in both panels. When the
    table splits recall (``scope_retained``, ``summary_retained``), the retained bar stacks the scope
    part solid and the summary part `hatched` (right answers found in neither grey), `recall_panels`.

    Parameters
    ----------
    recall : DataFrame
        `exam.statistics.stats.recall_table` output (strategy_label, retained, n, projection_tokens; over_window,
        n_sessions, n_records, ci_method when present).
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig3_recall_tokens"))
    use_theme()
    recall = flag_strategies(recall)
    left, right = recall_panels(recall, width)
    return alt.hconcat(left, right, spacing=20).properties(
        title=alt.TitleParams(
            title_of("fig3_recall_tokens"),
            subtitle=subtitle_lines(
                who_answered(recall, "money per point of recall: see the cost notebook"),
                parts_note(recall),
                units_note(recall),
                NOT_SENDABLE_NOTE if recall["over_window"].any() else None,
            ),
        )
    )


@register(
    "fig4_size_recall",
    rank=40,
    title="projection size against recall",
    seed=4,
    notebook="03_closed_book_exam",
)
def fig4_size_recall(recall: pd.DataFrame, *, width: int = 480, height: int = 300) -> alt.LayerChart | alt.Chart:
    """Figure 4: projection size (log x) against recall, one point per strategy, with 95% intervals.

    An arm over the window is drawn faded with a dashed outline and a dashed interval, labelled
    `NOT_SENDABLE`, and drawn after (over) the sendable arms. When the table splits recall
    (``scope_recall``, ``scope_ci_low``, ``scope_ci_high``), each arm also gets its scope recall as an
    open point with its interval just beside, and the gap up to the total `hatched` (what came only
    through the summary); the arm's label stays by the total. Each label sits beside its point, apart from
    every other label and point and inside the plot (`place_labels`; a leader joins a label moved off its
    point's row), and the log axis has ticks whose labels never touch (`log_ticks`).

    Parameters
    ----------
    recall : DataFrame
        strategy_label, projection_tokens, recall, ci_low, ci_high (over_window, n_sessions, n_records,
        ci_method, `stats.PART_COLUMNS` when present).
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig4_size_recall"))
    use_theme()
    data = flag_strategies(recall[recall["projection_tokens"] > 0])
    data = data.sort_values("over_window", kind="stable")
    look = unsendable_look(data)
    domain = log_domain(data["projection_tokens"])
    x_scale = alt.Scale(type="log", domain=list(domain))
    # Labels placed apart in pixels (`place_labels`): arms of like size and recall would print over each other,
    # over another arm's point, or past the plot's edge.
    span = math.log10(domain[1]) - math.log10(domain[0])
    x_px = [width * (math.log10(float(t)) - math.log10(domain[0])) / span for t in data["projection_tokens"]]
    y_px = [height * (1 - float(r)) for r in data["recall"]]
    scope_y = pd.to_numeric(data.get("scope_recall", pd.Series(float("nan"), index=data.index)), errors="coerce")
    open_points = [(x, height * (1 - float(r)), _OPEN_R) for x, r in zip(x_px, scope_y, strict=True) if pd.notna(r)]
    spots = place_labels(
        x_px,
        y_px,
        data["strategy_shown"].astype(str).tolist(),
        width=width,
        height=height,
        radius=_DOT_R,
        obstacles=open_points,
    )
    base = alt.Chart(data).encode(
        x=alt.X(
            "projection_tokens:Q",
            scale=x_scale,
            title="projection tokens (mean per case, log)",
            axis=alt.Axis(values=log_ticks(domain, width), format=",.0f"),
        )
    )
    rule = base.mark_rule(color="#888").encode(
        y=alt.Y("ci_low:Q", axis=alt.Axis(format="%"), title="recall", scale=alt.Scale(domain=[0, 1])),
        y2="ci_high:Q",
        **({"strokeDash": look["strokeDash"]} if look else {}),
    )
    pts = base.mark_point(filled=True, size=90).encode(
        y="recall:Q",
        color=alt.Color("strategy_label:N", legend=None),
        tooltip=[
            alt.Tooltip("strategy_shown:N", title="strategy"),
            alt.Tooltip("recall:Q", format=".1%"),
            alt.Tooltip("ci_low:Q", format=".1%"),
            alt.Tooltip("ci_high:Q", format=".1%"),
            alt.Tooltip("projection_tokens:Q", format=",.0f"),
        ],
        **look,
    )
    labels = label_layers(data[["strategy_shown"]], "strategy_shown", spots, x_px, y_px, radius=_DOT_R)
    units = units_note(recall)
    layers: list[alt.Chart] = [rule, pts, *labels]
    split = recall_split(data)
    if split:
        data["scope_and_summary"] = pd.to_numeric(data["scope_recall"], errors="coerce") + pd.to_numeric(
            data["summary_recall"], errors="coerce"
        )
        gaps, scope = _scope_layers(data, look, height)
        layers = [*gaps, rule, *scope, pts, *labels]  # the total's interval over the hatched gap
    return alt.layer(*layers).properties(
        width=width,
        height=height,
        title=alt.TitleParams(
            title_of("fig4_size_recall"),
            subtitle=subtitle_lines(
                who_answered(
                    recall, "bars: 95% intervals" if units else "bars: 95% bootstrap intervals over questions"
                ),
                _scope_note(data) if split else None,
                units,
                f"faded, dashed outline: {NOT_SENDABLE_WHY}" if data["over_window"].any() else None,
            ),
        ),
    )


#: Figure 4's points' radii in pixels (a filled point of size 90, an open one of size 70 and its stroke).
_DOT_R = math.sqrt(90 / math.pi) + 1
_OPEN_R = math.sqrt(70 / math.pi) + 1

#: How far right of its arm's total figure 4 draws the scope recall's interval, and the hatched gap's width (pixels).
_SCOPE_DX = 7
_GAP_WIDTH = 8


def _scope_layers(data: pd.DataFrame, look: dict, height: int) -> tuple[list[alt.Chart], list[alt.Chart]]:
    """Figure 4's scope recall: the gaps up to the totals; its interval beside and open point.

    The gap from scope recall up by the summary recall is `hatched`; a model reader's right answers found
    in neither region fill the rest up to the total in plain grey. The arm label stays next to the total.
    """
    base = (
        alt.Chart(data)
        .transform_filter("isValid(datum.scope_recall)")
        .encode(
            x=alt.X(
                "projection_tokens:Q", scale=alt.Scale(type="log", domain=list(log_domain(data["projection_tokens"])))
            )
        )
    )
    faded = {"fillOpacity": look["fillOpacity"]} if look else {}
    tooltip = [
        alt.Tooltip("strategy_shown:N", title="strategy"),
        alt.Tooltip("scope_recall:Q", title="scope recall", format=".1%"),
        alt.Tooltip("scope_ci_low:Q", title="scope 95% low", format=".1%"),
        alt.Tooltip("scope_ci_high:Q", title="scope 95% high", format=".1%"),
        alt.Tooltip("summary_recall:Q", title="summary recall", format=".1%"),
        alt.Tooltip("summary_by:N", title="summary written by"),
    ]
    # One layer per arm: the stripes are sized to the gap's height in pixels (`hatched`).
    gaps = []
    for _, r in data.iterrows():
        rise = float(r["summary_recall"]) if pd.notna(r["scope_recall"]) else 0.0
        if not rise > 0:
            continue
        gaps.append(
            base.transform_filter(alt.FieldEqualPredicate(field="strategy_shown", equal=str(r["strategy_shown"])))
            .mark_bar(
                fill=hatched(SCOPE_GAP_COLOR, size=(_GAP_WIDTH, rise * height)),
                stroke=SCOPE_GAP_COLOR,
                strokeWidth=0.5,
                width=_GAP_WIDTH,
            )
            .encode(y="scope_recall:Q", y2="scope_and_summary:Q", tooltip=tooltip, **faded)
        )
    # A model reader's right answers found in neither region: plain grey, from there up to the total.
    if (data["recall"] - data["scope_and_summary"] > 1e-9).any():
        gaps.append(
            base.transform_filter("datum.recall - datum.scope_and_summary > 1e-9")
            .mark_bar(fill=ELSEWHERE_COLOR, width=_GAP_WIDTH)
            .encode(y="scope_and_summary:Q", y2="recall:Q", tooltip=tooltip, **faded)
        )
    interval = base.mark_rule(color="#888", xOffset=_SCOPE_DX).encode(
        y="scope_ci_low:Q",
        y2="scope_ci_high:Q",
        **({"strokeDash": look["strokeDash"]} if look else {}),
    )
    point = base.mark_point(filled=False, fill="white", fillOpacity=1, size=70, strokeWidth=2).encode(
        y="scope_recall:Q",
        color=alt.Color("strategy_label:N", legend=None),
        tooltip=tooltip,
        **({"opacity": look["fillOpacity"]} if look else {}),
    )
    return gaps, [interval, point]


#: The colour of figure 4's hatched gap between an arm's scope recall and its total.
SCOPE_GAP_COLOR = "#888888"


def _scope_note(data: pd.DataFrame) -> str:
    """Say what figure 4's two markers and the hatched gap between them are (who wrote the summaries)."""
    held = pd.to_numeric(data["summary_retained"], errors="coerce").fillna(0) > 0
    by = summarisers(data, held if held.any() else None)
    elsewhere = bool((data["recall"] - data["scope_and_summary"] > 1e-9).any())
    return (
        "filled: total recall; open: scope recall (kept by design), its interval beside; "
        f"hatched between: came only through the summary ({by or 'no summary'})"
        + (f"; {ELSEWHERE_NOTE}" if elsewhere else "")
    )


@register(
    "sensitivity_mix",
    rank=100,
    title="sensitivity to the question mix",
    notebook="03_closed_book_exam",
)
def sensitivity_mix(sens: pd.DataFrame, *, width: int = 480) -> alt.Chart:
    """How recall and the ranking move as the pointer mix slides from all-tool to all-assistant.

    Parameters
    ----------
    sens : DataFrame
        `exam.statistics.stats.sensitivity_table` output (s, default, strategy_label, recall, rank).
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


NO_RECORDED: tuple[str, ...] = (
    "Not measured: no session of this run holds a compaction its agent recorded",
    "(pi compaction entries, Claude Code compact summaries, Codex compacted items, OpenCode summary messages).",
)

#: How many characters of a session id `fig_recorded` heads a panel with (the ellipsis included).
_SHORT_ID = 9
#: Recall above which `fig_recorded` writes "k/n" left of its point (to the right it would pass the plot's edge).
_RIGHT_EDGE = 0.85

#: What the tick of `fig_recorded` stands for.
POOL_NOTE = "tick: share of every eligible value (the whole pool the questions were drawn from) the projection holds"


def _short(text: str, n: int) -> str:
    """`text`, cut to `n` characters with an ellipsis (a name from a log in a header; whole in the tooltip)."""
    return text if len(text) <= n else text[: n - 1] + "…"


@register(
    "fig_recorded",
    rank=110,
    title="real compactions: what the agent's own compaction kept, beside every arm",
    notebook="03_closed_book_exam",
)
def fig_recorded(table: pd.DataFrame, *, width: int = 420) -> alt.Chart:
    """Draw the real compactions found in the logs: recall of the agent's own compaction beside every arm.

    One panel per recorded compaction, headed above it by its ordinal, a short
    session id (the full one is in the tooltip), the agent and the model from
    the log, and how many questions from how many records; one row per
    arm with its 95% interval; the recorded compaction is drawn dark, the arm
    reimplementing that agent red. Where the table carries ``pool_recall``, a
    tick marks each arm's recall over the whole pool of eligible values. An
    arm over the window is faded, dashed, labelled `NOT_SENDABLE` and listed
    after every sendable arm of its panel. No decoy count is drawn here.

    Parameters
    ----------
    table : DataFrame
        `exam.exams.recorded.comparison_table` (case_id, agent, model, strategy_label,
        recorded, own_agent, recall, ci_low, ci_high, retained, n; over_window,
        pool_retained, pool_n, pool_recall, n_records, ci_method when present).
    """
    title = title_of("fig_recorded")
    if table.empty or not (table["n"] > 0).any():
        return no_data(title, NO_RECORDED)
    use_theme()
    data = flag_strategies(table[table["n"] > 0])

    # One panel per compaction, headed by its ordinal and a short session id (the full id is in the tooltip):
    # a long id as a row label took half the figure's width, and was cut.
    cases = list(dict.fromkeys(data["case_id"]))

    def panel(r: pd.Series) -> str:
        # Every name from the log shortened (session id, agent, model; each whole in the tooltip): a header
        # is as wide as its text, and a log's name may be any length.
        short = [_short(str(r[k]), n) for k, n in (("session_id", _SHORT_ID), ("agent", 24), ("model", 40))]
        label = (
            f"#{cases.index(r['case_id']) + 1} · session {short[0]} · compaction {int(r['compaction']) + 1}"
            f" ({short[1]}, {short[2]})"
        )
        records = r.get("n_records")
        return label + (
            f" · {int(r['n'])} questions from {plural(int(records), 'record')}" if pd.notna(records) else ""
        )

    # One label per compaction: its largest n (every arm answers the same questions).
    data["n_panel"] = data.groupby("case_id")["n"].transform("max")
    data["compaction_label"] = data.assign(n=data["n_panel"]).apply(panel, axis=1)
    panels = list(dict.fromkeys(data["compaction_label"]))
    data["strategy_kind"] = data.apply(
        lambda r: (
            "recorded (the agent's own)"
            if r["recorded"]
            else ("reimplementation of that agent" if r["own_agent"] else "other arm")
        ),
        axis=1,
    )
    data["retained_of"] = data.apply(lambda r: f"{int(r['retained'])}/{int(r['n'])}", axis=1)
    pooled = "pool_recall" in data.columns and pd.to_numeric(data["pool_recall"], errors="coerce").notna().any()
    if pooled:
        data["pool_of"] = data.apply(
            lambda r: f"{int(r['pool_retained'])}/{int(r['pool_n'])}" if pd.notna(r["pool_recall"]) else "",
            axis=1,
        )
    order = strategy_order(data, ("recorded", False), ("own_agent", False))
    kinds = ["recorded (the agent's own)", "reimplementation of that agent", "other arm"]
    look = unsendable_look(data)
    base = alt.Chart().encode(y=alt.Y("strategy_shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    rule = base.mark_rule(color="#888").encode(
        x=alt.X("ci_low:Q", axis=alt.Axis(format="%"), title="recall", scale=alt.Scale(domain=[0, 1])),
        x2="ci_high:Q",
        **({"strokeDash": look["strokeDash"]} if look else {}),
    )
    tooltip = [
        alt.Tooltip("session_id:N", title="session"),
        *(alt.Tooltip(f"{k}:N") for k in ("agent", "model") if k in data.columns),
        alt.Tooltip("strategy_shown:N", title="strategy"),
        "retained_of",
        alt.Tooltip("recall:Q", format=".1%"),
        alt.Tooltip("ci_low:Q", format=".1%"),
        alt.Tooltip("ci_high:Q", format=".1%"),
        *([alt.Tooltip("pool_of:N", title="pool held"), alt.Tooltip("pool_recall:Q", format=".1%")] if pooled else []),
    ]
    pts = base.mark_point(filled=True, size=80).encode(
        x="recall:Q",
        color=alt.Color(
            "strategy_kind:N",
            scale=alt.Scale(domain=kinds, range=["#222222", "#e45756", "#4c78a8"]),
            legend=alt.Legend(title=None, orient="bottom", labelLimit=320),
        ),
        tooltip=tooltip,
        **look,
    )
    # "k/n" beside its point, on the left near the right edge: never past the plot.
    near_edge = f"datum.recall > {_RIGHT_EDGE}"
    text = [
        base.transform_filter(f"!({near_edge})")
        .mark_text(align="left", dx=8, fontSize=10)
        .encode(x="recall:Q", text="retained_of:N"),
        base.transform_filter(near_edge)
        .mark_text(align="right", dx=-8, fontSize=10)
        .encode(x="recall:Q", text="retained_of:N"),
    ]
    layers = [rule, pts, *text]
    if pooled:
        layers.insert(
            1,
            base.transform_filter("isValid(datum.pool_recall)")
            .mark_tick(color="#555", thickness=2, size=14)
            .encode(x="pool_recall:Q", tooltip=tooltip),
        )
    methods = data
    if {"ci_method", "n_records"} <= set(data.columns):
        # Each panel's label gives its record count, so panels that differ only in it share one method line.
        methods = data.assign(ci_method=data["ci_method"].map(lambda m: re.sub(r" over \d+ ", " over ", str(m))))
    units = distinct_text(methods, "ci_method")
    return (
        alt.layer(*layers, data=data)
        .properties(width=width)
        .facet(
            row=alt.Row(
                "compaction_label:N",
                sort=panels,
                title=None,
                header=alt.Header(
                    labelOrient="top", labelAngle=0, labelAlign="left", labelAnchor="start", labelLimit=2 * width
                ),
            )
        )
        .resolve_scale(y="independent")
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=subtitle_lines(
                    who_answered(
                        data,
                        "questions mined from the records before each compaction; bars: "
                        + (f"95% intervals ({units})" if units else "95% bootstrap intervals"),
                    ),
                    POOL_NOTE if pooled else None,
                    NOT_SENDABLE_NOTE if data["over_window"].any() else None,
                ),
            )
        )
    )


@register(
    "fig12_readers",
    rank=45,
    title="recall by reader: the suite's readers and models run through Inspect AI",
    notebook="03_closed_book_exam",
)
def fig12_readers(table: pd.DataFrame, *, width: int = 460) -> alt.Chart | alt.LayerChart:
    """Figure 12: per arm, each reader's recall with its 95% interval (the table's own), the readers told apart by colour.

    The suite's readers (notebook 03) and the models whose answers were imported from Inspect AI logs
    (``compaction-lab import-inspect``) side by side: a reader's label says where its answers came from
    (``... (Inspect)``; a stand-in's label says it is one). An arm over the window is faded, dashed and
    listed last. Without imported answers the subtitle says how to add them.

    Parameters
    ----------
    table : DataFrame
        `exam.imported.readers_table` (source, reader_label, strategy_label, recall, ci_low, ci_high,
        n_questions, draws, consistent, over_window).
    """
    title = title_of("fig12_readers")
    if table.empty:
        return no_data(title)
    use_theme()
    data = flag_strategies(table, by="strategy_label")
    data["who"] = data["reader_label"].astype(str)
    data["of"] = [
        f"{k:.0f} of {n:.0f} x {d:g}"
        for k, n, d in zip(data["correct"], data["n_questions"], data["draws"], strict=True)
    ]
    order = strategy_order(data, ("recall", False))
    y = alt.Y("strategy_shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    offset = alt.YOffset("who:N")
    unit = alt.Scale(domain=[0, 1])
    look = unsendable_look(data)
    base = alt.Chart(data).encode(y=y, yOffset=offset)
    bars = base.mark_rule(color="#999").encode(x=alt.X("ci_low:Q", scale=unit), x2="ci_high:Q")
    points = base.mark_point(filled=True, size=70).encode(
        x=alt.X("recall:Q", title="recall (real questions)", scale=unit, axis=alt.Axis(format="%")),
        color=alt.Color(
            "who:N", title="reader", legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=480)
        ),
        tooltip=[
            alt.Tooltip("strategy_shown:N", title="strategy"),
            alt.Tooltip("who:N", title="reader"),
            alt.Tooltip("source:N", title="answers from"),
            alt.Tooltip("of:N", title="right draws of questions x draws"),
            alt.Tooltip("recall:Q", format=".1%"),
            alt.Tooltip("ci_low:Q", title="95% low", format=".1%"),
            alt.Tooltip("ci_high:Q", title="95% high", format=".1%"),
            alt.Tooltip("consistent:Q", title="questions whose draws agree", format=".0%"),
        ],
        **look,
    )
    sources = set(data["source"].astype(str))
    return (
        alt.layer(bars, points)
        .properties(width=width)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=subtitle_lines(
                    "95% intervals: the suite's readers as in figures 3 and 4; an imported model's resample "
                    "sessions or questions, then draws (hierarchical bootstrap)",
                    None if imported.INSPECT in sources else imported.NONE_IMPORTED_SHORT,
                    NOT_SENDABLE_NOTE if data["over_window"].any() else None,
                ),
            )
        )
    )


#: What figure 13 says when every question was asked once.
ONE_DRAW = (
    "One draw per question: nothing to tell apart.",
    "With a model reader at a temperature above 0, draws > 1 asks each question several times.",
)


@register(
    "fig13_consistency",
    rank=46,
    title="which questions are noisy: right in how many of their draws",
    notebook="03_closed_book_exam",
)
def fig13_consistency(answers: pd.DataFrame, *, width: int = 360) -> alt.Chart:
    """Figure 13: per arm (and reader), how many real questions were right in 0, 1, ... of their draws.

    A cell between the first and the last column holds the noisy questions: the reader's sampling, not
    the arm's retention, decided them. An arm over the window is listed last with `NOT_SENDABLE`.
    With one draw per question there is nothing to show (`ONE_DRAW`).

    Parameters
    ----------
    answers : DataFrame
        The closed book's answers, one row per draw (``exam_closed``: reader_label, strategy_label,
        case_id, question_id, decoy, correct; over_window when recorded).
    """
    title = title_of("fig13_consistency")
    if answers.empty or "draw" not in answers.columns:
        return no_data(title, ONE_DRAW)
    real = flag_strategies(answers[~answers["decoy"].astype(bool)], by="strategy_label")
    several = real["reader_label"].nunique() > 1
    real = real.assign(
        row=real["strategy_shown"].astype(str) + (" — " + real["reader_label"].astype(str) if several else "")
    )
    table = power.question_consistency(real, by=("row", "over_window"))
    if table.empty or table["draws"].max() < 2:
        return no_data(title, ONE_DRAW)
    use_theme()
    table = table[table["draws"] > 1].copy()
    table["column"] = [f"{r} of {d}" for r, d in zip(table["right"], table["draws"], strict=True)]
    columns = list(dict.fromkeys(table.sort_values(["draws", "right"])["column"]))
    # Sendable arms first, the noisiest first among them.
    noisy = table[table["noisy"]].groupby("row")["share"].sum()
    over = table.groupby("row")["over_window"].first()
    rows = sorted(over.index, key=lambda r: (bool(over[r]), -float(noisy.get(r, 0.0)), str(r)))
    base = alt.Chart(table).encode(
        x=alt.X("column:N", sort=columns, title="right in … of its draws", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("row:N", sort=rows, title=None, axis=alt.Axis(labelLimit=420)),
    )
    cells = base.mark_rect(stroke="#fff").encode(
        color=alt.Color("share:Q", title="share of questions", scale=alt.Scale(scheme="blues", domain=[0, 1])),
        tooltip=[
            alt.Tooltip("row:N", title="strategy"),
            alt.Tooltip("column:N", title="right in"),
            alt.Tooltip("questions:Q"),
            alt.Tooltip("share:Q", format=".0%"),
        ],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("questions:Q"),
        color=alt.condition(alt.datum.share > 0.5, alt.value("white"), alt.value("#333")),
    )
    return (
        alt.layer(cells, text)
        .properties(width=width)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle=subtitle_lines(
                    "each cell: real questions right in that many of their draws; the middle columns are the noisy ones",
                    who_answered(answers, "arms with the most noisy questions first"),
                ),
            )
        )
    )
