"""Harness text: the parts of a record a harness wrote, not the person or the tools (`Harness`, `TEMPLATES`).

A value a harness put there (SWE-agent's instance template around the issue, a line of its injected
demonstration, Claude Code's ``<system-reminder>`` inside a file read or its sub-agent footer, pi's
read-tool notice, Codex's ``<environment_context>``) says nothing about the session: it is never
mined, and never attributed to the user. Every template is one row of `TEMPLATES`, with the upstream
source it comes from; injected blocks are `injected_blocks` (`core.text.INJECTED_PREFIXES`).

See docs/exams.md#3-mining-probes-from-real-sessions ("Which records").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from compaction_lab.core.session import Record, Session
from compaction_lab.core.text import INJECTED_PREFIXES
from compaction_lab.exam.questions.probes.haystacks import system_prompt_text

__all__ = [
    "TEMPLATES",
    "Harness",
    "Template",
    "harness_of",
    "injected_blocks",
    "issue_frame",
    "template_spans",
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


@dataclass(frozen=True)
class Template:
    """Text one harness writes the same way in every session, with holes for the session's own part.

    Parameters
    ----------
    name : str
    harness : str
        The harness (or tool) that writes it.
    source : str
        Where upstream the text comes from (repository and file, or issue).
    pattern : re.Pattern
        Matches the template's text. Its group ``keep``, when it has one and it matched, is the
        person's or the task's part (the issue inside SWE-agent's instance template): not masked.
    kinds : tuple of str
        Record kinds the template occurs in.
    """

    name: str
    harness: str
    source: str
    pattern: re.Pattern[str]
    kinds: tuple[str, ...] = ("user", "tool_output")


_USER = ("user",)
_OUTPUT = ("tool_output",)

#: Every harness template, one row each with its upstream source (docs/exams.md, "Which records").
TEMPLATES: tuple[Template, ...] = (
    Template(
        "instance",
        "SWE-agent 0.x",
        "SWE-agent/SWE-agent config/sweagent_0_7/07.yaml (instance_template)",
        # everything but the issue: the frame before ``ISSUE:`` and the instructions from ``INSTRUCTIONS:``
        re.compile(r"(?ms)\A(?:(?!^ISSUE:).)*^ISSUE:[ \t]*\n(?P<keep>.*?)^INSTRUCTIONS:[ \t]*$.*"),
        _USER,
    ),
    Template(
        "ctf instance",
        "SWE-agent EnIGMA (CTF)",
        "princeton-nlp/SWE-agent config/default_ctf.yaml (instance_template)",
        # the challenge's description and files are the task's; the rest (``sudo apt-get install``,
        # ``python <script_name>.py``, the tips) is the template
        re.compile(
            r"(?ms)^We're currently solving the following CTF challenge\.(?:(?!^INSTRUCTIONS:).)*?"
            r"The description is:[ \t]*\n(?P<keep>.*?)^INSTRUCTIONS:[ \t]*$.*"
        ),
        _USER,
    ),
    Template(
        "pr instance",
        "SWE-agent 1.x",
        "SWE-agent/SWE-agent config/default.yaml (instance_template)",
        re.compile(r"(?s)\A\s*<uploaded_files>\n.*?<pr_description>\n(?P<keep>.*?)\n?</pr_description>.*"),
        _USER,
    ),
    Template(
        "demonstration",
        "SWE-agent",
        "SWE-agent/SWE-agent config/sweagent_0_7/07.yaml (demonstration_template)",
        re.compile(
            r"(?ms)^Here is a demonstration of how to correctly accomplish this task\..*?"
            r"(?:^--- END OF DEMONSTRATION ---[ \t]*$|\Z)"
        ),
        _USER,
    ),
    Template(
        "state footer",
        "SWE-agent",
        "SWE-agent/SWE-agent config/sweagent_0_7/07.yaml (next_step_template, next_step_no_output_template)",
        re.compile(r"(?m)^\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)(?:\n[^\n]*\$[ \t]*$)?"),
    ),
    Template(
        "agent footer",
        "Claude Code",
        "Claude Code Task/Agent tool result (anthropics/claude-code#10864: "
        "``agentId: <id> (for resuming to continue this agent's work if needed)`` and its ``<usage>`` block)",
        re.compile(r"(?s)agentId: [\w-]+(?: \([^)\n]*\)\.?)?(?:\s*<usage>.*?(?:</usage>|\Z))?"),
    ),
    Template(
        "edit result",
        "Claude Code",
        "Claude Code Edit tool result (``The file <path> has been updated. Here's the result of running "
        "`cat -n` on a snippet of the edited file:``)",
        re.compile(r"Here's the result of running `cat -n` on [^\n:]*:"),
        _OUTPUT,
    ),
    Template(
        "read notice",
        "pi",
        "badlogic/pi-mono packages/coding-agent/src/core/tools/read.ts and bash.ts (truncation notices)",
        re.compile(
            r"\[(?:Showing (?:lines|last) |\d+ more lines in file\. |Line \d+ is )[^\]\n]*\]"
            r"|\.\.\. \(\d+ more lines not shown\. Use offset=\d+ to continue reading\)"
        ),
        _OUTPUT,
    ),
    Template(
        "exec header",
        "Codex",
        "openai/codex codex-rs/core (shell output: ``Exit code: N``, ``Wall time: S seconds``, ``Output:``)",
        re.compile(r"\AExit code: -?\d+[ \t]*\nWall time: [^\n]*\n(?:Total output lines: \d+[ \t]*\n)?(?:Output:\n)?"),
        _OUTPUT,
    ),
    Template(
        "git hint",
        "git",
        'git/git wt-status.c (the ``(use "git …" to …)`` advice lines of ``git status``)',
        re.compile(r"(?m)\(use \"git [^\n]*\)[ \t]*$"),
        _OUTPUT,
    ),
)


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


def template_spans(text: str, kind: str) -> list[Span]:
    """Spans of `text` (a record of `kind`) that a `TEMPLATES` row wrote, its ``keep`` part left out."""
    spans: list[Span] = []
    for t in TEMPLATES:
        if kind not in t.kinds:
            continue
        for m in t.pattern.finditer(text):
            a, b = m.span()
            keep = m.span("keep") if "keep" in t.pattern.groupindex and m.group("keep") is not None else None
            if keep is None:
                spans.append((a, b))
            else:
                spans += [(a, keep[0]), (keep[1], b)]
    return sorted(s for s in spans if s[0] < s[1])


def issue_frame(text: str) -> Span | None:
    """Find the issue part of a SWE-agent instance message (between ``ISSUE:`` and ``INSTRUCTIONS:``), or None."""
    m = TEMPLATES[0].pattern.search(text)
    return None if m is None else m.span("keep")


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

        Every record: injected blocks (`injected_blocks`) and the `TEMPLATES` of its kind. User
        records also: every line shared with the injected records or the system prompt.
        """
        text = record.text
        spans = injected_blocks(text) + template_spans(text, record.kind)
        if record.kind == "user" and self.shared_lines:
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
