"""Candidate values of one record: the extraction rules (`EXTRACTION_RULES`) and the checks that make a match a value.

Each `Candidate` carries what a question about it needs (its record, offsets, line and the words around
it). The rules, in claim order, are listed in docs/exams.md#3-mining-probes-from-real-sessions.
"""

from __future__ import annotations

import bisect
import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from compaction_lab.core.session import POINTER_OF_KIND, Record
from compaction_lab.core.tokens import DEFAULT_ENCODING, get_encoding
from compaction_lab.exam.grading import normalise

__all__ = [
    "CATEGORIES",
    "COMMON_WORDS",
    "MINED_KINDS",
    "NUM",
    "PROSE_KINDS",
    "REJECT_REASONS",
    "EXTRACTION_RULES",
    "SYSTEM_ROOTS",
    "UNITS",
    "WELL_KNOWN_FILES",
    "Candidate",
    "Rejected",
    "ExtractionRule",
    "Scan",
    "extract",
    "guessable",
    "has_words",
    "inexact",
    "scan",
    "slash_list",
]

#: Categories of mined questions, in the order tables list them.
CATEGORIES: tuple[str, ...] = ("identifier", "tool_returned_id", "path", "number", "error_string", "quoted")

#: Record kinds values are mined from (never an injected record).
MINED_KINDS: tuple[str, ...] = ("user", "assistant", "reasoning", "tool_call", "tool_output")

#: Words too easy to guess to make an exact-value question (compared case-folded).
COMMON_WORDS: frozenset[str] = frozenset(
    """
true false null none nil undefined self this that then than with from into have been were will would
should could about there their these those which where when what while test tests testing file files
data name names value values error errors string number object list type types path paths main master
done pending status default hello world hello-world todo fixme note info debug warn warning success
failed failure passed yes okay json yaml text html http https localhost index config settings
module function class method return import export const let var print string int float bool dict
user assistant tool system content message result results output input command args kwargs
""".split()
)

#: Identifier prefixes that are standards, not ids (``UTF-8``, ``SHA-256``).
_STANDARD_PREFIXES = frozenset(
    {"UTF", "SHA", "ISO", "RFC", "MD", "HTTP", "TLS", "SSL", "IPV", "AES", "RSA", "ES", "ECMA", "IEEE", "PEP", "X"}
)
#: Slugs that look like ids but are common platform names.
_COMMON_SLUGS = frozenset(
    {
        "x86_64",
        "x86-64",
        "amd64",
        "arm64",
        "aarch64",
        "utf8mb4",
        "win32",
        "win64",
        "i386",
        "i686",
        "mp4",
        "h264",
        "base64",
    }
)


# --------------------------------------------------------------------------- rules

_EXT = (
    r"(?:py|pyi|pyc|ipynb|ts|tsx|js|jsx|mjs|cjs|json|jsonl|yaml|yml|toml|ini|cfg|conf|sql|md|rst|txt|"
    r"sh|bash|zsh|ps1|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|lock|csv|tsv|log|html|css|scss|xml|"
    r"proto|tf|patch|diff|gz|zip|tar|whl|env|traj|dcm)"
)
#: A number, with thousands separators or not ("1,792,546", "184.37").
NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
#: The units of the ``unit_number`` rule (a number with one of them may be written with or without a space).
UNITS = (
    r"(?:req/s|ms|µs|μs|us|ns|KiB|MiB|GiB|TiB|KB|MB|GB|TB|kB|bytes|seconds|secs|sec|s|minutes|mins|"
    r"min|hours|%|rows|tokens|records|requests)"
)


@dataclass(frozen=True)
class ExtractionRule:
    """One extraction rule: a regex whose `group` is the value, the category it yields, the kinds it reads."""

    name: str
    category: str
    pattern: re.Pattern[str]
    group: int = 0
    kinds: tuple[str, ...] = MINED_KINDS


_NO_CALLS = ("user", "assistant", "reasoning", "tool_output")

#: All rules, in claim order (see docs/exams.md#3-mining-probes-from-real-sessions).
EXTRACTION_RULES: tuple[ExtractionRule, ...] = (
    ExtractionRule("failed_test", "error_string", re.compile(r"(?m)^FAILED[ \t]+(\S+::\S+)"), 1, _NO_CALLS),
    ExtractionRule(
        "exception",
        "error_string",
        re.compile(
            r"(?m)(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault|Interrupt)(?=:[ \t]+\S)[^\n]*"
        ),
        0,
        _NO_CALLS,
    ),
    ExtractionRule("rustc_error", "error_string", re.compile(r"\berror\[E\d{4}\]:[ \t]+\S[^\n]*"), 0, _NO_CALLS),
    ExtractionRule("tsc_error", "error_string", re.compile(r"\berror TS\d+:[ \t]+\S[^\n]*"), 0, _NO_CALLS),
    ExtractionRule(
        "error_line",
        "error_string",
        re.compile(
            r"(?m)^[ \t]*((?:(?:ERROR|Error|error|FATAL|Fatal|fatal|panic)(?:\([^)\n]*\))?:|npm ERR!)[ \t]+\S[^\n]*)"
        ),
        1,
        _NO_CALLS,
    ),
    # a leading "@" is a mention prefix (pi's "@src/main.ts"), not part of the path
    ExtractionRule(
        "slash_path",
        "path",
        re.compile(r"(?<![\w.~/:@%+\-\\])@?((?:~|\.{1,2})?/?(?:[\w.%+\-][\w.@%+\-]*/)+[\w.@%+\-]*)"),
        1,
    ),
    ExtractionRule(
        "file_name",
        "path",
        re.compile(rf"(?<![\w.~/:@%+\-\\])@?([\w%+\-][\w@%+\-]*(?:\.[\w@%+\-]+)*\.{_EXT})(?![\w/\\-]|\.\w)"),
        1,
    ),
    ExtractionRule(
        "uuid",
        "identifier",
        re.compile(r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"),
    ),
    ExtractionRule(
        "ticket_id", "identifier", re.compile(r"(?<![\w-])[A-Z][A-Z0-9]*[A-Z]-\d{2,}(?:[-_][A-Za-z0-9]+)*(?![\w-])")
    ),
    ExtractionRule(
        "hex_hash", "identifier", re.compile(r"(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}(?![\w-])")
    ),
    ExtractionRule(
        "slug_id", "identifier", re.compile(r"(?<![\w.\-/@])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+(?![\w\-/@]|\.\w)")
    ),
    ExtractionRule("mixed_token", "identifier", re.compile(r"(?<![\w.\-/@])[A-Za-z0-9]{8,}(?![\w\-/@]|\.\w)")),
    ExtractionRule("unit_number", "number", re.compile(rf"(?<![\w.:/,-]){NUM}[ \t]?{UNITS}(?![\w/])")),
    ExtractionRule("decimal", "number", re.compile(r"(?<![\w.:/,-])(?:\d{1,3}(?:,\d{3})+|\d+)\.\d+(?![\w]|\.\d)")),
    ExtractionRule(
        "port",
        "number",
        re.compile(r"(?i:\bport\s*[:=]?\s*|\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):)(\d{2,5})(?!\d)"),
        1,
    ),
    ExtractionRule("backticked", "quoted", re.compile(r"(?<!`)`([^`\n]{4,60})`(?!`)"), 1, _NO_CALLS),
    ExtractionRule(
        "double_quoted", "quoted", re.compile(r'(?<![\w"\\])"([^"\n\\]{4,60})"(?![\w"])(?!\s*:)'), 1, _NO_CALLS
    ),
    ExtractionRule("single_quoted", "quoted", re.compile(r"(?<![\w'\\])'([^'\n\\]{4,60})'(?![\w'])"), 1, _NO_CALLS),
    ExtractionRule("curly_quoted", "quoted", re.compile("\u201c([^\u201d\n]{4,60})\u201d"), 1, _NO_CALLS),
)

_API_TOOL = re.compile(r"http|fetch|curl|request|api|graphql|rpc|webhook", re.I)
_API_TARGET = re.compile(r"^(?:GET|POST|PUT|PATCH|DELETE|HEAD)\s|https?://|\b(?:curl|wget|httpie|gh api)\b", re.I)


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """A value found in one record, with what a question about it needs.

    Parameters
    ----------
    value : str
        The exact text as it occurs in the record.
    category : str
        One of `CATEGORIES`.
    rule : str
        Name of the `ExtractionRule` that found it.
    pointer : str
        ``user``, ``assistant`` or ``tool`` (`session.POINTER_OF_KIND`).
    kind : str
        The record's kind.
    source_order, entry_id : int, str
        The record it was found in.
    start, end : int
        Offsets of the value in the record text.
    tool, target : str or None
        The record's tool and target.
    line_no : int
        1-based line of the value in the record text.
    before, after : str
        A few words before and after the value on its line (sentence-bounded in prose).
    same_rule : int
        How many matches the same rule made in the record (an error asked by
        call alone is ambiguous when there are several).
    in_record : int
        How many distinct values the record has (a prose question without a
        window is ambiguous when there are several).
    """

    value: str
    category: str
    rule: str
    pointer: str
    kind: str
    source_order: int
    entry_id: str
    start: int
    end: int
    tool: str | None = None
    target: str | None = None
    line_no: int = 1
    before: str = ""
    after: str = ""
    same_rule: int = 1
    in_record: int = 1


def _digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


def _transitions(s: str) -> int:
    """Count the changes between letters and digits along `s` (random tokens change often, words rarely)."""
    cls = [c.isdigit() for c in s if c.isalnum()]
    return sum(a != b for a, b in zip(cls, cls[1:], strict=False))


def _path_ok(v: str) -> bool:
    if "//" in v or not re.search(r"[A-Za-z]", v):
        return False
    anchored = v.startswith(("/", "~/", "./", "../"))
    parts = [p for p in re.sub(r"^(?:~|\.{1,2})?/", "", v).split("/") if p]
    if not parts or v.endswith("/") and len(parts) < 2:
        return False
    has_ext = bool(re.search(r"[^.]\.[A-Za-z0-9]{1,8}$", parts[-1]))
    if anchored:
        return len(parts) >= 2 or has_ext
    return (len(parts) >= 2 and has_ext) or len(parts) >= 3


#: Why a match that has a value's shape is still not asked (counted in `MinedCase.notes`).
REJECT_REASONS: tuple[str, ...] = ("template", "phrase", "slash-list")

_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_LOWER_WORD = re.compile(r"[a-z]+[.,;:!?]?")
_FILE_PART = re.compile(rf"[^/]+\.{_EXT}")


def slash_list(v: str) -> bool:
    """Whether a path-shaped value is a list joined by "/" (``Model/thinking/theme``, ``main.ts/tui.ts``).

    Not anchored (``/``, ``~/``, ``./``, ``../``) and either every part a
    plain word (letters, then letters or digits; no extension, no trailing
    slash) or a part before the last one a file name (a known extension).
    """
    if v.startswith(("/", "~/", "./", "../")):
        return False
    parts = v.split("/")
    if len(parts) < 2:
        return False
    if any(_FILE_PART.fullmatch(p) for p in parts[:-1]):
        return True
    return not v.endswith("/") and all(_PLAIN_WORD.fullmatch(p) for p in parts)


def inexact(category: str, v: str) -> str | None:
    """Why `v` is not an exact value (a `REJECT_REASONS` entry), or None when it is.

    ``phrase``: a newline, four or more whitespace-separated words, or — a
    quoted value — two or more words of lowercase letters only (``how to show
    it``). ``slash-list``: a path that is a list of words (`slash_list`).
    """
    if "\n" in v or "\r" in v:
        return "phrase"
    words = v.split()
    if len(words) >= 4:
        return "phrase"
    if category == "quoted" and len(words) >= 2 and all(_LOWER_WORD.fullmatch(w) for w in words):
        return "phrase"
    if category == "path" and slash_list(v):
        return "slash-list"
    return None


def _number_ok(v: str) -> bool:
    num = re.match(NUM, v)
    if num is None:
        return False
    n = num.group(0).replace(",", "")
    if not n.strip("0."):
        return False  # all zeros: "0.00s" is the default of every timer
    if "." not in n:
        return len(n) >= 2 and int(n) not in (100,) and not (len(n) <= 3 and int(n) % 10 == 0 and v == n)
    return True


def _value_ok(rule: ExtractionRule, v: str) -> bool:
    """ExtractionRule-specific shape checks beyond the regex (what makes a match a value worth asking for)."""
    if rule.name == "slash_path":
        return _path_ok(v)
    if rule.name == "file_name":  # "Node.js", "Vue.js": a library's name, not a file
        return not re.fullmatch(r"[A-Z][a-z]+\.js", v)
    if rule.name == "ticket_id":
        return v.split("-", 1)[0] not in _STANDARD_PREFIXES
    if rule.name == "slug_id":
        segs = re.split(r"[-_]", v)
        mixed = any(re.search(r"[A-Za-z]", s) and re.search(r"\d", s) for s in segs)
        long_run = any(s.isdigit() and len(s) >= 4 for s in segs)
        random_seg = any(
            len(s) >= 8 and re.search(r"[a-z]", s) and re.search(r"[A-Z]", s) and re.search(r"\d", s) for s in segs
        )  # li_jpaLEvjsIZY7US: one random segment is enough
        if re.match(r"\d{4}-\d{2}-\d{2}", v):
            return False  # a date or timestamp, not an id
        return (
            len(v) >= 6
            and not all(s.isdigit() for s in segs)
            and v.casefold() not in _COMMON_SLUGS
            and (random_seg or (_digits(v) >= 2 and (mixed or long_run)))
        )
    if rule.name == "mixed_token":
        letters = sum(c.isalpha() for c in v)
        return _digits(v) >= 2 and letters >= 3 and _transitions(v) >= 4 and v.casefold() not in _COMMON_SLUGS
    if rule.category == "number":
        return _number_ok(v)
    if rule.category == "error_string":
        return 8 <= len(v) <= 200 and bool(re.search(r"[A-Za-z]", v))
    if rule.category == "quoted":
        return (
            v == v.strip()
            and not v.endswith("\\")  # an escaped closing quote: "`Ran \`${cmd}\``" is not the value "Ran \"
            and bool(re.search(r"[A-Za-z0-9]", v))
            and not re.fullmatch(r"[a-z]+", v)
            and not v.startswith(("http://", "https://"))
        )
    return True


#: File names every project of their kind has: asking for one tests a guess, not a memory (compared
#: case-folded, as a bare name; a path to one, ``packages/x/package.json``, is not a guess).
WELL_KNOWN_FILES: frozenset[str] = frozenset(
    normalise(name)
    for name in """
package.json package-lock.json yarn.lock pnpm-lock.yaml tsconfig.json jsconfig.json biome.json
cargo.toml cargo.lock go.mod go.sum pyproject.toml setup.py setup.cfg requirements.txt poetry.lock
uv.lock pipfile pipfile.lock tox.ini noxfile.py conftest.py __init__.py __main__.py manage.py
pytest.ini mypy.ini ruff.toml .pre-commit-config.yaml gemfile gemfile.lock rakefile pom.xml
build.gradle settings.gradle cmakelists.txt makefile dockerfile docker-compose.yml docker-compose.yaml
compose.yaml .dockerignore .gitignore .gitattributes .gitmodules .editorconfig .env .env.example
.npmrc .nvmrc .prettierrc .eslintrc.json eslint.config.js vite.config.ts vite.config.js
webpack.config.js jest.config.js vitest.config.ts readme readme.md readme.rst license license.md
license.txt changelog.md contributing.md agents.md claude.md index.html index.js index.ts main.py
main.go main.rs lib.rs mod.rs app.py
""".split()
)

#: First parts of an absolute path that belong to the operating system, not the session.
SYSTEM_ROOTS: frozenset[str] = frozenset(
    "etc usr bin sbin lib lib32 lib64 dev proc sys var tmp opt run boot srv mnt private".split()
)


#: A name a system directory tree spells the same everywhere: letters, then a version at most, then an
#: extension at most (``passwd``, ``python3.12``, ``site-packages``, ``resolv.conf``; not ``tmp74wiyiny``).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z_+\-]{0,30}(?:\d+(?:\.\d+)*)?(?:\.[A-Za-z]{1,8})?")


def _system_path(v: str) -> bool:
    """Whether `v` is a short system path of plain names (``/etc/passwd``, ``/usr/bin/env``, ``/tmp``)."""
    parts = [p for p in v.split("/") if p]
    return (
        v.startswith("/")
        and 1 <= len(parts) <= 4
        and parts[0] in SYSTEM_ROOTS
        and all(_PLAIN_NAME.fullmatch(p) for p in parts)
    )


@cache
def _one_token_word(word: str) -> bool:
    """Whether `word` (letters only) is one token of the report tokenizer: a word common enough to guess."""
    return len(get_encoding(DEFAULT_ENCODING).encode(" " + word)) == 1


def guessable(value: str) -> bool:
    """Whether a value is too easy to guess for an exact-value question.

    Shorter than 4 characters; a bare integer below 1000 or a year (1900-2099); a common word
    (`COMMON_WORDS`, compared after normalisation), a single word of letters the report tokenizer
    encodes as one token (``Rows``, ``Dataset``, ``AttributeError``) or a Python builtin name; a
    well-known file name (`WELL_KNOWN_FILES`: ``Cargo.toml``, ``package.json``, ``README.md``); a
    short system path of plain names (`SYSTEM_ROOTS`: ``/etc/passwd``, ``/usr/bin/env``, ``/tmp``).
    """
    v = value.strip().lstrip("@")
    if len(v) < 4:
        return True
    if re.fullmatch(r"\d{1,3}|(?:19|20)\d\d", v):
        return True
    folded = normalise(v.removeprefix("./"))
    if folded in COMMON_WORDS or folded in WELL_KNOWN_FILES:
        return True
    if re.fullmatch(r"[A-Za-z]+", v) and (hasattr(builtins, v) or _one_token_word(v)):
        return True
    return _system_path(v.rstrip("/"))


def _is_api_output(record: Record) -> bool:
    return record.kind == "tool_output" and (
        bool(record.tool and _API_TOOL.search(record.tool)) or bool(record.target and _API_TARGET.search(record.target))
    )


def has_words(s: str) -> bool:
    """Whether `s` has a word (two or more letters or digits), not just punctuation and space."""
    return bool(re.search(r"[A-Za-z0-9]{2,}", s))


#: Record kinds that are prose (not tool traffic).
PROSE_KINDS = ("user", "assistant", "reasoning")


def _newlines(text: str) -> list[int]:
    """Offsets of every newline of `text`, in order (what `_context` looks a value's line up in)."""
    return [m.start() for m in re.finditer("\n", text)]


def _context(record: Record, start: int, end: int, newlines: Sequence[int] | None = None) -> tuple[str, str, int]:
    """(before, after, line_no): up to six words before and four after the value on its line.

    `newlines` are the text's `_newlines` (computed here when not given): a record with many values looks
    each line up in them instead of searching the text again for every value.
    """
    text = record.text
    nl = _newlines(text) if newlines is None else newlines
    at = bisect.bisect_left(nl, start)  # newlines before the value: its line is the next one
    ls = nl[at - 1] + 1 if at else 0
    after_end = bisect.bisect_left(nl, end)
    le = nl[after_end] if after_end < len(nl) else len(text)
    left, right = text[ls:start], text[end:le]
    if record.kind != "tool_output" and not has_words(left + right):
        # a value alone on its line (a bullet, a quoted setting): the line before says what it is
        prev = text[:ls].rstrip()
        left = prev[prev.rfind("\n") + 1 :] + " " + left if prev else left
    if record.kind in PROSE_KINDS:  # stay inside the sentence
        cut = max((m.end() for m in re.finditer(r"[.!?]\s", left)), default=0)
        left = left[cut:] if has_words(left[cut:]) else left
        m = re.search(r"[.!?](?:\s|$)", right)
        right = right[: m.start()] if m else right
    # Only the words nearest the value matter: bound the strings (a minified line can be hundreds of
    # kilobytes) and split tokens in Python (one regex with a nested quantifier backtracks badly).
    before = "".join(re.findall(r"\S+\s*", left[-400:])[-6:])
    after = "".join(re.findall(r"\s*\S+", right[:400])[:4])
    if len(before) > 50:  # start at a word (or, inside one long token, a punctuation) boundary
        before = before[-50:]
        cut = before.find(" ") if " " in before else next((i for i, ch in enumerate(before) if not ch.isalnum()), -1)
        before = before[cut + 1 :]
    if len(after) > 32:
        after = after[:32]
        cut = (
            after.rfind(" ")
            if " " in after
            else max((i for i, ch in enumerate(after) if not ch.isalnum()), default=len(after))
        )
        after = after[:cut]
    before = re.sub(r"\s+", " ", before).lstrip()
    after = re.sub(r"\s+", " ", after).rstrip()
    if re.fullmatch(r"[.,;:!?]+", after):
        after = ""  # the sentence's full stop says nothing about the value
    return before, after, at + 1


@dataclass(frozen=True)
class Rejected:
    """A match with a value's shape that is not asked, and why (one of `REJECT_REASONS`)."""

    reason: str
    cand: Candidate


@dataclass(frozen=True)
class Scan:
    """What the rules find in one record: the values, and the matches rejected with a reason."""

    found: tuple[Candidate, ...] = ()
    rejected: tuple[Rejected, ...] = ()


def scan(record: Record, mask: Sequence[tuple[int, int]] = ()) -> Scan:
    """Every value the rules find in one record, and the matches rejected as inexact or harness text.

    Parameters
    ----------
    record : Record
    mask : sequence of (start, end)
        Spans of the text a harness wrote (`harness.Harness.spans`): a match
        touching one is rejected as ``template``.

    Returns
    -------
    Scan
        Values in rule order, then by offset. A rejected match claims no
        span, so the paths and ids inside a long error line are still found.
        Records that are not mined (system, meta, summary, injected) give an
        empty scan.
    """
    return _scanned(record, tuple((int(a), int(b)) for a, b in mask))


#: Scans of the records read last: a session is mined at each of its cuts and again by the recorded
#: exam, and each mining reads every record before its cut. `Record` is frozen, so equal records (and
#: their masks) give equal scans.
SCANS_KEPT = 8192


@lru_cache(maxsize=SCANS_KEPT)
def _scanned(record: Record, mask: tuple[tuple[int, int], ...]) -> Scan:
    return _scan(record, mask)


def _scan(record: Record, mask: tuple[tuple[int, int], ...]) -> Scan:
    """`scan` itself (its results are kept by `_scanned`)."""
    if record.kind not in MINED_KINDS or record.injected:
        return Scan()
    pointer = POINTER_OF_KIND[record.kind]
    text = record.text
    claimed = bytearray(len(text))
    masked: bytearray | None = None
    if mask:
        masked = bytearray(len(text))
        for a, b in mask:
            masked[a:b] = b"\x01" * (min(b, len(text)) - a)
    api = _is_api_output(record)
    newlines: list[int] | None = None
    out: list[Candidate] = []
    rejected: list[tuple[str, Candidate]] = []
    for rule in EXTRACTION_RULES:
        if record.kind not in rule.kinds:
            continue
        found: list[tuple[int, int, str, int, int, str | None]] = []
        for m in rule.pattern.finditer(text):
            s, e = m.span(rule.group)
            v = m.group(rule.group)
            stripped = v.rstrip(" \t\r.,;:") if rule.category in ("path", "error_string") else v
            e -= len(v) - len(stripped)
            v = stripped
            if not v or not _value_ok(rule, v):
                continue
            ms, me = m.span()  # the whole match (quotes included) must be unclaimed
            if 1 in claimed[ms:me]:
                continue
            reason = "template" if masked is not None and 1 in masked[ms:me] else inexact(rule.category, v)
            found.append((s, e, v, ms, me, reason))
        same_rule = sum(1 for *_, reason in found if reason != "template")
        for s, e, v, ms, me, reason in found:
            if reason is None:
                claimed[ms:me] = b"\x01" * (me - ms)
            category = "tool_returned_id" if api and rule.category == "identifier" else rule.category
            if newlines is None:  # looked up once per record, only when it has a value
                newlines = _newlines(text)
            before, after, line = _context(record, s, e, newlines)
            c = Candidate(
                v,
                category,
                rule.name,
                pointer,
                record.kind,
                record.source_order,
                record.entry_id,
                s,
                e,
                record.tool,
                record.target,
                line,
                before,
                after,
                same_rule,
            )
            if reason is None:
                out.append(c)
            else:
                rejected.append((reason, c))
    distinct = len({c.value for c in out} | {c.value for reason, c in rejected if reason != "template"})
    return Scan(
        tuple(replace(c, in_record=distinct) for c in out),
        tuple(Rejected(reason, replace(c, in_record=distinct)) for reason, c in rejected),
    )


def extract(record: Record, mask: Sequence[tuple[int, int]] = ()) -> list[Candidate]:
    """Every value the rules find in one record (no session-level filtering): `scan`'s values.

    Parameters
    ----------
    record : Record
    mask : sequence of (start, end)
        Harness-written spans, whose values are not returned (see `scan`).

    Returns
    -------
    list of Candidate
        In rule order, then by offset. Records that are not mined (system,
        meta, summary, injected) give ``[]``.
    """
    return list(scan(record, mask).found)
