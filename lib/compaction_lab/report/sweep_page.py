"""``sweep.html``: the comparison across the runs of a sweep, in the run report's look.

`sweep.run_sweep` builds one comparison table (one row per run × strategy, the
swept keys as columns, then ``run``, ``status`` and `share.HEADLINE_COLUMNS`)
and hands it to `render_sweep_page`, which draws the sweep figures
(`charts.fig_sweep_lines`, `fig_sweep_small_multiples`, `fig_sweep_ranks`,
`fig_sweep_seeds`), saves each under the sweep folder's ``figures/`` and writes
the page from ``templates/sweep.html.j2``: figures inlined as SVG (no script,
no network), the table grouped by strategy, every run linked.

The pure functions of `sweep_table` (`ok_rows`, `strategy_names`,
`sweep_means`, `sweep_ranks`, `seed_spread`, `not_ranked`) prepare what the
figures and the page show; nothing in them reads a file. Means and ranks are
over the rows `share.ranked` keeps (docs/exams.md §9 *Feasibility*); the page
counts the others beside them and lists them after a strategy's ranked runs,
marked. A strategy has one name (`strategy_names`), its other labels noted once.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import runfolder
from compaction_lab.report import charts, share
from compaction_lab.report.sweep_table import (
    OK,
    SEED,
    is_missing,
    label_notes,
    not_ranked_reason,
    not_ranked_text,
    ok_rows,
    seed_spread,
    strategy_names,
    sweep_values,
    value_text,
)

#: The sweep's page in its folder.
SWEEP_HTML = "sweep.html"

# --------------------------------------------------------------------------- which figures


@dataclass(frozen=True)
class PlannedFigure:
    """One figure of the page: its file stem, caption and the chart."""

    stem: str
    caption: str
    chart: Any


def plan_figures(table: pd.DataFrame, keys: Sequence[str]) -> tuple[list[PlannedFigure], list[str]]:
    """Plan the figures a sweep gets, and notes that say how they were made.

    One setting swept: lines and ranks against it. Two: recall in small
    multiples (x: the first, one panel per value of the second), ranks faceted
    by the second, lines against the first (averaged over the second). More
    than two: lines against each, averaged over the others. A swept ``seed`` is
    a replicate, so it goes last (the panels, never the x axis, when it is
    swept with a setting) and adds the seed figure.
    """
    settings = [k for k in keys if k != SEED]
    seeded = SEED in keys
    order = [*settings, SEED] if seeded else list(settings)
    figs: list[PlannedFigure] = []
    notes: list[str] = []
    if len(order) == 1:
        (p,) = order
        figs.append(_lines(table, p, []))
        figs.append(_ranks(table, p, None))
    elif len(order) == 2:
        p, q = order
        figs.append(
            PlannedFigure(
                f"fig_sweep_small_multiples-{_slug(p)}-by-{_slug(q)}",
                f"{charts.title_of('fig_sweep_small_multiples')}: {p}, one panel per {q}",
                charts.fig_sweep_small_multiples(table, p, q),
            )
        )
        figs.append(_ranks(table, p, q))
        figs.append(_lines(table, p, [q]))
        notes.append(f"The lines against {p} are means over the values of {q}.")
    else:
        for p in settings:
            figs.append(_lines(table, p, [k for k in keys if k != p]))
        others = ", ".join(keys)
        notes.append(f"{len(keys)} parameters swept ({others}): each line figure averages over the other parameters.")
    left = not_ranked_text(table)
    if left:
        notes.append(f"Means and ranks are over the runs where an arm compacted and fits the window; {left}.")
    notes += [f"{RELABEL_NOTE} {note}." for note in label_notes(table).values()]
    if seeded:
        figs.append(
            PlannedFigure(
                "fig_sweep_seeds",
                charts.title_of("fig_sweep_seeds"),
                charts.fig_sweep_seeds(table, SEED, by=settings),
            )
        )
    return figs, notes


#: Starts the page's note on a strategy labelled differently across runs (`label_notes`).
RELABEL_NOTE = "Labelled differently across runs:"


def _lines(table: pd.DataFrame, param: str, over: Sequence[str]) -> PlannedFigure:
    caption = f"{charts.title_of('fig_sweep_lines')}: against {param}"
    if over:
        caption += f" (mean over {', '.join(over)})"
    return PlannedFigure(f"fig_sweep_lines-{_slug(param)}", caption, charts.fig_sweep_lines(table, param))


def _ranks(table: pd.DataFrame, param: str, facet: str | None) -> PlannedFigure:
    stem = f"fig_sweep_ranks-{_slug(param)}" + (f"-by-{_slug(facet)}" if facet else "")
    caption = f"{charts.title_of('fig_sweep_ranks')}: against {param}" + (f", one panel per {facet}" if facet else "")
    return PlannedFigure(stem, caption, charts.fig_sweep_ranks(table, param, facet))


def _slug(v: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", str(v)).strip("_") or "x"


# --------------------------------------------------------------------------- the page


def render_sweep_page(
    folder: Path,
    profile_name: str,
    description: str,
    keys: Sequence[str],
    table: pd.DataFrame,
    runs: Sequence[tuple[Mapping[str, Any], Any, str]] = (),
) -> Path:
    """Write ``folder/sweep.html`` (and its figures under ``folder/figures/``).

    Parameters
    ----------
    folder : Path
        The sweep folder; every run folder is its sibling.
    profile_name, description : str
        The profile swept.
    keys : sequence of str
        The swept keys, in the order given.
    table : DataFrame
        The comparison table (swept keys with their original values, ``run``,
        ``status``, `share.HEADLINE_COLUMNS`).
    runs : sequence of (values, RunResult or None, detail)
        `sweep.run_sweep`'s list; only the detail of a run that did not finish
        is read from it (links come from the table: a run completed by an
        earlier invocation has no RunResult).

    Returns
    -------
    Path of the page written.
    """
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    folder = Path(folder)
    keys = list(keys)
    figs, notes = plan_figures(table, keys) if not ok_rows(table).empty else ([], [])
    html_figs = [share.figure_html(_save(folder, f)) for f in figs]
    spread = seed_spread(table, SEED, [k for k in keys if k != SEED]) if SEED in keys else None
    env = Environment(
        loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=select_autoescape(["html", "j2"]),
    )
    page = env.get_template("sweep.html.j2").render(
        sweep=folder.name,
        profile=profile_name,
        description=description or "(no description)",
        swept=[{"key": k, "shown": ", ".join(value_text(v) for v in sweep_values(table, k))} for k in keys],
        counts=_counts(table),
        readers=_distinct(ok_rows(table), "reader_label"),
        pricing=_pricing(ok_rows(table)),
        notes=notes,
        figures=html_figs,
        spread=_spread_view(spread, [k for k in keys if k != SEED]) if spread is not None else None,
        keys=keys,
        groups=_groups(table, keys),
        run_list=_run_list(table, keys, runs),
    )
    out = folder / SWEEP_HTML
    out.write_text(charts.page_safe(page), encoding="utf-8")
    return out


def _save(folder: Path, fig: PlannedFigure) -> share.Figure:
    written = charts.save_chart(fig.chart, folder / runfolder.FIGURES / fig.stem)
    return share.Figure(fig.stem, fig.caption, written.get("png"), written.get("svg"), written.get("html"))


def _distinct(df: pd.DataFrame, col: str) -> list[str]:
    if col not in df.columns:
        return []
    return list(dict.fromkeys(str(v) for v in df[col] if not is_missing(v)))


def _pricing(rows: pd.DataFrame) -> list[str]:
    """Each distinct price table / cache rule / currency behind the money columns."""
    cols = ["price_table", "simulator", "currency"]
    if rows.empty or not all(c in rows.columns for c in cols):
        return []
    seen = dict.fromkeys(
        f"{p} prices, {s} cache rule (simulated), in {c}"
        for p, s, c in rows[cols].itertuples(False)
        if not any(is_missing(x) for x in (p, s, c))
    )
    return list(seen)


def _counts(table: pd.DataFrame) -> dict[str, int]:
    runs = _runs_frame(table)
    return {
        "runs": len(runs),
        "ok": int((runs["status"] == OK).sum()) if len(runs) else 0,
        "strategies": int(ok_rows(table)["strategy"].nunique()) if len(ok_rows(table)) else 0,
    }


def _runs_frame(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run (its first row in the table)."""
    if table.empty or "run" not in table.columns:
        return pd.DataFrame(columns=["run", "status"])
    # A run stopped before it had a folder has no name: keep it, one row per position.
    named = table[table["run"].notna()].drop_duplicates("run")
    return pd.concat([named, table[table["run"].isna()]]).sort_index()


def _run_list(table: pd.DataFrame, keys: Sequence[str], runs: Sequence[tuple[Mapping[str, Any], Any, str]]) -> list:
    """Every run with its values and status; a link only for a run that finished (its report exists)."""
    details = {_combo_key(values, keys): detail for values, _res, detail in runs}
    out = []
    for _, row in _runs_frame(table).iterrows():
        values = {k: row[k] for k in keys if k in row.index}
        status = str(row.get("status", ""))
        name = None if is_missing(row.get("run")) else str(row["run"])
        detail = details.get(_combo_key(values, keys), "")
        out.append(
            {
                "shown": ", ".join(f"{k}={value_text(v)}" for k, v in values.items()),
                "run": name,
                "href": f"../{name}/{runfolder.REPORT_HTML}" if name and status == OK else None,
                "status": status,
                "detail": detail if detail and detail != OK else "",
            }
        )
    return out


def _combo_key(values: Mapping[str, Any], keys: Sequence[str]) -> str:
    return json.dumps([value_text(values.get(k)) for k in keys])


def _row_numbers(r: pd.Series) -> list[str]:
    """One run's numbers for a strategy, formatted, in `NUMBER_HEADERS` order."""
    return [
        str(r["retained_of_n"]) if not is_missing(r.get("retained_of_n")) else "n/a",
        _num(r.get("recall"), "{:.1%}"),
        _num(r.get("projection_tokens"), "{:,.0f}"),
        _num(r.get("compaction_cost_cold"), "{:.5f}"),
        _num(r.get("compaction_cost_cached"), "{:.5f}"),
        _num(r.get("cost_per_point"), "{:.5f}"),
    ]


#: The number columns of the table by strategy (the money ones get the currency appended).
NUMBER_HEADERS = (
    "retained of N (95% CI)",
    "recall",
    "projection tokens",
    "compaction cost, cold",
    "compaction cost, cache-served",
    "cost per point of recall",
)
_MONEY_HEADERS = NUMBER_HEADERS[3:]


def _num(v: Any, fmt: str) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if math.isnan(x) else fmt.format(x)


def _groups(table: pd.DataFrame, keys: Sequence[str]) -> dict[str, Any]:
    """Group the table by strategy (best mean recall first), one row per run, numbers formatted.

    Means are over the rows `share.ranked` keeps; a strategy with none comes
    after those with some. Within a strategy its ranked runs come first, the
    others after them with the reason in the last column, and the header counts
    them. Who answered goes in each strategy's header row (one reader for all
    its runs, unless the reader was swept); the currency goes in the money
    columns' headers when the sweep has one, else in a column of its own.
    """
    rows = ok_rows(table).copy()
    currencies = _distinct(rows, "currency")
    one_currency = len(currencies) <= 1
    numbers = [f"{h} ({currencies[0]})" if h in _MONEY_HEADERS and currencies else h for h in NUMBER_HEADERS]
    numbers = [*numbers, *([] if one_currency else ["currency"]), RANKED_HEADER]
    headers = {"text": [*keys, "run"], "numbers": numbers}
    if rows.empty:
        return {"headers": headers, "groups": []}
    names = strategy_names(table)
    rows["recall"] = pd.to_numeric(rows["recall"], errors="coerce")
    rows["why"] = not_ranked_reason(rows)
    kept = rows[rows["why"] == ""]
    best = kept.groupby("strategy", sort=False)["recall"].mean().sort_values(ascending=False, kind="stable")
    order = [*best.index, *(s for s in dict.fromkeys(rows["strategy"]) if s not in best.index)]
    groups = []
    for strategy in order:
        part = rows[rows["strategy"] == strategy]
        part = pd.concat([part[part["why"] == ""], part[part["why"] != ""]])
        groups.append(
            {
                "name": names[str(strategy)],
                "mean": _group_mean(part, best.get(strategy)),
                "readers": ", ".join(_distinct(part, "reader_label")),
                "rows": [
                    {
                        "swept": [value_text(r[k]) for k in keys],
                        "run": str(r["run"]),
                        "href": f"../{r['run']}/{runfolder.REPORT_HTML}",
                        "numbers": _row_numbers(r)
                        + ([] if one_currency else [str(r.get("currency", ""))])
                        + [f"no: {r['why']}" if r["why"] else "yes"],
                    }
                    for _, r in part.iterrows()
                ],
            }
        )
    return {"headers": headers, "groups": groups}


#: The last column of the table by strategy: is this run's row in the means and ranks?
RANKED_HEADER = "ranked"


def _group_mean(part: pd.DataFrame, mean: Any) -> str:
    """Show a strategy's mean recall over its ranked runs, and how many runs were left out and why."""
    n_kept = int((part["why"] == "").sum())
    left = part.loc[part["why"] != "", "why"].value_counts(sort=False)
    out = f"{_num(mean, '{:.1%}')} over {n_kept} run{'' if n_kept == 1 else 's'}" if n_kept else "n/a"
    for why, n in left.items():
        out += f"; {n} run{'' if n == 1 else 's'} {why}, not ranked"
    return out


def _spread_view(spread: pd.DataFrame, by: Sequence[str]) -> dict[str, Any]:
    """`seed_spread` as formatted rows for the page; the reader in the caption, or a column when it varies."""
    readers = _distinct(spread, "reader_label")
    per_row = len(readers) > 1
    numbers = [
        "seeds",
        "mean recall",
        "sd across seeds",
        "min–max across seeds",
        "95% range for one more seed (t)",
        "interval half-width (mean, within a run)",
    ]
    rows = [
        {
            "text": [*(value_text(r[k]) for k in by), str(r["strategy_name"])]
            + ([str(r["reader_label"])] if per_row else []),
            "numbers": [
                str(int(r["n_seeds"])),
                _num(r["recall_mean"], "{:.1%}"),
                _num(r["recall_sd"], "{:.1%}"),
                f"{_num(r['recall_min'], '{:.0%}')}–{_num(r['recall_max'], '{:.0%}')}",
                f"{_num(r['across_low'], '{:.0%}')}–{_num(r['across_high'], '{:.0%}')}",
                _num(r["boot_half_width"], "±{:.1%}"),
            ],
        }
        for _, r in spread.iterrows()
    ]
    return {
        "headers": {"text": [*by, "strategy", *(["reader"] if per_row else [])], "numbers": numbers},
        "reader": "" if per_row else ", ".join(readers),
        "rows": rows,
    }
