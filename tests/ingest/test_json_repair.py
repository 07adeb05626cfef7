r"""The import's JSON decode: msgspec where it agrees with the standard library, the standard library elsewhere.

`json_repair.parse_json` decodes with msgspec first and hands whatever msgspec
refuses to the standard library path it replaced (`reference` below is that
path, as it was). The decode must not change what an import reads, so:

* every input gets what `reference` gives it: the same value (types, key
  order, float bits), the same replaced flag, or the same exception type
  and message -- on hand-picked edge cases (lone surrogates, ``NaN``, numbers
  out of a float's range, big integers, control characters, BOMs, whitespace,
  nesting at and past `bounded_json.MAX_DEPTH`) and on seeded mutations of
  real log lines;
* the depth bound is decided on the value as the text scan decides it;
* a non-ASCII text keeps its size (msgspec would cache its UTF-8 on it);
* `iter_jsonl` reads lines longer than its read buffer whole.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_lab.core import bounded_json
from compaction_lab.ingest.files import STREAM_BUFFER, iter_jsonl
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.importers.codex import utf8_length
from compaction_lab.ingest.json_repair import REFUSED, fast_decode, parse_json
from tests.helpers import FIXTURES

_LONE = re.compile("[\ud800-\udfff]")


def _repaired(value: Any) -> tuple[Any, bool]:
    """A parsed value with every lone surrogate (key or string) replaced by U+FFFD, and whether one was."""
    if isinstance(value, str):
        fixed = _LONE.sub("\ufffd", value)
        return fixed, fixed != value
    if isinstance(value, list):
        items = [_repaired(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, dict):
        pairs = [(_repaired(k), _repaired(v)) for k, v in value.items()]
        return {k: v for (k, _), (v, _) in pairs}, any(ck or cv for (_, ck), (_, cv) in pairs)
    return value, False


def reference(data: str | bytes) -> tuple[Any, bool]:
    """`parse_json` as it was before msgspec: the standard library with the depth bound and the repair."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    value = bounded_json.loads(text)
    if re.search(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}", text) is None:  # only an escape can leave one lone
        return value, False
    return _repaired(value)


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, dict keys in the same order, floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def outcome(fn, data: str | bytes) -> tuple[str, Any]:
    try:
        return "value", fn(data)
    except Exception as exc:  # the exception is part of the verdict: its type and message
        return "error", (type(exc), str(exc))


def assert_agrees(data: str | bytes) -> None:
    """`parse_json` gives `data` what `reference` gives it, as bytes and as text."""
    forms: list[str | bytes] = [data]
    if isinstance(data, bytes):
        try:
            forms.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    for form in forms:
        got, want = outcome(parse_json, form), outcome(reference, form)
        assert got[0] == want[0], (form[:200], got, want)
        if got[0] == "error":
            assert got[1] == want[1], form[:200]
        else:
            assert same(got[1][0], want[1][0]) and got[1][1] == want[1][1], form[:200]


DEEP = bounded_json.MAX_DEPTH

EDGE_CASES: list[bytes] = [
    rb'{"a":"\ud800"}',  # lone surrogates: repaired by the standard-library path
    rb'{"a":"\udc00x","b":["\udbff"]}',
    rb'{"\ud800":1}',
    rb'{"a":"\ud83d\ude80"}',  # a valid pair: joined
    rb'{"a":"\\ud800"}',  # an escaped backslash: no surrogate at all
    b'{"a":NaN}',
    b'{"a":Infinity,"b":-Infinity}',
    b'{"a":1e400}',
    b'{"a":-1e400}',
    b'{"a":1.7976931348623157e309}',
    b'{"a":1e-400}',
    b'{"a":123456789012345678901234567890}',  # big integers stay int
    b'{"a":-9223372036854775809}',
    b'{"a":18446744073709551616}',
    b'{"a":' + b"1" * 4300 + b"}",
    b'{"a":' + b"1" * 4301 + b"}",  # past Python's integer digit limit
    b'{"a":0.' + b"1" * 5000 + b"}",
    b'{"a":9007199254740993,"b":0.30000000000000004,"c":-0.0,"d":-0,"e":1E5,"f":5e-324}',
    b'{"a":1,"a":2,"b":3}',  # duplicate keys: the last wins, in the first one's place
    b'{"b":1,"a":2,"b":3}',
    b'{"a":"x\ty"}',  # raw control characters
    b'{"a":"\x00"}',
    b'{"a":"x\x7fy"}',
    b'{"a":"\\u0000\\/\\u00e9"}',
    b'{"a":"\\x41"}',
    b"\xef\xbb\xbf{}",  # a BOM in the middle of a file
    b'{"a":"\xff"}',  # not UTF-8: overlong, surrogate, past U+10FFFF, cut
    b'{"a":"\xc0\x80"}',
    b'{"a":"\xed\xa0\x80"}',
    b'{"a":"\xf4\x90\x80\x80"}',
    b'{"a":"\xe2\x82"}',
    b' \t\r\n{"a" : 1 }\r\n ',
    b"{}\x0b",
    b"{}\x0c",
    b"",
    b"   ",
    b'{"a":1}x',
    b'{"a":[1,]}',
    b'{"a":01}',
    b'{"a":.5}',
    b'{"a":+1}',
    b"{'a':1}",
    b"[]",
    b"null",
    b'"s"',
    b"-1.5e-7",
    b"[" * DEEP + b"]" * DEEP,
    b"[" * (DEEP + 1) + b"]" * (DEEP + 1),
    b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    b'{"a":' * (DEEP + 1) + b"1" + b"}" * (DEEP + 1),
    b'{"s":"' + b"[" * (3 * DEEP) + b'"}',  # brackets in a string do not nest
    b"[" * (5 * DEEP),  # unbalanced, deep
    b"[" * 100_000 + b"]" * 100_000,
]


@pytest.mark.parametrize("data", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases_read_as_the_standard_library_reads_them(data):
    assert_agrees(data)


def _mutants(seed: int, n: int) -> list[bytes]:
    """Real log lines with JSON's hard parts spliced in, cut or flipped (seeded)."""
    rng = random.Random(seed)
    lines = [
        line
        for path in sorted(FIXTURES.glob("*/*.jsonl"))
        for line in path.read_bytes().split(b"\n")[:60]
        if line.strip()
    ]
    assert lines, "the fixtures hold JSONL"
    frags = [
        *(case for case in EDGE_CASES if len(case) < 200),
        rb"\ud800",
        rb"\udc00",
        rb"\ud83d\ude80",
        rb"\ud83d",
        b"\\",
        b'"',
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b"\xc3\xa9",
        b"\xf0\x9f\x9a\x80",
        b"\xe2\x80\xa8",
        b"1e308",
        b"1e309",
        b"-0",
        b"1.",
        b"00",
    ]
    out = []
    for _ in range(n):
        b = bytearray(rng.choice(lines))
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            pos, op = rng.randrange(len(b) + 1), rng.random()
            if op < 0.6:
                b[pos:pos] = rng.choice(frags)
            elif op < 0.8:
                del b[pos : pos + rng.randint(1, 4)]
            elif b:
                b[min(pos, len(b) - 1)] = rng.randrange(256)
        out.append(bytes(b))
    return out


def test_mutated_log_lines_read_as_the_standard_library_reads_them():
    mutants = _mutants(30, 3000)
    for data in mutants:
        assert_agrees(data)
    # The cases must exercise both paths: msgspec takes most, the standard library the rest.
    fast = sum(fast_decode(m) is not REFUSED for m in mutants)
    assert 0.2 * len(mutants) < fast < len(mutants)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(value=json_values, indent=st.sampled_from([None, 1]), ascii=st.booleans())
def test_any_value_round_trips_as_the_standard_library_reads_it(value, indent, ascii):
    text = json.dumps(value, indent=indent, ensure_ascii=ascii)
    assert_agrees(text.encode("utf-8"))


@pytest.mark.parametrize("depth", [DEEP - 1, DEEP, DEEP + 1, 2 * DEEP])
@pytest.mark.parametrize("shape", ["lists", "objects", "mixed"])
def test_depth_bound_is_decided_on_the_value_as_on_the_text(depth, shape):
    value: Any = 1
    for i in range(depth):
        value = [value] if shape == "lists" or (shape == "mixed" and i % 2) else {"k": value}
    text = json.dumps({"s": "[{" * DEEP, "v": value})[:-1] + ', "t": "}]"}'
    deep = bounded_json.text_depth(text) > DEEP
    assert deep == bounded_json.nests_deeper(json.loads(text))
    assert (fast_decode(text) is REFUSED) == deep
    if deep:
        with pytest.raises(bounded_json.TooDeep):
            parse_json(text)
    assert_agrees(text.encode())


def test_a_non_ascii_text_keeps_its_size():
    """msgspec caches the UTF-8 of a str it decodes: a record holding that text would hold it twice."""
    text = '{"output": "café ' + "x" * 10_000 + '"}'
    broken = text[:-1]  # refused: the standard library's error, the text still its size
    sizes = sys.getsizeof(text), sys.getsizeof(broken)
    assert parse_json(text)[0]["output"].startswith("café")
    with pytest.raises(ValueError):
        parse_json(broken)
    assert (sys.getsizeof(text), sys.getsizeof(broken)) == sizes


def test_lines_longer_than_the_read_buffer_are_read_whole(tmp_path: Path):
    big = {"type": "x", "payload": {"text": "é" * STREAM_BUFFER + "[{" * 300}}
    lines = [{"n": 0}, big, {"n": 2}]
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(o, ensure_ascii=False) for o in lines) + "\n", encoding="utf-8")
    audit = ImportAudit()
    got = list(iter_jsonl(path, audit))
    assert [n for n, _, _ in got] == [1, 2, 3]
    assert [o for _, o, _ in got] == lines
    assert audit.n_skipped == 0


@pytest.mark.parametrize("text", ["", "gAAAAA" + "ab+/=" * 100, "café", "🚀", "\ud800x", "\udfff\ud800"])
def test_utf8_length_is_the_encoded_length(text):
    assert utf8_length(text) == len(text.encode("utf-8", "surrogatepass"))
