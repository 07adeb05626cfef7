"""The reader interface: what a reader is sent for one question and what it answers.

Every reader — the offline stand-ins (`exam.readers`) and the model reader (`exam.readers.model`) —
gets the projection's chat messages, the question as the final user message (`question_message`:
the question, `QUESTION_INSTRUCTION`, then the round's wording) and, on the open arm, the
open-book tools (`Tool`); it returns a `ReaderAnswer` (the answer, every `ToolCall` it made).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from compaction_lab.core.session import Record
from compaction_lab.core.text import content_text
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.exam.types import NOT_FOUND, Question
from compaction_lab.store.archive import Hit

#: The instruction that follows every question (our words): exact value or NOT_FOUND.
QUESTION_INSTRUCTION = (
    "Answer with the exact value only, copied as it appeared in this session, with no explanation. "
    f"If the value is not in what you can see, answer {NOT_FOUND}."
)

#: Search modes of `SearcherReader` (and of the open-book rounds).
SEARCH_MODES: tuple[str, ...] = ("allowed", "required", "never")

# --------------------------------------------------------------------------- answers and calls


@dataclass(frozen=True)
class ToolCall:
    """One call a reader made to an open-book tool.

    Parameters
    ----------
    name : str
        ``history_search`` or ``history_get``.
    arguments : mapping
        The arguments as passed (what a model would have sent as JSON).
    result_entry_ids : tuple of str
        Entry ids the call returned: the hits of a search (best first), the
        entry fetched by a get (empty when nothing matched).
    """

    name: str
    arguments: Mapping[str, Any]
    result_entry_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Copy the arguments into a dict and the result entry ids into a tuple."""
        object.__setattr__(self, "arguments", dict(self.arguments))
        object.__setattr__(self, "result_entry_ids", tuple(self.result_entry_ids))

    def __hash__(self) -> int:
        """Hash the name, the arguments' canonical JSON and the result entry ids."""
        # The arguments are a dict (JSON-like); hash their canonical JSON so calls can be set members.
        return hash((self.name, json.dumps(self.arguments, sort_keys=True, default=str), self.result_entry_ids))


@dataclass(frozen=True)
class ReaderAnswer:
    """What a reader answered, and what it took.

    Parameters
    ----------
    given : str
        The answer (a value or ``NOT_FOUND``).
    input_tokens, output_tokens : int
        Report-token sizes of what the reader read and wrote. For the
        stand-ins these are sizes (what a model would have had to read), not a
        bill; stand-ins write nothing, so their ``output_tokens`` is 0.
    tool_calls : tuple of ToolCall
    stand_in : bool
        The answer came from an offline stand-in, not a model.
    """

    given: str
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: tuple[ToolCall, ...] = ()
    stand_in: bool = False

    def __post_init__(self) -> None:
        """Keep the tool calls as a tuple."""
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


@dataclass(frozen=True)
class ToolResult:
    """The result of one tool call.

    Parameters
    ----------
    call : ToolCall
        The call, as recorded.
    content : str
        What a model receives as the tool message (JSON text).
    hits : tuple of Hit
        Search hits (``history_search``).
    records : tuple of Record
        Original records (``history_get``).
    """

    call: ToolCall
    content: str
    hits: tuple[Hit, ...] = ()
    records: tuple[Record, ...] = ()


@dataclass(frozen=True)
class Tool:
    """An open-book tool: its OpenAI function definition and the function that runs it.

    Parameters
    ----------
    name : str
    definition : mapping
        OpenAI function-tool JSON (``{"type": "function", "function": {...}}``).
    run : callable
        ``run(**arguments) -> ToolResult``.
    """

    name: str
    definition: Mapping[str, Any]
    run: Callable[..., ToolResult] = field(compare=False)

    def __call__(self, **arguments: Any) -> ToolResult:
        """Run the tool with the arguments a model sent."""
        return self.run(**arguments)


@runtime_checkable
class Reader(Protocol):
    """The interface every reader implements (stand-ins now, a model reader later).

    Attributes
    ----------
    name : str
        Short name (``verbatim``, ``searcher``, ``model``).
    label : str
        How tables show it; a stand-in's label says "stand-in" or names its role.
    stand_in : bool
        True for offline stand-ins.
    """

    @property
    def name(self) -> str:
        """Return the short name (``verbatim``, ``searcher``, ``model``)."""
        ...

    @property
    def label(self) -> str:
        """Return how tables show the reader."""
        ...

    @property
    def stand_in(self) -> bool:
        """Tell whether the reader is an offline stand-in."""
        ...

    def answer(
        self,
        messages: list[dict],
        question: Question,
        tools: Sequence[Tool] = (),
        *,
        wording: str = "",
        shape_tools: Sequence[Mapping[str, Any]] = (),
    ) -> ReaderAnswer:
        """Answer `question` after reading `messages` (the projection's), optionally with `tools`.

        Parameters
        ----------
        messages : list of dict
            `Projection.messages` exactly; the reader appends
            `question_message(question, wording)` as the final user message.
        question : Question
        tools : sequence of Tool
            Open-book tools (empty: closed arm).
        wording : str
            The round's instruction, appended after `QUESTION_INSTRUCTION`.
        shape_tools : sequence of dict
            The call shape's tool definitions (sent with the request by a model
            reader; the open-book tools' definitions are added to them).
        """
        ...  # pragma: no cover


def question_message(question: Question, wording: str = "", instruction: str = QUESTION_INSTRUCTION) -> dict[str, str]:
    """Write the final user message: the question, the answer instruction, then the round's wording if any."""
    parts = [question.prompt.strip(), instruction.strip(), wording.strip()]
    return {"role": "user", "content": "\n\n".join(p for p in parts if p)}


def request_messages(
    messages: Sequence[Mapping[str, Any]],
    question: Question,
    wording: str = "",
    instruction: str = QUESTION_INSTRUCTION,
) -> list[dict[str, Any]]:
    """Build the messages a reader sends: the projection's, then the question message."""
    return [dict(m) for m in messages] + [question_message(question, wording, instruction)]


def messages_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Join the text of chat messages (what presence checks search)."""
    return "\n\n".join(content_text(m.get("content")) for m in messages)


def messages_tokens(messages: Sequence[Mapping[str, Any]], encoding: str = DEFAULT_ENCODING) -> int:
    """Report tokens of the messages' contents (role markup not counted)."""
    return sum(counter(encoding).count_many([content_text(m.get("content")) for m in messages]))


__all__ = [
    "QUESTION_INSTRUCTION",
    "Reader",
    "ReaderAnswer",
    "SEARCH_MODES",
    "Tool",
    "ToolCall",
    "ToolResult",
    "messages_text",
    "messages_tokens",
    "question_message",
    "request_messages",
]
