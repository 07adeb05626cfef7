"""What every summarizer shares: the result type, the protocol, the failure, the registry, and ``none``.

Its own module so that the summarizers (`extractive`, `model`) import it without importing the package
that chooses among them (`summarize.get_summarizer`). Each summarizer registers a factory in `SUMMARIZERS`
where it is defined: ``factory(model) -> Summarizer``, where `model` is the endpoint configuration (or
None), which only a model-backed summarizer uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from compaction_lab.core.projection import SummaryRequest
from compaction_lab.core.registry import Registry


class SummaryUnavailable(RuntimeError):
    """The summarizer cannot produce a summary (none configured, unreachable, failed)."""


@dataclass(frozen=True)
class SummaryResult:
    """A summarizer's answer and the usage it reports (zeros when nothing was billed)."""

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
        """Answer the request; raise `SummaryUnavailable` when no summary can be had."""
        ...


#: Makes a summarizer from the endpoint configuration (a ``ModelConfig``, a mapping, or None).
SummarizerFactory = Callable[[Any], Summarizer]

#: Every summarizer by name, listed by rank (``none``, ``extractive``, ``model``); discovery imports
#: every module of this package but this one.
SUMMARIZERS: Registry[SummarizerFactory] = Registry("summarizer", packages=("compaction_lab.summarize",))


class NoSummarizer:
    """No summarizer: every request is unavailable (zero cost)."""

    name = "none"
    stand_in = False
    #: Its answer is a pure function of the request: projections made with it may be kept (`store.memo`).
    deterministic = True

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Refuse every request: raise `SummaryUnavailable`."""
        raise SummaryUnavailable("no summarizer configured (summarizer 'none')")


@SUMMARIZERS.register("none", rank=10)
def _none(model: Any = None) -> Summarizer:
    """Build the ``none`` summarizer (`model` is ignored)."""
    return NoSummarizer()


__all__ = ["SUMMARIZERS", "NoSummarizer", "Summarizer", "SummarizerFactory", "SummaryResult", "SummaryUnavailable"]
