"""The one bounded-depth rule for JSON read from sessions and replies (`compaction_lab.core.bounded_json`)."""

from __future__ import annotations

import json
import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.core import bounded_json as bj
from tests.deep_json import HOSTILE_DEPTH, deep_array, deep_object


def _depth(value) -> int:
    """Nesting depth of a parsed value, written out independently of the module (recursive: tests keep it small)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


#: Strings that look like structure: brackets, quotes, backslashes, escapes, non-ASCII.
_TRICKY = st.text(alphabet=st.sampled_from(list('[]{}"\\/,:ab é\n\t\u2028\U0001f600\ud800')), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, st.booleans())
def test_text_depth_is_the_depth_of_the_parsed_value(value, ascii_only):
    """Brackets inside strings never count, however the strings are escaped."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert bj.text_depth(text) == _depth(value)
    assert bj.too_deep(text, _depth(value)) is False
    if _depth(value):
        assert bj.too_deep(text, _depth(value) - 1) is True


@pytest.mark.parametrize("make", [deep_array, deep_object], ids=["array", "object"])
def test_the_bound_is_exact(make):
    assert bj.loads(make(bj.MAX_DEPTH)) == json.loads(make(bj.MAX_DEPTH))
    with pytest.raises(bj.TooDeep, match=f"deeper than {bj.MAX_DEPTH} levels"):
        bj.loads(make(bj.MAX_DEPTH + 1))


@pytest.mark.parametrize("text", [deep_array(), deep_object(), "[" * HOSTILE_DEPTH, '{"a":' * HOSTILE_DEPTH])
def test_hostile_nesting_is_refused_not_a_recursion_error(text):
    """Valid or cut off, 100,000 levels are `TooDeep` (a ValueError, as malformed JSON is), never RecursionError."""
    with pytest.raises(bj.TooDeep):
        bj.loads(text)
    assert isinstance(bj.TooDeep(), ValueError)
    assert bj.parse_or_text(text) == text


def test_a_string_hiding_brackets_is_parsed():
    """Thousands of brackets inside strings (code in a tool output) are no nesting."""
    text = json.dumps({"output": "[" * 50_000, "escaped": '\\"[[[' * 1000, "list": [["x"]]})
    assert bj.text_depth(text) == 3
    assert bj.loads(text)["output"] == "[" * 50_000


def test_malformed_text_the_scan_misjudges_is_still_no_crash():
    """An unterminated string hides the brackets after it from the scan; the parse is still guarded."""
    text = '"' + "[" * HOSTILE_DEPTH
    with pytest.raises(ValueError):
        bj.loads(text)
    assert bj.parse_or_text(text) == text


@pytest.mark.parametrize("text, expected", [("not json", "not json"), ('{"a": [1]}', {"a": [1]}), ("7", 7)])
def test_parse_or_text(text, expected):
    assert bj.parse_or_text(text) == expected


def test_nests_deeper_on_built_values():
    value = json.loads(deep_array(bj.MAX_DEPTH))
    assert not bj.nests_deeper(value) and bj.nests_deeper([value])
    assert not bj.nests_deeper({"a": ({"b": 1},)}, 3) and bj.nests_deeper({"a": ({"b": [1]},)}, 3)
    assert not bj.nests_deeper("text", 0)


@pytest.mark.slow
def test_the_check_is_cheap_next_to_the_parse():
    """A 5 MB line full of bracketed code in strings, and one of 100,000 small objects: the depth check
    costs about what the parse costs, not a multiple of it (no per-character Python loop)."""
    code = json.dumps({"output": "def f(x):\n    return {'a': [x[0], \"q\"]}  # \\ \n" * 100_000})
    rows = json.dumps([{"a": [i, {"b": [1]}], "s": '[{"'} for i in range(100_000)])
    bj.too_deep(deep_array())  # the scan's one-off import is not what is measured
    for text in (code, rows):
        start = time.perf_counter()
        json.loads(text)
        parse = time.perf_counter() - start
        start = time.perf_counter()
        assert not bj.too_deep(text)
        check = time.perf_counter() - start
        assert check < 3 * parse + 0.2, (check, parse)


def test_load_file_reads_a_json_file_within_its_bounds(tmp_path):
    """A file the suite wrote but anyone may edit (run.json, sweep.json) is read bounded: size, depth, kind."""
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert bj.load_file(ok) == {"a": [1, 2]}
    deep = tmp_path / "deep.json"
    deep.write_text(deep_array(HOSTILE_DEPTH), encoding="utf-8")
    with pytest.raises(bj.TooDeep):
        bj.load_file(deep)
    big = tmp_path / "big.json"
    big.write_text('"' + "x" * 100 + '"', encoding="utf-8")
    with pytest.raises(ValueError, match="larger than 64 bytes"):
        bj.load_file(big, max_bytes=64)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        bj.load_file(fifo)  # refused at once, never blocks
    with pytest.raises(FileNotFoundError):
        bj.load_file(tmp_path / "absent.json")
