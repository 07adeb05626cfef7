"""What a run shares: the headline table, the figures, a values-only summary, the run's facts.

Notebook 06 shows these; `report.build_index` renders the same pieces into
``report.html``, so the index and the notebook never disagree. Everything here
reads the run folder only (tables and figures earlier notebooks wrote); a
piece whose notebook did not run is left out rather than invented.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.report import charts, runfolder

#: Table name of the headline in a run folder (written by notebook 06).
HEADLINE = "headline"

#: Columns of the headline table, in order.
HEADLINE_COLUMNS = [
    "strategy",
    "strategy_label",
    "retained",
    "n",
    "recall",
    "ci_low",
    "ci_high",
    "retained_of_n",
    "projection_tokens",
    "compaction_cost_cold",
    "compaction_cost_cached",
    "break_even",
    "cost_per_point",
    "currency",
    "price_table",
    "simulator",
    "reader_label",
]


@dataclass(frozen=True)
class Figure:
    """One figure of a run, as files in its ``figures/`` folder."""

    stem: str
    title: str
    png: Path | None
    svg: Path | None
    html: Path | None


def _maybe(run_dir: Path, name: str) -> pd.DataFrame | None:
    path = runfolder.table_path(run_dir, name)
    return pd.read_parquet(path) if path.exists() else None


def cost_view(cost: pd.DataFrame, price_table: str | None = None, simulator: str | None = None) -> pd.DataFrame:
    """The cost rows of one price table under one cache rule.

    Defaults: the first price table in the table, under its own provider's
    rule (the first non-``none`` simulator it was priced with).
    """
    if cost.empty:
        return cost
    table = price_table or str(cost["price_table"].iloc[0])
    rows = cost[cost["price_table"] == table]
    if rows.empty:
        raise ValueError(f"price table {table!r} not in the run's cost table: {sorted(set(cost['price_table']))}")
    sims = list(dict.fromkeys(rows["simulator"]))
    sim = simulator or next((s for s in sims if s != "none"), sims[0])
    if sim not in sims:
        raise ValueError(f"simulator {sim!r} not priced for {table!r}: {sims}")
    return rows[rows["simulator"] == sim]


def headline_table(run_dir: Path, price_table: str | None = None, simulator: str | None = None) -> pd.DataFrame:
    """Per strategy: questions retained of N with the 95% interval, projection tokens, and the money.

    Recall comes from the closed-book exam (``exam_recall``), money from the
    cost model (``cost``) under one price table and cache rule (see
    `cost_view`). Without a cost table the money columns are empty; without
    recall there is no headline and the table is empty.
    """
    recall = _maybe(Path(run_dir), "exam_recall")
    if recall is None or recall.empty:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    out = recall[
        [
            "strategy",
            "strategy_label",
            "retained",
            "n",
            "recall",
            "ci_low",
            "ci_high",
            "projection_tokens",
            "reader_label",
        ]
    ].copy()
    out["retained_of_n"] = [
        f"{r:.0f}/{n:.0f} ({lo:.0%}–{hi:.0%})"
        for r, n, lo, hi in zip(out["retained"], out["n"], out["ci_low"], out["ci_high"], strict=False)
    ]
    cost = _maybe(Path(run_dir), "cost")
    money = [
        "compaction_cost_cold",
        "compaction_cost_cached",
        "break_even",
        "cost_per_point",
        "currency",
        "price_table",
        "simulator",
    ]
    if cost is not None and not cost.empty:
        view = cost_view(cost, price_table, simulator)[["strategy", *money]]
        out = out.merge(view, on="strategy", how="left")
    else:
        for col in money:
            out[col] = None
    return out.sort_values(["recall", "projection_tokens"], ascending=[False, True])[HEADLINE_COLUMNS].reset_index(
        drop=True
    )


#: The headline as readers see it: column -> header.
HEADLINE_VIEW = {
    "strategy_label": "strategy",
    "retained_of_n": "retained of N (95% CI)",
    "projection_tokens": "projection tokens",
    "compaction_cost_cold": "compaction cost, cold",
    "compaction_cost_cached": "compaction cost, cache-served",
    "break_even": "break-even turns",
    "cost_per_point": "1 + T turns per point of recall",
    "currency": "currency",
}


def headline_view(headline: pd.DataFrame) -> pd.DataFrame:
    """The headline's reader-facing columns under readable headers, numbers rounded for display."""
    view = headline[[c for c in HEADLINE_VIEW if c in headline.columns]].copy()
    view["projection_tokens"] = view["projection_tokens"].map(lambda v: f"{v:,.0f}" if pd.notna(v) else "n/a")
    for col in ("compaction_cost_cold", "compaction_cost_cached", "cost_per_point"):
        view[col] = view[col].map(lambda v: f"{v:.4f}" if v is not None and pd.notna(v) else "n/a")
    return view.rename(columns=HEADLINE_VIEW)


#: Said instead of a headline when there is no recall to report.
NO_HEADLINE = (
    "No closed-book recall in this run, so there is no headline: the exam did not run, or it could ask "
    "no question of these sessions (see notebook 03 for why)."
)


def headline_html(headline: pd.DataFrame) -> str:
    """The headline view as an HTML table (escaped), or a sentence when there is none."""
    if headline.empty:
        return f"<p>{NO_HEADLINE}</p>"
    return headline_view(headline).to_html(index=False, na_rep="n/a", classes="cl-headline")


def _money(v: Any, currency: str) -> str:
    return f"{v:.4f} {currency}" if v is not None and pd.notna(v) else "n/a"


def measured_text(headline: pd.DataFrame) -> list[str]:
    """What this run measured, as short sentences of values read from the headline table.

    Only comparisons the numbers carry: the most and fewest retained (with
    intervals, and whether the intervals overlap), projection sizes, the
    cheapest cache-served compaction among strategies that send a request,
    the lowest cost per point, and where compaction never pays. No sentence
    is written for a quantity the run did not measure.
    """
    if headline.empty:
        return [NO_HEADLINE]
    h = headline
    n = int(h["n"].iloc[0])
    lines = [f"{len(h)} strategies answered the same {n} scored questions; reader: {h['reader_label'].iloc[0]}."]
    best, worst = h.iloc[0], h.sort_values("recall").iloc[0]
    overlap = best["ci_low"] <= worst["ci_high"]
    lines.append(
        f"Most retained: {best['strategy_label']}, {best['retained_of_n']}; fewest: {worst['strategy_label']}, "
        f"{worst['retained_of_n']}" + (" — their 95% intervals overlap." if overlap else ".")
    )
    small, large = h.sort_values("projection_tokens").iloc[0], h.sort_values("projection_tokens").iloc[-1]
    lines.append(
        f"Projection size ranged from {small['projection_tokens']:,.0f} tokens "
        f"({small['strategy_label']}) to {large['projection_tokens']:,.0f} ({large['strategy_label']})."
    )
    if h["price_table"].notna().any():
        cur = str(h["currency"].dropna().iloc[0])
        where = f"{h['price_table'].dropna().iloc[0]} prices, {h['simulator'].dropna().iloc[0]} cache rule"
        free = h[h["compaction_cost_cold"] == 0]["strategy_label"].tolist()
        paid = h[h["compaction_cost_cold"] > 0].sort_values("compaction_cost_cached")
        if free:
            lines.append(f"Free to compact (no model request): {', '.join(free)}.")
        if not paid.empty:
            p = paid.iloc[0]
            lines.append(
                f"Cheapest compaction that calls a model, cache-served ({where}): {p['strategy_label']}, "
                f"{_money(p['compaction_cost_cached'], cur)} (cold {_money(p['compaction_cost_cold'], cur)})."
            )
        per = h.dropna(subset=["cost_per_point"]).sort_values("cost_per_point")
        if not per.empty:
            lines.append(
                f"Lowest cost of one compaction + T turns per point of recall: {per.iloc[0]['strategy_label']}, "
                f"{_money(per.iloc[0]['cost_per_point'], cur)}."
            )
        never = h[h["break_even"] == "never"]["strategy_label"].tolist()
        if never:
            lines.append(f"Never repays its compaction against continuing uncompacted: {', '.join(never)}.")
    return lines


def measured_markdown(headline: pd.DataFrame):
    """`measured_text` as a Markdown bullet list (for a notebook cell)."""
    from IPython.display import Markdown

    return Markdown("\n".join(f"- {markdown_literal(line)}" for line in measured_text(headline)))


#: ASCII punctuation: Markdown may read any of it as markup, and CommonMark lets any be backslash-escaped.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_literal(text: str) -> str:
    """`text` as Markdown that renders as exactly that text, on one line.

    A label can come from a log (a model name, a session id); nbconvert renders
    Markdown with raw HTML and links allowed, so every punctuation character is
    backslash-escaped and line breaks become spaces.
    """
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(text.splitlines()))


@dataclass(frozen=True)
class RecordedBlock:
    """The report's "real compactions found in your logs" block (notebook 03's recorded tables)."""

    count: int
    lines: tuple[str, ...]
    table: pd.DataFrame

    def html(self) -> str:
        """The block's table as HTML (empty string when there is nothing to show)."""
        return self.table.to_html(index=False, escape=True) if len(self.table) else ""


#: The recorded block as readers see it: column -> header.
RECORDED_VIEW = {
    "compaction": "compaction",
    "recorded": "the agent's own (recorded)",
    "own_arm": "its reimplementation",
    "best_arm": "best other arm",
}


def _retained(r: Mapping[str, Any]) -> str:
    return f"{r['strategy_label']}: {r['retained']:.0f}/{r['n']:.0f} ({r['ci_low']:.0%}–{r['ci_high']:.0%})"


def recorded_block(run_dir: Path) -> RecordedBlock | None:
    """What the run found of real compactions and how they did, or None when notebook 03 did not look.

    Per compaction: the agent's own compaction (recorded) and the arm that
    reimplements that agent, each as retained of N with the 95% interval, and
    the other arm that retained most. Values only, from ``recorded_compactions``,
    ``recorded_skipped`` and ``exam_recorded``.
    """
    run_dir = Path(run_dir)
    found = _maybe(run_dir, "recorded_compactions")
    if found is None:
        return None
    skipped = _maybe(run_dir, "recorded_skipped")
    table = _maybe(run_dir, "exam_recorded")
    lines = [
        f"Real compactions found in your logs: {len(found)}"
        + (
            f" (in {found['session_id'].nunique()} session{'s' if found['session_id'].nunique() != 1 else ''}; "
            f"agents: "
            f"{', '.join(sorted(set(found['agent'])))})"
            if len(found)
            else ""
        )
    ]
    if skipped is not None and len(skipped):
        for reason, k in skipped["reason"].value_counts().items():
            lines.append(f"Skipped: {k} session{'s' if k != 1 else ''} — {reason}")
    rows = []
    if table is not None and len(table):
        for _case_id, g in table.groupby("case_id", sort=False):
            g = g[g["n"] > 0]
            if g.empty:
                continue
            first = g.iloc[0]
            own_rec, own_arm = g[g["recorded"]], g[g["own_agent"]]
            others = g[~g["recorded"] & ~g["own_agent"]].sort_values(
                ["recall", "projection_tokens"], ascending=[False, True]
            )
            rows.append(
                {
                    "compaction": f"{first['session_id']} #{int(first['compaction']) + 1} ({first['agent']}, {first['model']})",
                    "recorded": _retained(own_rec.iloc[0]) if len(own_rec) else "n/a",
                    "own_arm": _retained(own_arm.iloc[0]) if len(own_arm) else "not run",
                    "best_arm": _retained(others.iloc[0]) if len(others) else "n/a",
                }
            )
        if len(found) and not rows:
            lines.append(
                "No question could be asked before any of them (each question must point before the "
                "recent tail of its compaction)."
            )
    view = pd.DataFrame(rows, columns=list(RECORDED_VIEW)).rename(columns=RECORDED_VIEW)
    return RecordedBlock(len(found), tuple(lines), view)


def figures(run_dir: Path) -> list[Figure]:
    """Every figure the run saved, in the registry's order (`charts.FIGURES`), then any others by name."""
    d = Path(run_dir) / runfolder.FIGURES
    registered = [(f.stem, f.title) for f in charts.FIGURES]
    known = {stem for stem, _ in registered}
    extra = sorted({p.stem for p in d.glob("*.svg")} - known) if d.exists() else []
    # Figures a later notebook adds still reach the report, after the known ones, titled by name.
    wanted = [*registered, *((stem, stem.replace("_", " ")) for stem in extra)]
    found = []
    for stem, title in wanted:
        files = [d / f"{stem}.{ext}" for ext in ("png", "svg", "html")]
        if any(p.exists() for p in files):
            found.append(Figure(stem, title, *(p if p.exists() else None for p in files)))
    return found


def _inline_svg(path: Path) -> str:
    # Drop the XML prolog / doctype so the SVG can sit inside an HTML page.
    text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def figure_html(fig: Figure, links: bool = True) -> str:
    """A ``<figure>`` with the SVG inlined (no script, no network) and links to the other formats."""
    body = _inline_svg(fig.svg) if fig.svg else (f'<img src="{_href(fig.png.name)}">' if fig.png else "")
    files = [p for p in (fig.png, fig.svg, fig.html) if p is not None]
    link = " · ".join(
        f'<a href="{_href(f"{runfolder.FIGURES}/{p.name}")}">{html.escape(p.suffix[1:].upper())}</a>' for p in files
    )
    cap = html.escape(fig.title) + (f" <small>({link})</small>" if links and link else "")
    return f'<figure class="cl-figure" id="{html.escape(fig.stem)}">{body}<figcaption>{cap}</figcaption></figure>'


def _href(relative: str) -> str:
    # Percent-encoded (a name is a path, never a scheme such as javascript:), then escaped for the attribute.
    return html.escape(urllib.parse.quote(relative))


def gallery(run_dir: Path):
    """The run's figures as one HTML block (for a notebook cell)."""
    from IPython.display import HTML

    return HTML("\n".join(figure_html(f, links=False) for f in figures(run_dir)))


def run_facts(run_dir: Path) -> pd.DataFrame:
    """The run's profile, parameters and package versions from ``run.json``, one row each."""
    path = Path(run_dir) / runfolder.RUN_JSON
    if not path.exists():
        return pd.DataFrame(
            {"what": ["run.json"], "value": ["missing: this folder was not made by compaction-lab run"]}
        )
    info: Mapping[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    rows = [
        ("run", info.get("run")),
        ("profile", info.get("profile")),
        ("started", info.get("started")),
        ("commit", (info.get("git") or {}).get("commit")),
        ("python", info.get("python")),
    ]
    rows += [(f"parameter: {k}", json.dumps(v)) for k, v in (info.get("parameters") or {}).items()]
    rows += [(f"package: {k}", v) for k, v in (info.get("packages") or {}).items()]
    return pd.DataFrame(rows, columns=["what", "value"]).astype(str)
