"""Questions mined from anyone's own sessions: identifiers, paths, numbers, error strings, quoted values.

The synthetic bank asks about facts the generator planted; a user's own
sessions have no ledger, so `exam.probes` mines one. From every record of the
*covered part* (``source_order < tail_start``, the history a compaction
replaces) it extracts values by kind-specific rules, keeps those a reader
could only know from memory, asks a natural question about each ("What ID did
the `http_request` call on `…/v1/refunds` return at step 27: “"id": "…",”?"),
samples them with a seed and adds decoys: lookalike values checked absent from
the whole session.

Extraction rules (`RULES`, first claim wins, a later rule never matches inside
an earlier rule's span in the same record)
    error_string  an exception line ``SomeError: message`` (Python and
                  dotted class names), ``error[E0308]: …`` (rustc),
                  ``error TS2345: …`` (tsc), ``error: …`` / ``FATAL: …`` /
                  ``panic: …`` at a line start, ``npm ERR! …``, and the node id
                  of a ``FAILED tests/x.py::test_y`` line.
    path          slash paths (absolute, ``~/``, ``./``, or relative with an
                  extension or at least three parts; never inside a URL) and
                  bare file names with a known extension (``hello.sh``).
    identifier    UUIDs, ticket-style ids (``ORD-58213``, ``RFD-39055-FU``),
                  hex hashes of 7–64 characters (git SHAs), slug/prefixed ids
                  (``ord_8f3k2q``, ``bld-20240308-d2s27z``) and long mixed
                  letter-digit tokens (``tmpw6sk2trg``). In the output of an
                  HTTP/API call (tool or target says http/curl/request/api, or
                  the target is a URL) the category is ``tool_returned_id``.
    number        numbers with a unit (``184.37 ms``, ``3.2 GB``, ``6626 KiB``,
                  ``1.16%``), decimals (``0.0421``; versions such as ``0.7.29``
                  are not numbers), and ports in context (``port 7412``,
                  ``localhost:8000`` → ``8000``).
    quoted        backticked or quoted strings of 4–60 characters (not in tool
                  calls, whose JSON arguments are all quoted; not JSON keys).

Decisions where EXAM.md is silent
---------------------------------
Covered part and tail
    ``tail_start`` is the bank's (`bank.tail_start_of`: FutureOS's recent tail
    for ``tail_tokens`` report tokens before the cut, whole records, a call
    never split from its output), so a probe case and a bank case at the same
    cut agree on what is covered.
Which records are mined
    user (not ``injected``: harness text such as AGENTS.md or hook feedback is
    not what the person said), assistant, reasoning, tool_call and tool_output
    records. System records are never mined, and a value that occurs in the
    session's system prompt (``metadata["system_prompt"]`` or any ``system``
    record) is never asked.
Usable values
    Presence and absence use the grader's normalisation (`grading.normalise`):
    a value is usable iff, normalised, it occurs in no record text or tool
    target at or after ``tail_start`` (the tail and everything after the cut)
    and not in the system prompt; it is at least 4 characters, not a bare
    integer below 1000, not a round or all-zero number, and not a common word
    (`COMMON_WORDS`; a quoted value that is one lowercase word is too
    guessable as well). Values are deduplicated by normalised form; the first
    covered occurrence whose question can be phrased without the answer is
    the source.
Sampling
    ``random.Random(f"{seed}:{case_id}")``. Per pointer, each category's
    candidates (sorted by source_order, offset, value) are shuffled, then
    stably sorted by how often the value occurs in the covered part, so values
    seen once come first; categories are dealt round-robin in a seeded order,
    so one abundant category (paths in listings) does not crowd out the rest.
    A value contained in an already chosen one, or containing it, is passed
    over (``src/app.py`` kept would also answer ``app.py``).
    Counts per pointer: with ``pointer_mix=None``, one per pointer that has
    candidates, the rest one at a time to the pointer furthest below its
    share of availability (never above what is available; a gap left by a
    passed-over value is topped up the same way); with a mix,
    ``allocation.largest_remainder`` of ``n_questions`` capped by availability and
    no top-up from other pointers — what a pointer lacks is a shortfall in
    `MinedCase`, never invented. ``n_questions`` counts real questions;
    ``n_decoys`` come on top. Real questions are listed in source order (ids
    ``-p00`` …), decoys after them (``-d00`` …).
Question wording
    A question names its step (the source record's source_order) and, for tool
    records, the tool and a shortened target, plus a window of words around
    the value with the value replaced by “…”. Errors without a window name
    only the call (and the output line when the record has several errors);
    a tool-output value alone on its line is located by its line number, a
    prose value alone on its line by the end of the line before. A wording
    that would contain the answer falls back to one without the window, then
    without the target, then without both; a wording that could mean another
    value of the same record (no window, no line, several values) is not
    used. If no wording is left, that occurrence is not asked. Numbers with a
    unit take the other spacing (``184.37ms``) as an alias when it too is
    absent from the tail.
Decoys
    Sources are the sampled real questions in a seeded order. The value is
    mutated to look alike: identifiers and numbers change some digits/letters
    keeping their shape and any alphabetic prefix (``ORD-58213`` →
    ``ORD-58791``), paths change one word of the file stem (``math_utils.py``
    → ``ledger_utils.py``), texts change digits or swap one word for another
    word of the session. The prompt is the source's wording with its subject
    made up too — one word of the target or of the window swapped — so the
    event it asks about did not happen and ``NOT_FOUND`` is right. Both the
    value and the made-up subject are checked absent (normalised) from every
    record text, tool target and the system prompt, and the value also from
    the raw ``Session.to_jsonl`` bytes. Up to 60 seeded tries per source; a
    decoy that cannot be made is skipped and counted in `MinedCase`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from compaction_lab.core.session import POINTER_OF_KIND, Record, Session
from compaction_lab.core.tokens import DEFAULT_ENCODING
from compaction_lab.exam.allocation import largest_remainder
from compaction_lab.exam.bank import cut_points, mix_pairs, spec_kwargs, tail_start_of
from compaction_lab.exam.grading import accepted, normalise
from compaction_lab.exam.types import POINTERS, Case, Question

#: Categories of mined questions, in the order tables list them.
CATEGORIES: tuple[str, ...] = ("identifier", "tool_returned_id", "path", "number", "error_string", "quoted")

#: Record kinds values are mined from (user records only when not injected).
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

_SEP = "\n\x00\n"  # joins record texts in haystacks; no match can straddle two records

# --------------------------------------------------------------------------- rules

_EXT = (
    r"(?:py|pyi|pyc|ipynb|ts|tsx|js|jsx|mjs|cjs|json|jsonl|yaml|yml|toml|ini|cfg|conf|sql|md|rst|txt|"
    r"sh|bash|zsh|ps1|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|lock|csv|tsv|log|html|css|scss|xml|"
    r"proto|tf|patch|diff|gz|zip|tar|whl|env|traj|dcm)"
)
#: A number, with thousands separators or not ("1,792,546", "184.37").
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_UNITS = (
    r"(?:req/s|ms|µs|μs|us|ns|KiB|MiB|GiB|TiB|KB|MB|GB|TB|kB|bytes|seconds|secs|sec|s|minutes|mins|"
    r"min|hours|%|rows|tokens|records|requests)"
)


@dataclass(frozen=True)
class Rule:
    """One extraction rule: a regex whose `group` is the value, the category it yields, the kinds it reads."""

    name: str
    category: str
    pattern: re.Pattern[str]
    group: int = 0
    kinds: tuple[str, ...] = MINED_KINDS


_NO_CALLS = ("user", "assistant", "reasoning", "tool_output")

#: All rules, in claim order (see the module docstring).
RULES: tuple[Rule, ...] = (
    Rule("failed_test", "error_string", re.compile(r"(?m)^FAILED[ \t]+(\S+::\S+)"), 1, _NO_CALLS),
    Rule(
        "exception",
        "error_string",
        re.compile(
            r"(?m)(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault|Interrupt)(?=:[ \t]+\S)[^\n]*"
        ),
        0,
        _NO_CALLS,
    ),
    Rule("rustc_error", "error_string", re.compile(r"\berror\[E\d{4}\]:[ \t]+\S[^\n]*"), 0, _NO_CALLS),
    Rule("tsc_error", "error_string", re.compile(r"\berror TS\d+:[ \t]+\S[^\n]*"), 0, _NO_CALLS),
    Rule(
        "error_line",
        "error_string",
        re.compile(
            r"(?m)^[ \t]*((?:(?:ERROR|Error|error|FATAL|Fatal|fatal|panic)(?:\([^)\n]*\))?:|npm ERR!)[ \t]+\S[^\n]*)"
        ),
        1,
        _NO_CALLS,
    ),
    Rule("slash_path", "path", re.compile(r"(?<![\w.~/:@%+\-\\])((?:~|\.{1,2})?/?(?:[\w.@%+\-]+/)+[\w.@%+\-]*)"), 1),
    Rule(
        "file_name",
        "path",
        re.compile(rf"(?<![\w.~/:@%+\-\\])([\w@%+\-]+(?:\.[\w@%+\-]+)*\.{_EXT})(?![\w/\\-]|\.\w)"),
        1,
    ),
    Rule(
        "uuid",
        "identifier",
        re.compile(r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"),
    ),
    Rule("ticket_id", "identifier", re.compile(r"(?<![\w-])[A-Z][A-Z0-9]*[A-Z]-\d{2,}(?:[-_][A-Za-z0-9]+)*(?![\w-])")),
    Rule("hex_hash", "identifier", re.compile(r"(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}(?![\w-])")),
    Rule("slug_id", "identifier", re.compile(r"(?<![\w.\-/@])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+(?![\w\-/@]|\.\w)")),
    Rule("mixed_token", "identifier", re.compile(r"(?<![\w.\-/@])[A-Za-z0-9]{8,}(?![\w\-/@]|\.\w)")),
    Rule("unit_number", "number", re.compile(rf"(?<![\w.:/,-]){_NUM}\s?{_UNITS}(?![\w/])")),
    Rule("decimal", "number", re.compile(r"(?<![\w.:/,-])(?:\d{1,3}(?:,\d{3})+|\d+)\.\d+(?![\w]|\.\d)")),
    Rule(
        "port",
        "number",
        re.compile(r"(?i:\bport\s*[:=]?\s*|\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):)(\d{2,5})(?!\d)"),
        1,
    ),
    Rule("backticked", "quoted", re.compile(r"(?<!`)`([^`\n]{4,60})`(?!`)"), 1, _NO_CALLS),
    Rule("double_quoted", "quoted", re.compile(r'(?<![\w"\\])"([^"\n\\]{4,60})"(?![\w"])(?!\s*:)'), 1, _NO_CALLS),
    Rule("single_quoted", "quoted", re.compile(r"(?<![\w'\\])'([^'\n\\]{4,60})'(?![\w'])"), 1, _NO_CALLS),
    Rule("curly_quoted", "quoted", re.compile("\u201c([^\u201d\n]{4,60})\u201d"), 1, _NO_CALLS),
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
        Name of the `Rule` that found it.
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
    """Changes between letters and digits along `s` (random tokens change often, words rarely)."""
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


def _number_ok(v: str) -> bool:
    num = re.match(_NUM, v)
    if num is None:
        return False
    n = num.group(0).replace(",", "")
    if not n.strip("0."):
        return False  # all zeros: "0.00s" is the default of every timer
    if "." not in n:
        return len(n) >= 2 and int(n) not in (100,) and not (len(n) <= 3 and int(n) % 10 == 0 and v == n)
    return True


def _value_ok(rule: Rule, v: str) -> bool:
    """Rule-specific shape checks beyond the regex (what makes a match a value worth asking for)."""
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
            and bool(re.search(r"[A-Za-z0-9]", v))
            and not re.fullmatch(r"[a-z]+", v)
            and not v.startswith(("http://", "https://"))
        )
    return True


def guessable(value: str) -> bool:
    """Whether a value is too easy to guess for an exact-value question.

    Shorter than 4 characters, a bare integer below 1000, or a common word
    (`COMMON_WORDS`, compared after normalisation).
    """
    v = value.strip()
    if len(v) < 4:
        return True
    if re.fullmatch(r"\d{1,3}", v):
        return True
    return normalise(v) in COMMON_WORDS


def _is_api_output(record: Record) -> bool:
    return record.kind == "tool_output" and (
        bool(record.tool and _API_TOOL.search(record.tool)) or bool(record.target and _API_TARGET.search(record.target))
    )


_PROSE_KINDS = ("user", "assistant", "reasoning")


def _context(record: Record, start: int, end: int) -> tuple[str, str, int]:
    """(before, after, line_no): up to six words before and four after the value on its line."""
    text = record.text
    ls = text.rfind("\n", 0, start) + 1
    le = text.find("\n", end)
    le = len(text) if le < 0 else le
    left, right = text[ls:start], text[end:le]
    if record.kind != "tool_output" and not _has_words(left + right):
        # a value alone on its line (a bullet, a quoted setting): the line before says what it is
        prev = text[:ls].rstrip()
        left = prev[prev.rfind("\n") + 1 :] + " " + left if prev else left
    if record.kind in _PROSE_KINDS:  # stay inside the sentence
        cut = max((m.end() for m in re.finditer(r"[.!?]\s", left)), default=0)
        left = left[cut:] if _has_words(left[cut:]) else left
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
    return before, after, text.count("\n", 0, start) + 1


def extract(record: Record) -> list[Candidate]:
    """Every value the rules find in one record (no session-level filtering).

    Parameters
    ----------
    record : Record

    Returns
    -------
    list of Candidate
        In rule order, then by offset. Records that are not mined (system,
        meta, summary, injected user text) give ``[]``.
    """
    if record.kind not in MINED_KINDS or (record.kind == "user" and record.injected):
        return []
    pointer = POINTER_OF_KIND[record.kind]
    text = record.text
    claimed = bytearray(len(text))
    api = _is_api_output(record)
    out: list[Candidate] = []
    for rule in RULES:
        if record.kind not in rule.kinds:
            continue
        found: list[tuple[int, int, str, int, int]] = []
        for m in rule.pattern.finditer(text):
            s, e = m.span(rule.group)
            v = m.group(rule.group)
            stripped = v.rstrip(" \t.,;:") if rule.category in ("path", "error_string") else v
            e -= len(v) - len(stripped)
            v = stripped
            if not v or not _value_ok(rule, v):
                continue
            ms, me = m.span()  # the whole match (quotes included) must be unclaimed
            if 1 in claimed[ms:me]:
                continue
            found.append((s, e, v, ms, me))
        for s, e, v, ms, me in found:
            claimed[ms:me] = b"\x01" * (me - ms)
            category = "tool_returned_id" if api and rule.category == "identifier" else rule.category
            before, after, line = _context(record, s, e)
            out.append(
                Candidate(
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
                    len(found),
                )
            )
    distinct = len({c.value for c in out})
    return [replace(c, in_record=distinct) for c in out]


# --------------------------------------------------------------------------- wording

_NOUN = {
    "identifier": "ID",
    "tool_returned_id": "ID",
    "path": "path",
    "number": "value",
    "error_string": "error",
    "quoted": "value",
}
_WH = {"path": "Which", "error_string": "Which"}
_TOOL_VERB = {
    "tool_returned_id": ("What ID", "return"),
    "identifier": ("What ID", "print"),
    "path": ("Which path", "show"),
    "number": ("What number", "report"),
    "error_string": ("Which error", "report"),
    "quoted": ("What quoted value", "show"),
}
_PROSE_VERB = {
    "identifier": "give",
    "tool_returned_id": "give",
    "path": "mention",
    "number": "report",
    "error_string": "quote",
    "quoted": "mention",
}


def short_target(target: str | None, limit: int = 60) -> str:
    """A target as a question shows it: first line, backticks replaced, at most `limit` characters."""
    if not target:
        return ""
    t = target.strip().splitlines()[0].replace("`", "'") if target.strip() else ""
    return t if len(t) <= limit else t[: limit - 1].rstrip() + "…"


def _has_words(s: str) -> bool:
    return bool(re.search(r"[A-Za-z0-9]{2,}", s))


def render(
    c: Candidate,
    *,
    target: str | None = None,
    before: str | None = None,
    after: str | None = None,
    window: bool = True,
    show_target: bool = True,
) -> str:
    """The question about candidate `c`.

    Parameters
    ----------
    c : Candidate
    target, before, after : str, optional
        Override the shown target and window (decoys make them up).
    window : bool
        Show the words around the value (with the value as “…”).
    show_target : bool
        Name the tool call's target.

    Returns
    -------
    str
    """
    n = c.source_order
    tgt = short_target(c.target) if target is None else target
    b = c.before if before is None else before
    a = c.after if after is None else after
    win = f": \u201c{b}\u2026{a}\u201d" if window and _has_words(b + a) else ""
    wh = _WH.get(c.category, "What")
    noun = _NOUN[c.category]
    if c.kind == "tool_output":
        subject = f"the `{c.tool or 'tool'}` call" + (f" on `{tgt}`" if show_target and tgt else "")
        if c.rule == "failed_test":
            lead, verb = "Which failing test", "report"
        else:
            lead, verb = _TOOL_VERB[c.category]
        if c.category == "error_string":  # the line is the answer: its window is rarely more than "…"
            where = f" (line {c.line_no} of its output)" if c.same_rule > 1 else ""
            return f"{lead} did {subject} {verb} at step {n}{win or where}?"
        if not win:
            win = f" (line {c.line_no} of its output)" if window else ""
        return f"{lead} did {subject} {verb} at step {n}{win}?"
    if c.kind == "tool_call":
        if c.category == "path" and c.target and c.value.strip() == c.target.strip():
            return f"Which file did the `{c.tool or 'tool'}` call at step {n} act on?"
        subject = f"the `{c.tool or 'tool'}` call" + (f" on `{tgt}`" if show_target and tgt else "")
        return f"{wh} {noun} did the agent pass to {subject} at step {n}{win}?"
    if c.kind == "reasoning":
        return f"{wh} {noun} did the assistant note in its reasoning at step {n}{win}?"
    if c.kind == "user":
        return f"{wh} {noun} did the user specify at step {n}{win}?"
    return f"{wh} {noun} did the assistant {_PROSE_VERB[c.category]} at step {n}{win}?"


def _contains(prompt: str, forms: Iterable[str]) -> bool:
    p = normalise(prompt)
    return any(f and f in p for f in forms)


class Variant(TypedDict, total=False):
    """The `render` options a wording is made with (absent: the default, True)."""

    window: bool
    show_target: bool


#: Wordings tried in turn until one does not contain the answer.
_VARIANTS: tuple[Variant, ...] = (
    {},
    {"window": False},
    {"show_target": False},
    {"window": False, "show_target": False},
)


def _grounded(c: Candidate, prompt: str) -> bool:
    """Whether a wording singles out one value: a window or a line number, or nothing else it could mean."""
    if "\u201c" in prompt or " (line " in prompt or c.in_record == 1:
        return True
    if c.category == "error_string" and c.same_rule == 1:
        return True
    return (
        c.kind == "tool_call"
        and c.category == "path"
        and c.target is not None
        and c.target != ""
        and c.value.strip() == c.target.strip()
    )


def phrase(c: Candidate, aliases: Sequence[str] = ()) -> tuple[str, Variant] | None:
    """The first wording of `c` that singles it out and contains neither its value nor an alias.

    Returns the prompt and the `render` options it was made with, or None
    when every wording either gives the answer away or could mean another
    value of the same record.
    """
    forms = [normalise(x) for x in (c.value, *aliases)]
    for kw in _VARIANTS:
        prompt = render(c, **kw)
        if not _contains(prompt, forms) and _grounded(c, prompt):
            return prompt, kw
    return None


# --------------------------------------------------------------------------- spec and result


def _parse_mix(mix: Any) -> tuple[tuple[str, float], ...] | None:
    """A pointer mix (None, mapping, pairs or JSON text) as pairs in POINTERS order, checked."""
    if mix is None or (isinstance(mix, str) and mix.strip().lower() in ("", "none", "natural", "null")):
        return None
    if isinstance(mix, str):
        mix = json.loads(mix)
    return mix_pairs(mix)


@dataclass(frozen=True)
class ProbeSpec:
    """Parameters of mined probe cases.

    Parameters
    ----------
    tail_tokens : int
        Recent-tail budget in report tokens; questions point before the tail.
    n_questions : int
        Real questions per case (fewer when the session has fewer candidates).
    n_decoys : int
        Decoys per case, on top of the real questions.
    pointer_mix : None, Mapping[str, float] or tuple of (pointer, weight)
        None: natural proportions (every pointer that has candidates, the rest
        by availability). Otherwise relative weights of ``assistant``,
        ``user``, ``tool``, stored as pairs in POINTERS order.
    seed : int
    encoding : str
        Report tokenizer for the tail.
    cuts_per_session : int
        `mine_cases`: cases per session (1 = at its end; k = cuts at
        ``1, (k-1)/k, …`` of its records, as the bank places them).
    """

    tail_tokens: int = 8192
    n_questions: int = 20
    n_decoys: int = 2
    pointer_mix: Any = None
    seed: int = 7
    encoding: str = DEFAULT_ENCODING
    cuts_per_session: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "pointer_mix", _parse_mix(self.pointer_mix))
        for name in ("tail_tokens", "n_questions", "n_decoys"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.cuts_per_session < 1:
            raise ValueError(f"cuts_per_session must be >= 1, got {self.cuts_per_session}")

    @property
    def mix(self) -> dict[str, float] | None:
        """The pointer mix as a dict, or None for natural proportions."""
        return None if self.pointer_mix is None else dict(self.pointer_mix)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> ProbeSpec:
        """Build a spec from a mapping (e.g. papermill parameters), ignoring unknown keys and None.

        ``pointer_mix`` may be a mapping, pairs, JSON text or ``"none"``; other
        known keys are coerced to the field's type.
        """
        return cls(**spec_kwargs(cls, m, {"pointer_mix": lambda v: v}))


@dataclass(frozen=True)
class MinedCase:
    """A mined case and how it compares with what was asked.

    Parameters
    ----------
    case : Case
    available : Mapping[str, int]
        Usable candidates per pointer.
    planned : Mapping[str, int]
        Real questions per pointer the spec asked for (the mix's rounding; with
        natural proportions, what availability allowed).
    shortfall : Mapping[str, int]
        Per pointer, planned minus asked (0 when met).
    decoys_skipped : int
        Decoys asked for but not made.
    notes : tuple of str
    """

    case: Case
    available: Mapping[str, int]
    planned: Mapping[str, int]
    shortfall: Mapping[str, int]
    decoys_skipped: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def asked(self) -> dict[str, int]:
        """Real questions per pointer in the case."""
        return {p: sum(1 for q in self.case.real if q.pointer == p) for p in POINTERS}


# --------------------------------------------------------------------------- session haystacks


def system_prompt_text(session: Session) -> str:
    """The session's system prompt as recorded: ``metadata["system_prompt"]`` and every ``system`` record."""
    parts = [session.metadata.get("system_prompt")] + [r.text for r in session.records if r.kind == "system"]
    return _SEP.join(p for p in parts if isinstance(p, str) and p)


def _hay(records: Iterable[Record]) -> str:
    """Normalised texts and targets of `records`, joined so no match straddles two."""
    parts: list[str] = []
    for r in records:
        parts.append(normalise(r.text))
        if r.target:
            parts.append(normalise(r.target))
    return _SEP.join(parts)


@dataclass(frozen=True)
class _Haystacks:
    late: str  # at or after tail_start
    covered: str  # before tail_start
    system: str
    whole: str  # every record and target, and the system prompt
    raw: bytes  # Session.to_jsonl


def _haystacks(session: Session, tail_start: int) -> _Haystacks:
    late = _hay(r for r in session.records if r.source_order >= tail_start)
    covered = _hay(r for r in session.records if r.source_order < tail_start)
    system = normalise(system_prompt_text(session))
    return _Haystacks(late, covered, system, _SEP.join((covered, late, system)), session.to_jsonl())


# --------------------------------------------------------------------------- mining


@dataclass(frozen=True)
class _Usable:
    cand: Candidate
    prompt: str
    variant: Variant  # the `render` options the prompt was made with
    aliases: tuple[str, ...]
    count: int  # normalised occurrences in the covered part


def _aliases(c: Candidate) -> tuple[str, ...]:
    """Other spellings of a number with a unit: with and without the space before the unit."""
    if c.category != "number":
        return ()
    m = re.fullmatch(rf"({_NUM})(\s?)(\S+)", c.value)
    if m is None:
        return ()
    return (m.group(1) + ("" if m.group(2) else " ") + m.group(3),)


def usable_candidates(session: Session, tail_start: int, hay: _Haystacks | None = None) -> list[_Usable]:
    """The candidates of the covered part a question may ask about, one per normalised value.

    See the module docstring ("Usable values"). Sorted by (source_order, start, value).
    """
    hay = _haystacks(session, tail_start) if hay is None else hay
    out: list[_Usable] = []
    seen: set[str] = set()
    for r in session.records:
        if r.source_order >= tail_start:
            break
        for c in sorted(extract(r), key=lambda c: (c.start, c.value)):
            key = normalise(c.value)
            if not key or key in seen or guessable(c.value) or key in hay.late or key in hay.system:
                continue
            aliases = tuple(a for a in _aliases(c) if normalise(a) not in hay.late and normalise(a) not in hay.system)
            phrased = phrase(c, aliases)
            if phrased is None:
                continue
            seen.add(key)
            out.append(_Usable(c, phrased[0], phrased[1], aliases, hay.covered.count(key)))
    return out


def plan_counts(
    available: Mapping[str, int], n: int, mix: Mapping[str, float] | None
) -> tuple[dict[str, int], dict[str, int]]:
    """Real questions per pointer: (planned, asked).

    Parameters
    ----------
    available : Mapping[str, int]
        Usable candidates per pointer.
    n : int
        Real questions wanted.
    mix : Mapping or None
        None: natural proportions — one per pointer with candidates (the most
        available first when `n` is smaller), the rest one at a time to the
        pointer furthest below its share of availability. Else the largest-
        remainder rounding of `n` by the mix, capped by availability.
    """
    avail = {p: int(available.get(p, 0)) for p in POINTERS}
    if mix is not None:
        planned = largest_remainder(n, mix)
        return planned, {p: min(planned[p], avail[p]) for p in POINTERS}
    total = min(n, sum(avail.values()))
    asked = {p: 0 for p in POINTERS}
    present = sorted((p for p in POINTERS if avail[p] > 0), key=lambda p: (-avail[p], POINTERS.index(p)))
    for p in present[:total]:
        asked[p] = 1
    whole = sum(avail.values())
    for _ in range(total - sum(asked.values())):
        open_ = [p for p in POINTERS if asked[p] < avail[p]]
        p = max(open_, key=lambda p: (total * avail[p] / whole - asked[p], -POINTERS.index(p)))
        asked[p] += 1
    return dict(asked), dict(asked)


def _overlaps(key: str, taken: Iterable[str]) -> bool:
    return any(key in t or t in key for t in taken)


class _Deck:
    """One pointer's candidates in drawing order: categories round-robin in a seeded order, rarest values first.

    A value inside an already chosen one (or containing it) is passed over:
    keeping ``src/app.py`` would otherwise also answer ``app.py``.
    """

    def __init__(self, rng: random.Random, pool: Sequence[_Usable]) -> None:
        by_cat: dict[str, list[_Usable]] = {}
        for u in pool:
            by_cat.setdefault(u.cand.category, []).append(u)
        self.queues: list[list[_Usable]] = []
        for cat in sorted(by_cat):
            items = sorted(by_cat[cat], key=lambda u: (u.cand.source_order, u.cand.start, u.cand.value))
            rng.shuffle(items)
            items.sort(key=lambda u: u.count)  # stable: rarer first, seeded order within a count
            self.queues.append(items)
        rng.shuffle(self.queues)
        self.turn = 0

    def draw(self, taken: set[str]) -> _Usable | None:
        """The next candidate not overlapping `taken` (which it joins), or None when none is left."""
        for _ in range(len(self.queues)):
            q = self.queues[self.turn % len(self.queues)]
            self.turn += 1
            while q:
                u = q.pop(0)
                key = normalise(u.cand.value)
                if not _overlaps(key, taken):
                    taken.add(key)
                    return u
        return None


def select(
    rng: random.Random, usable: Sequence[_Usable], asked: Mapping[str, int], n: int, natural: bool
) -> list[_Usable]:
    """Draw ``asked[p]`` candidates per pointer; with natural proportions, top up to `n` from any pointer.

    The top-up (a value passed over for overlapping a chosen one leaves a gap)
    goes one at a time to the pointer furthest below its share of
    availability. With a mix there is no top-up: a gap is a shortfall.
    """
    decks = {p: _Deck(rng, [u for u in usable if u.cand.pointer == p]) for p in POINTERS}
    avail = {p: sum(1 for u in usable if u.cand.pointer == p) for p in POINTERS}
    taken: set[str] = set()
    chosen: list[_Usable] = []
    got = {p: 0 for p in POINTERS}
    for p in POINTERS:
        for _ in range(asked.get(p, 0)):
            u = decks[p].draw(taken)
            if u is None:
                break
            chosen.append(u)
            got[p] += 1
    open_ = [p for p in POINTERS if avail[p]]
    whole = sum(avail.values()) or 1
    while natural and len(chosen) < n and open_:
        p = max(open_, key=lambda p: (n * avail[p] / whole - got[p], -POINTERS.index(p)))
        u = decks[p].draw(taken)
        if u is None:
            open_.remove(p)
            continue
        chosen.append(u)
        got[p] += 1
    return chosen


# --------------------------------------------------------------------------- decoys

_FALLBACK_WORDS = (
    "ledger",
    "beacon",
    "cursor",
    "anchor",
    "quota",
    "harbor",
    "signal",
    "vector",
    "canopy",
    "meadow",
    "tundra",
    "falcon",
    "copper",
    "orbit",
    "lantern",
    "summit",
    "ripple",
    "ember",
)


#: Words a made-up subject never swaps (swapping "would" makes nonsense, not a different event).
_FUNCTION_WORDS = (
    frozenset(
        """
about above after again also among another because before being below between both but could does doing
down during each else even every from have having here into just like made make many more most much must
need only other over same should since some such than that their them then there these they this those
through under until upon very want was were what when where which while will with within without would
your expect using used uses line lines step call take takes keep keeps look looks find finds know show
shows calls come comes gets give gives tell says said seem seems feel tried tries sure still went well
""".split()
    )
    | COMMON_WORDS
)

_WORD = re.compile(r"(?<![A-Za-z0-9\\])[A-Za-z]{4,}(?![A-Za-z0-9'\u2019])")


def _vocab(session: Session) -> list[str]:
    """Lowercase words of 4–12 letters of the session's prose (sorted), plus fallbacks: the decoys' word pool.

    Prose (user, assistant, reasoning), not tool traffic, so swapped-in words
    read like words rather than code identifiers.
    """
    words: set[str] = set(_FALLBACK_WORDS)
    for r in session.records:
        if r.kind in _PROSE_KINDS:
            words.update(w.lower() for w in _WORD.findall(r.text) if len(w) <= 12)
    return sorted(w for w in words if w not in _FUNCTION_WORDS)


def _like_case(word: str, model: str) -> str:
    if model.isupper():
        return word.upper()
    if model[:1].isupper():
        return word.capitalize()
    return word


def _swap_word(s: str, rng: random.Random, vocab: Sequence[str]) -> str | None:
    """`s` with one of its words (4+ letters) replaced by another word from `vocab`, or None."""
    spans = [m.span() for m in _WORD.finditer(s) if m.group(0).lower() not in _FUNCTION_WORDS]
    if not spans or not vocab:
        return None
    # one of the three longest words: long words name things ("refunds", "advisory"), short ones glue
    spans.sort(key=lambda ab: (-(ab[1] - ab[0]), ab[0]))
    a, b = rng.choice(spans[:3])
    old = s[a:b]
    new = _like_case(rng.choice(vocab), old)
    if new.lower() == old.lower():
        return None
    return s[:a] + new + s[b:]


def _mutate_chars(s: str, rng: random.Random, lo: int = 0, digits_only: bool = False, frac: float = 0.4) -> str:
    """Change some letters/digits of `s[lo:]` keeping their class (digit, lower, upper; hex stays hex)."""
    chars = list(s)
    pos = [i for i in range(lo, len(s)) if s[i].isdigit() or (not digits_only and s[i].isascii() and s[i].isalpha())]
    if not pos:
        return s
    hexy = bool(re.fullmatch(r"[0-9a-f-]+", s[lo:]))
    k = min(len(pos), max(2 if len(pos) >= 4 else 1, round(len(pos) * frac)))
    for i in rng.sample(pos, k):
        c = s[i]
        if c.isdigit():
            lead = i == lo or not s[i - 1].isdigit()
            pool = "123456789" if lead and (i + 1 < len(s) and s[i + 1].isdigit()) else "0123456789"
        elif c.islower():
            pool = "abcdef" if hexy else "abcdefghijklmnopqrstuvwxyz"
        else:
            pool = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        chars[i] = rng.choice([x for x in pool if x != c] or list(pool))
    return "".join(chars)


def mutate(value: str, category: str, rng: random.Random, vocab: Sequence[str]) -> str:
    """A lookalike of a mined value (see the module docstring, "Decoys"); may equal `value` on a bad draw."""
    if category in ("identifier", "tool_returned_id"):
        m = re.match(r"(?:[A-Za-z]+[-_])+", value)  # keep an alphabetic prefix: ORD-, req_, bld-
        lo = m.end() if m and m.end() < len(value) else 0
        return _mutate_chars(value, rng, lo)
    if category == "number":
        return _mutate_chars(value, rng, digits_only=True, frac=0.5)
    if category == "path":
        head, _, base = value.rpartition("/")
        stem, dot, ext = base.partition(".") if not base.startswith(".") else (base, "", "")
        new_stem = _swap_word(stem, rng, vocab) if stem else None
        if new_stem is None:
            new_stem = _mutate_chars(stem or base, rng)
        return (head + "/" if head or value.startswith("/") else "") + new_stem + dot + ext
    if re.search(r"\d", value) and rng.random() < 0.5:
        return _mutate_chars(value, rng, digits_only=True, frac=0.5)
    swapped = _swap_word(value, rng, vocab)
    return swapped if swapped is not None else _mutate_chars(value, rng)


def _absent(value: str, hay: _Haystacks) -> bool:
    """True when `value` occurs nowhere in the session: normalised texts, targets, system prompt, raw JSONL."""
    key = normalise(value)
    if not key or key in hay.whole:
        return False
    raw = (value.encode("utf-8"), json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8"))
    return not any(x in hay.raw for x in raw)


def _decoy_prompt(u: _Usable, answer: str, rng: random.Random, vocab: Sequence[str], hay: _Haystacks) -> str | None:
    """The source's wording with one word of its subject (target, then window) made up and checked absent."""
    c = u.cand
    tgt = short_target(c.target)
    shown = {"target": tgt.rstrip("\u2026"), "before": c.before, "after": c.after}
    parts: list[str] = []
    if tgt and c.kind in ("tool_output", "tool_call") and u.variant.get("show_target", True) and tgt in u.prompt:
        parts.append("target")
    if u.variant.get("window", True) and "\u201c" in u.prompt:
        parts += ["before", "after"]
    for part in parts:
        for _ in range(12):
            made = _swap_word(shown[part], rng, vocab)
            if made is None:
                break
            if normalise(made) in hay.whole:
                continue
            shown_opts: dict[str, Any] = {**u.variant, part: made}
            prompt = render(c, **shown_opts)
            if not _contains(prompt, [normalise(answer)]) and prompt != u.prompt:
                return prompt
    return None


def _decoys(
    case_id: str, chosen: Sequence[_Usable], n: int, rng: random.Random, vocab: Sequence[str], hay: _Haystacks
) -> list[Question]:
    sources = list(chosen)
    rng.shuffle(sources)
    out: list[Question] = []
    used: set[str] = set()
    for u in sources:
        if len(out) >= n:
            break
        for _ in range(60):
            value = mutate(u.cand.value, u.cand.category, rng, vocab)
            key = normalise(value)
            if value == u.cand.value or key in used or guessable(value) or not _absent(value, hay):
                continue
            prompt = _decoy_prompt(u, value, rng, vocab, hay)
            if prompt is None:
                break  # this source's subject cannot be made up: try the next source
            used.add(key)
            out.append(
                Question(
                    id=f"{case_id}-d{len(out):02d}",
                    case_id=case_id,
                    pointer=u.cand.pointer,
                    category=u.cand.category,
                    prompt=prompt,
                    answer=value,
                    decoy=True,
                )
            )
            break
    return out


# --------------------------------------------------------------------------- cases


def mine(
    session: Session, spec: ProbeSpec | None = None, *, case_id: str | None = None, cut: int | None = None
) -> MinedCase:
    """Mine one case from `session` at `cut`, with a report of what the candidates allowed.

    Parameters
    ----------
    session : Session
    spec : ProbeSpec, optional
    case_id : str, optional
        Defaults to ``f"{session.id}-probe"``.
    cut : int, optional
        Records with ``source_order < cut`` are compacted; defaults to the
        session's end (after its last record).

    Returns
    -------
    MinedCase
    """
    spec = ProbeSpec() if spec is None else spec
    case_id = f"{session.id}-probe" if case_id is None else case_id
    end = session.records[-1].source_order + 1 if session.records else 0
    cut = end if cut is None else int(cut)
    tail = tail_start_of(session, cut, spec.tail_tokens, spec.encoding)
    hay = _haystacks(session, tail)
    usable = usable_candidates(session, tail, hay)
    available = {p: sum(1 for u in usable if u.cand.pointer == p) for p in POINTERS}
    planned, asked = plan_counts(available, spec.n_questions, spec.mix)

    rng = random.Random(f"{spec.seed}:{case_id}")
    chosen = select(rng, usable, asked, spec.n_questions, spec.mix is None)
    asked = {p: sum(1 for u in chosen if u.cand.pointer == p) for p in POINTERS}
    chosen.sort(key=lambda u: (u.cand.source_order, u.cand.start, u.cand.value))
    questions = [
        Question(
            id=f"{case_id}-p{i:02d}",
            case_id=case_id,
            pointer=u.cand.pointer,
            category=u.cand.category,
            prompt=u.prompt,
            answer=u.cand.value,
            aliases=u.aliases,
            source_entry_id=u.cand.entry_id,
            source_order=u.cand.source_order,
        )
        for i, u in enumerate(chosen)
    ]
    decoys = _decoys(case_id, chosen, spec.n_decoys, rng, _vocab(session), hay) if spec.n_decoys else []

    shortfall = {p: max(0, planned[p] - asked[p]) for p in POINTERS}
    notes: list[str] = []
    if sum(asked.values()) < spec.n_questions:
        notes.append(
            f"{case_id}: {sum(asked.values())} of {spec.n_questions} real questions "
            f"(usable candidates {available}, tail_start {tail})"
        )
    for p in POINTERS:
        if shortfall[p]:
            notes.append(
                f"{case_id}: {shortfall[p]} fewer {p} questions than planned ({available[p]} usable candidates)"
            )
    skipped = spec.n_decoys - len(decoys)
    if skipped:
        notes.append(f"{case_id}: {len(decoys)} of {spec.n_decoys} decoys (no lookalike could be made absent)")
    case = Case(id=case_id, session_id=session.id, cut=cut, tail_start=tail, questions=tuple(questions + decoys))
    return MinedCase(case, available, planned, shortfall, skipped, tuple(notes))


def mine_case(
    session: Session,
    *,
    case_id: str | None = None,
    cut: int | None = None,
    tail_tokens: int = 8192,
    n_questions: int = 20,
    n_decoys: int = 2,
    pointer_mix: Any = None,
    seed: int = 7,
    encoding: str = DEFAULT_ENCODING,
) -> Case:
    """Mine one probe case from a session (see `mine` for the report).

    Parameters
    ----------
    session : Session
    case_id : str, optional
        Defaults to ``f"{session.id}-probe"``; question ids are
        ``f"{case_id}-p{n:02d}"``, decoy ids ``f"{case_id}-d{n:02d}"``.
    cut : int, optional
        Defaults to the session's end.
    tail_tokens, n_questions, n_decoys, pointer_mix, seed, encoding
        See `ProbeSpec`.

    Returns
    -------
    Case
    """
    spec = ProbeSpec(
        tail_tokens=tail_tokens,
        n_questions=n_questions,
        n_decoys=n_decoys,
        pointer_mix=pointer_mix,
        seed=seed,
        encoding=encoding,
    )
    return mine(session, spec, case_id=case_id, cut=cut).case


def mine_all(sessions: Iterable[Session], spec: ProbeSpec | None = None) -> list[MinedCase]:
    """`mine` every session: one case at its end, or ``spec.cuts_per_session`` cases (ids ``…-probe-c{j}``)."""
    spec = ProbeSpec() if spec is None else spec
    out: list[MinedCase] = []
    for s in sessions:
        if spec.cuts_per_session == 1:
            out.append(mine(s, spec))
            continue
        k = spec.cuts_per_session
        fractions = [(k - j) / k for j in range(k)]
        for j, cut in enumerate(cut_points(s, fractions)):
            out.append(mine(s, spec, case_id=f"{s.id}-probe-c{j}", cut=cut))
    return out


def mine_cases(sessions: Iterable[Session], *, spec: ProbeSpec | None = None, **kw: Any) -> list[Case]:
    """One probe case per session at its end (or ``cuts_per_session`` cases each).

    Parameters
    ----------
    sessions : iterable of Session
    spec : ProbeSpec, optional
        Base parameters; keyword arguments (any `ProbeSpec` field) override it.

    Returns
    -------
    list of Case
    """
    spec = replace(spec or ProbeSpec(), **kw) if kw else (spec or ProbeSpec())
    return [m.case for m in mine_all(sessions, spec)]


# --------------------------------------------------------------------------- checks


def check_probe_case(case: Case, session: Session) -> None:
    """Validate a mined case against its session; raise ValueError on the first problem.

    Real questions: the answer occurs in the record at its source_order (of
    its source entry), before tail_start, and (normalised, with aliases) in no
    record text or target at or after tail_start nor in the system prompt.
    Decoys: no provenance, value and aliases absent from the whole session.
    Every question: the prompt contains no accepted form of its answer;
    no answer is asked twice.
    """
    if case.session_id != session.id:
        raise ValueError(f"case {case.id}: session {case.session_id!r}, not {session.id!r}")
    hay = _haystacks(session, case.tail_start)
    by_order = {r.source_order: r for r in session.records}
    seen: set[str] = set()
    for q in case.questions:
        forms = accepted(q)
        if not forms:
            raise ValueError(f"question {q.id}: empty answer")
        if _contains(q.prompt, forms):
            raise ValueError(f"question {q.id}: prompt {q.prompt!r} contains its answer {q.answer!r}")
        if forms[0] in seen:
            raise ValueError(f"case {case.id}: answer {q.answer!r} asked twice")
        seen.add(forms[0])
        if q.decoy:
            if q.source_entry_id or q.source_order != -1:
                raise ValueError(f"decoy {q.id}: must have source_entry_id '' and source_order -1")
            bad = next((v for v in (q.answer, *q.aliases) if not _absent(v, hay)), None)
            if bad is not None:
                raise ValueError(f"decoy {q.id}: value {bad!r} occurs in session {session.id}")
            continue
        rec = by_order.get(q.source_order)
        if rec is None or rec.entry_id != q.source_entry_id or q.answer not in rec.text:
            raise ValueError(
                f"question {q.id}: answer {q.answer!r} not in entry {q.source_entry_id!r} "
                f"at source_order {q.source_order}"
            )
        if not q.source_order < case.tail_start:
            raise ValueError(f"question {q.id}: source_order {q.source_order} not before tail_start {case.tail_start}")
        hit = next((f for f in forms if f in hay.late or f in hay.system), None)
        if hit is not None:
            raise ValueError(f"question {q.id}: {hit!r} occurs at/after tail_start or in the system prompt")
