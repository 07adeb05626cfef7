"""Projection anatomy: compact sessions with every strategy and tabulate the segments.

Notebook 02 and ``compaction-lab project`` use these functions; the tables
are what ``projections.parquet`` holds (one row per case x strategy x
segment) and what figures 7 and 8 draw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.strategies.base import CompactionContext
from compaction_lab.strategies.labels import strategy_label

PROJECTION_COLUMNS = [
    "case_id",
    "strategy",
    "strategy_label",
    "algorithm_version",
    "session_id",
    "cut",
    "position",
    "segment_kind",
    "role",
    "record_kind",
    "tokens",
    "entry_ids",
    "label",
]


@dataclass(frozen=True)
class Cut:
    """A session and the point it is compacted at (the exam's `exam.types.Case` adds the questions)."""

    case_id: str
    session: Session
    cut: int


def cases_at_end(sessions: Iterable[Session]) -> list[Cut]:
    """One case per session, compacted at its end (what ``project`` does by default)."""
    return [Cut(f"{s.id}@{len(s.records)}", s, len(s.records)) for s in sessions]


def project_cases(
    cases: Sequence[Cut],
    names: Sequence[str] | None = None,
    ctx: CompactionContext | None = None,
    progress: bool = False,
) -> list[tuple[Cut, Projection]]:
    """Compact every case with every named strategy (default: all registered)."""
    names = list(names or strategies.names())
    ctx = ctx or CompactionContext()
    work = [(c, n) for c in cases for n in names]
    it = work
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(work, desc="projections", unit="projection")
    return [(c, strategies.compact(c.session, n, c.cut, ctx)) for c, n in it]


def projections_table(results: Iterable[tuple[Cut, Projection]]) -> pd.DataFrame:
    """One row per case x strategy x segment (`PROJECTION_COLUMNS`)."""
    rows = []
    for case, p in results:
        label = strategy_label(p)
        for row in p.to_rows(case.case_id):
            row["strategy_label"] = label
            rows.append(row)
    df = pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
    return df.astype({"tokens": "int64", "position": "int64", "cut": "int64"})


def strategy_totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per case x strategy: total tokens, segments, and tokens by segment kind (wide)."""
    wide = table.pivot_table(
        index=["case_id", "strategy_label"], columns="segment_kind", values="tokens", aggfunc="sum", fill_value=0
    )
    wide.insert(0, "tokens", wide.sum(axis=1))
    wide.insert(1, "segments", table.groupby(["case_id", "strategy_label"]).size())
    return wide.reset_index()


def mean_tokens_by_strategy(table: pd.DataFrame) -> pd.DataFrame:
    """Mean projection size per strategy over cases, with min and max."""
    per = table.groupby(["case_id", "strategy_label"])["tokens"].sum().reset_index()
    out = per.groupby("strategy_label")["tokens"].agg(["mean", "min", "max", "count"]).reset_index()
    order = {n: i for i, n in enumerate(strategies.names())}
    out["_o"] = out["strategy_label"].map(lambda s: order.get(s.split(" ")[0], 99))
    return out.sort_values(["_o", "strategy_label"]).drop(columns="_o").reset_index(drop=True)


def budgets_table(ctx: CompactionContext, session: Session, projection: Projection | None = None) -> pd.DataFrame:
    """FutureOS budgets for this context and session's call shape (figure 8, bottom).

    With a FutureOS `projection`, the tokens it actually used per part are shown beside each budget.
    """
    from compaction_lab.core.tokens import counter
    from compaction_lab.strategies import trigger

    shape = ctx.shape.for_session(session)
    tok = counter(ctx.encoding)
    summary = (
        int(ctx.param("summary_tokens", trigger.SUMMARY_TOKENS))
        if projection is None or projection.strategy == "futureos-summarized"
        else 0
    )
    b = trigger.futureos_budgets(
        trigger.futureos_trigger(ctx.window, ctx.output_ceiling),
        tok.count(shape.system_prompt),
        tok.count(shape.tools_text()),
        tail=int(ctx.param("tail_tokens", trigger.TAIL_TOKENS)),
        evidence=int(ctx.param("evidence_tokens", trigger.EVIDENCE_TOKENS)),
        summary=summary,
        history_target=int(ctx.param("history_target", trigger.HISTORY_TARGET)),
        history_max=int(ctx.param("history_max", trigger.HISTORY_MAX)),
    )
    used: dict[str, int] | None = None
    room = (projection.notes.get("budgets") or {}).get("history") if projection is not None else None
    if isinstance(room, int) and not isinstance(room, bool):
        # The projection's own history room: raised above the target when that kept assistant originals.
        b = dataclasses.replace(b, history=room)
    if projection is not None:
        part_of = {
            "system": "system",
            "tools": "tools",
            "evidence_index": "evidence",
            "summary": "summary",
            "tail": "tail",
            "user_original": "history",
            "assistant_original": "history",
            "omitted_marker": "history",
            "header": "history",
        }
        used = {}
        for s in projection.segments:
            part = part_of.get(s.kind)
            if part:
                used[part] = used.get(part, 0) + s.tokens
    return trigger.budget_table(b, used)
