"""Every figure of the suite, registered where it is drawn, and `draw`: name a figure once, get it drawn and saved.

One module per notebook holds that notebook's figures (``composition``: 01, ``anatomy``: 02, ``exam``: 03,
``cost``: 04, ``open_book``: 05; ``sweep``: the sweep page's, drawn by no notebook). Each figure function
takes tidy DataFrames (the run folder's tables) and returns an Altair chart; nothing here reads files or
computes results. Each registers itself with `register`: its file stem in a run folder's ``figures/``, its
place in reading order, its title (the one the chart and the report both show) and the notebook that
draws it. Adding a figure touches its own module and nothing else: the report lists it
(`run_figures`), the chain knows which notebook draws it (`compaction_lab.run.chain`), and the notebook
names it once::

    charts.draw(out, "fig2_composition", comp, pointers)

which draws it, writes its PNG, SVG and HTML under the run folder's ``figures/`` and returns the chart to
show.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from compaction_lab.core import runfolder
from compaction_lab.core.registry import Entry, Registry
from compaction_lab.report import theme

#: The figure registry: every module of this package is imported the first time it is read.
FIGURES: Registry[Callable[..., Any]] = Registry("figure", packages=("compaction_lab.report.figures",))

F = TypeVar("F", bound=Callable[..., Any])


def register(stem: str, *, rank: int, title: str, notebook: str | None) -> Callable[[F], F]:
    """Register the decorated figure function in `FIGURES`.

    Parameters
    ----------
    stem : str
        Its file name (without extension) in a run folder's ``figures/`` (a sweep's figures: the start of
        their file names, which the sweep page extends with the parameters drawn).
    rank : int
        Its place in reading order (the report's gallery lists figures by it).
    title : str
        The title the chart shows and the report captions it with.
    notebook : str or None
        The chain notebook that draws it (`compaction_lab.run.chain`); None for a sweep's figures, drawn
        after the runs by the sweep page.

    Returns
    -------
    callable
        The decorator. It returns the function with every argument made safe for Vega first
        (`theme.vega_safe`: a DataFrame's text columns and names, a parameter's name), so no session
        id, model name or label from a log can break a figure's spec, expression or sort list, and
        two different ones stay two categories.
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def safe(*args: Any, **kw: Any) -> Any:
            return fn(*theme.vega_safe(args), **theme.vega_safe(kw))

        drawn = cast(F, safe)
        FIGURES.add(stem, drawn, rank=rank, title=title, notebook=notebook)
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
    """

    stem: str
    title: str
    draw: Callable[..., Any]
    notebook: str | None


def _spec(entry: Entry[Callable[..., Any]]) -> FigureSpec:
    """Build the `FigureSpec` of a registry entry."""
    return FigureSpec(entry.name, entry.meta["title"], entry.obj, entry.meta["notebook"])


def figure(stem: str) -> FigureSpec:
    """Return the registered figure (a run's or a sweep's) whose file stem is `stem`.

    Raises
    ------
    compaction_lab.core.registry.UnknownName
        When no figure has that stem (the message lists the known ones).
    """
    return _spec(FIGURES.entry(stem))


def title_of(stem: str) -> str:
    """Return a figure's title, from the registry."""
    return figure(stem).title


def run_figures() -> tuple[FigureSpec, ...]:
    """Return every figure a notebook draws into a run folder, in reading order."""
    return tuple(_spec(e) for e in FIGURES.entries() if e.meta["notebook"] is not None)


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
    "FigureSpec",
    "draw",
    "figure",
    "register",
    "run_figures",
    "sweep_figures",
    "title_of",
]
