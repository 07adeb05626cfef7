"""Decoys: lookalikes of the sampled values (`mutate`), asked with a made-up subject.

Each is checked absent from the whole session, so ``NOT_FOUND`` is the right answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from compaction_lab.core.session import Session
from compaction_lab.exam.grading import normalise
from compaction_lab.exam.questions.probes.candidates import COMMON_WORDS, PROSE_KINDS, guessable
from compaction_lab.exam.questions.probes.haystacks import Haystacks, absent
from compaction_lab.exam.questions.probes.selection import Usable
from compaction_lab.exam.questions.probes.wording import contains, render, short_target
from compaction_lab.exam.types import Question

__all__ = [
    "make_decoys",
    "mutate",
    "session_vocab",
]

_FALLBACK_WORDS = (
    "ledger",
    "beacon",
    "cursor",
    "anchor",
    "quota",
    "harbor",
    "signal",
    "vector",
    "canopy",
    "meadow",
    "tundra",
    "falcon",
    "copper",
    "orbit",
    "lantern",
    "summit",
    "ripple",
    "ember",
)


#: Words a made-up subject never swaps (swapping "would" makes nonsense, not a different event).
_FUNCTION_WORDS = (
    frozenset(
        """
about above after again also among another because before being below between both but could does doing
down during each else even every from have having here into just like made make many more most much must
need only other over same should since some such than that their them then there these they this those
through under until upon very want was were what when where which while will with within without would
your expect using used uses line lines step call take takes keep keeps look looks find finds know show
shows calls come comes gets give gives tell says said seem seems feel tried tries sure still went well
""".split()
    )
    | COMMON_WORDS
)

_WORD = re.compile(r"(?<![A-Za-z0-9\\])[A-Za-z]{4,}(?![A-Za-z0-9'\u2019])")


def session_vocab(session: Session) -> list[str]:
    """Lowercase words of 4–12 letters of the session's prose (sorted), plus fallbacks: the decoys' word pool.

    Prose (user, assistant, reasoning), not tool traffic, so swapped-in words
    read like words rather than code identifiers.
    """
    words: set[str] = set(_FALLBACK_WORDS)
    for r in session.records:
        if r.kind in PROSE_KINDS:
            words.update(w.lower() for w in _WORD.findall(r.text) if len(w) <= 12)
    return sorted(w for w in words if w not in _FUNCTION_WORDS)


def _like_case(word: str, model: str) -> str:
    if model.isupper():
        return word.upper()
    if model[:1].isupper():
        return word.capitalize()
    return word


def _alike(old: str, vocab: Sequence[str]) -> list[str]:
    """Words of `vocab` that could stand where `old` stands: the same last two letters, a similar length.

    A crude part of speech ("raised" → "created", "property" → "history"), so
    a sentence with the swapped word still reads as one.
    """
    o = old.lower()
    return [w for w in vocab if w != o and w[-2:] == o[-2:] and abs(len(w) - len(o)) <= 3]


def _swap_word(s: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """`s` with one of its words (4+ letters) replaced by another word from `vocab` (one alike if any), or None."""
    spans = [m.span() for m in _WORD.finditer(s) if m.group(0).lower() not in _FUNCTION_WORDS]
    return _swap_one(s, spans, rng, vocab)


def _swap_one(s: str, spans: list[tuple[int, int]], rng: random.Random, vocab: Sequence[str]) -> str | None:
    """`s` with one of the three longest `spans` replaced by a word of `vocab` (one alike if any), or None."""
    if not spans or not vocab:
        return None
    # one of the three longest: long words name things ("refunds", "advisory"), short ones glue
    spans.sort(key=lambda ab: (-(ab[1] - ab[0]), ab[0]))
    a, b = rng.choice(spans[:3])
    old = s[a:b]
    new = _like_case(rng.choice(_alike(old, vocab) or vocab), old)
    return None if new.lower() == old.lower() else s[:a] + new + s[b:]


_PART = re.compile(r"[A-Z]?[a-z]{2,}")


def _swap_part(s: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """`s` with one of its word parts (a camelCase part or a lowercase run of 2+ letters) swapped, or None.

    For values, where `_swap_word` finds nothing: ``git add <file>...`` keeps
    its shape as ``git add <ledger>...``.
    """
    return _swap_one(s, [m.span() for m in _PART.finditer(s)], rng, vocab)


def _mutate_chars(s: str, rng: random.Random, lo: int = 0, digits_only: bool = False, frac: float = 0.4) -> str:
    """Change some letters/digits of `s[lo:]` keeping their class (digit, lower, upper; hex stays hex)."""
    chars = list(s)
    pos = [i for i in range(lo, len(s)) if s[i].isdigit() or (not digits_only and s[i].isascii() and s[i].isalpha())]
    if not pos:
        return s
    hexy = bool(re.fullmatch(r"[0-9a-f-]+", s[lo:]))
    k = min(len(pos), max(2 if len(pos) >= 4 else 1, round(len(pos) * frac)))
    for i in rng.sample(pos, k):
        c = s[i]
        if c.isdigit():
            lead = i == lo or not s[i - 1].isdigit()
            pool = "123456789" if lead and (i + 1 < len(s) and s[i + 1].isdigit()) else "0123456789"
        elif c.islower():
            pool = "abcdef" if hexy else "abcdefghijklmnopqrstuvwxyz"
        else:
            pool = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        chars[i] = rng.choice([x for x in pool if x != c] or list(pool))
    return "".join(chars)


def mutate(value: str, category: str, rng: random.Random, vocab: Sequence[str]) -> str:
    """Make a lookalike of a mined value (see docs/exams.md#3-mining-probes-from-real-sessions, "Decoys on real logs").

    It may equal `value` on a bad draw.
    """
    if category in ("identifier", "tool_returned_id"):
        m = re.match(r"(?:[A-Za-z]+[-_])+", value)  # keep an alphabetic prefix: ORD-, req_, bld-
        lo = m.end() if m and m.end() < len(value) else 0
        return _mutate_chars(value, rng, lo)
    if category == "number":
        return _mutate_chars(value, rng, digits_only=True, frac=0.5)
    if category == "path":
        head, _, base = value.rpartition("/")
        stem, dot, ext = base.partition(".") if not base.startswith(".") else (base, "", "")
        new_stem = _swap_word(stem, rng, vocab) if stem else None
        if new_stem is None:
            new_stem = _mutate_chars(stem or base, rng)
        return (head + "/" if head or value.startswith("/") else "") + new_stem + dot + ext
    if re.search(r"\d", value) and rng.random() < 0.5:
        return _mutate_chars(value, rng, digits_only=True, frac=0.5)
    # a camelCase name changes one of its parts ("AttributeError" -> "AttributeLedger"), not as a whole
    camel = re.search(r"[a-z][A-Z]", value) is not None
    swapped = _swap_part(value, rng, vocab) if camel else _swap_word(value, rng, vocab) or _swap_part(value, rng, vocab)
    return swapped if swapped is not None else _mutate_chars(value, rng)


def _decoy_prompt(u: Usable, answer: str, rng: random.Random, vocab: Sequence[str], hay: Haystacks) -> str | None:
    """Reword the source with one word of its subject (target, then window) made up and checked absent.

    A made-up target is the whole target's first line with one word swapped,
    then shortened as every question shows a target (`short_target`, with its
    "…"), so a decoy reads exactly like a real question; both the whole
    made-up line and the part shown are checked absent.
    """
    c = u.cand
    tgt = short_target(c.target)
    full = short_target(c.target, limit=10**9)
    shown = {"target": full, "before": c.before, "after": c.after}
    parts: list[str] = []
    if tgt and c.kind in ("tool_output", "tool_call") and u.variant.get("show_target", True) and tgt in u.prompt:
        parts.append("target")
    if u.variant.get("window", True) and "\u201c" in u.prompt:
        parts += ["before", "after"]
    for part in parts:
        for _ in range(12):
            made = _swap_word(shown[part], rng, vocab)
            if made is None:
                break
            if normalise(made) in hay.whole:
                continue
            if part == "target":
                made = short_target(made)
                if normalise(made.rstrip("\u2026")) in hay.whole:
                    continue  # the part shown is another real call's
            shown_opts: dict[str, Any] = {**u.variant, part: made}
            prompt = render(c, **shown_opts)
            if not contains(prompt, [normalise(answer)]) and prompt != u.prompt:
                return prompt
    return None


def make_decoys(
    case_id: str, chosen: Sequence[Usable], n: int, rng: random.Random, vocab: Sequence[str], hay: Haystacks
) -> list[Question]:
    """Up to `n` decoys of case `case_id`, made from the `chosen` real questions in a seeded order."""
    sources = list(chosen)
    rng.shuffle(sources)
    out: list[Question] = []
    used: set[str] = set()
    for u in sources:
        if len(out) >= n:
            break
        for _ in range(60):
            value = mutate(u.cand.value, u.cand.category, rng, vocab)
            key = normalise(value)
            if value == u.cand.value or key in used or guessable(value) or not absent(value, hay):
                continue
            prompt = _decoy_prompt(u, value, rng, vocab, hay)
            if prompt is None:
                break  # this source's subject cannot be made up: try the next source
            used.add(key)
            out.append(
                Question(
                    id=f"{case_id}-d{len(out):02d}",
                    case_id=case_id,
                    pointer=u.cand.pointer,
                    category=u.cand.category,
                    prompt=prompt,
                    answer=value,
                    decoy=True,
                )
            )
            break
    return out
