"""The decision a report opens with: which strategy, at what cost, and how sure that is.

For the run's window and price table, only the arms that may be ranked (`share.ranked`: they compacted
and their next request fits W − O) are weighed, on recall (the closed book and needed-next, each with
its 95% interval) against the cost of one compaction + T turns. `decide` names the Pareto set (no other
arm recalls at least as much on every exam for no more money, and more on one or for less), says for
every pair of it whether the intervals separate them ("the data cannot tell A from B"), and what would
change the answer: more sessions (`exam.statistics.power.pair_power` with a session as the unit: how many would
separate a pair at 80% power), a model reader or summariser where the run used an offline stand-in,
another window.

Offline (every summary the extractive stand-in's) recall is scope recall, what an arm keeps by design,
as the headline's ranking sentence does (`share.ranking_mode`); with a model summariser the total.

Design: docs/report.md (the decision section); words in docs/glossary.md ("ranked", "Pareto set").
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import runfolder
from compaction_lab.exam import found
from compaction_lab.exam.statistics import power
from compaction_lab.report import share
from compaction_lab.report.figures.decision import PANELS


@dataclass(frozen=True)
class Measure:
    """One recall the decision weighs, as headline columns ``<prefix><part><kind>``.

    Attributes
    ----------
    key : str
        ``closed`` or ``needed_next``.
    name : str
        How sentences name it.
    prefix : str
        The headline's column prefix (``""`` or ``"needed_next_"``).
    part : str
        ``""`` (total recall) or ``"scope_"`` (kept by design).
    """

    key: str
    name: str
    prefix: str
    part: str

    def col(self, kind: str) -> str:
        """Name the headline column of `kind` (``retained``, ``recall``, ``ci_low``, ``ci_high``)."""
        return f"{self.prefix}{self.part}{kind}"

    @property
    def n(self) -> str:
        """The headline column of the number of questions."""
        return f"{self.prefix}n"


#: How the two exams are named in sentences, as the chart names its panels.
CLOSED, NEEDED_NEXT = PANELS["closed"], PANELS["needed_next"]


def measures(mode: str) -> tuple[Measure, ...]:
    """Return the two recalls weighed under ranking `mode` (`share.ranking_mode`): scope recall offline, else the total."""
    part = "scope_" if mode == "scope" else ""
    return Measure("closed", CLOSED, "", part), Measure("needed_next", NEEDED_NEXT, "needed_next_", part)


@dataclass(frozen=True)
class Decision:
    """What a run lets a reader decide, as values and sentences (`decide`).

    Attributes
    ----------
    setting : str
        The window, output ceiling, price table and T the decision holds for.
    recall : str
        Which recall is weighed (scope recall offline, else total recall).
    currency, turns : str, int or None
        The cost's currency and T (cost = one compaction + T turns); "" and None when not priced.
    weighed_strategies : DataFrame
        One row per arm weighed: ``strategy``, ``strategy_label``, ``cost`` (one compaction + T turns, or
        NaN where not priced), per measure ``<key>_recall`` / ``_low`` / ``_high`` / ``_of_n``, and
        ``pareto``.
    verdict : str
        The Pareto set named, or that no arm is separable, or that nothing could be weighed.
    pairs : tuple of str
        Per pair of the Pareto set: which exam the intervals separate them on, which they cannot.
    changes : tuple of str
        What would change the answer, with numbers.
    left_out : tuple of str
        The arms not weighed and why (not sendable, did not compact, not measured).
    basis : str
        What the decision rests on (sessions, questions, reader, summaries, cost source).
    seed : str
        The seed report's own arms introduced (`share.seed_line`): the page names them here first.
    """

    setting: str
    recall: str
    currency: str
    turns: int | None
    weighed_strategies: pd.DataFrame
    verdict: str
    pairs: tuple[str, ...]
    changes: tuple[str, ...]
    left_out: tuple[str, ...]
    basis: str
    seed: str = ""

    @property
    def pareto(self) -> list[str]:
        """The strategies of the Pareto set, best closed-book recall first."""
        if self.weighed_strategies.empty:
            return []
        return self.weighed_strategies.loc[self.weighed_strategies["pareto"], "strategy"].astype(str).tolist()

    def lines(self) -> list[str]:
        """Return the section as plain sentences, in reading order (a notebook prints these)."""
        lines = [self.seed, self.verdict, self.setting, *self.pairs, *self.left_out, *self.changes, self.basis]
        return [line for line in lines if line]

    def html(self, figure: str = "") -> str:
        """Render the section's body for ``report.html``: the verdict and its `figure` first, then the rest.

        The seed report's arms are introduced before the verdict names them; the setting (window, prices,
        how recall reads) follows the figure, then the pairs and what would change the answer.
        """
        esc = html.escape
        parts = [f"<p>{esc(self.seed)}</p>"] if self.seed else []
        parts.append(f'<p class="verdict"><b>{esc(self.verdict)}</b></p>')
        if figure:
            parts.append(figure)
        if self.setting:
            parts.append(f"<p>{esc(self.setting)}</p>")
        if self.pairs:
            parts.append("<ul>" + "".join(f"<li>{esc(p)}</li>" for p in self.pairs) + "</ul>")
        if self.left_out:
            parts.append("<p>" + " ".join(esc(s) for s in self.left_out) + "</p>")
        if self.changes:
            parts.append(
                "<p><b>What would change the answer</b></p><ul>"
                + "".join(f"<li>{esc(c)}</li>" for c in self.changes)
                + "</ul>"
            )
        if self.basis:
            parts.append(f'<p class="note">{esc(self.basis)}</p>')
        return "\n".join(parts)


def _costs(run_dir: Path, headline: pd.DataFrame) -> pd.DataFrame:
    """One compaction + T turns per arm, under the headline's price table and cache rule (empty: not priced)."""
    cost = runfolder.maybe_table(run_dir, "cost")
    tables = headline["price_table"].dropna() if "price_table" in headline else pd.Series(dtype=object)
    if cost is None or cost.empty or tables.empty or not {"total_cost", "turns"} <= set(cost.columns):
        return pd.DataFrame(columns=["strategy", "cost", "turns"])  # not priced (or a cost table of another age)
    sims = headline["simulator"].dropna()
    view = share.cost_view(cost, str(tables.iloc[0]), str(sims.iloc[0]) if len(sims) else None)
    return view[["strategy", "total_cost", "turns"]].rename(columns={"total_cost": "cost"})


def _of(r: Mapping[str, Any], m: Measure) -> str:
    """``k/n (low–high)`` of row `r` on measure `m`."""
    return share.retained_of_n(r[m.col("retained")], r[m.n], r[m.col("ci_low")], r[m.col("ci_high")])


def pareto(weighed_strategies: pd.DataFrame, recalls: list[str], cost: str | None) -> pd.Series:
    """Tell per arm whether it is in the Pareto set: no other arm as good on every recall and cost, better on one.

    `recalls` are columns where larger is better; `cost` (smaller is better) may be None (not priced).
    Two arms equal on everything are both kept.
    """
    values = weighed_strategies[recalls].to_numpy(float)
    money = weighed_strategies[cost].to_numpy(float) if cost else None
    keep = []
    for i in range(len(weighed_strategies)):
        dominated = False
        for j in range(len(weighed_strategies)):
            if i == j:
                continue
            ge = (values[j] >= values[i]).all() and (money is None or money[j] <= money[i])
            gt = (values[j] > values[i]).any() or (money is not None and money[j] < money[i])
            if ge and gt:
                dominated = True
                break
        keep.append(not dominated)
    return pd.Series(keep, index=weighed_strategies.index)


def separated(a: Mapping[str, Any], b: Mapping[str, Any], key: str) -> int:
    """+1 when `a`'s interval on measure `key` lies above `b`'s, -1 below, 0 when they overlap."""
    if a[f"{key}_low"] > b[f"{key}_high"]:
        return 1
    if b[f"{key}_low"] > a[f"{key}_high"]:
        return -1
    return 0


def _pair_sentence(a: Mapping[str, Any], b: Mapping[str, Any], ms: tuple[Measure, ...], currency: str) -> str:
    """One pair of the Pareto set: the exams its intervals separate it on, those they cannot, the cost gap."""
    name_a, name_b = str(a["strategy"]), str(b["strategy"])
    apart, tied = [], []
    for m in ms:
        side = separated(a, b, m.key)
        if side:
            win, lose = (a, b) if side > 0 else (b, a)
            apart.append(
                f"on {m.name} {win['strategy']} recalls more, {win[f'{m.key}_of_n']} vs {lose[f'{m.key}_of_n']} "
                "(intervals apart)"
            )
        else:
            tied.append(f"{m.name} {a[f'{m.key}_of_n']} vs {b[f'{m.key}_of_n']}")
    if not apart:
        text = f"The data cannot tell {name_a} from {name_b}: their 95% intervals overlap on {'; '.join(tied)}"
    else:
        text = f"{name_a} vs {name_b}: " + "; ".join(apart)
        text += f"; the data cannot tell them apart on {'; '.join(tied)}" if tied else ""
    if pd.notna(a["cost"]) and pd.notna(b["cost"]) and a["cost"] != b["cost"]:
        cheap, dear = (a, b) if a["cost"] < b["cost"] else (b, a)
        text += f". {cheap['strategy']} costs {share.money(dear['cost'] - cheap['cost'], currency)} less"
    return text + "."


def _power_lines(
    run_dir: Path, weighed_strategies: pd.DataFrame, ms: tuple[Measure, ...], headline: pd.DataFrame, limit: int = 3
) -> list[str]:
    """Say, for pairs of the Pareto set the intervals cannot separate, how many sessions (and questions) would.

    Sessions are the unit the intervals resample, so the count that matters is sessions: `power.pair_power`
    with each session as the unit (its recall per arm). Beside it, the count were questions independent.
    The `limit` pairs closest to being separated are said.
    """
    front = weighed_strategies[weighed_strategies["pareto"]]
    found_rows = {
        "closed": _answer_rows(runfolder.maybe_table(run_dir, "exam_closed"), headline, "reader_label"),
        "needed_next": _answer_rows(
            runfolder.maybe_table(run_dir, share.CONTINUATION_TARGETS),
            headline,
            "needed_next_reader_label",
        ),
    }
    out: list[tuple[float, str]] = []
    for (_, a), (_, b) in combinations(front.iterrows(), 2):
        for m in ms:
            rows = found_rows[m.key]
            if separated(a, b, m.key) or rows is None:
                continue
            if m.part:  # scope recall: a right answer counts only where the value is kept by design
                rows = rows.assign(correct=rows["correct"].astype(bool) & rows["found_in"].isin(found.SCOPE_FOUND))
            said = _power_sentence(rows, str(a["strategy"]), str(b["strategy"]), m.name)
            if said:
                out.append(said)
    out.sort(key=lambda t: t[0])
    return [s for _, s in out[:limit]]


def _power_sentence(rows: pd.DataFrame, a: str, b: str, exam: str) -> tuple[float, str] | None:
    """How many sessions (the intervals' unit) and independent questions would separate arms `a` and `b`."""
    try:
        q = power.pair_power(rows, a, b)
    except ValueError:
        return None
    if q.difference == 0 or q.questions_needed is None:
        return math.inf, (
            f"{a} and {b} scored the same on the {q.n_questions} {exam} questions both were asked: more of the "
            "same questions cannot separate them."
        )
    independent = f"were questions independent, about {q.questions_needed:,} would (this run asked {q.n_questions})"
    sessions = rows["session_id"].nunique() if "session_id" in rows.columns else 0
    unit = power.pair_power(rows, a, b, question=("session_id",)) if sessions >= 2 else None
    if unit is None or unit.questions_needed is None or math.isnan(unit.difference):
        return float(q.questions_needed), (
            f"{a} vs {b} on {exam} ({q.difference:+.1%}): {'one session' if sessions < 2 else 'these sessions'} "
            f"cannot say how sessions vary, and sessions are what the intervals resample: only more sessions can "
            f"separate them; {independent}."
        )
    if unit.questions_needed <= unit.n_questions:
        # The normal approximation says these sessions suffice, yet the intervals (which resample them) overlap:
        # with this few sessions the approximation is the less cautious of the two.
        return float(unit.questions_needed), (
            f"{a} vs {b} on {exam} ({q.difference:+.1%}): a normal approximation says this run's "
            f"{unit.n_questions} sessions would do, yet the 95% intervals, which resample those sessions, overlap; "
            f"with so few sessions trust the intervals: more sessions would separate them; {independent}."
        )
    return float(unit.questions_needed), (
        f"About {unit.questions_needed:,} sessions would tell {a} from {b} on {exam} at 80% power (two-sided 5%) "
        f"if their difference ({q.difference:+.1%}) held and sessions varied as this run's {unit.n_questions} do "
        f"(sessions are what the intervals resample); {independent}."
    )


def _answer_rows(table: pd.DataFrame | None, headline: pd.DataFrame, reader_col: str) -> pd.DataFrame | None:
    """Select the graded rows (the closed book's cuts) of the reader the headline shows.

    None when there are none, or when the headline names a reader the table does not hold (another reader's
    answers would say nothing of its recall).
    """
    if table is None or table.empty or "correct" not in table.columns:
        return None
    table = share.closed_block(table)
    if "found_in" not in table.columns:
        table = table.assign(found_in="verbatim")
    if "decoy" in table.columns:  # a decoy is asked to catch guessing; recall counts the real questions only
        table = table[~table["decoy"].astype("boolean").fillna(False).astype(bool)]
    readers = headline[reader_col].dropna().astype(str) if reader_col in headline else pd.Series(dtype=str)
    if len(readers) and "reader_label" in table.columns:
        table = table[table["reader_label"] == readers.iloc[0]]
    return table if len(table) else None


def _change_lines(h: pd.DataFrame, params: Mapping[str, Any], mode: str, left: list[str]) -> list[str]:
    """Say what else would change the answer: a model reader, a model summariser, another window."""
    lines = []
    reader = str(h["reader_label"].iloc[0]) if len(h) else ""
    if reader.startswith("verbatim"):
        lines.append(
            "A model reader (--set reader=model): recall here is the verbatim reader's retention ceiling, "
            "whether the value is in the next request at all; a model may miss a value that is there."
        )
    if mode == "scope":
        part = pd.to_numeric(h["summary_retained"], errors="coerce")
        top = h.assign(_p=part).dropna(subset=["_p"]).sort_values("_p", ascending=False)
        if len(top) and top["_p"].iloc[0] > 0:
            r = top.iloc[0]
            lines.append(
                "A model summariser (--set summarizer=model): offline the summaries are the extractive "
                f"stand-in's, so the decision weighs only what each arm keeps by design; e.g. "
                f"{int(r['_p'])} of {r['strategy']}'s {int(r['retained'])} right closed-book answers were "
                "found only in the stand-in's summary."
            )
    window = params.get("window")
    if window:
        said = f"at W = {int(window):,}" + (
            f", O = {int(params['output_ceiling']):,}" if params.get("output_ceiling") else ""
        )
        lines.append(
            f"Another window (--sweep window=...): which arms compact and fit depends on it; {said} "
            + (f"{len(left)} of {len(h)} arms were left out." if left else "every arm compacted and fits.")
        )
    return lines


def decide(run_dir: str | Path, headline: pd.DataFrame | None = None) -> Decision:
    """Weigh the run's ranked arms on recall against cost (module docstring).

    Without a headline (no closed-book recall) the decision weighs nothing and says so (`share.NO_HEADLINE`).

    `headline`: the run's headline table (`share.headline_table`); read from the folder when None.
    """
    run_dir = Path(run_dir)
    if headline is None:
        saved = runfolder.maybe_table(run_dir, share.HEADLINE)
        headline = saved if saved is not None else share.headline_table(run_dir)
    if headline.empty:
        return Decision("", "recall", "", None, pd.DataFrame(), share.NO_HEADLINE, (), (), (), "")
    h = headline.copy()
    params = share.run_parameters(run_dir)
    ranked = share.ranked(h)
    weighed = h[ranked]
    mode = share.ranking_mode(weighed)
    ms = tuple(m for m in measures(mode) if m.col("recall") in h.columns)
    # A measure no weighed arm has (notebook 06 did not run) is left out and said so; an arm missing one
    # the others have is not weighed.
    ms = tuple(m for m in ms if pd.to_numeric(weighed[m.col("recall")], errors="coerce").notna().any())
    have = pd.Series(True, index=weighed.index)
    for m in ms:
        have &= pd.to_numeric(weighed[m.col("recall")], errors="coerce").notna()
    left = [
        *(f"{r['strategy']}: not sendable at this window (> W − O)" for _, r in h[h["over_window"]].iterrows()),
        *(
            f"{r['strategy']}: did not compact"
            for _, r in h[~share.compacted(h) & ~h["over_window"].astype(bool)].iterrows()
        ),
        *(f"{r['strategy']}: not measured on every exam" for _, r in weighed[~have].iterrows()),
    ]
    weighed = weighed[have]
    costs = _costs(run_dir, h)
    weighed_strategies = weighed[["strategy", "strategy_label"]].merge(costs, on="strategy", how="left")
    for m in ms:
        src = weighed.reset_index(drop=True)
        weighed_strategies[f"{m.key}_recall"] = pd.to_numeric(src[m.col("recall")], errors="coerce").to_numpy(float)
        weighed_strategies[f"{m.key}_low"] = pd.to_numeric(src[m.col("ci_low")], errors="coerce").to_numpy(float)
        weighed_strategies[f"{m.key}_high"] = pd.to_numeric(src[m.col("ci_high")], errors="coerce").to_numpy(float)
        weighed_strategies[f"{m.key}_of_n"] = [_of(r, m) for _, r in src.iterrows()]
    priced = "cost" in weighed_strategies and weighed_strategies["cost"].notna().all() and len(weighed_strategies) > 0
    recalls = [f"{m.key}_recall" for m in ms]
    weighed_strategies["pareto"] = (
        pareto(weighed_strategies, recalls, "cost" if priced else None)
        if len(weighed_strategies)
        else pd.Series(dtype=bool)
    )
    weighed_strategies = weighed_strategies.sort_values(
        recalls[:1] or ["strategy"], ascending=False, kind="stable"
    ).reset_index(drop=True)
    currency = str(h["currency"].dropna().iloc[0]) if "currency" in h and h["currency"].notna().any() else ""
    turns = int(costs["turns"].dropna().iloc[0]) if len(costs) and costs["turns"].notna().any() else None
    setting = _setting(params, h, turns, priced)
    which = "scope recall" if mode == "scope" else "recall"
    pairs: list[str] = []
    if weighed_strategies.empty:
        verdict = "No arm compacted and fits W − O at this window: there is nothing to decide between."
    elif len(weighed_strategies) == 1:
        verdict = f"Only one arm compacted and fits: {weighed_strategies['strategy'].iloc[0]}."
    elif not any(
        separated(a, b, m.key) for (_, a), (_, b) in combinations(weighed_strategies.iterrows(), 2) for m in ms
    ):
        cheap = weighed_strategies.sort_values("cost").iloc[0] if priced else None
        verdict = (
            f"No arm is separable: the 95% intervals of every pair of the {len(weighed_strategies)} arms weighed overlap on "
            + " and ".join(m.name for m in ms)
            + (
                f"; on recall the data cannot choose, on cost the cheapest is {cheap['strategy']} "
                f"({share.money(cheap['cost'], currency)})."
                if cheap is not None
                else "."
            )
        )
    else:
        front = weighed_strategies[weighed_strategies["pareto"]]
        verdict = (
            f"Pareto set ({which + (' (kept by design)' if mode == 'scope' else '')} on {' and '.join(m.name for m in ms)}"
            + (f" against cost of one compaction + {turns} turns" if priced and turns else "")
            + f"): {', '.join(front['strategy'].astype(str))}. No other arm weighed recalls at least as much "
            "on every exam for no more money."
        )
        pairs = [_pair_sentence(a, b, ms, currency) for (_, a), (_, b) in combinations(front.iterrows(), 2)]
    changes = [
        *(_power_lines(run_dir, weighed_strategies, ms, h) if len(weighed_strategies) > 1 else []),
        *_change_lines(h, params, mode, left),
    ]
    return Decision(
        setting=setting,
        recall=which,
        currency=currency if priced else "",
        turns=turns if priced else None,
        weighed_strategies=weighed_strategies,
        verdict=verdict,
        pairs=tuple(pairs),
        changes=tuple(changes),
        left_out=(f"Not weighed: {'; '.join(left)}.",) if left else (),
        basis=share.basis_line(h),
        seed=share.seed_line(h),
    )


def _setting(params: Mapping[str, Any], h: pd.DataFrame, turns: int | None, priced: bool) -> str:
    """Word the one line that says what the decision holds for."""
    bits = []
    if params.get("window"):
        bits.append(f"window W = {int(params['window']):,}")
    if params.get("output_ceiling"):
        bits.append(f"output ceiling O = {int(params['output_ceiling']):,}")
    if priced:
        first = h.dropna(subset=["price_table"]).iloc[0]
        bits.append(
            f"{first['price_table']} prices in {first['currency']}, {first['simulator']} cache rule, "
            f"cost = one compaction + {turns} turns"
        )
    else:
        bits.append("not priced (no cost of one compaction + T turns for every arm weighed: notebook 04's table)")
    return (
        "For "
        + ", ".join(bits)
        + "; weighed: the arms that compacted and fit (ranked). Recall is shown as right/asked (95% interval)."
    )


__all__ = ["CLOSED", "NEEDED_NEXT", "Decision", "Measure", "decide", "measures", "pareto", "separated"]
