"""What several figures share.

The chart that says why nothing is drawn, the look of an arm that could not be sent, the units and
who answered under a title, and the look of the part of recall only a summary held (`hatched`; the
two parts of recall: docs/exams.md#6a-where-the-answer-was-found).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
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

#: The line a figure adds under its title when it draws such an arm: the mark is faded and outlined with a
#: dash (hatching means something else: the part of recall only a summary held, `hatched`).
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


#: The colour of a right answer whose value is in neither what the arm keeps by design nor its summary
#: (a model reader's own: `found.part` says ``elsewhere``); plain, never hatched.
ELSEWHERE_COLOR = "#d0d0d0"
ELSEWHERE_NOTE = "grey: right, with the value in neither (the reader's own)"

_HATCH_STEP = 0.1
_HATCH_PX = 3.0
_HATCH_TINT = "white"


def hatched(color: str, *, size: tuple[float, float] | None = None) -> alt.Gradient:
    """Return the fill of the part of recall only a summary held: diagonal stripes of `color` and white.

    Vega-Lite has no pattern fill, so a linear gradient with hard stops (each offset given twice) draws
    the stripes; it renders alike in the browser, SVG and PNG. The gradient spans the mark's bounding
    box, so without `size` a long flat bar gets ten shallow stripes across its height; with the mark's
    size in pixels the stripes run at 45° every few pixels, whatever the mark's shape. A gradient is a
    constant mark colour, never an encoding: a figure draws one layer per colour (and per size). Faded
    and dashed stays the look of an arm over the window (`unsendable_look`).

    Parameters
    ----------
    color : str
        The stripes' colour (e.g. the pointer's, `theme.POINTER_COLORS`).
    size : (float, float), optional
        The mark's width and height in pixels, both positive.
    """
    if not isinstance(color, str) or not color:
        raise ValueError(f"color must be a colour name or hex string, got {color!r}")
    if size is None:
        x2, y2, step = 1.0, 1.0, _HATCH_STEP
    else:
        w, h = size
        if not (w > 0 and h > 0):
            raise ValueError(f"size must be a positive (width, height) in pixels, got {size!r}")
        # Along (w·s, h·s) with s = (w + h) / (w² + h²) the gradient runs (x + y) / (w + h): 45° in pixels.
        s = (w + h) / (w * w + h * h)
        x2, y2, step = w * s, h * s, min(_HATCH_PX / (w + h), 0.5)
    stops: list[alt.GradientStop] = []
    k = 0
    while k * step < 1:
        lo, hi = round(k * step, 5), round(min((k + 1) * step, 1.0), 5)
        c = color if k % 2 == 0 else _HATCH_TINT
        stops += [alt.GradientStop(color=c, offset=lo), alt.GradientStop(color=c, offset=hi)]
        k += 1
    return alt.Gradient(gradient="linear", x1=0, y1=0, x2=round(x2, 5), y2=round(y2, 5), stops=stops)


#: The height in pixels of a bar on a band of Vega-Lite's default step (20 px, inner padding 0.1).
BAR_PX = 18.0


def hatched_bars(
    rows: pd.DataFrame, color: Callable[[pd.Series], str], *, x_max: float, width: float, **encoding: Any
) -> list[alt.Chart]:
    """Draw each row of `rows` as its own bar from ``x`` to ``x2``, `hatched` at its size in pixels.

    One layer per row (a gradient is a constant mark colour, and its stripes are sized to the mark): the
    x scale runs from 0 to `x_max` over `width` pixels; a bar is `BAR_PX` high. A row of an arm over the
    window (``over_window``) keeps that look (`unsendable_look`). Rows of zero length draw nothing.

    Parameters
    ----------
    rows : DataFrame
        ``x``, ``x2`` and what `encoding` names.
    color : callable
        The stripes' colour of a row.
    """
    if not x_max > 0:
        raise ValueError(f"x_max must be positive, got {x_max!r}")
    layers = []
    for i in range(len(rows)):
        row = rows.iloc[[i]].reset_index(drop=True)
        pixels = (float(row["x2"].iloc[0]) - float(row["x"].iloc[0])) / x_max * width
        if pixels <= 0:
            continue
        look = unsendable_look(row) if "over_window" in row.columns else {}
        fill = hatched(color(row.iloc[0]), size=(pixels, BAR_PX))
        layers.append(alt.Chart(row).mark_bar(fill=fill).encode(**encoding, **look))
    return layers


def summary_note(summarisers: str) -> str:
    """Say what a hatched segment is and who wrote the summary that held it (`summarisers`, may be empty)."""
    return "hatched: found only in the summary" + (f", written by {summarisers}" if summarisers else "")


def summariser_labels(data: pd.DataFrame, mask: pd.Series | None = None) -> list[str]:
    """List the distinct summariser labels (``summary_by``, itself possibly " / "-joined) of `data`'s rows (`mask`)."""
    if "summary_by" not in data.columns:
        return []
    values = data["summary_by"] if mask is None else data.loc[mask, "summary_by"]
    names = (part.strip() for v in values.dropna() for part in str(v).split(" / "))
    return list(dict.fromkeys(n for n in names if n and n != "nan"))


def summarisers(data: pd.DataFrame, mask: pd.Series | None = None) -> str:
    """Join `summariser_labels` for a subtitle."""
    return ", ".join(summariser_labels(data, mask))


def answers_split(answers: pd.DataFrame) -> bool:
    """Whether answers say where each value was found (a ``found_in`` column with a value; old run folders have none)."""
    return "found_in" in answers.columns and bool(answers["found_in"].notna().any())


def recall_split(recall: pd.DataFrame) -> bool:
    """Whether a recall table splits recall into its parts (`stats.PART_COLUMNS`) that say anything.

    False without the columns or with them empty (older run folders), and when no arm puts a right answer
    in either part (answers without ``found_in`` counted as having it): the split would say nothing.
    """
    cols = ["scope_retained", "summary_retained"]
    if not set(cols) <= set(recall.columns):
        return False
    counts = recall[cols].apply(pd.to_numeric, errors="coerce")
    return bool(counts.notna().all(axis=None)) and bool((counts.sum(axis=1) > 0).any())


def part_segments(recall: pd.DataFrame) -> pd.DataFrame:
    """One row per arm and part of recall (scope, summary, elsewhere when any), with its stacked ``x`` / ``x2``.

    Scope first, so the solid length reads as scope recall; ``elsewhere`` is ``retained`` less both parts.
    `recall` is `flag_arms`-ed and `recall_split`.
    """
    rows = []
    for _, r in recall.iterrows():
        scope, summary = int(r["scope_retained"]), int(r["summary_retained"])
        counts = {"scope": scope, "summary": summary, "elsewhere": max(int(r["retained"]) - scope - summary, 0)}
        start = 0
        for name, k in counts.items():
            if k or name == "scope":  # every arm keeps a row, so every arm is listed
                rows.append({"arm_label": r["arm_label"], "part": name, "retained": k, "x": start, "x2": start + k})
            start += k
    out = pd.DataFrame(rows, columns=["arm_label", "part", "retained", "x", "x2"])
    keep = [c for c in ("over_window", "n", "scope_retained", "summary_retained", "summary_by") if c in recall]
    return out.merge(recall[["arm_label", *keep]].drop_duplicates("arm_label"), on="arm_label", how="left")


def split_label(retained: int, n: int, scope: int, summary: int) -> str:
    """Label a bar with its total and split, e.g. ``99/170 (58%) · scope 17 · summary 82`` (`` · elsewhere k``)."""
    label = f"{retained}/{n} ({retained / max(n, 1):.0%}) · scope {scope} · summary {summary}"
    rest = retained - scope - summary
    return label + (f" · elsewhere {rest}" if rest > 0 else "")


def recall_panels(recall: pd.DataFrame, width: int) -> tuple[alt.Chart | alt.LayerChart, alt.Chart]:
    """Draw the retained and tokens panels of figure 3 (each with its own data); `recall` already `flag_arms`-ed.

    When the table splits recall (`recall_split`), the retained bar stacks the scope part (solid), the
    summary part (`hatched`) and a right answer found in neither (grey, only when any).
    """
    order = arm_order(recall, ("retained", False))
    look = unsendable_look(recall)
    base = alt.Chart(recall).encode(y=alt.Y("arm_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)))
    strategy = alt.Tooltip("arm_label:N", title="strategy")
    left: alt.Chart | alt.LayerChart
    if recall_split(recall):
        left = _retained_parts(recall, order, width)
    else:
        left = (
            base.mark_bar(color=RETAINED_COLOR)
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


#: The colour of figure 3's "information retained" bar.
RETAINED_COLOR = "#54a24b"


def _retained_parts(recall: pd.DataFrame, order: list[str], width: int) -> alt.LayerChart:
    """Figure 3's retained panel split into scope (solid), summary (hatched) and elsewhere (grey) segments."""
    seg = part_segments(recall)
    totals = recall.drop_duplicates("arm_label").set_index("arm_label")
    labels = {
        arm: split_label(int(r["retained"]), int(r["n"]), int(r["scope_retained"]), int(r["summary_retained"]))
        for arm, r in totals.iterrows()
    }
    seg["label"] = seg["arm_label"].map(labels)
    y = alt.Y("arm_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    x_max = float(pd.to_numeric(recall["n"], errors="coerce").max() or 1)
    x = alt.X("x:Q", title="questions retained", scale=alt.Scale(domain=[0, x_max]))
    tooltip = [
        alt.Tooltip("arm_label:N", title="strategy"),
        alt.Tooltip("part:N", title="part"),
        alt.Tooltip("retained:Q", title="questions"),
        alt.Tooltip("label:N", title="retained"),
        alt.Tooltip("summary_by:N", title="summary written by"),
    ]
    layers = []
    for name, fill in (("scope", RETAINED_COLOR), ("summary", None), ("elsewhere", ELSEWHERE_COLOR)):
        rows = seg[seg["part"].eq(name)].reset_index(drop=True)
        if fill is None:  # hatched, each bar sized to its own stripes
            layers += hatched_bars(
                rows, lambda _: RETAINED_COLOR, x_max=x_max, width=width, y=y, x=x, x2="x2:Q", tooltip=tooltip
            )
        elif name == "scope" or len(rows):
            look = unsendable_look(rows) if len(rows) else {}
            layers.append(alt.Chart(rows).mark_bar(fill=fill).encode(y=y, x=x, x2="x2:Q", tooltip=tooltip, **look))
    return alt.layer(*layers).properties(width=width, title="information retained")


def parts_note(recall: pd.DataFrame) -> str | None:
    """Write the subtitle line of a split recall table's figure: what hatched (and grey) is; None when not split."""
    if not recall_split(recall):
        return None
    retained = pd.to_numeric(recall["retained"], errors="coerce").fillna(0)
    parts = recall[["scope_retained", "summary_retained"]].apply(pd.to_numeric, errors="coerce").fillna(0)
    has_summary = parts["summary_retained"] > 0
    note = summary_note(summarisers(recall, has_summary if has_summary.any() else None))
    elsewhere = bool((retained - parts.sum(axis=1) > 0).any())
    return note + ("; " + ELSEWHERE_NOTE if elsewhere else "")


#: Rough width of one character of a 10-px label, in pixels (the theme's sans-serif), for `label_rows`.
CHAR_PX = 6.0


def log_domain(values: pd.Series) -> tuple[float, float]:
    """Return a log axis's domain around `values`: the powers of ten just below the least and above the most."""
    v = pd.to_numeric(values, errors="coerce")
    v = v[v > 0]
    if v.empty:
        return 1.0, 10.0
    low, high = math.floor(math.log10(float(v.min()))), math.ceil(math.log10(float(v.max())))
    return 10.0**low, 10.0 ** max(high, low + 1)


def label_rows(
    x_px: Sequence[float], y_px: Sequence[float], texts: Sequence[str], *, dx: float = 7, line: float = 12
) -> list[float]:
    """Place point labels so that none overlaps another: return each label's centre height in pixels.

    A label starts `dx` pixels right of its point and wants to sit just above it; taken from the top of
    the chart down, each goes to the nearest free row (one `line` apart, below first, then above) whose
    box, `CHAR_PX` per character wide, overlaps no label placed before it.
    """
    placed: list[tuple[float, float, float]] = []  # (left, right, centre)
    out = [0.0] * len(texts)
    for i in sorted(range(len(texts)), key=lambda k: (y_px[k], x_px[k])):
        left = x_px[i] + dx
        right = left + CHAR_PX * len(texts[i])
        want = y_px[i] - dx
        for step in range(0, 4 * len(texts) + 1):
            y = want + line * ((step + 1) // 2) * (1 if step % 2 else -1) if step else want
            if all(right <= a or left >= b or abs(y - c) >= line for a, b, c in placed):
                break
        placed.append((left, right, y))
        out[i] = y
    return out
