"""What the cost figures assume: `CostAssumptions` (a module of its own, so a profile's check imports no pandas)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CostAssumptions:
    """Everything the cost figures assume (shown beside them in notebook 04).

    Parameters
    ----------
    turns : int
        Later turns T after the compaction (the seed used 100).
    turn_growth_tokens : int
        New input each later turn adds (tool output, the user's next message).
    turn_output_tokens : int
        The model's reply per later turn.
    summary_output_tokens : int, optional
        Summary length to price; default: the summary the strategy produced
        (report tokens of its summary segment).
    period : str
        ``off_peak`` or ``peak`` (tables without peak prices use off-peak).
    simulated_turns : int
        Later turns run through the cache simulator; further turns repeat the
        last simulated turn's split (each extends the previous by the same
        amount, so the rule serves it alike).
    seed : int
        Seed of the filler token ids standing in for future turns' content.
    """

    turns: int = 100
    turn_growth_tokens: int = 2_000
    turn_output_tokens: int = 400
    summary_output_tokens: int | None = None
    period: str = "off_peak"
    simulated_turns: int = 5

    def __post_init__(self) -> None:
        """Refuse fewer than 3 simulated turns when more turns are priced."""
        if self.simulated_turns < 3 and self.turns > self.simulated_turns:
            raise ValueError("simulated_turns must be >= 3 to carry the per-turn cache pattern forward")

    seed: int = 7

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> CostAssumptions:
        """Build the assumptions from a mapping; unknown keys and None values are ignored."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in m.items() if k in known and v is not None})


__all__ = ["CostAssumptions"]
