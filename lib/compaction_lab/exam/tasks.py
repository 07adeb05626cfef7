"""The exam and cost stages' per-session work as tasks on the engine, when a scheduler is given.

Mining a session's questions, compacting and grading a case, pricing a case and replaying a session's
recorded cache usage are each a pure function of one session (or case) and the run's parameters. With
no scheduler given (``auto``: no ``--scheduler``, no ``COMPACTION_LAB_SCHEDULER``, no profile key) they
run here, one after another, as they always did. With one given (``sync``, ``local`` or an address;
a run refuses ``pool``, which would fork its kernel), `each` submits one task per item to
`compaction_lab.engine.scheduler.open_engine` and gathers the results in submission order, so a folder of hundreds of sessions scales with the workers
and the tables stay the same byte for byte.

A task's function must be importable by name (a module-level function) and its arguments picklable.

Design: docs/architecture.md#the-engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from compaction_lab.engine.scheduler import AUTO, Engine, Handle, open_engine, scheduler_setting

T = TypeVar("T")
U = TypeVar("U")

__all__ = ["each", "given_scheduler"]


def given_scheduler() -> str | None:
    """Return the scheduler the run was given (`scheduler_setting`), or None for ``auto`` (work stays here)."""
    choice = scheduler_setting()
    return None if choice == AUTO else choice


def each(
    fn: Callable[..., U],
    items: Iterable[T],
    *args: Any,
    progress: bool = False,
    desc: str = "",
    unit: str = "task",
) -> list[U]:
    """Return ``[fn(item, *args) for item in items]``, as tasks on the engine when a scheduler is given.

    Results come back in the order of `items` whoever computed them; an exception a task raised is
    raised here.
    """
    todo: Sequence[T] = list(items)
    choice = given_scheduler()
    if choice is None:
        return [fn(x, *args) for x in _bar(todo, progress, desc, unit, len(todo))]
    with open_engine(choice, announce=False) as eng:

        def start(e: Engine, item: T) -> Handle[U]:
            return e.submit(fn, item, *args)

        out: list[U] = []
        for _, handle in _bar(eng.ordered(todo, start), progress, desc, unit, len(todo)):
            out.append(handle.result())
            handle.release()
        return out


def _bar(it: Iterable[Any], progress: bool, desc: str, unit: str, total: int) -> Iterable[Any]:
    if not progress:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, unit=unit, total=total)
