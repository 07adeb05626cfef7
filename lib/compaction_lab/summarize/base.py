"""What every summary provider shares: the result type, the protocol, the failure, and the ``none`` provider.

Its own module so that the providers (`extractive`, `model`) import it without importing the package
that chooses among them (`summarize.get_summarizer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from compaction_lab.core.projection import SummaryRequest


class SummaryUnavailable(RuntimeError):
    """The provider cannot produce a summary (none configured, unreachable, failed)."""


@dataclass(frozen=True)
class SummaryResult:
    """A provider's answer and the usage it reports (zeros when nothing was billed)."""

    text: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns a `SummaryRequest` into a `SummaryResult`."""

    name: str
    stand_in: bool

    def summarize(self, request: SummaryRequest) -> SummaryResult:  # pragma: no cover - protocol
        ...


class NoSummarizer:
    """No summary provider: every request is unavailable (zero cost)."""

    name = "none"
    stand_in = False

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        raise SummaryUnavailable("no summary provider configured (provider 'none')")


__all__ = ["NoSummarizer", "Summarizer", "SummaryResult", "SummaryUnavailable"]
