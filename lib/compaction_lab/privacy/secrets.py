"""Secrets kept out of what is printed and what is stored: URL credentials, API keys, credential-shaped text.

A run folder is swept at the end of every run (`scrub`); what lives outside it -- the ledger, the
checkpoint store, the archive, the doctor's output, error messages, log lines -- is masked here,
before it is written or shown:

`mask_url`
    The userinfo of every URL in a text, ``https://user:pass@host/v1`` -> ``https://***@host/v1``.
`mask_stored` (`store_masker`)
    What a store masks before writing: secret environment values (`env_secret_values`), registered
    secrets (`register_secret`), URL credentials and the credential formats of `CREDENTIAL_PATTERNS`;
    patterns that judge by context (``Bearer ...``) are left out, as stored text is data the exams read.
`mask_message` / `shown`
    For error messages and printed values: the above plus every pattern of `SECRET_PATTERNS`; with
    `shown`, also the value under any secret-looking key.
`url_credentials` (`credentials`)
    Every form a URL's credentials take once they leave the URL (decoded, percent-encoded, Basic).
`looks_secret_name`, `install_log_masking`
    Whether a name holds a credential; the same masking for the HTTP libraries' log lines.

Masking is idempotent: a masked text is masked again to itself.

Design: docs/architecture.md#secrets.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from compaction_lab.core.errors import ProfileError
from compaction_lab.privacy.credentials import credentials_in, url_credentials
from compaction_lab.privacy.env_secrets import (  # the names' one rule, the literals' one length
    MIN_SECRET_CHARS,
    env_secret_values,
    looks_secret_name,
)
from compaction_lab.privacy.patterns import DEFAULT_PATTERNS, URL_USERINFO, URL_USERINFO_REGEX, Pattern
from compaction_lab.privacy.redactor import Redactor

__all__ = [
    "CREDENTIAL_PATTERNS",
    "LOGGERS",
    "MASK",
    "MIN_SECRET_CHARS",
    "SECRET_PATTERNS",
    "install_log_masking",
    "known_secrets",
    "looks_secret_name",
    "mask_message",
    "mask_stored",
    "mask_url",
    "register_secret",
    "shown",
    "shown_with_credentials",
    "store_masker",
    "url_credentials",
]

#: What stands for a masked URL userinfo or a secret-looking value in printed text.
MASK = "***"

#: Catalogue patterns whose matches are credentials by their format alone: masked in every store.
CREDENTIAL_PATTERNS: tuple[Pattern, ...] = tuple(
    p
    for p in DEFAULT_PATTERNS
    if p.name
    in {
        "private-key",
        "jwt",
        "anthropic-key",
        "openai-key",
        "github-token",
        "aws-access-key-id",
        "slack-token",
        "google-api-key",
    }
)

#: Every catalogue pattern that finds a secret (not personal data such as e-mail addresses or home
#: folders): masked in error messages, where a false positive costs nothing.
SECRET_PATTERNS: tuple[Pattern, ...] = tuple(
    p for p in DEFAULT_PATTERNS if p.name not in {"email", "home-user", "encoded-home-user"}
)

#: Loggers whose lines may carry a request URL or a server's error text.
LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "compaction_lab")

_URL_USERINFO = re.compile(URL_USERINFO_REGEX)
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def mask_url(text: str) -> str:
    """`text` with the userinfo of every URL in it replaced by ``***``.

    ``https://user:pass@api.example.com/v1`` -> ``https://***@api.example.com/v1``;
    works on a bare URL, a malformed one (``http://u:p@[::1``) and on a message
    quoting URLs. For http/https the whole userinfo goes (a token as user name
    is a credential too); for other schemes only one holding a password.

    Parameters
    ----------
    text : str
    """
    text = str(text)
    if "://" not in text:
        return text
    return _URL_USERINFO.sub(lambda m: m.group(0)[: m.start("secret") - m.start()] + MASK + "@", text)


def register_secret(value: str | None) -> None:
    """Remember a secret value (an API key read from its variable) so that every store and message masks it.

    Values shorter than `MIN_SECRET_CHARS` are ignored. Registered values live
    for the process; they are never written anywhere.
    """
    v = (value or "").strip()
    if len(v) >= MIN_SECRET_CHARS:
        with _LOCK:
            _REGISTERED.add(v)


def known_secrets(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Return the secret values masked as literals: secret environment variables' values and the registered ones.

    Parameters
    ----------
    environ : mapping, optional
        Default `os.environ`, read now.
    """
    with _LOCK:
        registered = frozenset(_REGISTERED)
    return env_secret_values(environ) | registered


def _literals(values: Iterable[str], minimum: int) -> frozenset[str]:
    return frozenset(s for v in values if isinstance(v, str) and len(s := v.strip()) >= minimum)


def store_masker(values: Iterable[str] = ()) -> Redactor:
    """Return the `Redactor` a store applies before writing (see the module docstring).

    Parameters
    ----------
    values : iterable of str
        More secret values (each of at least `MIN_SECRET_CHARS`).
    """
    literals = known_secrets() | _literals(values, MIN_SECRET_CHARS)
    return Redactor(patterns=CREDENTIAL_PATTERNS, literals=literals, always=(URL_USERINFO,))


def mask_stored(obj: Any, values: Iterable[str] = ()) -> Any:
    """`obj` (text, or dicts and lists of it) as a store may keep it: `store_masker` applied to every string.

    Returns `obj` itself when nothing was masked.
    """
    return store_masker(values).value(obj)


def mask_message(text: str, values: Iterable[str] = ()) -> str:
    """Return an error message or printed line as it may be shown: URL credentials, secret values, patterns masked.

    Parameters
    ----------
    text : str
    values : iterable of str
        Secrets the caller holds (a key it just read); masked when at least 4
        characters long (a message is short: a false positive costs nothing).
    """
    return _message_masker(values)(text)


def _message_masker(values: Iterable[str] = ()):
    """`mask_message` for many texts: the environment is read and the redactor built once."""
    redactor = Redactor(patterns=SECRET_PATTERNS, literals=known_secrets() | _literals(values, 4))
    return lambda text: redactor.text(mask_url(str(text)))


def shown(value: Any, values: Iterable[str] = ()) -> Any:
    """`value` as an error message may quote it.

    Strings go through `mask_message` (with `values`); in a mapping (at any
    depth) the value of a secret-looking key (`looks_secret_name`) becomes
    ``***`` whatever it is, so ``{api_key: hunter2}`` is shown as
    ``{'api_key': '***'}``. Other values are returned unchanged.
    `shown_with_credentials` also masks every form of the credentials of the
    URLs in `value`.
    """
    mask = _message_masker(values)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return mask(value)
        if isinstance(value, Mapping):
            return {
                walk(k): (MASK if looks_secret_name(k) and value[k] not in (None, "") else walk(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(walk(v) for v in value)
        return value

    return walk(value)


def shown_with_credentials(value: Any) -> Any:
    """`shown`, also masking every form the credentials of the URLs in `value` take (`url_credentials`).

    A swept value is shown so (a sweep's folder names, ``sweep.json``, its console lines): with
    ``{base_url: http://user:pass@host/v1, note: pass}`` the password goes from the note too.
    """
    return shown(value, credentials_in(value))


class _MaskingFilter(logging.Filter):
    """Rewrites a log record whose text holds URL credentials or a secret (`mask_message`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a record that cannot be formatted is logging's own problem to report
            return True
        masked = mask_message(text)
        if masked != text:
            record.msg, record.args = masked, None
        return True


_FILTER = _MaskingFilter()


def install_log_masking(names: Iterable[str] = LOGGERS) -> None:
    """Mask the lines of the named loggers and their existing children before any handler sees them; idempotent.

    A filter on a logger sees only records logged on that logger itself, not
    those its children pass up, so every child that exists now
    (``openai._base_client``, ``httpcore2.http11``) gets the filter too: call
    this after the libraries are imported (`ChatClient` does).

    Parameters
    ----------
    names : iterable of str
        Logger names (default `LOGGERS`).
    """
    prefixes = tuple(names)
    existing = [n for n in list(logging.root.manager.loggerDict) if n.startswith(tuple(f"{p}." for p in prefixes))]
    for name in (*prefixes, *existing):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


# Every ProfileError's message is masked from now on (core cannot import this module: see core.errors).
ProfileError.masker = staticmethod(lambda text: mask_message(text))
