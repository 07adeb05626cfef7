"""How JavaScript measures and cuts a string (`core.text.js_length`, `js_slice`), and the strategies that use it."""

from __future__ import annotations

import math

import pytest

from compaction_lab.core.text import js_json, js_length, js_slice
from compaction_lab.strategies import base
from compaction_lab.strategies.arms import gemini_cli, opencode, pi
from tests.helpers import make_session

LONE_HIGH, LONE_LOW = "\ud800", "\udfff"


@pytest.mark.parametrize(
    "text, units",
    [
        ("", 0),
        ("hello", 5),  # ASCII: one unit a character
        ("é€中", 3),  # Basic Multilingual Plane, not ASCII: still one each
        ("😀", 2),  # astral: a surrogate pair
        ("a😀b𝄞", 6),
        (LONE_HIGH, 1),  # a lone surrogate is one unit, as in JavaScript
        (f"x{LONE_LOW}y{LONE_HIGH}", 4),
    ],
)
def test_js_length_counts_utf16_code_units(text, units):
    assert js_length(text) == units


def test_js_length_is_utf16_length_on_valid_text():
    for text in ("plain", "naïve café", "日本語", "emoji 😀🎉 mixed ∑"):
        assert js_length(text) == len(text.encode("utf-16-le")) // 2


@pytest.mark.parametrize(
    "text, n, head",
    [
        ("abcdef", 3, "abc"),
        ("abc", 10, "abc"),
        ("éèê", 2, "éè"),
        ("a😀b", 3, "a😀"),  # the pair fits whole
        ("a😀b", 2, "a"),  # the cut would split the pair: it goes whole
        ("😀😀", 1, ""),
        ("😀😀", 0, ""),
        (f"a{LONE_HIGH}b", 2, f"a{LONE_HIGH}"),  # a lone surrogate is kept
        (f"{LONE_LOW}é", 1, LONE_LOW),
    ],
)
def test_js_slice_keeps_the_first_n_units_in_whole_characters(text, n, head):
    assert js_slice(text, n) == head
    assert js_length(js_slice(text, n)) <= n


def test_js_slice_matches_the_old_pi_rule_on_valid_text():
    # What pi's truncation did before the rule moved here: encode, cut, drop a split pair's half.
    def old(text: str, n: int) -> str:
        return text[:n] if text.isascii() else text.encode("utf-16-le")[: 2 * n].decode("utf-16-le", errors="ignore")

    text = "ab😀cé𝄞中😀"
    for n in range(js_length(text) + 2):
        assert js_slice(text, n) == old(text, n)


def test_strategies_measure_a_lone_surrogate_instead_of_failing():
    text = f"ok {LONE_HIGH} 😀"  # 3 + 1 + 1 + 2 units
    assert js_length(text) == 7
    assert base.est_chars4(text) == (7 + 2) // 4  # OpenCode's Math.round(length / 4)
    rec = make_session([("user", text)]).records[0]
    assert pi.estimate_entry(pi.PiEntry("e", "user", (rec,))) == math.ceil(7 / 4)
    cut = pi._truncate_for_summary(LONE_HIGH * 5 + "😀", max_chars=6)
    assert cut == LONE_HIGH * 5 + "\n\n[... 1 more characters truncated]"
    assert gemini_cli._text_tokens(LONE_HIGH) > 0

    def opencode_units(text: str) -> list[tuple[int, int]]:
        return opencode.message_units(make_session([("user", text)]).records, [(0, 1)])

    assert opencode_units(LONE_HIGH) == opencode_units("x")  # one unit, like any BMP character


def test_js_json_is_json_stringify():
    """Compact separators, non-ASCII kept as is, as JavaScript's JSON.stringify writes it."""
    assert js_json({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'
    assert js_json("x\n") == '"x\\n"'
