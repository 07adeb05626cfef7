"""`Usage`: the tokens of one model call as its provider reported them.

Its own module because both the client (which parses it) and the ledger (which records and replays
it) need it, and the client records into the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    """Tokens of one call as the provider reported them.

    Parameters
    ----------
    prompt_tokens : int
        The request's total input (cached tokens included).
    cached_tokens : int
        Of the input, tokens served from the provider's prefix cache:
        ``usage.prompt_tokens_details.cached_tokens`` (OpenAI) or
        ``usage.prompt_cache_hit_tokens`` (DeepSeek); 0 when neither is reported.
    completion_tokens : int
    """

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0


__all__ = ["Usage"]
