from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.exam.grading import (
    accepted,
    contains_answer,
    fell_for_decoy,
    grade,
    is_abstention,
    normalise,
)
from compaction_lab.exam.readers import ReaderAnswer, VerbatimReader
from compaction_lab.exam.types import NOT_FOUND, Question


def q(answer, aliases=(), decoy=False, qid="q1"):
    return Question(
        id=qid,
        case_id="c1",
        pointer="tool",
        category="tool_returned_id",
        prompt="What order ID did the POST /v1/orders call return?",
        answer=answer,
        aliases=aliases,
        decoy=decoy,
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("ORD-58213-QX", "ord-58213-qx"),
        ("  The ID is\n\t ORD-1  ", "the id is ord-1"),
        ('"ORD-1"', "ord-1"),
        ("`ORD-1`.", "ord-1"),
        ("\u201cORD-1\u201d", "ord-1"),
        ("**NOT_FOUND**", "not_found"),
        ("184.532 ms.", "184.532 ms"),
        ("98.1234%", "98.1234%"),  # a unit at the end is kept
        ("s3://bucket-a/x", "s3://bucket-a/x"),  # interior punctuation untouched
        ("E1234: lock timeout on shard kv-ab12c", "e1234: lock timeout on shard kv-ab12c"),
        ("Straße", "strasse"),  # case-fold, not lower
        ("", ""),
        (" .,;:!? ", ""),
    ],
)
def test_normalise(text, expected):
    assert normalise(text) == expected


@given(st.text(alphabet=st.characters(min_codepoint=9, max_codepoint=126), max_size=40))
@settings(max_examples=200, deadline=None)
def test_normalise_is_idempotent(text):
    assert normalise(normalise(text)) == normalise(text)


@pytest.mark.parametrize(
    "text",
    [
        NOT_FOUND,
        "not found",
        "Not Found",
        " NOT_FOUND. ",
        "`NOT_FOUND`",
        "NOT-FOUND",
        "NOTFOUND",
        "not_found\n",
        "NOT_FOUND - the value is not in my context",
        "Not found: nothing about that in the session.",
    ],
)
def test_abstentions(text):
    assert is_abstention(text)


@pytest.mark.parametrize(
    "text", ["", "   ", "ORD-1", "found", "not foundation", "the value was not found", "NOT", "nothing"]
)
def test_not_abstentions(text):
    assert not is_abstention(text)


def test_real_question_correct_iff_value_contained():
    question = q("ORD-58213-QX")
    assert grade(question, "ORD-58213-QX")
    assert grade(question, "ord-58213-qx")
    assert grade(question, "The call returned `ORD-58213-QX`.")
    assert not grade(question, "ORD-58213")  # a prefix is not the value
    assert not grade(question, "ORD-58214-QX")
    assert not grade(question, "")
    assert not grade(question, NOT_FOUND)


def test_an_abstention_that_quotes_the_value_still_fails():
    assert not grade(q("ORD-1"), "NOT_FOUND (maybe ORD-1?)")


def test_aliases_count():
    question = q("184.532 ms", aliases=("184.532ms", "184.532"))
    assert accepted(question) == ("184.532 ms", "184.532ms", "184.532")
    assert grade(question, "184.532 ms")
    assert grade(question, "p95 was 184.532")
    assert grade(question, "184.532MS")
    assert not grade(question, "184.53 ms")


def test_whitespace_inside_a_value_collapses():
    assert grade(
        q("E8009: upstream reset on connection conn-3848n"), "E8009:  upstream reset\non connection conn-3848n"
    )


def test_retained_iff_present():
    question = q("lru-shrike-1112")
    assert contains_answer(question, "I named the cache profile `lru-shrike-1112` because ...")
    assert contains_answer(question, "LRU-SHRIKE-1112")
    assert not contains_answer(question, "I named the cache profile lru-shrike-1113")
    assert not contains_answer(question, "")


def test_decoys_pass_only_by_abstaining():
    decoy = q("idem_z4ubt9cq", decoy=True)
    assert grade(decoy, NOT_FOUND)
    assert grade(decoy, "not found")
    assert not grade(decoy, "idem_z4ubt9cq")  # even its own value: it never appeared, so naming it is a guess
    assert not grade(decoy, "idem_abc")
    assert not grade(decoy, "")
    assert fell_for_decoy(decoy, "idem_abc")
    assert not fell_for_decoy(decoy, NOT_FOUND)
    assert not fell_for_decoy(q("x"), "y")


@dataclass(frozen=True)
class GuessingReader:
    """A reader that never abstains: it always answers with a plausible-looking value."""

    guess: str = "ORD-00000-AA"
    name: str = "guesser"
    label: str = "guessing reader (test)"
    stand_in: bool = True

    def answer(self, messages, question, tools=(), **_):
        return ReaderAnswer(given=self.guess, stand_in=True)


DECOYS = [
    q("idem_z4ubt9cq", decoy=True, qid="d1"),
    q("7081.14 req/s", aliases=("7081.14req/s", "7081.14"), decoy=True, qid="d2"),
    q("E4242: stale lease held by worker w-9zz9z", decoy=True, qid="d3"),
]


@pytest.mark.parametrize("guess", ["ORD-00000-AA", "7081.14", "idem_z4ubt9cq", "I think it was 12 ms"])
def test_a_guessing_reader_fails_every_decoy(guess):
    reader = GuessingReader(guess)
    answers = [reader.answer([], d).given for d in DECOYS]
    assert [grade(d, a) for d, a in zip(DECOYS, answers, strict=True)] == [False] * len(DECOYS)


def test_the_verbatim_reader_passes_every_decoy():
    messages = [{"role": "user", "content": "nothing relevant"}]
    assert all(grade(d, VerbatimReader().answer(messages, d).given) for d in DECOYS)


@pytest.mark.slow
@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_./:-]{2,20}[A-Za-z0-9]", fullmatch=True))
@settings(max_examples=100, deadline=None)
def test_any_value_is_graded_right_when_quoted_back(value):
    question = q(value)
    if is_abstention(value):
        return
    assert grade(question, value)
    assert grade(question, f"The value is `{value}`.")
    assert not grade(question, NOT_FOUND)


_WHITESPACE = st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2003", "\u3000"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_WHITESPACE, st.text(min_size=0, max_size=4)), max_size=20).map("".join))
def test_normalise_collapses_exactly_what_the_whitespace_regex_did(text):
    import re

    from compaction_lab.exam.grading import STRIP_CHARS

    # The former rule, as a regex: ``\s`` runs to one space, then the edges stripped.
    assert normalise(text) == re.sub(r"\s+", " ", text.casefold()).strip(STRIP_CHARS)
