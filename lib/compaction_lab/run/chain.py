"""The chain, described once: each notebook's inputs, outputs, figures and model calls, in run order.

Every part of the suite that needs to know the chain reads it here:

- `compaction_lab.run.interactive` (a notebook opened by hand finds or makes its inputs): which notebooks
  a notebook reads (`Step.reads`) and the one output that proves each ran in a folder (`Step.mark`);
- `compaction_lab.run.plan` and `doctor` (which notebooks of a profile call a model, and through which
  parameters: `model_notebooks`, `Step.model_parameters`);
- the figure registry (`compaction_lab.report.figures`) and the exam registry (`compaction_lab.exam.exam`):
  each figure and each exam names the notebook that draws or runs it, so a step's figures (`Step.figures`)
  and the tables its exams write (part of `Step.writes`) are read from the registries, never listed twice;
- the tests of the notebooks: the chain's notebooks (`names`) are the notebook files the runner finds
  (`compaction_lab.run.runner.chain_notebooks`), in run order, and a smoke run writes and draws what
  the chain lists (``tests/report/test_notebooks.py``); each notebook's cells draw exactly the figures
  its step lists (``tests/report/test_charts.py``).

A new notebook is one more `Step` here, in its place in `CHAIN`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import combinations
from pathlib import Path
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Step:
    """One notebook of the chain.

    Attributes
    ----------
    notebook : str
        Its stem in ``notebooks/`` (``"03_closed_book_exam"``).
    reads : tuple of str
        The notebooks whose outputs it reads, in chain order (each before it in `CHAIN`).
    files : tuple of str
        The files it always writes into the run folder besides its exams' tables (a folder ends with ``/``;
        figures apart: see `figures`; its exams' tables: see `writes`). Files written only for some inputs
        (an import's report, a probe bank's pool) are not listed.
    mark : str
        The one of `writes` that proves it ran in a folder (what a later notebook opened by hand looks for).
    after : tuple of str
        Notebooks whose outputs it reads when they ran in the same folder and does without when they did
        not (05 takes the bank 03 saved, else builds it; 06 draws 03's recall beside its own): opened by
        hand it does not run them, but a chain that runs them starts it only once they finished.
    model_parameters : tuple of str
        Its parameters that make it call a model when set to ``"model"`` (``summarizer``, ``reader``).
    purposes : tuple of str
        The ledger purposes of the calls it may make (`fnmatch` patterns, ``"summary:*"``).
    """

    notebook: str
    reads: tuple[str, ...]
    files: tuple[str, ...]
    mark: str
    model_parameters: tuple[str, ...] = ()
    purposes: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def writes(self) -> tuple[str, ...]:
        """The files it always writes into the run folder: its own `files`, then its exams' tables.

        The tables are the `Exam.writes` of the exams registered for this notebook (`EXAMS`, in rank
        order), as file names (``exam_closed.parquet``); figures apart (see `figures`).

        Raises
        ------
        ValueError
            When its `mark` is not among them (an exam's tables renamed without the chain).
        """
        # Imported here: reading the exam registry imports every exam module, which a caller asking only
        # about inputs or model calls (doctor, the CLI) does not need.
        from compaction_lab.core import runfolder
        from compaction_lab.exam import exam

        tables = tuple(runfolder.table_path(Path(), t).name for t in exam.writes_of(self.notebook))
        out = (*self.files, *tables)
        if self.mark not in out:
            raise ValueError(f"{self.notebook}: its mark {self.mark!r} is not among the files it writes")
        return out

    @property
    def figures(self) -> tuple[str, ...]:
        """The stems of the figures it draws, in reading order (from the figure registry)."""
        # Imported here: reading the registry imports every figure module (Altair), which a caller
        # asking only about inputs or model calls (doctor, the CLI) does not need.
        from compaction_lab.report.figures import run_figures

        return tuple(f.stem for f in run_figures() if f.notebook == self.notebook)

    def may_call(self, purpose: str) -> bool:
        """Tell whether a model call with this ledger purpose is one this notebook declares."""
        return any(fnmatchcase(purpose, pattern) for pattern in self.purposes)


#: The chain, in run order (docs/architecture.md): the notebooks every full profile runs.
CHAIN: tuple[Step, ...] = (
    Step(
        "01_context_composition",
        reads=(),
        files=("sessions/", "composition.parquet", "followups.parquet"),
        mark="composition.parquet",
    ),
    Step(
        "02_projection_anatomy",
        reads=("01_context_composition",),
        files=("projections.parquet",),
        mark="projections.parquet",
        model_parameters=("summarizer",),
        purposes=("summary:*",),
    ),
    Step(
        "03_closed_book_exam",
        reads=("01_context_composition",),
        # The banks its exams save beside the sessions (their tables: the exams' own `writes`).
        files=("exam_bank.jsonl", "exam_recorded_bank.jsonl", "exam_recorded_pool.jsonl"),
        mark="exam_recall.parquet",
        model_parameters=("summarizer", "reader"),
        purposes=("summary:*", "exam:closed"),
    ),
    Step(
        "04_cost_model",
        reads=("01_context_composition", "03_closed_book_exam"),
        files=(
            "cost_assumptions.parquet",
            "cost.parquet",
            "compaction_prefix.parquet",
            "cost_what_if.parquet",
            "cache_shapes.parquet",
            "cache_measured.parquet",
            "cache_ledger.parquet",
        ),
        mark="cost.parquet",
        # The live cache-shape experiment also calls the model (``live_shape_experiment: true``), whatever
        # the summarizer: a switch, not a "model" setting, so `model_notebooks` does not see it.
        model_parameters=("summarizer",),
        purposes=("summary:*", "cache-shape:*"),
    ),
    Step(
        "05_open_book_exam",
        reads=("01_context_composition",),
        files=("archive.sqlite",),
        mark="exam_open.parquet",
        after=("03_closed_book_exam",),
        model_parameters=("summarizer", "reader"),
        # A closed round asks as the closed book does; an open round searches, then answers.
        purposes=("summary:*", "exam:closed", "exam:open", "exam:open-final"),
    ),
    Step(
        "06_continuation_exam",
        reads=("01_context_composition",),
        files=(),
        mark="continuation_recall.parquet",
        after=("03_closed_book_exam",),
        model_parameters=("summarizer", "reader"),
        # A model reader is asked to take the next step from each projection (tool_choice required).
        purposes=("summary:*", "exam:continuation"),
    ),
    Step(
        "07_share",
        reads=(
            "01_context_composition",
            "02_projection_anatomy",
            "03_closed_book_exam",
            "04_cost_model",
            "05_open_book_exam",
            "06_continuation_exam",
        ),
        files=("headline.parquet",),
        mark="headline.parquet",
    ),
)

_BY_NAME: Mapping[str, Step] = MappingProxyType({s.notebook: s for s in CHAIN})


def needs(notebook: str, notebooks: Sequence[str]) -> frozenset[str]:
    """Return the notebooks of a run (`notebooks`, in run order) that must finish before `notebook` starts.

    Those before it that it reads (`Step.reads`) or follows (`Step.after`); a notebook the chain does not
    describe waits for every notebook before it, and every notebook waits for such a one before it.
    """
    order = list(notebooks)
    earlier = order[: order.index(notebook)]
    unknown = {nb for nb in earlier if nb not in _BY_NAME}
    known = _BY_NAME.get(notebook)
    if known is None:
        return frozenset(earlier)
    return frozenset({nb for nb in (*known.reads, *known.after) if nb in earlier} | unknown)


def downstream(notebook: str, notebooks: Sequence[str]) -> int:
    """Return how many notebooks of a run wait on `notebook` one after another: its longest chain of dependents.

    0 for one nothing `needs`; 2 for 03 in the default chain (04 needs 03, 07 needs 04). The runner starts,
    of the notebooks ready at once, the one with the longest such chain first: the run cannot end before it.
    """
    order = list(notebooks)
    later = order[order.index(notebook) + 1 :]
    waiting = [nb for nb in later if notebook in needs(nb, order)]
    return max((1 + downstream(nb, order) for nb in waiting), default=0)


#: `width` tries every set of notebooks up to this many (2 ** 12 sets at most).
_WIDTH_EXACT_UP_TO = 12


def width(notebooks: Sequence[str]) -> int:
    """Return the most notebooks of a run that can execute at once: the kernels it can keep busy.

    The largest set of `notebooks` of which none waits on another (`needs`, directly or through others):
    4 for the default chain (02, 04, 05 and 06 once 01 and 03 are done), 2 for 01, 02 and 03 (02 beside
    03), 1 for a run whose notebooks each wait on the one before (01 then 03). A run of more notebooks than
    can be tried in a moment is counted as wide as it is long.
    """
    order = list(notebooks)
    if len(order) > _WIDTH_EXACT_UP_TO:
        return len(order)
    before: dict[str, set[str]] = {}
    for nb in order:
        before[nb] = set().union(*({n} | before[n] for n in needs(nb, order)))
    for size in range(len(order), 1, -1):
        for group in combinations(order, size):
            if not any(a in before[b] for a in group for b in group):
                return size
    return min(1, len(order))


def by_urgency(ready: Iterable[str], notebooks: Sequence[str]) -> list[str]:
    """Return the notebooks `ready` in the order a free kernel takes them: longest `downstream` first, then run order."""
    order = list(notebooks)
    return sorted(ready, key=lambda nb: (-downstream(nb, order), order.index(nb)))


def names() -> tuple[str, ...]:
    """Return the chain's notebook stems, in run order."""
    return tuple(_BY_NAME)


def step(notebook: str) -> Step:
    """Return the chain's step for a notebook stem.

    Raises
    ------
    ValueError
        When `notebook` is not in the chain (the message lists the chain).
    """
    try:
        return _BY_NAME[notebook]
    except KeyError:
        raise ValueError(f"unknown notebook {notebook!r}; known: {', '.join(_BY_NAME)}") from None


#: The notebooks that can call a model, and the parameters that make them do so (a view of `CHAIN`).
MODEL_PARAMETERS_BY_NOTEBOOK: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {s.notebook: s.model_parameters for s in CHAIN if s.model_parameters}
)


def model_notebooks(profile: Any) -> list[tuple[str, tuple[str, ...]]]:
    """Return the profile's notebooks that will call the model, each with the parameters set to ``model``."""
    out = []
    for nb in profile.notebooks:
        params = profile.parameters_for(nb)
        using = tuple(p for p in MODEL_PARAMETERS_BY_NOTEBOOK.get(nb, ()) if params.get(p) == "model")
        if using:
            out.append((nb, using))
    return out


__all__ = ["CHAIN", "MODEL_PARAMETERS_BY_NOTEBOOK", "Step", "model_notebooks", "names", "needs", "step"]
