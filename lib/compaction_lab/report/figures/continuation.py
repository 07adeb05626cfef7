"""Notebook 06's figures: can the agent still continue (figure 10), and what real compactions cost (figure 11)."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd

from compaction_lab.report.figures import register, title_of
from compaction_lab.report.figures._common import (
    distinct_text,
    end_label_room,
    flag_strategies,
    label_layers,
    no_data,
    place_labels,
    plural,
    subtitle_lines,
)
from compaction_lab.report.theme import use_theme

#: The notebook that draws both figures.
NOTEBOOK = "06_continuation_exam"

#: The block of ``continuation_recall`` figure 10 draws: the closed-book cases (the other is "recorded").
CLOSED_BLOCK = "closed"

#: What figure 10 says when no arm has a needed-next recall to set against its closed-book recall.
NO_CONTINUATION: tuple[str, ...] = (
    "Not measured: no case's next tool calls needed a value seen only before the cut",
    "(a target first seen after the cut, or kept in the recent tail by every arm, is not scored),",
    "or the closed-book exam asked no question of the same arms. Notebook 06 lists the next actions per case.",
)

#: What figure 11 says when the run's sessions hold no compaction their agent recorded.
NO_REDISCOVERY: tuple[str, ...] = (
    "Not measured: no recorded compaction in this run's sessions",
    "(pi compaction entries, Claude Code compact summaries, Codex compacted items, OpenCode summary messages);",
    "synthetic chains record none.",
)

#: How figure 10 labels an arm whose projection is larger than W − O: never drawn to look best.
OVER_WINDOW = "over window (not sendable)"
SENDABLE = "sendable"

#: The parts figure 11 splits each compaction's later tool calls into, in stacking order, one per class of
#: exact repeat (`exam.actions.rediscovery.CALL_CLASSES`) and the calls that repeat nothing.
REPEAT_PARTS: dict[str, str] = {
    "rediscovery (a lookup whose output was dropped)": "#e45756",
    "repeat, earlier output kept": "#f58518",
    "state check (re-run to see the state now)": "#72b7b2",
    "other exact repeat (an edit, a script)": "#b279a2",
    "other calls after": "#c7d3e0",
}

#: The parts of a ``rediscovery_compactions`` table written before the classes (no ``state_checks``
#: column): ``repeats`` then counted every exact repeat, ``repeats_kept`` those of them kept.
OLD_REPEAT_PARTS: dict[str, str] = {
    "repeat, earlier output kept": "#f58518",
    "repeat, earlier output dropped": "#e45756",
    "other calls after": "#c7d3e0",
}


def _one_row_per_strategy(table: pd.DataFrame) -> pd.DataFrame:
    """Keep the table's rows with a recall, one per strategy (the first: a run has one reader per exam)."""
    rows = table[pd.to_numeric(table["n"], errors="coerce").fillna(0) > 0]
    return rows.drop_duplicates("strategy")


def _over_window(table: pd.DataFrame) -> pd.Series:
    """Tell per row whether the arm is over the window; False where the column is absent or missing."""
    if "over_window" not in table.columns:
        return pd.Series(False, index=table.index)
    return table["over_window"].astype("boolean").fillna(False).astype(bool)


def _targets_note(table: pd.DataFrame) -> str | None:
    """E.g. "needed-next: n = 34 targets from 6 sessions; 95% interval: <method>" (None without counts)."""
    if table.empty:
        return None
    n = int(pd.to_numeric(table["n"], errors="coerce").max())
    where = ""
    if "n_sessions" in table.columns and pd.notna(table["n_sessions"].max()):
        where = f" from {plural(int(table['n_sessions'].max()), 'session')}"
    method = distinct_text(table, "ci_method")
    return f"needed-next: n = {plural(n, 'target')}{where}" + (f"; 95% interval: {method}" if method else "")


@register(
    "fig10_continuation",
    rank=92,
    title="can the agent still continue?",
    notebook=NOTEBOOK,
)
def fig10_continuation(
    continuation: pd.DataFrame, closed: pd.DataFrame, *, width: int = 460
) -> alt.LayerChart | alt.Chart:
    """Figure 10: per arm, needed-next recall (y) against closed-book recall (x), projection tokens as size.

    Each arm is a point with both 95% intervals as bars and its label, placed apart from every other label
    and point and inside the plot (`place_labels`: arms of one recall in both exams share a corner); the
    diagonal marks equal recall in both exams. An arm over the window (in either table) is drawn hollow, grey and labelled `OVER_WINDOW`,
    so it never looks best. The subtitle names who answered each exam (the tables' ``reader_label``: offline,
    the verbatim stand-ins).

    Parameters
    ----------
    continuation : DataFrame
        ``continuation_recall`` (block, strategy, strategy_label, reader_label, retained, n, recall, ci_low,
        ci_high, projection_tokens; over_window, n_sessions, ci_method when present); only block "closed"
        is drawn (all rows when there is no block column).
    closed : DataFrame
        ``exam_recall``, the closed book's per-arm recall (the same columns, no block).
    """
    title = title_of("fig10_continuation")
    if "block" in continuation.columns:
        continuation = continuation[continuation["block"] == CLOSED_BLOCK]
    if continuation.empty or closed.empty or not {"strategy", "n"} <= set(continuation.columns) & set(closed.columns):
        return no_data(title, NO_CONTINUATION)
    nxt, book = _one_row_per_strategy(continuation), _one_row_per_strategy(closed)
    keep = ["strategy", "retained", "n", "recall", "ci_low", "ci_high", "over_window"]
    data = nxt.assign(over_window=_over_window(nxt))[[*keep, "strategy_label", "projection_tokens"]].merge(
        book.assign(over_window=_over_window(book))[keep], on="strategy", suffixes=("", "_closed")
    )
    if data.empty:
        return no_data(title, NO_CONTINUATION)
    use_theme()
    # Over the window in either exam's cases: its request could not have been sent.
    data["over_window"] = data["over_window"] | data["over_window_closed"]
    data = flag_strategies(data)
    data["status"] = data["over_window"].map({True: OVER_WINDOW, False: SENDABLE})
    data["label"] = (
        data["strategy_label"].astype(str).where(~data["over_window"], data["strategy_label"] + " · over window")
    )
    data["next_of"] = [f"{k:.0f}/{n:.0f}" for k, n in zip(data["retained"], data["n"], strict=True)]
    data["closed_of"] = [f"{k:.0f}/{n:.0f}" for k, n in zip(data["retained_closed"], data["n_closed"], strict=True)]
    data["projection_tokens"] = pd.to_numeric(data["projection_tokens"], errors="coerce").fillna(0.0)
    # Sendable arms drawn last, on top; an over-window arm never hides one.
    data = data.sort_values("over_window", ascending=False, kind="stable")
    # Labels placed apart in pixels (`place_labels`): arms of like recall in both exams would print over each
    # other, over another arm's point, or past the plot's edge. A point's radius follows its size (the size
    # scale runs from 0 tokens, area 40, to the most, area 900).
    x_px = [width * float(v) for v in data["recall_closed"]]
    y_px = [width * (1 - float(v)) for v in data["recall"]]
    most = float(data["projection_tokens"].max()) or 1.0
    radii = [math.sqrt((40 + 860 * float(t) / most) / math.pi) + 1 for t in data["projection_tokens"]]
    spots = place_labels(x_px, y_px, data["label"].astype(str).tolist(), width=width, height=width, radius=radii)
    unit = alt.Scale(domain=[0, 1])
    x = alt.X("recall_closed:Q", title="closed-book recall", scale=unit, axis=alt.Axis(format="%"))
    y = alt.Y("recall:Q", title="needed-next recall", scale=unit, axis=alt.Axis(format="%"))
    base = alt.Chart(data)
    diagonal = (
        alt.Chart(pd.DataFrame({"a": [0.0, 1.0]}))
        .mark_line(color="#bbb", strokeDash=[4, 4])
        .encode(x=alt.X("a:Q", scale=unit), y=alt.Y("a:Q", scale=unit))
    )
    bar_dash = alt.condition(alt.datum.over_window, alt.value([3, 2]), alt.value([1, 0]))
    x_bars = base.mark_rule(color="#999").encode(
        x=alt.X("ci_low_closed:Q", scale=unit), x2="ci_high_closed:Q", y="recall:Q", strokeDash=bar_dash
    )
    y_bars = base.mark_rule(color="#999").encode(
        x="recall_closed:Q", y=alt.Y("ci_low:Q", scale=unit), y2="ci_high:Q", strokeDash=bar_dash
    )
    tooltip = [
        alt.Tooltip("strategy_shown:N", title="strategy"),
        alt.Tooltip("next_of:N", title="needed-next held"),
        alt.Tooltip("recall:Q", title="needed-next recall", format=".1%"),
        alt.Tooltip("ci_low:Q", title="needed-next 95% low", format=".1%"),
        alt.Tooltip("ci_high:Q", title="needed-next 95% high", format=".1%"),
        alt.Tooltip("closed_of:N", title="closed-book retained"),
        alt.Tooltip("recall_closed:Q", title="closed-book recall", format=".1%"),
        alt.Tooltip("projection_tokens:Q", title="projection tokens", format=",.0f"),
    ]
    points = base.mark_point(strokeWidth=2).encode(
        x=x,
        y=y,
        size=alt.Size(
            "projection_tokens:Q",
            title="projection tokens",
            scale=alt.Scale(range=[40, 900]),
            legend=alt.Legend(orient="bottom", format=",.0f"),
        ),
        shape=alt.Shape(
            "status:N",
            scale=alt.Scale(domain=[SENDABLE, OVER_WINDOW], range=["circle", "triangle-down"]),
            legend=alt.Legend(title=None, orient="bottom"),
        ),
        color=alt.condition(alt.datum.over_window, alt.value("#999"), alt.value("#4c78a8")),
        fill=alt.condition(alt.datum.over_window, alt.value("transparent"), alt.value("#4c78a8")),
        fillOpacity=alt.value(0.55),
        tooltip=tooltip,
    )
    labels = label_layers(
        data[["label", "over_window"]],
        "label",
        spots,
        x_px,
        y_px,
        color=alt.condition(alt.datum.over_window, alt.value("#888"), alt.value("#333")),
        radius=radii,
    )
    readers = [
        f"closed book: {distinct_text(closed, 'reader_label')}" if distinct_text(closed, "reader_label") else None,
        f"needed-next: {distinct_text(continuation, 'reader_label')}"
        if distinct_text(continuation, "reader_label")
        else None,
    ]
    return alt.layer(diagonal, x_bars, y_bars, points, *labels).properties(
        width=width,
        height=width,
        title=alt.TitleParams(
            title,
            subtitle=subtitle_lines(
                "; ".join(r for r in readers if r) or None,
                "per arm; bars: 95% intervals of both; size: projection tokens (mean per case); dashed: equal recall",
                _targets_note(nxt),
                f"{OVER_WINDOW}: hollow, grey — its projection is larger than W − O"
                if data["over_window"].any()
                else None,
            ),
        ),
    )


def _compaction_label(r: pd.Series) -> str:
    where = ", ".join(str(v) for v in (r.get("agent"), r.get("model")) if v is not None and pd.notna(v) and str(v))
    return f"{str(r['session_id'])[:24]} #{int(r['compaction']) + 1}" + (f" ({where})" if where else "")


def _money(v: Any, currency: str) -> str:
    """Format a cost; ``cost n/a`` when there is none (no price table: never a zero)."""
    return f"{float(v):.4f} {currency}".strip() if v is not None and pd.notna(v) else "cost n/a"


@register(
    "fig11_rediscovery",
    rank=94,
    title="what real compactions cost the agents that made them",
    notebook=NOTEBOOK,
)
def fig11_rediscovery(
    compactions: pd.DataFrame, repeats: pd.DataFrame | None = None, *, width: int = 460
) -> alt.LayerChart | alt.Chart:
    """Figure 11: per recorded compaction, the tool calls after it and which of them repeat one made before.

    One bar per compaction: its tool calls until the next compaction or the session's end, split by the
    class of each exact repeat (same tool, identical canonical arguments; `exam.actions.rediscovery.CALL_CLASSES`):
    rediscoveries (a lookup whose earlier output was dropped), repeats whose earlier output was kept, state
    checks (re-run to see the state now), other repeats, and the calls that repeat nothing. The label gives
    the rediscoveries, the tokens their outputs added and what those cost (`priced_as` in the subtitle).
    A table written before the classes (no ``state_checks``) is split by kept or dropped, as it was.

    Parameters
    ----------
    compactions : DataFrame
        ``rediscovery_compactions`` (session_id, agent, model, compaction, calls_after, repeats, repeats_kept,
        state_checks, repeats_other, repeat_output_tokens, repeat_cost, currency, price_table, priced_as).
    repeats : DataFrame, optional
        ``rediscovery`` (one row per repeated call: session_id, compaction, tool, call_class): the tools
        repeated and their classes, in the tooltip.
    width : int
        The bars' width in pixels.
    """
    title = title_of("fig11_rediscovery")
    if compactions.empty or "calls_after" not in compactions.columns:
        return no_data(title, NO_REDISCOVERY)
    use_theme()
    data = compactions.copy()
    classed = "state_checks" in data.columns  # a table written before the classes has no state checks
    data["compaction_label"] = data.apply(_compaction_label, axis=1)
    counts = ["calls_after", "repeats", "repeats_kept", "state_checks", "repeats_other", "repeat_output_tokens"]
    for col in counts:
        values = data[col] if col in data.columns else pd.Series(0, index=data.index)
        data[col] = pd.to_numeric(values, errors="coerce").fillna(0).astype(int)
    cost = data["repeat_cost"] if "repeat_cost" in data.columns else pd.Series(float("nan"), index=data.index)
    currency = data["currency"] if "currency" in data.columns else pd.Series("", index=data.index)
    data["cost"] = [_money(v, "" if pd.isna(c) else str(c)) for v, c in zip(cost, currency, strict=True)]
    data["tools"] = ""
    if repeats is not None and not repeats.empty and {"session_id", "compaction", "tool"} <= set(repeats.columns):
        named = repeats["tool"].astype(str)
        if "call_class" in repeats.columns:
            named = named + " (" + repeats["call_class"].astype(str) + ")"
        tools = named.groupby([repeats["session_id"], repeats["compaction"]]).agg(
            lambda t: ", ".join(f"{name} ×{k}" for name, k in t.value_counts().items())
        )
        data["tools"] = [tools.get((s, c), "") for s, c in zip(data["session_id"], data["compaction"], strict=True)]
    if classed:
        data["label"] = [
            f"{r.repeats} rediscover{'y' if r.repeats == 1 else 'ies'} · {plural(r.state_checks, 'state check')} · "
            f"{r.repeats_kept} kept, of {r.calls_after} calls · {r.repeat_output_tokens:,} tokens · {r.cost}"
            for r in data.itertuples()
        ]
    else:
        data["label"] = [
            f"{r.repeats} of {r.calls_after} repeat a call from before · {r.repeats_kept} earlier output kept · "
            f"{r.repeat_output_tokens:,} tokens · {r.cost}"
            for r in data.itertuples()
        ]
    palette = REPEAT_PARTS if classed else OLD_REPEAT_PARTS
    shared = ["compaction_label", *counts, "cost", "tools"]
    parts = []
    for r in data[shared].to_dict("records"):
        classes: tuple[int, ...] = (
            (r["repeats"], r["repeats_kept"], r["state_checks"], r["repeats_other"])
            if classed
            else (r["repeats_kept"], r["repeats"] - r["repeats_kept"])
        )
        sizes = (*classes, max(r["calls_after"] - sum(classes), 0))
        for rank, (part, k) in enumerate(zip(palette, sizes, strict=True)):
            parts.append({**r, "part": part, "order": rank, "calls": k})
    long = pd.DataFrame(parts)
    order = [str(v) for v in data["compaction_label"]]
    y = alt.Y("compaction_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    tips = [
        alt.Tooltip("compaction_label:N", title="compaction"),
        alt.Tooltip("part:N"),
        alt.Tooltip("calls:Q"),
        alt.Tooltip("calls_after:Q", title="tool calls after"),
        alt.Tooltip("repeats:Q", title="rediscoveries" if classed else "exact repeats"),
        alt.Tooltip(
            "repeats_kept:Q", title="repeats whose earlier output was kept" if classed else "earlier output kept"
        ),
    ]
    if classed:
        tips += [
            alt.Tooltip("state_checks:Q", title="state checks"),
            alt.Tooltip("repeats_other:Q", title="other repeats"),
        ]
    tips += [
        alt.Tooltip(
            "repeat_output_tokens:Q",
            title="tokens the rediscoveries added" if classed else "tokens the repeats added",
            format=",",
        ),
        alt.Tooltip("cost:N", title="what they cost"),
        alt.Tooltip("tools:N", title="tools repeated"),
    ]
    # Room after each bar for its label, inside the plot (`end_label_room`).
    top, width = end_label_room(data["calls_after"], data["label"], width, font_size=10)
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X(
                "calls:Q",
                stack="zero",
                title="tool calls after the compaction (until the next, or the end)",
                scale=alt.Scale(domain=[0, top]),
            ),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=list(palette), range=list(palette.values())),
                legend=alt.Legend(title=None, orient="bottom", labelLimit=320, columns=2),
            ),
            order=alt.Order("order:Q"),
            tooltip=tips,
        )
    )
    text = (
        alt.Chart(data[["compaction_label", "calls_after", "label"]])
        .mark_text(align="left", dx=4, fontSize=10)
        .encode(y=alt.Y("compaction_label:N", sort=order), x="calls_after:Q", text="label:N")
    )
    prices = distinct_text(data, "price_table")
    priced_as = distinct_text(data, "priced_as") or (distinct_text(repeats, "priced_as") if repeats is not None else "")
    if not pd.to_numeric(cost, errors="coerce").notna().any():
        money = (
            "cost: n/a (" + (priced_as if priced_as.startswith("not priced") else "no price table in this run") + ")"
        )
    else:
        money = f"cost: {prices} prices, {priced_as}" if prices else f"cost: {priced_as or 'as recorded'}"
    what = (
        "rediscovery: a lookup (read, grep, find) repeated after its output was dropped; state checks "
        "(git status, tests, lint, builds, ls) re-run to see the state now"
        if classed
        else None
    )
    return (bars + text).properties(
        width=width,
        title=alt.TitleParams(
            title,
            subtitle=subtitle_lines(
                "exact repeat: same tool, identical arguments (canonical JSON) as a call made before the compaction",
                what,
                money,
            ),
        ),
    )
