"""How tables and charts name an arm: `strategy_label`."""

from __future__ import annotations

from compaction_lab.core.projection import STAND_IN_LABEL, Projection


def strategy_label(p: Projection) -> str:
    """Name the strategy as tables and charts show it.

    Who wrote the summary is labelled (the extractive stand-in, or ``model: <name>``), and a FutureOS
    fallback says so. A strategy that tags its projections (``notes["label_tag"]``, e.g. ``reconstructed``
    for an arm whose upstream source is not public) has the tag right after its name.
    """
    tag = (p.notes or {}).get("label_tag")
    name = f"{p.strategy} ({tag})" if tag else p.strategy
    if p.receipt is not None and p.receipt.stand_in and not p.receipt.fallback:
        return f"{name} ({STAND_IN_LABEL})"
    if p.receipt is not None and not p.receipt.fallback and p.receipt.summarizer.startswith("model"):
        return f"{name} ({p.receipt.summarizer})"  # a model wrote the summary: say which
    if (
        p.receipt is not None
        and p.receipt.fallback
        and p.summary_request is not None
        and p.strategy.startswith("futureos")
    ):
        return f"{name} (fallback: deterministic)"
    return name
