"""One registry pattern for every extension: arms, importers, summarizers, readers, exams, figures, commands.

An extension registers itself where it is defined, with a decorator (as Inspect AI registers solvers and
scorers)::

    from compaction_lab.exam.exam import EXAMS, Exam

    @EXAMS.register("my-exam", rank=40, notebook="03_closed_book_exam")
    class MyExam(Exam): ...

or, for an instance or a module, without a decorator (``STRATEGIES.add("my-arm", MyStrategy(), rank=55)``).

A `Registry` knows the packages its extensions live in and imports every module of them the first time it
is asked what it holds (`discover`), so a new module is found without being listed anywhere: adding an arm,
an importer or a figure touches only its own file. A test may point a registry at one more package (a
throwaway one in a temporary folder, `Registry.add_package`).

Entries are listed by ``rank`` (lower first), then by name: the order tables and charts show them in.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
S = TypeVar("S")

#: The rank of an entry that does not say where it belongs: after every ranked one.
UNRANKED = 1_000_000


class UnknownName(ValueError):
    """A name no extension registered (the message names the kind and lists the known names)."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered extension: its name, the object, where it is listed and what else it declared."""

    name: str
    obj: T
    rank: int = UNRANKED
    meta: dict[str, Any] = field(default_factory=dict)


class Registry(Generic[T]):
    """Extensions of one kind, registered by decorator and discovered by importing their packages.

    Parameters
    ----------
    kind : str
        What an entry is, as error messages say it (``"strategy"``, ``"importer"``).
    packages : tuple of str
        Packages whose every module is imported before the registry is read, so their decorators run.
        Modules whose name starts with ``_`` are skipped. Each package holds extensions only: shared
        machinery lives beside it, never in it, so no list of what not to import is needed.
    """

    def __init__(self, kind: str, packages: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._packages = list(packages)
        self._entries: dict[str, Entry[T]] = {}
        self._discovered: set[str] = set()
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ registering

    def register(self, name: str, *, rank: int = UNRANKED, **meta: Any) -> Callable[[S], S]:
        """Register the decorated object under `name` (decorator; ``rank`` orders listings; ``meta`` is kept).

        Raises
        ------
        ValueError
            When another object already holds `name` (re-registering the same object is allowed: a
            module imported twice under one name).
        """

        def decorate(obj: S) -> S:
            # The decorated object keeps its own type for the type checker (a class stays a class).
            self.add(name, cast(T, obj), rank=rank, **meta)
            return obj

        return decorate

    def add(self, name: str, obj: T, *, rank: int = UNRANKED, **meta: Any) -> T:
        """Register `obj` under `name` without a decorator (an instance, a constant)."""
        with self._lock:
            held = self._entries.get(name)
            if held is not None and held.obj is not obj and _origin(held.obj) != _origin(obj):
                raise ValueError(f"{self.kind} {name!r} registered twice ({_origin(held.obj)}, {_origin(obj)})")
            self._entries[name] = Entry(name, obj, rank, dict(meta))
        return obj

    def add_package(self, package: str) -> None:
        """Discover one more package's modules (a plug-in package, or a test's throwaway one)."""
        with self._lock:
            if package not in self._packages:
                self._packages.append(package)

    def remove_package(self, package: str) -> None:
        """Stop discovering `package` (a test's throwaway package); what it registered stays until `remove`."""
        with self._lock:
            if package in self._packages:
                self._packages.remove(package)
            self._discovered.discard(package)

    def remove(self, name: str) -> None:
        """Forget `name` (a test that registered a throwaway extension cleans up)."""
        with self._lock:
            self._entries.pop(name, None)

    # ------------------------------------------------------------------ reading

    def discover(self) -> None:
        """Import every module of the registry's packages once, so each registers what it defines."""
        with self._lock:
            for package in list(self._packages):
                if package in self._discovered:
                    continue
                self._discovered.add(package)
                pkg = importlib.import_module(package)
                for mod in pkgutil.iter_modules(getattr(pkg, "__path__", [])):
                    if mod.name.startswith("_"):
                        continue
                    importlib.import_module(f"{package}.{mod.name}")

    def entries(self) -> list[Entry[T]]:
        """Every entry, by rank then name."""
        self.discover()
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: (e.rank, e.name))

    def names(self) -> tuple[str, ...]:
        """Every registered name, by rank then name."""
        return tuple(e.name for e in self.entries())

    def entry(self, name: str) -> Entry[T]:
        """Return the entry registered under `name`.

        Raises
        ------
        UnknownName
            Naming the kind and listing the known names.
        """
        self.discover()
        with self._lock:
            found = self._entries.get(name)
        if found is None:
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or '(none)'}")
        return found

    def get(self, name: str) -> T:
        """Return the object registered under `name` (`UnknownName` when none is)."""
        return self.entry(name).obj

    def __contains__(self, name: object) -> bool:
        """Tell whether `name` is registered (after discovery)."""
        self.discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        """Iterate over the registered names, by rank then name."""
        return iter(self.names())

    def __len__(self) -> int:
        """Count the registered names."""
        return len(self.names())


def _origin(obj: object) -> str:
    """Where `obj` was defined, so a module imported under two names is not a clash."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    target = obj if isinstance(obj, type) or callable(obj) else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
