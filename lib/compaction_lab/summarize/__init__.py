"""Summary providers: who writes a strategy's summary.

Every provider receives the strategy's own `SummaryRequest` (its messages in
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
"""

from __future__ import annotations

from typing import Any

from compaction_lab.summarize.base import NoSummarizer, Summarizer, SummaryResult, SummaryUnavailable


def get_summarizer(name: str, model: Any = None) -> Summarizer:
    """A provider by name: ``none``, ``extractive`` (offline stand-in) or ``model``.

    Parameters
    ----------
    name : str
    model : ModelConfig or mapping, optional
        The endpoint for ``model`` (base_url, model, api_key_env, ...);
        ignored by the offline providers.
    """
    if name == "none":
        return NoSummarizer()
    if name == "extractive":
        from compaction_lab.summarize.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "model":
        from compaction_lab.summarize.endpoint import ModelSummarizer

        return ModelSummarizer(model)
    raise ValueError(f"unknown summary provider {name!r}; available: none, extractive, model")


__all__ = ["NoSummarizer", "Summarizer", "SummaryResult", "SummaryUnavailable", "get_summarizer"]
