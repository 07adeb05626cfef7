r"""The one JSON decode of an import: lone surrogates repaired, deep nesting refused.

* **Lone surrogates.** JSON may escape a lone UTF-16 surrogate (``"\ud800"``, as
  JavaScript tools write them). Python parses it into a string no UTF-8 writer
  (SQLite, parquet, `Session.to_jsonl`) can encode, so every JSON decode of
  the import (`parse_json`: JSONL lines, whole-file JSON, the JSON of OpenCode
  rows and storage files, JSON nested in strings) *replaces* each lone
  surrogate by U+FFFD. Nothing is dropped; the lines or documents affected
  are counted as the note ``lone_surrogates_replaced`` (`NOTES`), which is not
  a skip. The check is cheap: the parsed value is only walked when the text
  holds a ``\ud800``-``\udfff`` escape.
* **Deep nesting.** The same decode refuses JSON nested deeper than
  `bounded_json.MAX_DEPTH` levels (checked on the text, before parsing): a
  line or document that deep is a ``malformed_json`` skip saying so, and JSON
  nested in strings (a call's arguments) stays the text it was.
"""

from __future__ import annotations

import re
from typing import Any

from compaction_lab.core import bounded_json

#: A JSON escape of a UTF-16 surrogate (a lone one survives parsing as an unencodable str).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(text: str) -> tuple[Any, bool]:
    r"""Parse JSON text, replacing lone surrogates by U+FFFD: ``(value, whether any was replaced)``.

    The one JSON decode of the import (see the module docstring). Valid
    surrogate pairs are joined by the parser; what is left of the
    ``\ud800``-``\udfff`` range is lone and cannot be encoded as UTF-8.

    Raises
    ------
    ValueError
        As `json.loads` does (malformed JSON), or `bounded_json.TooDeep`
        (nested deeper than `bounded_json.MAX_DEPTH`).
    """
    value = bounded_json.loads(text)
    if _SURROGATE_ESCAPE.search(text) is None:  # the common case: no walk at all
        return value, False
    return _replace_surrogates(value)


def loads(text: str) -> Any:
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
