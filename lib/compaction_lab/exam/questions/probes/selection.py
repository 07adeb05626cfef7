"""Selection: which values a question may ask about, how many per pointer, and the seeded draw of them.

Which values: `eligible` (one value once: forms of one value, `forms.collapse`, are one usable value);
how many per pointer: `plan_counts`; the draw: `select`. See docs/exams.md#3-mining-probes-from-real-sessions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from compaction_lab.core.session import Session
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions.allocation import largest_remainder
from compaction_lab.exam.questions.probes.candidates import NUM, REJECT_REASONS, UNITS, Candidate, guessable, scan
from compaction_lab.exam.questions.probes.forms import collapse, path_forms, value_key
from compaction_lab.exam.questions.probes.harness import harness_of
from compaction_lab.exam.questions.probes.haystacks import Haystacks, session_haystacks
from compaction_lab.exam.questions.probes.uniqueness import Wordings
from compaction_lab.exam.questions.probes.wording import Variant, phrase
from compaction_lab.exam.types import POINTERS

__all__ = [
    "DROP_REASONS",
    "Eligible",
    "Selection",
    "Usable",
    "eligible",
    "path_forms",
    "plan_counts",
    "select",
    "usable_candidates",
]


@dataclass(frozen=True)
class Usable:
    """A candidate a question may ask about, with its wording, aliases, compared key and covered-part count."""

    cand: Candidate
    prompt: str
    variant: Variant  # the `render` options the prompt was made with
    aliases: tuple[str, ...]
    count: int  # normalised occurrences of `key` in the covered part
    key: str = ""  # the value as compared: normalised, a path in its relative form

    @property
    def record(self) -> str:
        """The message the value comes from (its entry id; its source_order when it has none)."""
        return self.cand.entry_id or f"#{self.cand.source_order}"


@dataclass(frozen=True)
class Eligible:
    """Every value a question may ask about, and how many values were not asked and why.

    ``dropped`` maps a reason (`DROP_REASONS`: ``template``, ``phrase``, ``slash-list``,
    ``guessable``, ``ambiguous form``, ``ambiguous wording``) to the distinct values, otherwise
    usable, that were not asked for it. ``merged`` counts the usable spellings that were forms of
    another usable value (`forms.collapse`): asked once, as that value, with them as aliases.
    """

    usable: tuple[Usable, ...]
    dropped: Mapping[str, int]
    merged: int = 0


#: Reasons in the order notes list them: the scan's (`candidates.REJECT_REASONS`); ``guessable``
#: (`candidates.guessable`); ``ambiguous form``: a file name or path suffix of two different values
#: (`forms.Collapsed.ambiguous`); ``ambiguous wording``: no wording singles the value out.
DROP_REASONS: tuple[str, ...] = (*REJECT_REASONS, "guessable", "ambiguous form", "ambiguous wording")


def _forms(c: Candidate, cwd: str | None) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(key, forms that must be absent from the tail, other spellings) of a candidate's value."""
    return _value_forms(c.category, c.rule, c.value, cwd)


@lru_cache(maxsize=65536)
def _value_forms(category: str, rule: str, value: str, cwd: str | None) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    # `_forms` of a value: every wording of every candidate asks for it, so the values seen last are kept.
    if category == "path":
        rel, others = path_forms(value, cwd)
        if rel is not None:
            return value_key(rel, cwd, path=True), (value, rel), others
        return value_key(value, cwd, path=True), (value,), ()
    if category == "number":
        m = re.fullmatch(rf"({NUM})([ \t]?)({UNITS})", value) if rule == "unit_number" else None
        # only a number with a real unit has another spacing ("3.11" is not "3.1 1")
        other = (m.group(1) + ("" if m.group(2) else " ") + m.group(3),) if m else ()
        return normalise(value), (value,), other
    return normalise(value), (value,), ()


def eligible(session: Session, tail_start: int, hay: Haystacks, cut: int | None = None) -> Eligible:
    """Find the values of the covered part a question may ask about, one per compared key, and what was dropped.

    See docs/exams.md#3-mining-probes-from-real-sessions ("Usable values", "Wording").
    Sorted by (source_order, start, value).
    """
    end = cut if cut is not None else session.end
    harness = harness_of(session)
    cwd = session.cwd

    def key_of(c: Candidate) -> str:
        return _forms(c, cwd)[0]

    @cache  # a value's forms are asked about once per occurrence; each answer is a search of the tail
    def absent_late(form: str) -> bool:
        f = normalise(form)
        return bool(f) and f not in hay.late and f not in hay.system

    covered: list[Candidate] = []
    seen_before_cut: list[Candidate] = []
    rejected: dict[str, set[str]] = {r: set() for r in DROP_REASONS}
    for r in session.records:
        if r.source_order >= end:
            break
        found = scan(r, harness.spans(r))
        seen_before_cut += found.found
        seen_before_cut += [x.cand for x in found.rejected if x.reason != "template"]
        if r.source_order >= tail_start:
            continue
        covered += sorted(found.found, key=lambda c: (c.start, c.value))
        for x in found.rejected:
            key, must_be_absent, _ = _forms(x.cand, cwd)
            if not guessable(x.cand.value) and all(absent_late(f) for f in must_be_absent):
                rejected[x.reason].add(key)
    wordings = Wordings(seen_before_cut, hay.before_cut, key_of)

    out: list[Usable] = []
    seen: set[str] = set()
    home = value_key(cwd.rstrip("/"), None, path=True) if cwd else None
    for c in covered:
        key, must_be_absent, others = _forms(c, cwd)
        if not key or key in seen or not all(absent_late(f) for f in must_be_absent):
            continue
        if key == home:  # the working directory: every harness writes it into its environment context
            rejected["template"].add(key)
            continue
        if guessable(c.value):
            rejected["guessable"].add(key)
            continue
        # a relative path's absolute form is a guess (relative to what?) unless the session writes it
        aliases = tuple(
            a
            for a in others
            if absent_late(a) and (c.value.startswith("/") or not a.startswith("/") or normalise(a) in hay.whole)
        )
        phrased = phrase(c, aliases, wordings)
        if phrased is None:
            if phrase(c, aliases) is not None:
                rejected["ambiguous wording"].add(key)
            continue
        seen.add(key)
        out.append(Usable(c, phrased[0], phrased[1], aliases, hay.covered.count(key), key))
    # one value once: every spelling found before the cut decides which keys are forms of one value
    forms = collapse({key_of(c) for c in seen_before_cut} | seen)
    groups: dict[str, list[Usable]] = {}
    for u in out:
        rep = forms.of(u.key)
        if rep is None:
            rejected["ambiguous form"].add(u.key)
        else:
            groups.setdefault(rep, []).append(u)
    usable = sorted(
        (_one_value(us, wordings) for us in groups.values()),
        key=lambda u: (u.cand.source_order, u.cand.start, u.cand.value),
    )

    def value_of(key: str) -> str:
        return forms.of(key) or key

    asked = set(groups)
    dropped = {reason: len({value_of(k) for k in keys} - asked) for reason, keys in rejected.items()}
    return Eligible(tuple(usable), dropped, sum(len(us) - 1 for us in groups.values()))


def _one_value(forms: Sequence[Usable], wordings: Wordings) -> Usable:
    """One usable value of its usable forms, asked with every other form as an alias.

    The source is the longest (then first) spelling whose wording gives none of the forms away; when
    every wording names one (``the `create` call on `reproduce_bug.py` ``), the longest spelling keeps
    its own aliases only.
    """
    ranked = sorted(forms, key=lambda u: (-len(u.key), u.cand.source_order, u.cand.start))
    if len(ranked) == 1:
        return ranked[0]
    count = max(u.count for u in forms)
    for src in ranked:
        answer = normalise(src.cand.value)
        aliases: dict[str, str] = {}
        for u in (src, *(u for u in ranked if u is not src)):
            for a in (*src.aliases, u.cand.value, *u.aliases) if u is src else (u.cand.value, *u.aliases):
                if normalise(a) != answer:
                    aliases.setdefault(normalise(a), a)
        phrased = phrase(src.cand, tuple(aliases.values()), wordings)
        if phrased is not None:
            return replace(src, prompt=phrased[0], variant=phrased[1], aliases=tuple(aliases.values()), count=count)
    return replace(ranked[0], count=count)


def usable_candidates(
    session: Session, tail_start: int, hay: Haystacks | None = None, cut: int | None = None
) -> list[Usable]:
    """Return the candidates of the covered part a question may ask about, one per compared key (`eligible`)."""
    hay = session_haystacks(session, tail_start, cut) if hay is None else hay
    return list(eligible(session, tail_start, hay, cut).usable)


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
    keeping ``src/app.py`` would otherwise also answer ``app.py``. So is a
    value from a message that already has ``cap`` questions (`passed_capped`
    counts them).
    """

    def __init__(self, rng: random.Random, pool: Sequence[Usable], cap: int | None) -> None:
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
        self.cap = cap
        self.passed_capped = 0

    def draw(self, taken: set[str], per_record: dict[str, int]) -> Usable | None:
        """Draw the next candidate not overlapping `taken` (which it joins) from a message under the cap, or None."""
        for _ in range(len(self.queues)):
            q = self.queues[self.turn % len(self.queues)]
            self.turn += 1
            while q:
                u = q.pop(0)
                if _overlaps(u.key, taken):
                    continue
                if self.cap is not None and per_record.get(u.record, 0) >= self.cap:
                    self.passed_capped += 1
                    continue
                taken.add(u.key)
                per_record[u.record] = per_record.get(u.record, 0) + 1
                return u
        return None


@dataclass(frozen=True)
class Selection:
    """The drawn values, and how many were passed over because their message had ``max_per_record`` already."""

    chosen: list[Usable]
    passed_capped: int = 0


def select(
    rng: random.Random,
    usable: Sequence[Usable],
    asked: Mapping[str, int],
    n: int,
    natural: bool,
    max_per_record: int | None = None,
) -> Selection:
    """Draw ``asked[p]`` candidates per pointer; with natural proportions, top up to `n` from any pointer.

    The top-up (a value passed over for overlapping a chosen one, or for the
    per-message cap, leaves a gap) goes one at a time to the pointer furthest
    below its share of availability. With a mix there is no top-up: a gap is
    a shortfall. At most `max_per_record` values come from one message
    (`Usable.record`), top-up included; None: no cap.
    """
    decks = {p: _Deck(rng, [u for u in usable if u.cand.pointer == p], max_per_record) for p in POINTERS}
    avail = {p: sum(1 for u in usable if u.cand.pointer == p) for p in POINTERS}
    taken: set[str] = set()
    per_record: dict[str, int] = {}
    chosen: list[Usable] = []
    got = {p: 0 for p in POINTERS}
    for p in POINTERS:
        for _ in range(asked.get(p, 0)):
            u = decks[p].draw(taken, per_record)
            if u is None:
                break
            chosen.append(u)
            got[p] += 1
    open_ = [p for p in POINTERS if avail[p]]
    whole = sum(avail.values()) or 1
    while natural and len(chosen) < n and open_:
        p = max(open_, key=lambda p: (n * avail[p] / whole - got[p], -POINTERS.index(p)))
        u = decks[p].draw(taken, per_record)
        if u is None:
            open_.remove(p)
            continue
        chosen.append(u)
        got[p] += 1
    return Selection(chosen, sum(d.passed_capped for d in decks.values()))
