"""What several figures share.

The chart that says why nothing is drawn, the look of an arm that could not be sent, the units and
who answered under a title.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import altair as alt
import pandas as pd

from compaction_lab.report.theme import use_theme

#: What an exam or cost figure says when the run asked no question (sessions too short for a
#: question before the recent tail, or nothing exact-valued in them): a chart, never an error.
NO_QUESTIONS = (
    "No question could be asked of these sessions, so nothing was measured here.",
    "Questions point before the recent tail (tail_tokens): shorter sessions, or none with",
    "exact values before the tail, give none. The exam notebook lists why, per session.",
)


def no_data(title: str, lines: Iterable[str] = NO_QUESTIONS, *, width: int = 520) -> alt.Chart:
    """Draw a figure that says, in words, why there is nothing to draw (the title of the figure it stands for).

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


#: Appended to the label of an arm whose projection is larger than the usable capacity W − O: a request
#: the agent could never send, so its recall is no achievable result, however high.
NOT_SENDABLE = " · not sendable (> W − O)"

#: The line a figure adds under its title when it draws such an arm (Vega-Lite has no hatch fill, so the
#: mark is faded and outlined with a dash instead).
NOT_SENDABLE_WHY = "not sendable — its projection is larger than the usable capacity W − O"
NOT_SENDABLE_NOTE = f"faded, dashed outline, listed last: {NOT_SENDABLE_WHY}"

_FADED = 0.3
_DASH = [4, 3]


def flag_arms(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """`df` with a bool ``over_window`` and the label an arm is drawn with, ``arm_label``.

    ``over_window`` is False where the column is absent (run folders that predate it) or missing; with
    `by`, an arm is over the window when any of its rows is (one case's request it could not send is
    enough). ``arm_label`` is ``strategy_label`` plus `NOT_SENDABLE` for such an arm.
    """
    out = df.copy()
    if "over_window" in out.columns:
        flag = out["over_window"].astype("boolean").fillna(False).astype(bool)
    else:
        flag = pd.Series(False, index=out.index)
    if by is not None and len(out):
        flag = flag.groupby(out[by].astype(str)).transform("any").astype(bool)
    out["over_window"] = flag
    labels = out["strategy_label"].astype(str)
    out["arm_label"] = labels.where(~flag, labels + NOT_SENDABLE)
    return out


def arm_order(df: pd.DataFrame, *keys: tuple[str, bool]) -> list[str]:
    """Arm labels in drawing order: every sendable arm before any over the window, then by `keys`.

    Each key is ``(column, ascending)``; ties keep the frame's order.
    """
    cols = ["over_window", *(k for k, _ in keys)]
    ascending = [True, *(a for _, a in keys)]
    ranked = df.sort_values(cols, ascending=ascending, kind="stable")
    return list(dict.fromkeys(ranked["arm_label"]))


def unsendable_look(df: pd.DataFrame) -> dict[str, Any]:
    """Return encodings that fade an over-window arm's mark and outline it with a dash; none when no arm is over."""
    if not df["over_window"].any():
        return {}
    over = alt.datum.over_window
    return {
        "fillOpacity": alt.condition(over, alt.value(_FADED), alt.value(1.0)),
        "strokeDash": alt.condition(over, alt.value(_DASH), alt.value([1, 0])),
        "strokeWidth": alt.condition(over, alt.value(1.5), alt.value(0)),
        # An encoded stroke, not a mark property: the legend's symbols stay as they were.
        "stroke": alt.condition(over, alt.value("#333"), alt.value(None)),
    }


def units_note(table: pd.DataFrame) -> str | None:
    """Describe the units and method of a table's intervals.

    E.g. "n = 27 questions from 9 records of 2 sessions; 95% interval: <ci_method>".

    The counts are the largest over the rows (every arm answers the same questions), with the share of the
    session that gives most when it gives more than half; None when the table carries neither the units
    nor the method (older run folders).
    """
    have = [c for c in ("n_records", "n_sessions", "ci_method") if c in table.columns]
    if not have or table.empty:
        return None
    parts = []
    n = _col_max(table, "n")
    if pd.notna(n):
        where = [
            plural(int(k), word)
            for k, word in ((_col_max(table, "n_records"), "record"), (_col_max(table, "n_sessions"), "session"))
            if pd.notna(k)
        ]
        units = f"n = {plural(int(n), 'question')}" + (" from " + " of ".join(where) if where else "")
        top = _col_max(table, "top_session_share")
        if _col_max(table, "n_sessions") > 1 and top > 0.5:
            units += f" (one session gives {top:.0%} of them)"
        parts.append(units)
    methods = distinct_text(table, "ci_method")
    if methods:
        parts.append(f"95% interval: {methods}")
    return "; ".join(parts) or None


def _col_max(table: pd.DataFrame, col: str) -> float:
    """Return the largest number in a column of `table`; NaN when the column is absent or holds none."""
    if col not in table.columns:
        return float("nan")
    top = pd.to_numeric(table[col], errors="coerce").max()
    return float(top) if pd.notna(top) else float("nan")


def subtitle_lines(*lines: str | None) -> list[str] | str:
    """Make a title's subtitle of the given lines (the missing ones left out): one string when one line."""
    kept = [line for line in lines if line]
    return kept[0] if len(kept) == 1 else kept


def who_answered(df: pd.DataFrame, note: str) -> str:
    """Write a subtitle that names who answered (a model, or an offline stand-in), after `note`."""
    if "reader_label" not in df.columns or df.empty:
        return note
    return f"{note}; reader: {', '.join(sorted(set(map(str, df['reader_label']))))}"


def distinct_text(data: pd.DataFrame, col: str) -> str:
    """Join the distinct non-empty values of a text column (e.g. the currency, the price table)."""
    if col not in data.columns:
        return ""
    return ", ".join(dict.fromkeys(v for v in map(str, data[col].dropna()) if v and v != "nan"))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def recall_panels(recall: pd.DataFrame, width: int) -> tuple[alt.Chart, alt.Chart]:
    """Draw the retained and tokens panels of figure 3 (each with its own data); `recall` already `flag_arms`-ed."""
    order = arm_order(recall, ("retained", False))
    look = unsendable_look(recall)
    base = alt.Chart(recall).encode(y=alt.Y("arm_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)))
    strategy = alt.Tooltip("arm_label:N", title="strategy")
    left = (
        base.mark_bar(color="#54a24b")
        .encode(x=alt.X("retained:Q", title="questions retained"), tooltip=[strategy, "retained", "n"], **look)
        .properties(width=width, title="information retained")
    )
    right = (
        base.mark_bar(color="#4c78a8")
        .encode(
            x=alt.X("projection_tokens:Q", title="projection tokens (mean per case)"),
            tooltip=[strategy, alt.Tooltip("projection_tokens:Q", format=",.0f")],
            **look,
        )
        .properties(width=width, title="what it costs in tokens")
    )
    return left, right
