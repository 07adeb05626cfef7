"""Grading: normalisation, aliases, abstentions and decoys.

A real question is answered right iff its normalised answer (or a normalised
alias) is *contained* in the normalised given answer and the given answer is
not an abstention. A decoy asks for a value that appears nowhere, so the only
right answer is an abstention (``NOT_FOUND``): any other answer — even one
that happens to contain the decoy's value — fails it.

Normalisation (`normalise`), exactly:

1. Unicode case-fold (``str.casefold``).
2. Collapse every run of whitespace (spaces, tabs, newlines) to one space.
3. Strip, at both ends only, any run of whitespace, quotes
   (``"`` ``'`` and the curly ``‘ ’ “ ”``), backticks, asterisks (Markdown
   emphasis) and sentence punctuation ``. , ; : ! ?``.

Nothing inside the text changes besides case and whitespace, so identifiers,
paths, units and separators (``ORD-58213``, ``s3://a/b``, ``184.532 ms``)
compare as they are written.

The same normalised containment decides whether a value is *present* in a
text (`contains_answer`): that is what the verbatim reader and the open-book
outcome classification call "in the projection".
"""

from __future__ import annotations

import re

from compaction_lab.exam.types import NOT_FOUND, Question

#: Characters stripped from both ends by `normalise` (after case-folding and whitespace collapse).
STRIP_CHARS = " \"'`\u2018\u2019\u201c\u201d*.,;:!?"

_WS = re.compile(r"\s+")

#: The abstention, normalised, with ``_`` and ``-`` read as spaces.
_ABSTAIN = "not found"
_ABSTAIN_PREFIX = re.compile(r"^not found(?![0-9a-z])")


def normalise(text: str) -> str:
    r"""Case-fold text, collapse whitespace, and strip quotes, backticks and end punctuation.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        See the module docstring for the exact rules.

    Examples
    --------
    >>> normalise('  "The ID is `ORD-58213`."  ')
    'the id is `ord-58213'
    >>> normalise("184.532\n ms")
    '184.532 ms'
    """
    # ``str.split`` splits on exactly the characters ``\s`` matches (both use Unicode's whitespace), ~6x
    # faster than a regex on a projection's whole text; the edge spaces it drops are stripped anyway.
    return " ".join(text.casefold().split()).strip(STRIP_CHARS)


def is_abstention(given: str) -> bool:
    """Whether an answer abstains (``NOT_FOUND``).

    Case, surrounding quotes/punctuation, and the separator between the two
    words (``_``, ``-``, spaces, none) do not matter: ``NOT_FOUND``,
    ``not found``, ``Not-Found.`` and ``NOTFOUND`` all abstain. An answer that
    *starts* with the abstention and goes on to explain (``NOT_FOUND — the
    value is not in my context``) abstains too; models rarely answer with the
    bare token. An empty answer is neither a value nor an abstention: it fails
    real questions and decoys alike (an empty reply is a failure, not a
    decision to abstain).
    """
    n = normalise(given)
    if not n:
        return False
    spaced = _WS.sub(" ", n.replace("_", " ").replace("-", " ")).strip()
    if spaced.startswith("notfound"):
        spaced = "not found" + spaced[len("notfound") :]
    return spaced == _ABSTAIN or bool(_ABSTAIN_PREFIX.match(spaced))


def accepted(question: Question) -> tuple[str, ...]:
    """List the normalised spellings that count: the answer, then each alias (empty ones dropped, no repeats)."""
    forms = (normalise(a) for a in (question.answer, *question.aliases))
    return tuple(dict.fromkeys(f for f in forms if f))


def contains_answer(question: Question, text: str) -> bool:
    """Whether `text` contains the question's value (or an alias), after normalising both.

    Used for presence: "the projection holds the value", "what the reader read
    holds the value". It does not look at whether `question` is a decoy.
    """
    return in_normalised(question, normalise(text))


def in_normalised(question: Question, hay: str) -> bool:
    """`contains_answer` of a text already normalised (`normalise`): one text asked about many questions."""
    return any(form in hay for form in accepted(question))


def grade(question: Question, given: str) -> bool:
    """Whether `given` answers `question` right.

    Parameters
    ----------
    question : Question
    given : str
        The reader's answer.

    Returns
    -------
    bool
        Real question: the given answer is not an abstention and contains the
        normalised answer or an alias. Decoy: the given answer is an
        abstention (any other answer has fallen for the decoy).
    """
    if question.decoy:
        return is_abstention(given)
    if is_abstention(given):
        return False
    return contains_answer(question, given)


def fell_for_decoy(question: Question, given: str) -> bool:
    """Tell whether a decoy was answered with anything but an abstention (always False for real questions)."""
    return bool(question.decoy) and not is_abstention(given)


__all__ = [
    "NOT_FOUND",
    "STRIP_CHARS",
    "accepted",
    "contains_answer",
    "fell_for_decoy",
    "grade",
    "in_normalised",
    "is_abstention",
    "normalise",
]
