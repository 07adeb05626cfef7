"""Harness text: the parts of a record a harness wrote, not the person or the tools (`Harness`, `injected_blocks`).

A value a harness put there (SWE-agent's instance template around the issue, a line of its injected
demonstration, Claude Code's ``<system-reminder>`` inside a file read, Codex's ``<environment_context>``)
says nothing about the session: it is never mined, and never attributed to the user.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from compaction_lab.core.session import Record, Session
from compaction_lab.core.text import INJECTED_PREFIXES
from compaction_lab.exam.probes.haystacks import system_prompt_text

__all__ = [
    "Harness",
    "harness_of",
    "injected_blocks",
    "issue_frame",
]

Span = tuple[int, int]

#: Tags of injected blocks: those `core.text.INJECTED_PREFIXES` opens with, and Claude Code's other
#: command and hook wrappers (they sit inside user text, so the record is not ``injected`` as a whole).
_TAGS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [p[1:-1] for p in INJECTED_PREFIXES if p.startswith("<") and p.endswith(">")]
        + ["command-args", "local-command-stderr", "user-prompt-submit-hook", "INSTRUCTIONS"]
    )
)
#: A tagged block, to its closing tag or, unclosed, to the end of the text.
_BLOCK = re.compile(
    r"<(" + "|".join(re.escape(t) for t in _TAGS) + r")>.*?(?:</\1>|\Z)",
    re.S,
)
#: Openings that are not tags: the rest of the text from there is the harness's (Codex's AGENTS.md block
#: runs to its ``</INSTRUCTIONS>``, which `_BLOCK` ends; Claude Code's caveat is one line).
_LINE_OPENINGS = tuple(p for p in INJECTED_PREFIXES if not p.startswith("<"))

#: SWE-agent's instance template: the issue sits between an ``ISSUE:`` line and an ``INSTRUCTIONS:`` line.
_ISSUE = re.compile(r"(?m)^ISSUE:[ \t]*\n")
_INSTRUCTIONS = re.compile(r"(?m)^INSTRUCTIONS:[ \t]*$")


def injected_blocks(text: str) -> list[Span]:
    """Spans of `text` that are injected-context blocks (``<system-reminder>…</system-reminder>`` and the like)."""
    spans = [m.span() for m in _BLOCK.finditer(text)]
    for opening in _LINE_OPENINGS:
        start = text.find(opening)
        while start >= 0:
            if start == 0 or text[start - 1] == "\n":
                end = text.find("\n", start)
                spans.append((start, len(text) if end < 0 else end))
            start = text.find(opening, start + 1)
    return sorted(spans)


def issue_frame(text: str) -> Span | None:
    """Find the issue part of a SWE-agent instance message (between ``ISSUE:`` and ``INSTRUCTIONS:``), or None."""
    issue = _ISSUE.search(text)
    if issue is None:
        return None
    end = _INSTRUCTIONS.search(text, issue.end())
    return None if end is None else (issue.end(), end.start())


def _lines(texts: Iterable[str]) -> frozenset[str]:
    """Collect the stripped lines with a word (two letters or digits) of `texts`."""
    out: set[str] = set()
    for t in texts:
        out.update(ln.strip() for ln in t.splitlines() if re.search(r"[A-Za-z0-9]{2}", ln))
    return frozenset(out)


@dataclass(frozen=True)
class Harness:
    """What a session's harness wrote: the lines of its injected records and system prompt.

    Parameters
    ----------
    shared_lines : frozenset of str
        Stripped lines of every injected record, ``system`` record and the
        system prompt. In user text such a line is the template's (SWE-agent
        repeats its instance template inside the demonstration), not the
        person's.
    """

    shared_lines: frozenset[str] = frozenset()

    def spans(self, record: Record) -> list[Span]:
        """Spans of `record`'s text the harness wrote (sorted, may overlap).

        Every record: injected blocks (`injected_blocks`). User records also:
        outside the issue of a SWE-agent instance message, and every line
        shared with the injected records or the system prompt.
        """
        text = record.text
        spans = injected_blocks(text)
        if record.kind != "user":
            return spans
        frame = issue_frame(text)
        if frame is not None:
            spans += [(0, frame[0]), (frame[1], len(text))]
        if self.shared_lines:
            pos = 0
            for line in text.splitlines(keepends=True):
                if line.strip() in self.shared_lines:
                    spans.append((pos, pos + len(line)))
                pos += len(line)
        return sorted(spans)


def harness_of(session: Session) -> Harness:
    """Build the `Harness` of `session` (see `Harness.shared_lines`)."""
    texts = [r.text for r in session.records if r.injected or r.kind == "system"]
    texts.append(system_prompt_text(session))
    return Harness(_lines(texts))
