"""Redaction: mask secrets and personal data before a run folder is shared.

Reports are made from a person's own agent sessions, and those sessions hold
whatever passed through the terminal: API keys, tokens, e-mail addresses,
home-directory paths. Redaction replaces each such span with
``[REDACTED:<pattern name>]`` and is applied twice:

1. **At the source** — `Redactor.session` masks every imported session right
   after import, before anything is computed from it or saved, so tables,
   figures, notebooks and the archive are built from masked text.
2. **A final sweep** — `scrub_run_folder` rewrites every text file, parquet
   table and SQLite database of the run folder in place, catching anything
   that reached a file by another road (an error message, a parameter).
   `find_leaks` then checks raw bytes for known values.

Values of secret-looking environment variables (`env_secret_values`:
``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ...) are masked as
``[REDACTED:env-secret]`` in every run, **even with redaction off**: they are
never part of what a report studies.

What is masked
--------------
With redaction on, these patterns are applied in this order (each masks the
whole match unless noted; "token" means a run of letters, digits, ``_``/``-``
that is not part of a longer token):

``env-secret`` (always, also with redaction off)
    The exact value of every secret-looking environment variable.
``private-key``
    PEM private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to the
    matching END line, or the base64 lines after a BEGIN line when the END
    was cut off).
``jwt``
    JSON Web Tokens: ``eyJ...`` header, ``.eyJ...`` payload, ``.`` signature.
``anthropic-key``
    ``sk-ant-`` followed by at least 20 key characters.
``openai-key``
    ``sk-`` (including ``sk-proj-``, ``sk-svcacct-``) followed by at least 20
    key characters containing a digit or capital letter, so kebab-case words
    such as ``sk-learn`` never match.
``github-token``
    ``ghp_``, ``gho_``, ``ghs_``, ``ghu_``, ``ghr_`` + 30 or more
    characters, and fine-grained ``github_pat_`` tokens.
``aws-access-key-id``
    ``AKIA`` / ``ASIA`` + 16 capitals or digits.
``slack-token``
    ``xoxa-``, ``xoxb-``, ``xoxe-``, ``xoxp-``, ``xoxr-``, ``xoxs-`` tokens.
``google-api-key``
    ``AIza`` + 35 key characters.
``bearer-token``
    The token after ``Bearer`` (the word ``Bearer`` is kept): 8+ token
    characters with a digit, or any 20+, so "bearer authentication" stays.
``basic-auth``
    The credentials after ``Authorization: Basic``.
``url-password``
    The password in ``scheme://user:password@host`` (the user is kept).
``secret-assignment``
    The value (8+ characters) assigned to a key whose name ends in
    ``api_key``, ``apikey``, ``access_key``, ``private_key``, ``secret_key``,
    ``secret``, ``token``, ``password``, ``passwd`` or ``passphrase``, with
    ``=``, ``:``, ``:=`` or ``=>``: ``api_key=...``, ``"password": "..."``,
    ``GITHUB_TOKEN: ...``. The key is kept. Quoted values are always masked;
    unquoted ones only when they are not code (``os.environ[...]``,
    ``settings.API_KEY``, ``getpass()``), not a placeholder (``$VAR``,
    ``<your-key>``, ``{{ ... }}``) and contain a digit, a capital or a symbol.
    Key names such as ``max_tokens`` or ``tokenizer`` do not count.
``email``
    E-mail addresses (``git@host`` SSH remotes excepted).
``home-user``
    The user-name segment of ``/home/<user>``, ``/Users/<user>`` (macOS) and
    ``C:\\Users\\<user>``; the rest of the path stays readable:
    ``/home/[REDACTED:home-user]/proj/x.py``. ``/root``, ``/tmp`` and shared
    folders (``/Users/Shared``, ``C:\\Users\\Public``) are left alone.
``encoded-home-user``
    The user-name segment of a path encoded as a folder name, as Claude Code
    names its project folders (``~/.claude/projects/-home-alice-proj``,
    ``-Users-alice-proj``, ``C--Users-alice-proj``): the segment after
    ``-home-`` / ``-Users-`` up to the next ``-``. The encoding turns every
    non-alphanumeric character into ``-``, so a name such as ``jo-ann``
    cannot be told from the path after it; `Redactor.session` masks the
    whole encoded name when the session's own metadata (its ``cwd``) names
    the home directory.

and two patterns built at call time from the running account (`user_patterns`),
when its name is longer than two characters and not a generic account
(``root``, ``ubuntu``, ``runner``, ... see `GENERIC_ACCOUNTS`):

``home-dir``
    The last segment of the actual home directory, wherever it lives
    (``/work/alice`` -> ``/work/[REDACTED:home-dir]``).
``user-name``
    The login name as a whole word (case-sensitive), e.g. in
    ``alice@laptop`` prompts or ``-home-alice-proj`` folder names.

Extending
---------
A YAML file (profile parameter ``redact_patterns``) adds patterns: a list of
``{name, regex, description}`` mappings (or ``{patterns: [...]}``). A regex
with a named group ``secret`` masks only that group. Reusing a default
pattern's name replaces it; ``enabled: false`` drops it::

    - name: ticket-id
      regex: 'ACME-\\d{6}'
      description: internal ticket numbers
    - name: email
      enabled: false

Limits
------
The sweep edits JSON, notebooks and HTML as raw text. A mask never starts or
ends inside a backslash escape and never crosses a quote, so those files stay
valid (the tests check this on generated JSON). PNG figures cannot be
rewritten: they are listed as unscannable and rely on source-level redaction
(their data came from masked sessions). Patterns are heuristics: a secret
with no recognisable shape (a bare password in prose) is not found unless it
is the value of an environment variable or a custom pattern names it.
"""

from __future__ import annotations

import getpass
import html
import json
import os
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from compaction_lab.core.session import Record, Session

# --------------------------------------------------------------------------- patterns

#: Pattern names appear inside markers, so they are restricted to characters
#: the marker regex recognises (a marker is never masked again).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MARKER = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\]")
_MARKER_MAX = 80  # longest possible marker, with margin
_MARKER_PREFIX = "[REDACTED:"

ENV_SECRET = "env-secret"


def marker(name: str) -> str:
    """The replacement text for a span masked by pattern `name`."""
    return f"[REDACTED:{name}]"


@dataclass(frozen=True)
class Pattern:
    """One kind of secret or personal data, recognised by a regular expression.

    Parameters
    ----------
    name : str
        Short kebab-case name; the replacement is ``[REDACTED:<name>]``.
    regex : str
        A Python regular expression. If it has a named group ``secret``, only
        that group is masked (``Bearer <token>`` keeps ``Bearer``); otherwise
        the whole match is.
    description : str
        One line for the README and the run's record of what was masked.
    needles : tuple of str
        Literal strings at least one of which every match contains: a text
        holding none of them is not searched at all (a plain substring test
        is far faster than a regex that must try every position of a 50 MB
        tool output). Empty: always searched.
    """

    name: str
    regex: str
    description: str = ""
    needles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The name ends up inside a marker, and only well-formed markers are
        # recognised (and so never masked again).
        if not _NAME.match(self.name):
            raise ValueError(f"pattern name {self.name!r}: use 1-64 letters, digits, '_', '.', '-'")

    @property
    def replacement(self) -> str:
        return marker(self.name)


def _tok(lead: str, rest: str, base64: bool = False) -> str:
    """A token that starts with the literal `lead`, then `rest`.

    A token starts where no longer token continues to its left, or right
    after an escape such as ``\\n``: the final sweep reads JSON files as raw
    text, where a line break is the two characters backslash and n. A
    backslash itself is never a start, so a match cannot split an escape.
    With `base64`, ``+`` and ``/`` count as token characters too, so a key
    made only of letters and digits is not found inside a base64 image.
    The check sits *after* the literal so the regex engine can skip ahead to
    the literal: several times faster over megabytes of notebooks and HTML.
    """
    e = re.escape(lead)
    cls = r"A-Za-z0-9_+/\\-" if base64 else r"A-Za-z0-9_\\-"
    return rf"{e}(?:(?<![{cls}]{e})|(?<=\\[nrt]{e}))" + rest


# ... and ends where no token or base64 character follows (fixed-length keys).
_E = r"(?![A-Za-z0-9_+/-])"

# Quotes around keys and values, raw, JSON-escaped (\" or \\\") or HTML-escaped.
_Q = r"""(?:\\*["']|&quot;|&\#3[49];|&\#x2[27];)"""
# Characters of an unquoted value: anything but space, quotes, separators and brackets.
_V = r"""[^\s"'\\,;&<>(){}\[\]`]"""

_SECRET_ASSIGNMENT = rf"""(?x)
    # The key name ends in one of the keywords (not max_tokens, tokenizer). Its
    # first letter leads so the engine can skip ahead (several times faster).
    [AaPpSsTt](?i:(?<=[aA])(?:pi[_-]?key|pikey|ccess[_-]?key)
                 |(?<=[pP])(?:rivate[_-]?key|assword|asswd|assphrase)
                 |(?<=[sS])ecret(?:[_-]?key)?
                 |(?<=[tT])oken)
    (?![A-Za-z0-9])
    {_Q}?                             # closing quote of a quoted key
    [ \t]*(?::=|=>|[:=])[ \t]*
    {_Q}?                             # opening quote of the value
    (?![$<%{{]|\[REDACTED:)          # placeholders ($VAR, <key>, %(x)s, {{x}}) and markers
    (?P<secret>
        (?<=")[^"\\\n&<]{{8,}}               # "quoted value"
      | (?<=')[^'"\\\n&<]{{8,}}              # 'quoted value' (never past a ", so a
      | (?:(?<=&quot;)|(?<=&\#34;))[^"\\\n&<]{{8,}}   #  match stays in one JSON string)
      | (?:(?<=&\#39;)|(?<=&\#x27;))[^'"\\\n&<]{{8,}}
      | (?<!["';])                           # unquoted value:
        (?!(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*(?!{_V}))   # not a dotted name (os.environ)
        (?=[a-z_.]*[^a-z_.\s"'\\,;&<>(){{}}\[\]`])       # has a digit, capital or symbol
        (?=(?P<v>{_V}{{8,}}))(?P=v)          # the whole run (no backtracking into it) ...
        (?![(\[])                            # ... that is not a call or subscript
    )
"""

#: Patterns applied when redaction is on, in order (see the module docstring).
DEFAULT_PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        # The body never crosses a quote (escaped or not), so in a JSON file,
        # or JSON inside a JSON string, the match stays inside one string value.
        r"(?:(?:[^\"\\]|\\[^\"]){0,16000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\s|\\+[nrt])+[A-Za-z0-9+/]{16,}={0,2})*)",
        "PEM private key blocks (or the base64 lines after a BEGIN line whose END was cut off)",
    ),
    Pattern(
        "jwt",
        _tok("eyJ", r"[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
        "JSON Web Tokens (eyJ... header, .eyJ... payload, signature)",
    ),
    Pattern(
        "anthropic-key",
        _tok("sk-ant-", r"(?=[a-z_-]*[A-Z0-9])[A-Za-z0-9_-]{20,}"),
        "Anthropic API keys: sk-ant- + 20 or more key characters",
    ),
    Pattern(
        "openai-key",
        _tok("sk-", r"(?=[a-z_-]*[A-Z0-9])[A-Za-z0-9_-]{20,}"),
        "OpenAI-style API keys: sk- (sk-proj-, sk-svcacct-, ...) + 20 or more key characters "
        "with a digit or capital (sk-learn never matches)",
    ),
    Pattern(
        "github-token",
        _tok("g", r"(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"),
        "GitHub tokens: ghp_, gho_, ghs_, ghu_, ghr_ and github_pat_",
    ),
    Pattern(
        "aws-access-key-id",
        _tok("A", r"(?:KIA|SIA)[0-9A-Z]{16}", base64=True) + _E,
        "AWS access key ids: AKIA or ASIA + 16 capitals or digits",
    ),
    Pattern(
        "slack-token",
        _tok("xox", r"[abeprs]-(?=[A-Za-z-]*[0-9])[A-Za-z0-9-]{10,}"),
        "Slack tokens: xoxa-, xoxb-, xoxe-, xoxp-, xoxr-, xoxs-",
    ),
    Pattern(
        "google-api-key",
        _tok("AIza", r"[0-9A-Za-z_-]{35}", base64=True) + _E,
        "Google API keys: AIza + 35 key characters",
    ),
    Pattern(
        "bearer-token",
        r"[Bb](?:(?<![A-Za-z0-9\\][Bb])|(?<=\\[nrt][Bb]))(?i:earer)[ \t]+(?!\[REDACTED:)"
        r"(?P<secret>(?:(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}|[A-Za-z0-9._~+/-]{20,})=*)",
        "the token after 'Bearer' (the word is kept): 8+ characters with a digit, or any 20+",
    ),
    Pattern(
        "basic-auth",
        r"[Aa](?<![A-Za-z0-9][Aa])(?i:uthorization)\\*[\"']?[ \t]*[:=][ \t]*\\*[\"']?(?i:basic)[ \t]+"
        r"(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
        "the credentials after 'Authorization: Basic'",
    ),
    Pattern(
        "url-password",
        r"://[^\s/:@\"'<>\\]{1,128}:(?!\[REDACTED:)(?P<secret>[^\s/@\"'<>\\]{1,256})@",
        "the password in scheme://user:password@host (the user is kept)",
    ),
    Pattern(
        "secret-assignment",
        _SECRET_ASSIGNMENT,
        "the value (8+ characters) assigned to a key named *api_key, *secret, *token, *password, "
        '*passwd, *passphrase, *access_key, *private_key (api_key=..., "password": "..."); '
        "the key is kept",
    ),
    Pattern(
        "email",
        r"(?:(?<![\w.%+/\\-])|(?<=\\[nrt]))(?!git@)"
        r"[\w.%+-]{1,64}@[A-Za-z][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}"
        r"(?![A-Za-z0-9-])",
        "e-mail addresses (git@host SSH remotes excepted)",
        needles=("@",),
    ),
    Pattern(
        "home-user",
        # Led by '/' or ':' (the engine skips ahead to those), boundaries checked behind.
        r"(?:/(?:(?<![A-Za-z0-9_.+\\-]/)|(?<=\\[nrt]/))(?:home|Users)/(?!(?:Shared|Public|Guest)(?![\w.-]))"
        r"|:(?<=[A-Za-z]:)(?<![A-Za-z0-9][A-Za-z]:)(?:\\{1,4}|/)(?i:users)(?:\\{1,4}|/)"
        r"(?!(?i:public|default|all users|default user)(?![\w.-])))"
        r"(?!\[REDACTED:)(?P<secret>[\w.@$~-]+)",
        "the user-name segment of /home/<user>, /Users/<user> and C:\\Users\\<user> (the rest of the path is kept)",
    ),
    Pattern(
        "encoded-home-user",
        # Claude Code names a project folder after its cwd with every non-alphanumeric
        # character turned into '-': /home/alice/proj -> -home-alice-proj. The folder
        # leads the name (or follows C- on Windows), so the lead is checked behind.
        r"(?:^|(?<=[/\\])|(?<=^[A-Za-z]-)|(?<=[/\\][A-Za-z]-))-(?:home|Users)-"
        r"(?!(?:Shared|Public|Guest)(?![A-Za-z0-9_]))(?!\[REDACTED:)"
        r"(?P<secret>[A-Za-z0-9_]+)(?=[-/\\.]|$)",
        "the user-name segment of a cwd encoded as a folder name (Claude Code's "
        "~/.claude/projects/-home-<user>-proj); see Redactor.session for names holding '-'",
        needles=("-home-", "-Users-"),
    ),
)

#: Account names that identify no person (containers, CI runners, cloud
#: images); the running account is not masked when it has one of these.
GENERIC_ACCOUNTS: frozenset[str] = frozenset(
    {
        "root",
        "admin",
        "administrator",
        "user",
        "users",
        "guest",
        "nobody",
        "default",
        "public",
        "shared",
        "ubuntu",
        "debian",
        "centos",
        "fedora",
        "ec2-user",
        "azureuser",
        "runner",
        "vscode",
        "codespace",
        "codespaces",
        "jovyan",
        "node",
        "app",
        "www-data",
        "docker",
        "jenkins",
        "gitlab-runner",
        "circleci",
        "builder",
        "build",
        "ci",
        "travis",
        "vagrant",
    }
)


def user_patterns(home: str | Path | None = None, user: str | None = None) -> tuple[Pattern, ...]:
    """Patterns for the running account's home directory and login name.

    Parameters
    ----------
    home, user : optional
        Defaults: `Path.home()` and `getpass.getuser()`, read now (never
        hard-coded). Pass ``""`` to leave one out.

    Returns
    -------
    tuple of Pattern
        ``home-dir`` (the home directory's last segment, wherever the home
        lives) and ``user-name`` (the login name as a whole word), each only
        when the name is longer than two characters and not in
        `GENERIC_ACCOUNTS`; ``/root`` and homes under ``/tmp`` give nothing.
    """
    if home is None:
        try:
            home = Path.home()
        except (RuntimeError, KeyError, OSError):
            home = ""
    if user is None:
        try:
            user = getpass.getuser()
        except (OSError, KeyError, ImportError):
            user = ""
    out: list[Pattern] = []
    home_s = str(home).rstrip("/\\")
    cut = max(home_s.rfind("/"), home_s.rfind("\\"))
    parent, leaf = home_s[: cut + 1], home_s[cut + 1 :]
    if _personal(leaf) and cut >= 0 and not home_s.startswith("/tmp/"):
        out.append(
            Pattern(
                "home-dir",
                re.escape(parent) + r"(?P<secret>" + re.escape(leaf) + r")(?![\w.-])",
                "the last segment of the running account's home directory",
            )
        )
    if user and _personal(user):
        u = re.escape(user)
        out.append(
            Pattern(
                "user-name",
                # The name leads (fast to find); the word boundary is checked behind it.
                rf"{u}(?:(?<![\w\\]{u})|(?<=\\[nrt]{u}))(?!\w)",
                "the running account's login name as a whole word",
            )
        )
    return tuple(out)


def _personal(name: str) -> bool:
    return len(name) > 2 and name.lower() not in GENERIC_ACCOUNTS


def load_patterns(extra: str | Path | Iterable[Mapping] | None = None, *, user: bool = True) -> tuple[Pattern, ...]:
    """`DEFAULT_PATTERNS`, the running account's patterns, and patterns from a YAML file.

    Parameters
    ----------
    extra : path or list of mappings, optional
        YAML file: a list of ``{name, regex, description}`` mappings (or a
        mapping with such a list under ``patterns``); the list itself is
        accepted too (a profile may hold it inline). A mapping whose name is
        already taken replaces that pattern in place; ``enabled: false``
        drops it.
    user : bool
        Include `user_patterns()` (home directory and login name, read now).

    Raises
    ------
    ValueError
        A malformed entry or a regex that does not compile, naming the file
        and the pattern.
    """
    pats = list(DEFAULT_PATTERNS) + (list(user_patterns()) if user else [])
    if extra is None or (isinstance(extra, str) and not extra):
        return tuple(pats)
    if isinstance(extra, (str, Path)):
        import yaml

        path = Path(extra)
        entries = _entries(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
    else:
        entries = _entries(list(extra), "redaction patterns")
    for entry, enabled in entries:
        at = next((i for i, p in enumerate(pats) if p.name == entry.name), None)
        if not enabled:
            if at is not None:
                del pats[at]
        elif at is None:
            pats.append(entry)
        else:
            pats[at] = entry
    return tuple(pats)


def _entries(doc: Any, origin: str) -> list[tuple[Pattern, bool]]:
    """(pattern, enabled) for each entry of a parsed pattern file; errors name `origin`."""
    if isinstance(doc, Mapping):
        doc = doc.get("patterns")
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise ValueError(f"{origin}: expected a list of {{name, regex, description}} mappings")
    out = []
    for i, item in enumerate(doc):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ValueError(f"{origin}: entry {i} is not a mapping with a 'name'")
        name = item["name"]
        if not _NAME.match(name):
            raise ValueError(f"{origin}: pattern {name!r}: names may hold only letters, digits, '_', '.', '-'")
        if item.get("enabled", True) is False:
            out.append((Pattern(name, "", ""), False))
            continue
        regex = item.get("regex")
        if not isinstance(regex, str) or not regex:
            raise ValueError(f"{origin}: pattern {name!r} has no 'regex'")
        try:
            re.compile(regex)
        except re.error as exc:
            raise ValueError(f"{origin}: pattern {name!r}: bad regex {regex!r}: {exc}") from exc
        out.append((Pattern(name, regex, str(item.get("description") or "")), True))
    return out


# --------------------------------------------------------------------------- environment

#: Environment variable names whose values are secrets.
_SECRET_ENV_NAME = re.compile(r"API_?KEY|_KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def env_secret_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Values of environment variables whose names look secret.

    A name counts when it contains ``API_KEY`` (or ``APIKEY``), ``TOKEN``,
    ``SECRET``, ``PASSWORD``, ``PASSWD`` or ``CREDENTIAL``, or ends in
    ``_KEY``. Only values of at least 8 characters (after stripping) are
    returned: shorter ones (``true``, ``0``) would mask ordinary text.

    Parameters
    ----------
    environ : mapping, optional
        Default `os.environ`.
    """
    env = os.environ if environ is None else environ
    out = set()
    for key, value in env.items():
        if isinstance(value, str) and _SECRET_ENV_NAME.search(key):
            v = value.strip()
            if len(v) >= 8:
                out.add(v)
    return frozenset(out)


# --------------------------------------------------------------------------- redactor


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
    """Widen [a, b) so it neither starts nor ends inside a backslash escape.

    The final sweep edits JSON files as raw text; masking the ``u001f`` of
    ``\\u001f`` but not its backslash would leave an invalid escape. Only
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


def _apply(rules: tuple[_Rule, ...], s: str, tally: Counter) -> str:
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
    """

    patterns: tuple[Pattern, ...] = ()
    literals: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns))
        # An empty literal would match between every two characters.
        object.__setattr__(self, "literals", frozenset(v for v in self.literals if v))

    @property
    def enabled(self) -> bool:
        """True when patterns are applied (redaction on)."""
        return bool(self.patterns)

    @property
    def active(self) -> bool:
        """True when anything at all can be masked (patterns or literals)."""
        return bool(self.patterns or self.literals)

    def _rules(self) -> tuple[_Rule, ...]:
        return _rules(self.patterns, self.literals)

    def text(self, s: str) -> str:
        """`s` with every match masked; `s` itself when nothing matches."""
        if not s or not self.active:
            return s
        return _apply(self._rules(), s, Counter())

    def counts(self, s: str) -> dict[str, int]:
        """How many spans of `s` each pattern would mask (only names with a count)."""
        tally: Counter = Counter()
        if s and self.active:
            _apply(self._rules(), s, tally)
        return dict(tally)

    def value(self, obj: Any) -> Any:
        """Redact every string inside dicts, lists, tuples and sets (keys too).

        Other types are returned unchanged, and so is any container in which
        nothing changed (the same object).
        """
        if not self.active:
            return obj
        return _walk(obj, self.text)[0]

    def session(self, s: Session) -> Session:
        """A copy of `s` with every free-text field masked.

        Masked: the session id (and so every record's ``session_id``), its
        source path and metadata, and each record's text, entry id, tool,
        target, call id and timestamp. Ids are normally left as they are —
        they change only when they contain a match. Returns `s` itself when
        nothing changed.
        """
        if not self.active:
            return s
        sid = self.text(s.id)
        changed = sid != s.id
        records = []
        for rec in s.records:
            upd: dict[str, Any] = {}  # field -> masked text; `replace` checks each key against its own field
            for name in _RECORD_TEXT_FIELDS:
                v = getattr(rec, name)
                if isinstance(v, str):
                    nv = self.text(v)
                    if nv != v:
                        upd[name] = nv
            if sid != s.id:
                upd["session_id"] = sid
            if upd:
                rec = replace(rec, **upd)
                changed = True
            records.append(rec)
        source_path = self.text(self._encoded_homes(s, s.source_path)) if s.source_path else s.source_path
        metadata, meta_changed = _walk(s.metadata, self.text)
        if not (changed or meta_changed or source_path != s.source_path):
            return s
        return Session(
            id=sid,
            source_format=s.source_format,
            records=tuple(records),
            source_path=source_path,
            metadata=dict(metadata) if meta_changed else s.metadata,
        )

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

        _walk(s.metadata, collect)
        for name in sorted(names, key=len, reverse=True):
            enc = re.sub(r"[^A-Za-z0-9]", "-", name)
            if "-" in enc:  # one segment is masked by the pattern itself
                path = re.sub(
                    rf"(-(?:home|Users)-){re.escape(enc)}(?=[-/\\]|$)",
                    lambda m: m.group(1) + marker(encoded.name),
                    path,
                )
        return path


def _walk(obj: Any, f: Callable[[str], str]) -> tuple[Any, bool]:
    """(redacted obj, whether anything changed); containers rebuilt only when changed."""
    if isinstance(obj, str):
        new = f(obj)
        return new, new != obj
    if isinstance(obj, Mapping):
        items, changed = [], False
        for k, v in obj.items():
            nk, ck = _walk(k, f)
            nv, cv = _walk(v, f)
            items.append((nk, nv))
            changed = changed or ck or cv
        if not changed:
            return obj, False
        try:
            return (type(obj)(items) if isinstance(obj, dict) and type(obj) is not dict else dict(items)), True
        except TypeError:  # dict subclasses with other constructors (defaultdict)
            return dict(items), True
    if isinstance(obj, (list, tuple, set, frozenset)):
        pairs = [_walk(v, f) for v in obj]
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
) -> Redactor:
    """The redactor for a run.

    Parameters
    ----------
    enabled : bool
        Apply the patterns (`load_patterns`, with `extra_patterns`).
    extra_patterns : path or list of mappings, optional
        More patterns (see `load_patterns`), read only when `enabled`.
    environ : mapping, optional
        Environment whose secret values are masked — always, even when not
        `enabled`. Default `os.environ`.
    """
    patterns = load_patterns(extra_patterns) if enabled else ()
    return Redactor(patterns=patterns, literals=env_secret_values(environ))


# --------------------------------------------------------------------------- run folders

#: Suffixes rewritten as UTF-8 text.
TEXT_SUFFIXES: frozenset[str] = frozenset(
    {
        ".json",
        ".jsonl",
        ".ipynb",
        ".html",
        ".htm",
        ".md",
        ".txt",
        ".csv",
        ".tsv",
        ".svg",
        ".yaml",
        ".yml",
        ".log",
        ".xml",
        ".toml",
        ".ini",
        ".cfg",
        ".py",
        ".js",
        ".css",
        ".rst",
        ".tex",
        ".sh",
        ".out",
        ".err",
    }
)
PARQUET_SUFFIXES: frozenset[str] = frozenset({".parquet"})
SQLITE_SUFFIXES: frozenset[str] = frozenset({".sqlite", ".sqlite3", ".db"})
#: Suffixes known to be binary; other unknown files are sniffed.
BINARY_SUFFIXES: frozenset[str] = frozenset(
    {
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".bmp",
        ".tif",
        ".tiff",
        ".ico",
        ".pdf",
        ".zip",
        ".gz",
        ".bz2",
        ".xz",
        ".zst",
        ".tar",
        ".whl",
        ".pkl",
        ".pickle",
        ".npy",
        ".npz",
        ".feather",
        ".arrow",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
    }
)
_SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_PARQUET_MAGIC = b"PAR1"
_TMP = ".redact-tmp"


@dataclass(frozen=True)
class ScrubReport:
    """What `scrub_run_folder` did.

    Parameters
    ----------
    files_scanned : int
        Text, parquet and SQLite files read.
    files_changed : tuple of str
        Run-folder-relative paths of the files rewritten.
    replacements : int
        Spans masked across all files.
    unscannable : tuple of str
        Files that cannot be rewritten (PNG figures, other binaries, symbolic
        links, databases with contentless full-text indexes); they rely on
        source-level redaction.
    """

    files_scanned: int
    files_changed: tuple[str, ...]
    replacements: int
    unscannable: tuple[str, ...]


def _file_kind(path: Path) -> str:
    """``text``, ``parquet``, ``sqlite``, ``sidecar`` or ``binary``."""
    suffix = path.suffix.lower()
    if any(path.name.endswith(s) for s in _SQLITE_SIDECARS):
        return "sidecar"
    if suffix in SQLITE_SUFFIXES:
        return "sqlite"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in BINARY_SUFFIXES:
        return "binary"
    with open(path, "rb") as fh:
        head = fh.read(8192)
    if head.startswith(_SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    if b"\x00" in head:
        return "binary"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the 8 KB window is still text.
        if exc.start < len(head) - 4:
            return "binary"
    return "text"


def _files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.rglob("*") if p.is_file() or p.is_symlink())


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}{_TMP}")
    try:
        tmp.write_bytes(data)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _file_redactor(r: Redactor) -> Redactor:
    """`r` plus the JSON- and HTML-escaped forms of its literals, as files hold them."""
    extra = set()
    for v in r.literals:
        extra.add(json.dumps(v)[1:-1])
        extra.add(json.dumps(v, ensure_ascii=False)[1:-1])
        extra.add(html.escape(v))
    return replace(r, literals=r.literals | frozenset(extra))


def scrub_run_folder(run_dir: Path, r: Redactor) -> ScrubReport:
    """Mask every match in the files of a run folder, in place.

    * Text files (`TEXT_SUFFIXES`, and unknown files that sniff as UTF-8) are
      rewritten as raw text: JSON and notebooks stay valid because a marker
      holds no quote or backslash and no match splits an escape.
    * Parquet files: every string value (also inside lists, structs and
      maps), column names and schema metadata; rewritten only when changed.
    * SQLite files: every TEXT value of ordinary tables and of full-text
      (FTS3/4/5) tables. Shadow tables of full-text tables are skipped;
      instead each full-text index is rebuilt so no old token survives, and
      the database is VACUUMed so old text does not linger in free pages.
    * Everything is written atomically (a temporary file, then a rename).

    Parameters
    ----------
    run_dir : path
    r : Redactor
        Nothing is read when it masks nothing (redaction off and no secret
        environment values).
    """
    run_dir = Path(run_dir)
    if not r.active:
        return ScrubReport(0, (), 0, ())
    fr = _file_redactor(r)
    scanned, replacements = 0, 0
    changed: list[str] = []
    unscannable: list[str] = []
    rel = lambda p: p.relative_to(run_dir).as_posix()  # noqa: E731

    # Databases first: rewriting one removes its -wal / -shm side files.
    files = [p for p in _files(run_dir) if not p.name.endswith(_TMP)]
    kinds = {p: ("link" if p.is_symlink() else _file_kind(p)) for p in files}
    for p in [p for p in files if kinds[p] == "sqlite"]:
        n, lossy = _scrub_sqlite(p, fr)
        scanned += 1
        if n:
            replacements += n
            changed.append(rel(p))
        if lossy:
            unscannable.append(rel(p))
    for p in files:
        kind = kinds[p]
        if kind == "sqlite":
            continue
        if not p.exists() and not p.is_symlink():  # a side file removed above
            continue
        if kind == "sidecar":
            db = p.with_name(next(p.name[: -len(s)] for s in _SQLITE_SIDECARS if p.name.endswith(s)))
            if db in kinds:
                continue  # its database was rewritten with it merged
            kind = "binary"
        if kind in ("binary", "link"):
            unscannable.append(rel(p))
            continue
        n = _scrub_parquet(p, fr) if kind == "parquet" else _scrub_text(p, fr)
        scanned += 1
        if n:
            replacements += n
            changed.append(rel(p))
    return ScrubReport(scanned, tuple(sorted(changed)), replacements, tuple(sorted(unscannable)))


def _scrub_text(path: Path, r: Redactor) -> int:
    data = path.read_bytes()
    s = data.decode("utf-8", "surrogateescape")  # keeps bytes that are not UTF-8 as they were
    tally: Counter = Counter()
    out = _apply(r._rules(), s, tally)
    if not tally:
        return 0
    _atomic_write(path, out.encode("utf-8", "surrogateescape"))
    return sum(tally.values())


# ------------------------------------------------------------------ parquet


def _has_string(t) -> bool:
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_string(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_string(t.value_type)
    if pa.types.is_map(t):
        return _has_string(t.key_type) or _has_string(t.item_type)
    if pa.types.is_struct(t):
        return any(_has_string(t.field(i).type) for i in range(t.num_fields))
    return False


def _scrub_parquet(path: Path, r: Redactor) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rules = r._rules()
    tally: Counter = Counter()
    red = lambda s: _apply(rules, s, tally)  # noqa: E731
    table = pq.read_table(path)
    columns, fields_ = [], []
    for i, field in enumerate(table.schema):
        col = table.column(i)
        if _has_string(field.type):
            before = sum(tally.values())
            if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
                # Redact each distinct value once, then map the column through.
                uniq = pc.unique(col).drop_null()
                vals = uniq.to_pylist()
                new = [red(v) for v in vals]
                if new != vals:
                    col = pa.array(new, type=field.type).take(pc.index_in(col, value_set=uniq))
            else:
                new_vals, ch = _walk(col.to_pylist(), red)
                if ch:
                    col = pa.array(new_vals, type=field.type)
            if sum(tally.values()) == before:
                col = table.column(i)
        name = red(field.name)
        fields_.append(field.with_name(name) if name != field.name else field)
        columns.append(col)
    meta = table.schema.metadata or {}
    new_meta = {}
    for k, v in meta.items():
        nv = red(v.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        new_meta[k] = nv
    if not tally:
        return 0
    out = pa.Table.from_arrays(columns, schema=pa.schema(fields_, metadata=new_meta or None))
    md = pq.ParquetFile(path).metadata
    compression = "snappy"
    if md.num_row_groups and md.num_columns:
        compression = md.row_group(0).column(0).compression.lower()
        if compression not in ("snappy", "gzip", "brotli", "zstd", "lz4", "none", "uncompressed"):
            compression = "snappy"
    tmp = path.with_name(f".{path.name}{_TMP}")
    try:
        pq.write_table(out, tmp, compression=compression)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return sum(tally.values())


def _parquet_strings(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for k, v in (table.schema.metadata or {}).items():
        yield k.decode("utf-8", "replace")
        yield v.decode("utf-8", "replace")
    for i, field in enumerate(table.schema):
        yield field.name
        if _has_string(field.type):
            yield from _strings(table.column(i).to_pylist())


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


# ------------------------------------------------------------------ sqlite

_FTS = re.compile(r"\busing\s+fts[345]\b", re.IGNORECASE)
_FTS_CONTENT = re.compile(r"\bcontent\s*=\s*(?:'([^']*)'|\"([^\"]*)\"|([A-Za-z0-9_]*))", re.IGNORECASE)
#: Shadow tables of FTS3/4 and FTS5 tables: maintained by the virtual table itself.
_FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config", "_segments", "_segdir", "_stat")


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _scrub_sqlite(path: Path, r: Redactor) -> tuple[int, bool]:
    """(spans masked, whether a contentless full-text index could not be cleaned)."""
    # Work on a copy (the backup API merges any WAL), replace the original
    # only when something changed.
    tmp = path.with_name(f".{path.name}{_TMP}")
    tmp.unlink(missing_ok=True)
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    rules = r._rules()
    tally: Counter = Counter()
    lossy = False
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            master = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            virtual = {n: sql or "" for n, sql in master if (sql or "").upper().startswith("CREATE VIRTUAL")}
            fts = {n: sql for n, sql in virtual.items() if _FTS.search(sql)}
            shadows = {f"{n}{s}" for n in virtual for s in _FTS_SHADOWS}
            rebuild: list[str] = []
            for name, sql in master:
                if name in shadows or (name in virtual and name not in fts):
                    continue
                if name in fts:
                    content = _fts_content(sql)
                    if content == "":  # contentless: the text is gone, only its tokens remain
                        lossy = True
                        continue
                    rebuild.append(name)
                    if content is not None:  # external content: the content table is scrubbed itself
                        continue
                _scrub_table(conn, name, sql or "", lambda s: _apply(rules, s, tally))
            if tally:
                # A rebuild drops every old index segment, so no token of a
                # masked value survives in the index.
                for name in rebuild:
                    conn.execute(f"INSERT INTO {_qi(name)}({_qi(name)}) VALUES('rebuild')")
            conn.commit()
            if tally:
                conn.execute("VACUUM")
        finally:
            conn.close()
        if tally:
            shutil.copymode(path, tmp)
            os.replace(tmp, path)
            for s in _SQLITE_SIDECARS:  # stale side files would be replayed onto the new file
                path.with_name(path.name + s).unlink(missing_ok=True)
    finally:
        tmp.unlink(missing_ok=True)
        for s in _SQLITE_SIDECARS:
            tmp.with_name(tmp.name + s).unlink(missing_ok=True)
    return sum(tally.values()), lossy


def _fts_content(sql: str) -> str | None:
    """The ``content=`` option of a full-text table: None when absent (own content)."""
    m = _FTS_CONTENT.search(sql)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def _scrub_table(conn: sqlite3.Connection, name: str, sql: str, red: Callable[[str], str]) -> None:
    info = conn.execute(f"PRAGMA table_info({_qi(name)})").fetchall()
    cols = [row[1] for row in info]
    if not cols:
        return
    if re.search(r"\bWITHOUT\s+ROWID\b", sql, re.IGNORECASE):
        keys = [row[1] for row in sorted(info, key=lambda row: row[5]) if row[5] > 0]
    else:
        keys = ["rowid"]
    select = ", ".join(_qi(k) if k != "rowid" else "rowid" for k in keys) + ", " + ", ".join(map(_qi, cols))
    where = " AND ".join(f"{_qi(k) if k != 'rowid' else 'rowid'} = ?" for k in keys)
    updates = []
    for row in conn.execute(f"SELECT {select} FROM {_qi(name)}"):
        key, vals = row[: len(keys)], row[len(keys) :]
        new = {}
        for c, v in zip(cols, vals, strict=False):
            if isinstance(v, str):
                nv = red(v)
                if nv != v:
                    new[c] = nv
        if new:
            updates.append((new, key))
    for new, key in updates:
        sets = ", ".join(f"{_qi(c)} = ?" for c in new)
        try:
            conn.execute(f"UPDATE {_qi(name)} SET {sets} WHERE {where}", [*new.values(), *key])
        except sqlite3.IntegrityError as exc:
            raise RuntimeError(
                f"redacting table {name!r} makes two rows equal ({exc}); the values differ only in what was masked"
            ) from exc


# --------------------------------------------------------------------------- leak check


def _needle_forms(needle: str) -> set[bytes]:
    return {
        needle.encode("utf-8"),
        json.dumps(needle)[1:-1].encode("utf-8"),
        json.dumps(needle, ensure_ascii=False)[1:-1].encode("utf-8"),
        html.escape(needle).encode("utf-8"),
    }


def find_leaks(run_dir: Path, needles: Iterable[str]) -> list[tuple[str, str]]:
    """Where known secret values still occur in a run folder.

    Every file is searched as raw bytes (UTF-8, plus the JSON- and
    HTML-escaped forms of each needle), binary ones and databases included.
    Parquet files are also decoded, since their pages may be compressed:
    every string value, column name and metadata entry is searched.

    Returns
    -------
    list of (relative path, needle)
        Sorted; empty when nothing leaks.
    """
    run_dir = Path(run_dir)
    wanted = [(n, _needle_forms(n)) for n in dict.fromkeys(needles) if n]
    found: set[tuple[str, str]] = set()
    if not wanted:
        return []
    for p in _files(run_dir):
        if not p.is_file():
            continue
        rel = p.relative_to(run_dir).as_posix()
        data = p.read_bytes()
        for needle, forms in wanted:
            if any(f in data for f in forms):
                found.add((rel, needle))
        if data.startswith(_PARQUET_MAGIC) or p.suffix.lower() in PARQUET_SUFFIXES:
            try:
                strings = list(_parquet_strings(p))
            except Exception:  # not readable as parquet: the raw search above stands
                continue
            for needle, _ in wanted:
                if any(needle in s for s in strings):
                    found.add((rel, needle))
    return sorted(found)
