"""The redaction engine: `Redactor` masks text, nested values and sessions with patterns and literals.

Reports are made from a person's own agent sessions; `Redactor.session` masks
every imported session right after import, before anything is computed from
it or saved. `redactor` builds the one a run uses.
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

__all__ = ["LOG_USER_MARKER", "Redactor", "apply", "redactor", "walk"]

#: What a log author's account name becomes wherever the session shows it bare (`Redactor.session`).
LOG_USER_MARKER = marker("log-user-name")

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


@lru_cache(maxsize=64)
def _rules(patterns: tuple[Pattern, ...], literals: frozenset[str]) -> tuple[_Rule, ...]:
    rules = []
    if literals:
        # Longest first, so a value that contains another is masked whole.
        alt = "|".join(re.escape(v) for v in sorted(literals, key=lambda v: (-len(v), v)))
        rules.append(_Rule(ENV_SECRET, re.compile(alt), False))
    for p in patterns:
        rx = re.compile(p.regex)
        rules.append(_Rule(p.name, rx, "secret" in rx.groupindex, p.needles))
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
    """

    patterns: tuple[Pattern, ...] = ()
    literals: frozenset[str] = frozenset()
    always: tuple[Pattern, ...] = ()

    def __post_init__(self) -> None:
        """Keep patterns as tuples (the always-on ones not repeated) and drop empty literals."""
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "always", tuple(p for p in self.always if p not in self.patterns))
        # An empty literal would match between every two characters.
        object.__setattr__(self, "literals", frozenset(v for v in self.literals if v))

    @property
    def enabled(self) -> bool:
        """True when patterns are applied (redaction on)."""
        return bool(self.patterns)

    @property
    def active(self) -> bool:
        """True when anything at all can be masked (patterns, literals or the always-on patterns)."""
        return bool(self.patterns or self.literals or self.always)

    def rules(self) -> tuple[_Rule, ...]:
        """Compile the rules: literals first, then the always-on patterns, then the patterns in order (cached)."""
        return _rules(self.always + self.patterns, self.literals)

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

    def session(self, s: Session) -> Session:
        """Return a copy of `s` with every free-text field masked.

        Masked: the session id (and so every record's ``session_id``), its
        source path and metadata, and each record's text, entry id, tool,
        target, call id and timestamp. Ids are normally left as they are —
        they change only when they contain a match. Returns `s` itself when
        nothing changed.
        """
        if not self.active:
            return s
        names = self._log_users(s)
        text = self.text if names is None else (lambda v: names.sub(LOG_USER_MARKER, self.text(v)))
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
        source_path = text(self._encoded_homes(s, s.source_path)) if s.source_path else s.source_path
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

    def _log_users(self, s: Session) -> re.Pattern[str] | None:
        """Build one whole-word regex of the accounts whose homes the session's metadata and source path show.

        A log names its author's home in its cwd (``/Users/<user>/proj``) or an encoded folder
        (``--Users-<user>-proj--``); the same name then turns up bare — ``ls -l`` owners,
        ``github.com/<user>/…`` — where no path pattern sees it. Once the session tells the name, every
        whole-word occurrence in it is masked (``log-user-name``), as the running account's own name is.
        None when the home patterns are not in use or the session names no personal account.
        """
        home = next((p for p in self.patterns if p.name == "home-user"), None)
        encoded = next((p for p in self.patterns if p.name == "encoded-home-user"), None)
        if home is None and encoded is None:
            return None
        found: set[str] = set()
        regexes = [re.compile(p.regex) for p in (home, encoded) if p is not None]

        def collect(v: str) -> str:
            for rx in regexes:
                found.update(m.group("secret") for m in rx.finditer(v))
            return v

        walk(s.metadata, collect)
        collect(s.source_path or "")
        names = sorted((n for n in found if personal(n)), key=lambda n: (-len(n), n))
        if not names:
            return None
        return re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])")

    def _encoded_homes(self, s: Session, path: str) -> str:
        """`path` with the whole encoded home of every user the session's metadata names masked.

        ``encoded-home-user`` masks one ``-``-free segment; a user name holding
        ``-`` or ``.`` (``jo-ann``, ``j.doe``) is encoded as several. The
        session's own ``cwd`` (``/home/jo-ann/proj``) tells the real name, so
        its encoded form is masked whole in the source path.
        """
        home = next((p for p in self.patterns if p.name == "home-user"), None)
        encoded = next((p for p in self.patterns if p.name == "encoded-home-user"), None)
        if home is None or encoded is None or not path:
            return path
        names: set[str] = set()
        home_regex = home.regex

        def collect(v: str) -> str:
            names.update(m.group("secret") for m in re.finditer(home_regex, v))
            return v

        walk(s.metadata, collect)
        for name in sorted(names, key=len, reverse=True):
            enc = re.sub(r"[^A-Za-z0-9]", "-", name)
            if "-" in enc:  # one segment is masked by the pattern itself
                path = re.sub(
                    rf"(-(?:home|Users)-){re.escape(enc)}(?=[-/\\]|$)",
                    lambda m: m.group(1) + marker(encoded.name),
                    path,
                )
        return path


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
