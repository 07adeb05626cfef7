"""What several figures share.

The chart that says why nothing is drawn, the look of an arm that could not be sent, the units and
who answered under a title, and the look of the part of recall only a summary held (`hatched`; the
two parts of recall: docs/exams.md#6a-where-the-answer-was-found).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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
    lines = list(lines)
    rows = pd.DataFrame({"i": range(len(lines)), "text": lines})
    # As wide as its longest line: a line past the plot's edge would be clipped.
    width = max(width, math.ceil(max((text_px(t, 13) for t in lines), default=0)) + 2)
    return (
        alt.Chart(rows)
        .mark_text(align="left", baseline="middle", fontSize=13, color="#555")
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


def flag_strategies(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """`df` with a bool ``over_window`` and the label an arm is drawn with, ``strategy_shown``.

    ``over_window`` is False where the column is absent (run folders that predate it) or missing; with
    `by`, an arm is over the window when any of its rows is (one case's request it could not send is
    enough). ``strategy_shown`` is ``strategy_label`` plus `NOT_SENDABLE` for such an arm.
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
    out["strategy_shown"] = labels.where(~flag, labels + NOT_SENDABLE)
    return out


def strategy_order(df: pd.DataFrame, *keys: tuple[str, bool]) -> list[str]:
    """Arm labels in drawing order: every sendable arm before any over the window, then by `keys`.

    Each key is ``(column, ascending)``; ties keep the frame's order.
    """
    cols = ["over_window", *(k for k, _ in keys)]
    ascending = [True, *(a for _, a in keys)]
    ranked = df.sort_values(cols, ascending=ascending, kind="stable")
    return list(dict.fromkeys(ranked["strategy_shown"]))


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
    `recall` is `flag_strategies`-ed and `recall_split`.
    """
    rows = []
    for _, r in recall.iterrows():
        scope, summary = int(r["scope_retained"]), int(r["summary_retained"])
        counts = {"scope": scope, "summary": summary, "elsewhere": max(int(r["retained"]) - scope - summary, 0)}
        start = 0
        for name, k in counts.items():
            if k or name == "scope":  # every arm keeps a row, so every arm is listed
                rows.append(
                    {"strategy_shown": r["strategy_shown"], "part": name, "retained": k, "x": start, "x2": start + k}
                )
            start += k
    out = pd.DataFrame(rows, columns=["strategy_shown", "part", "retained", "x", "x2"])
    keep = [c for c in ("over_window", "n", "scope_retained", "summary_retained", "summary_by") if c in recall]
    return out.merge(
        recall[["strategy_shown", *keep]].drop_duplicates("strategy_shown"), on="strategy_shown", how="left"
    )


def split_label(retained: int, n: int, scope: int, summary: int) -> str:
    """Label a bar with its total and split, e.g. ``99/170 (58%) · scope 17 · summary 82`` (`` · elsewhere k``)."""
    label = f"{retained}/{n} ({retained / max(n, 1):.0%}) · scope {scope} · summary {summary}"
    rest = retained - scope - summary
    return label + (f" · elsewhere {rest}" if rest > 0 else "")


def recall_panels(recall: pd.DataFrame, width: int) -> tuple[alt.Chart | alt.LayerChart, alt.Chart]:
    """Draw the retained and tokens panels of figure 3 (each with its own data); `recall` already `flag_strategies`-ed.

    When the table splits recall (`recall_split`), the retained bar stacks the scope part (solid), the
    summary part (`hatched`) and a right answer found in neither (grey, only when any).
    """
    order = strategy_order(recall, ("retained", False))
    look = unsendable_look(recall)
    base = alt.Chart(recall).encode(y=alt.Y("strategy_shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)))
    strategy = alt.Tooltip("strategy_shown:N", title="strategy")
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
    totals = recall.drop_duplicates("strategy_shown").set_index("strategy_shown")
    labels = {
        shown: split_label(int(r["retained"]), int(r["n"]), int(r["scope_retained"]), int(r["summary_retained"]))
        for shown, r in totals.iterrows()
    }
    seg["label"] = seg["strategy_shown"].map(labels)
    y = alt.Y("strategy_shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    x_max = float(pd.to_numeric(recall["n"], errors="coerce").max() or 1)
    x = alt.X("x:Q", title="questions retained", scale=alt.Scale(domain=[0, x_max]))
    tooltip = [
        alt.Tooltip("strategy_shown:N", title="strategy"),
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


#: Advance widths of the theme's first font (DejaVu Sans) per 1000 units of the font size, by character;
#: any character not listed counts as `_WIDE` (most of DejaVu Sans' other glyphs are at most that wide).
_ADVANCE: dict[str, int] = {
    c: w
    for chars, w in (
        ("'ijl", 278),
        ("IJ", 295),
        (" ,.·", 318),
        ("/:;\\|", 337),
        ("f", 352),
        ("-", 361),
        ("()[]t", 392),
        ("!r", 411),
        ('"', 460),
        ("*_`–", 500),
        ("sz?", 531),
        ("cLFkvxy", 592),
        ("PTYoaeE", 632),
        ("hnuSbdgpq$0123456789{}K", 656),
        ("AVXZBRC", 698),
        ("UNH∪", 752),
        ("DG&OQw", 818),
        ("#+<=>^~−≤≥×", 838),
        ("M", 863),
        ("%m", 974),
        ("W@—…", 1000),
    )
    for c in chars
}
_WIDE = 1000


def text_px(text: str, font_size: float = 10) -> float:
    """Return how wide `text` is drawn in the theme's font at `font_size` pixels (an upper estimate)."""
    return font_size * sum(_ADVANCE.get(c, _WIDE) for c in text) / 1000


def log_domain(values: pd.Series) -> tuple[float, float]:
    """Return a log axis's domain around `values`: the 1-2-5 steps just below the least and above the most."""
    v = pd.to_numeric(values, errors="coerce")
    v = v[v > 0]
    if v.empty:
        return 1.0, 10.0
    low, high = float(v.min()), float(v.max())
    steps = [
        m * 10.0**k for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 2) for m in (1, 2, 5)
    ]
    lo = max(s for s in steps if s <= low * (1 + 1e-9))
    hi = min(s for s in steps if s >= high * (1 - 1e-9))
    return lo, hi if hi > lo else lo * 2


def log_ticks(domain: tuple[float, float], width: float, *, font_size: float = 11, fmt: str = ",.0f") -> list[float]:
    """Return tick values of a log axis over `width` pixels whose labels never touch.

    Every power of ten in `domain` first, then its 1-2-5 steps (the domain's ends included) wherever the
    label fits: at least one label's width plus a gap from every tick kept (widths by `text_px`,
    labels written like Vega's `fmt` ``,.0f``). Vega's own choice of log ticks prints 100,000 and 200,000
    against each other at this width.
    """
    lo, hi = domain
    if not (0 < lo < hi):
        raise ValueError(f"a log domain must be two increasing positive numbers, got {domain!r}")
    span = math.log10(hi) - math.log10(lo)

    def px(v: float) -> float:
        return width * (math.log10(v) - math.log10(lo)) / span

    def label(v: float) -> str:
        return f"{v:,.0f}" if fmt == ",.0f" else format(v, fmt)

    candidates = [
        m * 10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)
    ]
    inside = [v for v in candidates if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    kept: list[float] = []
    # Powers of ten first, then the domain's ends, then the 2s and 5s.
    rank = sorted(inside, key=lambda v: (abs(math.log10(v) - round(math.log10(v))) > 1e-9, v not in domain, v))
    for v in rank:
        half = text_px(label(v), font_size) / 2
        if all(abs(px(v) - px(k)) >= half + text_px(label(k), font_size) / 2 + 6 for k in kept):
            kept.append(v)
    return sorted(kept)


@dataclass(frozen=True)
class LabelSpot:
    """Where `place_labels` puts one point's label, in pixels of the plot area (0, 0 its top left).

    Attributes
    ----------
    x : float
        The text's anchor: its left end (``align`` "left") or its right end ("right").
    y : float
        The height of its middle line (``baseline`` "middle").
    align : str
        "left" (the label is right of its point) or "right" (left of it).
    leader : bool
        Whether the label is off its point's own row: a leader line joins them (`label_layers`).
    """

    x: float
    y: float
    align: str
    leader: bool


def place_labels(
    x_px: Sequence[float],
    y_px: Sequence[float],
    texts: Sequence[str],
    *,
    width: float,
    height: float,
    radius: float | Sequence[float] = 5.0,
    font_size: float = 10,
    gap: float = 4,
    obstacles: Sequence[tuple[float, float, float]] = (),
) -> list[LabelSpot]:
    """Place point labels in a plot so that no label overlaps another label, a point or the plot's edge.

    Taken from the top of the plot down, each label goes to the first free place (its box `text_px`
    wide, 1.2 font sizes high): beside its point on the right, else on the left, on the point's own
    row first, then one row up, one down, two up... A place must stay inside the plot (a label never
    runs past its edge, where it would be clipped or print over an axis or legend), overlap no label
    placed before it and no point (each a square of its `radius`). When no place is free, the nearest
    place clear of labels is taken (crossing a point), and failing that the nearest inside the plot.

    Parameters
    ----------
    x_px, y_px : sequence of float
        Each point's position in pixels from the plot's top left.
    texts : sequence of str
        Each point's label.
    width, height : float
        The plot's size in pixels.
    radius : float or sequence of float
        The points' radius in pixels (one for all, or one per point).
    font_size : float
        The labels' font size in pixels.
    gap : float
        Pixels between a point's edge and its label.
    obstacles : sequence of (x, y, radius)
        Other marks no label may cover (e.g. a second point per arm), in pixels.

    Returns
    -------
    list of LabelSpot
        One per label, in the order given.
    """
    n = len(texts)
    if not len(x_px) == len(y_px) == n:
        raise ValueError(f"x_px, y_px and texts must be as long, got {len(x_px)}, {len(y_px)}, {n}")
    radii = [float(radius)] * n if isinstance(radius, int | float) else [float(r) for r in radius]
    line = 1.2 * font_size
    points = [(x_px[i] - radii[i], y_px[i] - radii[i], x_px[i] + radii[i], y_px[i] + radii[i]) for i in range(n)]
    others = [(x - r, y - r, x + r, y + r) for x, y, r in obstacles]
    placed: list[tuple[float, float, float, float]] = []
    out: list[LabelSpot | None] = [None] * n

    def hits(box: tuple[float, float, float, float], others: Iterable[tuple[float, float, float, float]]) -> bool:
        return any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3] for o in others)

    rows = int(max(height, line) // line) + 1
    for i in sorted(range(n), key=lambda k: (y_px[k], x_px[k])):
        w, x, y, r = text_px(texts[i], font_size), x_px[i], y_px[i], radii[i]
        spots = []
        for step in range(2 * rows + 1):
            dy = line * ((step + 1) // 2) * (-1 if step % 2 else 1)
            for align in ("left", "right"):
                anchor = x + r + gap if align == "left" else x - r - gap
                left = anchor if align == "left" else anchor - w
                box = (left, y + dy - line / 2, left + w, y + dy + line / 2)
                spots.append((LabelSpot(anchor, y + dy, align, dy != 0), box))
        inside = [(s, b) for s, b in spots if b[0] >= 0 and b[1] >= 0 and b[2] <= width and b[3] <= height]
        clear = [(s, b) for s, b in inside if not hits(b, placed)]
        free = [(s, b) for s, b in clear if not hits(b, [*points[:i], *points[i + 1 :], *others])]
        spot, box = (free or clear or inside or spots)[0]
        if not (free or clear or inside):  # wider than the plot: keep it on its row, from the plot's left
            box = (0.0, y - line / 2, w, y + line / 2)
            spot = LabelSpot(0.0, y, "left", False)
        placed.append(box)
        out[i] = spot
    return [s for s in out if s is not None]


def end_label_room(
    values: Iterable[float],
    texts: Iterable[str],
    width: int,
    *,
    font_size: float = 11,
    dx: float = 4,
    floor: float = 0.0,
) -> tuple[float, int]:
    """Return a bar axis's domain top and the plot's width that keep each bar's end label inside the plot.

    A bar of `value` ends ``value / top * width`` pixels from the axis; its label, `dx` pixels after it
    and `text_px` wide, must end by the plot's right edge (past it, a label is clipped or prints over
    whatever is beside the plot). The plot is widened, when a label needs it, so that every label fits
    beside at least half the width; the domain's top is at least `floor` (e.g. the most there could be).

    Returns
    -------
    (float, int)
        The domain's top (positive) and the plot's width in pixels (at least `width`).
    """
    rows = [(float(v), text_px(str(t), font_size)) for v, t in zip(values, texts, strict=True)]
    widest = max((w for _, w in rows), default=0.0)
    plot = max(int(width), math.ceil(2 * (widest + dx)))
    top = max([float(floor)] + [v * plot / (plot - dx - w) for v, w in rows])
    return (top if top > 0 else 1.0), plot


def ticks_upto(limit: float, count: int = 8) -> list[float]:
    """Return round tick values from 0 up to `limit` (steps of 1, 2 or 5 times a power of ten, at most `count`).

    For an axis whose domain runs past what the data can reach (room for labels, `end_label_room`): the
    ticks stop at the most there could be.
    """
    if not limit > 0:
        return [0.0]
    raw = limit / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [round(k * step, 10) for k in range(int(limit / step + 1e-9) + 1)]


def label_layers(
    data: pd.DataFrame,
    text: str,
    spots: Sequence[LabelSpot],
    x_px: Sequence[float],
    y_px: Sequence[float],
    *,
    font_size: float = 10,
    color: Any = None,
    radius: float | Sequence[float] = 5.0,
) -> list[alt.Chart]:
    """Draw the labels `place_labels` placed: a text layer per side, and a leader line to each moved label.

    Positions are pixels (``scale=None``): the layers share no scale with the chart's points. The leader
    runs from the point's edge (its `radius`, as given to `place_labels`) to the label's anchor.

    Parameters
    ----------
    data : DataFrame
        One row per point, in the order of `spots`.
    text : str
        The column holding each label.
    x_px, y_px : sequence of float
        Each point's position in pixels (as given to `place_labels`).
    color : altair encoding, optional
        The labels' colour (e.g. a condition); the theme's default without.
    """
    radii = [float(radius)] * len(spots) if isinstance(radius, int | float) else [float(r) for r in radius]
    starts = []
    for spot, x, y, r in zip(spots, x_px, y_px, radii, strict=True):
        dx, dy = spot.x - x, spot.y - y
        far = math.hypot(dx, dy) or 1.0
        starts.append((x + dx * r / far, y + dy * r / far))
    d = data.reset_index(drop=True).assign(
        label_x=[s.x for s in spots],
        label_y=[s.y for s in spots],
        label_align=[s.align for s in spots],
        leader=[s.leader for s in spots],
        point_x=[p[0] for p in starts],
        point_y=[p[1] for p in starts],
    )
    layers: list[alt.Chart] = []
    moved = d[d["leader"]]
    if len(moved):
        layers.append(
            alt.Chart(moved)
            .mark_rule(color="#999", strokeWidth=0.8)
            .encode(
                x=alt.X("point_x:Q", scale=None),
                y=alt.Y("point_y:Q", scale=None),
                x2="label_x:Q",
                y2="label_y:Q",
            )
        )
    for align in ("left", "right"):
        side = d[d["label_align"].eq(align)]
        if len(side):
            layers.append(
                alt.Chart(side)
                .mark_text(align=align, baseline="middle", fontSize=font_size)
                .encode(
                    x=alt.X("label_x:Q", scale=None),
                    y=alt.Y("label_y:Q", scale=None),
                    text=f"{text}:N",
                    **({"color": color} if color is not None else {}),
                )
            )
    return layers
