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
import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import vl_convert as vlc

from compaction_lab.exam import readers
from compaction_lab.report import sweep_table

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


#: Scale of every PNG (twice the chart's CSS size: sharp on high-density screens and in print).
PNG_SCALE = 2

#: How many recently rendered specs are kept (`_images`): a notebook saves a figure and then shows it.
_RENDER_CACHE_SIZE = 16
_rendered: OrderedDict[str, tuple[str, bytes]] = OrderedDict()


#: Characters XML 1.0 forbids: C0 controls but tab, LF and CR, lone surrogates, U+FFFE and U+FFFF. Vega
#: writes a label's text into its SVG as is, and vl-convert, parsing that SVG, panics on one and aborts
#: the whole process (a notebook's kernel dies), so a log that holds one is drawn with U+FFFD instead.
_NON_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: The same, and every character outside the Basic Multilingual Plane (emoji, private use planes).
_NON_XML_OR_ASTRAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff\U00010000-\U0010ffff]")


def _drawable(value: Any, pattern: re.Pattern[str] = _NON_XML) -> Any:
    """`value` (a Vega-Lite spec or any part of it), every string's `pattern` characters replaced by U+FFFD."""
    if isinstance(value, str):
        return pattern.sub("\ufffd", value)
    if isinstance(value, dict):
        return {k: _drawable(v, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_drawable(v, pattern) for v in value]
    return value


def _svg(spec: dict) -> str:
    """The SVG vl-convert draws of `spec`, whatever characters its labels hold."""
    try:
        return vlc.vegalite_to_svg(_drawable(spec), vl_version=_vl_version())
    except ValueError:
        # Vega shortens a long label by UTF-16 units, which can split a character outside the BMP into a
        # lone surrogate that vl-convert's text measure rejects: draw such characters as U+FFFD instead.
        return vlc.vegalite_to_svg(_drawable(spec, _NON_XML_OR_ASTRAL), vl_version=_vl_version())


def _images(spec: dict) -> tuple[str, bytes]:
    """The SVG and the PNG of a Vega-Lite spec, drawn once.

    Vega lays the chart out once, as SVG; the PNG is that SVG rasterised
    (vl-convert's ``vegalite_to_png`` does the same internally: the pixels are
    identical). Kept for the last few specs by their canonical JSON, so a figure
    that is saved and then displayed is drawn one time, not four.
    """
    key = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    hit = _rendered.get(key)
    if hit is not None:
        _rendered.move_to_end(key)
        return hit
    svg = _svg(spec)
    out = (svg, bytes(vlc.svg_to_png(svg, scale=PNG_SCALE)))
    _rendered[key] = out
    while len(_rendered) > _RENDER_CACHE_SIZE:
        _rendered.popitem(last=False)
    return out


def _renderer(spec: dict, **metadata) -> dict:
    """Display bundle: the Vega-Lite spec for live frontends plus a PNG fallback."""
    _, png = _images(spec)
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


#: What JSON must not carry raw inside an HTML ``<script>`` block: ``<`` (``</script>`` ends the block,
#: ``<!--`` hides its end), ``>`` and ``&`` (read as markup by an XHTML parser), and U+2028 / U+2029
#: (line ends to older JavaScript). Each is written as the JSON escape of the same character.
_SCRIPT_UNSAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_safe(json_text: str) -> str:
    """JSON text made safe to embed in an HTML ``<script>`` block; it still parses to the same value.

    These characters can occur in JSON only inside strings, where the ``\\uXXXX`` escape means the
    same character, so a log's ``</script><script>...`` stays data.

    Parameters
    ----------
    json_text : str
        Serialised JSON.
    """
    return json_text.translate(_SCRIPT_UNSAFE)


class _ScriptSafeEncoder(json.JSONEncoder):
    """`json.dumps` encoder whose output can sit in a ``<script>`` block (`script_safe`)."""

    def encode(self, o: Any) -> str:
        return script_safe(super().encode(o))


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
    formats = list(formats)
    unknown = [f for f in formats if f not in ("png", "svg", "html")]
    if unknown:
        raise ValueError(f"unknown chart format {unknown[0]!r}; expected png, svg or html")
    images = _images(chart.to_dict()) if {"png", "svg"} & set(formats) else None
    written: dict[str, Path] = {}
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        if fmt == "png" and images:
            path.write_bytes(images[1])
        elif fmt == "svg" and images:
            path.write_text(images[0], encoding="utf-8")
        elif fmt == "html":
            # inline=True bundles Vega's JavaScript (from vl-convert): no CDN needed. Altair writes the
            # spec into a <script> block as plain json.dumps, so a label from a log could close the block
            # and run as script: the encoder escapes what HTML would read (neither Altair nor vl-convert
            # offers it).
            chart.save(path, format="html", inline=True, json_kwds={"cls": _ScriptSafeEncoder})
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

#: Appended to the label of an arm whose projection is larger than the usable capacity W − O: a request
#: the agent could never send, so its recall is no achievable result, however high.
NOT_SENDABLE = " · not sendable (> W − O)"

#: The line a figure adds under its title when it draws such an arm (Vega-Lite has no hatch fill, so the
#: mark is faded and outlined with a dash instead).
_NOT_SENDABLE_WHY = "not sendable — its projection is larger than the usable capacity W − O"
NOT_SENDABLE_NOTE = f"faded, dashed outline, listed last: {_NOT_SENDABLE_WHY}"

_FADED = 0.3
_DASH = [4, 3]


def _flag_arms(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
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


def _arm_order(df: pd.DataFrame, *keys: tuple[str, bool]) -> list[str]:
    """Arm labels in drawing order: every sendable arm before any over the window, then by `keys`.

    Each key is ``(column, ascending)``; ties keep the frame's order.
    """
    cols = ["over_window", *(k for k, _ in keys)]
    ascending = [True, *(a for _, a in keys)]
    ranked = df.sort_values(cols, ascending=ascending, kind="stable")
    return list(dict.fromkeys(ranked["arm_label"]))


def _unsendable_look(df: pd.DataFrame) -> dict[str, Any]:
    """Encodings that fade an over-window arm's mark and outline it with a dash; none when no arm is over."""
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


def _units_note(table: pd.DataFrame) -> str | None:
    """The units and method of a table's intervals, e.g. "n = 27 questions from 9 records of 2 sessions;
    95% interval: <ci_method>".

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
            _plural(int(k), word)
            for k, word in ((_col_max(table, "n_records"), "record"), (_col_max(table, "n_sessions"), "session"))
            if pd.notna(k)
        ]
        units = f"n = {_plural(int(n), 'question')}" + (" from " + " of ".join(where) if where else "")
        top = _col_max(table, "top_session_share")
        if _col_max(table, "n_sessions") > 1 and top > 0.5:
            units += f" (one session gives {top:.0%} of them)"
        parts.append(units)
    methods = _distinct_text(table, "ci_method")
    if methods:
        parts.append(f"95% interval: {methods}")
    return "; ".join(parts) or None


def _col_max(table: pd.DataFrame, col: str) -> float:
    """The largest number in a column of `table`; NaN when the column is absent or holds none."""
    if col not in table.columns:
        return float("nan")
    top = pd.to_numeric(table[col], errors="coerce").max()
    return float(top) if pd.notna(top) else float("nan")


def _subtitle(*lines: str | None) -> list[str] | str:
    """A title's subtitle of the given lines (the missing ones left out): one string when one line."""
    kept = [line for line in lines if line]
    return kept[0] if len(kept) == 1 else kept


def _decoys_measured(answers: pd.DataFrame) -> pd.Series:
    """Per answer: whether its reader could fall for a decoy (`readers.measures_decoys`); False without readers."""
    if "reader" not in answers.columns:
        return pd.Series(False, index=answers.index)
    return answers["reader"].map(lambda r: readers.measures_decoys(str(r))).astype(bool)


def fig1_retained(answers: pd.DataFrame, *, width: int = 520) -> alt.LayerChart | alt.Chart:
    """Figure 1: questions still answerable after compaction, per strategy, split by pointer.

    An arm over the window (``over_window``: its projection is larger than W − O) is faded, outlined
    with a dash, labelled `NOT_SENDABLE` and listed after every sendable arm. Decoys fallen for are
    counted per bar only over the answers of readers that can fall for one (`readers.measures_decoys`);
    when no reader can, the subtitle says `readers.DECOYS_NOT_MEASURED` once instead.

    Parameters
    ----------
    answers : DataFrame
        Closed-book answers (strategy_label, reader, reader_label, pointer, decoy, correct; over_window
        when the run records it).
    """
    if "decoy" not in answers or not (~answers["decoy"].astype(bool)).any():
        return no_data(title_of("fig1_retained"))
    use_theme()
    answers = _flag_arms(answers, by="strategy_label")
    decoy = answers["decoy"].astype(bool)
    correct = answers["correct"].astype(bool)
    real = answers[~decoy]
    flags = answers.groupby("arm_label")["over_window"].first()
    n = real.groupby("arm_label").size()
    parts = real[correct[~decoy]].groupby(["arm_label", "pointer"]).size().rename("retained").reset_index()
    parts["over_window"] = parts["arm_label"].map(flags).astype(bool)
    totals = pd.DataFrame({"n": n}).reset_index()
    totals["retained"] = totals["arm_label"].map(real[correct[~decoy]].groupby("arm_label").size()).fillna(0)
    totals["over_window"] = totals["arm_label"].map(flags).astype(bool)
    # Only a reader that could have fallen for a decoy says anything by not falling for it.
    judged = decoy & _decoys_measured(answers)
    measured = bool(judged.any())
    fallen = answers[judged & ~correct].groupby("arm_label").size()
    asked = answers[judged].groupby("arm_label").size()
    totals["fallen"] = totals["arm_label"].map(fallen).fillna(0).astype(int)
    totals["decoys"] = totals["arm_label"].map(asked).fillna(0).astype(int)
    totals["label"] = totals.apply(
        lambda r: (
            f"{int(r['retained'])}/{int(r['n'])} ({r['retained'] / max(r['n'], 1):.0%})"
            + (f" · decoys fallen for: {r['fallen']}/{r['decoys']}" if r["decoys"] else "")
        ),
        axis=1,
    )
    order = _arm_order(totals, ("retained", False))
    reader = ", ".join(sorted(set(answers["reader_label"]))) if "reader_label" in answers else ""
    decoy_note = None if measured or not decoy.any() else readers.DECOYS_NOT_MEASURED
    y = alt.Y("arm_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    bars = (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X("retained:Q", title="questions still answerable", scale=alt.Scale(domain=[0, int(n.max() or 1)])),
            color=alt.Color(
                "pointer:N",
                scale=alt.Scale(domain=list(POINTER_COLORS), range=list(POINTER_COLORS.values())),
                legend=alt.Legend(title="answer was in", orient="bottom"),
            ),
            order=alt.Order("pointer:N"),
            tooltip=[alt.Tooltip("arm_label:N", title="strategy"), "pointer", "retained"],
            **_unsendable_look(parts),
        )
    )
    text = (
        alt.Chart(totals)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=alt.Y("arm_label:N", sort=order), x="retained:Q", text="label:N")
    )
    return (bars + text).properties(
        width=width,
        title=alt.TitleParams(
            title_of("fig1_retained"),
            subtitle=_subtitle(
                f"closed book; reader: {reader}" if reader else "closed book",
                decoy_note,
                NOT_SENDABLE_NOTE if totals["over_window"].any() else None,
            ),
        ),
    )


def _fig3_panels(recall: pd.DataFrame, width: int) -> tuple[alt.Chart, alt.Chart]:
    """The retained and tokens panels of figure 3 (each with its own data); `recall` already `_flag_arms`-ed."""
    order = _arm_order(recall, ("retained", False))
    look = _unsendable_look(recall)
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


def _who_answered(df: pd.DataFrame, note: str) -> str:
    """A subtitle that names who answered (a model, or an offline stand-in), after `note`."""
    if "reader_label" not in df.columns or df.empty:
        return note
    return f"{note}; reader: {', '.join(sorted(set(map(str, df['reader_label']))))}"


def fig3_retained_tokens(recall: pd.DataFrame, *, width: int = 260) -> alt.HConcatChart | alt.Chart:
    """Figure 3 (recall part): retained questions and projection tokens per strategy, side by side.

    The money part (cost per point of recall) joins when the cost model runs (`fig3_complete`). An arm
    over the window is faded, dashed, labelled `NOT_SENDABLE` and listed last in both panels.

    Parameters
    ----------
    recall : DataFrame
        `exam.stats.recall_table` output (strategy_label, retained, n, projection_tokens; over_window,
        n_sessions, n_records, ci_method when present).
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig3_recall_tokens"))
    use_theme()
    recall = _flag_arms(recall)
    left, right = _fig3_panels(recall, width)
    return alt.hconcat(left, right, spacing=20).properties(
        title=alt.TitleParams(
            title_of("fig3_recall_tokens"),
            subtitle=_subtitle(
                _who_answered(recall, "money per point of recall: see the cost notebook"),
                _units_note(recall),
                NOT_SENDABLE_NOTE if recall["over_window"].any() else None,
            ),
        )
    )


def fig4_size_vs_recall(recall: pd.DataFrame, *, width: int = 480) -> alt.LayerChart | alt.Chart:
    """Figure 4: projection size (log x) against recall, one point per strategy, with 95% intervals.

    An arm over the window is drawn faded with a dashed outline and a dashed interval, labelled
    `NOT_SENDABLE`, and drawn after (over) the sendable arms.

    Parameters
    ----------
    recall : DataFrame
        strategy_label, projection_tokens, recall, ci_low, ci_high (over_window, n_sessions, n_records,
        ci_method when present).
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig4_size_recall"))
    use_theme()
    data = _flag_arms(recall[recall["projection_tokens"] > 0])
    data = data.sort_values("over_window", kind="stable")
    look = _unsendable_look(data)
    base = alt.Chart(data).encode(
        x=alt.X("projection_tokens:Q", scale=alt.Scale(type="log"), title="projection tokens (mean per case, log)")
    )
    rule = base.mark_rule(color="#888").encode(
        y=alt.Y("ci_low:Q", axis=alt.Axis(format="%"), title="recall"),
        y2="ci_high:Q",
        **({"strokeDash": look["strokeDash"]} if look else {}),
    )
    pts = base.mark_point(filled=True, size=90).encode(
        y="recall:Q",
        color=alt.Color("strategy_label:N", legend=None),
        tooltip=[
            alt.Tooltip("arm_label:N", title="strategy"),
            alt.Tooltip("recall:Q", format=".1%"),
            alt.Tooltip("ci_low:Q", format=".1%"),
            alt.Tooltip("ci_high:Q", format=".1%"),
            alt.Tooltip("projection_tokens:Q", format=",.0f"),
        ],
        **look,
    )
    labels = base.mark_text(align="left", dx=7, dy=-7, fontSize=10).encode(y="recall:Q", text="arm_label:N")
    units = _units_note(recall)
    return (rule + pts + labels).properties(
        width=width,
        height=300,
        title=alt.TitleParams(
            title_of("fig4_size_recall"),
            subtitle=_subtitle(
                _who_answered(
                    recall, "bars: 95% intervals" if units else "bars: 95% bootstrap intervals over questions"
                ),
                units,
                f"faded, dashed outline: {_NOT_SENDABLE_WHY}" if data["over_window"].any() else None,
            ),
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
    """Figure 3, complete: retained | tokens | money per point of recall (one price table and simulator).

    An arm over the window is faded, dashed, labelled `NOT_SENDABLE` and listed last in every panel (the
    money panel takes the flag from `recall`, matched by strategy label).
    """
    if recall.empty or not (recall["n"] > 0).any():
        return no_data(title_of("fig3_complete"))
    use_theme()
    recall = _flag_arms(recall)
    left, right = _fig3_panels(recall, width)
    order = _arm_order(recall, ("retained", False))
    flags = recall.groupby(recall["strategy_label"].astype(str))["over_window"].any()
    data = cost[cost["cost_per_point"].notna()].copy()
    data["over_window"] = data["strategy_label"].astype(str).map(flags).astype("boolean").fillna(False).astype(bool)
    data = _flag_arms(data)
    cur = data["currency"].iloc[0] if len(data) else ""
    money = (
        alt.Chart(data)
        .mark_bar(color="#b279a2")
        .encode(
            y=alt.Y("arm_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("cost_per_point:Q", title=f"{cur} per point of recall"),
            tooltip=[alt.Tooltip("arm_label:N", title="strategy"), alt.Tooltip("cost_per_point:Q", format=".5f")],
            **_unsendable_look(data),
        )
        .properties(width=width, title="the money behind each point")
    )
    return alt.hconcat(left, right, money, spacing=20).properties(
        title=alt.TitleParams(
            title_of("fig3_complete"),
            subtitle=_subtitle(
                _who_answered(
                    recall, "money: one compaction + later turns, cache simulated on the real token sequences"
                ),
                _units_note(recall),
                NOT_SENDABLE_NOTE if recall["over_window"].any() else None,
            ),
        )
    )


NO_RECORDED: tuple[str, ...] = (
    "Not measured: no session of this run holds a compaction its agent recorded",
    "(pi compaction entries, Claude Code compact summaries, Codex compacted items, OpenCode summary messages).",
)

#: What the tick of `fig_recorded` stands for.
POOL_NOTE = "tick: share of every eligible value (the whole pool the questions were drawn from) the projection holds"


def fig_recorded(table: pd.DataFrame, *, width: int = 420) -> alt.Chart:
    """The real compactions found in the logs: recall of the agent's own compaction beside every arm.

    One panel per recorded compaction (its session, the agent and the model
    from the log, and how many questions from how many records), one row per
    arm with its 95% interval; the recorded compaction is drawn dark, the arm
    reimplementing that agent red. Where the table carries ``pool_recall``, a
    tick marks each arm's recall over the whole pool of eligible values. An
    arm over the window is faded, dashed, labelled `NOT_SENDABLE` and listed
    after every sendable arm of its panel. No decoy count is drawn here.

    Parameters
    ----------
    table : DataFrame
        `exam.recorded.comparison_table` (case_id, agent, model, strategy_label,
        recorded, own_agent, recall, ci_low, ci_high, retained, n; over_window,
        pool_retained, pool_n, pool_recall, n_records, ci_method when present).
    """
    title = title_of("fig_recorded")
    if table.empty or not (table["n"] > 0).any():
        return no_data(title, NO_RECORDED)
    use_theme()
    data = _flag_arms(table[table["n"] > 0])

    def panel(r: pd.Series) -> str:
        label = f"{r['session_id'][:24]} · compaction {int(r['compaction']) + 1} ({r['agent']}, {r['model']})"
        records = r.get("n_records")
        return label + (
            f" · {int(r['n'])} questions from {_plural(int(records), 'record')}" if pd.notna(records) else ""
        )

    # One label per compaction: its largest n (every arm answers the same questions).
    data["n_panel"] = data.groupby("case_id")["n"].transform("max")
    data["compaction_label"] = data.assign(n=data["n_panel"]).apply(panel, axis=1)
    data["arm"] = data.apply(
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
    order = _arm_order(data, ("recorded", False), ("own_agent", False))
    arms = ["recorded (the agent's own)", "reimplementation of that agent", "other arm"]
    look = _unsendable_look(data)
    base = alt.Chart().encode(y=alt.Y("arm_label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    rule = base.mark_rule(color="#888").encode(
        x=alt.X("ci_low:Q", axis=alt.Axis(format="%"), title="recall", scale=alt.Scale(domain=[0, 1])),
        x2="ci_high:Q",
        **({"strokeDash": look["strokeDash"]} if look else {}),
    )
    tooltip = [
        alt.Tooltip("arm_label:N", title="strategy"),
        "retained_of",
        alt.Tooltip("recall:Q", format=".1%"),
        alt.Tooltip("ci_low:Q", format=".1%"),
        alt.Tooltip("ci_high:Q", format=".1%"),
        *([alt.Tooltip("pool_of:N", title="pool held"), alt.Tooltip("pool_recall:Q", format=".1%")] if pooled else []),
    ]
    pts = base.mark_point(filled=True, size=80).encode(
        x="recall:Q",
        color=alt.Color(
            "arm:N",
            scale=alt.Scale(domain=arms, range=["#222222", "#e45756", "#4c78a8"]),
            legend=alt.Legend(title=None, orient="bottom", labelLimit=320),
        ),
        tooltip=tooltip,
        **look,
    )
    text = base.mark_text(align="left", dx=8, fontSize=10).encode(x="recall:Q", text="retained_of:N")
    layers = [rule, pts, text]
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
    units = _distinct_text(methods, "ci_method")
    return (
        alt.layer(*layers, data=data)
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
                subtitle=_subtitle(
                    _who_answered(
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


# --------------------------------------------------------------------------- sweep figures (sweep.html)

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
    """The swept values of `param` as an x column: quantitative when every value is a number, else in sweep order.

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


def _no_sweep_data(stem: str, param: str) -> alt.Chart:
    return no_data(
        title_of(stem),
        (f"No run of this sweep finished with a closed-book result, so nothing is drawn against {param}.",),
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
    data = table if "runs" in table.columns else sweep_table.sweep_means(table, [param])
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
        cur = _distinct_text(data, "currency")
        panels.append(
            base.transform_filter("isValid(datum.cost_per_point)")
            .mark_line(point=True)
            .encode(
                y=alt.Y("cost_per_point:Q", title=f"{cur} per point of recall".strip()),
                tooltip=[*tip, alt.Tooltip("cost_per_point:Q", format=".5f")],
            )
            .properties(width=width, title=alt.TitleParams("cost per point", subtitle="none where recall is 0"))
        )
        note = f"{_runs_note(data)}; money: {_distinct_text(data, 'price_table')} prices, cache simulated"
    else:
        # The cost notebook did not run (or priced nothing): say so rather than draw an empty panel.
        note = f"{_runs_note(data)}; money: not measured in these runs"
    return alt.hconcat(*panels, spacing=30).properties(
        title=alt.TitleParams(f"{title_of('fig_sweep_lines')} — against {param}", subtitle=_who_answered(data, note))
    )


def _distinct_text(data: pd.DataFrame, col: str) -> str:
    """The distinct non-empty values of a text column, joined (e.g. the currency, the price table)."""
    if col not in data.columns:
        return ""
    return ", ".join(dict.fromkeys(v for v in map(str, data[col].dropna()) if v and v != "nan"))


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
                subtitle=_who_answered(data, f"band: the run's 95% interval; {_runs_note(data)}"),
            )
        )
    )


def sweep_rank_labels(ranks: pd.DataFrame, param: str, facet: str | None = None) -> pd.DataFrame:
    """The labels at the right end of a bump chart: strategies ending on the same rank share one label.

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


def fig_sweep_ranks(table: pd.DataFrame, param: str, facet: str | None = None, *, width: int = 240) -> alt.Chart:
    """Bump chart: each strategy's rank by recall at each value of `param` (1 on top); where lines cross, one overtakes.

    Ties share the better rank (method ``min``). Labels at the right end name
    the strategies (their ids; the legend carries the full labels).

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
    subtitle = _who_answered(ranks, "ties share the better rank; recall averaged over any other swept value")
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
    rows = sweep_table.ok_rows(table)
    rows = rows[pd.to_numeric(rows["recall"], errors="coerce").notna()] if len(rows) else rows
    if spread.empty:
        return _no_sweep_data("fig_sweep_seeds", seed)
    use_theme()
    names = sweep_table.strategy_names(rows)
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
            subtitle=_who_answered(spread, f"{n_seeds} seeds; the two kinds of interval answer different questions"),
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


@dataclass(frozen=True)
class SweepFigureSpec:
    """One figure of a sweep's page (``sweep.html``), saved in the sweep folder's ``figures/``.

    No notebook draws these: `sweep_page.render_sweep_page` does, after the
    runs, so they are kept out of `FIGURES` (a run folder's figures).

    Attributes
    ----------
    stem : str
        The start of its file names (the page adds the parameters drawn).
    title : str
        The title the chart shows and the page captions it with.
    draw : callable
        The function here that draws it.
    """

    stem: str
    title: str
    draw: Callable[..., Any]


#: Every figure of a sweep's page, in reading order.
SWEEP_FIGURES: tuple[SweepFigureSpec, ...] = (
    SweepFigureSpec("fig_sweep_small_multiples", "Sweep — recall in small multiples", fig_sweep_small_multiples),
    SweepFigureSpec("fig_sweep_ranks", "Sweep — who leads where (rank by recall)", fig_sweep_ranks),
    SweepFigureSpec("fig_sweep_lines", "Sweep — recall, tokens and money", fig_sweep_lines),
    SweepFigureSpec("fig_sweep_seeds", "Sweep — within a run vs across seeds", fig_sweep_seeds),
)

_BY_STEM: dict[str, FigureSpec | SweepFigureSpec] = {
    **{f.stem: f for f in FIGURES},
    **{f.stem: f for f in SWEEP_FIGURES},
}


def figure(stem: str) -> FigureSpec | SweepFigureSpec:
    """The registry entry of a figure (a run's or a sweep's), by its file stem."""
    try:
        return _BY_STEM[stem]
    except KeyError:
        raise KeyError(f"no figure {stem!r}; known: {', '.join(_BY_STEM)}") from None


def title_of(stem: str) -> str:
    """A figure's title, from the registry."""
    return figure(stem).title
