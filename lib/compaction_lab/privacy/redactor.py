"""The redaction engine: `Redactor` masks text, nested values and sessions with patterns and literals.

Reports are made from a person's own agent sessions. A run computes on the
sessions as they were written and masks what it writes: `redactor` builds the
one redactor a run uses, `Redactor.learn` adds the account names its sessions
tell (a cwd, an encoded project folder), so every file, figure and table of the
run masks the same value the same way (docs/architecture.md, "Redaction").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Record, Session
from compaction_lab.privacy.credentials import credentials_in
from compaction_lab.privacy.env_secrets import ENV_SECRET, MIN_SECRET_CHARS, env_secret_values
from compaction_lab.privacy.patterns import URL_USERINFO, Pattern, load_patterns, marker, personal

__all__ = ["ENCODED_HOME", "LOG_USER", "Redactor", "apply", "redactor", "walk"]

#: The names of the rules a learned account name is masked by (`Redactor.learn`).
LOG_USER = "log-user-name"
ENCODED_HOME = "encoded-home-user"
#: A marker (`marker`) is never masked again; its name part uses the pattern-name characters.
_MARKER = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\]")
_MARKER_MAX = 80  # longest possible marker, with margin
_MARKER_PREFIX = "[REDACTED:"


@dataclass(frozen=True)
class _Rule:
    name: str
    rx: re.Pattern
    group: bool  # mask only the `secret` group
    needles: tuple[str, ...] = ()  # Pattern.needles: skip a text holding none of them


def _alternation(values: Iterable[str]) -> str:
    """One regex alternative per value, longest first (a value that contains another is masked whole)."""
    return "|".join(re.escape(v) for v in sorted(set(values), key=lambda v: (-len(v), v)))


#: What encodes a home folder's path as one name, before the account name: Claude Code and pi
#: (every non-alphanumeric character -> ``-``), SWE-agent (each ``/`` -> ``__``).
_DASH_HOMES = ("-home-", "-Users-")
_UNDERSCORE_HOMES = ("__home__", "__Users__")


@lru_cache(maxsize=64)
def _rules(
    patterns: tuple[Pattern, ...], literals: frozenset[str], names: frozenset[str] = frozenset()
) -> tuple[_Rule, ...]:
    rules = []
    if literals:
        rules.append(_Rule(ENV_SECRET, re.compile(_alternation(literals)), False))
    # A learned name holding '-' or '.' (jo-ann) is several segments of an encoded home; masked whole
    # before `encoded-home-user` masks its first segment alone.
    split = [n for n in names if re.search(r"[^A-Za-z0-9_]", n)]
    if split:
        dashed = _alternation(re.sub(r"[^A-Za-z0-9]", "-", n) for n in split)
        behind_dash = "|".join(f"(?<={re.escape(h)})" for h in _DASH_HOMES)
        behind_underscore = "|".join(f"(?<={re.escape(h)})" for h in _UNDERSCORE_HOMES)
        rx = re.compile(
            rf"(?:(?:{behind_dash})(?:{dashed})(?=[-/\\\s\"']|$))"
            rf"|(?:(?:{behind_underscore})(?:{_alternation(split)})(?=__|[/\\\s\"']|$))"
        )
        rules.append(_Rule(ENCODED_HOME, rx, False, _DASH_HOMES + _UNDERSCORE_HOMES))
    for p in patterns:
        rx = re.compile(p.regex)
        rules.append(_Rule(p.name, rx, "secret" in rx.groupindex, p.needles))
    if names:
        # Whole words, after the patterns: /home/<name> stays `home-user`, a bare name becomes `log-user-name`.
        rx = re.compile(rf"(?<![A-Za-z0-9_])(?:{_alternation(names)})(?![A-Za-z0-9_])")
        rules.append(_Rule(LOG_USER, rx, False))
    return tuple(rules)


def _touches_marker(s: str, a: int, b: int) -> bool:
    for m in _MARKER.finditer(s, max(0, a - _MARKER_MAX), min(len(s), b + _MARKER_MAX)):
        if m.start() < b and a < m.end():
            return True
    return False


def _one_pass(rules: tuple[_Rule, ...], s: str, tally: Counter) -> tuple[str, int]:
    done = 0
    for rule in rules:
        if rule.needles and not any(n in s for n in rule.needles):
            continue
        marked = _MARKER_PREFIX in s
        cuts: list[tuple[int, int, str]] = []
        for m in rule.rx.finditer(s):
            a, b = m.span("secret") if rule.group else m.span()
            # An empty span (or a `secret` group that did not take part) masks
            # nothing; a span touching an earlier marker is that marker.
            if a >= b or (marked and _touches_marker(s, a, b)):
                continue
            cuts.append((*_whole_escapes(s, a, b), rule.name))
        if cuts:
            s = _splice(s, cuts)
            done += len(cuts)
            tally[rule.name] += len(cuts)
    return s, done


#: Characters that can follow a backslash in a JSON string escape.
_JSON_ESCAPED = frozenset('"\\/bfnrtu')
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")


def _escaped(s: str, i: int) -> bool:
    """Whether ``s[i]`` is escaped: an odd run of backslashes right before it."""
    n = 0
    while i - n > 0 and s[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _whole_escapes(s: str, a: int, b: int) -> tuple[int, int]:
    r"""Widen [a, b) so it neither starts nor ends inside a backslash escape.

    The final sweep edits JSON files as raw text; masking the ``u001f`` of
    ``\u001f`` but not its backslash would leave an invalid escape. Only
    backslashes, escape letters and hex digits are taken in, never a marker.
    """
    if s[a] in _JSON_ESCAPED and _escaped(s, a):
        a -= 1
    if b < len(s) and s[b] in _JSON_ESCAPED and _escaped(s, b):
        b += 1
    for i in range(max(0, a - 5), a):  # a \uXXXX escape cut by the span's start
        if s[i : i + 2] == "\\u" and i + 6 > a and not _escaped(s, i) and _HEX4.fullmatch(s[i + 2 : i + 6]):
            a = i
            break
    for i in range(max(a, b - 5), b):  # a \uXXXX escape cut by the span's end
        if s[i : i + 2] == "\\u" and not _escaped(s, i) and _HEX4.fullmatch(s[i + 2 : i + 6]):
            b = max(b, i + 6)
    return a, b


def _splice(s: str, cuts: list[tuple[int, int, str]]) -> str:
    """`s` with each (start, end, pattern name) span replaced by its marker, in order."""
    parts, at = [], 0
    for a, b, name in cuts:
        if a < at:  # widened into the previous cut: merge
            a = at
        parts.append(s[at:a])
        if b > a:
            parts.append(marker(name))
        at = max(at, b)
    parts.append(s[at:])
    return "".join(parts)


def apply(rules: tuple[_Rule, ...], s: str, tally: Counter) -> str:
    """`s` with every rule applied until nothing changes; counts go to `tally` (pattern name -> spans)."""
    # Repeat until nothing changes, so redacting is idempotent even where a
    # marker changes what a later pattern sees. Every replacement turns
    # unmasked characters into a marker, so this ends (in practice after 2).
    while True:
        s, n = _one_pass(rules, s, tally)
        if n == 0:
            return s


#: Record fields that hold free text. `kind` is a closed vocabulary and
#: `session_id` follows the session's own id.
_RECORD_TEXT_FIELDS: tuple[str, ...] = tuple(
    f.name
    for f in fields(Record)
    if str(f.type).replace(" ", "") in ("str", "str|None", "Optional[str]") and f.name not in ("kind", "session_id")
)


@dataclass(frozen=True)
class Redactor:
    """Masks secrets in text, nested values and sessions.

    Parameters
    ----------
    patterns : tuple of Pattern
        Applied in order; empty when redaction is off.
    literals : frozenset of str
        Exact strings always masked as ``[REDACTED:env-secret]`` (values of
        secret environment variables), before any pattern.
    always : tuple of Pattern
        Applied after the literals and before `patterns`, whether redaction
        is on or not (`redactor` puts `URL_USERINFO` here): credentials, not
        personal data, so never part of what a report studies.
    names : frozenset of str
        Account names sessions told (`learn`): masked as whole words
        (``log-user-name``, after the patterns) and whole inside an encoded
        home (``-home-jo-ann-proj``, before them).
    """

    patterns: tuple[Pattern, ...] = ()
    literals: frozenset[str] = frozenset()
    always: tuple[Pattern, ...] = ()
    names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        """Keep patterns as tuples (the always-on ones not repeated) and drop empty literals."""
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "always", tuple(p for p in self.always if p not in self.patterns))
        # An empty literal would match between every two characters.
        object.__setattr__(self, "literals", frozenset(v for v in self.literals if v))
        object.__setattr__(self, "names", frozenset(v for v in self.names if v))

    @property
    def enabled(self) -> bool:
        """True when patterns are applied (redaction on)."""
        return bool(self.patterns)

    @property
    def active(self) -> bool:
        """True when anything at all can be masked (patterns, literals, the always-on patterns or learned names)."""
        return bool(self.patterns or self.literals or self.always or self.names)

    def rules(self) -> tuple[_Rule, ...]:
        """Compile the rules: literals, learned encoded homes, the always-on patterns, the patterns, learned names (cached)."""
        return _rules(self.always + self.patterns, self.literals, self.names)

    def text(self, s: str) -> str:
        """`s` with every match masked; `s` itself when nothing matches."""
        if not s or not self.active:
            return s
        return apply(self.rules(), s, Counter())

    def counts(self, s: str) -> dict[str, int]:
        """How many spans of `s` each pattern would mask (only names with a count)."""
        tally: Counter = Counter()
        if s and self.active:
            apply(self.rules(), s, tally)
        return dict(tally)

    def value(self, obj: Any) -> Any:
        """Redact every string inside dicts, lists, tuples and sets (keys too).

        Other types are returned unchanged, and so is any container in which
        nothing changed (the same object).
        """
        if not self.active:
            return obj
        return walk(obj, self.text)[0]

    def learn(self, sessions: Iterable[Session]) -> Redactor:
        """Return this redactor with the account names `sessions` tell added to `names` (itself when none is new).

        A log names its author's home in its cwd (``/Users/<user>/proj``), its source path or an encoded
        folder (``--Users-<user>-proj--``, ``__Users__<user>__proj``); the same name then turns up bare --
        ``ls -l`` owners, ``github.com/<user>/…`` -- where no path pattern sees it, and a name holding
        ``-`` or ``.`` (``jo-ann``) is several segments of an encoded folder. Learned only when the home
        patterns are in use (redaction on), and only personal names (`patterns.personal`). A run learns
        from all its sessions once, so every file masks every session's names the same way.
        """
        home = next((p for p in self.patterns if p.name == "home-user"), None)
        encoded = next((p for p in self.patterns if p.name == ENCODED_HOME), None)
        if home is None and encoded is None:
            return self
        found: set[str] = set()
        regexes = [re.compile(p.regex) for p in (home, encoded) if p is not None]

        def collect(v: str) -> str:
            for rx in regexes:
                found.update(m.group("secret") for m in rx.finditer(v))
            return v

        for s in sessions:
            walk(s.metadata, collect)
            collect(s.source_path or "")
        new = {n for n in found if personal(n)} - self.names
        return replace(self, names=self.names | new) if new else self

    def session(self, s: Session) -> Session:
        """Return a copy of `s` with every free-text field masked, with the names it tells learned (`learn`).

        Masked: the session id (and so every record's ``session_id``), its
        source path and metadata, and each record's text, entry id, tool,
        target, call id and timestamp. Ids are normally left as they are —
        they change only when they contain a match. Returns `s` itself when
        nothing changed.
        """
        if not self.active:
            return s
        text = self.learn([s]).text
        sid = text(s.id)
        changed = sid != s.id
        records = []
        for rec in s.records:
            upd: dict[str, Any] = {}  # field -> masked text; `replace` checks each key against its own field
            for name in _RECORD_TEXT_FIELDS:
                v = getattr(rec, name)
                if isinstance(v, str):
                    nv = text(v)
                    if nv != v:
                        upd[name] = nv
            if sid != s.id:
                upd["session_id"] = sid
            if upd:
                rec = replace(rec, **upd)
                changed = True
            records.append(rec)
        source_path = text(s.source_path) if s.source_path else s.source_path
        metadata, meta_changed = walk(s.metadata, text)
        if not (changed or meta_changed or source_path != s.source_path):
            return s
        return Session(
            id=sid,
            source_format=s.source_format,
            records=tuple(records),
            source_path=source_path,
            metadata=dict(metadata) if meta_changed else s.metadata,
        )


def walk(obj: Any, f: Callable[[str], str]) -> tuple[Any, bool]:
    """(redacted obj, whether anything changed); containers rebuilt only when changed."""
    if isinstance(obj, str):
        new = f(obj)
        return new, new != obj
    if isinstance(obj, Mapping):
        items, changed = [], False
        for k, v in obj.items():
            nk, ck = walk(k, f)
            nv, cv = walk(v, f)
            items.append((nk, nv))
            changed = changed or ck or cv
        if not changed:
            return obj, False
        try:
            return (type(obj)(items) if isinstance(obj, dict) and type(obj) is not dict else dict(items)), True
        except TypeError:  # dict subclasses with other constructors (defaultdict)
            return dict(items), True
    if isinstance(obj, (list, tuple, set, frozenset)):
        pairs = [walk(v, f) for v in obj]
        if not any(c for _, c in pairs):
            return obj, False
        vals = [v for v, _ in pairs]
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*vals), True
        try:
            return type(obj)(vals), True
        except TypeError:
            return (list(vals) if isinstance(obj, list) else tuple(vals)), True
    return obj, False


def redactor(
    enabled: bool,
    extra_patterns: str | Path | Iterable[Mapping] | None = None,
    environ: Mapping[str, str] | None = None,
    parameters: Any = None,
) -> Redactor:
    """Build the redactor for a run.

    Parameters
    ----------
    enabled : bool
        Apply the patterns (`load_patterns`, with `extra_patterns`).
    extra_patterns : path or list of mappings, optional
        More patterns (see `load_patterns`), read only when `enabled`.
    environ : mapping, optional
        Environment whose secret values are masked — always, even when not
        `enabled`. Default `os.environ`.
    parameters : mapping, optional
        The run's parameters: the credentials of every URL in them, in every
        form (`credentials.credentials_in`: the password decoded and
        percent-encoded, ``user:pass``, the ``Authorization: Basic`` base64)
        are masked as literals, always. Forms shorter than 8 characters are
        left to `URL_USERINFO` (they would mask ordinary text).

    Credentials in URLs (`URL_USERINFO`: ``https://user:pass@host``) are
    masked always too, so a model endpoint's base URL never reaches
    ``run.json``, a notebook or a report with its password -- nor, with
    `parameters`, an error an endpoint wrote quoting the Basic header.
    """
    patterns = load_patterns(extra_patterns) if enabled else ()
    credentials = frozenset(v for v in credentials_in(parameters) if len(v.strip()) >= MIN_SECRET_CHARS)
    return Redactor(patterns=patterns, literals=env_secret_values(environ) | credentials, always=(URL_USERINFO,))
