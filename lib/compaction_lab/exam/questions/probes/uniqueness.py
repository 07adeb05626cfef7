"""Unique wordings: a question is asked only when its wording fits one value of everything before the cut.

The reader never sees step numbers, so "at step 27" does not tell two values apart: a wording is
compared without it (`render(step=False)`) with the same wording of every other candidate before the
cut, and its window (“before…after”) is looked for in the normalised text before the cut, where
anything else between the same words is another value the question could mean.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions.probes.candidates import Candidate, has_words
from compaction_lab.exam.questions.probes.wording import VARIANTS, Variant, render

__all__ = [
    "Wordings",
]

#: The longest other value a window is matched around (characters of normalised text).
_MAX_MIDDLE = 200

_WS = re.compile(r"\s+")


def _fold(s: str) -> str:
    """Case-folded, whitespace-collapsed, not stripped: how a window reads inside a normalised haystack."""
    return _WS.sub(" ", s.casefold())


def _variant_key(v: Variant) -> tuple[bool, bool]:
    return (v.get("window", True), v.get("show_target", True))


class Wordings:
    """The wordings of every candidate before the cut, and the text they are looked for in.

    Parameters
    ----------
    candidates : iterable of Candidate
        Every value found before the cut (the covered part and the tail;
        inexact matches too: a reader could give them).
    text : str
        The normalised text before the cut (`Haystacks.before_cut`).
    key : callable
        A candidate's value as compared (the miner's normalised, path-canonical
        key): two candidates with the same key are the same value.
    """

    def __init__(self, candidates: Iterable[Candidate], text: str, key: Callable[[Candidate], str]) -> None:
        self._cands = list(candidates)
        self._text = text
        self._key = key
        self._by_wording: dict[tuple[bool, bool], dict[str, set[str]]] = {}

    def _wordings(self, variant: Variant) -> dict[str, set[str]]:
        vk = _variant_key(variant)
        if vk not in self._by_wording:
            table: dict[str, set[str]] = {}
            for c in self._cands:
                table.setdefault(render(c, step=False, **variant), set()).add(self._key(c))
            self._by_wording[vk] = table
        return self._by_wording[vk]

    def fits_one(self, c: Candidate, variant: Variant) -> bool:
        """Tell whether `c`'s wording with `variant` fits no other value.

        No other candidate is worded the same (step numbers aside), and, with a window, no other text is
        between the window's words.
        """
        if variant not in VARIANTS:
            raise ValueError(f"unknown wording variant {variant!r}")
        same = self._wordings(variant).get(render(c, step=False, **variant), set())
        if same - {self._key(c)}:
            return False
        if variant.get("window", True) and has_words(c.before + c.after):
            return self._window_fits_one(c)
        return True

    def _window_fits_one(self, c: Candidate) -> bool:
        """Whether every place the window's words occur in the text holds `c`'s value between them."""
        text, key = self._text, _fold(c.value)
        before, after = _fold(c.before), _fold(c.after)
        if not before:  # the value opens its line: what precedes each occurrence of the words after it
            pos = text.find(after)
            while pos >= 0:
                if not text.endswith(key, 0, pos):
                    return False
                pos = text.find(after, pos + 1)
            return True
        tail = re.compile(rf"(.{{0,{_MAX_MIDDLE}}}?){re.escape(after)}") if after else None
        pos = text.find(before)
        while pos >= 0:
            start = pos + len(before)
            if tail is None:
                if not text.startswith(key, start):
                    return False
            else:
                m = tail.match(text, start)
                if m is not None and normalise(m.group(1)) != normalise(key):
                    return False
            pos = text.find(before, pos + 1)
        return True
