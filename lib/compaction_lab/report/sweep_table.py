"""A sweep's comparison table, read: the rows with numbers, the values swept, means, ranks, the seed spread.

`compaction_lab.run.sweep.run_sweep` builds one table (one row per run ×
strategy: the swept keys, ``run``, ``status``, `share.HEADLINE_COLUMNS`); the
sweep figures (`compaction_lab.report.charts`) and the sweep page
(`compaction_lab.report.sweep_page`) both read it through these pure
functions, none of which reads a file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

#: The status of a run whose numbers are in the table.
OK = "ok"

#: A swept parameter by this name is a replicate, not a setting: its spread is the run-to-run noise.
SEED = "seed"

#: The averaged columns of `sweep_means` (the numbers the line figures draw).
MEAN_COLUMNS = ("recall", "ci_low", "ci_high", "projection_tokens", "cost_per_point")

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
    """One display name per strategy: its label, or its distinct labels joined when runs labelled it differently.

    A strategy's label can change from run to run (a stand-in summary used in
    one run, none in another); joining keeps every label, so a stand-in is
    never hidden, while the line stays one line per strategy.
    """
    rows = ok_rows(table)
    names: dict[str, str] = {}
    for strategy, labels in rows.groupby("strategy", sort=False)["strategy_label"]:
        distinct = list(dict.fromkeys(str(x) for x in labels if not is_missing(x)))
        names[str(strategy)] = " | ".join(distinct) if distinct else str(strategy)
    return names


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
        ``runs`` (how many runs each mean is over). Rows follow the sweep
        order of `by`, strategies in first-appearance order.
    """
    rows = ok_rows(table).copy()
    cols = [*by, "strategy", "strategy_name", *TEXT_COLUMNS, *MEAN_COLUMNS, "runs"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    names = strategy_names(rows)
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
    rank compares strategies on the same footing at each point.

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
    """
    rows = ok_rows(table).copy()
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
    names = strategy_names(rows)
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
