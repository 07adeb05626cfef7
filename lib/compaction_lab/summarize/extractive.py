"""The ``extractive`` summarizer: an offline, deterministic, model-free summary stand-in.

It answers a strategy's `SummaryRequest` by filling the strategy's own template
(``request.template``) with text copied verbatim out of the request's messages:
it never invents, paraphrases or reorders, so what it keeps is exact and what it
drops is absent. Its output is always labelled "extractive stand-in"
(`compaction_lab.core.projection.STAND_IN_LABEL`), stays within
``request.max_output_tokens``, and its usage numbers are sizes, not a bill.

Design (what it reads, the categories it extracts, how the cap is kept, cost,
usage numbers): docs/architecture.md#the-extractive-stand-in
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from compaction_lab.core.fingerprints import tools_text
from compaction_lab.core.projection import SummaryRequest
from compaction_lab.core.text import content_text
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.summarize.base import SUMMARIZERS, Summarizer, SummaryResult

# --------------------------------------------------------------------------- scaffolding

#: Text written when a section has no item.
NONE_TEXT = "(none)"
#: Prefix of every item line.
BULLET = "- "
#: Appended to an item cut short.
TRUNCATION_MARK = "…"
#: Items shorter than this (tokens) are not worth adding when room runs out.
MIN_ITEM_TOKENS = 6


@dataclass(frozen=True)
class Section:
    """One heading of a template.

    Parameters
    ----------
    heading : str
        The full heading line, Markdown (``## Objective``).
    source : str, optional
        Category that fills it (see the module docstring); None for a heading
        that only groups sub-sections (no items, no "(none)").
    priority : int
        Lower fills first within each round.
    item_tokens : int
        Per-item cap; longer items are truncated.
    max_items : int
        Most items the section takes.
    """

    heading: str
    source: str | None
    priority: int = 50
    item_tokens: int = 80
    max_items: int = 20


@dataclass(frozen=True)
class Template:
    """A summary format: its sections in reading order."""

    name: str
    sections: tuple[Section, ...]

    def headings(self) -> tuple[str, ...]:
        """Return the section headings in reading order."""
        return tuple(s.heading for s in self.sections)


def _handoff(name: str) -> Template:
    # Codex / FutureOS: progress and decisions; context, constraints and user
    # preferences; remaining work; critical data and references.
    return Template(
        name,
        (
            Section("## Progress and key decisions", None),
            Section("### Current state", "state", 20, 100, 2),
            Section("### Decisions", "decisions", 30, 70, 15),
            Section("### Completed", "completed", 60, 60, 10),
            Section("## Context, constraints and user preferences", "user", 10, 120, 40),
            Section("## Remaining work and next steps", "next", 25, 80, 6),
            Section("## Critical data and references", None),
            Section("### Identifiers and values", "identifiers", 35, 30, 40),
            Section("### Errors", "errors", 40, 70, 12),
            Section("### Files", "files", 45, 30, 40),
        ),
    )


#: The templates strategies ask for, by `SummaryRequest.template` name.
TEMPLATES: dict[str, Template] = {
    "futureos-handoff": _handoff("futureos-handoff"),
    "codex-handoff": _handoff("codex-handoff"),
    "opencode-template": Template(
        "opencode-template",
        (
            Section("## Objective", "primary", 10, 120, 2),
            Section("## Important Details", "details", 30, 60, 40),
            Section("## Work State", None),
            Section("### Completed", "completed", 50, 60, 12),
            Section("### Active", "state", 20, 100, 2),
            Section("### Blocked", "errors", 40, 70, 8),
            Section("## Next Move", "next", 25, 80, 5),
            Section("## Relevant Files", "files", 45, 30, 40),
        ),
    ),
    "claude-code-9": Template(
        "claude-code-9",
        (
            Section("## 1. Primary Request and Intent", "primary", 10, 120, 2),
            Section("## 2. Key Technical Concepts", "concepts", 40, 30, 40),
            Section("## 3. Files and Code Sections", "files", 35, 30, 40),
            Section("## 4. Errors and Fixes", "errors", 30, 70, 12),
            Section("## 5. Problem Solving", "decisions", 45, 70, 15),
            Section("## 6. All User Messages", "user", 15, 100, 60),
            Section("## 7. Pending Tasks", "next", 25, 80, 5),
            Section("## 8. Current Work", "state", 20, 100, 2),
            Section("## 9. Optional Next Step", "next_one", 50, 80, 1),
        ),
    ),
}

#: Used when a request names a template this summarizer does not know.
GENERIC_TEMPLATE = Template(
    "generic-handoff",
    (
        Section("## User requests", "user", 10, 120, 40),
        Section("## Current state", "state", 20, 100, 2),
        Section("## Next steps", "next", 25, 80, 6),
        Section("## Decisions", "decisions", 30, 70, 15),
        Section("## Identifiers and values", "identifiers", 35, 30, 40),
        Section("## Errors", "errors", 40, 70, 12),
        Section("## Files", "files", 45, 30, 40),
    ),
)


#: Readers of request shapes `conversation` does not know, by template name (`register_template`).
READERS: dict[str, Any] = {}


def register_template(template: Template, reader: Any = None) -> Template:
    """Make `template` known to the stand-in (a strategy module calls this at import).

    Parameters
    ----------
    template : Template
        Filled for requests whose ``template`` is ``template.name``.
    reader : callable, optional
        ``reader(request) -> list[Block]``: the conversation of a request
        whose shape `conversation` cannot read (an agent that flattens the
        transcript its own way, e.g. Aider's ``# USER`` / ``# ASSISTANT``).

    Returns the template, so a module can keep it in a constant.
    """
    known = TEMPLATES.get(template.name)
    if known is not None and known != template:
        raise ValueError(f"template {template.name!r} registered twice with different sections")
    TEMPLATES[template.name] = template
    if reader is not None:
        READERS[template.name] = reader
    return template


def template_for(name: str) -> Template:
    """Return the template a request names, or the generic handoff."""
    return TEMPLATES.get(name, GENERIC_TEMPLATE)


def empty_template(name: str) -> str:
    """Render the named template with every section "(none)" (what a strategy shows with no summarizer)."""
    return _render(template_for(name), {})


# --------------------------------------------------------------------------- reading the request


@dataclass(frozen=True)
class Block:
    """One piece of the conversation recovered from a request."""

    role: str  # user | assistant | reasoning | tool_call | tool_result | tool_error | summary | other
    text: str
    pos: int


_LABELS: dict[str, str] = {
    "user": "user",
    "assistant": "assistant",
    "assistant reasoning": "reasoning",
    "assistant thinking": "reasoning",  # pi's serializeConversation
    "assistant tool call": "tool_call",
    "assistant tool calls": "tool_call",  # pi's serializeConversation
    "tool result": "tool_result",
    "tool error": "tool_error",
    "previous summary": "summary",
    "injected context": "context",
    "summary": "summary",
    "system": "other",
}
_LABEL_ALT = "|".join(re.escape(k) for k in sorted(_LABELS, key=len, reverse=True))
_BLOCK_RE = re.compile(rf"^\[({_LABEL_ALT})\]: ?", re.M | re.I)
_WRAPPED_RE = re.compile(rf"<([A-Za-z][\w-]*)>\s*(\[(?:{_LABEL_ALT})\]: .*?)</\1>", re.S | re.I)
_PRIOR_RE = re.compile(r"<prior-summary>(.*?)</prior-summary>", re.S | re.I)
_CALL_PARA_RE = re.compile(r"^[A-Za-z_][\w.:-]{0,63} \{.*\}\s*$", re.S)
_INJECTED_RE = re.compile(r"^\s*(?:<[A-Za-z][\w-]*[ >]|# AGENTS\.md)")


def _tool_call_args(message: Mapping[str, Any]) -> list[str]:
    """Argument strings of an assistant message's ``tool_calls``."""
    out = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        fn: Mapping[str, Any] = function if isinstance(function, Mapping) else call
        args = fn.get("arguments")
        if isinstance(args, str):
            out.append(args)
        elif args is not None:
            out.append(json.dumps(args, sort_keys=True, ensure_ascii=False))
    return out


def parse_blocks(text: str, start: int = 0) -> list[Block]:
    """Split a flattened transcript into labelled blocks."""
    m = _WRAPPED_RE.search(text)
    if m:
        text = m.group(2)
    marks = list(_BLOCK_RE.finditer(text))
    out: list[Block] = []
    for i, mk in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mk.end() : end].strip()
        if body:
            out.append(Block(_LABELS[mk.group(1).lower()], body, start + len(out)))
    return out


def conversation(request: SummaryRequest) -> list[Block]:
    """Read the conversation a request asks to summarise, as blocks in order (instruction excluded)."""
    own = READERS.get(request.template)
    if own is not None:
        return list(own(request))
    msgs = list(request.messages)
    blocks: list[Block] = []
    if request.shape == "dedicated":
        prior: list[str] = []
        for m in msgs:
            if m.get("role") != "user":
                continue
            text = content_text(m.get("content"))
            # OpenCode places an earlier compaction's summary after the conversation as <prior-summary>:
            # it is the oldest part of what is summarised, so it leads.
            prior += [p.strip() for p in _PRIOR_RE.findall(text) if p.strip()]
            blocks.extend(parse_blocks(_PRIOR_RE.sub("", text), len(blocks)))
        if prior:
            blocks = [Block("summary", t, i) for i, t in enumerate(prior)] + [
                replace(b, pos=len(prior) + i) for i, b in enumerate(blocks)
            ]
        return blocks
    if msgs and msgs[-1].get("role") == "user":
        msgs = msgs[:-1]  # the compaction instruction
    for m in msgs:
        role = m.get("role")
        text = content_text(m.get("content"))
        if role == "user":
            kind = "user"
        elif role == "assistant":
            kind = "assistant"
        elif role == "tool":
            kind = "tool_result"
        else:
            continue
        if kind == "assistant":
            # strategies join an assistant turn's prose and its tool calls ("bash {...}") into one
            # message; paragraphs shaped like a call count as tool calls
            prose: list[str] = []
            for para in text.split("\n\n"):
                if _CALL_PARA_RE.match(para):
                    if prose:
                        blocks.append(Block("assistant", "\n\n".join(prose), len(blocks)))
                        prose = []
                    blocks.append(Block("tool_call", para, len(blocks)))
                elif para.strip():
                    prose.append(para)
            if prose:
                blocks.append(Block("assistant", "\n\n".join(prose), len(blocks)))
        elif text.strip():
            blocks.append(Block(kind, text, len(blocks)))
        if role == "assistant":
            for args in _tool_call_args(m):
                blocks.append(Block("tool_call", args, len(blocks)))
    return blocks


def request_text(request: SummaryRequest) -> str:
    """Every piece of text the request carries (system, tools, messages), for provenance checks."""
    parts = [request.system, _tools_json(request.tools)]
    for m in request.messages:
        parts.append(content_text(m.get("content")))
        parts.extend(_tool_call_args(m))
    return "\n".join(parts)


def _tools_json(tools: Iterable[Mapping[str, Any]]) -> str:
    # `tools_text`, except that no tools read "[]" rather than "": the stand-in's input tokens of a
    # request without tools have always counted those two characters.
    return tools_text(list(tools)) or "[]"


# --------------------------------------------------------------------------- extraction

_WS = re.compile(r"\s+")


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*])|\n+")

#: Extensions that make a bare name (no slash) count as a file.
FILE_EXTENSIONS = frozenset(
    "py pyi ipynb ts tsx js jsx mjs cjs rs go java kt kts rb php c h cc cpp hpp cs swift scala sh bash zsh ps1 "
    "toml yaml yml json jsonl xml ini cfg conf lock md rst txt csv tsv sql proto graphql html htm css scss "
    "vue svelte mk gradle tf lua pl ex exs erl hs ml dart zig patch diff parquet sqlite".split()
)
_PATH_RE = re.compile(
    r"(?<![\w/.:@~\\-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"
    r"|(?<![\w/.:@~\\-])[\w@+-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,7}\b"
)
_EXT_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_NOT_FILE_EXT = frozenset({"com", "org", "net", "io", "e", "g", "i", "eg", "ie", "etc", "vs"})

# (kept free of leading \w* / \b so one pass over megabytes of tool output stays fast; the whole line is taken)
_ERROR_RE = re.compile(
    r"(?:Error|Exception)\b|Traceback|FAIL|ERROR|[Ee]rror[:\[]|fatal:|panic|fail(?:ed|ure)\b|No such file"
    r"|Permission denied|timed out\b|not found\b|cannot\b|could not\b"
)
_STRONG_ERROR_RE = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b|Traceback|\bFAILED\b|\bpanicked\b|[Ee]rror:|\b[1-9]\d* (?:errors?|failed)\b"
)
_BENIGN_RE = re.compile(r"\b(?:0|no|zero) (?:errors?|failures?|failed|issues?)\b", re.I)
# source code that merely mentions an error type (a file listing), not an error that happened
_CODE_LINE_RE = re.compile(r"\b(?:raise|except|throw|catch|import|def|class|return|fn|impl)\b")

_ID_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?=[A-Z0-9-]*\d)[A-Z][A-Z0-9]+(?:-[A-Z0-9]+)+\b"),  # ticket-style ids: ORD-58213-QX
    re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"`<>)\]]+"),  # URIs
    re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?\b"),  # IPv4 [+ port]
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b"),  # hex hashes
    re.compile(  # numbers with units (and grouped numbers)
        r"\b\d+(?:[.,]\d+)*\s?(?:ms|µs|us|ns|s|sec|secs|seconds|min|minutes|h|hours|KiB|MiB|GiB|KB|MB|GB|TB|"
        r"kB|bytes|req/s|rps|qps|tokens|rows|records|files|lines|attempts|retries)\b(?!/)"
        r"|\b\d+(?:\.\d+)?%|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b"
    ),
)
#: All value patterns in one pass (cheaper than one pass each).
_ID_RE = re.compile("|".join(f"(?:{p.pattern})" for p in _ID_PATTERNS))
# prose only: snake/kebab tokens with a digit (flag names, keys), back-quoted values
_PROSE_ID_RE = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)+\b")
_BACKTICK_RE = re.compile(r"`([^`\n]{1,120})`")

_DECISION_RE = re.compile(
    r"\b(?:I chose|I've chosen|chose|decided|decide|I'll|I will|I'm going with|going with|because|switched|"
    r"switching|opted|instead of|settled on|prefer)\b",
    re.I,
)
_COMPLETED_RE = re.compile(
    r"\b(?:done|fixed|added|updated|created|implemented|passed|passes|now pass|resolved|merged|committed|"
    r"removed|renamed|refactored|wrote|finished|completed|succeeded)\b",
    re.I,
)
_NEXT_RE = re.compile(
    r"\b(?:next|then|I'll|I will|let me|let's|need to|needs to|still|remaining|todo|going to|should|will)\b",
    re.I,
)

#: Newest-first scans of tool text stop after this many candidates (bounds the work on huge requests;
#: sections take at most a few dozen items, so the ones skipped could never be shown).
_SCAN_ERRORS = 120
_SCAN_TOOL_IDS = 400
#: Tool-call arguments are scanned for values in their first characters only (an edit's new file
#: content is not a reference the call makes).
_CALL_SCAN_CHARS = 2_000

_PROSE = ("assistant", "reasoning")
_TOOL_OUT = ("tool_result", "tool_error")


@dataclass(frozen=True)
class Item:
    """One candidate bullet: its text (copied from the request) and where it was found."""

    text: str
    pos: int


_LIST_MARK = re.compile(r"^(?:[-*+•>]+|\d+[.)])\s+")
#: A tool output that is only a bracketed placeholder ("[Old tool result content cleared]") says nothing.
_PLACEHOLDER = re.compile(r"^\s*\[[^\]\n]{0,200}\]\s*$")


#: Texts kept by the per-text scans below. Every arm's summary request at a case holds mostly the same
#: records, and the cases of a session overlap, so each record's text was scanned again and again.
_SCANNED_TEXTS = 4096


@functools.lru_cache(maxsize=_SCANNED_TEXTS)
def _sentences(text: str) -> tuple[str, ...]:
    """Return the sentences and lines of prose, whitespace collapsed, list markers dropped."""
    out = []
    for part in _SENTENCE_SPLIT.split(text):
        c = _LIST_MARK.sub("", _collapse(part))
        if len(c) >= 12:
            out.append(c)
    return tuple(out)


@functools.lru_cache(maxsize=_SCANNED_TEXTS)
def _ids_of(text: str) -> tuple[str, ...]:
    """Return the identifiers `_ID_RE` finds in `text`, in order, trailing punctuation dropped."""
    return tuple(m.group(0).rstrip(".,;:") for m in _ID_RE.finditer(text))


@functools.lru_cache(maxsize=_SCANNED_TEXTS)
def _paths_of(text: str) -> tuple[str, ...]:
    """Return the file paths `_PATH_RE` finds in `text` that `_clean_path` keeps, in order."""
    return tuple(p for p in (_clean_path(m.group(0)) for m in _PATH_RE.finditer(text)) if p is not None)


def _dedupe(items: Iterable[Item]) -> list[Item]:
    seen: dict[str, None] = {}
    out = []
    for it in items:
        if it.text and it.text not in seen:
            seen[it.text] = None
            out.append(it)
    return out


def _is_injected(text: str) -> bool:
    return bool(_INJECTED_RE.match(text))


def _clean_path(p: str) -> str | None:
    p = p.rstrip(".,;:")
    if len(p) < 3 or len(p) > 240:
        return None
    last = p.rsplit("/", 1)[-1]
    ext = _EXT_RE.search(last)
    if ext and not last[: ext.start()].isdigit():
        e = ext.group(0)[1:].lower()
        if e in FILE_EXTENSIONS or ("/" in p and e not in _NOT_FILE_EXT):
            return p
    if p.startswith(("/", "~/", "./", "../")) and p.count("/") >= 2:
        return p
    return None


@functools.lru_cache(maxsize=_SCANNED_TEXTS)
def _matching_lines(text: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    """Find the lines of `text` in which `pattern` matches, in order (scans the text once)."""
    out, last_start = [], -1
    for m in pattern.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start == last_start:
            continue
        end = text.find("\n", m.end())
        out.append(text[start:] if end < 0 else text[start:end])
        last_start = start
    return tuple(out)


def extract(blocks: Sequence[Block]) -> dict[str, list[Item]]:
    """Candidate items per category, each list in priority order (best first)."""
    users = [b for b in blocks if b.role == "user" and not _is_injected(b.text)]
    prose = [b for b in blocks if b.role in _PROSE]
    assistants = [b for b in blocks if b.role == "assistant"] or prose
    calls = [b for b in blocks if b.role == "tool_call"]
    outputs = [b for b in blocks if b.role in _TOOL_OUT and not _PLACEHOLDER.match(b.text)]

    user_items = _dedupe(Item(_collapse(b.text), b.pos) for b in users)
    primary = user_items[:1] + ([user_items[-1]] if len(user_items) > 1 else [])

    # files: (from a tool call?, mentions, last position)
    file_stats: dict[str, list[int]] = {}
    for group, weight in ((calls, 1), (users, 0), (prose, 0)):
        for b in group:
            for p in _paths_of(b.text[:_CALL_SCAN_CHARS] if weight else b.text):
                st = file_stats.setdefault(p, [0, 0, -1, b.pos])
                st[0] = max(st[0], weight)
                st[1] += 1
                st[2] = max(st[2], b.pos)
    ranked = sorted(file_stats.items(), key=lambda kv: (-kv[1][0], -kv[1][1], -kv[1][2], kv[0]))
    files = [Item(p, st[3]) for p, st in ranked]

    errors: list[Item] = []
    for b in reversed(outputs):
        if len(errors) >= _SCAN_ERRORS:
            break  # newest first: older errors could not make the cut anyway
        lines = []
        for line in _matching_lines(b.text, _ERROR_RE):
            if _BENIGN_RE.search(line) and not _STRONG_ERROR_RE.search(line):
                continue
            if _CODE_LINE_RE.search(line) and "Error:" not in line and "Traceback" not in line:
                continue
            c = _collapse(line)
            if len(c) >= 4 and c not in lines:
                lines.append(c)
        if not lines and b.role == "tool_error":
            first = next((_collapse(ln) for ln in b.text.splitlines() if ln.strip()), "")
            lines = [first] if first else []
        picked = lines[:2] + lines[-1:] if len(lines) > 3 else lines
        errors.extend(Item(t, b.pos) for t in picked)
    errors = _dedupe(errors)

    ids: list[Item] = []
    ticks: list[Item] = []
    for group, prose_like in ((users, True), (prose, True), (calls, False), (outputs, False)):
        found: list[Item] = []
        for b in reversed(group):
            if not prose_like and len(found) >= _SCAN_TOOL_IDS:
                break  # newest first: tool values further back rank below the ones found
            if prose_like:
                for m in _BACKTICK_RE.finditer(b.text):
                    t = _collapse(m.group(1))
                    if any(ch.isalnum() for ch in t):
                        ticks.append(Item(t, b.pos))
                        found.append(Item(t, b.pos))
                found.extend(Item(m.group(0), b.pos) for m in _PROSE_ID_RE.finditer(b.text))
            text = b.text[:_CALL_SCAN_CHARS] if b.role == "tool_call" else b.text
            found.extend(Item(t, b.pos) for t in _ids_of(text))
        ids.extend(found)
    file_names = {f.text for f in files}
    identifiers = [it for it in _dedupe(ids) if it.text not in file_names and len(it.text) >= 3]
    concepts = _dedupe([*ticks, *identifiers])

    decisions = _dedupe(
        Item(s, b.pos) for b in reversed(prose) for s in reversed(_sentences(b.text)) if _DECISION_RE.search(s)
    )
    completed = _dedupe(
        Item(s, b.pos) for b in reversed(assistants) for s in reversed(_sentences(b.text)) if _COMPLETED_RE.search(s)
    )

    state: list[Item] = [Item(_collapse(b.text), b.pos) for b in reversed(assistants[-2:])]
    if calls:
        state.append(Item(_collapse(calls[-1].text), calls[-1].pos))
    state = _dedupe(state)

    last_assistant = assistants[-1].pos if assistants else -1
    nxt = [it for it in reversed(user_items) if it.pos > last_assistant]
    for b in reversed(assistants[-3:]):
        nxt.extend(Item(s, b.pos) for s in reversed(_sentences(b.text)) if _NEXT_RE.search(s))
    nxt = _dedupe(nxt)

    details = _dedupe([*identifiers[:20], *decisions[:10], *identifiers[20:], *decisions[10:]])
    return {
        "user": user_items,
        "primary": primary,
        "files": files,
        "errors": errors,
        "identifiers": identifiers,
        "concepts": concepts,
        "decisions": decisions,
        "completed": completed,
        "state": state,
        "next": nxt,
        "next_one": nxt[:1],
        "details": details,
    }


#: Categories shown in rank order (best first: newest, or most acted on); the others in conversation order.
_NEWEST_FIRST = frozenset({"state", "next", "next_one", "files", "identifiers", "concepts", "details"})


# --------------------------------------------------------------------------- filling within the cap


def _render(template: Template, chosen: Mapping[int, Sequence[str]]) -> str:
    parts = []
    for i, sec in enumerate(template.sections):
        lines = [sec.heading]
        if sec.source is not None:
            items = chosen.get(i) or ()
            if items:
                lines.extend(BULLET + t for t in items)
            else:
                lines.append(NONE_TEXT)
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


class _Truncator:
    def __init__(self, encoding: str):
        self.enc = counter(encoding).encoding

    def cut(self, text: str, n: int) -> str:
        """Cut `text` to a token-boundary prefix of about `n` tokens, with the truncation mark."""
        n = max(1, n - 1)  # room for the mark
        head = text[: n * 16]
        ids = self.enc.encode_ordinary(head)
        if len(ids) <= n and len(head) < len(text):
            ids = self.enc.encode_ordinary(text)
        if len(ids) <= n:
            return text
        prefix = self.enc.decode(ids[:n], errors="replace").rstrip("\ufffd").rstrip()
        return prefix + TRUNCATION_MARK


def fill(
    template: Template, candidates: Mapping[str, Sequence[Item]], cap: int, encoding: str = DEFAULT_ENCODING
) -> str:
    """Render `template` with as many candidate items as fit in `cap` report tokens."""
    if cap <= 0:
        return ""
    count = counter(encoding)
    empty = _render(template, {})
    if count.count(empty) > cap:
        lines = empty.split("\n")
        while lines and count.count("\n".join(lines)) > cap:
            lines.pop()
        return "\n".join(lines).rstrip()

    leaves = [(i, s) for i, s in enumerate(template.sections) if s.source is not None]
    order = sorted(leaves, key=lambda t: (t[1].priority, t[0]))
    pools = {i: list(candidates.get(s.source or "", ()))[: s.max_items] for i, s in leaves}  # leaves have a source
    sizes = dict(
        zip(
            (id(it) for i, _ in leaves for it in pools[i]),
            count.count_many([it.text for i, _ in leaves for it in pools[i]]),
            strict=False,
        )
    )
    trunc = _Truncator(encoding)
    used = count.count(empty)
    picked: dict[int, list[tuple[Item, str, int]]] = {i: [] for i, _ in leaves}
    history: list[int] = []  # section index of each added item, in order added
    full = False
    rnd = 0
    while not full and any(rnd < len(pools[i]) for i, _ in leaves):
        for i, sec in order:
            if rnd >= len(pools[i]):
                continue
            it = pools[i][rnd]
            text, n = it.text, sizes[id(it)]
            if n > sec.item_tokens:
                text = trunc.cut(it.text, sec.item_tokens)
                n = count.count(text)
            cost = n + 2  # bullet + newline
            room = cap - used
            if cost > room:
                if room - 2 < MIN_ITEM_TOKENS:
                    full = True
                    break
                text = trunc.cut(it.text, room - 3)
                n = count.count(text)
                cost = n + 2
                full = True
            picked[i].append((it, text, n))
            history.append(i)
            used += cost
            if full:
                break
        rnd += 1

    def render() -> str:
        chosen = {}
        for i, sec in leaves:
            rows = picked[i]
            if sec.source in _NEWEST_FIRST:
                chosen[i] = [t for _, t, _ in rows]
            else:
                chosen[i] = [t for _, t, _ in sorted(rows, key=lambda r: r[0].pos)]
        return _render(template, chosen)

    text = render()
    total = count.count(text)
    while total > cap and history:
        i = history[-1]
        it, cur, n = picked[i][-1]
        excess = total - cap
        if n - excess - 2 >= MIN_ITEM_TOKENS:
            short = trunc.cut(it.text, n - excess - 2)
            picked[i][-1] = (it, short, count.count(short))
        else:
            picked[i].pop()
            history.pop()
        text = render()
        total = count.count(text)
    return text


# --------------------------------------------------------------------------- the summarizer


class ExtractiveSummarizer:
    """Offline, deterministic, model-free stand-in that fills the request's template.

    Parameters
    ----------
    encoding : str
        Report tokenizer used for the cap and the usage sizes.
    """

    name = "extractive"
    stand_in = True
    #: Its answer is a pure function of the request and `encoding`: projections made with it may be kept.
    deterministic = True

    def __init__(self, encoding: str = DEFAULT_ENCODING):
        self.encoding = encoding

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Fill ``request.template`` from the request's own conversation within ``request.max_output_tokens``."""
        blocks = conversation(request)
        text = fill(template_for(request.template), extract(blocks), int(request.max_output_tokens), self.encoding)
        count = counter(self.encoding)
        pieces = [request.system, _tools_json(request.tools)]
        for m in request.messages:
            pieces.append(content_text(m.get("content")))
            pieces.extend(_tool_call_args(m))
        input_tokens = sum(count.count_many(pieces))
        return SummaryResult(
            text=text, input_tokens=input_tokens, cached_tokens=0, output_tokens=count.count(text) if text else 0
        )


@SUMMARIZERS.register("extractive", rank=20)
def _extractive(model: Any = None) -> Summarizer:
    """Build the offline stand-in (`model` is ignored)."""
    return ExtractiveSummarizer()


__all__ = [
    "BULLET",
    "Block",
    "ExtractiveSummarizer",
    "GENERIC_TEMPLATE",
    "Item",
    "NONE_TEXT",
    "Section",
    "TEMPLATES",
    "TRUNCATION_MARK",
    "Template",
    "conversation",
    "empty_template",
    "extract",
    "fill",
    "parse_blocks",
    "register_template",
    "request_text",
    "template_for",
]
