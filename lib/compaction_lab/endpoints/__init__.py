"""Calling real models: OpenAI-compatible chat endpoints, every call recorded in the ledger.

`ModelConfig` says which endpoint, model and key variable; `ChatClient` sends
chat-completions bodies (with the openai package's own retries), reuses
recorded responses for identical requests and records every call in
`compaction_lab.endpoints.ledger`. See `compaction_lab.endpoints.client` for the retry
rules and how the API key is kept out of logs, errors and the ledger. Beside them: endpoint presets
(`presets`), the price tables calls are billed with (`prices`), usage (`usage`), the dry run's stand-in
endpoint (`standin`) and the local llama.cpp server (`local`).
"""

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
