"""A sweep's comparison table, read: the rows with numbers, the values swept, means, ranks, the seed spread.

`compaction_lab.run.sweep.run_sweep` builds one table (one row per run ×
strategy: the swept keys, ``run``, ``status``, `share.HEADLINE_COLUMNS`); the
sweep figures (`compaction_lab.report.charts`) and the sweep page
(`compaction_lab.report.sweep_page`) both read it through these pure
functions, none of which reads a file.

Means, ranks and the seed spread are over the rows `share.ranked` keeps, run by
run (the report's rule, docs/exams.md §9 *Feasibility*): an arm that compacted
and fits the window. The uncompacted reference, an arm over the window and one
that did not compact are left out and counted (`not_ranked`). A strategy has one
name on every figure and the page (`strategy_names`: its most common label);
where runs labelled it differently it carries `RELABELLED` and `label_notes`
says which label in which runs, so a stand-in is never hidden.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from compaction_lab.report import share

#: The status of a run whose numbers are in the table.
OK = "ok"

#: A swept parameter by this name is a replicate, not a setting: its spread is the run-to-run noise.
SEED = "seed"

#: The averaged columns of `sweep_means` (the numbers the line figures draw).
MEAN_COLUMNS = ("recall", "ci_low", "ci_high", "projection_tokens", "cost_per_point")

#: Marks a strategy's name where runs labelled it differently (`label_notes` says how).
RELABELLED = "†"

#: Why a row is left out of means and ranks (`not_ranked_reason`), in the order they are checked.
REFERENCE = "uncompacted reference"
OVER_WINDOW = "not sendable (over the window)"
NOT_COMPACTED = "did not compact"

#: Labels `sweep_means` keeps (distinct values joined), so an averaged figure still names who answered and the prices.
TEXT_COLUMNS = ("reader_label", "currency", "price_table", "simulator")


# --------------------------------------------------------------------------- tables


def ok_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Select the rows that carry a strategy's numbers: runs that finished, strategy present."""
    if table.empty or "strategy" not in table.columns:
        return table.iloc[0:0]
    keep = table["strategy"].notna()
    if "status" in table.columns:
        keep &= table["status"] == OK
    return table[keep]


def sweep_values(table: pd.DataFrame, key: str) -> list[Any]:
    """List the values of one swept key in sweep order (first appearance; the table follows the plan)."""
    if key not in table.columns:
        return []
    return list(dict.fromkeys(v for v in table[key] if not is_missing(v)))


def strategy_names(table: pd.DataFrame) -> dict[str, str]:
    """One display name per strategy: its most common label (the first seen on a tie), never several joined.

    A strategy's label can change from run to run (a stand-in summary used in
    one run, none in another): its name then ends in `RELABELLED` and
    `label_notes` names the other labels and their runs, so a stand-in is
    never hidden.
    """
    return {s: name + (f" {RELABELLED}" if len(labels) > 1 else "") for s, (name, labels) in _labels(table).items()}


def label_notes(table: pd.DataFrame) -> dict[str, str]:
    """For each strategy labelled differently across runs: which other labels, in which runs.

    Returns
    -------
    dict
        strategy → ``"<name>: labelled <label> in runs a, b; <label> in runs c"``
        (`strategy_names`' name), only for strategies with more than one label.
    """
    names = strategy_names(table)
    out: dict[str, str] = {}
    for strategy, (name, labels) in _labels(table).items():
        others = [f"{label} in {_runs_text(runs)}" for label, runs in labels.items() if label != name]
        if others:
            out[strategy] = f"{names[strategy]}: labelled " + "; ".join(others)
    return out


def _labels(table: pd.DataFrame) -> dict[str, tuple[str, dict[str, list[str]]]]:
    """Per strategy: its most common label, and each distinct label with the runs that used it."""
    rows = ok_rows(table)
    out: dict[str, tuple[str, dict[str, list[str]]]] = {}
    for strategy, part in rows.groupby("strategy", sort=False):
        labels: dict[str, list[str]] = {}
        label_col = part["strategy_label"] if "strategy_label" in part.columns else pd.Series(None, index=part.index)
        run_col = part["run"] if "run" in part.columns else pd.Series(None, index=part.index)
        for label, run in zip(label_col, run_col, strict=True):
            text = str(strategy) if is_missing(label) else str(label)
            labels.setdefault(text, []).append("?" if is_missing(run) else str(run))
        name = max(labels, key=lambda k: len(labels[k]))  # max keeps the first of equals: first seen wins a tie
        out[str(strategy)] = (name, labels)
    return out


def _runs_text(runs: Sequence[str]) -> str:
    distinct = list(dict.fromkeys(runs))
    return ("run " if len(distinct) == 1 else "runs ") + ", ".join(distinct)


def not_ranked_reason(table: pd.DataFrame) -> pd.Series:
    """Per row of `ok_rows`: why it is left out of means and ranks, or ``""`` when `share.ranked` keeps it.

    `share.ranked` is asked run by run, as each run's report asks it. The
    reason is `REFERENCE` (the uncompacted arm), else `OVER_WINDOW`, else
    `NOT_COMPACTED`.
    """
    rows = ok_rows(table)
    if rows.empty:
        return pd.Series("", index=rows.index, dtype=object)
    runs = rows["run"] if "run" in rows.columns else pd.Series(0, index=rows.index)
    keep = pd.Series(False, index=rows.index)
    done = pd.Series(False, index=rows.index)
    for _, part in rows.groupby(runs.map(_hashable), sort=False, dropna=False):
        keep[part.index] = share.ranked(part).to_numpy()
        done[part.index] = share.compacted(part).to_numpy()
    strategy = rows["strategy"].astype(str)
    label = rows["strategy_label"].astype(str) if "strategy_label" in rows.columns else strategy
    reference = (strategy == share.UNCOMPACTED) | label.str.contains(share.UNCOMPACTED_TAG, regex=False)
    over = (
        rows["over_window"].astype("boolean").fillna(False).astype(bool)
        if "over_window" in rows.columns
        else pd.Series(False, index=rows.index)
    )
    reason = pd.Series("", index=rows.index, dtype=object)
    reason[~keep & ~done] = NOT_COMPACTED
    reason[~keep & over] = OVER_WINDOW
    reason[~keep & reference] = REFERENCE
    return reason


def ranked_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Select the rows of `ok_rows` that `share.ranked` keeps: the only ones means and ranks are over."""
    rows = ok_rows(table)
    return rows[not_ranked_reason(rows) == ""]


def not_ranked(table: pd.DataFrame) -> pd.DataFrame:
    """Count the rows left out of means and ranks, per strategy and reason.

    Returns
    -------
    DataFrame
        strategy, strategy_name, reason (`REFERENCE`, `OVER_WINDOW`,
        `NOT_COMPACTED`), runs (how many runs), run_names (joined), strategies
        in first-appearance order.
    """
    cols = ["strategy", "strategy_name", "reason", "runs", "run_names"]
    rows = ok_rows(table)
    reason = not_ranked_reason(rows)
    left = rows[reason != ""].assign(reason=reason[reason != ""])
    if left.empty:
        return pd.DataFrame(columns=cols)
    names = strategy_names(table)
    out = [
        {
            "strategy": str(strategy),
            "strategy_name": names[str(strategy)],
            "reason": why,
            "runs": len(part),
            "run_names": ", ".join(dict.fromkeys(part["run"].map(str))) if "run" in part.columns else "",
        }
        for (strategy, why), part in left.groupby(["strategy", "reason"], sort=False)
    ]
    return pd.DataFrame(out, columns=cols)


def not_ranked_text(table: pd.DataFrame) -> str:
    """One sentence counting what `not_ranked` leaves out, or ``""`` when every row is ranked."""
    left = not_ranked(table)
    if left.empty:
        return ""
    parts = [
        f"{r.strategy_name}: {r.runs} run{'' if r.runs == 1 else 's'} {r.reason}" for r in left.itertuples(index=False)
    ]
    return "not ranked, nor in any mean: " + "; ".join(parts)


def sweep_means(table: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean of each strategy's numbers at each value of the keys in `by`, over every other swept value.

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table.
    by : sequence of str
        Swept keys to keep (one row per combination of their values and strategy).

    Returns
    -------
    DataFrame
        ``by`` columns, strategy, strategy_name, `TEXT_COLUMNS` (distinct
        values joined: who answered, the prices), `MEAN_COLUMNS` (means over
        the runs; for ci_low / ci_high, the mean of the runs' intervals),
        ``runs`` (how many runs each mean is over). Only the rows of
        `ranked_rows`; rows follow the sweep order of `by`, strategies in
        first-appearance order.
    """
    rows = ranked_rows(table).copy()
    cols = [*by, "strategy", "strategy_name", *TEXT_COLUMNS, *MEAN_COLUMNS, "runs"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    names = strategy_names(table)
    rows["strategy_name"] = rows["strategy"].map(lambda s: names[str(s)])
    for c in MEAN_COLUMNS:
        rows[c] = pd.to_numeric(rows[c], errors="coerce") if c in rows.columns else np.nan
    keys = [*by, "strategy"]
    # Group on positions, not values: swept values may be any JSON-able value and must keep sweep order.
    grouped = rows.groupby(order_codes(rows, keys), sort=True)
    out = grouped[[*by, "strategy", "strategy_name"]].first()
    for c in TEXT_COLUMNS:
        out[c] = grouped[c].agg(_joined) if c in rows.columns else ""
    for c in MEAN_COLUMNS:
        out[c] = grouped[c].mean()
    out["runs"] = grouped.size()
    return out.reset_index(drop=True)[cols]


def sweep_ranks(table: pd.DataFrame, param: str, facet: str | None = None) -> pd.DataFrame:
    """Each strategy's rank by recall at each value of `param` (1 = best; ties share the better rank).

    Recall is first averaged over any other swept value (`sweep_means`), so a
    rank compares strategies on the same footing at each point. Only the rows
    of `ranked_rows` are ranked: `not_ranked` counts the others.

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table.
    param : str
        The swept key on the x axis.
    facet : str, optional
        A second swept key: ranks are computed within each of its values.

    Returns
    -------
    DataFrame
        [facet], param, strategy, strategy_name, reader_label, recall, rank
        (int, method ``min``), n_strategies (ranked at that point).
    """
    by = [param] if facet is None else [facet, param]
    means = sweep_means(table, by)
    cols = [*by, "strategy", "strategy_name", "reader_label", "recall", "rank", "n_strategies"]
    means = means[means["recall"].notna()]
    if means.empty:
        return pd.DataFrame(columns=cols)
    point = order_codes(means, by)
    ranks = means.groupby(point)["recall"].rank(method="min", ascending=False)
    means = means.assign(rank=ranks.astype(int), n_strategies=means.groupby(point)["recall"].transform("size"))
    return means[cols].reset_index(drop=True)


def seed_spread(table: pd.DataFrame, seed: str = SEED, by: Sequence[str] = ()) -> pd.DataFrame:
    """How far a strategy's recall moves across seeds, beside the within-run 95% interval.

    Parameters
    ----------
    table : DataFrame
        The sweep's comparison table, `seed` among its columns.
    seed : str
        The swept key that names the replicate.
    by : sequence of str
        Other swept keys: one row per strategy and combination of their values.

    Returns
    -------
    DataFrame
        [by], strategy, strategy_name, reader_label, n_seeds, recall_mean,
        recall_sd (across seeds, ``ddof=1``; NaN with one seed), recall_min,
        recall_max, across_low / across_high (a 95% prediction interval for one
        more seed, mean ± t₀.₉₇₅,ₙ₋₁ · sd · √(1 + 1/n), clipped to [0, 1]; NaN
        with one seed), boot_half_width (mean over seeds of (ci_high − ci_low) / 2).
        Only the rows of `ranked_rows`.
    """
    rows = ranked_rows(table).copy()
    cols = [
        *by,
        "strategy",
        "strategy_name",
        "reader_label",
        "n_seeds",
        "recall_mean",
        "recall_sd",
        "recall_min",
        "recall_max",
        "across_low",
        "across_high",
        "boot_half_width",
    ]
    if not rows.empty:
        rows = rows[pd.to_numeric(rows["recall"], errors="coerce").notna()]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    names = strategy_names(table)
    rows["strategy_name"] = rows["strategy"].map(lambda s: names[str(s)])
    for c in ("recall", "ci_low", "ci_high"):
        rows[c] = pd.to_numeric(rows[c], errors="coerce")
    rows["half"] = (rows["ci_high"] - rows["ci_low"]) / 2
    keys = [*by, "strategy"]
    grouped = rows.groupby(order_codes(rows, keys), sort=True)
    out = grouped[[*by, "strategy", "strategy_name"]].first()
    out["reader_label"] = grouped["reader_label"].agg(_joined)
    out["n_seeds"] = grouped[seed].nunique()
    out["recall_mean"] = grouped["recall"].mean()
    out["recall_sd"] = grouped["recall"].std(ddof=1)
    out["recall_min"] = grouped["recall"].min()
    out["recall_max"] = grouped["recall"].max()
    # A 95% prediction interval for one more seed's recall: Student t with n - 1 degrees of freedom and
    # the sqrt(1 + 1/n) of a new draw. With few seeds it is wide, as it should be (n = 2: t = 12.7); with
    # one seed there is no spread to speak of, so none is drawn (NaN), never a zero-width range.
    n = out["n_seeds"].astype(float)
    from scipy import stats  # here: every notebook imports the figures, only a sweep's page needs this

    t = pd.Series(stats.t.ppf(0.975, (n - 1).where(n > 1)), index=out.index)
    spread = t * out["recall_sd"] * np.sqrt(1.0 + 1.0 / n)
    out["across_low"] = (out["recall_mean"] - spread).clip(0.0, 1.0)
    out["across_high"] = (out["recall_mean"] + spread).clip(0.0, 1.0)
    out["boot_half_width"] = grouped["half"].mean()
    return out.reset_index(drop=True)[cols]


def order_codes(df: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """Per row, one integer that sorts like the sweep-order positions of its values in `keys` (a group key).

    Swept values may be lists or dicts (unhashable) and must keep sweep order, not sorted order.
    """
    order = {k: {v: i for i, v in enumerate(dict.fromkeys(map(_hashable, df[k])))} for k in keys}
    pos = [
        tuple(order[k][_hashable(v)] for k, v in zip(keys, vals, strict=True))
        for vals in df[list(keys)].itertuples(False)
    ]
    rank = {t: i for i, t in enumerate(sorted(set(pos)))}
    return pd.Series([rank[t] for t in pos], index=df.index, dtype=int)


def _joined(values: pd.Series) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values if not is_missing(v)))


def _hashable(v: Any) -> Any:
    # A swept value may be a list or dict (JSON values): compare those by their JSON text.
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v


def is_missing(v: Any) -> bool:
    """None or NaN: a cell with no value (a failed run's row)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def value_text(v: Any) -> str:
    """Show a swept value as the page and the figures do (lists and dicts as JSON)."""
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)
