"""``recorded``: what an agent itself sent after a compaction it made, read from its log.

Not a reimplementation, so nothing upstream to pin: the projection is the agent's own next request,
rebuilt by the agent arm's own ``live_history`` (pi, Claude Code, Codex, OpenCode). Registered but
not listed (``listed=False``): it exists only at the compactions a log records.

Key names: `find` (the session's compactions as `RecordedCompaction`: ``cut``, ``after``,
``model``), `skip_reason`, `Recorded` (the strategy), `agent_of`.

Design: docs/strategies.md#recorded; what is read from each log:
docs/strategies.md#recorded-what-is-read-from-each-log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction_lab.core.projection import Projection, Segment
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import counter
from compaction_lab.ingest.registry import agent_of_format
from compaction_lab.strategies.base import STRATEGIES, CompactionContext, projection, role_of

ALGORITHM_VERSION = "recorded-1"

#: Shown where the log names no model.
UNKNOWN_MODEL = "model not in log"


class NoRecordedCompaction(ValueError):
    """The session holds no recorded compaction at the requested cut."""


@dataclass(frozen=True)
class RecordedCompaction:
    """One compaction an agent made, as its log records it.

    Attributes
    ----------
    session_id, agent : str
        The session and the agent that wrote it (``pi``, ``claude-code``, ``codex``, ``opencode``).
    model : str or None
        The model in use when it compacted, from the log.
    index : int
        Its position among the session's compactions (0 = first).
    entry_id : str
        The log entry of the compaction.
    cut : int
        Records with ``source_order < cut`` are what it compacted.
    after : int
        One past its summary's last record: the live history there is the agent's next request.
    summary_entry_ids : tuple of str
        Entries holding the recorded summary.
    """

    session_id: str
    agent: str
    model: str | None
    index: int
    entry_id: str
    cut: int
    after: int
    summary_entry_ids: tuple[str, ...]

    @property
    def tag(self) -> str:
        """What the label adds after ``recorded``: the agent and the model."""
        return f"{self.agent}, {self.model or UNKNOWN_MODEL}"

    @property
    def label(self) -> str:
        """``recorded (<agent>, <model from the log>)``."""
        return f"recorded ({self.tag})"


def agent_of(session: Session) -> str | None:
    """Name the agent whose compactions this session's format records (None: the format records none)."""
    agent = agent_of_format(session.source_format)
    return agent if agent in _RENDER else None


def _summary_span(session: Session, start: int) -> tuple[int, tuple[str, ...]] | None:
    """From the record at `start`: one past the recorded summary's last record, and its entries.

    The summary is the first ``summary`` record at or after `start`, reached
    only through bookkeeping (``meta``) records; the records of the same entry
    that follow it belong to it too.
    """
    recs = session.records
    i = start
    while i < len(recs) and recs[i].kind == "meta":
        i += 1
    if i >= len(recs) or recs[i].kind != "summary":
        return None
    entries = [recs[i].entry_id]
    j = i + 1
    while j < len(recs) and (recs[j].kind == "summary" or (recs[j].entry_id == recs[i].entry_id)):
        if recs[j].entry_id not in entries:
            entries.append(recs[j].entry_id)
        j += 1
    return recs[j - 1].source_order + 1, tuple(entries)


def find(session: Session) -> tuple[list[RecordedCompaction], list[str]]:
    """Find the session's recorded compactions, and a reason for each listed one that could not be used.

    A listed compaction is unusable when its position is missing or outside
    the session, or when no recorded summary follows it (a compaction that
    failed, or a log cut short): each gives a line in the second list.
    """
    agent = agent_of(session)
    if agent is None:
        return [], []
    found: list[RecordedCompaction] = []
    problems: list[str] = []
    orders = {r.source_order: i for i, r in enumerate(session.records)}
    for k, c in enumerate(session.metadata.get("compactions") or ()):
        if not isinstance(c, Mapping) or not isinstance(c.get("source_order"), int) or c["source_order"] not in orders:
            problems.append(f"compaction {k + 1}: its position in the session is not recorded")
            continue
        span = _summary_span(session, orders[c["source_order"]])
        if span is None:
            problems.append(f"compaction {k + 1} (entry {c.get('entry_id')}): no recorded summary follows it")
            continue
        after, entries = span
        model = c.get("model") if isinstance(c.get("model"), str) and c.get("model") else None
        found.append(
            RecordedCompaction(
                session.id, agent, model, len(found), str(c.get("entry_id")), int(c["source_order"]), after, entries
            )
        )
    return found, problems


def skip_reason(session: Session) -> str | None:
    """Why this session gives no recorded case (None: it has at least one usable compaction)."""
    agent = agent_of(session)
    if agent is None:
        return f"its format ({session.source_format}) records no compactions"
    found, problems = find(session)
    if found:
        return None
    if problems:
        return "; ".join(problems)
    return f"no compaction in its {agent} log"


# --------------------------------------------------------------------------- the agent's next request


def _summary_segment(text: str, role: str, entries: Sequence[str], rc: RecordedCompaction) -> Segment:
    return Segment("summary", role, text, tuple(entries), label=f"recorded summary ({rc.tag})")


def _record_segment(r: Record) -> Segment:
    return Segment("tail", role_of(r), r.text, (r.entry_id,), record_kind=r.kind)


def _pi(session: Session, rc: RecordedCompaction, ctx: CompactionContext) -> list[Segment]:
    from compaction_lab.strategies.arms import pi

    compactions = {str(c.get("entry_id")) for c in session.metadata.get("compactions") or () if isinstance(c, Mapping)}
    out = []
    for r in pi.live_history(session, rc.after, ctx):
        if r.kind == "summary" and r.entry_id in compactions:
            # convertToLlm: the compaction summary as a user message between pi's fixed prefix and suffix
            text = pi.COMPACTION_SUMMARY_PREFIX + r.text + pi.COMPACTION_SUMMARY_SUFFIX
            out.append(_summary_segment(text, "user", (r.entry_id,), rc))
        elif r.kind == "summary":  # a branch summary the live history carries, with its own wrapper
            out.append(
                Segment(
                    "tail",
                    "user",
                    pi.BRANCH_SUMMARY_PREFIX + r.text + pi.BRANCH_SUMMARY_SUFFIX,
                    (r.entry_id,),
                    record_kind=r.kind,
                )
            )
        else:
            out.append(_record_segment(r))
    return out


def _claude_code(session: Session, rc: RecordedCompaction, ctx: CompactionContext) -> list[Segment]:
    from compaction_lab.strategies.arms import claude_code

    return [
        _summary_segment(r.text, "user", (r.entry_id,), rc) if r.kind == "summary" else _record_segment(r)
        for r in claude_code.live_history(session, rc.after, ctx)
    ]


def _codex(session: Session, rc: RecordedCompaction, ctx: CompactionContext) -> list[Segment]:
    from compaction_lab.strategies.arms import codex

    out = []
    for it in codex.STRATEGY.live_history(session, rc.after, ctx):
        if it.opaque:
            out.append(codex.opaque_segment(it))
        elif it.summary:
            out.append(_summary_segment(it.text, "user", (it.entry_id,), rc))
        else:
            out.append(Segment("tail", it.role, it.text, (it.entry_id,), record_kind=it.kind, message=it.message_key()))
    return out


def _opencode(session: Session, rc: RecordedCompaction, ctx: CompactionContext) -> list[Segment]:
    from compaction_lab.strategies.arms import opencode

    lh = opencode.live_history(session, rc.after)
    out: list[Segment] = []
    if lh.previous is not None:
        out += [
            Segment("header", "user", opencode.HEADER, label="opencode compaction header"),
            _summary_segment(lh.previous.text, "assistant", (lh.previous.entry_id,), rc),
        ]
    return out + [_record_segment(r) for r in lh.live if role_of(r) != "system"]


_RENDER = {"pi": _pi, "claude-code": _claude_code, "codex": _codex, "opencode": _opencode}


def _authored_in_summary(rc: RecordedCompaction, segs: Sequence[Segment]) -> list[str]:
    """List the text the agent's code, not its model, wrote into the recorded summary (``notes["authored_in_summary"]``).

    pi wraps the summary in a fixed prefix and suffix and appends the file lists it computed itself
    (``formatFileOperations``, `pi.appended_file_lists`); the exam counts those as kept by design, as
    it does for the pi arm's own (`exam.found.regions`). The other agents' summaries are the model's text.
    """
    if rc.agent != "pi":
        return []
    from compaction_lab.strategies.arms import pi

    out: list[str] = []
    for s in segs:
        if s.kind != "summary" or not s.text.startswith(pi.COMPACTION_SUMMARY_PREFIX):
            continue
        body = s.text[len(pi.COMPACTION_SUMMARY_PREFIX) : len(s.text) - len(pi.COMPACTION_SUMMARY_SUFFIX)]
        out += [
            pi.COMPACTION_SUMMARY_PREFIX,
            pi.appended_file_lists(body),
            pi.COMPACTION_SUMMARY_SUFFIX,
        ]
    return list(dict.fromkeys(t for t in out if t))


@dataclass(frozen=True)
class Recorded:
    """The agent's own compaction, read from its log.

    Not listed among the arms: it exists only where a log holds a compaction; the exam's recorded block asks
    for it at each one.
    """

    name: str = "recorded"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = "tiktoken"

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Never on its own: the agent decided when, and the log says where."""
        return False

    def at(self, session: Session, cut: int) -> RecordedCompaction:
        """Return the recorded compaction at `cut`; raise `NoRecordedCompaction` if the log holds none there."""
        found, _ = find(session)
        for rc in found:
            if rc.cut == cut:
                return rc
        where = ", ".join(str(rc.cut) for rc in found) or "none"
        raise NoRecordedCompaction(
            f"session {session.id!r} has no recorded compaction at cut {cut} (recorded compactions at: {where})"
        )

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the next request the agent's own compaction at `cut` left, as its log records it."""
        rc = self.at(session, cut)
        cnt = counter(ctx.encoding)
        segs = [
            Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text()),
        ]
        segs += _RENDER[rc.agent](session, rc, ctx)
        cap = ctx.window - ctx.output_ceiling
        # an opaque segment's placeholder is not what the model reads: its estimate stands in (`Segment.opaque`)
        counted = cnt.count_many([s.text for s in segs])
        tokens = sum(s.tokens if s.opaque else n for s, n in zip(segs, counted, strict=True))
        notes: dict[str, Any] = {
            "label_tag": rc.tag,
            "agent": rc.agent,
            "model": rc.model,
            "compaction_index": rc.index,
            "compaction_entry": rc.entry_id,
            "after": rc.after,
            "summary_entries": list(rc.summary_entry_ids),
            "tokens": tokens,
            "fits": tokens <= cap,
            "opaque_summary_tokens": sum(s.tokens for s in segs if s.opaque and s.kind == "summary"),
            "authored_in_summary": _authored_in_summary(rc, segs),
        }
        return projection(self, session, cut, segs, cap, summary_request=None, receipt=None, notes=notes)


# Not listed: it exists only at the compactions a log holds, so no run compares it everywhere.
STRATEGIES.add("recorded", Recorded(), listed=False)

__all__ = [
    "NoRecordedCompaction",
    "Recorded",
    "RecordedCompaction",
    "agent_of",
    "find",
    "skip_reason",
]
