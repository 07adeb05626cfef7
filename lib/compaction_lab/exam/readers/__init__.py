"""Who answers the exam: the reader interface, the open-book tools and two offline stand-ins.

A reader gets what the agent would see after a compaction and one question: ``messages``, the
projection's chat messages exactly as `Projection.messages` returns them (the call shape's tool
definitions travel beside them as ``shape_tools``); ``question``, appended as the final user
message by `question_message`; ``tools``, the open-book tools (`Tool`), empty on the closed arm.
It returns a `ReaderAnswer`. Readers register in `READERS`; `get_reader` finds one by name.

Offline there are two stand-ins, labelled so in every table (``stand_in=True`` and a ``label``):

`VerbatimReader`
    The retention ceiling: answers a real question with its value iff the value (or an alias)
    occurs, normalised, in the messages; NOT_FOUND otherwise, and always for decoys.
`SearcherReader`
    What a diligent model would do with the open-book tools: answer from the projection, else
    search the archive and answer if the value is in what it read.

Both measure whether a value was *reachable*, not whether a model would pick it out. A model reader
(`compaction_lab.exam.readers.model`) implements the same `Reader` protocol.

Design: docs/exams.md#5-readers.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction_lab.core import bounded_json
from compaction_lab.core.registry import Registry, UnknownName
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.exam.grading import contains_answer, in_normalised, normalise
from compaction_lab.exam.readers.reading import (
    QUESTION_INSTRUCTION,
    SEARCH_MODES,
    Reader,
    ReaderAnswer,
    Tool,
    ToolCall,
    ToolResult,
    messages_text,
    messages_tokens,
    question_message,
    request_messages,
)
from compaction_lab.exam.types import NOT_FOUND, Question
from compaction_lab.store.archive import Archive

# --------------------------------------------------------------------------- open-book tools

#: ``history_search`` as an OpenAI function tool (our description).
HISTORY_SEARCH_TOOL: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": "history_search",
        "description": (
            "Full-text search over every original record of this session, including the parts that are no "
            "longer in your context. Words are matched literally; records containing all the words rank first, "
            "and if none contains them all, records containing any of them are returned. Returns entry ids "
            "with a short snippet; fetch an entry's full text with history_get."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for: identifiers, paths, names, numbers."},
                "session": {"type": "string", "description": "Session id to search; defaults to the current session."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "description": "Maximum number of hits (default 10).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}

#: ``history_get`` as an OpenAI function tool (our description).
HISTORY_GET_TOOL: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": "history_get",
        "description": "The full original text of one session entry, by the entry_id history_search returned.",
        "parameters": {
            "type": "object",
            "properties": {
                "entry_id": {"type": "string", "description": "An entry_id from history_search."},
                "session": {"type": "string", "description": "Session id; defaults to the current session."},
            },
            "required": ["entry_id"],
            "additionalProperties": False,
        },
    },
}

HISTORY_TOOL_DEFINITIONS: tuple[Mapping[str, Any], ...] = (HISTORY_SEARCH_TOOL, HISTORY_GET_TOOL)

#: What a ``history_search`` hit shows the reader, in this order (the tool result's JSON keys).
HIT_FIELDS = ("entry_id", "source_order", "kind", "tool", "target", "snippet")

#: What ``history_get`` shows of each original record, in this order.
RECORD_FIELDS = ("block_index", "source_order", "kind", "tool", "target", "text")


def _fields(obj: Any, names: Sequence[str]) -> dict[str, Any]:
    """Return the named attributes of `obj` as a dict, in the order given (a tool result's JSON object)."""
    return {name: getattr(obj, name) for name in names}


class HistoryTools:
    """``history_search`` / ``history_get`` over an archive, bound to one session, recording every call.

    Parameters
    ----------
    archive : Archive
    session_id : str
        The session the tools search by default (the one being examined).
    default_limit : int
        Hits a search returns when the caller gives no limit.

    Attributes
    ----------
    calls : list of ToolCall
        Every call made through this object, in order.

    Notes
    -----
    Search runs `Archive.search` (the exact phrase first, then records with
    every word); when that finds nothing it retries with any word, ranked by
    bm25 — what a person would do next, folded into one call so that a call
    count means "times the reader chose to look".
    """

    def __init__(self, archive: Archive, session_id: str, default_limit: int = 10):
        self.archive = archive
        self.session_id = session_id
        self.default_limit = int(default_limit)
        self.calls: list[ToolCall] = []

    def history_search(self, query: str, session: str | None = None, limit: int | None = None) -> ToolResult:
        """Search the archive (this session unless `session` is given)."""
        args: dict[str, Any] = {"query": query}
        if session is not None:
            args["session"] = session
        if limit is not None:
            args["limit"] = limit
        sid = session or self.session_id
        n = max(1, min(50, int(limit if limit is not None else self.default_limit)))
        try:
            hits = self.archive.search(query, session=sid, limit=n)
            if not hits:
                hits = self.archive.search(query, session=sid, limit=n, any_term=True)
        except ValueError as exc:  # empty or unusable query: the model sees the error, as from the CLI
            call = ToolCall("history_search", args, ())
            self.calls.append(call)
            return ToolResult(call, json.dumps({"error": str(exc)}))
        call = ToolCall("history_search", args, tuple(dict.fromkeys(h.entry_id for h in hits)))
        self.calls.append(call)
        content = json.dumps(
            {"hits": [_fields(h, HIT_FIELDS) for h in hits]},
            ensure_ascii=False,
        )
        return ToolResult(call, content, hits=tuple(hits))

    def history_get(self, entry_id: str, session: str | None = None) -> ToolResult:
        """Return the original records of one entry (this session unless `session` is given)."""
        args: dict[str, Any] = {"entry_id": entry_id}
        if session is not None:
            args["session"] = session
        records = self.archive.get(entry_id, session=session or self.session_id)
        call = ToolCall("history_get", args, (entry_id,) if records else ())
        self.calls.append(call)
        if not records:
            return ToolResult(call, json.dumps({"error": f"no entry {entry_id!r}"}))
        content = json.dumps(
            {
                "entry_id": entry_id,
                "records": [_fields(r, RECORD_FIELDS) for r in records],
            },
            ensure_ascii=False,
        )
        return ToolResult(call, content, records=tuple(records))

    def dispatch(self, name: str, arguments: Mapping[str, Any] | str) -> ToolResult:
        """Run a tool call by name with JSON (or dict) arguments, as a model reader receives them."""
        args = bounded_json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        if name == "history_search":
            return self.history_search(**args)
        if name == "history_get":
            return self.history_get(**args)
        raise ValueError(f"unknown tool {name!r}")

    def tools(self) -> tuple[Tool, Tool]:
        """Both tools as `Tool` objects (definitions + bound functions)."""
        return (
            Tool("history_search", HISTORY_SEARCH_TOOL, self.history_search),
            Tool("history_get", HISTORY_GET_TOOL, self.history_get),
        )


# --------------------------------------------------------------------------- content words

#: Words a search for a question's value skips: function words, question words and the
#: exam's own verbs (who said / reported / chose it), which name the speaker, not the value.
#: HTTP and shell verbs (get, put, set, make) are kept: they name endpoints and commands.
STOP_WORDS: frozenset[str] = frozenset(
    """
a an the and or but nor of for to in on at by with from into onto over under about after before during
as than then so if is are was were be been being do does did done has have had having it its this that these
those there here i you he she we they me him her us them my your our their what which who whom whose when where
why how any some all each every no not only just also very more most such same other own
can could should would will shall may might must
say says said tell told ask asked give gave given choose chose chosen decide decided pick picked
report reported reports name named call called return returned returns print printed prints
use used using got run ran exact exactly value values
assistant user agent model session conversation
""".split()
)

_TOKEN = re.compile(r"`[^`]+`|\S+")
#: "step 212", "at step #212": positions in a transcript, not text any record contains.
_STEP = re.compile(r"\b(?:at\s+)?steps?\s+#?\d+\b", re.IGNORECASE)
_EDGE = "\"'`()[]{}<>,.;:!?\u2018\u2019\u201c\u201d"


def content_words(prompt: str) -> list[str]:
    """Return the words of a question worth searching for, in the question's order, without repeats.

    Backticked spans are kept whole, even when they hold a stop word; step
    numbers ("at step 212") are dropped, since a position in the transcript is
    not text any record contains; function words, question words and the
    exam's speaker verbs (`STOP_WORDS`) are dropped; identifiers, paths,
    numbers and names are kept as written, surrounding punctuation stripped.

    Examples
    --------
    >>> content_words("What ID did the `create_order` call at step 212 return?")
    ['ID', 'create_order']
    """
    words: list[str] = []
    for tok in _TOKEN.findall(_STEP.sub(" ", prompt)):
        if tok.startswith("`") and tok.endswith("`") and len(tok) > 1:
            span = tok.strip("`").strip()
            if span:
                words.append(span)
            continue
        w = tok.strip(_EDGE)
        if w.endswith("'s"):
            w = w[:-2]
        if w and w.casefold() not in STOP_WORDS:
            words.append(w)
    return list(dict.fromkeys(words))


# --------------------------------------------------------------------------- readers


_LAST_HAY: list[Any] = [None, (), {}]  # the messages list last read, its shape, and what was computed of it
_HAY_LOCK = threading.Lock()


def _of_messages(messages: list[dict], what: Hashable, compute: Callable[[], Any]) -> Any:
    """`compute()` for this messages list, computed once per list (`what` names the quantity).

    The closed book asks every question of a projection with the same list; normalising (or counting)
    a 100k-token projection once per question was most of the exam's time. The list is held (one at
    a time) and matched by identity (and its length and last message, should a caller append to it),
    so a new projection is never answered from an old one's text.
    """
    shape = (len(messages), id(messages[-1]) if messages else None)
    with _HAY_LOCK:
        if _LAST_HAY[0] is not messages or _LAST_HAY[1] != shape:
            _LAST_HAY[:] = [messages, shape, {}]
        known = _LAST_HAY[2]
        if what not in known:
            known[what] = compute()
        return known[what]


def _normalised(messages: list[dict]) -> str:
    """`grading.normalise` of the messages' text, computed once per messages list (`_of_messages`)."""
    return str(_of_messages(messages, "normalised", lambda: normalise(messages_text(messages))))


def _request_tokens(messages: list[dict], question: Question, wording: str, encoding: str) -> int:
    """`messages_tokens` of the request (the messages, then the question's), the messages counted once per list.

    A request's count is the sum of its messages' counts, so the projection's part is the same for
    every question asked of it.
    """
    head = int(_of_messages(messages, ("tokens", encoding), lambda: messages_tokens(messages, encoding)))
    return head + messages_tokens([question_message(question, wording)], encoding)


#: Every reader by name: ``factory(**options) -> Reader``, registered where it is defined. A reader that
#: cannot fall for a decoy by construction (it answers only what is there, and a decoy's value is
#: nowhere) registers with ``decoy_blind=True``: with it a decoy result carries no information and is
#: shown as not measured. Discovery imports every module of this package (`readers.model`, ...).
READERS: Registry[Callable[..., Reader]] = Registry(
    "reader",
    packages=("compaction_lab.exam.readers",),
)


def measures_decoys(reader: str) -> bool:
    """Tell whether answers of the reader named `reader` say anything about decoys (only a model reader's do)."""
    return not (reader in READERS and READERS.entry(reader).meta.get("decoy_blind", False))


#: Shown instead of a decoy count when no reader of the table could fall for one.
DECOYS_NOT_MEASURED = "decoys: not measured (needs a model reader)"


@dataclass(frozen=True)
class VerbatimReader:
    """The retention ceiling: a value is answered iff it occurs verbatim (normalised) in the messages.

    An offline stand-in, labelled "verbatim reader (retention ceiling)". Decoys
    are always answered NOT_FOUND. Tools are ignored. ``input_tokens`` is the
    report-token size of the request (projection messages + question message).
    """

    encoding: str = DEFAULT_ENCODING
    name: str = "verbatim"
    label: str = "verbatim reader (retention ceiling)"
    stand_in: bool = True

    def answer(
        self,
        messages: list[dict],
        question: Question,
        tools: Sequence[Tool] = (),
        *,
        wording: str = "",
        shape_tools: Sequence[Mapping[str, Any]] = (),
    ) -> ReaderAnswer:
        """Answer the value iff it occurs (normalised) in `messages`; NOT_FOUND otherwise and for decoys."""
        present = not question.decoy and in_normalised(question, _normalised(messages))
        return ReaderAnswer(
            question.answer if present else NOT_FOUND,
            input_tokens=_request_tokens(messages, question, wording, self.encoding),
            output_tokens=0,
            tool_calls=(),
            stand_in=True,
        )


@dataclass(frozen=True)
class SearcherReader:
    """The open-book stand-in: answer from the projection, else search the archive like a diligent model.

    Parameters
    ----------
    search : str
        ``allowed``: search only when the projection lacks the value (and tools
        were given). ``required``: always search first, then answer from what
        was read or from the projection. ``never``: the closed arm; no calls.
    k : int
        Hits read with ``history_get`` after a search (top k distinct entries).
    search_limit : int
        Hits asked of ``history_search``.
    encoding : str

    Notes
    -----
    One search per question, with the question's `content_words` (for a decoy
    too: the value is nowhere, so it answers NOT_FOUND). The reader never
    reads the round's wording, so rounds that differ only in wording give
    identical answers by construction. ``input_tokens`` counts the request
    plus every tool result's content (what a model would have had to read).
    """

    search: str = "allowed"
    k: int = 3
    search_limit: int = 10
    encoding: str = DEFAULT_ENCODING
    name: str = "searcher"
    label: str = "searcher stand-in"
    stand_in: bool = True

    def __post_init__(self) -> None:
        """Check the search mode and `k`."""
        if self.search not in SEARCH_MODES:
            raise ValueError(f"search must be one of {SEARCH_MODES}, got {self.search!r}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")

    def answer(
        self,
        messages: list[dict],
        question: Question,
        tools: Sequence[Tool] = (),
        *,
        wording: str = "",
        shape_tools: Sequence[Mapping[str, Any]] = (),
    ) -> ReaderAnswer:
        """Answer from the projection, or search and read the archive as `search` allows (see the class)."""
        tokens = _request_tokens(messages, question, wording, self.encoding)
        in_projection = not question.decoy and in_normalised(question, _normalised(messages))
        by_name = {t.name: t for t in tools}
        can_search = self.search != "never" and {"history_search", "history_get"} <= set(by_name)
        if not can_search or (self.search == "allowed" and in_projection):
            return ReaderAnswer(question.answer if in_projection else NOT_FOUND, tokens, 0, (), True)

        calls: list[ToolCall] = []
        contents: list[str] = []  # tool results as a model receives them (sized)
        texts: list[str] = []  # the original records fetched (searched for the value)
        query = " ".join(content_words(question.prompt))
        if query:
            found = by_name["history_search"](query=query, limit=self.search_limit)
            calls.append(found.call)
            contents.append(found.content)
            for entry_id in found.call.result_entry_ids[: self.k]:
                got = by_name["history_get"](entry_id=entry_id)
                calls.append(got.call)
                contents.append(got.content)
                texts.extend(r.text for r in got.records)
        if contents:
            tokens += sum(counter(self.encoding).count_many(contents))
        # Only fetched records count as read: a search snippet is cut around the match and bracketed.
        seen = not question.decoy and (in_projection or contains_answer(question, "\n\n".join(texts)))
        return ReaderAnswer(question.answer if seen else NOT_FOUND, tokens, 0, tuple(calls), True)


# Both answer only what they can see, and a decoy's value is nowhere: they cannot fall for one.
READERS.add("verbatim", VerbatimReader, rank=10, decoy_blind=True)
READERS.add("searcher", SearcherReader, rank=20, decoy_blind=True)


__all__ = [
    "DECOYS_NOT_MEASURED",
    "HISTORY_GET_TOOL",
    "HISTORY_SEARCH_TOOL",
    "HISTORY_TOOL_DEFINITIONS",
    "HistoryTools",
    "QUESTION_INSTRUCTION",
    "READERS",
    "Reader",
    "ReaderAnswer",
    "SEARCH_MODES",
    "STOP_WORDS",
    "SearcherReader",
    "Tool",
    "ToolCall",
    "ToolResult",
    "VerbatimReader",
    "measures_decoys",
    "content_words",
    "messages_text",
    "messages_tokens",
    "question_message",
    "request_messages",
]


def get_reader(name: str, **kwargs: Any) -> Reader:
    """Return the reader registered under `name` (`READERS`): ``verbatim``, ``searcher`` or ``model``.

    ``verbatim`` is the closed-book retention ceiling and ``searcher`` the open-book stand-in: both are
    stand-ins and say so. ``model`` is a real model (`exam.readers.model.ModelReader`; pass ``model=`` its
    configuration), labelled with the model's name. Keyword arguments a reader does not take are ignored,
    so one call serves every reader (a factory taking ``**options`` receives them all and picks its own).

    Raises
    ------
    ValueError
        When no reader has that name (the message lists the registered ones).
    """
    try:
        factory = READERS.get(name)
    except UnknownName:
        raise ValueError(f"unknown reader {name!r}; available: {', '.join(READERS.names())}") from None
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return factory(**kwargs)
    return factory(**{k: v for k, v in kwargs.items() if k in params})


def reader_factory(name: str, **fixed: Any) -> Callable[..., Reader]:
    """``factory(search=..., k=...) -> Reader`` for the open-book rounds (`open_book.run_open_book`).

    `fixed` goes to every reader made (e.g. ``model=`` for the model reader,
    which ignores the round's search mode: a model's rounds differ by wording
    and by whether it has the tools).
    """
    return lambda **per_round: get_reader(name, **{**fixed, **per_round})
