"""Every figure of the suite, registered where it is drawn, and `draw`: name a figure once, get it drawn and saved.

One module per notebook holds that notebook's figures (``composition``: 01, ``anatomy``: 02, ``exam``: 03,
``cost``: 04, ``open_book``: 05, ``continuation``: 06, ``decision``: 07; ``sweep``: the sweep page's,
drawn by no notebook). Each figure function
takes tidy DataFrames (the run folder's tables) and returns an Altair chart; nothing here reads files or
computes results. Each registers itself with `register`: its file stem in a run folder's ``figures/``, its
place among its notebook's figures, its title, the notebook that draws it and, where it redraws one, the
seed report's figure number. The report shows them in `run_figures` order: the lead figure (the
decision, drawn by notebook 07) first, then notebook by notebook in chain order; it numbers them by
their place on its page (a chart's own title carries no number, so a run that measured fewer figures
still counts 1, 2, 3 down the page). A stem is a stable file name, not a number to cite. Adding a
figure touches its own module and nothing else: the report lists it
(`run_figures`), the chain knows which notebook draws it (`compaction_lab.run.chain`), and the notebook
names it once::

    charts.draw(out, "fig2_composition", comp, pointers)

which draws it, writes its PNG, SVG and HTML under the run folder's ``figures/`` and returns the chart to
show. A figure that names the run-folder tables it draws from (``register(..., reads=("exam_recall",))``)
needs no cell of its own: the share notebook's one generic cell (`charts.draw_registered`) draws it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, TypeVar, cast

from compaction_lab.core import runfolder
from compaction_lab.core.registry import Entry, Registry
from compaction_lab.report import theme

#: The figure registry: every module of this package is imported the first time it is read.
FIGURES: Registry[Callable[..., Any]] = Registry("figure", packages=("compaction_lab.report.figures",))

F = TypeVar("F", bound=Callable[..., Any])

#: The notebook that draws every figure registered with ``reads`` (`compaction_lab.run.chain`'s last).
SHARE_NOTEBOOK = "07_share"


def register(
    stem: str,
    *,
    rank: int,
    title: str,
    notebook: str | None | EllipsisType = ...,
    seed: int | None = None,
    lead: bool = False,
    reads: Sequence[str] = (),
    arguments: Callable[..., Sequence[Any]] | None = None,
) -> Callable[[F], F]:
    """Register the decorated figure function in `FIGURES`.

    Parameters
    ----------
    stem : str
        Its file name (without extension) in a run folder's ``figures/`` (a sweep's figures: the start of
        their file names, which the sweep page extends with the parameters drawn).
    rank : int
        Its place among the figures of its notebook (and of a sweep's page).
    title : str
        The title the chart shows and the report captions it with (after the number the page gives it).
    notebook : str or None
        The chain notebook that draws it (`compaction_lab.run.chain`); None for a sweep's figures, drawn
        after the runs by the sweep page. Given unless `reads` is: such a figure is the share notebook's
        (`SHARE_NOTEBOOK`).
    seed : int, optional
        The number of the seed report's figure it redraws (docs/reference/seed-compaction-report.txt).
    lead : bool
        It opens the report (the decision figure), before every notebook's figures.
    reads : sequence of str
        The run-folder tables it draws from (``"exam_recall"``): the share notebook draws it from them
        (`compaction_lab.report.charts.draw_registered`), with no cell naming it; "not measured" when
        one is missing.
    arguments : callable, optional
        Turns those tables (in `reads` order) into the figure function's positional arguments; default:
        the tables themselves.

    Returns
    -------
    callable
        The decorator. It returns the function with every argument made safe for Vega first
        (`theme.vega_safe`: a DataFrame's text columns and names, a parameter's name), so no session
        id, model name or label from a log can break a figure's spec, expression or sort list, and
        two different ones stay two categories.
    """
    reads = tuple(reads)
    if notebook is ...:
        if not reads:
            raise TypeError(f"figure {stem!r}: name the notebook that draws it (or the tables it reads)")
        notebook = SHARE_NOTEBOOK
    if reads and notebook != SHARE_NOTEBOOK:
        raise ValueError(f"figure {stem!r}: a figure that reads tables is drawn by {SHARE_NOTEBOOK}, not {notebook}")
    if arguments is not None and not reads:
        raise ValueError(f"figure {stem!r}: arguments are made from the tables it reads; it reads none")

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def safe(*args: Any, **kw: Any) -> Any:
            with theme.unchecked_parts():  # checked whole where it is saved or shown (`theme.checked_spec`)
                return fn(*theme.vega_safe(args), **theme.vega_safe(kw))

        drawn = cast(F, safe)
        FIGURES.add(
            stem,
            drawn,
            rank=rank,
            title=title,
            notebook=notebook,
            seed=seed,
            lead=lead,
            reads=reads,
            arguments=arguments,
        )
        return drawn

    return decorate


@dataclass(frozen=True)
class FigureSpec:
    """One registered figure.

    Attributes
    ----------
    stem : str
        Its file name (without extension) in a run folder's ``figures/``.
    title : str
        The title the chart shows and the report captions it with.
    draw : callable
        The function that draws it.
    notebook : str or None
        The notebook that draws and saves it; None for a sweep page's figure.
    seed : int or None
        The seed report's figure it redraws, if any.
    lead : bool
        It opens the report (the decision figure).
    reads : tuple of str
        The run-folder tables it is drawn from by the share notebook's generic cell; empty: a notebook
        cell names it.
    arguments : callable or None
        Turns those tables into its function's positional arguments (None: the tables themselves).
    """

    stem: str
    title: str
    draw: Callable[..., Any]
    notebook: str | None
    seed: int | None = None
    lead: bool = False
    reads: tuple[str, ...] = ()
    arguments: Callable[..., Sequence[Any]] | None = None

    def caption(self) -> str:
        """Its caption before the page numbers it: the title, and the seed report's figure it redraws."""
        return self.title + (f" (the seed report's figure {self.seed})" if self.seed else "")


def _reading_order(entry: Entry[Callable[..., Any]]) -> tuple[bool, str, int, str]:
    """Sort key of the report's order: the lead figure, then by the notebook that draws it (chain order), then rank."""
    return (not entry.meta.get("lead", False), str(entry.meta["notebook"]), entry.rank, entry.name)


def _run_entries() -> list[Entry[Callable[..., Any]]]:
    return sorted((e for e in FIGURES.entries() if e.meta["notebook"] is not None), key=_reading_order)


def _spec(entry: Entry[Callable[..., Any]]) -> FigureSpec:
    """Build the `FigureSpec` of a registry entry."""
    meta = entry.meta
    return FigureSpec(
        entry.name,
        meta["title"],
        entry.obj,
        meta["notebook"],
        meta.get("seed"),
        meta.get("lead", False),
        tuple(meta.get("reads", ())),
        meta.get("arguments"),
    )


def figure(stem: str) -> FigureSpec:
    """Return the registered figure (a run's or a sweep's) whose file stem is `stem`.

    Raises
    ------
    compaction_lab.core.registry.UnknownName
        When no figure has that stem (the message lists the known ones).
    """
    return _spec(FIGURES.entry(stem))


def title_of(stem: str) -> str:
    """Return a figure's title, from the registry (without a number: the report numbers figures by page)."""
    return figure(stem).title


def run_figures() -> tuple[FigureSpec, ...]:
    """Return every figure a notebook draws into a run folder, in the report's order (`_reading_order`)."""
    return tuple(_spec(e) for e in _run_entries())


def sweep_figures() -> tuple[FigureSpec, ...]:
    """Return every figure of a sweep's page (``sweep.html``), in reading order; no notebook draws these."""
    return tuple(_spec(e) for e in FIGURES.entries() if e.meta["notebook"] is None)


def draw(run: str | os.PathLike[str] | Any, stem: str, *data: Any, **kw: Any) -> Any:
    """Draw a registered figure, save it under the run folder's name for it, and return the chart to show.

    Parameters
    ----------
    run : str, Path or run result
        The run folder (a notebook's ``out``), or anything with a ``run_dir`` attribute.
    stem : str
        The figure's registered stem (``"fig2_composition"``).
    *data, **kw
        What the figure's function takes (its tables, then options such as ``width``).

    Returns
    -------
    altair chart
        The chart, after its PNG, SVG and HTML are written to ``figures/<stem>.*`` (`theme.save_chart`).
    """
    chart = figure(stem).draw(*data, **kw)
    folder = Path(getattr(run, "run_dir", run))
    theme.save_chart(chart, runfolder.figure_stem(folder, stem))
    return chart


__all__ = [
    "FIGURES",
    "SHARE_NOTEBOOK",
    "FigureSpec",
    "draw",
    "figure",
    "register",
    "run_figures",
    "sweep_figures",
    "title_of",
]
