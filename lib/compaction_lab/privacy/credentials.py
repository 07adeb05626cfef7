"""The forms a URL's credentials take once they leave the URL: each one masked as a literal.

A base URL ``http://user:pass@host/v1`` is masked where the URL is shown
(`compaction_lab.privacy.secrets.mask_url`: ``http://***@host/v1``), but its
credentials travel on in other forms. The HTTP client sends them as
``Authorization: Basic base64(user:pass)`` (the userinfo percent-decoded); an
endpoint may echo that header in an answer or an error (``400 Incorrect API key
provided: ...``); a message may quote the password alone, decoded or
percent-encoded. `url_credentials` lists every form of the credentials of the URLs
in a text, `credentials_in` those of the URLs anywhere in a value (a run's
parameters), so that each form is masked as a literal wherever the URL's own
masking cannot see it: the client registers them
(`compaction_lab.privacy.secrets.register_secret`: every store, message and log
line of its process), a run's redactor holds those of its parameters
(`compaction_lab.privacy.redactor.redactor`: ``run.json``, the final sweep of the
run folder).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, unquote

from compaction_lab.privacy.patterns import URL_USERINFO_REGEX

__all__ = ["credentials_in", "url_credentials"]

_USERINFO = re.compile(URL_USERINFO_REGEX)


def url_credentials(text: str) -> frozenset[str]:
    """Return every form the credentials of the URLs in `text` can take (empty when none holds any).

    For each URL with credentials (those `URL_USERINFO_REGEX` masks: any
    userinfo of an http/https URL, one holding a password for other schemes):

    * the userinfo as written (``user:pa%40ss``) and decoded (``user:pa@ss``);
    * the password as written, decoded, and percent-encoded (``quote`` with
      and without ``/`` kept, ``quote_plus``); with no password, the same
      forms of the user name, then the credential itself (a token as user name);
    * ``base64(user:password)`` of the decoded values, as an ``Authorization:
      Basic`` header carries it: standard and URL-safe alphabets, with and
      without ``=`` padding.

    Forms are returned whatever their length; whoever masks them decides how
    short a literal may be.

    Parameters
    ----------
    text : str
        A URL, or any text quoting URLs.
    """
    text = str(text)
    if "://" not in text:
        return frozenset()
    return frozenset(form for m in _USERINFO.finditer(text) for form in _forms(m.group("secret")) if form)


def _forms(userinfo: str) -> Iterator[str]:
    user_raw, has_password, password_raw = userinfo.partition(":")
    user, password = unquote(user_raw), unquote(password_raw)
    yield userinfo
    yield f"{user}:{password}" if has_password else user
    secret_raw, secret = (password_raw, password) if password_raw else (user_raw, user)
    yield from (secret_raw, secret, quote(secret, safe=""), quote(secret), quote_plus(secret))
    basic = f"{user}:{password}".encode()
    for encoded in (base64.b64encode(basic), base64.urlsafe_b64encode(basic)):
        yield encoded.decode("ascii")
        yield encoded.rstrip(b"=").decode("ascii")


def credentials_in(value: Any) -> frozenset[str]:
    """Return `url_credentials` of every string in `value` (text, or mappings and lists of it, at any depth).

    Parameters
    ----------
    value : object
        A run's parameters, a sweep's values, a single string.
    """
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, str):
            found.update(url_credentials(v))
        elif isinstance(v, Mapping):
            for k, item in v.items():
                walk(k)
                walk(item)
        elif isinstance(v, (list, tuple, set, frozenset)):
            for item in v:
                walk(item)

    walk(value)
    return frozenset(found)
