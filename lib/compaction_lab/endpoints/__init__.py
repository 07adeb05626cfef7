"""Calling real models: OpenAI-compatible chat endpoints, every call recorded in the ledger.

`ModelConfig` says which endpoint, model and key variable; `ChatClient` sends
chat-completions bodies (with the openai package's own retries), reuses
recorded responses for identical requests and records every call in
`compaction_lab.store.ledger`. See `compaction_lab.endpoints.client` for the retry
rules and how the API key is kept out of logs, errors and the ledger. Beside them: the providers
(`providers`), the price tables calls are billed with (`prices`), the dry run's stand-in
endpoint (`standin`) and the local llama.cpp server (`local`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compaction_lab.endpoints.client import (
        AuthError,
        BadResponse,
        ChatClient,
        Completion,
        EndpointUnreachable,
        ProviderError,
        ProviderTimeout,
        RateLimited,
        Usage,
        request_fingerprint,
    )
    from compaction_lab.endpoints.config import ModelConfig

#: Where each name of the package is defined. They are loaded when first used: the client imports the
#: openai package (about a second), which a run that calls no model (and its submodules: providers,
#: prices) need not pay.
_EXPORTS = {
    "AuthError": "client",
    "BadResponse": "client",
    "ChatClient": "client",
    "Completion": "client",
    "EndpointUnreachable": "client",
    "ProviderError": "client",
    "ProviderTimeout": "client",
    "RateLimited": "client",
    "Usage": "client",
    "request_fingerprint": "client",
    "ModelConfig": "config",
}

__all__ = [
    "AuthError",
    "BadResponse",
    "ChatClient",
    "Completion",
    "EndpointUnreachable",
    "ModelConfig",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "Usage",
    "request_fingerprint",
]


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
