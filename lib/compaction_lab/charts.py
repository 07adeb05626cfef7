"""Figures: one function per figure, one registered theme, one `save_chart()`.

Every figure function takes tidy DataFrames (the run folder's tables) and
returns an Altair chart; nothing here reads files or computes results.
`save_chart` writes PNG + SVG (rendered by vl-convert, no browser, no network)
and a self-contained HTML (the Vega JavaScript inlined), so figures open
offline.

In notebooks, `setup_notebook()` enables the theme and a renderer that emits
both the interactive Vega-Lite spec (JupyterLab) and a PNG (nbconvert HTML,
GitHub, any viewer that cannot run Vega), so a rendered report needs no CDN.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Iterable

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


def save_chart(chart: alt.TopLevelMixin, stem: str | Path, formats: Iterable[str] = ("png", "svg", "html")) -> dict[str, Path]:
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
        .properties(width=width, title=alt.TitleParams("What fills the window", subtitle="characters by record kind, per session"))
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
        .properties(title=alt.TitleParams("Figure 2 — context composition", fontSize=17))
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
