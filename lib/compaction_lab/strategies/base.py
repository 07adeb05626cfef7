"""What every strategy shares: the call shape, the compaction context, estimators.

A strategy is a pure function ``compact(session, cut, ctx) -> Projection``.
`cut` is the source_order at which the compaction is forced: records with
``source_order < cut`` are the history being compacted. `ctx` carries the
window W, the model's output ceiling O, the call shape (system prompt + tool
definitions), the summarizer and strategy parameters.

Each strategy makes its *internal* size decisions with its own estimator (as
the original does: Codex bytes/4, OpenCode chars/4, FutureOS tiktoken); every
size we *report* is counted by the report tokenizer (`Projection.finalize`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from compaction_lab.core.projection import (
    STAND_IN_LABEL,
    Projection,
    Segment,
    SummaryReceipt,
    SummaryRequest,
    chat_messages,
)
from compaction_lab.core.registry import Registry
from compaction_lab.core.session import Record, Session
from compaction_lab.core.shapes import CallShape  # the context carries one
from compaction_lab.core.text import js_length
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.summarize import NoSummarizer, Summarizer, SummaryUnavailable

# --------------------------------------------------------------------------- estimators


def est_tiktoken(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Report-tokenizer count (FutureOS's own estimator)."""
    return counter(encoding).count(text)


def est_bytes4(text: str) -> int:
    """Codex's estimate: ceil(UTF-8 bytes / 4)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def est_chars4(text: str) -> int:
    """OpenCode's estimate: ``Math.round(text.length / 4)``.

    JavaScript's length counts UTF-16 code units (`js_length`) and ``Math.round``
    rounds halves up (Python's ``round`` rounds them to even), so both are mirrored.
    """
    return (js_length(text) + 2) // 4


ESTIMATORS: dict[str, Callable[[str], int]] = {
    "tiktoken": est_tiktoken,
    "bytes/4": est_bytes4,
    "chars/4": est_chars4,
}


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class CompactionContext:
    """Everything a strategy needs besides the session and the cut.

    Parameters
    ----------
    window : int
        The model's context window W (tokens).
    output_ceiling : int
        The model's declared output ceiling O (tokens).
    shape : CallShape
        System prompt and tool definitions (`CallShape.for_session` is applied
        by `compact`).
    summarizer : Summarizer
        Who writes summaries (``none`` by default: zero cost, no model).
    encoding : str
        Report tokenizer.
    params : mapping
        Strategy parameters overriding the defaults (``tail_tokens``,
        ``history_target``, ``evidence_tokens``, ``prune``, ...).
    input_limit : int, optional
        The model's declared input limit, when it has one (OpenCode's rule).
    checkpoints : str, optional
        Checkpoint database (`checkpoints`): a committed compaction with the
        same key is reused instead of computed (and its summary requested)
        again. None: on for model-written summaries (at
        `checkpoints.default_path`), off for offline summarizers, which cost
        nothing to recompute.
    calibration : float
        The session's model tokens per report token (`calibration.calibrate`; 1.0: uncalibrated).
        The triggers upstream drives from the API's usage compare ``model_tokens(tokens)``.
    """

    window: int = 128_000
    output_ceiling: int = 32_000
    shape: CallShape = field(default_factory=CallShape.default)
    summarizer: Summarizer = field(default_factory=NoSummarizer)
    encoding: str = DEFAULT_ENCODING
    params: Mapping[str, Any] = field(default_factory=dict)
    input_limit: int | None = None
    checkpoints: str | None = None
    calibration: float = 1.0

    def param(self, name: str, default: Any) -> Any:
        """Return a strategy parameter, or its default."""
        return self.params.get(name, default)

    def model_tokens(self, tokens: float) -> int:
        """Return the model's tokens for `tokens` report tokens under this context's ``calibration``."""
        return round(float(tokens) * float(self.calibration))

    def checkpoint_path(self) -> str | None:
        """Where compactions are checkpointed: `checkpoints`, else the default for a model summarizer."""
        if self.checkpoints:
            return self.checkpoints
        if getattr(self.summarizer, "model", None) is not None and not getattr(self.summarizer, "stand_in", False):
            from compaction_lab.store.checkpoints import default_path

            return str(default_path())
        return None


class Strategy(Protocol):
    """The interface every registered arm (`STRATEGIES`) satisfies.

    Its three names are read-only here, so a frozen dataclass's fields satisfy them.
    """

    @property
    def name(self) -> str:
        """Return the arm's name, the one it is registered under."""
        ...

    @property
    def algorithm_version(self) -> str:
        """Return the version of its rules (part of a checkpoint's key)."""
        ...

    @property
    def estimator(self) -> str:
        """Return the estimator its own size decisions use (a key of `ESTIMATORS`)."""
        ...

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:  # pragma: no cover
        """Project the next request after compacting `session` at `cut`."""
        ...

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:  # pragma: no cover
        """Whether the strategy's own trigger would compact at this input size."""
        ...


#: Every arm, registered by the module that defines it (``STRATEGIES.add(arm.name, arm, rank=...)``).
#: ``rank`` is the place tables and charts list it in. What else a registration may declare:
#: ``listed=False`` for an arm found by name but not run by default (`recorded`), and ``request_shape``,
#: the summary-request shape docs/strategies.md documents for it (`compaction-lab verify` holds the arm
#: to it), and ``trigger_rule``, the short text of what binds its trigger (a text, or a function of the
#: `CompactionContext` returning one), figure 8's ``bound`` (`trigger.trigger_table`). Discovery imports
#: every module of `compaction_lab.strategies.arms` (one per strategy).
STRATEGIES: Registry[Strategy] = Registry(
    "strategy",
    packages=("compaction_lab.strategies.arms",),
)


# --------------------------------------------------------------------------- helpers


def projection(
    strategy: Strategy, session: Session, cut: int, segments: Iterable[Segment], capacity: int, **rest: Any
) -> Projection:
    """Return the projection `strategy` made of `session` at `cut`: its name, version and estimator filled in.

    ``rest`` are `Projection`'s other fields (``summary_request``, ``receipt``, ``notes``, ``sent_requests``).
    """
    return Projection(
        strategy=strategy.name,
        algorithm_version=strategy.algorithm_version,
        session_id=session.id,
        cut=cut,
        segments=tuple(segments),
        capacity=capacity,
        estimator=strategy.estimator,
        **rest,
    )


def history(session: Session, cut: int | None) -> list[Record]:
    """Context records before the cut (``meta`` excluded), in source order."""
    end = len(session.records) if cut is None else cut
    return [r for r in session.records if r.source_order < end and r.kind != "meta"]


ROLE_OF_KIND: Mapping[str, str] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "reasoning": "assistant",
    "tool_call": "assistant",
    "tool_output": "tool",
    "summary": "user",
}


def role_of(record: Record) -> str:
    """Chat role a record is rendered with in a projection."""
    return ROLE_OF_KIND.get(record.kind, "user")


def record_messages(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Build the chat messages a session's own request sends for these records.

    The boundary rule of `Projection.messages` (`projection.chat_messages`): the blocks of one entry
    join, distinct entries stay distinct messages. System-role records are left out (the call shape's
    system prompt is the request's system); a session whose log holds other system records (Codex
    developer messages) is sent without them. The cost model prices the session's previous request by
    this rule, and a strategy that forks the conversation (claude-code) sends the very same messages.
    """
    return chat_messages((role_of(r), r.text, "entry:" + r.entry_id) for r in records if role_of(r) != "system")


def read_prompt(path: Any, default: str) -> str:
    """Read a prompt from a file the user pointed a strategy at (exact upstream text), else our paraphrase."""
    return Path(path).read_text(encoding="utf-8") if path else default


def call_summarizer(ctx: CompactionContext, request: SummaryRequest) -> tuple[str | None, SummaryReceipt]:
    """Ask the context's summarizer for a summary; never raises.

    Returns ``(text, receipt)``; text is None when the summarizer is
    unavailable or fails. The failure's message goes into the receipt
    (``fallback=True``), and each strategy then does what it documents (fall
    back, "(no summary available)", an empty template). An empty answer is
    returned as it is: each strategy decides what an empty summary means.
    """
    prov = ctx.summarizer
    name, stand_in = str(getattr(prov, "name", type(prov).__name__)), bool(getattr(prov, "stand_in", False))
    fp = request.fingerprint()
    try:
        res = prov.summarize(request)
    except SummaryUnavailable as exc:
        return None, SummaryReceipt(name, stand_in, "", fp, fallback=True, error=str(exc) or "summary unavailable")
    except Exception as exc:
        return None, SummaryReceipt(name, stand_in, "", fp, fallback=True, error=f"{type(exc).__name__}: {exc}")
    return res.text, SummaryReceipt(
        name, stand_in, res.text, fp, res.input_tokens, res.cached_tokens, res.output_tokens
    )


def summarize_or_template(ctx: CompactionContext, request: SummaryRequest) -> tuple[str, SummaryReceipt]:
    """Ask the summarizer for its answer to `request`, else return its template with every section empty.

    The empty template stands in when the request leaves no room for an answer
    (``max_output_tokens <= 0``: nothing is asked) or the summarizer is
    unavailable or fails; the receipt then says why (``fallback=True``, its
    text the template). What a strategy does with a real answer (format it,
    verify it) stays with the strategy.

    Returns
    -------
    (str, SummaryReceipt)
    """
    from compaction_lab.summarize.extractive import empty_template  # the stand-in owns the templates

    empty = empty_template(request.template)
    if request.max_output_tokens <= 0:
        prov = ctx.summarizer
        return empty, SummaryReceipt(
            str(getattr(prov, "name", type(prov).__name__)),
            bool(getattr(prov, "stand_in", False)),
            empty,
            request.fingerprint(),
            fallback=True,
            error="no room left for a summary",
        )
    text, receipt = call_summarizer(ctx, request)
    if text is None:
        return empty, replace(receipt, text=empty)
    return text, receipt


def summary_label(receipt: SummaryReceipt, fallback_label: str) -> str:
    """Table label of a summary segment: stand-in, summarizer name, or what replaced it."""
    if receipt.fallback:
        return fallback_label
    return STAND_IN_LABEL if receipt.stand_in else f"summary ({receipt.summarizer})"


#: What a projection is when the agent, as its pinned code does, did not compact: its next request
#: carries the live history as it was (Codex's compact task errors; OpenCode's processor stops before
#: it wrote a tail start, or ``on_failure: intent``; Aider discards its summary). The arm's
#: ``notes["compaction_failed"]`` holds the reason; the exam and the cost model take the projection as
#: sent (over the window, it is flagged, never ranked).
COMPACTION_FAILED = "compaction failed, history unchanged"

#: Values of the ``on_failure`` parameter of the arms whose agent keeps the history on a failed summary:
#: ``"upstream"`` (the default) keeps it; ``"placeholder"`` compacts around a placeholder summary instead
#: (the lab's behaviour before it followed upstream here). An arm with other values passes its own
#: ``choices`` to `failure_mode` (OpenCode: `opencode.ON_FAILURE_CHOICES`).
ON_FAILURE_CHOICES = ("upstream", "placeholder")


def choice(ctx: CompactionContext, strategy: str, name: str, choices: Sequence[str]) -> str:
    """Param `name` of `strategy`, checked: one of `choices` (the first is the default).

    Raises
    ------
    ValueError
        Naming the parameter, the strategy and the allowed values.
    """
    value = str(ctx.param(name, choices[0]))
    if value not in choices:
        raise ValueError(f"{strategy} {name} {value!r}: expected one of {', '.join(choices)}")
    return value


def failure_mode(ctx: CompactionContext, strategy: str, choices: Sequence[str] = ON_FAILURE_CHOICES) -> str:
    """Param ``on_failure`` of `strategy`, checked (`choice`): one of `choices` (the first is the default)."""
    return choice(ctx, strategy, "on_failure", choices)


#: The arm that never compacts (`baselines.Full`): the uncompacted reference.
UNCOMPACTED_REFERENCE = "full"


def compacted(projection: Projection, session: Session) -> bool:
    """Whether an arm compacted at its cut: its projection is not the uncompacted history.

    The uncompacted reference never compacts, nor does an arm whose agent kept the history on a failed
    summary (``notes["compaction_failed"]``). Any other arm compacted when at least one context record
    before the cut is missing from its projection's segments verbatim (dropped, masked, summarised or
    truncated); an arm that kept every record as it is (``truncate-oldest`` under the capacity, an agent
    whose trigger found room) did not.
    """
    if projection.strategy == UNCOMPACTED_REFERENCE or projection.notes.get("compaction_failed"):
        return False
    kept = {s.text for s in projection.segments}
    return any(r.text not in kept for r in history(session, projection.cut))
