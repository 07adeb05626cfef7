"""Where an answer was found: in what a strategy keeps by design, only in its summary, in both, or nowhere.

A projection's text splits by who wrote it (`regions`). Its **summary text** is what a summariser wrote:
the answer of this compaction's summary request (the receipt's text) inside a ``summary`` segment, and
every other ``summary`` segment whole (an earlier compaction's summary carried over, the agent's own
summary in a recorded request, less what the agent's code wrote into it: pi's file lists). Everything else the next request holds is **kept by design** — original
records, the tail, an evidence index, kept user text, re-attached files, and the text a strategy itself
puts around or after a summary (pi's file lists, a header, a continue instruction). An opaque summary
(Codex's encrypted remote compaction) is in neither: nothing is claimed about what it holds.

`found_in` then says, with the closed book's normalisation (`grading.normalise`), where a value is:
``verbatim`` (only in what is kept by design), ``summary`` (only in summary text), ``both`` or
``nowhere``. A right answer counts toward **scope recall** when its value is kept by design (``verbatim``
or ``both``) and toward **summary recall** when only the summary holds it (`part`); offline the summary
is the extractive stand-in's, so summary recall measures the stand-in, not the strategy.

Design: docs/exams.md#6a-where-the-answer-was-found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from compaction_lab.core.projection import STAND_IN_LABEL, Projection
from compaction_lab.exam.grading import accepted, normalise
from compaction_lab.exam.types import Question

#: Where a value was found, in the order tables list them.
FOUND_IN: tuple[str, ...] = ("verbatim", "summary", "both", "nowhere")

#: The two parts of recall: a right answer whose value is kept by design, and one only the summary holds.
PARTS: tuple[str, ...] = ("scope", "summary")

#: `found_in` values whose right answers count toward scope recall.
SCOPE_FOUND: frozenset[str] = frozenset({"verbatim", "both"})


@dataclass(frozen=True)
class Regions:
    """A projection's text by origin, each normalised once (`grading.normalise`).

    Attributes
    ----------
    scope : str
        Everything the next request holds by design (every segment but the tool definitions, less the
        summary text).
    summary : str
        The summary text (module docstring).
    summary_by : str
        Who wrote it: `STAND_IN_LABEL`, the model (``model: <name>``), the recorded agent's label, or ""
        when the projection holds no summary text.
    opaque : bool
        The projection holds a summary the suite cannot read.
    """

    scope: str
    summary: str
    summary_by: str = ""
    opaque: bool = False


def summary_by(p: Projection) -> str:
    """Name who wrote a projection's summary text: the stand-in, the model, else the summary segment's label."""
    r = p.receipt
    if r is not None and not r.fallback and r.text:
        if r.stand_in:
            return STAND_IN_LABEL
        return r.summarizer
    labels = [s.label or "summary" for s in p.segments if s.kind == "summary" and not s.opaque and s.text.strip()]
    return labels[0] if labels else ""


def regions(p: Projection) -> Regions:
    """Split a projection's text into what it keeps by design and its summary text (module docstring).

    Within this compaction's own summary segment only the summariser's answer (``receipt.text``, where the
    segment holds it) is summary text; what the strategy wrote around it is kept by design. So is what a
    recorded agent's code wrote into its summary (``notes["authored_in_summary"]``: pi's wrapper and the
    file lists it appends, `strategies.arms.recorded`).
    """
    answer = p.receipt.text if p.receipt is not None and not p.receipt.fallback else ""
    notes = p.notes.get("authored_in_summary") if isinstance(p.notes, Mapping) else None
    authored = [t for t in notes or () if isinstance(t, str) and t]
    scope: list[str] = []
    summary: list[str] = []
    opaque = False
    for s in p.segments:
        if s.kind == "tools":  # left to the call shape, never a message (`Projection.messages`)
            continue
        if s.kind != "summary":
            scope.append(s.text)
        elif s.opaque:
            opaque = True
        elif answer and answer in s.text:
            before, _, after = s.text.partition(answer)
            summary.append(answer)
            scope.extend(t for t in (before, after) if t.strip())
        else:
            text = s.text
            for t in authored:  # what the agent's code wrote around or after its model's summary
                if t in text:
                    text = text.replace(t, "\n\n", 1)
                    scope.append(t)
            summary.append(text)
    return Regions(
        scope=normalise("\n\n".join(scope)),
        summary=normalise("\n\n".join(summary)),
        summary_by=summary_by(p) if any(t.strip() for t in summary) else "",
        opaque=opaque,
    )


def where(forms: Iterable[str], r: Regions) -> str:
    """Say where any of `forms` (already normalised; empty ones ignored) occurs in `r`: one of `FOUND_IN`."""
    kept = [f for f in forms if f]
    in_scope = any(f in r.scope for f in kept)
    in_summary = any(f in r.summary for f in kept)
    if in_scope and in_summary:
        return "both"
    if in_scope:
        return "verbatim"
    return "summary" if in_summary else "nowhere"


def found_in(question: Question, r: Regions) -> str:
    """Say where a question's value (or an alias) occurs in a projection's regions (`where`)."""
    return where(accepted(question), r)


def part(found: str, correct: bool) -> str:
    """Return the part of recall a right answer counts toward: ``scope``, ``summary``, or ``elsewhere``.

    ``elsewhere``: right, though the value is in neither region — a model reader that decoded a
    paraphrase, guessed, or found a value split across the two (the verbatim reader never is). A wrong
    answer counts toward none (``""``).
    """
    if not correct:
        return ""
    if found in SCOPE_FOUND:
        return "scope"
    return "summary" if found == "summary" else "elsewhere"


__all__ = ["FOUND_IN", "PARTS", "SCOPE_FOUND", "Regions", "found_in", "part", "regions", "summary_by", "where"]
