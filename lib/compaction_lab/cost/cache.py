"""Prefix-cache simulators over real token-id sequences, and the cache-shape experiment.

A provider's prefix cache compares a request with earlier ones from token 0. Each simulator is a
small class with its provider's rule in its docstring, fed the request's token ids (report
tokenizer), so cache hits are computed, not assumed: `DeepSeekCache` (``deepseek``), `OpenAICache`
(``openai``), `AnthropicCache` (``anthropic``) and `NoCache` (``none``).

A request is the token ids of ``[system prompt][tool definitions][messages…]`` (`request_tokens`,
`request_layout`), each part encoded on its own so a part's end is always a token boundary.
Results are `CacheResult` counts in the billing convention of
`compaction_lab.endpoints.prices.price`: ``input_tokens`` is the total input, of which
``cached_tokens`` were read from the cache and ``cache_write_tokens`` written to it.

Design: docs/cost.md#3-prefix-cache-modelling (the rules, the cache-shape experiment) and
docs/cost.md#1-tokens-counted (the request).
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from compaction_lab.core.fingerprints import canonical_json, tools_text
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter

#: Token ids as the simulators take them: a list, a tuple or a NumPy array.
Tokens = Sequence[int] | np.ndarray

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class RequestLayout:
    """A request's token ids and where its parts end.

    Parameters
    ----------
    tokens : tuple of int
        The ids of the whole request, in sending order.
    system_end, tools_end : int
        Offsets just past the system prompt and just past the tool
        definitions. In the default order ``tools_end >= system_end`` (equal
        when there are no tools); with ``tools_first`` it is the other way
        round (see `request_layout`).
    message_ends : tuple of int
        Offset just past each message.
    """

    tokens: tuple[int, ...]
    system_end: int
    tools_end: int
    message_ends: tuple[int, ...]

    def breakpoints(self) -> tuple[int, ...]:
        """Anthropic-style breakpoints: end of system, end of tools, end of messages (distinct, > 0)."""
        ends = {self.system_end, self.tools_end, len(self.tokens)}
        return tuple(sorted(e for e in ends if e > 0))


class _EncodeCache:
    """Token ids of texts already encoded, keyed by a digest of the text, bounded by total ids kept.

    Sessions re-send the same messages request after request; keeping a
    message's ids (as uint32, 4 bytes a token) makes rebuilding every turn's
    request cheap. Keys are digests, so the cache never holds the texts.
    """

    def __init__(self, max_ids: int = 8_000_000):
        self.max_ids = max_ids
        self._ids: OrderedDict[tuple[str, bytes], np.ndarray] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, encoding: str, text: str) -> np.ndarray:
        key = (encoding, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        with self._lock:
            hit = self._ids.get(key)
            if hit is not None:
                self._ids.move_to_end(key)
                return hit
        ids = np.asarray(counter(encoding).encode(text), dtype=np.uint32)
        ids.setflags(write=False)
        with self._lock:
            if key not in self._ids:
                self._ids[key] = ids
                self._size += len(ids)
                while self._size > self.max_ids and len(self._ids) > 1:
                    _, old = self._ids.popitem(last=False)
                    self._size -= len(old)
        return ids


_ENCODED = _EncodeCache()


def _encode(encoding: str, text: str) -> np.ndarray:
    return _ENCODED.get(encoding, text) if text else np.empty(0, dtype=np.uint32)


def _content_text(content: Any) -> str:
    # Structured content (a list of parts) is sent as its canonical JSON; no content, as nothing.
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return canonical_json(content)


def _build(
    system: str,
    tools: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    encoding: str,
    tools_first: bool,
) -> tuple[np.ndarray, int, int, list[int]]:
    sys_ids = _encode(encoding, system)
    tool_ids = _encode(encoding, tools_text(tools))
    head = [tool_ids, sys_ids] if tools_first else [sys_ids, tool_ids]
    first_end, head_end = len(head[0]), len(head[0]) + len(head[1])
    system_end, tools_end = (head_end, first_end) if tools_first else (first_end, head_end)
    parts, ends, pos = list(head), [], head_end
    for m in messages:
        ids = _encode(encoding, f"{m.get('role', 'user')}: {_content_text(m.get('content', ''))}")
        parts.append(ids)
        pos += len(ids)
        ends.append(pos)
    return np.concatenate(parts), system_end, tools_end, ends


def request_layout(
    system: str,
    tools: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    encoding: str = DEFAULT_ENCODING,
    *,
    tools_first: bool = False,
) -> RequestLayout:
    """Token ids of a request and where its parts end (see the module docstring for the order).

    Parameters
    ----------
    system : str
    tools : sequence of dict
    messages : sequence of dict
        ``{"role", "content"}``; each becomes ``"role: content"``.
    encoding : str
        Report-tokenizer encoding.
    tools_first : bool
        Put the tool definitions before the system prompt. The default
        ``[system][tools][messages]`` is this suite's request order; Anthropic
        documents its cache prefix as tools, then system, then messages, and
        where tools come first, dropping them changes the request at token 0.
    """
    flat, system_end, tools_end, ends = _build(system, tools, messages, encoding, tools_first)
    return RequestLayout(
        tokens=tuple(flat.tolist()), system_end=system_end, tools_end=tools_end, message_ends=tuple(ends)
    )


class RequestSeries:
    """Successive requests with one system prompt and tool list, each built from what the last one shared.

    A session's requests grow turn by turn: the next one re-sends the messages of the previous one and
    adds a few. `array` gives exactly `request_array`'s ids (as int64), but keeps the previous request's
    ids and message ends and encodes only from the first message that differs, so a session's N
    requests cost O(total length) ids copied instead of N full rebuilds.
    """

    def __init__(
        self,
        system: str,
        tools: Sequence[Mapping[str, Any]],
        encoding: str = DEFAULT_ENCODING,
        *,
        tools_first: bool = False,
    ):
        head, system_end, tools_end, _ = _build(system, tools, [], encoding, tools_first)
        self.encoding = encoding
        #: Offsets just past the system prompt and just past the tools (as `RequestLayout`).
        self.system_end, self.tools_end = system_end, tools_end
        self._texts: list[str] = []
        self._ends: list[int] = [len(head)]
        self._ids = head.astype(np.int64)

    def array(self, messages: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Return the request's ids (read-only int64), equal to ``request_array(system, tools, messages, ...)``."""
        texts = [f"{m.get('role', 'user')}: {_content_text(m.get('content', ''))}" for m in messages]
        same = 0
        for old, new in zip(self._texts, texts, strict=False):
            if old != new:
                break
            same += 1
        parts = [self._ids[: self._ends[same]]]
        ends = self._ends[: same + 1]
        pos = ends[-1]
        for text in texts[same:]:
            ids = _encode(self.encoding, text)
            parts.append(ids.astype(np.int64))
            pos += len(ids)
            ends.append(pos)
        ids = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
        ids.setflags(write=False)
        self._texts, self._ends, self._ids = texts, ends, ids
        return ids


def request_tokens(
    system: str,
    tools: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    encoding: str = DEFAULT_ENCODING,
    *,
    tools_first: bool = False,
) -> list[int]:
    """Token ids of ``[system prompt][tool definitions][messages…]`` (see `request_layout`)."""
    return request_array(system, tools, messages, encoding, tools_first=tools_first).tolist()


def request_array(
    system: str,
    tools: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    encoding: str = DEFAULT_ENCODING,
    *,
    tools_first: bool = False,
) -> np.ndarray:
    """`request_tokens` as a NumPy array (what the simulators read; no list is built)."""
    return _build(system, tools, messages, encoding, tools_first)[0]


def request_tokens_from_summary_request(req: Any, encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Token ids of a `SummaryRequest` as sent: its system prompt, tools and messages."""
    return summary_request_array(req, encoding).tolist()


def summary_request_array(req: Any, encoding: str = DEFAULT_ENCODING) -> np.ndarray:
    """`request_tokens_from_summary_request` as a NumPy array (what the simulators read)."""
    return request_array(req.system, list(req.tools), list(req.messages), encoding)


def part_at(layout: RequestLayout, offset: int) -> str:
    """Name the part of a request that token `offset` falls in.

    ``system prompt``, ``tool definitions``, ``message k`` (1-based), or ``end`` (past the last token).
    """
    if offset >= len(layout.tokens):
        return "end"
    lo_sys = 0 if layout.system_end <= layout.tools_end else layout.tools_end
    if lo_sys <= offset < layout.system_end:
        return "system prompt"
    lo_tools = layout.system_end if layout.system_end <= layout.tools_end else 0
    if lo_tools <= offset < layout.tools_end:
        return "tool definitions"
    k = int(np.searchsorted(np.asarray(layout.message_ends), offset, side="right"))
    return f"message {k + 1}"


def shared_prefix(a: Tokens, b: Tokens) -> int:
    """Length of the longest common token prefix of two requests (the most any prefix cache can serve)."""
    x, y = _as_array(a), _as_array(b)
    n = min(len(x), len(y))
    diff = np.flatnonzero(x[:n] != y[:n])
    return int(diff[0]) if len(diff) else n


def divergence(previous: RequestLayout, request: RequestLayout) -> dict[str, Any]:
    """Where `request` stops repeating `previous`, the request a prefix cache was primed with.

    Returns
    -------
    dict
        ``shared_tokens`` (common prefix), ``shared_ratio`` (of the request),
        ``diverges_in`` (the part of `request` at the first differing token)
        and ``previous_part`` (the part of `previous` there), e.g. a request
        without tools diverges in ``message 1`` where `previous` had ``tool
        definitions``. ``end`` means one request is a prefix of the other.
    """
    k = shared_prefix(previous.tokens, request.tokens)
    return {
        "shared_tokens": k,
        "shared_ratio": k / len(request.tokens) if request.tokens else 0.0,
        "diverges_in": part_at(request, k),
        "previous_part": part_at(previous, k),
    }


# --------------------------------------------------------------------------- prefix keys


def _as_array(tokens: Tokens) -> np.ndarray:
    return np.asarray(tokens, dtype="<i8").reshape(-1)


class _PrefixKeys:
    """Hash keys of a sequence's prefixes, O(n) for the whole sequence.

    ``chain[m]`` is a hash chain over the first ``m`` chunks of `chunk` tokens
    (``chain[m+1] = H(chain[m] || chunk m)``); the key of any prefix length
    ``k`` is ``chain[k // chunk]`` when ``k`` is a multiple of `chunk`, else
    ``H(chain[k // chunk] || the remaining tokens)``. Equal prefixes get equal
    keys, so a store of keys answers "was this exact prefix stored?" in O(1)
    after O(chunk) work.
    """

    chain: list[bytes]

    def __init__(self, tokens: Tokens, chunk: int, base: _PrefixKeys | None = None):
        self.arr = _as_array(tokens)
        self.raw = self.arr.tobytes()
        self.n = len(self.arr)
        self.chunk = chunk
        width = chunk * 8
        raw, blake2b = self.raw, hashlib.blake2b
        # `base` keyed a prefix of these tokens with the same chunk: its chain is the start of ours.
        chain: list[bytes] = list(base.chain) if base is not None else [b""]
        append, prev = chain.append, chain[-1]
        for start in range((len(chain) - 1) * width, (self.n // chunk) * width, width):
            prev = blake2b(prev + raw[start : start + width], digest_size=16).digest()
            append(prev)
        self.chain = chain

    def key(self, k: int) -> bytes:
        m, r = divmod(k, self.chunk)
        if r == 0:
            return self.chain[m]
        start = m * self.chunk * 8
        # person= keeps partial keys apart from chain keys.
        return hashlib.blake2b(
            self.chain[m] + self.raw[start : start + r * 8], digest_size=16, person=b"partial"
        ).digest()


#: Key chains of the last read-only arrays sent (`prefix_keys`): a case's uncompacted request is sent
#: by every strategy under every simulator, the same array each time.
_KEYS: OrderedDict[tuple[int, int], tuple[np.ndarray, _PrefixKeys]] = OrderedDict()
_KEYS_LOCK = threading.Lock()
_KEYS_KEPT = 16
#: The last key chains computed (`prefix_keys`): a conversation's next request re-sends the previous one
#: (its reply and the new turn appended), so its chain starts as the previous chain.
_RECENT: deque[_PrefixKeys] = deque(maxlen=8)


def _longest_known_prefix(arr: np.ndarray, chunk: int) -> _PrefixKeys | None:
    """Find the longest recent chain (`_RECENT`) over a prefix of `arr` with this chunk, at least one chunk long."""
    with _KEYS_LOCK:
        recent = list(_RECENT)
    # Longest first: the first chain whose tokens `arr` starts with is the one wanted (no other compared).
    candidates = sorted(
        (keys for keys in recent if keys.chunk == chunk and chunk <= keys.n <= len(arr)), key=lambda k: -k.n
    )
    return next((keys for keys in candidates if np.array_equal(arr[: keys.n], keys.arr)), None)


def prefix_keys(tokens: Tokens, chunk: int) -> _PrefixKeys:
    """Return the `_PrefixKeys` of `tokens`, hashing only past the longest prefix a recent chain keyed.

    A read-only array's chain is computed once (the entry holds the array, so its id stays its own).
    """
    held = tokens if isinstance(tokens, np.ndarray) and not tokens.flags.writeable else None
    if held is not None:
        with _KEYS_LOCK:
            hit = _KEYS.get((id(held), chunk))
            if hit is not None and hit[0] is held:
                _KEYS.move_to_end((id(held), chunk))
                return hit[1]
    arr = _as_array(tokens)
    keys = _PrefixKeys(arr, chunk, _longest_known_prefix(arr, chunk))
    with _KEYS_LOCK:
        _RECENT.append(keys)
        if held is not None:
            _KEYS[(id(held), chunk)] = (held, keys)
            while len(_KEYS) > _KEYS_KEPT:
                _KEYS.popitem(last=False)
    return keys


# --------------------------------------------------------------------------- interface


@dataclass(frozen=True)
class CacheResult:
    """How one request was served.

    Parameters
    ----------
    input_tokens : int
        Total input tokens of the request.
    cached_tokens : int
        Of them, read from the cache (billed at ``cache_read``).
    cache_write_tokens : int
        Of them, written to the cache where the provider bills writes.
    output_tokens : int
    """

    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int

    @property
    def miss_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache."""
        return self.input_tokens - self.cached_tokens - self.cache_write_tokens

    @property
    def hit_ratio(self) -> float:
        """Share of input tokens served from the cache: cached / input (0 for an empty request)."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


@runtime_checkable
class CacheSimulator(Protocol):
    """A provider's prefix cache: serves each request from what earlier requests stored.

    ``send`` returns how the request was served and updates the store (the
    request's input and, where the rule says, its output become cacheable for
    later requests); ``now`` is the request's time in seconds (for TTLs);
    ``breakpoints`` are token offsets ending cache_control blocks (used by
    rules with explicit breakpoints, ignored by the others). ``reset``
    empties the store.
    """

    name: str

    def send(
        self,
        tokens: Tokens,
        output_tokens: Tokens = (),
        *,
        now: float = 0.0,
        breakpoints: Sequence[int] = (),
    ) -> CacheResult:
        """Serve a request from the store and store what the rule says; return how it was served."""
        ...

    def reset(self) -> None:
        """Empty the store."""
        ...


def _positive_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- simulators


class NoCache:
    """No prefix cache: every input token is a miss, nothing is stored."""

    name = "none"

    def send(
        self,
        tokens: Tokens,
        output_tokens: Tokens = (),
        *,
        now: float = 0.0,
        breakpoints: Sequence[int] = (),
    ) -> CacheResult:
        """Serve every input token as a miss."""
        return CacheResult(len(tokens), 0, 0, len(output_tokens))

    def reset(self) -> None:
        """Do nothing: there is no store."""
        pass


class DeepSeekCache:
    """DeepSeek's context cache on disk: hits only on whole stored prefix units.

    Rule (DeepSeek API docs, "Context Caching"):

    * A **prefix unit** is an exact prefix of an earlier sequence. Units are
      stored at the end of each request's input, at the end of its output
      (input + output, as the next turn re-sends it), every `unit` tokens
      inside the input and output, and at the **common prefix** a request
      shares with an earlier sequence (so a miss on ``A + C`` after ``A + B``
      stores ``A``, and a third request ``A + D`` hits it).
    * A request **hits** the longest stored unit that is a prefix of it
      (``cached_tokens`` = that unit's length, never a partial unit); the
      rest is a miss. Writes are not billed (``cache_write_tokens = 0``).
    * No expiry is modelled (DeepSeek keeps units for hours to days).

    Parameters
    ----------
    unit : int
        Interval of the units stored inside long sequences (default 64).

    Notes
    -----
    The store is a set of prefix keys (`_PrefixKeys`: a hash chain over
    `unit`-token chunks, so a sequence is hashed in O(n)) plus a chunk trie
    (node = chain key, children = the next chunk's tokens) to find the
    longest common prefix with any earlier sequence.
    """

    name = "deepseek"

    def __init__(self, unit: int = 64):
        self.unit = _positive_int(unit, "unit")
        self.reset()

    def reset(self) -> None:
        """Empty the store (units and chunk trie)."""
        self._units: set[bytes] = set()  # keys of stored prefix units
        self._lengths: list[int] = []  # distinct stored unit lengths, sorted
        self._length_set: set[int] = set()
        # Chunk trie: chain key of a stored prefix -> the raw bytes of the chunks that follow it.
        self._children: dict[bytes, set[bytes]] = {b"": set()}

    def _common_prefix(self, keys: _PrefixKeys, limit: int) -> int:
        """Longest common prefix (≤ limit) of the sequence with any stored sequence."""
        m, last = 0, limit // self.unit
        # Walk whole chunks down the trie, then compare the next (partial) chunk token by token.
        while m < last and keys.chain[m + 1] in self._children:
            m += 1
        start = m * self.unit
        window = keys.arr[start : min(start + self.unit, limit)]
        best = 0
        for edge in self._children.get(keys.chain[m], ()):
            other = np.frombuffer(edge, dtype="<i8")
            k = min(len(other), len(window))
            diff = np.flatnonzero(other[:k] != window[:k])
            best = max(best, int(diff[0]) if len(diff) else k)
        return start + best

    def _longest_unit(self, keys: _PrefixKeys, limit: int) -> int:
        """Longest stored unit length ≤ limit whose key matches the sequence's prefix."""
        i = bisect.bisect_right(self._lengths, limit)
        while i > 0:
            i -= 1
            k = self._lengths[i]
            if keys.key(k) in self._units:
                return k
        return 0

    def _store(self, keys: _PrefixKeys, k: int) -> None:
        if k <= 0:
            return
        self._units.add(keys.key(k))
        if k not in self._length_set:
            self._length_set.add(k)
            bisect.insort(self._lengths, k)

    def _store_every_unit(self, keys: _PrefixKeys) -> None:
        """`_store` every multiple of `unit` up to the sequence's length, at once (their keys are the chain's)."""
        top = keys.n // self.unit
        self._units.update(keys.chain[1 : top + 1])
        new = set(range(self.unit, top * self.unit + 1, self.unit)) - self._length_set
        if new:
            self._length_set |= new
            self._lengths = sorted(self._length_set)

    def _insert(self, keys: _PrefixKeys) -> None:
        width, chain, trie = self.unit * 8, keys.chain, self._children
        # A chain key in the trie means its whole prefix was inserted (each chunk as the edge to the next key):
        # skip to the first key not there (they form a run from the start), then insert from its edge on.
        lo, hi = 1, len(chain)
        while lo < hi:
            mid = (lo + hi) // 2
            if chain[mid] in trie:
                lo = mid + 1
            else:
                hi = mid
        for m in range(lo - 1, len(chain)):
            children = trie.setdefault(chain[m], set())
            nxt = keys.raw[m * width : (m + 1) * width]
            if nxt:
                children.add(nxt)

    def send(
        self,
        tokens: Tokens,
        output_tokens: Tokens = (),
        *,
        now: float = 0.0,
        breakpoints: Sequence[int] = (),
    ) -> CacheResult:
        """Serve the request from the longest stored unit that prefixes it, then store its units."""
        n_in, n_out = len(tokens), len(output_tokens)
        # One key chain over input + output serves both the lookup (k ≤ n_in) and the store.
        # With no output the request alone is keyed (the same array each time: `prefix_keys` keeps its chain).
        full = tokens if not len(output_tokens) else np.concatenate((_as_array(tokens), _as_array(output_tokens)))
        keys = prefix_keys(full, self.unit)
        common = self._common_prefix(keys, n_in)
        cached = self._longest_unit(keys, common)
        if common > cached:
            self._store(keys, common)  # common-prefix detection: a unit for later requests
        self._store(keys, n_in)
        self._store(keys, n_in + n_out)
        self._store_every_unit(keys)
        self._insert(keys)
        return CacheResult(n_in, cached, 0, n_out)


class OpenAICache:
    """OpenAI's automatic prompt caching.

    Rule (OpenAI docs, "Prompt caching"):

    * Prompts shorter than `min_tokens` (1,024) are never cached.
    * A request hits the longest prefix it shares with a previously sent
      request, rounded down to a multiple of `step` (128):
      ``cached = floor(common / 128) * 128``, and 0 when that is under 1,024.
    * Cache writes are free (``cache_write_tokens = 0``); only inputs are
      cached (an output becomes cacheable when the next request re-sends it).
    * A cached prefix expires `ttl_seconds` after it was last used (``now``);
      a hit refreshes it.

    Parameters
    ----------
    min_tokens : int
    step : int
    ttl_seconds : float

    Notes
    -----
    Assumes every request reaches the same cache (OpenAI routes by a hash of
    the prompt's start and an optional ``prompt_cache_key``).
    """

    name = "openai"

    def __init__(self, min_tokens: int = 1024, step: int = 128, ttl_seconds: float = 3600):
        self.min_tokens = _positive_int(min_tokens, "min_tokens", 0)
        self.step = _positive_int(step, "step")
        if not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds!r}")
        self.ttl_seconds = float(ttl_seconds)
        self.reset()

    def reset(self) -> None:
        """Empty the store."""
        self._last_used: dict[bytes, float] = {}  # chain key of each step-aligned prefix -> last use
        self._prune_at = 100_000

    def _prune(self, now: float) -> None:
        # Drop expired entries, so memory follows the live cache on long runs.
        self._last_used = {k: t for k, t in self._last_used.items() if now - t <= self.ttl_seconds}
        self._prune_at = max(100_000, 2 * len(self._last_used))

    def _alive(self, key: bytes, now: float) -> bool:
        t = self._last_used.get(key)
        return t is not None and now - t <= self.ttl_seconds

    def send(
        self,
        tokens: Tokens,
        output_tokens: Tokens = (),
        *,
        now: float = 0.0,
        breakpoints: Sequence[int] = (),
    ) -> CacheResult:
        """Serve the request from its longest live step-aligned prefix, then store its step-aligned prefixes."""
        n = len(tokens)
        keys = prefix_keys(tokens, self.step)
        # Shorter prefixes of a stored one are stored with a time at least as recent,
        # so the live matches form a run from the start: walk it.
        m = 0
        while m + 1 < len(keys.chain) and self._alive(keys.chain[m + 1], now):
            m += 1
        cached = m * self.step
        if cached < self.min_tokens:
            cached = 0
        if n >= self.min_tokens:
            for key in keys.chain[1:]:
                self._last_used[key] = now
        if len(self._last_used) > self._prune_at:
            self._prune(now)
        return CacheResult(n, cached, 0, len(output_tokens))


#: Anthropic cache TTLs and their lifetimes in seconds.
ANTHROPIC_TTLS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


class AnthropicCache:
    """Anthropic prompt caching with explicit breakpoints.

    Rule (Anthropic docs, "Prompt caching"):

    * A request marks up to `max_breakpoints` (4) positions with
      ``cache_control``; each is a token offset ending the prefix
      ``tokens[:b]``. No breakpoints: no caching at all.
    * Read: ``cached_tokens`` is the longest prefix stored by an earlier
      breakpoint that this request repeats exactly and that ends at or before
      its last breakpoint, if still alive.
    * Write: at each breakpoint past the cached part whose prefix is at least
      `min_tokens` long, the prefix is written; ``cache_write_tokens`` counts
      the newly written tokens (from the cached part to the furthest such
      breakpoint), billed at the write premium (1.25x input for the 5-minute
      TTL, 2x for 1 hour: the price table applies it). Prefixes shorter than
      `min_tokens` are neither written nor read.
    * An entry lives `ttl` from its last write or read (a read refreshes it).
      Outputs are not cached until re-sent as input.

    Parameters
    ----------
    ttl : {"5m", "1h"}
    min_tokens : int
        Minimum cacheable length, by model (1,024 for Sonnet 4.x).
    max_breakpoints : int

    Notes
    -----
    Anthropic also looks for hits at block boundaries up to 20 blocks before
    each breakpoint; here any earlier breakpoint prefix is found, however far
    back.
    """

    name = "anthropic"

    def __init__(self, ttl: str = "5m", min_tokens: int = 1024, max_breakpoints: int = 4):
        if ttl not in ANTHROPIC_TTLS:
            raise ValueError(f"ttl must be one of {sorted(ANTHROPIC_TTLS)}, got {ttl!r}")
        self.ttl = ttl
        self.ttl_seconds = ANTHROPIC_TTLS[ttl]
        self.min_tokens = _positive_int(min_tokens, "min_tokens", 0)
        self.max_breakpoints = _positive_int(max_breakpoints, "max_breakpoints")
        self.reset()

    def reset(self) -> None:
        """Empty the store."""
        self._last_used: dict[bytes, float] = {}  # key of each written prefix -> last write/read
        self._lengths: list[int] = []  # distinct written prefix lengths, sorted

    def _breakpoints(self, breakpoints: Sequence[int], n: int) -> list[int]:
        bps = sorted({int(b) for b in breakpoints})
        if len(bps) > self.max_breakpoints:
            raise ValueError(f"{len(bps)} breakpoints given; at most {self.max_breakpoints} are allowed")
        bad = [b for b in bps if not 0 < b <= n]
        if bad:
            raise ValueError(f"breakpoints must lie in 1..{n} (the request's length), got {bad}")
        return bps

    def send(
        self,
        tokens: Tokens,
        output_tokens: Tokens = (),
        *,
        now: float = 0.0,
        breakpoints: Sequence[int] = (),
    ) -> CacheResult:
        """Read the longest live breakpoint prefix the request repeats, then write its breakpoint prefixes."""
        n, n_out = len(tokens), len(output_tokens)
        bps = self._breakpoints(breakpoints, n)
        if not bps:
            return CacheResult(n, 0, 0, n_out)
        keys = prefix_keys(tokens, 256)
        cached = 0
        i = bisect.bisect_right(self._lengths, bps[-1])
        while i > 0:
            i -= 1
            k = self._lengths[i]
            if k < self.min_tokens:
                break
            key = keys.key(k)
            t = self._last_used.get(key)
            if t is not None and now - t <= self.ttl_seconds:
                cached = k
                self._last_used[key] = now  # a read refreshes the entry
                break
        writable = [b for b in bps if b > cached and b >= self.min_tokens]
        for b in writable:
            self._last_used[keys.key(b)] = now
            j = bisect.bisect_left(self._lengths, b)
            if j == len(self._lengths) or self._lengths[j] != b:
                self._lengths.insert(j, b)
        written = (writable[-1] - cached) if writable else 0
        return CacheResult(n, cached, written, n_out)


# --------------------------------------------------------------------------- registry

_CLASSES: dict[str, type[CacheSimulator]] = {
    "deepseek": DeepSeekCache,
    "openai": OpenAICache,
    "anthropic": AnthropicCache,
    "none": NoCache,
}

#: Simulator names, in the order tables and charts list them.
SIMULATORS: tuple[str, ...] = tuple(_CLASSES)


def get_simulator(name: str, **params: Any) -> CacheSimulator:
    """Build a fresh simulator by name (one of `SIMULATORS`), with its parameters."""
    try:
        cls = _CLASSES[name]
    except KeyError:
        raise ValueError(f"unknown cache simulator {name!r}; expected one of {SIMULATORS}") from None
    return cls(**params)


# --------------------------------------------------------------------------- cache-shape experiment

#: The cache-shape experiment's variants, in table order.
CACHE_SHAPE_VARIANTS: tuple[str, ...] = ("identical", "system_substituted", "tools_dropped", "line_added_at_top")

#: Defaults for the substituted system prompt and the added line.
SUBSTITUTE_SYSTEM = "You are a helpful assistant. Answer the user's questions accurately and concisely."
TOP_LINE = "Session resumed; the notes below still apply."


def _cache_shape_variants(
    system: str,
    tools: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    substitute_system: str,
    top_line: str,
) -> dict[str, tuple]:
    return {
        "identical": (system, tools, messages),
        "system_substituted": (substitute_system, tools, messages),
        "tools_dropped": (system, (), messages),
        "line_added_at_top": (f"{top_line}\n{system}", tools, messages),
    }


def cache_shape_experiment(
    system: str,
    tools: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    encoding: str = DEFAULT_ENCODING,
    simulators: Sequence[str] | None = None,
    *,
    substitute_system: str = SUBSTITUTE_SYSTEM,
    top_line: str = TOP_LINE,
    tools_first: bool = False,
) -> pd.DataFrame:
    """Run the cache-shape experiment: how much of a primed prefix each variant of a request reuses.

    For each simulator and each variant, a fresh simulator is primed with the
    session's request (`system`, `tools`, `messages`), then sent the variant:
    the identical request; the same with the system prompt substituted; with
    the tool definitions dropped; with one line added at the top (before the
    system prompt). For Anthropic, breakpoints sit at the end of the system
    prompt, the end of the tools and the end of the messages.

    Parameters
    ----------
    system, tools, messages
        The session's request.
    encoding : str
    simulators : sequence of str, optional
        Default: every name in `SIMULATORS`.
    substitute_system, top_line : str
        The substituted system prompt and the added line.
    tools_first : bool
        Request order (see `request_layout`). With the default order and a
        system prompt longer than a simulator's smallest cacheable prefix,
        dropping the tools keeps the system prompt's prefix cacheable. The
        added line always goes at the top of the system prompt, so with
        ``tools_first`` it lands after the tool definitions.

    Returns
    -------
    DataFrame
        One row per variant x simulator: ``variant, simulator, input_tokens,
        cached_tokens, hit_ratio, cache_write_tokens``.

    Notes
    -----
    Expected: identical near 1; the other three 0 whenever the mismatch is
    near token 0 (shorter than every simulator's smallest cacheable prefix).
    """
    import pandas as pd

    names = list(simulators) if simulators is not None else list(SIMULATORS)
    layouts = {
        v: request_layout(s, t, m, encoding, tools_first=tools_first)
        for v, (s, t, m) in _cache_shape_variants(system, tools, messages, substitute_system, top_line).items()
    }
    prime = layouts["identical"]
    rows = []
    for name in names:
        for variant in CACHE_SHAPE_VARIANTS:
            sim = get_simulator(name)
            sim.send(prime.tokens, now=0.0, breakpoints=prime.breakpoints())
            lay = layouts[variant]
            r = sim.send(lay.tokens, now=1.0, breakpoints=lay.breakpoints())
            rows.append(
                {
                    "variant": variant,
                    "simulator": name,
                    "input_tokens": r.input_tokens,
                    "cached_tokens": r.cached_tokens,
                    "hit_ratio": r.hit_ratio,
                    "cache_write_tokens": r.cache_write_tokens,
                }
            )
    return pd.DataFrame(
        rows, columns=["variant", "simulator", "input_tokens", "cached_tokens", "hit_ratio", "cache_write_tokens"]
    )


__all__ = [
    "ANTHROPIC_TTLS",
    "AnthropicCache",
    "CacheResult",
    "CacheSimulator",
    "DeepSeekCache",
    "NoCache",
    "OpenAICache",
    "RequestLayout",
    "CACHE_SHAPE_VARIANTS",
    "SIMULATORS",
    "get_simulator",
    "request_layout",
    "request_tokens",
    "request_tokens_from_summary_request",
    "summary_request_array",
    "divergence",
    "part_at",
    "shared_prefix",
    "cache_shape_experiment",
    "tools_text",
]
