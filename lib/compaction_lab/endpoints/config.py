"""Which OpenAI-compatible endpoint and model to call, and how.

A `ModelConfig` names an endpoint (``base_url``), a model, and the NAME of the
environment variable that holds the API key. The key itself never appears in a
config, a profile, ``run.json`` or the ledger: `ModelConfig.from_mapping`
refuses a mapping that carries one (any key named like ``api_key``, ``key``,
``token``, ``secret``, ``password``), so a profile YAML cannot leak it.

``base_url`` is checked by `base_url_problem`, the one URL check that the
config, the providers, ``doctor`` and ``run``'s parameter check all go
through: an http or https URL with a host and, when given, a port from 1 to
65535. Credentials in it (``https://user:pass@host/v1``) are allowed -- some
gateways want them -- but never shown: every message, ``repr`` and `public`
masks them (`compaction_lab.privacy.secrets.mask_url`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from compaction_lab.privacy.secrets import looks_secret_name, mask_message, mask_url, shown

#: The message for a config that tries to carry a secret (the value is never echoed).
SECRETS_MESSAGE = "secrets come from environment variables only: set api_key_env"

#: URL schemes an endpoint may use.
URL_SCHEMES: tuple[str, ...] = ("http", "https")


def base_url_problem(url: Any) -> str | None:
    """Say what is wrong with an endpoint's base URL, or None when it is well formed.

    Well formed: text with no space or control character, scheme ``http`` or
    ``https``, a host (a name, an IPv4 address, or an IPv6 address in
    brackets), and, when a port is given, a number from 1 to 65535. The URL is
    quoted with its credentials masked (`mask_url`).

    Parameters
    ----------
    url : Any
        The value given for ``base_url``.

    Returns
    -------
    str or None
        A phrase to follow the parameter's name (``base_url 'http://[::1' is
        not a valid URL (Invalid IPv6 URL)``).
    """
    if not isinstance(url, str) or not url.strip():
        return f"must be an http:// or https:// URL, got {shown(url)!r}"
    text = url.strip()
    quoted = repr(mask_url(text))
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text):
        return f"{quoted} holds a space or a control character"
    try:
        parts = urlsplit(text)
        port = parts.port  # parsed on access: not a number, or out of 0-65535, raises
    except ValueError as exc:
        return f"{quoted} is not a valid URL ({mask_message(str(exc))})"
    if parts.scheme.lower() not in URL_SCHEMES:
        return f"{quoted} must start with http:// or https://"
    if not parts.hostname:
        return f"{quoted} names no host"
    if port == 0:
        return f"{quoted}: port 0 cannot be connected to (give 1-65535)"
    return None


def check_base_url(url: Any, name: str = "base_url") -> str:
    """`url` when it is a well-formed endpoint URL (`base_url_problem`).

    Raises
    ------
    ValueError
        Naming the parameter (`name`), with the URL's credentials masked.
    """
    problem = base_url_problem(url)
    if problem:
        raise ValueError(f"{name} {problem}")
    return url


@dataclass(frozen=True)
class ModelConfig:
    """An OpenAI-compatible chat endpoint and the model called on it.

    Parameters
    ----------
    base_url : str
        The API root, e.g. ``http://127.0.0.1:8080/v1`` or ``https://api.deepseek.com``
        (``/chat/completions`` is appended by the client).
    model : str
        Model name as the endpoint knows it.
    api_key_env : str
        NAME of the environment variable holding the key (the value is read at
        client construction and stored nowhere). ``""``: the server needs no
        key (a local server); the client then sends the placeholder ``none``.
    concurrency : int
        Most requests one client keeps in flight.
    timeout_s : float
        Per-attempt timeout (connect, read, write), seconds.
    max_retries : int
        Retries after the first attempt (429, 5xx, timeouts, connection errors;
        never 401/403), done by the ``openai`` package's own backoff.
    temperature : float
        Added to every request body that does not set its own.
    price_table : str, optional
        Name of a ``data/prices/<name>.yaml`` table (or a path) that prices each
        call in the ledger; None: the ledger's cost is left empty.
    ledger : str, optional
        Ledger SQLite path; None: `compaction_lab.core.paths.ledger_path()`.
    reuse : bool
        Return recorded responses for identical requests instead of paying again.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 3
    temperature: float = 0.0
    price_table: str | None = None
    ledger: str | None = None
    reuse: bool = True

    def __post_init__(self) -> None:
        """Refuse a malformed base URL, an empty model name, a key where its variable's name belongs, bad numbers."""
        check_base_url(self.base_url)
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a non-empty string")
        if not isinstance(self.api_key_env, str) or (
            self.api_key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env)
        ):
            # A value that is not a variable name is most likely the key itself, pasted in the wrong field.
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (letters, digits, _) or ''; " + SECRETS_MESSAGE
            )
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {shown(self.concurrency)!r}")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {shown(self.max_retries)!r}")
        for name in ("timeout_s", "temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {shown(v)!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not isinstance(self.reuse, bool):
            raise ValueError(f"reuse must be true or false, got {shown(self.reuse)!r}")
        # Numbers from YAML may be ints; keep the declared float types so public() is stable.
        object.__setattr__(self, "timeout_s", float(self.timeout_s))
        object.__setattr__(self, "temperature", float(self.temperature))

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> ModelConfig:
        """Build a config from a mapping (a profile's ``model:`` block, a parsed YAML).

        Raises
        ------
        ValueError
            If a key looks like a credential (``api_key``, ``key``, ``token``,
            ...): `SECRETS_MESSAGE`, without echoing the value; if keys are
            unknown (named in the message); if ``base_url`` or ``model`` is
            missing; or if a value is out of range.
        """
        if not isinstance(m, Mapping):
            raise ValueError(f"model config must be a mapping, got {type(m).__name__}")
        known = {f.name for f in fields(cls)}
        # Checked before unknown keys, so a pasted key gets the message that says what to do instead.
        secret = sorted(str(k) for k in m if k not in known and looks_secret_name(k))
        if secret:
            raise ValueError(f"{SECRETS_MESSAGE} (found {', '.join(secret)})")
        unknown = sorted(mask_message(str(k)) for k in m if k not in known)
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(unknown)}; expected some of {sorted(known)}")
        missing = [k for k in ("base_url", "model") if m.get(k) in (None, "")]
        if missing:
            raise ValueError(f"model config is missing {', '.join(missing)}")
        kw = dict(m)
        if kw.get("api_key_env") is None and "api_key_env" in kw:
            kw["api_key_env"] = ""  # YAML ``api_key_env: null`` reads as "no key needed"
        for k in ("price_table", "ledger"):
            if kw.get(k) is not None:
                kw[k] = str(kw[k])
        return cls(**kw)

    def public(self) -> dict[str, Any]:
        """Every field, JSON-ready: safe to print or write to ``run.json`` (no key; the URL's credentials masked)."""
        return {**asdict(self), "base_url": mask_url(self.base_url)}

    def __repr__(self) -> str:
        """Show the public fields (the URL's credentials masked)."""
        # The generated repr would quote the base URL with its credentials.
        return f"ModelConfig({', '.join(f'{k}={v!r}' for k, v in self.public().items())})"

    @property
    def label(self) -> str:
        """Short text for tables and figure captions."""
        return f"model: {self.model}"


__all__ = ["ModelConfig", "SECRETS_MESSAGE", "URL_SCHEMES", "base_url_problem", "check_base_url"]
