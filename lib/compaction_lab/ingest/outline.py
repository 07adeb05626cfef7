"""The outline of a JSON line too long for the sniffing head: its shape and short values, in bounded memory.

Sniffers judge a source by the parsed lines of its head (`files.read_head`, `files.HEAD_BYTES`). A first
line longer than the head -- a chat conversation opening with a long system prompt, a rollout whose
``session_meta`` carries one, a pasted image -- never parses there, and a scan of the head's text for
known keys only works for one JSON spacing and only for keys written before the long value. So such a
line is read on, a chunk at a time, to its end (or to where its value closes), and what sniffers look at
is kept: `outline` returns the line's value with

* every string cut to `OUTLINE_CHARS` characters (types, roles and ids are short; a prompt is not needed),
* at most `OUTLINE_ITEMS` members of each object or array, objects and arrays nested deeper than
  `OUTLINE_DEPTH` kept empty, and `OUTLINE_VALUES` values in all,

whatever the line's length, key order or spacing. What is not kept is read past without being built: a
string by one regular-expression match per chunk, an object or array by counting its brackets. Memory is
a chunk (`OUTLINE_CHUNK`) and the outline; time is one pass over the line. The outline is only ever
sniffed, never imported: the importer parses the line itself.

Nothing here parses nested JSON with a recursive parser: the outline is built with an explicit stack, so
nesting of any depth costs nothing but the bracket count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from compaction_lab.core import bounded_json

if TYPE_CHECKING:
    import numpy as np

#: Characters kept of each string (and object key) of an outline.
OUTLINE_CHARS = 256
#: Members kept of each object or array; the rest are read past.
OUTLINE_ITEMS = 64
#: Nesting kept: objects and arrays deeper than this are kept empty (their type still shows).
OUTLINE_DEPTH = 6
#: Values kept in one outline in all; past them the line is read to its end, nothing more kept.
OUTLINE_VALUES = 4096
#: Bytes read at a time from the rest of the line.
OUTLINE_CHUNK = 64 * 1024
#: Longest number or literal read (a longer one is not JSON a log writes: the line is not outlined).
_LONGEST_SCALAR = 4096

_QUOTE, _BACKSLASH, _COLON, _COMMA = b'"'[0], b"\\"[0], b":"[0], b","[0]
_OPENERS, _CLOSERS = frozenset(b"[{"), frozenset(b"]}")
_WHITESPACE = re.compile(rb"[ \t\r]*")
#: A string's body up to its closing quote, escapes included; stops early at a backslash ending the buffer.
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_SCALAR = re.compile(rb"[-+.0-9A-Za-z]*")
_INTEGER = re.compile(rb"-?[0-9]+")
_LITERALS = {b"true": True, b"false": False, b"null": None}


@cache
def _steps() -> np.ndarray:
    """+1 for an opening bracket, -1 for a closing one, indexed by byte (reading past a long bracket run).

    Made when first needed: numpy is imported only by a line that needs it, not by every command that imports.
    """
    import numpy as np

    steps = np.zeros(256, dtype=np.int8)
    steps[list(_OPENERS)] = 1
    steps[list(_CLOSERS)] = -1
    return steps


class _LineEnd(Exception):
    """The line ended (its newline, or the end of the file) before the value did."""


class _NotJson(Exception):
    """The line is not JSON: nothing to outline."""


class _Reader:
    """The bytes of one line, a chunk at a time, never past its newline."""

    def __init__(self, start: bytes, more: Iterator[bytes]):
        nl = start.find(b"\n")
        self.ended = nl >= 0
        self.buf = start[:nl] if self.ended else start
        self.pos = 0
        self._more = more
        self.kept = 0  # values kept so far (`OUTLINE_VALUES`)

    def fill(self) -> bool:
        """Read the next chunk of the line after what is left unread; False at the line's end."""
        if self.ended:
            return False
        chunk = next(self._more, b"")
        nl = chunk.find(b"\n")
        if not chunk or nl >= 0:
            self.ended = True
            chunk = chunk[:nl] if nl >= 0 else chunk
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return bool(chunk)

    def peek(self) -> int:
        """Return the next byte that is not whitespace, leaving the position on it."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # \s* always matches
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                raise _LineEnd

    def string(self, keep: int) -> str:
        """Read the string at the position: its first `keep` characters (all of it is read past).

        A string the line's end cuts is returned as far as it goes.
        """
        self.pos += 1  # the opening quote
        limit = 6 * keep  # bytes: an escape (``\\uXXXX``) takes six for one character
        parts: list[bytes] = []
        size = 0
        while True:
            end = _STRING_BODY.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # a * pattern always matches
            if size < limit:
                piece = self.buf[self.pos : min(end, self.pos + limit - size)]
                parts.append(piece)
                size += len(piece)
            self.pos = end
            if end < len(self.buf) and self.buf[end] == _QUOTE:
                self.pos += 1
                break
            if not self.fill():  # cut by the line's end (or a lone backslash ends it)
                break
        return _text(b"".join(parts), keep) if keep else ""

    def scalar(self) -> Any:
        """Read the number or literal at the position."""
        while True:
            end = _SCALAR.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # a * pattern always matches
            if end - self.pos > _LONGEST_SCALAR:
                raise _NotJson
            if end < len(self.buf) or not self.fill():
                break
        token, self.pos = self.buf[self.pos : end], end
        if token in _LITERALS:
            return _LITERALS[token]
        try:
            return int(token) if _INTEGER.fullmatch(token) else float(token)
        except ValueError:  # not a number (or an integer past Python's digit limit: its size is enough)
            if _INTEGER.fullmatch(token):
                return float(token)
            raise _NotJson from None

    def skip(self) -> None:
        """Read past the value at the position without building it."""
        c = self.buf[self.pos]
        if c == _QUOTE:
            self.string(0)
        elif c in _OPENERS:
            self.pos += 1
            self.close()
        else:
            self.scalar()

    def close(self) -> None:
        """Read past the rest of the object or array the position is in, its closing bracket included.

        Vectorised, a chunk at a time: escapes are blanked (same length, so positions hold), quotes
        counted to tell which brackets are inside strings, and the others summed until the level falls
        to zero.
        """
        import numpy as np

        depth, inside = 1, 0
        while True:
            buf, end = self.buf, len(self.buf)
            backslashes = 0  # an escape cut by the chunk's end waits for the next chunk
            while end - backslashes > self.pos and buf[end - 1 - backslashes] == _BACKSLASH:
                backslashes += 1
            stop = end - backslashes % 2
            if stop > self.pos:
                region = buf[self.pos : stop].replace(b"\\\\", b"__").replace(b'\\"', b"__")
                chars = np.frombuffer(region, np.uint8)
                quotes = np.cumsum(chars == _QUOTE, dtype=np.int32) + inside
                steps = _steps()[chars]
                steps[(quotes & 1).astype(bool)] = 0
                levels = np.cumsum(steps, dtype=np.int64) + depth
                closed = np.flatnonzero(levels <= 0)
                if closed.size:
                    self.pos += int(closed[0]) + 1
                    return
                depth, inside = int(levels[-1]), int(quotes[-1]) & 1
                self.pos = stop
            if not self.fill():
                raise _LineEnd


def _text(raw: bytes, keep: int) -> str:
    """Decode a string's body (its first bytes, maybe cut mid-escape or mid-character): `keep` characters."""
    text = raw.decode("utf-8", "replace")
    for cut in range(7):  # an escape cut short: drop up to its six bytes
        body = text[: len(text) - cut] if cut else text
        try:
            return str(bounded_json.loads('"' + body + '"'))[:keep]  # a string: nothing nests
        except ValueError:
            continue
    return text[:keep]


def _new(c: int) -> dict[str, Any] | list[Any]:
    return {} if c == b"{"[0] else []


def outline(start: bytes, more: Iterator[bytes]) -> Any:
    """Outline the JSON value of one line (see the module docstring).

    Parameters
    ----------
    start : bytes
        The line's first bytes (what the head holds of it); a newline in them ends the line.
    more : iterator of bytes
        The chunks that follow; the line ends at the first newline in them, or when they do.

    Returns
    -------
    dict, list or None
        The outline of the object or array the line holds -- as far as it goes when the line ends inside
        it (a truncated file) -- or None when the line does not open with one or is not JSON.
    """
    r = _Reader(start, more)
    try:
        c = r.peek()
    except _LineEnd:
        return None
    if c not in _OPENERS:
        return None
    r.pos += 1
    root = _new(c)
    stack = [root]
    try:
        while stack:
            top = stack[-1]
            c = r.peek()
            if c in _CLOSERS:
                r.pos += 1
                stack.pop()
                continue
            if c == _COMMA:
                r.pos += 1
                continue
            if r.kept >= OUTLINE_VALUES or len(top) >= OUTLINE_ITEMS:
                r.close()  # the rest of this object or array: read past
                stack.pop()
                continue
            key = ""
            if isinstance(top, dict):
                if c != _QUOTE:
                    raise _NotJson
                key = r.string(OUTLINE_CHARS)
                if r.peek() != _COLON:
                    raise _NotJson
                r.pos += 1
                c = r.peek()
            r.kept += 1
            value: Any
            if c in _OPENERS:
                value = _new(c)
                if len(stack) < OUTLINE_DEPTH:
                    r.pos += 1
                    stack.append(value)
                else:
                    r.skip()
            elif c == _QUOTE:
                value = r.string(OUTLINE_CHARS)
            else:
                value = r.scalar()
            if isinstance(top, dict):
                top[key] = value
            else:
                top.append(value)
    except _LineEnd:
        pass  # the line ended inside the value: what was read
    except _NotJson:
        return None
    return root


__all__ = ["OUTLINE_CHARS", "OUTLINE_CHUNK", "OUTLINE_DEPTH", "OUTLINE_ITEMS", "OUTLINE_VALUES", "outline"]
