"""`core.registry.Registry`: registering, rank order, name clashes, unknown names, discovery of a package's modules."""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compaction_lab.core.registry import UNRANKED, Registry, UnknownName


@pytest.fixture
def make_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, str]], str]]:
    """Write a uniquely named package of the given modules into `tmp_path`, importable; forget it afterwards.

    ``{pkg}`` in a module's text stands for the package's name.
    """
    monkeypatch.syspath_prepend(str(tmp_path))
    made: list[str] = []

    def make(modules: dict[str, str]) -> str:
        name = f"registry_test_{uuid.uuid4().hex[:12]}"
        pkg = tmp_path / name
        pkg.mkdir()
        for module, text in {"__init__": "", **modules}.items():
            (pkg / f"{module}.py").write_text(text.replace("{pkg}", name), encoding="utf-8")
        made.append(name)
        importlib.invalidate_caches()  # the import system may have listed tmp_path before these files existed
        return name

    yield make
    for name in made:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]


def test_register_by_decorator_and_by_add():
    reg: Registry[object] = Registry("widget")

    @reg.register("spinner", rank=2, colour="red")
    def spinner() -> str:
        return "spun"

    assert spinner() == "spun"  # the decorator gives back what it decorated
    knob = reg.add("knob", object(), rank=1)
    assert reg.get("spinner") is spinner and reg.get("knob") is knob
    assert reg.entry("spinner").meta == {"colour": "red"} and reg.entry("spinner").rank == 2
    assert "knob" in reg and "lever" not in reg and len(reg) == 2


def test_names_are_listed_by_rank_then_name_unranked_last():
    reg: Registry[int] = Registry("number")
    for name, rank in (("c", 20), ("b", 10), ("z", UNRANKED), ("a", 20)):
        reg.add(name, len(name), rank=rank)
    reg.add("y", 1)  # no rank: after every ranked entry
    assert reg.names() == ("b", "a", "c", "y", "z")
    assert list(reg) == list(reg.names())


def test_a_name_taken_by_another_object_is_an_error():
    reg: Registry[object] = Registry("widget")

    class One:
        pass

    class Two:
        pass

    reg.add("w", One)
    reg.add("w", One)  # the same object again (a module imported twice): allowed
    with pytest.raises(ValueError, match="widget 'w' registered twice"):
        reg.add("w", Two)
    assert reg.get("w") is One


def test_unknown_name_says_the_kind_and_lists_the_known_names():
    reg: Registry[int] = Registry("gadget")
    reg.add("beta", 2, rank=2)
    reg.add("alpha", 1, rank=1)
    with pytest.raises(UnknownName, match=r"unknown gadget 'gamma'; known: alpha, beta$"):
        reg.get("gamma")
    assert issubclass(UnknownName, ValueError)  # callers catching ValueError still do
    with pytest.raises(UnknownName, match=r"known: \(none\)"):
        Registry("gadget").entry("x")


def test_remove_forgets_a_name():
    reg: Registry[int] = Registry("number")
    reg.add("one", 1)
    reg.remove("one")
    reg.remove("never-there")  # no error
    assert reg.names() == ()


def _registers(name: str, rank: int) -> str:
    return (
        f"from {{pkg}}.shared import IMPORTS, REG\nIMPORTS.append({name!r})\nREG.add({name!r}, {name!r}, rank={rank})\n"
    )


_SHARED = (
    "from compaction_lab.core.registry import Registry\nIMPORTS = []\nREG = Registry('thing', packages=('{pkg}',))\n"
)


def test_discovery_imports_every_module_of_its_packages_once_except_private(make_package):
    pkg = make_package(
        {
            "shared": _SHARED,
            "first": _registers("first", 2),
            "second": _registers("second", 1),
            "_private": "raise RuntimeError('a private module is not imported')\n",
        }
    )
    shared = importlib.import_module(f"{pkg}.shared")
    assert f"{pkg}.first" not in sys.modules  # nothing is imported before the registry is read
    assert shared.REG.names() == ("second", "first")
    assert shared.REG.get("first") == "first"
    shared.REG.names()
    assert sorted(shared.IMPORTS) == ["first", "second"]  # each module imported once
    assert f"{pkg}._private" not in sys.modules


def test_add_package_discovers_one_more_package(make_package):
    home = make_package({"shared": _SHARED})
    plugins = make_package({"plugin": _registers("plugin", 5).replace("{pkg}", home)})
    shared = importlib.import_module(f"{home}.shared")
    assert shared.REG.names() == ()
    shared.REG.add_package(plugins)
    shared.REG.add_package(plugins)  # twice: still one package
    assert shared.REG.names() == ("plugin",) and shared.IMPORTS == ["plugin"]
    shared.REG.remove("plugin")
    assert shared.REG.names() == ()  # removed, and not discovered again
