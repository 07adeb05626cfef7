"""What a compaction produces: a `Projection`, the ordered segments the next request sees.

Compaction never deletes or rewrites the session; it recomputes, for the next
request only, what the model gets to see. Every strategy returns the same
type, so every chart and exam treats them alike:

* `Segment` — one piece of the projection with its kind, chat role, text,
  provenance (the entry ids it came from) and report-token size.
* `SummaryRequest` — the request a strategy sends to produce its summary, in
  that strategy's documented shape (prefix-shared, history + instruction,
  dedicated prompt), with a fingerprint.
* `SummaryReceipt` — what came back: the summarizer, stand-in flag, usage, fallback.
* `projection_from_json` — a `Projection` rebuilt from `Projection.to_json` (stored checkpoints).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compaction_lab.core import fingerprints
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter

#: Segment kinds, in the order a projection usually lists them.
SEGMENT_KINDS: tuple[str, ...] = (
    "system",
    "tools",
    "header",
    "user_original",
    "assistant_original",
    "omitted_marker",
    "evidence_index",
    "summary",
    "tail",
    "continue",
)

#: Segment kinds whose text a strategy writes itself (markers, headers,
#: summaries); every other kind's text must come verbatim from the session
#: (or the call shape, for system and tools).
AUTHORED_KINDS: frozenset[str] = frozenset({"header", "omitted_marker", "summary", "continue", "evidence_index"})

ROLES = ("system", "user", "assistant", "tool")

#: Label every table and chart shows next to an offline stand-in's output.
STAND_IN_LABEL = "extractive stand-in"


@dataclass(frozen=True)
class Segment:
    """One piece of a projection.

    Parameters
    ----------
    kind : str
        One of `SEGMENT_KINDS`.
    role : str
        Chat role it is rendered with (system, user, assistant, tool).
    text : str
        What the model sees.
    entry_ids : tuple of str
        Provenance: the session entries this segment came from (empty for
        system / tools / headers).
    tokens : int
        Report-tokenizer size, filled by `Projection.finalize`.
    record_kind : str, optional
        For verbatim segments: the kind of the record copied (tool_output, ...).
    label : str
        Shown next to the segment in tables (e.g. "extractive stand-in").
    message : str
        Message key: which chat message of the next request the segment
        belongs to (see `Projection.messages`). Empty: derived — a verbatim
        segment (or an omitted marker) standing for one entry belongs to that
        entry's message; any other segment is a message of its own. A strategy
        that sends several segments as one message gives them the same key.
    opaque : bool
        The segment stands for content the model reads but this suite cannot (an
        encrypted item, e.g. the summary of Codex's remote compaction): `text` is a
        readable placeholder holding none of it, `tokens` is the strategy's estimate
        of its size (`finalize` keeps it instead of counting the placeholder), and
        the exam makes no claim about what it holds.
    """

    kind: str
    role: str
    text: str
    entry_ids: tuple[str, ...] = ()
    tokens: int = 0
    record_kind: str | None = None
    label: str = ""
    message: str = ""
    opaque: bool = False

    def message_key(self) -> str:
        """Return the key `Projection.messages` joins on ("" — a message of its own)."""
        if self.message:
            return self.message
        if len(self.entry_ids) == 1 and (self.kind not in AUTHORED_KINDS or self.kind == "omitted_marker"):
            return "entry:" + self.entry_ids[0]
        return ""

    def __post_init__(self) -> None:
        """Refuse an unknown kind or role; keep the entry ids as a tuple."""
        if self.kind not in SEGMENT_KINDS:
            raise ValueError(f"unknown segment kind {self.kind!r}; expected one of {SEGMENT_KINDS}")
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}")
        object.__setattr__(self, "entry_ids", tuple(self.entry_ids))


@dataclass(frozen=True)
class SummaryRequest:
    """The request a strategy sends for its summary, in its documented shape.

    Parameters
    ----------
    strategy : str
    shape : str
        ``prefix-shared`` (the session's own system prompt + tools + messages,
        instruction appended: FutureOS, claude-code's forked request),
        ``history+instruction`` (base instructions, no tools: Codex),
        ``dedicated`` (own system prompt, no tools, flattened transcript:
        OpenCode).
    system : str
        The system prompt sent.
    tools : tuple of dict
        Tool definitions sent (empty when the shape sends none).
    messages : tuple of dict
        Chat messages ``{"role", "content"}``, instruction last.
    template : str
        Which summary format the answer must follow (``futureos-handoff``,
        ``codex-handoff``, ``opencode-template``, ``claude-code-9``); offline
        summarizers fill it.
    max_output_tokens : int
        Cap on the summary's size.
    source_entry_ids : tuple of str
        Entries the request summarises.
    """

    strategy: str
    shape: str
    system: str
    tools: tuple[Mapping[str, Any], ...]
    messages: tuple[Mapping[str, Any], ...]
    template: str
    max_output_tokens: int
    source_entry_ids: tuple[str, ...] = ()

    def fingerprint(self) -> str:
        """sha256 of the request as sent (system, tools, messages, cap)."""
        body = {
            "system": self.system,
            "tools": list(self.tools),
            "messages": list(self.messages),
            "max_output_tokens": self.max_output_tokens,
        }
        return fingerprints.sha256_json(body)

    def shape_fingerprint(self) -> str:
        """sha256 of the call shape only (system prompt + tool definitions)."""
        return fingerprints.shape_fingerprint(self.system, self.tools)

    def to_openai(self) -> dict[str, Any]:
        """Return the request body an OpenAI-compatible chat endpoint receives."""
        body: dict[str, Any] = {
            "messages": [{"role": "system", "content": self.system}, *[dict(m) for m in self.messages]],
            "max_tokens": self.max_output_tokens,
        }
        if self.tools:
            body["tools"] = [dict(t) for t in self.tools]
        return body


@dataclass(frozen=True)
class SummaryReceipt:
    """What a summary request returned (or why none was used); `summarizer` names who wrote it."""

    summarizer: str
    stand_in: bool
    text: str
    request_fingerprint: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    fallback: bool = False
    error: str | None = None


@dataclass(frozen=True)
class SentRequest:
    """One summary request a compaction sent, and the size of its answer.

    For compactions that send several (pi's split-turn prefix request, Gemini
    CLI's verification probe, Aider's recursion): `Projection.sent_requests`
    lists every one in the order sent, so each is priced.

    Parameters
    ----------
    request : SummaryRequest
    output_tokens : int
        Report tokens of what came back (0 when nothing did).
    """

    request: SummaryRequest
    output_tokens: int = 0


@dataclass(frozen=True)
class Projection:
    """The result of one compaction: ordered segments plus how the summary was made.

    Parameters
    ----------
    strategy, algorithm_version : str
    session_id : str
    cut : int
        Records with ``source_order < cut`` were compacted.
    segments : tuple of Segment
    capacity : int
        The room the strategy believed it had, in its own estimator's units.
    estimator : str
        ``tiktoken``, ``bytes/4`` or ``chars/4``.
    summary_request, receipt : optional
    notes : mapping
        Strategy-specific facts (demoted entries, budgets used, trigger values).
    sent_requests : tuple of SentRequest
        Every summary request the compaction sent, in order, when it sent more
        than one; empty otherwise (`requests_sent` then gives the one).
    """

    strategy: str
    algorithm_version: str
    session_id: str
    cut: int
    segments: tuple[Segment, ...]
    capacity: int
    estimator: str
    summary_request: SummaryRequest | None = None
    receipt: SummaryReceipt | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)
    sent_requests: tuple[SentRequest, ...] = ()

    def requests_sent(self) -> tuple[SentRequest, ...]:
        """Every summary request this compaction sent, in order (the cost model prices each).

        A strategy that sends one request leaves `sent_requests` empty: it is
        `summary_request`, answered by the summary segments (call `finalize`
        first, for their sizes).
        """
        if self.sent_requests:
            return self.sent_requests
        if self.summary_request is None:
            return ()
        return (SentRequest(self.summary_request, sum(s.tokens for s in self.segments if s.kind == "summary")),)

    def finalize(self, encoding: str = DEFAULT_ENCODING) -> Projection:
        """Return a copy with every segment's report-token size counted (an opaque one keeps its estimate)."""
        counts = counter(encoding).count_many([s.text for s in self.segments])
        # A segment already of its size is kept as it is (a projection often holds thousands, mostly counted).
        segs = tuple(
            s if s.opaque or s.tokens == n else replace(s, tokens=n)
            for s, n in zip(self.segments, counts, strict=False)
        )
        return replace(self, segments=segs)

    @property
    def tokens(self) -> int:
        """Report tokens of all segments (call `finalize` first)."""
        return sum(s.tokens for s in self.segments)

    def entry_ids(self) -> set[str]:
        """Every entry id any segment claims as provenance."""
        return {e for s in self.segments for e in s.entry_ids}

    def messages(self) -> list[dict[str, Any]]:
        """Return the chat messages a model would see: one per message boundary the agent keeps.

        The ``tools`` segment is left to the call shape (the request's tools
        parameter); consecutive ``system`` segments form the one system
        message. Every other segment starts a message of its own unless it
        continues the previous one: same role (never ``tool``: one message per
        tool result) and the same non-empty `Segment.message_key` — blocks of
        one source entry (an assistant message's prose, reasoning and tool
        calls), or segments a strategy keyed together. So two kept user
        messages, or kept user messages and a summary sent as separate user
        items, stay separate messages. Joined texts are separated by a blank
        line. `chat_messages` applies the same rule to any (role, text, key)
        sequence, e.g. a session's records keyed by entry id.
        """
        return chat_messages((s.role, s.text, s.message_key()) for s in self.segments if s.kind != "tools")

    def text(self) -> str:
        """Return the flat text of the projection (what the verbatim reader searches)."""
        return "\n\n".join(s.text for s in self.segments)

    def to_rows(self, case_id: str = "") -> list[dict[str, Any]]:
        """One row per segment, for ``projections.parquet``."""
        return [
            {
                "case_id": case_id,
                "strategy": self.strategy,
                "algorithm_version": self.algorithm_version,
                "session_id": self.session_id,
                "cut": self.cut,
                "position": i,
                "segment_kind": s.kind,
                "role": s.role,
                "record_kind": s.record_kind,
                "tokens": s.tokens,
                "entry_ids": list(s.entry_ids),
                "label": s.label,
            }
            for i, s in enumerate(self.segments)
        ]

    def to_json(self, include_text: bool = True) -> dict[str, Any]:
        """JSON-ready form: segments (with text), totals, the summary request's shape and fingerprint."""
        req = self.summary_request
        return {
            "strategy": self.strategy,
            "algorithm_version": self.algorithm_version,
            "session_id": self.session_id,
            "cut": self.cut,
            "capacity": self.capacity,
            "estimator": self.estimator,
            "tokens": self.tokens,
            "segments": [
                {
                    "kind": s.kind,
                    "role": s.role,
                    "tokens": s.tokens,
                    "entry_ids": list(s.entry_ids),
                    "record_kind": s.record_kind,
                    "label": s.label,
                    **({"opaque": True} if s.opaque else {}),
                    **({"text": s.text} if include_text else {}),
                }
                for s in self.segments
            ],
            "summary_request": None
            if req is None
            else {
                "shape": req.shape,
                "template": req.template,
                "fingerprint": req.fingerprint(),
                "shape_fingerprint": req.shape_fingerprint(),
                "messages": len(req.messages),
                "tools": len(req.tools),
                "max_output_tokens": req.max_output_tokens,
            },
            "receipt": None if self.receipt is None else dict(self.receipt.__dict__),
            "notes": dict(self.notes),
        }


def projection_from_json(data: Mapping[str, Any]) -> Projection:
    """Rebuild a `Projection` from ``Projection.to_json()`` (which must include segment text).

    Lossy in one way: ``summary_request`` is None (the JSON keeps only its
    shape and fingerprint). Notes come back as JSON types (lists, not tuples).
    """
    segs = []
    for s in data["segments"]:
        if "text" not in s:
            raise ValueError("projection JSON has no segment text (to_json(include_text=False)); cannot rebuild")
        segs.append(
            Segment(
                kind=s["kind"],
                role=s["role"],
                text=s["text"],
                entry_ids=tuple(s.get("entry_ids") or ()),
                tokens=int(s.get("tokens") or 0),
                record_kind=s.get("record_kind"),
                label=s.get("label") or "",
                opaque=bool(s.get("opaque", False)),
            )
        )
    rec = data.get("receipt")
    return Projection(
        strategy=data["strategy"],
        algorithm_version=data["algorithm_version"],
        session_id=data["session_id"],
        cut=int(data["cut"]),
        segments=tuple(segs),
        capacity=int(data["capacity"]),
        estimator=data["estimator"],
        summary_request=None,
        receipt=None if rec is None else SummaryReceipt(**_renamed_receipt_keys(rec)),
        notes=dict(data.get("notes") or {}),
    )


def _renamed_receipt_keys(rec: dict[str, Any]) -> dict[str, Any]:
    """Return a stored receipt with today's keys (projections written before the rename say ``provider``)."""
    if "provider" in rec and "summarizer" not in rec:
        rec = {("summarizer" if k == "provider" else k): v for k, v in rec.items()}
    return rec


def chat_messages(parts: Iterable[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Build chat messages from ``(role, text, message key)`` parts, in order.

    The boundary rule of `Projection.messages`: consecutive ``system`` parts join; otherwise a part joins the
    previous message only with the same role, not ``tool``, and the same non-empty key.
    """
    out: list[dict[str, Any]] = []
    last_key = ""
    for role, text, key in parts:
        if out and out[-1]["role"] == role and (role == "system" or (role != "tool" and key and key == last_key)):
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})
        last_key = key
    return out
