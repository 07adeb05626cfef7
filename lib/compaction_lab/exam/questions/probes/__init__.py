"""Questions mined from anyone's own sessions: identifiers, paths, numbers, error strings, quoted values.

The synthetic bank asks about facts the generator planted; a user's own
sessions have no ledger, so `exam.questions.probes` mines one. From every record of the
*covered part* (``source_order < tail_start``, the history a compaction
replaces) it extracts values by kind-specific rules (`EXTRACTION_RULES`), keeps those a
reader could only know from memory and that a question can single out, asks a
natural question about each, samples them with a seed and adds decoys:
lookalike values checked absent from the whole session. Every usable value is
also kept as the case's *pool* (`MinedCase.pool`).

The package, one module per stage: ``candidates`` (extraction rules),
``harness`` (text a harness wrote: injected blocks and the `TEMPLATES` table), ``wording``, ``uniqueness``,
``haystacks``, ``selection`` (the pool and the seeded draw), ``decoys``,
``mining`` (the spec and every session's cases) and ``checks``; ``forms`` makes one value of its
spellings (one value once).

Design: docs/exams.md#3-mining-probes-from-real-sessions
"""

from __future__ import annotations

from compaction_lab.exam.questions.probes.candidates import (
    CATEGORIES,
    COMMON_WORDS,
    EXTRACTION_RULES,
    MINED_KINDS,
    REJECT_REASONS,
    Candidate,
    ExtractionRule,
    extract,
    guessable,
    inexact,
    scan,
    slash_list,
)
from compaction_lab.exam.questions.probes.checks import check_probe_case
from compaction_lab.exam.questions.probes.decoys import mutate
from compaction_lab.exam.questions.probes.harness import (
    TEMPLATES,
    Harness,
    Template,
    harness_of,
    injected_blocks,
    issue_frame,
    template_spans,
)
from compaction_lab.exam.questions.probes.haystacks import system_prompt_text
from compaction_lab.exam.questions.probes.mining import MinedCase, ProbeSpec, mine, mine_all, mine_case, mine_cases
from compaction_lab.exam.questions.probes.selection import (
    DROP_REASONS,
    eligible,
    path_forms,
    plan_counts,
    select,
    usable_candidates,
)
from compaction_lab.exam.questions.probes.uniqueness import Wordings
from compaction_lab.exam.questions.probes.wording import Variant, phrase, render, short_target

__all__ = [
    "CATEGORIES",
    "COMMON_WORDS",
    "DROP_REASONS",
    "Candidate",
    "Harness",
    "MINED_KINDS",
    "MinedCase",
    "ProbeSpec",
    "REJECT_REASONS",
    "EXTRACTION_RULES",
    "ExtractionRule",
    "TEMPLATES",
    "Template",
    "Variant",
    "Wordings",
    "check_probe_case",
    "eligible",
    "extract",
    "guessable",
    "harness_of",
    "inexact",
    "injected_blocks",
    "issue_frame",
    "mine",
    "mine_all",
    "mine_case",
    "mine_cases",
    "mutate",
    "path_forms",
    "phrase",
    "plan_counts",
    "render",
    "scan",
    "select",
    "short_target",
    "slash_list",
    "system_prompt_text",
    "template_spans",
    "usable_candidates",
]
