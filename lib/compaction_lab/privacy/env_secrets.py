"""Secret-looking names, and the secret environment values masked as ``[REDACTED:env-secret]``.

`looks_secret_name` is the one rule for whether a name holds a credential, by what the name names
(its `SecretNameKind`): a key of a mapping that is shown or stored, a run parameter, or an
environment variable. It sits here, below `secrets`, because `env_secret_values` needs it.

Values of secret-looking environment variables (`env_secret_values`:
``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ...) are masked as
``[REDACTED:env-secret]`` in every run, **even with redaction off**: they are
never part of what a report studies.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

__all__ = ["ENV_SECRET", "MIN_SECRET_CHARS", "SecretNameKind", "env_secret_values", "looks_secret_name"]

#: The pattern name under which secret environment values are masked.
ENV_SECRET = "env-secret"

#: Shortest secret value masked as a literal (an environment variable's, a registered key, a URL's
#: credential): a shorter one (``none``, ``test``) would mask ordinary words.
MIN_SECRET_CHARS = 8

#: What a name names, which decides the rule `looks_secret_name` judges it by.
SecretNameKind = Literal["key", "parameter", "environment"]

# The three rules differ on purpose, by what a match costs:
#
# key          A match masks a shown value (`secrets.shown`) or refuses an endpoint setting
#              (`endpoints.config`). Keys come in any spelling (api_key, API-KEY, accessToken), so whole
#              words count, and ``max_tokens`` or ``monkey`` are not mistaken for one.
# parameter    A match refuses a run parameter outright (`run.params`), so the rule is narrow: the name
#              ends in a credential word. ``*_env`` (a variable's NAME) and ``*_tokens`` (a size) end
#              otherwise and never match.
# environment  A match only masks that variable's value (of at least 8 characters) wherever it appears,
#              so the rule is broad: a false positive such as TOKENIZERS_PARALLELISM costs nothing.
_KEY_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "bearer", "authorization", "credential", "credentials"}
)
_KEY_JOINED = frozenset({"apikey", "accesstoken", "authtoken"})
_WORD_SEPARATORS = re.compile(r"[_\-\s.]+")
_PARAMETER = re.compile(r"(api[_-]?key|secret|token|password)$", re.IGNORECASE)
_ENVIRONMENT = re.compile(r"API_?KEY|_KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def looks_secret_name(name: Any, kind: SecretNameKind = "key") -> bool:
    """Return whether a name looks like it holds a credential, by the rule for its `kind`.

    Parameters
    ----------
    name : any
        The name (a non-string is judged by its ``str``).
    kind : {"key", "parameter", "environment"}
        What the name names:

        ``"key"``
            A key of a mapping that is shown or stored (a model endpoint's settings, a value in an
            error message). Split into words on ``_``, ``-``, ``.`` and spaces, any case: secret when a
            word is ``key``, ``apikey``, ``token``, ``secret``, ``password``, ``passwd``, ``bearer``,
            ``authorization``, ``credential`` or ``credentials``, or the words join to ``apikey``,
            ``accesstoken`` or ``authtoken``; never when the last word is ``env`` (``api_key_env``
            names a variable). ``max_tokens``, ``tokenizer`` and ``monkey`` are not secret.
        ``"parameter"``
            A run parameter (a profile's or ``--set``'s key). Secret when it ends in ``api_key``,
            ``api-key``, ``apikey``, ``secret``, ``token`` or ``password``, any case;
            ``openai_api_key`` is, ``api_key_env``, ``max_tokens`` and ``passwd`` are not.
        ``"environment"``
            An environment variable. Secret when it contains ``API_KEY`` (or ``APIKEY``), ``TOKEN``,
            ``SECRET``, ``PASSWORD``, ``PASSWD`` or ``CREDENTIAL``, or ends in ``_KEY``, any case;
            ``TOKENIZERS_PARALLELISM`` is, ``KEYBOARD`` is not.

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        For a `kind` that is none of the three.
    """
    text = str(name)
    if kind == "key":
        words = [w for w in _WORD_SEPARATORS.split(text.strip().lower()) if w]
        if not words or words[-1] == "env":
            return False
        return bool(_KEY_WORDS.intersection(words)) or "".join(words) in _KEY_JOINED
    if kind == "parameter":
        return bool(_PARAMETER.search(text))
    if kind == "environment":
        return bool(_ENVIRONMENT.search(text))
    raise ValueError(f"kind must be one of {', '.join(get_args(SecretNameKind))}, not {kind!r}")


def env_secret_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Return the values of environment variables whose names look secret.

    A name counts by `looks_secret_name`'s ``"environment"`` rule (``API_KEY``,
    ``TOKEN``, ``SECRET``, ...). Only values of at least 8 characters (after
    stripping) are returned: shorter ones (``true``, ``0``) would mask ordinary text.

    Parameters
    ----------
    environ : mapping, optional
        Default `os.environ`.
    """
    env = os.environ if environ is None else environ
    out = set()
    for key, value in env.items():
        if isinstance(value, str) and looks_secret_name(key, "environment"):
            v = value.strip()
            if len(v) >= MIN_SECRET_CHARS:
                out.add(v)
    return frozenset(out)
