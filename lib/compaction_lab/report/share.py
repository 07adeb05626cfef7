"""What a run shares: the headline table, the figures, a values-only summary, the run's facts.

Notebook 07 shows these; `report.render.build_index` renders the same pieces into
``report.html``, so the index and the notebook never disagree. Everything here
reads the run folder only (tables and figures earlier notebooks wrote); a
piece whose notebook did not run is left out rather than invented.
"""

from __future__ import annotations

import functools
import html
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from compaction_lab.core import bounded_json, runfolder
from compaction_lab.core.projection import STAND_IN_LABEL
from compaction_lab.exam import exam, found, imported
from compaction_lab.exam.exam import ExamBlock
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.statistics import stats
from compaction_lab.report.figures import run_figures
from compaction_lab.report.figures._common import distinct_text, summariser_labels

#: Table name of the headline in a run folder (written by notebook 07).
HEADLINE = "headline"


def _parts(prefix: str = "", *more: str) -> list[str]:
    """Columns of the two parts of recall (`found.PARTS`): ``<prefix><part>_<kind>`` for each count, recall and bound, and `more`."""
    kinds = ("retained", "recall", "ci_low", "ci_high", *more)
    return [f"{prefix}{part}_{kind}" for part in found.PARTS for kind in kinds]


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
    "n_sessions",
    "n_records",
    "ci_method",
    "top_session_share",
    "over_window",
    "needed_next_retained",
    "needed_next_n",
    "needed_next_recall",
    "needed_next_ci_low",
    "needed_next_ci_high",
    "needed_next_of_n",
    "compacted",
    "sessions_imported",
    "sessions_would_not_compact",
    "needed_next_reader_label",
    *_parts("", "of_n"),
    "summary_by",
    "scope_retained_assistant",
    "summary_retained_assistant",
    "n_assistant",
    *_parts("needed_next_", "of_n"),
]

#: The continuation exam's table the headline takes its needed-next column from (notebook 06), and its block.
CONTINUATION_RECALL = "continuation_recall"
CONTINUATION_BLOCK = "closed"

#: Headline column -> ``continuation_recall`` column it is read from.
_NEEDED_NEXT = {
    "needed_next_retained": "retained",
    "needed_next_n": "n",
    "needed_next_recall": "recall",
    "needed_next_ci_low": "ci_low",
    "needed_next_ci_high": "ci_high",
}

#: The two parts of recall (issue 47, `exam.statistics.stats.PART_COLUMNS`): headline column -> the recall table's
#: column it is read from, for the closed book (``exam_recall``) and the needed-next column
#: (``continuation_recall``). Scope recall: right answers whose value is in what the arm keeps by design;
#: summary recall: those whose value only its summary text holds (docs/exams.md).
_PART_SOURCE = _parts()
_NEEDED_NEXT_PARTS = {f"needed_next_{c}": c for c in _PART_SOURCE}

#: How the needed-next column reads where it was not measured (a run folder older than notebook 06, or an
#: arm whose next actions needed nothing from memory).
NOT_MEASURED = "n/a"

#: Headline columns older run folders may lack, with the value that stands for "not recorded".
_NEWER: dict[str, Any] = {
    "n_sessions": pd.NA,
    "n_records": pd.NA,
    "ci_method": "",
    "top_session_share": float("nan"),
    "over_window": False,
    # issue 47: where the answer was found (an older recall table has none of these: not measured)
    **{c: (float("nan") if "recall" in c or "ci_" in c else pd.NA) for c in _PART_SOURCE},
    "summary_by": pd.NA,
    "scope_retained_assistant": pd.NA,
    "summary_retained_assistant": pd.NA,
    "n_assistant": pd.NA,
}

#: Headline columns counted in questions (nullable: <NA> where not measured).
_COUNTS = [
    "scope_retained",
    "summary_retained",
    "scope_retained_assistant",
    "summary_retained_assistant",
    "n_assistant",
    "needed_next_scope_retained",
    "needed_next_summary_retained",
]

#: Appended to an over-window arm's retained-of-N: its request would never have been sent.
NOT_SENDABLE = "not sendable (> W − O)"

#: The tag of the arm that never compacts (`strategies.arms.baselines.Full`), in its label.
UNCOMPACTED_TAG = "uncompacted reference"

#: The strategy that never compacts, for tables without a ``compacted`` column.
UNCOMPACTED = "full"


def compacted(frame: pd.DataFrame) -> pd.Series:
    """Tell per row whether the arm compacted (its projection is not the uncompacted history at the cut).

    The ``compacted`` column where the table has it; without it (or where it is missing), every arm but the
    uncompacted reference (`UNCOMPACTED` by name, `UNCOMPACTED_TAG` in its label) and, when the frame holds
    that reference once, any arm whose ``projection_tokens`` are at least the reference's.
    """
    strategy = frame["strategy"].astype(str) if "strategy" in frame.columns else pd.Series("", index=frame.index)
    label = frame["strategy_label"].astype(str) if "strategy_label" in frame.columns else strategy
    reference = (strategy == UNCOMPACTED) | label.str.contains(UNCOMPACTED_TAG, regex=False)
    guess = ~reference
    if reference.sum() == 1 and "projection_tokens" in frame.columns:
        # No column: an arm whose projection is as large as the uncompacted one's did not compact either.
        tokens = pd.to_numeric(frame["projection_tokens"], errors="coerce")
        guess &= ~(tokens >= float(tokens[reference].iloc[0])).fillna(False).astype(bool)
    if "compacted" not in frame.columns:
        return guess
    return frame["compacted"].astype("boolean").fillna(guess).astype(bool) & ~reference


def ranked(frame: pd.DataFrame) -> pd.Series:
    """Per row: may the arm be named best, cheapest or anything else? Only one that compacted and fits."""
    over = frame["over_window"].astype("boolean").fillna(False).astype(bool) if "over_window" in frame else False
    return compacted(frame) & ~over


def retained_of_n(k: float, n: float, low: float, high: float, over_window: bool = False) -> str:
    """``k/n (low–high)``, and `NOT_SENDABLE` after it for an arm over the window: how every table shows recall."""
    return f"{k:.0f}/{n:.0f} ({low:.0%}–{high:.0%})" + (f" · {NOT_SENDABLE}" if over_window else "")


def parts_of_n(frame: pd.DataFrame, prefix: str = "") -> dict[str, list[str]]:
    """Scope and summary recall of each row as `retained_of_n` (`NOT_MEASURED` where the part was not measured).

    Reads ``<prefix>scope_retained`` / ``_ci_low`` / ``_ci_high`` (and the same for ``summary``) over
    ``<prefix>n``, and returns ``{"<prefix>scope_of_n": [...], "<prefix>summary_of_n": [...]}``. An arm
    over the window is not flagged here: its total's `retained_of_n` says so.
    """
    out: dict[str, list[str]] = {}
    n = pd.to_numeric(frame[f"{prefix}n"], errors="coerce") if f"{prefix}n" in frame else None
    for part in found.PARTS:
        cols = [f"{prefix}{part}_{kind}" for kind in ("retained", "ci_low", "ci_high")]
        if n is None or any(c not in frame.columns for c in cols):
            out[f"{prefix}{part}_of_n"] = [NOT_MEASURED] * len(frame)
            continue
        k, low, high = (pd.to_numeric(frame[c], errors="coerce") for c in cols)
        out[f"{prefix}{part}_of_n"] = [
            retained_of_n(*row) if pd.notna(row[0]) and pd.notna(row[1]) and row[1] > 0 else NOT_MEASURED
            for row in zip(k, n, low, high, strict=True)
        ]
    return out


@dataclass(frozen=True)
class Figure:
    """One figure of a run, as files in its ``figures/`` folder."""

    stem: str
    title: str
    png: Path | None
    svg: Path | None
    html: Path | None

    def numbered(self, number: int | None) -> str:
        """Its caption as a page shows it: ``Figure <number> — <title>`` (the title alone without a number)."""
        return f"Figure {number} — {self.title}" if number is not None else self.title


def cost_view(cost: pd.DataFrame, price_table: str | None = None, simulator: str | None = None) -> pd.DataFrame:
    """Select the cost rows of one price table under one cache rule.

    Defaults: the table and rule notebook 04's figures showed (the rows its
    ``shown`` column marks, `cost.choice.mark_shown`). A run folder without
    that record (older runs): the first price table in the table, under its
    own provider's rule (the first non-``none`` simulator it was priced with).
    """
    from compaction_lab.cost.choice import shown_pair

    if cost.empty:
        return cost
    shown = shown_pair(cost)
    table = price_table or (shown[0] if shown else str(cost["price_table"].iloc[0]))
    rows = cost[cost["price_table"] == table]
    if rows.empty:
        raise ValueError(f"price table {table!r} not in the run's cost table: {sorted(set(cost['price_table']))}")
    sims = list(dict.fromkeys(rows["simulator"]))
    own = shown[1] if shown and shown[0] == table else None
    sim = simulator or own or next((s for s in sims if s != "none"), sims[0])
    if sim not in sims:
        raise ValueError(f"simulator {sim!r} not priced for {table!r}: {sims}")
    return rows[rows["simulator"] == sim]


def headline_table(run_dir: Path, price_table: str | None = None, simulator: str | None = None) -> pd.DataFrame:
    """Per strategy: questions retained of N with the 95% interval, needed-next recall, projection tokens, money.

    Recall comes from the closed-book exam (``exam_recall``), needed-next
    recall from the continuation exam (`needed_next`: ``n/a`` where it did
    not run), money from the cost model (``cost``) under one price table and
    cache rule (see `cost_view`). Without a cost table the money columns are
    empty; without recall there is no headline and the table is empty.
    """
    recall = runfolder.maybe_table(Path(run_dir), "exam_recall")
    if recall is None or recall.empty:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    for col, missing in _NEWER.items():
        if col not in recall.columns:
            recall[col] = missing
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
            *_NEWER,
        ]
    ].copy()
    out["over_window"] = out["over_window"].fillna(False).astype(bool)
    out["compacted"] = compacted(recall).to_numpy()
    imported_n, idle = _session_counts(run_dir)
    out["sessions_imported"] = pd.array([imported_n] * len(out), dtype="Int64")
    out["sessions_would_not_compact"] = pd.array([idle] * len(out), dtype="Int64")
    out["retained_of_n"] = [
        retained_of_n(*row)
        for row in zip(out["retained"], out["n"], out["ci_low"], out["ci_high"], out["over_window"], strict=False)
    ]
    for col, shown in parts_of_n(out).items():
        out[col] = shown
    out = out.merge(needed_next(run_dir), on="strategy", how="left")
    for col in [*_NEEDED_NEXT, *_NEEDED_NEXT_PARTS]:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    for col in ("needed_next_of_n", "needed_next_scope_of_n", "needed_next_summary_of_n"):
        out[col] = out[col].fillna(NOT_MEASURED)
    for col in _COUNTS:
        out[col] = pd.array(pd.to_numeric(out[col], errors="coerce"), dtype="Int64")
    out["summary_by"] = out["summary_by"].astype(object).where(out["summary_by"].notna(), None)
    cost = runfolder.maybe_table(Path(run_dir), "cost")
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
    # An arm that could never be sent, or did not compact, goes last whatever it retained: shown for
    # reference, never ranked.
    # The uncompacted reference comes after them all.
    out["_unranked"] = ~ranked(out)
    out["_reference"] = (out["strategy"].astype(str) == UNCOMPACTED) | out["strategy_label"].astype(str).str.contains(
        UNCOMPACTED_TAG, regex=False
    )
    order = ["_unranked", "_reference", "over_window", "recall", "projection_tokens"]
    ascending = [True, True, True, False, True]
    return out.sort_values(order, ascending=ascending)[HEADLINE_COLUMNS].reset_index(drop=True)


def _session_counts(run_dir: Path) -> tuple[int | None, int | None]:
    """Sessions imported and, of them, those that would not compact at this window (``exam_sessions``; None: absent)."""
    sessions = runfolder.maybe_table(Path(run_dir), exam_cases.SESSIONS_TABLE)
    if sessions is None:
        return None, None
    idle = None
    if "would_compact" in sessions.columns:
        idle = int((~sessions["would_compact"].astype("boolean").fillna(True).astype(bool)).sum())
    return len(sessions), idle


def closed_block(table: pd.DataFrame) -> pd.DataFrame:
    """Select the rows of a continuation table (``continuation_recall``, ``_targets``) at the closed book's cuts."""
    return table[table["block"] == CONTINUATION_BLOCK] if "block" in table.columns else table


def needed_next(run_dir: Path) -> pd.DataFrame:
    """Per strategy: the continuation exam's needed-next recall, as the headline's ``needed_next_*`` columns.

    Read from ``continuation_recall`` (block ``closed``: the closed book's cases), one row per strategy
    (the first, should a reader add rows); ``needed_next_of_n`` is `retained_of_n` of it (with
    `NOT_SENDABLE` for an arm over the window), or `NOT_MEASURED` where the arm had nothing to score.
    Without the table (a run folder older than notebook 06, or one where it did not run) the frame has
    no rows, so every arm of the headline reads `NOT_MEASURED`. ``needed_next_reader_label`` says who graded it.
    """
    split = [*_NEEDED_NEXT_PARTS, "needed_next_scope_of_n", "needed_next_summary_of_n"]
    cols = ["strategy", *_NEEDED_NEXT, "needed_next_of_n", "needed_next_reader_label", *split]
    table = runfolder.maybe_table(Path(run_dir), CONTINUATION_RECALL)
    if table is None or table.empty:
        return pd.DataFrame(columns=cols)
    table = closed_block(table).drop_duplicates("strategy").copy()
    for col in _PART_SOURCE:  # a table saved before issue 47: the split is not measured
        if col not in table.columns:
            table[col] = float("nan")
    names = {**_NEEDED_NEXT, **_NEEDED_NEXT_PARTS}
    out = table[["strategy", *names.values()]].rename(columns={v: k for k, v in names.items()})
    out = out.assign(**parts_of_n(out, "needed_next_"))
    out["needed_next_reader_label"] = table["reader_label"] if "reader_label" in table.columns else None
    over = table["over_window"].astype("boolean").fillna(False) if "over_window" in table.columns else None
    out["needed_next_of_n"] = [
        retained_of_n(k, n, low, high, bool(over.iloc[i]) if over is not None else False)
        if pd.notna(n) and n > 0
        else NOT_MEASURED
        for i, (k, n, low, high) in enumerate(
            zip(
                out["needed_next_retained"],
                out["needed_next_n"],
                out["needed_next_ci_low"],
                out["needed_next_ci_high"],
                strict=True,
            )
        )
    ]
    return out[cols].reset_index(drop=True)


#: The headline as readers see it: column -> header.
HEADLINE_VIEW = {
    "strategy_label": "strategy",
    "retained_of_n": "retained of N (95% CI)",
    "scope_of_n": "kept by design (scope recall, 95% CI)",
    "summary_of_n": "only in the summary (summary recall, 95% CI)",
    "needed_next_of_n": "needed-next recall (95% CI)",
    "projection_tokens": "projection tokens",
    "compaction_cost_cold": "compaction cost, cold",
    "compaction_cost_cached": "compaction cost, cache-served",
    "break_even": "break-even turns",
    "cost_per_point": "1 + T turns per point of recall",
    "currency": "currency",
}


#: The summary column's cell for an arm whose projections hold no summary text (its summary recall is 0 by design).
NO_SUMMARY = "no summary text"


def summarisers(frame: pd.DataFrame) -> list[str]:
    """Who wrote the summary text of `frame`'s arms (``summary_by``, each label once; [] where none or not measured)."""
    return summariser_labels(frame)


def headline_view(headline: pd.DataFrame) -> pd.DataFrame:
    """Show the headline's reader-facing columns under readable headers, numbers rounded for display.

    Beside the total (retained of N) stand its two parts: kept by design (scope recall) and only in the
    summary (summary recall). Who wrote the summaries goes in the summary column's header when one
    summariser wrote them all (offline: ", written by extractive stand-in"), else in each cell; an arm
    with no summary text reads `NO_SUMMARY`. The needed-next cell adds its own split
    (``scope k/n · summary k/n``) where the continuation exam measured it. A column a headline saved
    earlier lacks reads `NOT_MEASURED`.
    """
    view = headline[[c for c in HEADLINE_VIEW if c in headline.columns]].copy()
    at = list(view.columns).index("retained_of_n") + 1 if "retained_of_n" in view.columns else None
    for col in ("scope_of_n", "summary_of_n", "needed_next_of_n"):
        if col in view.columns:
            view[col] = view[col].fillna(NOT_MEASURED)
        elif at is not None:
            # A headline saved before the column existed (issue 47; the continuation exam): not measured.
            view.insert(at, col, NOT_MEASURED)
        at = list(view.columns).index(col) + 1 if col in view.columns else at
    by = summarisers(headline)
    header = HEADLINE_VIEW["summary_of_n"]
    if "summary_of_n" in view.columns and "summary_by" in headline.columns:
        writer = headline["summary_by"]
        measured = view["summary_of_n"] != NOT_MEASURED
        none = measured & writer.notna() & (writer.astype(str) == "")
        view.loc[none, "summary_of_n"] = NO_SUMMARY
        if len(by) == 1:
            header = f"{header}, written by {by[0]}"
        elif by:
            named = measured & ~none & writer.notna()
            view.loc[named, "summary_of_n"] = (
                view.loc[named, "summary_of_n"] + " · written by " + writer[named].astype(str)
            )
    if "needed_next_of_n" in view.columns and "needed_next_scope_retained" in headline.columns:
        split = headline["needed_next_scope_retained"].notna() & headline["needed_next_summary_retained"].notna()
        for i in headline.index[split]:
            r = headline.loc[i]
            n = int(r["needed_next_n"])
            view.loc[i, "needed_next_of_n"] = (
                f"{view.loc[i, 'needed_next_of_n']} · scope {int(r['needed_next_scope_retained'])}/{n} · "
                f"summary {int(r['needed_next_summary_retained'])}/{n}"
            )
    view["projection_tokens"] = view["projection_tokens"].map(lambda v: f"{v:,.0f}" if pd.notna(v) else "n/a")
    for col in ("compaction_cost_cold", "compaction_cost_cached", "cost_per_point"):
        view[col] = view[col].map(lambda v: f"{v:.4f}" if v is not None and pd.notna(v) else "n/a")
    return view.rename(columns={**HEADLINE_VIEW, "summary_of_n": header})


#: Said instead of a headline when there is no recall to report.
NO_HEADLINE = (
    "No closed-book recall in this run, so there is no headline: the exam did not run, or it could ask "
    "no question of these sessions (see notebook 03 for why)."
)


#: What each headline column means and its unit, defined where it first appears (each header's hover and the
#: line under the table; the words are docs/glossary.md's). Keyed by the headline column.
HEADLINE_TERMS = {
    "strategy_label": "the arm; “(extractive stand-in)”: its summaries were written offline by the extractive "
    "stand-in, not a model; “(reconstructed)”: its upstream design is not public and was rebuilt from its description",
    "retained_of_n": "questions answered right from the next request after the compaction, of the N asked, with "
    "its 95% interval (the method is named in “What this run measured”)",
    "scope_of_n": "right answers whose value is in what the arm keeps by design (originals, tail, files, its own "
    "text around a summary)",
    "summary_of_n": "right answers whose value only the summary text holds (it measures whoever wrote the summaries)",
    "needed_next_of_n": "of the values the agent's next recorded actions used (paths, commands, numbers), how many "
    "the next request holds",
    "projection_tokens": "size of the projection (the history the next request carries), in report-tokenizer tokens",
    "compaction_cost_cold": "money of the compaction's own model request with no cache hit, in the currency column",
    "compaction_cost_cached": "the same request with the provider's prefix cache simulated on its real tokens",
    "break_even": "later turns after which compacting has cost less than continuing uncompacted (“never”: it does "
    "not repay within the turns priced)",
    "cost_per_point": "money of one compaction plus the T later turns priced, divided by 100 × recall",
    "currency": "currency of the money columns (the price table's)",
}


def headline_html(headline: pd.DataFrame) -> str:
    """Render the headline view as an HTML table (escaped) with its columns defined, or a sentence when there is none.

    Each header carries its definition (`HEADLINE_TERMS`) as a hover, and the line under the table says them
    all, so every column and unit is defined where it first appears.
    """
    if headline.empty:
        return f"<p>{NO_HEADLINE}</p>"
    view = headline_view(headline)
    table = view.to_html(index=False, na_rep="n/a", classes="cl-headline")
    column_of = {h: c for c, h in HEADLINE_VIEW.items()}
    terms = []
    for header in view.columns:
        col = column_of.get(header) or ("summary_of_n" if header.startswith(HEADLINE_VIEW["summary_of_n"]) else "")
        meaning = HEADLINE_TERMS.get(col)
        if not meaning:
            continue
        head = html.escape(str(header))
        table = table.replace(f"<th>{head}</th>", f'<th title="{html.escape(meaning)}">{head}</th>', 1)
        terms.append(f"<b>{head}</b>: {html.escape(meaning)}")
    return table + ('<p class="terms">' + " · ".join(terms) + "</p>" if terms else "")


def money(v: Any, currency: str) -> str:
    """Show an amount as ``0.0123 CNY`` (four decimals; "n/a" where not priced)."""
    return f"{v:.4f} {currency}" if v is not None and pd.notna(v) else "n/a"


#: Headline columns a headline saved before issue 45 may lack (read with these defaults).
_BASIS: dict[str, Any] = {
    "sessions_imported": pd.NA,
    "sessions_would_not_compact": pd.NA,
    "needed_next_reader_label": None,
}

#: What an exact-value exam read by the verbatim reader favours (the second sentence of `measured_text`).
VERBATIM_FAVOURS = (
    "An exact-value exam read by the verbatim reader favours arms that keep text verbatim: it cannot credit "
    "a paraphrase, and its recall is an upper bound on what a model could answer from the same projection."
)

#: The same for any other reader: exact values are graded, so a paraphrase earns nothing.
EXACT_FAVOURS = (
    "The exam grades exact values: an arm that keeps a value only as a paraphrase gets no credit for it, so "
    "arms that keep text verbatim are favoured."
)


def _is_stand_in(label: str) -> bool:
    return "stand-in" in label or "ceiling" in label


def _reader_words(label: str) -> str:
    return f"{label} — an offline stand-in, not a model" if _is_stand_in(label) else label


def basis_line(headline: pd.DataFrame) -> str:
    """Say what the headline rests on, in one line: sessions, records, questions, readers, summaries.

    Sessions examined of those imported and how many would not compact at this window (``sessions_*``),
    the records and questions the recall counts, each reader with its stand-in label (the closed book's,
    and the needed-next column's), and how many arms' summaries an offline stand-in wrote. A quantity the
    headline does not carry (a headline saved by an older run) is left out, never guessed.
    """
    h = headline
    first = h.iloc[0]
    n = int(first["n"])
    parts = [_plural(n, "question")]
    if pd.notna(first.get("n_records")):
        parts[0] += f" from {_plural(int(first['n_records']), 'record')}"
    if pd.notna(first.get("n_sessions")):
        examined = int(first["n_sessions"])
        sessions = f"{_plural(examined, 'session')} examined"
        if pd.notna(first.get("sessions_imported")):
            sessions += f" of {int(first['sessions_imported']):,} imported"
            idle = first.get("sessions_would_not_compact")
            if pd.notna(idle) and int(idle):
                sessions += f" ({int(idle):,} would not compact at this window)"
        parts.append(sessions)
    parts.append(f"{_plural(len(h), 'arm')}")
    readers = [f"reader: {_reader_words(str(first['reader_label']))}"]
    nn = h["needed_next_reader_label"].dropna() if "needed_next_reader_label" in h.columns else pd.Series([])
    if len(nn):
        readers.append(f"needed-next recall: {_reader_words(str(nn.iloc[0]))}")
    labels = h["strategy_label"].astype(str)
    stand_in = labels.str.contains(STAND_IN_LABEL, regex=False)
    summaries = (
        f"summaries: {STAND_IN_LABEL} for {int(stand_in.sum())} of {_plural(len(h), 'arm')} (no model wrote them)"
        if stand_in.any()
        else ""
    )
    return "Basis: " + "; ".join([", ".join(parts), *readers, *([summaries] if summaries else [])]) + "."


def _separated(rows: pd.DataFrame, low: str, high: str, *, largest: bool) -> tuple[pd.Series, pd.DataFrame]:
    """Return the top row of `rows` (best first) and the other rows whose interval reaches it.

    `rows` come in order, best first. The top is separated when no other row's interval reaches it: for
    `largest`, every other ``high`` is below its ``low``; otherwise every other ``low`` is above its ``high``.
    """
    top, rest = rows.iloc[0], rows.iloc[1:]
    tied = rest[rest[high] >= top[low]] if largest else rest[rest[low] <= top[high]]
    return top, tied


def _cannot_tell(what: str, rows: pd.DataFrame, value: Any) -> str:
    listed = ", ".join(f"{r['strategy_label']} {value(r)}" for _, r in rows.iterrows())
    return f"{what}: the data cannot tell apart {listed} — their 95% intervals overlap."


def _per_point_bounds(h: pd.DataFrame) -> pd.DataFrame:
    """Cost per point with the interval its recall interval gives it (cost is exact; recall is not)."""
    total = h["cost_per_point"].astype(float) * 100 * h["recall"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = total / (100 * h["ci_high"].astype(float))
        high = (total / (100 * h["ci_low"].astype(float))).where(h["ci_low"] > 0, np.inf)
    return h.assign(cpp_low=low, cpp_high=high)


def measured_text(headline: pd.DataFrame) -> list[str]:
    """Say what this run measured, as short sentences of values read from the headline table.

    First what the headline rests on (`basis_line`) and what the exam favours (`VERBATIM_FAVOURS` /
    `EXACT_FAVOURS`). Then only comparisons the numbers carry, and only among arms that compacted and fit
    the window (`ranked`; the uncompacted reference never counts): the most retained, or the arms the data
    cannot tell apart when their 95% intervals overlap the top arm's; projection sizes; which arms are free
    to compact, the cheapest that calls a model, the lowest cost per point (named only when the interval
    its recall gives it lies below every other arm's); where compaction never pays. No sentence is written
    for a quantity the run did not measure.
    """
    if headline.empty:
        return [NO_HEADLINE]
    h = headline.copy()
    for col, missing in {**_NEWER, **_BASIS}.items():
        if col not in h.columns:
            h[col] = missing
    first = h.iloc[0]
    method = f" 95% intervals: {first['ci_method']}." if first["ci_method"] else ""
    reader = str(first["reader_label"])
    lines = [basis_line(h) + method, VERBATIM_FAVOURS if reader.startswith("verbatim") else EXACT_FAVOURS]
    seed = seed_line(h)
    if seed:
        lines.append(seed)
    share_top = first["top_session_share"]
    if pd.notna(share_top) and share_top > 0.5 and pd.notna(first["n_sessions"]) and int(first["n_sessions"]) > 1:
        lines.append(
            f"One session gives {share_top:.0%} of the questions: these numbers speak mostly for that session "
            "(see the per-session table)."
        )
    over = h[h["over_window"].astype(bool)]
    idle = h[~compacted(h) & ~h["over_window"].astype(bool)]
    h = h[ranked(h)].sort_values(["recall", "projection_tokens"], ascending=[False, True])
    if len(over):
        lines.append(
            "Not sendable at this window (the projection is larger than W − O; shown for reference, never ranked): "
            + ", ".join(over["strategy_label"].astype(str))
            + "."
        )
    if len(idle):
        lines.append(
            "Did not compact (the projection is the uncompacted history; shown for reference, never ranked): "
            + ", ".join(idle["strategy_label"].astype(str))
            + "."
        )
    if h.empty:
        lines.append("No arm that compacted fits the usable capacity W − O at this window: nothing is ranked.")
        return lines
    lines += _ranking_lines(h)
    lines += _by_design_lines(headline)
    small, large = h.sort_values("projection_tokens").iloc[0], h.sort_values("projection_tokens").iloc[-1]
    lines.append(
        f"Projection size ranged from {small['projection_tokens']:,.0f} tokens "
        f"({small['strategy_label']}) to {large['projection_tokens']:,.0f} ({large['strategy_label']})."
    )
    if h["price_table"].notna().any():
        lines += _money_lines(h, stand_in=ranking_mode(h) == "scope")
    return lines


#: The arms of the seed report's own design, and how the report introduces them where it first names them.
SEED_PREFIX = "futureos"
SEED_DESIGN = (
    "FutureOS's projections (deterministic, summarised), the design of the seed report this suite "
    "reproduces (docs/strategies.md)"
)


def seed_line(frame: pd.DataFrame) -> str:
    """Introduce the seed report's own arms where a page first names them ("" when `frame` has none)."""
    seed = sorted(str(s) for s in frame["strategy"].unique() if str(s).startswith(SEED_PREFIX))
    return f"{' and '.join(seed)}: {SEED_DESIGN}." if seed else ""


#: Said offline, where every summary is the extractive stand-in's (`_ranking_lines`).
STAND_IN_SUMMARY_RECALL = (
    f"Summary recall (right answers whose value only a summary holds) needs a model summariser to mean "
    f"anything: offline every summary was written by the {STAND_IN_LABEL}, which copies value-bearing "
    "sentences verbatim, so it measures the stand-in, not the strategy; scope recall, exact offline, is what "
    "the strategy keeps."
)


def ranking_mode(h: pd.DataFrame) -> str:
    """How to rank arms `h` (compacted and fit): ``total`` (no split, or no summary text), ``scope`` or ``both``.

    ``scope`` when the split was measured and every summary the arms hold is the stand-in's (offline);
    ``both`` when some summary was written by anyone else (a model, a recorded agent).
    """
    cols = ("scope_recall", "scope_ci_low", "scope_ci_high", "summary_by")
    if h.empty or any(c not in h.columns for c in cols) or h["scope_recall"].isna().any():
        return "total"
    by = summarisers(h)
    if not by:
        return "total"
    return "scope" if all(STAND_IN_LABEL in label for label in by) else "both"


def _ranking_lines(h: pd.DataFrame) -> list[str]:
    """Word the ranking sentences of `measured_text` over arms `h` (compacted and fit, best total first).

    Offline (every summary the stand-in's) the ranking is by scope recall and a sentence says summary
    recall measures the stand-in (`STAND_IN_SUMMARY_RECALL`); with any other summariser both rankings are
    said, total then scope; without the split (an older headline) or without summary text, the total's.
    """
    mode = ranking_mode(h)
    if "scope_of_n" not in h.columns and mode != "total":
        h = h.assign(**parts_of_n(h))
    if len(h) == 1:
        r = h.iloc[0]
        kept = f"; kept by design {r['scope_of_n']}" if mode != "total" else ""
        only = [f"Only one arm compacted and fits: {r['strategy_label']}, {r['retained_of_n']}{kept}."]
        return only + ([STAND_IN_SUMMARY_RECALL] if mode == "scope" else [])
    total = _best_or_tied(
        h,
        ("ci_low", "ci_high", True),
        ("Most retained of the arms that compacted and fit", "Most retained"),
        lambda r: r["retained_of_n"],
        "its 95% interval lies above every other arm's.",
    )
    if mode == "total":
        return [total]
    scope = _best_or_tied(
        h.sort_values(["scope_recall", "projection_tokens"], ascending=[False, True]),
        ("scope_ci_low", "scope_ci_high", True),
        ("Most kept by design (scope recall) of the arms that compacted and fit", "Most kept by design (scope recall)"),
        lambda r: r["scope_of_n"],
        "its 95% interval lies above every other arm's.",
    )
    if mode == "scope":
        return [scope, STAND_IN_SUMMARY_RECALL]
    return [total, scope, f"Summary recall here measures the summaries of {', '.join(summarisers(h))}."]


def _by_design_lines(headline: pd.DataFrame) -> list[str]:
    """Per arm that compacted: how many questions pointing at assistant text it answers from what it keeps by design.

    Checks the claim that some agents keep no assistant text outside their summary; an arm over the window
    is marked, the uncompacted reference and arms that did not compact are left out. Nothing when not
    measured or no question points at assistant text.
    """
    cols = ("scope_retained_assistant", "n_assistant")
    if any(c not in headline.columns for c in cols):
        return []
    h = headline[compacted(headline)]
    k = pd.to_numeric(h["scope_retained_assistant"], errors="coerce")
    n = pd.to_numeric(h["n_assistant"], errors="coerce")
    keep = (k.notna() & n.gt(0)).astype("boolean").fillna(False).to_numpy(dtype=bool)
    h = h.assign(_k=k, _n=n).loc[keep]
    if h.empty:
        return []
    h = h.assign(_share=h["_k"] / h["_n"]).sort_values("_share", kind="stable")
    same = h["_n"].nunique() == 1
    over = h["over_window"].astype("boolean").fillna(False).astype(bool) if "over_window" in h else h["_k"].ne(h["_k"])
    listed = ", ".join(
        f"{r['strategy_label']} {int(r['_k'])}"
        + ("" if same else f"/{int(r['_n'])}")
        + f" ({r['_share']:.0%})"
        + (" (not sendable)" if o else "")
        for (_, r), o in zip(h.iterrows(), over, strict=True)
    )
    where = f"of the {_plural(int(h['_n'].iloc[0]), 'question')}" if same else "of the questions"
    line = f"Kept by design (scope recall), {where} pointing at assistant text: {listed}."
    none = h[h["_k"] == 0]["strategy_label"].astype(str).tolist()
    if none:
        who = none[0] if len(none) == 1 else f"{', '.join(none[:-1])} and {none[-1]}"
        line += f" {who} {'keeps' if len(none) == 1 else 'keep'} none of them outside {'its' if len(none) == 1 else 'their'} summary."
    return [line]


def _best_or_tied(
    rows: pd.DataFrame,
    bounds: tuple[str, str, bool],
    what: tuple[str, str],
    value: Callable[[Any], Any],
    why: str,
) -> str:
    """Name the first of `rows` when its interval (`bounds`: low, high, larger is better) clears every other's.

    ``what`` is the sentence's opening when one is named and when the data cannot tell (`_cannot_tell`).
    """
    low, high, largest = bounds
    top, tied = _separated(rows, low, high, largest=largest)
    if tied.empty:
        return f"{what[0]}: {top['strategy_label']}, {value(top)}; {why}"
    return _cannot_tell(what[1], pd.concat([rows.iloc[:1], tied]), value)


#: Said after the cost-per-point figure offline: its recall is the total, the stand-in's summaries included.
PER_POINT_STAND_IN = f" (total recall, the {STAND_IN_LABEL}'s summaries included)"


def _money_lines(h: pd.DataFrame, stand_in: bool = False) -> list[str]:
    """Word the cost sentences of `measured_text`, over arms that compacted and fit (`h`, best recall first).

    `stand_in`: every summary is the stand-in's, so the cost per point of (total) recall says so.
    """
    lines = []
    cur = str(h["currency"].dropna().iloc[0])
    where = f"{h['price_table'].dropna().iloc[0]} prices, {h['simulator'].dropna().iloc[0]} cache rule"
    free = h[h["compaction_cost_cold"] == 0]["strategy_label"].tolist()
    paid = h[h["compaction_cost_cold"] > 0].sort_values("compaction_cost_cached")
    if free:
        lines.append(f"Free to compact (no model request): {', '.join(free)}.")
    if not paid.empty:
        p = paid.iloc[0]
        cost = money(p["compaction_cost_cached"], cur)
        same = paid[paid["compaction_cost_cached"].round(4) == round(float(p["compaction_cost_cached"]), 4)]
        who = ", ".join(same["strategy_label"].astype(str)) + (" (the same)" if len(same) > 1 else "")
        lines.append(
            f"Cheapest compaction that calls a model, cache-served ({where}): {who}, {cost}"
            + (f" (cold {money(p['compaction_cost_cold'], cur)})." if len(same) == 1 else ".")
        )
    per = _per_point_bounds(h.dropna(subset=["cost_per_point"])).sort_values("cost_per_point")
    what = "Lowest cost of one compaction + T turns per point of recall" + (PER_POINT_STAND_IN if stand_in else "")
    if len(per) == 1:
        lines.append(
            f"{what}: only {per.iloc[0]['strategy_label']} is priced, {money(per.iloc[0]['cost_per_point'], cur)}."
        )
    elif len(per) > 1:
        lines.append(
            _best_or_tied(
                per,
                ("cpp_low", "cpp_high", False),
                (what, what),
                lambda r: money(r["cost_per_point"], cur),
                "the interval its recall gives it lies below every other arm's.",
            )
        )
    never = h[h["break_even"] == "never"]["strategy_label"].tolist()
    if never:
        lines.append(f"Never repays its compaction against continuing uncompacted: {', '.join(never)}.")
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


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
        """Render the block's table as HTML (empty string when there is nothing to show)."""
        return self.table.to_html(index=False, escape=True) if len(self.table) else ""


#: The recorded block as readers see it: column -> header.
RECORDED_VIEW = {
    "compaction": "compaction",
    "recorded": "the agent's own (recorded)",
    "own_strategy": "its reimplementation",
    "best_strategy": "best other arm",
}


#: The recorded block's "best other arm" when no other arm compacted and fits the window.
NO_BEST_OTHER = "none that compacted and fits"


def _retained(r: Mapping[str, Any]) -> str:
    over = bool(r.get("over_window", False))
    flag = r.get("summary_opaque", False)  # absent from tables of earlier runs
    opaque = " (summary opaque: not readable, a lower bound)" if not pd.isna(flag) and bool(flag) else ""
    scope, summary = r.get("scope_retained"), r.get("summary_retained")  # issue 47; absent or <NA> earlier
    split = ""
    if scope is not None and summary is not None and pd.notna(scope) and pd.notna(summary):
        split = f" · kept by design {int(scope)}, only in the summary {int(summary)}"
    shown = retained_of_n(r["retained"], r["n"], r["ci_low"], r["ci_high"], over)
    return f"{r['strategy_label']}: {shown}{split}{opaque}"


def recorded_block(run_dir: Path) -> RecordedBlock | None:
    """Gather what the run found of real compactions and how they did, or None when notebook 03 did not look.

    Per compaction: the agent's own compaction (recorded) and the arm that
    reimplements that agent, each as retained of N with the 95% interval (and, where ``exam_recorded``
    carries them, how many of those the arm keeps by design and how many only its summary holds), and
    the other arm that retained most among those that compacted and fit the
    window (`ranked`; `NO_BEST_OTHER` when none). Values only, from ``recorded_compactions``,
    ``recorded_skipped`` and ``exam_recorded``.
    """
    run_dir = Path(run_dir)
    found = runfolder.maybe_table(run_dir, "recorded_compactions")
    if found is None:
        return None
    skipped = runfolder.maybe_table(run_dir, "recorded_skipped")
    table = runfolder.maybe_table(run_dir, "exam_recorded")
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
    if "eligible_values" in found.columns:
        for f in found.to_dict("records"):
            pool = int(f["eligible_values"])
            held = f" (the agent's whole next request holds {f['recorded_pool_recall']:.0%})" if pool else ""
            readable = f.get("summary_readable", True)
            if readable is not None and not pd.isna(readable) and not bool(readable):
                # an encrypted summary (Codex's remote compaction): the model reads it, the suite cannot
                size = int(f.get("opaque_summary_tokens") or 0)
                held = f" (the readable rest of its next request holds {f['recorded_pool_recall']:.0%}, a lower bound)"
                lines.append(
                    f"{f['session_id']} #{int(f['compaction']) + 1}: {pool:,} eligible values (before the cut, outside "
                    f"what the agent kept verbatim); its real summary is opaque (encrypted, about {size:,} tokens): "
                    f"the model reads it, this suite cannot — not readable{held if pool else ''}."
                )
                continue
            lines.append(
                f"{f['session_id']} #{int(f['compaction']) + 1}: {pool:,} eligible values (before the cut, outside "
                f"what the agent kept verbatim); its real summary holds {int(f['eligible_in_summary']):,} of them{held}."
            )
    rows = []
    if table is not None and len(table):
        if "over_window" not in table.columns:
            table["over_window"] = False
        for _case_id, g in table.groupby("case_id", sort=False):
            g = g[g["n"] > 0]
            if g.empty:
                continue
            first = g.iloc[0]
            own_rec, own_strategy = g[g["recorded"]], g[g["own_agent"]]
            # the best *other* arm compacted and could have been sent: never the uncompacted reference, an arm
            # whose projection is the uncompacted history, or one over the window
            others = g[~g["recorded"] & ~g["own_agent"] & ranked(g)].sort_values(
                ["recall", "projection_tokens"], ascending=[False, True]
            )
            if (
                len(own_strategy)
                and "kept_note" in own_strategy.columns
                and own_strategy.iloc[0]["kept_match"] is False
            ):
                lines.append(
                    f"{first['session_id']} #{int(first['compaction']) + 1}: {own_strategy.iloc[0]['kept_note']}"
                )
            rows.append(
                {
                    "compaction": f"{first['session_id']} #{int(first['compaction']) + 1} ({first['agent']}, {first['model']})",
                    "recorded": _retained(own_rec.iloc[0]) if len(own_rec) else "n/a",
                    "own_strategy": _retained(own_strategy.iloc[0]) if len(own_strategy) else "not run",
                    "best_strategy": _retained(others.iloc[0]) if len(others) else NO_BEST_OTHER,
                }
            )
        if len(found) and not rows:
            lines.append(
                "No question could be asked before any of them (each question must point before the "
                "recent tail of its compaction)."
            )
    view = pd.DataFrame(rows, columns=list(RECORDED_VIEW)).rename(columns=RECORDED_VIEW)
    return RecordedBlock(len(found), tuple(lines), view)


#: The notebook of the continuation exam (its tables, its figures, its section of the report).
CONTINUATION_NOTEBOOK = "06_continuation_exam"

#: The target-level table the rank agreement resamples (one row per block x case x arm x needed target).
CONTINUATION_TARGETS = "continuation_targets"

#: What the agreement sentence says before its verdict.
RANKINGS = "Closed-book and continuation rankings"


def run_parameters(run_dir: Path) -> Mapping[str, Any]:
    """Return the chain-wide parameters ``run.json`` records ({} for a folder without one, opened by hand)."""
    path = Path(run_dir) / runfolder.RUN_JSON
    info = bounded_json.load_file(path) if path.is_file() else {}
    return (info.get("parameters") or {}) if isinstance(info, Mapping) else {}


def _stats_parameters(run_dir: Path) -> tuple[int, int]:
    """Return the run's bootstrap resamples and seed (``n_boot``, ``stats_seed`` in ``run.json``; else 2000, 7)."""
    params = run_parameters(run_dir)
    return int(params.get("n_boot", 2000)), int(params.get("stats_seed", 7))


def _interval(low: float, high: float) -> str:
    # An en dash between two negative numbers reads as a minus: say "to" whenever a bound is negative.
    sep = " to " if min(low, high) < 0 else "–"
    return f"{low:.2f}{sep}{high:.2f}".replace("-", "−")


def agreement_sentence(agreement: stats.RankAgreement) -> str:
    """Say in one sentence whether two exams rank the arms alike: the one wording of `stats.RankAgreement.verdict`.

    ``agree`` / ``disagree`` only when the 95% interval lies above / below 0; ``cannot tell`` with ρ, the
    interval (or why there is none) and the units otherwise; ``not measured`` (with the reason, never a ρ)
    when there is no ρ.
    """
    verdict = agreement.verdict
    if verdict == stats.NOT_MEASURED:
        return f"{RANKINGS}: not measured ({agreement.method})."
    rho = f"Spearman ρ = {agreement.rho:.2f}".replace("-", "−")
    units = f"{_plural(agreement.n_strategies, 'arm')}, {_plural(agreement.n_units, 'session')}"
    if verdict == stats.CANNOT_TELL and (pd.isna(agreement.ci_low) or pd.isna(agreement.ci_high)):
        why = re.sub(r"^Spearman ρ of per-arm recall over \d+ arms[;:] ", "", agreement.method)
        return f"{RANKINGS}: cannot tell ({rho}, {units}: {why})."
    ci = f"95% CI {_interval(agreement.ci_low, agreement.ci_high)}"
    if verdict == stats.AGREE:
        return f"{RANKINGS} agree ({rho}, {ci}, {units})."
    if verdict == stats.DISAGREE:
        return (
            f"{RANKINGS} disagree ({rho}, {ci}, {units}): the arms that keep most facts keep least of what "
            "the next step needs."
        )
    return f"{RANKINGS}: cannot tell ({rho}, {ci}, {units}: the interval holds 0)."


def rankings_agreement(run_dir: Path, *, n_boot: int | None = None, seed: int | None = None) -> str:
    """Say whether the closed book and the continuation exam rank the arms alike, from the run folder.

    `stats.rank_agreement` of the closed-book answers (``exam_closed``) and the continuation exam's needed
    targets of the same cases (``continuation_targets``, block ``closed``), sessions resampled together;
    `agreement_sentence` words it. `n_boot` and `seed` default to the run's ``n_boot`` and ``stats_seed``.
    A run without either table says so ("not measured"), never raises.
    """
    run_dir = Path(run_dir)
    closed = runfolder.maybe_table(run_dir, "exam_closed")
    targets = runfolder.maybe_table(run_dir, CONTINUATION_TARGETS)
    if targets is None:
        return f"{RANKINGS}: not measured (no continuation exam in this run)."
    if closed is None or closed.empty:
        return f"{RANKINGS}: not measured (no closed-book answers in this run)."
    if "block" in targets.columns:
        targets = targets[targets["block"] == CONTINUATION_BLOCK]
    if targets.empty:
        return f"{RANKINGS}: not measured (no case's next actions needed a value from before the cut)."
    run_boot, run_seed = _stats_parameters(run_dir)
    agreement = stats.rank_agreement(
        closed, targets, n_boot=run_boot if n_boot is None else n_boot, seed=run_seed if seed is None else seed
    )
    return agreement_sentence(agreement)


#: The rediscovery table as readers see it: column -> header.
REDISCOVERY_VIEW = {
    "compaction": "compaction",
    "calls_after": "tool calls after",
    "repeats": "exact repeats of an earlier call",
    "repeats_kept": "of them, earlier output kept",
    "repeat_output_tokens": "tokens the repeats added",
    "repeat_cost": "what they cost",
    "priced_as": "priced as",
}

#: The same once repeats are told apart (``call_class``, a ``state_checks`` column): column -> header.
REDISCOVERY_SPLIT_VIEW = {
    "compaction": "compaction",
    "calls_after": "tool calls after",
    "repeats": "rediscoveries (earlier output dropped)",
    "repeats_kept": "held repeats (earlier output kept)",
    "state_checks": "state checks",
    "repeats_other": "other repeats",
    "repeat_output_tokens": "tokens the rediscoveries added",
    "repeat_cost": "what the rediscoveries cost",
    "state_check_cost": "what the state checks cost",
    "priced_as": "priced as",
}


@dataclass(frozen=True)
class ContinuationBlock:
    """The report's "can the agent still continue?" block (notebook 06's tables).

    Attributes
    ----------
    lines : tuple of str
        The rankings sentence, who graded the needed-next recall, the model's next-action grades.
    rediscovery_lines : tuple of str
        What the recorded compactions cost their agents, in words (empty when notebook 06 did not look).
    rediscovery : DataFrame
        One row per recorded compaction (`REDISCOVERY_VIEW`); empty when there was none.
    figures : tuple of (str, str)
        (stem, title) of the notebook's figures the run saved, for links to them in the gallery.
    """

    lines: tuple[str, ...]
    rediscovery_lines: tuple[str, ...]
    rediscovery: pd.DataFrame
    figures: tuple[tuple[str, str], ...]

    def html(self) -> str:
        """Render the rediscovery table as HTML (escaped); empty string when there is no row."""
        if not len(self.rediscovery):
            return ""
        return self.rediscovery.to_html(index=False, escape=True, na_rep=NOT_MEASURED)


def _count(v: Any) -> int | str:
    return int(v) if v is not None and pd.notna(v) else NOT_MEASURED


def _cost(v: Any, currency: str) -> str:
    # No price table is no cost, never a zero.
    return f"{float(v):.4f}{currency}" if v is not None and pd.notna(v) else NOT_MEASURED


def _rediscovery_view(compactions: pd.DataFrame) -> pd.DataFrame:
    """One row per recorded compaction: its calls after, the repeats by class where told apart, their cost.

    Tables that tell rediscoveries from state checks (a ``state_checks`` column) get `REDISCOVERY_SPLIT_VIEW`,
    older ones `REDISCOVERY_VIEW`; ``priced_as`` (what the cost is based on) is shown beside the cost.
    """
    split = "state_checks" in compactions.columns
    columns = dict(REDISCOVERY_SPLIT_VIEW if split else REDISCOVERY_VIEW)
    if "priced_as" not in compactions.columns:
        columns.pop("priced_as")
    rows = []
    for r in compactions.to_dict("records"):
        who = ", ".join(str(r[c]) for c in ("agent", "model") if r.get(c) is not None and pd.notna(r.get(c)))
        currency = "" if r.get("currency") is None or pd.isna(r.get("currency")) else f" {r['currency']}"
        tokens = r.get("repeat_output_tokens")
        row = {
            "compaction": f"{r['session_id']} #{int(r['compaction']) + 1}" + (f" ({who})" if who else ""),
            "calls_after": int(r["calls_after"]),
            "repeats": int(r["repeats"]),
            "repeats_kept": _count(r.get("repeats_kept")),
            "state_checks": _count(r.get("state_checks")),
            "repeats_other": _count(r.get("repeats_other")),
            "repeat_output_tokens": f"{int(tokens):,}" if tokens is not None and pd.notna(tokens) else NOT_MEASURED,
            "repeat_cost": _cost(r.get("repeat_cost"), currency),
            "state_check_cost": _cost(r.get("state_check_cost"), currency),
            "priced_as": str(r["priced_as"]) if pd.notna(r.get("priced_as")) else NOT_MEASURED,
        }
        rows.append({k: row[k] for k in columns})
    return pd.DataFrame(rows, columns=list(columns)).rename(columns=columns)


def _rediscovery_lines(compactions: pd.DataFrame) -> list[str]:
    """Say what followed the recorded compactions: the calls after them, and their repeats by class."""
    n = len(compactions)
    calls = int(pd.to_numeric(compactions["calls_after"], errors="coerce").fillna(0).sum())

    def total(col: str) -> int:
        return int(pd.to_numeric(compactions[col], errors="coerce").fillna(0).sum()) if col in compactions else 0

    head = f"Recorded compactions in this run's logs: {n}; after them the agents made {calls:,} tool calls"
    if "state_checks" not in compactions.columns:
        return [
            f"{head}, {total('repeats')} of them exact repeats of a call made before the compaction (same tool, "
            f"identical arguments); the earlier output of {total('repeats_kept')} of those was still in what the "
            "agent kept."
        ]
    lines = [
        f"{head}. Of their exact repeats of a call made before the compaction (same tool, identical arguments): "
        f"{total('repeats')} rediscoveries (a lookup whose earlier output the compaction dropped), "
        f"{total('repeats_kept')} held (the earlier output was still kept), {total('state_checks')} state checks "
        f"(a command re-run to see the state now) and {total('repeats_other')} other repeats."
    ]
    if "priced_as" in compactions.columns:
        bases = list(dict.fromkeys(str(v) for v in compactions["priced_as"].dropna()))
        if bases:
            lines.append(f"Their cost is priced as: {'; '.join(bases)}.")
    return lines


def _rate(v: Any) -> str:
    return f"{float(v):.0%}" if v is not None and pd.notna(v) else NOT_MEASURED


def _by(label: Any) -> str:
    """Return "of <who predicted> " for a line on the model grade ("of the model " when not recorded)."""
    return f"of {label} " if isinstance(label, str) and label else "of the model "


def _needed_next_lines(recall: pd.DataFrame) -> list[str]:
    """Who graded the needed-next recall, and each arm's next-action grades where a model predicted."""
    closed = recall[recall["block"] == CONTINUATION_BLOCK] if "block" in recall.columns else recall
    if not (pd.to_numeric(closed["n"], errors="coerce").fillna(0) > 0).any():
        return ["Needed-next recall: not measured (no case's next actions needed a value from before the cut)."]
    reader = distinct_text(closed, "reader_label")
    lines = [
        "Needed-next recall (in the headline): of the values the agent's next tool calls used that it had seen "
        f"only before the cut, the share the projection still holds; reader: {reader or 'not recorded'}."
    ]
    predicted = pd.to_numeric(closed["n_predicted"], errors="coerce") if "n_predicted" in closed else None
    if predicted is None:
        return lines
    for r in closed[predicted.fillna(0) > 0].to_dict("records"):
        decoys = r.get("decoy_actions")
        lines.append(
            f"{r['strategy_label']}: the next call {_by(r.get('model_reader_label'))}over {int(r['n_predicted'])} "
            "cases named the right tool "
            f"in {_rate(r.get('tool_match'))}, a needed target in {_rate(r.get('target_match'))}, the exact "
            f"arguments in {_rate(r.get('exact_match'))}"
            + (f"; it acted on a look-alike that never existed {int(decoys)} times" if pd.notna(decoys) else "")
            + "."
        )
    return lines


def continuation_block(run_dir: Path) -> ContinuationBlock | None:
    """Gather notebook 06's results for the report, or None when it did not run (an older run folder).

    Values only: the rankings sentence (`rankings_agreement`), who graded the needed-next recall (the
    table's ``reader_label``: offline, a stand-in), the model's next-action grades where a model predicted,
    and per recorded compaction the calls after it, the exact repeats and what they cost
    (``rediscovery_compactions``).
    """
    run_dir = Path(run_dir)
    recall = runfolder.maybe_table(run_dir, CONTINUATION_RECALL)
    compactions = runfolder.maybe_table(run_dir, "rediscovery_compactions")
    if recall is None and compactions is None:
        return None
    lines = [rankings_agreement(run_dir)]
    if recall is not None:
        lines += _needed_next_lines(recall)
    found: list[str] = []
    view = pd.DataFrame(columns=list(REDISCOVERY_VIEW.values()))
    if compactions is not None:
        if len(compactions):
            found += _rediscovery_lines(compactions)
            view = _rediscovery_view(compactions)
        else:
            found.append("Not measured: no recorded compaction in this run's sessions (synthetic chains record none).")
    figures = tuple((f.stem, f.title) for f in run_figures() if f.notebook == CONTINUATION_NOTEBOOK)
    saved = Path(run_dir) / runfolder.FIGURES
    figures = tuple((stem, title) for stem, title in figures if any(saved.glob(f"{stem}.*")))
    return ContinuationBlock(tuple(lines), tuple(found), view, figures)


@dataclass(frozen=True)
class QuestionsBlock:
    """The report's "questions and sessions" block.

    Where each session was cut and what it gave, results per session, and — for real logs — the pool's own
    pointer composition beside the other mixes.
    """

    lines: tuple[str, ...]
    sessions: pd.DataFrame
    by_session: pd.DataFrame
    mixes: pd.DataFrame

    def html(self) -> str:
        """Render the block's tables as HTML (escaped), each collapsed under its title and row count.

        Sections without rows are left out. Collapsed (``<details>``): a per-session table runs to dozens of
        rows and would stand between the headline and the figures.
        """
        return collapsed_tables(
            (
                ("Sessions", self.sessions),
                ("Recall per session", self.by_session),
                ("Recall under other question mixes", self.mixes),
            )
        )


def collapsed_tables(tables: Iterable[tuple[str, pd.DataFrame]]) -> str:
    """Render tables as HTML (escaped), each collapsed (``<details>``) under its caption and row count.

    Tables without rows are left out: the way the report shows a block's tables (`QuestionsBlock`, and the
    block of every exam that gives one, `exam.ExamBlock`).
    """
    parts = []
    for title, df in tables:
        if len(df):
            rows = f"{len(df):,} row" + ("" if len(df) == 1 else "s")
            parts.append(
                f"<details><summary><b>{html.escape(title)}</b> ({rows})</summary>"
                + df.to_html(index=False, escape=True, na_rep="n/a")
                + "</details>"
            )
    return "\n".join(parts)


def exam_blocks(run_dir: Path) -> list[ExamBlock]:
    """Return the block of every registered exam that gives one (`exam.Exam.block`), in rank order.

    The report shows them after its own blocks, all alike; an exam needs no edit here to get one.

    Raises
    ------
    ValueError
        When a block's anchor is one of the page's own (`PAGE_ANCHORS`), a figure's or another block's.
    """
    taken = set(PAGE_ANCHORS) | {f.stem for f in run_figures()}
    blocks = []
    for name in exam.names():
        block = exam.get(name).block(Path(run_dir))
        if block is None:
            continue
        if block.anchor in taken:
            raise ValueError(f"exam {name!r}: its block's anchor {block.anchor!r} is already an id of the report")
        taken.add(block.anchor)
        blocks.append(block)
    return blocks


#: The ids of report.html's own sections (an exam's block takes another).
PAGE_ANCHORS = frozenset(
    {
        "decision",
        "measured",
        "headline",
        "figures",
        "questions",
        "recorded",
        "inspect",
        "continuation",
        "notebooks",
        "parameters",
    }
)


#: Per-session table as the report shows it: column -> header.
BY_SESSION_VIEW = {"session_id": "session", "strategy_label": "strategy", "retained_of_n": "retained of N (95% CI)"}


def failed_compactions(run_dir: Path) -> list[str]:
    """One sentence per arm whose agent did not compact in some cases, or compacted without a summary, and why.

    It did not compact when its summary call failed (Codex, OpenCode with no tail start written or
    ``on_failure: intent``) or its summary was made and discarded (Aider's pinned race): read from
    ``exam_projections``' ``compaction_failed``, such a projection is the history as it was. It compacted
    without a summary when the call failed and the arm went on (a template, OpenCode's pinned code dropping
    the head): ``summary_failed`` set, ``compaction_failed`` empty. Both are examined and priced as sent.
    """
    proj = runfolder.maybe_table(Path(run_dir), "exam_projections")
    if proj is None or proj.empty or "compaction_failed" not in proj.columns:
        return []

    def reason(column: str) -> pd.Series:
        return proj[column].fillna("").astype(str) if column in proj.columns else pd.Series("", index=proj.index)

    failed, summary_failed = reason("compaction_failed"), reason("summary_failed")
    kinds = (  # (which cases, why, what the sentence says of them)
        (
            failed != "",
            failed,
            "did not compact in {n} — the history went on unchanged, as the agent's pinned code leaves it",
        ),
        (
            (summary_failed != "") & (failed == ""),
            summary_failed,
            "its summary call failed in {n} and it compacted without a summary, as the arm documents",
        ),
    )
    lines = []
    for mask, why, says in kinds:
        for label, g in proj.assign(hit=mask, why=why).groupby("strategy_label", sort=True):
            if g["hit"].any():
                n = f"{int(g['hit'].sum())} of {_plural(len(g), 'case')}"
                whys = "; ".join(dict.fromkeys(g.loc[g["hit"], "why"]))
                lines.append(f"{label}: {says.format(n=n)} ({whys}); those requests are examined and priced as sent.")
    return lines


def power_lines(table: pd.DataFrame | None) -> list[str]:
    """Per reader asked several draws (``exam_power``): which pairs of arms this sample size can tell apart.

    How many pairs differ by at least their minimum detectable difference at 80% power, and for the pair
    with the largest difference, whether it does and how many questions or draws would resolve it.
    """
    if table is None or table.empty:
        return []
    lines = []
    for label, g in table.groupby("reader_label", sort=False):
        g = g.assign(size=g["difference"].abs())
        top = g.sort_values("size", ascending=False, kind="stable").iloc[0]
        verdict = "is resolvable" if bool(top["resolvable"]) else "is not resolvable"
        needs = []
        if not bool(top["resolvable"]):
            if pd.notna(top["questions_needed"]):
                needs.append(f"about {int(top['questions_needed']):,} questions at these draws")
            if pd.notna(top["draws_needed"]):
                needs.append(f"{int(top['draws_needed'])} draws per question at these questions")
        lines.append(
            f"{label}, {g['draws'].mean():g} draws per question: {int(g['resolvable'].sum())} of {len(g)} pairs of "
            f"arms differ by at least their minimum detectable difference (80% power, two-sided 5%). The largest "
            f"difference, {top['a']} vs {top['b']} ({top['difference']:+.1%} over {int(top['n_questions'])} "
            f"questions; detectable: {top['mdd']:.1%}), {verdict}"
            + (f"; it would take {' or '.join(needs)}." if needs else ".")
            + (f" ({top['note']}.)" if isinstance(top.get("note"), str) and top["note"] else "")
        )
    return lines


def exam_block(run_dir: Path) -> QuestionsBlock | None:
    """Sessions, per-session recall and the question-mix table, from notebook 03's tables (None: it did not run).

    Values only: ``exam_sessions`` (imported sessions: where each was cut, its questions, why none),
    ``exam_by_session`` and ``exam_sensitivity`` (its extra mixes: the pool's natural one for real logs,
    the synthetic 80/10/10 for chains), and the pool's composition (``exam_bank_pool.json``).
    """
    run_dir = Path(run_dir)
    sessions = runfolder.maybe_table(run_dir, exam_cases.SESSIONS_TABLE)
    by_session = runfolder.maybe_table(run_dir, "exam_by_session")
    sens = runfolder.maybe_table(run_dir, "exam_sensitivity")
    if sessions is None and by_session is None:
        return None
    lines: list[str] = []
    sessions = sessions if sessions is not None else pd.DataFrame()
    if len(sessions):
        cut = sessions[sessions["questions"] > 0]
        lines.append(f"{len(sessions)} imported session{'s' if len(sessions) != 1 else ''}: {len(cut)} gave questions.")
        for r in sessions[sessions["questions"] == 0].itertuples():
            lines.append(f"No questions from {r.session_id}: {r.reason}")
    pool_path = run_dir / exam_cases.POOL_FILE
    if pool_path.is_file():
        pool = bounded_json.load_file(pool_path)
        total = sum(int(v) for v in pool.values())
        if total:
            mix = ", ".join(f"{k} {int(v) / total:.0%}" for k, v in pool.items())
            lines.append(
                f"The pool of usable values is {mix} ({total:,} values); questions follow that natural mix "
                "unless probe_pointer_mix says otherwise."
            )
    lines += failed_compactions(run_dir)
    lines += power_lines(runfolder.maybe_table(run_dir, "exam_power"))
    view = pd.DataFrame(columns=list(BY_SESSION_VIEW.values()))
    if by_session is not None and len(by_session):
        b = by_session.copy()
        b["retained_of_n"] = [
            retained_of_n(*row) for row in zip(b["retained"], b["n"], b["ci_low"], b["ci_high"], strict=False)
        ]
        view = b[list(BY_SESSION_VIEW)].rename(columns=BY_SESSION_VIEW)
    mixes = pd.DataFrame()
    if sens is not None and len(sens):
        named = sens[sens["default"].astype(bool)] if "default" in sens.columns else sens.iloc[0:0]
        if len(named):
            label = named["mix_label"] if "mix_label" in named.columns else pd.Series("default mix", index=named.index)
            mixes = pd.DataFrame(
                {
                    "mix": label.astype(str),
                    "assistant / user / tool": [
                        f"{a:.0%} / {u:.0%} / {t:.0%}"
                        for a, u, t in zip(named["w_assistant"], named["w_user"], named["w_tool"], strict=False)
                    ],
                    "strategy": named["strategy_label"].astype(str),
                    "recall": named["recall"].map(lambda v: f"{v:.0%}" if pd.notna(v) else "n/a"),
                }
            )
    cols = [c for c in ("session_id", "tokens", "would_compact", "cut", "questions", "reason") if c in sessions]
    return QuestionsBlock(tuple(lines), sessions[cols] if len(sessions) else sessions, view, mixes)


#: The readers table as the report shows it: column -> header.
READERS_VIEW: dict[str, str] = {
    "reader_label": "reader",
    "source": "answers from",
    "strategy_label": "strategy",
    "of": "right draws of questions × draws",
    "recall_ci": "recall [95% interval]",
    "consistent": "questions whose draws agree",
}


@dataclass(frozen=True)
class InspectBlock:
    """The report's block on models run through Inspect AI (``compaction-lab import-inspect``).

    Attributes
    ----------
    lines : tuple of str
        Per imported model: its answers, the task, questions x arms x draws, the logs they came from.
    readers : DataFrame
        `READERS_VIEW` of `exam.imported.readers_table`: every reader, the suite's and Inspect's.
    """

    lines: tuple[str, ...]
    readers: pd.DataFrame

    def html(self) -> str:
        """Render the readers table as HTML (escaped)."""
        return self.readers.to_html(index=False, escape=True, na_rep=NOT_MEASURED)


def inspect_block(run_dir: Path) -> InspectBlock | None:
    """Models whose answers were imported from Inspect AI logs, beside the suite's readers (None: none imported)."""
    lines = imported.imported_lines(run_dir)
    if not lines:
        return None
    table = imported.readers_table(run_dir)
    view = table.assign(
        of=[
            f"{k:.0f} of {n:.0f} × {d:g}"
            for k, n, d in zip(table["correct"], table["n_questions"], table["draws"], strict=True)
        ],
        recall_ci=[
            f"{r:.1%} [{lo:.1%}, {hi:.1%}]"
            for r, lo, hi in zip(table["recall"], table["ci_low"], table["ci_high"], strict=True)
        ],
        consistent=table["consistent"].map(lambda v: f"{v:.0%}"),
    )[list(READERS_VIEW)].rename(columns=READERS_VIEW)
    return InspectBlock(tuple(lines), view)


def lead_figures() -> frozenset[str]:
    """Stems of the figures that open the page (registered ``lead``: the decision's) rather than join the gallery."""
    return frozenset(f.stem for f in run_figures() if f.lead)


def figures(run_dir: Path) -> list[Figure]:
    """Every figure the run saved, in the registry's order (`run_figures`), then any others by name."""
    d = Path(run_dir) / runfolder.FIGURES
    registered = [(f.stem, f.caption()) for f in run_figures()]
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


#: How a figure that measured nothing says so under its title (`figures._common.no_data`), as its SVG writes it.
NOT_MEASURED_SVG = ">not measured</text>"


def measured_figure(fig: Figure) -> bool:
    """Tell whether a figure drew something: False for the chart that says why nothing was measured (`no_data`).

    Read once per file version (path, size, mtime): a page orders, then lists, each figure by it.
    """
    if fig.svg is None:
        return True
    st = fig.svg.stat()
    return _svg_measured(str(fig.svg), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _svg_measured(path: str, size: int, mtime_ns: int) -> bool:
    return NOT_MEASURED_SVG not in Path(path).read_text(encoding="utf-8", errors="replace")


def _inline_svg(path: Path) -> str:
    # Drop the XML prolog / doctype so the SVG can sit inside an HTML page.
    text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def page_order(figs: list[Figure]) -> list[tuple[int, Figure]]:
    """Give a run's figures the numbers its page shows: the lead figure, those that drew something, the rest.

    The numbers count down the page (1, 2, 3, …) whatever the run measured; a figure that measured nothing
    (`measured_figure`) keeps its number in the one collapsed line at the end.
    """
    leads = lead_figures()
    order = sorted(figs, key=lambda f: (f.stem not in leads, not measured_figure(f)))
    return list(enumerate(order, start=1))


def figure_html(fig: Figure, links: bool = True, number: int | None = None) -> str:
    """Render a ``<figure>`` with the SVG inlined (no script, no network) and links to the other formats.

    `number`: the figure's number on its page (`page_order`), put before its title in the caption.
    """
    body = _inline_svg(fig.svg) if fig.svg else (f'<img src="{_href(fig.png.name)}">' if fig.png else "")
    files = [p for p in (fig.png, fig.svg, fig.html) if p is not None]
    link = " · ".join(
        f'<a href="{_href(f"{runfolder.FIGURES}/{p.name}")}">{html.escape(p.suffix[1:].upper())}</a>' for p in files
    )
    cap = html.escape(fig.numbered(number)) + (f" <small>({link})</small>" if links and link else "")
    return f'<figure class="cl-figure" id="{html.escape(fig.stem)}">{body}<figcaption>{cap}</figcaption></figure>'


def _href(relative: str) -> str:
    # Percent-encoded (a name is a path, never a scheme such as javascript:), then escaped for the attribute.
    return html.escape(urllib.parse.quote(relative))


def gallery(run_dir: Path):
    """Show the run's figures as one HTML block (for a notebook cell)."""
    from IPython.display import HTML

    return HTML("\n".join(figure_html(f, links=False, number=n) for n, f in page_order(figures(run_dir))))


def run_facts(run_dir: Path) -> pd.DataFrame:
    """Tabulate the run's profile, parameters and package versions from ``run.json``, one row each."""
    path = Path(run_dir) / runfolder.RUN_JSON
    if not path.exists():
        return pd.DataFrame(
            {"what": ["run.json"], "value": ["missing: this folder was not made by compaction-lab run"]}
        )
    info: Mapping[str, Any] = bounded_json.load_file(path)
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
