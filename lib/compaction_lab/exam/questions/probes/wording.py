"""Question wording: how a candidate is asked about, and the first wording that singles it out.

`render` words the question; `phrase` finds the first wording that singles the candidate out without
giving the answer away.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypedDict

from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions.probes.candidates import Candidate, has_words

__all__ = [
    "VARIANTS",
    "Fits",
    "Variant",
    "contains",
    "phrase",
    "render",
    "short_target",
]

_NOUN = {
    "identifier": "ID",
    "tool_returned_id": "ID",
    "path": "path",
    "number": "value",
    "error_string": "error",
    "quoted": "value",
}
_WH = {"path": "Which", "error_string": "Which"}
_TOOL_VERB = {
    "tool_returned_id": ("What ID", "return"),
    "identifier": ("What ID", "print"),
    "path": ("Which path", "show"),
    "number": ("What number", "report"),
    "error_string": ("Which error", "report"),
    "quoted": ("What quoted value", "show"),
}
_PROSE_VERB = {
    "identifier": "give",
    "tool_returned_id": "give",
    "path": "mention",
    "number": "report",
    "error_string": "quote",
    "quoted": "mention",
}


def short_target(target: str | None, limit: int = 60) -> str:
    """Show a target as a question does: first line, backticks replaced, at most `limit` characters."""
    if not target:
        return ""
    t = target.strip().splitlines()[0].replace("`", "'") if target.strip() else ""
    return t if len(t) <= limit else t[: limit - 1].rstrip() + "…"


def render(
    c: Candidate,
    *,
    target: str | None = None,
    before: str | None = None,
    after: str | None = None,
    window: bool = True,
    show_target: bool = True,
    step: bool = True,
) -> str:
    """Word the question about candidate `c`.

    Parameters
    ----------
    c : Candidate
    target, before, after : str, optional
        Override the shown target and window (decoys make them up).
    window : bool
        Show the words around the value (with the value as “…”).
    show_target : bool
        Name the tool call's target.
    step : bool
        Name the step (the source record's source_order). Without it, the
        wording as a reader who does not see step numbers tells it apart
        (`uniqueness.Wordings`).

    Returns
    -------
    str
    """
    at = f" at step {c.source_order}" if step else ""
    tgt = short_target(c.target) if target is None else target
    b = c.before if before is None else before
    a = c.after if after is None else after
    win = f": \u201c{b}\u2026{a}\u201d" if window and has_words(b + a) else ""
    wh = _WH.get(c.category, "What")
    noun = _NOUN[c.category]
    if c.kind == "tool_output":
        subject = f"the `{c.tool or 'tool'}` call" + (f" on `{tgt}`" if show_target and tgt else "")
        if c.rule == "failed_test":
            lead, verb = "Which failing test", "report"
        else:
            lead, verb = _TOOL_VERB[c.category]
        if c.category == "error_string":  # the line is the answer: its window is rarely more than "…"
            where = f" (line {c.line_no} of its output)" if c.same_rule > 1 else ""
            return f"{lead} did {subject} {verb}{at}{win or where}?"
        if not win:  # no window (none asked for, or no words around the value): the line locates it
            win = f" (line {c.line_no} of its output)"
        return f"{lead} did {subject} {verb}{at}{win}?"
    if c.kind == "tool_call":
        if c.category == "path" and c.target and c.value.strip() == c.target.strip():
            return f"Which file did the `{c.tool or 'tool'}` call{at} act on?"
        subject = f"the `{c.tool or 'tool'}` call" + (f" on `{tgt}`" if show_target and tgt else "")
        return f"{wh} {noun} did the agent pass to {subject}{at}{win}?"
    if c.kind == "reasoning":
        return f"{wh} {noun} did the assistant note in its reasoning{at}{win}?"
    if c.kind == "user":
        return f"{wh} {noun} did the user specify{at}{win}?"
    return f"{wh} {noun} did the assistant {_PROSE_VERB[c.category]}{at}{win}?"


def contains(prompt: str, forms: Iterable[str]) -> bool:
    """Whether the normalised `prompt` contains any of the (normalised, non-empty) `forms`."""
    p = normalise(prompt)
    return any(f and f in p for f in forms)


class Variant(TypedDict, total=False):
    """The `render` options a wording is made with (absent: the default, True)."""

    window: bool
    show_target: bool


#: Wordings tried in turn until one does not contain the answer.
VARIANTS: tuple[Variant, ...] = (
    {},
    {"window": False},
    {"show_target": False},
    {"window": False, "show_target": False},
)


def _grounded(c: Candidate, prompt: str) -> bool:
    """Whether a wording singles out one value: a window or a line number, or nothing else it could mean."""
    if "\u201c" in prompt or " (line " in prompt or c.in_record == 1:
        return True
    if c.category == "error_string" and c.same_rule == 1:
        return True
    return (
        c.kind == "tool_call"
        and c.category == "path"
        and c.target is not None
        and c.target != ""
        and c.value.strip() == c.target.strip()
    )


class Fits(Protocol):
    """Whether a wording of a candidate fits no other value the reader could have seen (`uniqueness.Wordings`)."""

    def fits_one(self, c: Candidate, variant: Variant) -> bool:
        """Tell whether the wording of `c` under `variant` fits no other value before the cut."""
        ...


def phrase(c: Candidate, aliases: Sequence[str] = (), wordings: Fits | None = None) -> tuple[str, Variant] | None:
    """Find the first wording of `c` that singles it out and contains neither its value nor an alias.

    Parameters
    ----------
    c : Candidate
    aliases : sequence of str
    wordings : Fits, optional
        When given, a wording must also fit no other value before the cut
        (`uniqueness.Wordings.fits_one`).

    Returns
    -------
    (str, Variant) or None
        The prompt and the `render` options it was made with, or None when
        every wording gives the answer away, could mean another value of the
        same record, or (with `wordings`) fits another value.
    """
    forms = [normalise(x) for x in (c.value, *aliases)]
    for kw in VARIANTS:
        prompt = render(c, **kw)
        if not contains(prompt, forms) and _grounded(c, prompt) and (wordings is None or wordings.fits_one(c, kw)):
            return prompt, kw
    return None
