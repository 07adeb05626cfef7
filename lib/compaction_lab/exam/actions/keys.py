"""The key of a continuation case: the tool calls the agent recorded after a cut, and their targets.

`NextAction` is one recorded call, `ContinuationCase` a case with its key. The continuation exam
(`compaction_lab.exam.exams.continuation`) builds them; its model grade (`next_action`) reads them.
Design: docs/exams.md#8a-continuation-notebook-06 ("The key").
"""

from __future__ import annotations

from dataclasses import dataclass

from compaction_lab.exam.actions.targets import Target
from compaction_lab.exam.types import Case


@dataclass(frozen=True)
class NextAction:
    """One recorded tool call after the cut.

    Attributes
    ----------
    rank : int
        0 for the first call after the cut, up to K − 1.
    source_order : int
    entry_id : str
    tool : str
    arguments : str
        Canonical JSON of the arguments (`calls.canonical_arguments`).
    targets : tuple of Target
    """

    rank: int
    source_order: int
    entry_id: str
    tool: str
    arguments: str
    targets: tuple[Target, ...] = ()

    @property
    def needed(self) -> tuple[Target, ...]:
        """The targets scored (`Target.needed`)."""
        return tuple(t for t in self.targets if t.needed)


@dataclass(frozen=True)
class ContinuationCase:
    """A case of the closed book (or of the recorded block) with the key of what the agent did next.

    Attributes
    ----------
    block : str
        ``closed`` or ``recorded`` (`BLOCKS`).
    case : Case
        Its session, cut and tail (its questions are not asked here).
    actions : tuple of NextAction
        The next K tool calls from the cut on (fewer at a session's end; none when the cut is its end).
    decoys : tuple of str
        Look-alike objects that never existed in the session (empty for most cases).
    """

    block: str
    case: Case
    actions: tuple[NextAction, ...]
    decoys: tuple[str, ...] = ()

    @property
    def needed(self) -> tuple[tuple[NextAction, Target], ...]:
        """Every scored target, with its action, in action order."""
        return tuple((a, t) for a in self.actions for t in a.needed)


# --------------------------------------------------------------------------- the key
