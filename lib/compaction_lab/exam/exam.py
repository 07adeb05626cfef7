"""The exam interface: bank → cases → grade → tables, one shape for every exam.

An exam (`Exam`) takes the sessions of a run and does four things, each a method:

``params``
    Its parameters (`ExamParams` or the exam's own subclass): the one place their defaults live (the
    notebooks' parameters cells declare the same; ``tests/exam/test_exam_interface.py`` holds them equal).
``cases``
    The questions and the sessions they refer to, from a run folder (the bank saved beside notebook 01's
    sessions, and reused) or from sessions gathered in memory (`ingest.sources.Sources`).
``grade``
    Compacts every case with the arms under test, lets a reader answer from each projection and grades
    every answer: the exam's own result.
``tables``
    The tables the run folder keeps, by name (``exam_closed`` → ``exam_closed.parquet``), named once in
    `Exam.writes`, which the chain reads (``compaction_lab.run.chain``).

`Exam.run` does all four and writes the tables; `run_exam` is the same by name. `Exam.block` is the exam's
section of ``report.html`` as data (`ExamBlock`); `run_registered` runs the exams of a notebook that has
no cells of its own for them (`Exam.own_cells`). The exams register in their own modules
(``@EXAMS.register("closed", rank=10, notebook="03_closed_book_exam")``), and every module of
``compaction_lab.exam.exams`` is imported when the registry is first read, so a new exam is one new module.

Design: docs/exams.md.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import pandas as pd

from compaction_lab.core import runfolder
from compaction_lab.core.registry import Registry
from compaction_lab.ingest.sources import Sources
from compaction_lab.strategies.base import CompactionContext

#: Where an exam finds its sessions: a run folder (notebook 01's sessions; the bank and tables are written
#: there) or sessions gathered in memory (nothing is written).
Source = Path | str | Sources

C = TypeVar("C")
R = TypeVar("R")
P = TypeVar("P", bound="ExamParams")


@dataclass(frozen=True)
class ExamParams:
    """The parameters every exam reads, with the defaults notebooks 03 and 05 declare.

    An exam with parameters of its own subclasses this (`Exam.params_type`) and adds its fields, with their
    defaults; a field it redefines takes the exam's own default (the open book's ``reader``).

    Attributes
    ----------
    strategy_names : tuple of str
        The arms under test; empty: every registered strategy.
    window, output_ceiling : int
        W and O of the forced compactions (report tokens).
    summarizer : str
        Who writes summaries: ``extractive`` (the offline stand-in), ``none`` or ``model``.
    reader : str
        Who answers: ``verbatim`` (the offline retention ceiling), ``searcher`` or ``model``.
    model : mapping
        The endpoint of a ``model`` summarizer or reader ({} offline).
    n_cases, n_questions, n_decoys, pointer_mix, tail_tokens, bank_seed
        The synthetic bank (`bank.BankSpec`; ``bank_seed`` is its ``seed``).
    probe_n_questions, probe_n_decoys, probe_pointer_mix, probe_max_per_record, cut
        Questions mined from imported sessions (`probes.ProbeSpec`, `cases.probe_params`) and where
        those sessions are cut (`cuts.CUT_MODES`).
    n_boot, stats_seed : int
        Bootstrap resamples of the 95% intervals and their seed.
    draws : int
        Times a model reader is asked each question (the draw index is part of each request's identity, so
        every draw is its own ledger entry); 1 with the offline stand-ins, which answer the same every time.
    reader_temperature : float
        Sampling temperature of a model reader's requests (0 to 2); -1 (the default) keeps the model
        configuration's own (``model.temperature``).
    """

    strategy_names: tuple[str, ...] = ()
    window: int = 128_000
    output_ceiling: int = 32_000
    summarizer: str = "extractive"
    reader: str = "verbatim"
    model: Any = field(default_factory=dict)
    n_cases: int = 18
    n_questions: int = 178
    n_decoys: int = 8
    pointer_mix: Any = field(default_factory=lambda: {"assistant": 0.8, "user": 0.1, "tool": 0.1})
    tail_tokens: int = 8192
    bank_seed: int = 7
    probe_n_questions: int = 20
    probe_n_decoys: int = 2
    probe_pointer_mix: Any = "natural"
    probe_max_per_record: int = 2
    cut: str = "auto"
    n_boot: int = 2000
    stats_seed: int = 7
    draws: int = 1
    reader_temperature: float = -1.0

    def reader_options(self) -> dict[str, Any]:
        """Return the keyword arguments `readers.get_reader` takes from these parameters (endpoint, temperature)."""
        options: dict[str, Any] = {"model": self.model}
        if self.reader_temperature >= 0:
            options["temperature"] = float(self.reader_temperature)
        return options

    @classmethod
    def from_mapping(cls: type[P], m: Mapping[str, Any]) -> P:
        """Build the parameters from a mapping (a profile's, a notebook's globals), ignoring unknown keys.

        None leaves a field at its default; a list becomes a tuple where the field is one; an ``int`` field
        takes ``int(value)``.
        """
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if m.get(f.name) is None:
                continue
            kw[f.name] = _coerce(str(f.type), m[f.name])
        return cls(**kw)

    @classmethod
    def coerce(cls: type[P], given: ExamParams | Mapping[str, Any] | None) -> P:
        """Return `given` as this class: as it is when it is one, else its values over this class's defaults."""
        if isinstance(given, cls):
            return given
        if isinstance(given, ExamParams):
            return cls.from_mapping(given.as_dict())
        return cls.from_mapping(given or {})

    def as_dict(self) -> dict[str, Any]:
        """Return every parameter by name (values as held, not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def case_params(self) -> dict[str, Any]:
        """Return the mapping `cases.for_run` / `recorded.for_run` build the questions from.

        The bank's keys (its seed is ``bank_seed``), the probes' and the window: exactly what notebooks
        03 and 05 passed before the interface, so a bank is built the same way.
        """
        return dict(
            n_cases=self.n_cases,
            n_questions=self.n_questions,
            n_decoys=self.n_decoys,
            pointer_mix=self.pointer_mix,
            tail_tokens=self.tail_tokens,
            seed=self.bank_seed,
            probe_n_questions=self.probe_n_questions,
            probe_n_decoys=self.probe_n_decoys,
            probe_pointer_mix=self.probe_pointer_mix,
            probe_max_per_record=self.probe_max_per_record,
            cut=self.cut,
            window=self.window,
            output_ceiling=self.output_ceiling,
        )

    def context(self) -> CompactionContext:
        """Build the compaction context of the exam's projections: W, O and the summarizer."""
        from compaction_lab import summarize

        return CompactionContext(
            window=self.window,
            output_ceiling=self.output_ceiling,
            summarizer=summarize.get_summarizer(self.summarizer, self.model),
        )

    @property
    def names(self) -> list[str] | None:
        """The arms under test as the exam functions take them (None: every registered strategy)."""
        return list(self.strategy_names) or None


def _coerce(type_name: str, value: Any) -> Any:
    if type_name == "int" and not isinstance(value, bool):
        return int(value)
    if type_name.startswith("float") and not isinstance(value, bool):
        return float(value)
    if type_name.startswith("tuple"):
        return (value,) if isinstance(value, str) else tuple(value)
    return value


@dataclass(frozen=True)
class ExamRun(Generic[C, R]):
    """What `Exam.run` produced.

    Attributes
    ----------
    exam : str
        The exam's registered name.
    params : ExamParams
        The parameters it ran with (the exam's own `Exam.params_type`).
    cases : object
        What its `Exam.cases` step returned (``describe()`` says what it will ask).
    result : object
        What its `Exam.grade` step returned (the answer rows and the rest it measured).
    tables : mapping of str to DataFrame
        The tables by run-folder name, in the order they were written.
    ctx : CompactionContext
        The context its projections were made with (a later exam of the same notebook may share it).
    written : tuple of Path
        The table files written (none when the sessions were gathered in memory).
    """

    exam: str
    params: ExamParams
    cases: C
    result: R
    tables: Mapping[str, pd.DataFrame]
    ctx: CompactionContext
    written: tuple[Path, ...] = ()


_ANCHOR = re.compile(r"[a-z][a-z0-9_-]*")


@dataclass(frozen=True, eq=False)
class ExamBlock:
    """An exam's section of ``report.html``, as data: the report renders every registered exam's alike.

    Attributes
    ----------
    title : str
        The section's heading (plain text).
    anchor : str
        Its id in the page (lower-case letters, digits, ``-`` and ``_``, starting with a letter); the
        report's contents link to it.
    lines : tuple of str
        What it measured, one sentence each (plain text: the report escapes it).
    tables : tuple of (str, DataFrame)
        Caption and table, each shown collapsed under its caption and row count (escaped); a table
        without rows is left out.
    figures : tuple of str
        Stems of the figures it refers to (`compaction_lab.report.figures`); those the run saved are
        linked by their number on the page.
    """

    title: str
    anchor: str
    lines: tuple[str, ...] = ()
    tables: tuple[tuple[str, pd.DataFrame], ...] = ()
    figures: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Check the anchor (an id the page can link to) and that every table is a DataFrame."""
        if not _ANCHOR.fullmatch(self.anchor):
            raise ValueError(f"exam block {self.title!r}: anchor {self.anchor!r} is not [a-z][a-z0-9_-]*")
        for caption, table in self.tables:
            if not isinstance(table, pd.DataFrame):
                raise TypeError(f"exam block {self.title!r}: table {caption!r} is a {type(table).__name__}")


class Exam(ABC, Generic[C, R]):
    """One exam: its parameters, its cases, its grading and its tables.

    A subclass implements `cases`, `grade` and `tables`, names its tables in `writes`, sets `params_type`
    when it has parameters of its own, may give the report a block (`block`), and registers itself in
    `EXAMS` in its own module.

    Parameters
    ----------
    name : str
        The name it is registered under (`get` passes it); tables and `ExamRun.exam` say it.
    """

    #: The exam's parameters: `ExamParams` or a subclass with the exam's own fields and defaults.
    params_type: ClassVar[type[ExamParams]] = ExamParams

    #: The run-folder tables `tables` returns under the default parameters, in write order: the chain
    #: lists them as its notebook's outputs (`compaction_lab.run.chain.Step.writes`). Tables written only for
    #: some parameters (several draws) are not listed.
    writes: ClassVar[tuple[str, ...]] = ()

    #: Its notebook has cells of its own for it; False: the notebook's one `run_registered` cell runs it.
    own_cells: ClassVar[bool] = False

    def __init__(self, name: str = "") -> None:
        self.name = name or type(self).__name__

    def params(self, given: ExamParams | Mapping[str, Any] | None = None) -> ExamParams:
        """Return the exam's parameters: `given` (a mapping or parameters) over the exam's defaults."""
        return self.params_type.coerce(given)

    def defaults(self) -> dict[str, Any]:
        """Return the exam's default parameters by name."""
        return self.params_type().as_dict()

    @abstractmethod
    def cases(self, source: Source, params: ExamParams) -> C:
        """Return the exam's cases for the sessions of `source` (a run folder keeps its bank, and reuses it)."""

    @abstractmethod
    def grade(self, cases: C, params: ExamParams, ctx: CompactionContext, *, progress: bool = False) -> R:
        """Project every case, have the reader answer every question and grade the answers."""

    @abstractmethod
    def tables(self, cases: C, result: R, params: ExamParams) -> dict[str, pd.DataFrame]:
        """Return the tables the run folder keeps, by name, in the order they are written."""

    def block(self, run_dir: Path) -> ExamBlock | None:
        """Return the exam's section of ``report.html`` from a run folder's tables; None (the default): none.

        Called for every registered exam when the report is built, whether the exam ran or not: an exam
        whose tables are not in `run_dir` returns None.
        """
        del run_dir
        return None

    def run(
        self,
        source: Source,
        params: ExamParams | Mapping[str, Any] | None = None,
        *,
        cases: C | None = None,
        ctx: CompactionContext | None = None,
        progress: bool = False,
    ) -> ExamRun[C, R]:
        """Run the exam: cases, grading, tables; the tables are written when `source` is a run folder.

        Parameters
        ----------
        source : Path, str or Sources
            A run folder, or sessions gathered in memory.
        params : ExamParams or mapping, optional
            Over the exam's defaults (`params`).
        cases : optional
            The cases `cases` returned already (a notebook shows them before the exam runs): not built again.
        ctx : CompactionContext, optional
            The context of the projections; default `ExamParams.context`. Two exams of one notebook share
            one (the closed book's summarizer writes the recorded block's summaries too).
        progress : bool
            Progress bars.
        """
        p = self.params(params)
        got = cases if cases is not None else self.cases(source, p)
        ctx = ctx or p.context()
        result = self.grade(got, p, ctx, progress=progress)
        tables = self.tables(got, result, p)
        written: tuple[Path, ...] = ()
        if not isinstance(source, Sources):
            written = tuple(runfolder.save_table(df, Path(source), name) for name, df in tables.items())
        return ExamRun(self.name, p, got, result, tables, ctx, written)


#: The exams, registered by their own modules (ranked in chain order: closed book, recorded, open book).
EXAMS: Registry[type[Exam[Any, Any]]] = Registry("exam", packages=("compaction_lab.exam.exams",))


def names() -> tuple[str, ...]:
    """Return every registered exam's name, in chain order."""
    return EXAMS.names()


def get(name: str) -> Exam[Any, Any]:
    """Return the exam registered under `name`.

    Raises
    ------
    core.registry.UnknownName
        A ValueError naming `name` and listing the registered exams.
    """
    return EXAMS.get(name)(name)


def run_exam(
    name: str,
    source: Source,
    params: ExamParams | Mapping[str, Any] | None = None,
    *,
    cases: Any = None,
    ctx: CompactionContext | None = None,
    progress: bool = False,
) -> ExamRun[Any, Any]:
    """Run the exam registered under `name` on `source` (`Exam.run`); the one entry point of notebooks and CLI."""
    return get(name).run(source, params, cases=cases, ctx=ctx, progress=progress)


def registered_for(notebook: str) -> tuple[str, ...]:
    """Return the names of the exams registered for `notebook` (``notebook=`` of `EXAMS.register`), in rank order."""
    return tuple(e.name for e in EXAMS.entries() if e.meta.get("notebook") == notebook)


def writes_of(notebook: str) -> tuple[str, ...]:
    """Return the tables the exams registered for `notebook` write (their `Exam.writes`), in rank order."""
    return tuple(table for name in registered_for(notebook) for table in EXAMS.get(name).writes)


def run_registered(
    out: Path | str, params: Mapping[str, Any] | None, notebook: str, *, progress: bool = True, show: bool = True
) -> dict[str, ExamRun[Any, Any]]:
    """Run every exam registered for `notebook` that the notebook has no cells of its own for (`Exam.own_cells`).

    The one generic cell of an exam notebook: each such exam runs on the run folder `out` (cases, grading,
    tables written) with `params` (the notebook's globals: each exam takes its own parameters from them),
    and its block (`Exam.block`), when it gives one, is shown.

    Parameters
    ----------
    out : Path or str
        The run folder.
    params : mapping or None
        Parameters by name over each exam's defaults (`ExamParams.from_mapping`: unknown names ignored).
    notebook : str
        The notebook's stem (``"03_closed_book_exam"``).
    progress : bool
        Progress bars.
    show : bool
        Show each block's lines and tables (IPython's display; printed outside a notebook).

    Returns
    -------
    dict of str to ExamRun
        The runs, by exam name, in rank order (empty when every exam of `notebook` has cells of its own).
    """
    runs: dict[str, ExamRun[Any, Any]] = {}
    for name in registered_for(notebook):
        ex = get(name)
        if ex.own_cells:
            continue
        runs[name] = ex.run(out, dict(params or {}), progress=progress)
        block = ex.block(Path(out)) if show else None
        if block is not None:
            _show(block)
    return runs


def _show(block: ExamBlock) -> None:
    """Show a block in a notebook: its title and lines, then each table (printed when IPython is absent)."""
    show: Callable[..., Any] = print
    try:
        from IPython.display import display

        show = display
    except ImportError:  # pragma: no cover - IPython ships with the notebooks' kernel
        pass
    print("\n".join([block.title, *block.lines]))
    for caption, table in block.tables:
        print(caption)
        show(table)


__all__ = [
    "EXAMS",
    "Exam",
    "ExamBlock",
    "ExamParams",
    "ExamRun",
    "Source",
    "get",
    "names",
    "registered_for",
    "run_exam",
    "run_registered",
    "writes_of",
]
