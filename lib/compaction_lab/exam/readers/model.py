"""The model reader: a real model answers the exam, closed book or with the history tools.

`ModelReader` implements `readers.Reader` over any OpenAI-compatible endpoint
(`endpoints.ModelConfig`); every call goes through the ledger.

Closed book
    One request: the projection's messages, then `readers.question_message`, with the call shape's
    tool definitions beside them and ``tool_choice`` ``none``; a tool call instead of an answer is
    ``NOT_FOUND``.
Open book
    The shape's tools plus ``history_search`` / ``history_get``; each tool call is run against the
    archive and answered, up to ``max_tool_rounds`` rounds, then one last request with
    ``tool_choice`` ``none`` asks for the answer. Every call is recorded.
Next action (the continuation exam)
    `ModelReader.next_action`: the projection as the agent's next request
    (`exam.actions.next_action.action_messages`) with the shape's tools and ``tool_choice`` ``required``;
    the model's first tool call is the step it takes (`exam.actions.next_action.PredictedCall`).

`normalise_answer` reads an answer the way a grader would; usage is the provider's own (prompt +
completion tokens over every round), not a size estimate.

Design: docs/exams.md#5-readers; the next action: docs/exams.md#8a-continuation-notebook-06.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compaction_lab.core import bounded_json
from compaction_lab.exam.actions.next_action import ACTION_PURPOSE, PredictedCall, predicted_call
from compaction_lab.exam.readers import READERS
from compaction_lab.exam.readers.reading import Reader, ReaderAnswer, Tool, ToolCall, request_messages
from compaction_lab.exam.types import NOT_FOUND, Question
from compaction_lab.summarize.endpoint import wire_messages

if TYPE_CHECKING:
    from compaction_lab.core.usage import Usage

#: Cap on an answer: exact values are short.
ANSWER_TOKENS = 64

#: Cap on a next-action reply: a tool call's name and arguments (an edit's text may be cut short; its
#: path and identifiers come first in every shape's schema, and the grade reads the raw text when cut).
ACTION_TOKENS = 512

_QUOTES = "\"'`\u2018\u2019\u201c\u201d"


def normalise_answer(text: str | None) -> str:
    """Normalise an answer as graded: first non-empty line, unquoted, no trailing full stop; NOT_FOUND if abstaining."""
    if not text or NOT_FOUND in text:
        return NOT_FOUND
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    for prefix in ("answer:", "Answer:", "ANSWER:"):
        if line.startswith(prefix):
            line = line[len(prefix) :].strip()
    line = line.strip(_QUOTES).strip()
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1].strip(_QUOTES).strip()  # `value`. -> value
    return line or NOT_FOUND


def _tool_message(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


@dataclass
class ModelReader:
    """A model answers; labelled with its name, never a stand-in.

    Parameters
    ----------
    config : ModelConfig or mapping
    answer_tokens : int
        ``max_tokens`` of each request.
    max_tool_rounds : int
        Open book: rounds of tool calls before the answer is asked for.
    closed_tool_choice : str or None
        ``tool_choice`` of closed-book requests (``none``); None leaves it out
        for endpoints that reject the field.
    action_tokens : int
        ``max_tokens`` of a next-action request (`next_action`).
    action_tool_choice : str, mapping or None
        ``tool_choice`` of a next-action request (``required``: the model must
        act; a named function, ``{"type": "function", "function": {"name": ...}}``,
        for a server that forces a call only when one is named, as llama.cpp's
        does); None leaves it out for endpoints that reject the field.
    temperature : float or None
        ``temperature`` of every request (profile parameter ``reader_temperature``); None leaves it out, so
        the client sends the model configuration's own (``ModelConfig.temperature``).
    """

    config: Any
    answer_tokens: int = ANSWER_TOKENS
    max_tool_rounds: int = 4
    closed_tool_choice: str | None = "none"
    action_tokens: int = ACTION_TOKENS
    action_tool_choice: str | Mapping[str, Any] | None = "required"
    temperature: float | None = None
    name: str = "model"
    label: str = ""
    stand_in: bool = False
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Resolve the model configuration, the label and the shared client."""
        from compaction_lab.endpoints.shared import config_of, get_client

        self.config = config_of(self.config)
        self.label = self.label or f"model reader: {self.config.model}"
        self._client = self._client or get_client(self.config)

    @property
    def concurrency(self) -> int:
        """Questions asked at once (the endpoint's limit; the client enforces it too)."""
        return int(self.config.concurrency)

    def _send(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        purpose: str,
        tool_choice: str | Mapping[str, Any] | None,
        max_tokens: int | None = None,
        draw: int = 0,
    ) -> Any:
        body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens or self.answer_tokens}
        if self.temperature is not None:
            body["temperature"] = float(self.temperature)
        if tools:
            body["tools"] = [dict(t) for t in tools]
            if tool_choice:
                body["tool_choice"] = tool_choice
        # Draw 0 is the request as before draws existed (a client without draws serves it).
        return self._client.complete(body, purpose=purpose, **({"draw": draw} if draw else {}))

    def answer(
        self,
        messages: list[dict],
        question: Question,
        tools: Sequence[Tool] = (),
        *,
        wording: str = "",
        shape_tools: Sequence[Mapping[str, Any]] = (),
        draw: int = 0,
    ) -> ReaderAnswer:
        """Ask the model the question; with tools, run its tool calls for up to `max_tool_rounds` rounds.

        `draw` says which asking of the same question this is (0, 1, ...): each draw is a request of its
        own (`ChatClient.complete`), answered and recorded apart from the others.
        """
        convo = wire_messages(request_messages(messages, question, wording))
        by_name = {t.name: t for t in tools}
        defs = [*shape_tools, *(t.definition for t in tools if t.definition not in shape_tools)]
        used_in = used_out = 0
        calls: list[ToolCall] = []
        if not tools:
            c = self._send(convo, defs, "exam:closed", self.closed_tool_choice, draw=draw)
            answered = None if c.message.get("tool_calls") else c.message.get("content")
            return ReaderAnswer(normalise_answer(answered), c.usage.prompt_tokens, c.usage.completion_tokens, (), False)
        for _ in range(self.max_tool_rounds):
            c = self._send(convo, defs, "exam:open", None, draw=draw)
            used_in, used_out = used_in + c.usage.prompt_tokens, used_out + c.usage.completion_tokens
            requested = c.message.get("tool_calls") or []
            if not requested:
                return ReaderAnswer(normalise_answer(c.message.get("content")), used_in, used_out, tuple(calls), False)
            convo.append({"role": "assistant", "content": c.message.get("content") or "", "tool_calls": requested})
            for tc in requested:
                fn = tc.get("function") or {}
                convo.append(_tool_message(tc.get("id", ""), self._run(by_name, fn, calls)))
        c = self._send(convo, defs, "exam:open-final", "none", draw=draw)
        used_in, used_out = used_in + c.usage.prompt_tokens, used_out + c.usage.completion_tokens
        answered = None if c.message.get("tool_calls") else c.message.get("content")
        return ReaderAnswer(normalise_answer(answered), used_in, used_out, tuple(calls), False)

    def next_action(
        self, messages: list[dict[str, Any]], *, shape_tools: Sequence[Mapping[str, Any]], draw: int = 0
    ) -> tuple[PredictedCall | None, Usage]:
        """Ask the model to take the next step: its first tool call, and the usage the provider reported.

        Parameters
        ----------
        messages : list of dict
            The request's messages (`exam.actions.next_action.action_messages` of the projection's); tool
            messages without a call id are sent as user messages, as every request of this reader.
        shape_tools : sequence of dict
            The call shape's tool definitions, offered with ``tool_choice`` `action_tool_choice`.
        draw : int
            Which asking of the same request this is (as `answer`'s): each draw a request of its own.

        Returns
        -------
        tuple of (PredictedCall or None, Usage)
            None when the reply called no tool (the model talked instead of acting).

        Raises
        ------
        ValueError
            When there is no tool to call (`shape_tools` empty): nothing is sent.
        """
        if not shape_tools:
            raise ValueError("a next action needs the call shape's tools: the shape offers none")
        c = self._send(
            wire_messages(messages),
            shape_tools,
            ACTION_PURPOSE,
            self.action_tool_choice,
            max_tokens=self.action_tokens,
            draw=draw,
        )
        return predicted_call(c.message), c.usage

    @staticmethod
    def _run(by_name: Mapping[str, Tool], fn: Mapping[str, Any], calls: list[ToolCall]) -> str:
        # A harness answers every call; a bad one gets an error the model can read, and is still counted.
        name, raw = str(fn.get("name", "")), fn.get("arguments") or "{}"
        tool = by_name.get(name)
        try:
            # A reply's arguments are someone else's JSON: nested too deep is a ValueError like malformed.
            args = bounded_json.loads(raw) if isinstance(raw, str) else dict(raw)
            if tool is None:
                raise ValueError(f"tool {name!r} is not available here")
            result = tool(**args)
        except (ValueError, TypeError) as exc:
            calls.append(ToolCall(name or "?", {"raw": str(raw)[:500]}, ()))
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        calls.append(result.call)
        return result.content


@READERS.register("model", rank=30)
def model_reader(model: Any = None, **options: Any) -> Reader:
    """Build a model reader for the endpoint `model`, keeping only the options `ModelReader` takes."""
    allowed = set(inspect.signature(ModelReader).parameters) - {"config"}
    return ModelReader(model, **{k: v for k, v in options.items() if k in allowed})
