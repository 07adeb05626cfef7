"""Rediscovery: what the agents' own compactions cost them, read from their logs (no model needed).

For every compaction an imported log records (`strategies.recorded.find`: pi, Claude Code, Codex,
OpenCode), this module lists the tool calls the agent made *after* it that repeat a call it had made
*before* it (same tool, identical canonical arguments): the agent lost what it had looked up and looked
it up again. Per repeat: ``earlier_output_kept``, ``target_in_summary``, ``repeat_output_tokens`` and
``repeat_cost`` (priced once as uncached input; NA without a price table). Nothing is predicted and no
model is asked; every number is read off the log.

Design: docs/exams.md#8a-continuation-notebook-07 (the "Rediscovery after real compactions" paragraphs)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from compaction_lab import strategies
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.endpoints.prices import PriceTable, load_price_table, price
from compaction_lab.exam.calls import agent_calls, call_key
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.recorded import VERBATIM_KINDS
from compaction_lab.exam.targets import forms
from compaction_lab.strategies import recorded as rec
from compaction_lab.strategies.base import CompactionContext

#: How a repeat's output tokens are priced (the ``priced_as`` column when a price table is given).
PRICED_AS = "uncached input, once (off-peak)"

#: One row per recorded compaction x repeated call (`rediscovery_table`).
REDISCOVERY_COLUMNS: list[str] = [
    "session_id",
    "agent",
    "model",
    "compaction",
    "compaction_entry_id",
    "cut",
    "after",
    "until",
    "repeat_source_order",
    "repeat_entry_id",
    "tool",
    "arguments",
    "target",
    "earlier_source_order",
    "earlier_entry_id",
    "earlier_output_source_order",
    "earlier_output_kept",
    "target_in_summary",
    "repeat_output_tokens",
    "price_table",
    "currency",
    "priced_as",
    "repeat_cost",
]

#: One row per usable recorded compaction, also those the agent repeated nothing after (`compactions_table`).
COMPACTION_COLUMNS: list[str] = [
    "session_id",
    "agent",
    "model",
    "compaction",
    "compaction_entry_id",
    "cut",
    "after",
    "until",
    "calls_after",
    "repeats",
    "repeats_kept",
    "repeats_target_in_summary",
    "repeat_output_tokens",
    "price_table",
    "currency",
    "priced_as",
    "repeat_cost",
]

_SEP = "\n\x00\n"  # joins summary texts so that no target straddles two


@dataclass(frozen=True)
class Rediscovery:
    """Both tables of one pass over the sessions.

    Attributes
    ----------
    repeats : DataFrame
        One row per recorded compaction x repeated call (`REDISCOVERY_COLUMNS`).
    compactions : DataFrame
        One row per usable recorded compaction (`COMPACTION_COLUMNS`).
    """

    repeats: pd.DataFrame
    compactions: pd.DataFrame


class _Outputs:
    """Finds a call's output records in one session: by ``call_id``, else the next unlinked output."""

    def __init__(self, session: Session) -> None:
        self.records = session.records
        self.position = {r.source_order: i for i, r in enumerate(session.records)}
        self.by_call: dict[str, list[Record]] = {}
        for r in session.records:
            if r.kind == "tool_output" and r.call_id:
                self.by_call.setdefault(r.call_id, []).append(r)

    def of(self, call: Record) -> list[Record]:
        linked = [r for r in self.by_call.get(call.call_id or "", ()) if r.source_order > call.source_order]
        if linked:
            return linked
        for r in self.records[self.position[call.source_order] + 1 :]:
            # an output linked to another call answers that call, not this one
            if r.kind == "tool_output" and (not r.call_id or r.call_id == call.call_id):
                return [r]
        return []


def outputs_of(session: Session, call: Record) -> list[Record]:
    """Return the ``tool_output`` records answering `call`.

    Those linked to it by ``call_id`` (after it); else the first ``tool_output`` after it that is linked
    to no other call; else none (the log holds no output for it).
    """
    return _Outputs(session).of(call)


def _cwd(session: Session) -> str | None:
    cwd = session.metadata.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _price_of(price_table: str | PriceTable | None) -> PriceTable | None:
    if price_table is None or price_table == "":
        return None
    return price_table if isinstance(price_table, PriceTable) else load_price_table(price_table)


def _cost(tokens: Any, table: PriceTable | None) -> Any:
    if table is None or tokens is pd.NA:
        return pd.NA
    return price(table, input_tokens=int(tokens), cached_tokens=0, output_tokens=0)


def _compaction_rows(
    session: Session,
    rc: rec.RecordedCompaction,
    until: int,
    calls: Sequence[Record],
    outputs: _Outputs,
    ctx: CompactionContext,
    table: PriceTable | None,
    encoding: str,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the repeat rows of one compaction and its row in the per-compaction table."""
    cnt = counter(encoding)
    nxt = strategies.compact(session, "recorded", rc.cut, ctx)  # the agent's own next request, from its log
    kept = {e for seg in nxt.segments if seg.kind in VERBATIM_KINDS for e in seg.entry_ids}
    readable = [seg.text for seg in nxt.segments if seg.kind == "summary" and not seg.opaque]
    opaque = any(seg.opaque for seg in nxt.segments if seg.kind == "summary")
    summary = normalise(_SEP.join(readable))
    cwd = _cwd(session)
    latest: dict[tuple[str, str], Record] = {}
    for c in calls:
        if c.source_order < rc.cut:
            latest[call_key(c)] = c  # calls are in order: the last one written wins
    window = [c for c in calls if rc.after <= c.source_order < until]
    base = {
        "session_id": session.id,
        "agent": rc.agent,
        "model": rc.model or rec.UNKNOWN_MODEL,
        "compaction": rc.index,
        "compaction_entry_id": rc.entry_id,
        "cut": rc.cut,
        "after": rc.after,
        "until": until,
    }
    money = {
        "price_table": table.name if table else pd.NA,
        "currency": table.currency if table else pd.NA,
        "priced_as": PRICED_AS if table else pd.NA,
    }
    rows = []
    for c in window:
        key = call_key(c)
        earlier = latest.get(key)
        if earlier is None:
            continue
        before_out = outputs.of(earlier)
        own_out = outputs.of(c)
        tokens: Any = sum(cnt.count_many([r.text for r in own_out])) if own_out else pd.NA
        target = c.target or ""
        if not target:
            in_summary: Any = False
        elif not readable and opaque:
            in_summary = pd.NA  # an encrypted summary: nothing is claimed about what it holds
        else:
            in_summary = any(
                f in summary for f in forms(target, cwd, path="/" in target and not any(c.isspace() for c in target))
            )
        rows.append(
            {
                **base,
                "repeat_source_order": c.source_order,
                "repeat_entry_id": c.entry_id,
                "tool": key[0],
                "arguments": key[1],
                "target": target,
                "earlier_source_order": earlier.source_order,
                "earlier_entry_id": earlier.entry_id,
                "earlier_output_source_order": before_out[0].source_order if before_out else pd.NA,
                "earlier_output_kept": all(r.entry_id in kept for r in before_out) if before_out else pd.NA,
                "target_in_summary": in_summary,
                "repeat_output_tokens": tokens,
                **money,
                "repeat_cost": _cost(tokens, table),
            }
        )
    known = [r["repeat_output_tokens"] for r in rows if r["repeat_output_tokens"] is not pd.NA]
    total = sum(known)
    summary_row = {
        **base,
        "calls_after": len(window),
        "repeats": len(rows),
        "repeats_kept": sum(1 for r in rows if r["earlier_output_kept"] is True),
        "repeats_target_in_summary": sum(1 for r in rows if r["target_in_summary"] is True),
        "repeat_output_tokens": total,
        **money,
        "repeat_cost": _cost(total, table),
    }
    return rows, summary_row


def rediscovery(
    sessions: Iterable[Session],
    *,
    price_table: str | PriceTable | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    ctx: CompactionContext | None = None,
) -> Rediscovery:
    """Measure every recorded compaction of `sessions` once: the repeats after it, and a row per compaction.

    Parameters
    ----------
    sessions : iterable of Session
        Imported sessions; those of formats that record no compaction give no row.
    price_table : str, PriceTable or None
        The run's price table (a name in ``data/prices`` or a YAML path, `endpoints.prices.load_price_table`).
        None or ``""``: no money, ``repeat_cost`` is NA.
    encoding : str
        Report tokenizer for the output tokens (`core.tokens`).
    progress : bool
        Show a progress bar over the sessions.
    ctx : CompactionContext, optional
        How the agent's next request is projected (`strategies.recorded`); default: the defaults with
        `encoding`. Output tokens are counted with `encoding` either way.

    Returns
    -------
    Rediscovery
        ``repeats`` (`REDISCOVERY_COLUMNS`) and ``compactions`` (`COMPACTION_COLUMNS`), each ordered by
        session id, compaction and the repeat's position.
    """
    table = _price_of(price_table)
    ctx = ctx or CompactionContext(encoding=encoding)
    session_list = sorted(sessions, key=lambda s: s.id)
    it: Iterable[Session] = session_list
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(session_list, desc="rediscovery", unit="session")
    repeats: list[dict[str, Any]] = []
    per_compaction: list[dict[str, Any]] = []
    for s in it:
        found, _ = rec.find(s)  # unusable compactions are the recorded exam's skips, not ours
        if not found:
            continue
        calls = agent_calls(s)
        outputs = _Outputs(s)
        for k, rc in enumerate(found):
            until = found[k + 1].cut if k + 1 < len(found) else s.end
            rows, row = _compaction_rows(s, rc, until, calls, outputs, ctx, table, encoding)
            repeats += rows
            per_compaction.append(row)
    return Rediscovery(_frame(repeats, REDISCOVERY_COLUMNS), _frame(per_compaction, COMPACTION_COLUMNS))


_DTYPES: Mapping[str, str] = {
    "compaction": "int64",
    "cut": "int64",
    "after": "int64",
    "until": "int64",
    "repeat_source_order": "int64",
    "earlier_source_order": "int64",
    "earlier_output_source_order": "Int64",
    "earlier_output_kept": "boolean",
    "target_in_summary": "boolean",
    "repeat_output_tokens": "Int64",
    "calls_after": "int64",
    "repeats": "int64",
    "repeats_kept": "int64",
    "repeats_target_in_summary": "int64",
    "repeat_cost": "Float64",
    "price_table": "string",
    "currency": "string",
    "priced_as": "string",
}


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    df = df.astype({c: t for c, t in _DTYPES.items() if c in df.columns})
    order = [c for c in ("session_id", "compaction", "repeat_source_order") if c in df.columns]
    return df.sort_values(order, kind="stable").reset_index(drop=True)


def rediscovery_table(
    sessions: Iterable[Session],
    *,
    price_table: str | PriceTable | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    ctx: CompactionContext | None = None,
) -> pd.DataFrame:
    """One row per recorded compaction x call after it that repeats a call made before it (`REDISCOVERY_COLUMNS`).

    See docs/exams.md#8a-continuation-notebook-07 for the window, the repeat, the earlier output and the money (the repeat's
    output tokens priced once as uncached input; NA without a price table). Arguments as `rediscovery`.
    """
    return rediscovery(sessions, price_table=price_table, encoding=encoding, progress=progress, ctx=ctx).repeats


def compactions_table(
    sessions: Iterable[Session],
    *,
    price_table: str | PriceTable | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    ctx: CompactionContext | None = None,
) -> pd.DataFrame:
    """One row per usable recorded compaction, those with no repeat included (`COMPACTION_COLUMNS`).

    ``calls_after`` counts the agent's calls in the window, ``repeats`` those that repeat an earlier call,
    ``repeats_kept`` those whose earlier output the agent kept verbatim, ``repeats_target_in_summary``
    those whose target its summary mentions; ``repeat_output_tokens`` and ``repeat_cost`` are the sums over
    the repeats whose output the log holds. Arguments as `rediscovery`.
    """
    return rediscovery(sessions, price_table=price_table, encoding=encoding, progress=progress, ctx=ctx).compactions


__all__ = [
    "COMPACTION_COLUMNS",
    "PRICED_AS",
    "REDISCOVERY_COLUMNS",
    "Rediscovery",
    "compactions_table",
    "outputs_of",
    "rediscovery",
    "rediscovery_table",
]
