"""Summarizers: who writes a strategy's summary.

Every summarizer receives the strategy's own `SummaryRequest` (its messages in
the strategy's documented shape, the template the answer must follow, the
output cap) and returns text plus usage.

``none``
    No summary: raises `SummaryUnavailable`, and each strategy does what it
    documents (FutureOS falls back to deterministic, Codex says "(no summary
    available)", OpenCode keeps its empty template).
``extractive``
    Offline, deterministic, model-free *stand-in* that fills the requested
    template from the request's own messages (user requests, files touched,
    errors, identifiers, decisions) within the cap. Always labelled
    "extractive stand-in" in tables and charts.
``model``
    Any OpenAI-compatible chat endpoint, sent each strategy's own summary
    request shape through the ledger (`summarize.endpoint`). Labelled with the
    model's name.

Each registers itself in `SUMMARIZERS` where it is defined; adding a summarizer
is adding a module to this package.
"""

from __future__ import annotations

from typing import Any

from compaction_lab.core.registry import UnknownName
from compaction_lab.summarize.base import (
    SUMMARIZERS,
    NoSummarizer,
    Summarizer,
    SummarizerFactory,
    SummaryResult,
    SummaryUnavailable,
)


def get_summarizer(name: str, model: Any = None) -> Summarizer:
    """Return a summarizer by name: ``none``, ``extractive`` (offline stand-in) or ``model`` (`SUMMARIZERS`).

    Parameters
    ----------
    name : str
    model : ModelConfig or mapping, optional
        The endpoint for ``model`` (base_url, model, api_key_env, ...);
        ignored by the offline summarizers.

    Raises
    ------
    ValueError
        When no summarizer has that name (the message lists the registered ones).
    """
    try:
        factory = SUMMARIZERS.get(name)
    except UnknownName:
        raise ValueError(f"unknown summarizer {name!r}; available: {', '.join(SUMMARIZERS.names())}") from None
    return factory(model)


__all__ = [
    "SUMMARIZERS",
    "NoSummarizer",
    "Summarizer",
    "SummarizerFactory",
    "SummaryResult",
    "SummaryUnavailable",
    "get_summarizer",
]
