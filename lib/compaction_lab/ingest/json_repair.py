r"""The one JSON decode of an import: lone surrogates repaired, deep nesting refused.

`parse_json` decodes every JSON of an import (JSONL lines, whole-file JSON, the JSON of OpenCode
rows and storage files, JSON nested in strings):

* **Lone surrogates.** A lone UTF-16 surrogate escape (``"\ud800"``) parses into a string no UTF-8
  writer can encode, so each is *replaced* by U+FFFD. Nothing is dropped; the lines or documents
  affected are counted as the note ``lone_surrogates_replaced`` (`NOTES`), which is not a skip.
* **Deep nesting.** JSON nested deeper than `bounded_json.MAX_DEPTH` levels is a ``malformed_json``
  skip saying so; JSON nested in strings (a call's arguments) stays the text it was.
* **Fast path.** `fast_decode` decodes with msgspec on the bytes as read; msgspec accepts a subset
  of what `json.loads` accepts and returns the same values for it. Whatever it rejects is decoded
  again by the standard library (`bounded_json.loads`), which decides and words the verdict
  (tests/ingest/test_json_repair.py checks the two agree).

Design: docs/session-formats.md#bad-input; bounds: docs/security.md.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from compaction_lab.core import bounded_json

#: A JSON escape of a UTF-16 surrogate (a lone one survives parsing as an unencodable str).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_fast_decode = msgspec.json.Decoder().decode
#: Every byte but the two that open a nesting level: deleted to count the openers in one pass.
_NOT_OPENER = bytes(b for b in range(256) if b not in b"[{")


#: What `fast_decode` returns for text msgspec refuses (a value can never be this object).
REFUSED: Any = object()


def fast_decode(data: str | bytes) -> Any:
    """Decode JSON with msgspec: its value, or `REFUSED` when msgspec refuses it or it nests too deep.

    A value returned is the value `parse_json` returns, with nothing replaced
    (msgspec refuses lone surrogate escapes); `REFUSED` leaves the verdict to
    `parse_json`'s standard-library path. Never raises.
    """
    # A str that is not ASCII is encoded here: msgspec would keep its UTF-8 form cached on the
    # str, doubling the memory of a text a record may go on holding.
    raw = data if isinstance(data, bytes) else data if data.isascii() else data.encode("utf-8", "surrogatepass")
    try:
        value = _fast_decode(raw)
    except Exception:  # any refusal (malformed, too deep, not UTF-8, lone surrogates): the standard library decides
        return REFUSED
    # Openers counted, strings included, bound the depth: only text with more is walked (rare:
    # brackets are mostly inside strings, where they do not nest).
    openers = raw.count("[") + raw.count("{") if isinstance(raw, str) else len(raw.translate(None, _NOT_OPENER))
    if openers > bounded_json.MAX_DEPTH and bounded_json.nests_deeper(value):
        return REFUSED  # the standard library's bound words the skip
    return value


def parse_json(data: str | bytes) -> tuple[Any, bool]:
    r"""Parse JSON text, replacing lone surrogates by U+FFFD: ``(value, whether any was replaced)``.

    The one JSON decode of the import (see the module docstring). Valid
    surrogate pairs are joined by the parser; what is left of the
    ``\ud800``-``\udfff`` range is lone and cannot be encoded as UTF-8.

    Parameters
    ----------
    data : str or bytes
        JSON text, or its UTF-8 bytes (decoded strictly).

    Raises
    ------
    UnicodeDecodeError
        `data` is bytes and not UTF-8 (a `ValueError`; raised before any parse).
    ValueError
        As `json.loads` does (malformed JSON), or `bounded_json.TooDeep`
        (nested deeper than `bounded_json.MAX_DEPTH`).
    """
    value = fast_decode(data)
    if value is not REFUSED:
        return value, False
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    value = bounded_json.loads(text)
    if _SURROGATE_ESCAPE.search(text) is None:  # the common case: no walk at all
        return value, False
    return _replace_surrogates(value)


def loads(text: str | bytes) -> Any:
    """`parse_json` without the flag: for JSON nested in strings of an already parsed line."""
    return parse_json(text)[0]


def _clean(s: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", s)


def _replace_surrogates(value: Any) -> tuple[Any, bool]:
    """Return the parsed value with every lone surrogate replaced (in place; iterative, so depth is no limit)."""
    if isinstance(value, str):
        fixed = _clean(value)
        return fixed, fixed != value
    changed = False
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(_LONE_SURROGATE.search(k) for k in node):
                items = [(_clean(k), v) for k, v in node.items()]
                node.clear()
                node.update(items)
                changed = True
            items_iter = list(node.items())
        elif isinstance(node, list):
            items_iter = list(enumerate(node))
        else:
            continue
        for key, val in items_iter:
            if isinstance(val, str):
                if _LONE_SURROGATE.search(val):
                    node[key] = _clean(val)
                    changed = True
            elif isinstance(val, (dict, list)):
                stack.append(val)
    return value, changed
