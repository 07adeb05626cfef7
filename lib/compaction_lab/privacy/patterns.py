"""The pattern catalogue: what redaction recognises as a secret or personal data, and how a profile adds to it.

Each `Pattern` names one kind of secret; the span it matches is replaced by
``[REDACTED:<pattern name>]`` (`marker`). `DEFAULT_PATTERNS` is the built-in
catalogue (applied in order), `user_patterns` adds the running account
(`GENERIC_ACCOUNTS` are skipped), `load_patterns` a YAML file (profile
parameter ``redact_patterns``). `URL_USERINFO` masks URL credentials in every run.

Design (every pattern, what it matches, how to extend): docs/architecture.md#redaction-patterns
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PATTERNS",
    "GENERIC_ACCOUNTS",
    "URL_USERINFO",
    "URL_USERINFO_REGEX",
    "Pattern",
    "load_patterns",
    "marker",
    "personal",
    "user_patterns",
]


#: Pattern names appear inside markers, so they are restricted to characters
#: the marker regex recognises (a marker is never masked again).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def marker(name: str) -> str:
    """Return the replacement text for a span masked by pattern `name`."""
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
        """Refuse a name that would not make a well-formed marker."""
        # The name ends up inside a marker, and only well-formed markers are
        # recognised (and so never masked again).
        if not _NAME.match(self.name):
            raise ValueError(f"pattern name {self.name!r}: use 1-64 letters, digits, '_', '.', '-'")

    @property
    def replacement(self) -> str:
        """The text a masked span becomes: ``[REDACTED:<name>]``."""
        return marker(self.name)


def _tok(lead: str, rest: str, base64: bool = False) -> str:
    r"""Build the regex of a token that starts with the literal `lead`, then `rest`.

    A token starts where no longer token continues to its left, or right
    after an escape such as ``\n``: the final sweep reads JSON files as raw
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
        # character turned into '-': /home/alice/proj -> -home-alice-proj, C:\Users\alice\proj ->
        # C--Users-alice-proj; pi wraps the same encoding in two more dashes: --home-alice-proj--,
        # --C--Users-alice-proj--. The folder leads a path segment or a value (after a quote, a
        # space, '=' or ':'), so the lead is checked behind; a value led by '--' must also end with
        # '--' (pi's), so a command-line option such as --home-dir is not one.
        # SWE-agent writes a path as one folder name with each '/' turned into '__':
        # /Users/alice/proj -> __Users__alice__proj (its segment ends at the next '__').
        r"(?:(?:^|(?<=[/\\\s\"'=:]))(?:--)?[A-Za-z]--(?:home|Users)-"
        r"|(?:^|(?<=[/\\]))-?-(?:home|Users)-"
        r"|(?<=[\s\"'=:])-(?:home|Users)-"
        r"|(?<=[\s\"'=:])--(?:home|Users)-(?=[A-Za-z0-9_-]*?--(?![A-Za-z0-9]))"
        r"|(?:^|(?<=[/\\\s\"'=:]))__(?:home|Users)__)"
        r"(?!(?:Shared|Public|Guest)(?![A-Za-z0-9]))(?!\[REDACTED:)"
        r"(?P<secret>[A-Za-z0-9_]+?)(?=__|[-/\\.\s\"']|$)",
        "the user-name segment of a cwd encoded as a folder name (Claude Code's "
        "~/.claude/projects/-home-<user>-proj and C--Users-<user>-proj, pi's sessions/--home-<user>-proj-- "
        "and --C--Users-<user>-proj--, SWE-agent's /__Users__<user>__proj); see Redactor.session for names "
        "holding '-'",
        needles=("-home-", "-Users-", "__home__", "__Users__"),
    ),
)

# Characters that end a URL's authority (or cannot be in its userinfo): the userinfo runs to the last
# ``@`` before one of them, as `urllib.parse.urlsplit` reads it.
_NOT_USERINFO = r"""\s/?#"'<>\\`()\[\]{}|^,;"""

#: The userinfo of a URL (named group ``secret``): any for http/https, one holding a ``:`` for other
#: schemes. Already masked (``***@``, a marker): no match. It starts with the literal ``://`` (the scheme's
#: last character is checked by a lookbehind after it): a pattern led by a literal lets the engine jump
#: from one ``://`` to the next, where a leading lookbehind was tried at every character (20x slower on
#: a run folder's notebooks, the final sweep's largest files).
URL_USERINFO_REGEX = (
    r"://(?<=[A-Za-z0-9+.-]://)(?!\*\*\*@|\[REDACTED:)"
    r"(?:(?<=[Hh][Tt][Tt][Pp]://)|(?<=[Hh][Tt][Tt][Pp][Ss]://)|(?=[^@" + _NOT_USERINFO + r"]*:))"
    r"(?P<secret>[^" + _NOT_USERINFO + r"]+)@"
)

#: Applied in every run, redaction on or off (`compaction_lab.privacy.redactor.redactor`), and by the stores.
URL_USERINFO = Pattern(
    "url-userinfo",
    URL_USERINFO_REGEX,
    "the userinfo of a URL (https://user:pass@host -> https://[REDACTED:url-userinfo]@host)",
    needles=("://",),
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
    if personal(leaf) and cut >= 0 and not home_s.startswith("/tmp/"):
        out.append(
            Pattern(
                "home-dir",
                re.escape(parent) + r"(?P<secret>" + re.escape(leaf) + r")(?![\w.-])",
                "the last segment of the running account's home directory",
            )
        )
    if user and personal(user):
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


def personal(name: str) -> bool:
    """Whether `name` may be someone's account (longer than two characters, not a `GENERIC_ACCOUNTS` one)."""
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
        from compaction_lab.core import user_yaml  # binary, too deep or an alias: a ValueError naming the file

        path = Path(extra)
        entries = _entries(user_yaml.load(path), str(path))
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
