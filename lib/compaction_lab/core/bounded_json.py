"""JSON read from text someone else wrote, parsed only when it nests no deeper than `MAX_DEPTH`.

Session files carry JSON inside JSON: a tool call's ``arguments``, a wrapped tool output, an
OpenCode row, a shape's tool list, a model's tool-call arguments. Python's parser recurses once per
level, so ``"[" * 100_000 + "]" * 100_000`` raises `RecursionError` wherever such text is read —
and a value nested some hundreds of levels deep parses, then breaks the next `json.dumps` or
recursive walk further down the stack. One rule for every stage: JSON that nests deeper than
`MAX_DEPTH` is not parsed.

* `loads` is `json.loads` with the bound: too deep raises `TooDeep`, a `ValueError`, so a caller's
  "not JSON" branch handles it (the importers count the line as a ``malformed_json`` skip).
* `parse_or_text` returns the text itself, a plain string, when it is not JSON or too deep: what a
  strategy shows a call's arguments as when it cannot read them.
* `too_deep` decides on the text before any parse, counting brackets outside strings: two C-speed
  counts for the usual text (no more openers than the bound), a vectorised scan otherwise.
* `nests_deeper` is the same bound for a value already built (a profile's YAML).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from compaction_lab.core import regular_file

#: Deepest nesting parsed. Real arguments and session lines nest a few dozen levels at most; 200 keeps
#: every later `json.dumps` or recursive walk of a parsed value far from Python's recursion limit (1000).
MAX_DEPTH = 200

#: Every byte but the five that decide nesting (``"`` ``[`` ``]`` ``{`` ``}``): deleted before the scan.
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'"[]{}')


class TooDeep(ValueError):
    """JSON text nests deeper than `MAX_DEPTH`: not parsed (a `ValueError`, as malformed JSON is)."""


def _message(limit: int) -> str:
    return f"JSON nests deeper than {limit} levels"


@lru_cache(maxsize=1)
def _steps() -> Any:
    """+1 for an opening bracket, -1 for a closing one, 0 for anything else, indexed by byte."""
    import numpy as np  # only text with more than MAX_DEPTH openers gets here

    steps = np.zeros(256, dtype=np.int8)
    steps[[ord("["), ord("{")]] = 1
    steps[[ord("]"), ord("}")]] = -1
    return steps


def text_depth(text: str) -> int:
    """How deep the brackets of JSON text nest, ignoring brackets inside strings (``[[]]`` is 2).

    Exact for valid JSON; for malformed text it is what the brackets say (an unterminated string
    hides the brackets after it, and `loads` then still guards the parse).

    Parameters
    ----------
    text : str
        JSON text (any size; memory stays a small multiple of its structural characters).

    Returns
    -------
    int
        The greatest nesting depth, 0 for a scalar.
    """
    import numpy as np

    raw = text.encode("utf-8", "surrogatepass")
    if b"\\" in raw:
        # Escaped backslashes first, so that in ``\\"`` the quote is seen to end its string.
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    raw = raw.translate(None, _NOT_STRUCTURAL)
    if not raw:
        return 0
    chars = np.frombuffer(raw, dtype=np.uint8)
    # An odd count of quotes so far means inside a string (uint8 wraps at 256, keeping the parity).
    inside = (np.cumsum(chars == ord('"'), dtype=np.uint8) & 1).astype(bool)
    steps = _steps()[chars]
    steps[inside] = 0
    return max(0, int(np.cumsum(steps, dtype=np.int32).max()))


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests deeper than `limit` (see `text_depth`); cheap for the usual text."""
    if text.count("[") + text.count("{") <= limit:  # cannot nest deeper than it opens
        return False
    return text_depth(text) > limit


def loads(text: str) -> Any:
    """`json.loads` for text someone else wrote: refused when it nests deeper than `MAX_DEPTH`.

    Raises
    ------
    TooDeep
        The text nests deeper than `MAX_DEPTH` (a `ValueError`).
    ValueError
        Not JSON, as `json.loads` says.
    """
    if isinstance(text, str) and too_deep(text):
        raise TooDeep(_message(MAX_DEPTH))
    try:
        return json.loads(text)
    except RecursionError:  # malformed text the bracket scan misjudged; never a crash
        raise TooDeep(_message(MAX_DEPTH)) from None


#: Largest JSON file of the suite's own kind read back (run.json, sweep.json, counts): real ones are kilobytes.
MAX_FILE_BYTES = 64 * 1024 * 1024


def load_file(path: str | os.PathLike[str], max_bytes: int = MAX_FILE_BYTES) -> Any:
    """Read a JSON file someone may have edited (a run folder's ``run.json``, a sweep's plan) within bounds.

    Only a regular file is opened (a FIFO never blocks the reader), at most `max_bytes` of it are read, and
    the text is parsed by `loads`.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not a regular file, larger than `max_bytes`, not UTF-8, not JSON or nested too deep (`TooDeep`).
    OSError
        The file cannot be read.
    """
    raw = regular_file.read(path, max_bytes)
    return loads(raw.decode("utf-8"))


def parse_or_text(text: str) -> Any:
    """Parse `text` as JSON; return `text` itself (a plain string) when it is not JSON or nests too deep."""
    try:
        return loads(text)
    except ValueError:
        return text


def nests_deeper(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a built value (mappings, lists, tuples) nests deeper than `limit`; iterative, stops early."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (Mapping, list, tuple)))
    return False


__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "TooDeep",
    "load_file",
    "loads",
    "nests_deeper",
    "parse_or_text",
    "text_depth",
    "too_deep",
]
