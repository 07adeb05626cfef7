"""Selection: which candidates a question may ask about (`usable_candidates`), how many per pointer
(`plan_counts`) and the seeded draw of them (`select`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from compaction_lab.core.session import Session
from compaction_lab.exam.allocation import largest_remainder
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.probes.candidates import NUM, Candidate, extract, guessable
from compaction_lab.exam.probes.haystacks import Haystacks, session_haystacks
from compaction_lab.exam.probes.wording import Variant, phrase
from compaction_lab.exam.types import POINTERS

__all__ = [
    "Usable",
    "plan_counts",
    "select",
    "usable_candidates",
]


@dataclass(frozen=True)
class Usable:
    """A candidate a question may ask about, with its wording, aliases and covered-part count."""

    cand: Candidate
    prompt: str
    variant: Variant  # the `render` options the prompt was made with
    aliases: tuple[str, ...]
    count: int  # normalised occurrences in the covered part


def _aliases(c: Candidate) -> tuple[str, ...]:
    """Other spellings of a number with a unit: with and without the space before the unit."""
    if c.category != "number":
        return ()
    m = re.fullmatch(rf"({NUM})(\s?)(\S+)", c.value)
    if m is None:
        return ()
    return (m.group(1) + ("" if m.group(2) else " ") + m.group(3),)


def usable_candidates(session: Session, tail_start: int, hay: Haystacks | None = None) -> list[Usable]:
    """The candidates of the covered part a question may ask about, one per normalised value.

    See the `exam.probes` docstring ("Usable values"). Sorted by (source_order, start, value).
    """
    hay = session_haystacks(session, tail_start) if hay is None else hay
    out: list[Usable] = []
    seen: set[str] = set()
    for r in session.records:
        if r.source_order >= tail_start:
            break
        for c in sorted(extract(r), key=lambda c: (c.start, c.value)):
            key = normalise(c.value)
            if not key or key in seen or guessable(c.value) or key in hay.late or key in hay.system:
                continue
            aliases = tuple(a for a in _aliases(c) if normalise(a) not in hay.late and normalise(a) not in hay.system)
            phrased = phrase(c, aliases)
            if phrased is None:
                continue
            seen.add(key)
            out.append(Usable(c, phrased[0], phrased[1], aliases, hay.covered.count(key)))
    return out


def plan_counts(
    available: Mapping[str, int], n: int, mix: Mapping[str, float] | None
) -> tuple[dict[str, int], dict[str, int]]:
    """Real questions per pointer: (planned, asked).

    Parameters
    ----------
    available : Mapping[str, int]
        Usable candidates per pointer.
    n : int
        Real questions wanted.
    mix : Mapping or None
        None: natural proportions — one per pointer with candidates (the most
        available first when `n` is smaller), the rest one at a time to the
        pointer furthest below its share of availability. Else the largest-
        remainder rounding of `n` by the mix, capped by availability.
    """
    avail = {p: int(available.get(p, 0)) for p in POINTERS}
    if mix is not None:
        planned = largest_remainder(n, mix)
        return planned, {p: min(planned[p], avail[p]) for p in POINTERS}
    total = min(n, sum(avail.values()))
    asked = {p: 0 for p in POINTERS}
    present = sorted((p for p in POINTERS if avail[p] > 0), key=lambda p: (-avail[p], POINTERS.index(p)))
    for p in present[:total]:
        asked[p] = 1
    whole = sum(avail.values())
    for _ in range(total - sum(asked.values())):
        open_ = [p for p in POINTERS if asked[p] < avail[p]]
        p = max(open_, key=lambda p: (total * avail[p] / whole - asked[p], -POINTERS.index(p)))
        asked[p] += 1
    return dict(asked), dict(asked)


def _overlaps(key: str, taken: Iterable[str]) -> bool:
    return any(key in t or t in key for t in taken)


class _Deck:
    """One pointer's candidates in drawing order: categories round-robin in a seeded order, rarest values first.

    A value inside an already chosen one (or containing it) is passed over:
    keeping ``src/app.py`` would otherwise also answer ``app.py``.
    """

    def __init__(self, rng: random.Random, pool: Sequence[Usable]) -> None:
        by_cat: dict[str, list[Usable]] = {}
        for u in pool:
            by_cat.setdefault(u.cand.category, []).append(u)
        self.queues: list[list[Usable]] = []
        for cat in sorted(by_cat):
            items = sorted(by_cat[cat], key=lambda u: (u.cand.source_order, u.cand.start, u.cand.value))
            rng.shuffle(items)
            items.sort(key=lambda u: u.count)  # stable: rarer first, seeded order within a count
            self.queues.append(items)
        rng.shuffle(self.queues)
        self.turn = 0

    def draw(self, taken: set[str]) -> Usable | None:
        """The next candidate not overlapping `taken` (which it joins), or None when none is left."""
        for _ in range(len(self.queues)):
            q = self.queues[self.turn % len(self.queues)]
            self.turn += 1
            while q:
                u = q.pop(0)
                key = normalise(u.cand.value)
                if not _overlaps(key, taken):
                    taken.add(key)
                    return u
        return None


def select(
    rng: random.Random, usable: Sequence[Usable], asked: Mapping[str, int], n: int, natural: bool
) -> list[Usable]:
    """Draw ``asked[p]`` candidates per pointer; with natural proportions, top up to `n` from any pointer.

    The top-up (a value passed over for overlapping a chosen one leaves a gap)
    goes one at a time to the pointer furthest below its share of
    availability. With a mix there is no top-up: a gap is a shortfall.
    """
    decks = {p: _Deck(rng, [u for u in usable if u.cand.pointer == p]) for p in POINTERS}
    avail = {p: sum(1 for u in usable if u.cand.pointer == p) for p in POINTERS}
    taken: set[str] = set()
    chosen: list[Usable] = []
    got = {p: 0 for p in POINTERS}
    for p in POINTERS:
        for _ in range(asked.get(p, 0)):
            u = decks[p].draw(taken)
            if u is None:
                break
            chosen.append(u)
            got[p] += 1
    open_ = [p for p in POINTERS if avail[p]]
    whole = sum(avail.values()) or 1
    while natural and len(chosen) < n and open_:
        p = max(open_, key=lambda p: (n * avail[p] / whole - got[p], -POINTERS.index(p)))
        u = decks[p].draw(taken)
        if u is None:
            open_.remove(p)
            continue
        chosen.append(u)
        got[p] += 1
    return chosen
