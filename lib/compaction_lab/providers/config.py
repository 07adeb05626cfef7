"""Which OpenAI-compatible endpoint and model to call, and how.

A `ModelConfig` names an endpoint (``base_url``), a model, and the NAME of the
environment variable that holds the API key. The key itself never appears in a
config, a profile, ``run.json`` or the ledger: `ModelConfig.from_mapping`
refuses a mapping that carries one (any key named like ``api_key``, ``key``,
``token``, ``secret``, ``password``), so a profile YAML cannot leak it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

#: The message for a config that tries to carry a secret (the value is never echoed).
SECRETS_MESSAGE = "secrets come from environment variables only: set api_key_env"

# A field name that looks like a credential. Only whole words (split on _ or -)
# count, so ``max_tokens`` or ``monkey`` are not mistaken for one.
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "bearer", "authorization", "credential", "credentials"}
)


def _looks_secret(name: str) -> bool:
    words = [w for w in re.split(r"[_\-\s.]+", str(name).strip().lower()) if w]
    if not words:
        return False
    joined = "".join(words)
    return bool(_SECRET_WORDS.intersection(words)) or joined in {"apikey", "accesstoken", "authtoken"}


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
        if not isinstance(self.base_url, str) or not self.base_url.strip():
            raise ValueError("base_url must be a non-empty string")
        if not re.match(r"^https?://", self.base_url.strip(), re.IGNORECASE):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
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
            raise ValueError(f"concurrency must be an integer >= 1, got {self.concurrency!r}")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {self.max_retries!r}")
        for name in ("timeout_s", "temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not isinstance(self.reuse, bool):
            raise ValueError(f"reuse must be true or false, got {self.reuse!r}")
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
        secret = sorted(str(k) for k in m if k not in known and _looks_secret(k))
        if secret:
            raise ValueError(f"{SECRETS_MESSAGE} (found {', '.join(secret)})")
        unknown = sorted(str(k) for k in m if k not in known)
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
        """Every field, JSON-ready: safe to print or write to ``run.json`` (it holds no secret)."""
        return asdict(self)

    @property
    def label(self) -> str:
        """Short text for tables and figure captions."""
        return f"model: {self.model}"


__all__ = ["ModelConfig", "SECRETS_MESSAGE"]
