"""One place for chain-wide defaults (issue 49): the notebooks' parameters cells agree with each other and the library.

A parameter such as ``window`` is declared in several notebooks' ``parameters`` cells and again in the
exams' parameters (`ExamParams` and the subclasses in ``exam/exams/``). Here: a parameter declared in
several notebooks has one type and one default; where an exam's parameters have the field, the notebook's
default is the dataclass's; and every parameter a notebook declares is used by it.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

import nbformat
import pytest

from compaction_lab.core import paths
from compaction_lab.exam.exam import EXAMS, ExamParams, registered_for
from compaction_lab.run import chain, params
from compaction_lab.run.parameter_rules import RUNNER_PARAMETERS

NOTEBOOKS = chain.names()


def _params_types(notebook: str) -> list[type[ExamParams]]:
    """The parameters of the exams registered for `notebook`; `ExamParams` for a notebook with none."""
    return [EXAMS.get(name).params_type for name in registered_for(notebook)] or [ExamParams]


def _exam_fields(notebook: str) -> set[str]:
    """The fields of the parameters of the exams registered for `notebook` (none: no exam is)."""
    return {f.name for name in registered_for(notebook) for f in dataclasses.fields(EXAMS.get(name).params_type)}


def _redefined(notebook: str) -> set[str]:
    """The fields an exam of `notebook` gives a default of its own (the open book's ``reader``)."""
    base = ExamParams().as_dict()
    return {k for t in _params_types(notebook) for k, v in t().as_dict().items() if k in base and not _same(v, base[k])}


def _plain(value: Any) -> Any:
    """A value as a parameters cell writes it: tuples as lists, nested too."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal as a run receives them: ``()`` and ``[]`` are, ``True`` and ``1`` are not."""
    a, b = _plain(a), _plain(b)
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _names_read(notebook: str) -> set[str]:
    """Every name the notebook's code cells read, its ``parameters`` cell apart (IPython's ``%``/``!`` lines skipped)."""
    book = nbformat.read(paths.notebook_path(notebook), as_version=4)
    out: set[str] = set()
    for cell in book.cells:
        if cell.cell_type != "code" or "parameters" in cell.get("metadata", {}).get("tags", []):
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(source, filename=f"{notebook} cell {cell.get('id', '?')}")
        out |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return out


def _unused(notebook: str) -> list[str]:
    """The parameters `notebook` declares and nothing uses: no code cell reads them, no exam, not the runner."""
    read = _names_read(notebook) | _exam_fields(notebook) | set(RUNNER_PARAMETERS)
    return sorted(k for k in params.declared_parameters(notebook) if k not in read)


#: Declared but unused today, as (notebook, parameter); the notebooks' owner removes them, then this goes.
KNOWN_UNUSED: frozenset[tuple[str, str]] = frozenset()


def test_a_parameter_declared_in_several_notebooks_has_one_type_and_one_default():
    declared = {nb: params.declared_parameters(nb) for nb in NOTEBOOKS}
    names = sorted({k for d in declared.values() for k in d})
    shared = [k for k in names if sum(k in d for d in declared.values()) > 1]
    assert len(shared) >= 20, shared  # window, output_ceiling, the bank's ...: the test reads the real cells
    differ = {}
    for key in shared:
        # an exam's own default (the open book's reader) is held to its exam's parameters below, not to the others
        takers = [nb for nb in NOTEBOOKS if key in declared[nb] and key not in _redefined(nb)]
        first = declared[takers[0]][key]
        for nb in takers[1:]:
            d = declared[nb][key]
            if (d.type, d.nullable, d.has_default) != (first.type, first.nullable, first.has_default) or not _same(
                d.default, first.default
            ):
                differ[key] = {n: (declared[n][key].type, declared[n][key].default) for n in takers}
    assert differ == {}, differ


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_a_notebooks_default_is_its_exams_default(notebook):
    declared = params.declared_parameters(notebook)
    wrong = {}
    for params_type in _params_types(notebook):
        defaults = params_type().as_dict()
        for key in sorted(set(declared) & set(defaults)):
            d = declared[key]
            if not d.has_default or not _same(d.default, defaults[key]):
                wrong[f"{params_type.__name__}.{key}"] = (d.default, defaults[key])
    assert wrong == {}, f"{notebook}: (the notebook's default, the dataclass's) {wrong}"


def test_the_exam_notebooks_share_most_of_their_parameters_with_the_dataclasses():
    """The comparison above has something to compare: each exam notebook declares its exam's parameters."""
    for notebook in {e.meta["notebook"] for e in EXAMS.entries()}:
        fields = _exam_fields(notebook)
        assert len(fields & set(params.declared_parameters(notebook))) >= 15, notebook


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_parameter_a_notebook_declares_is_used_by_it(notebook):
    unused = {(notebook, k) for k in _unused(notebook)}
    assert unused - KNOWN_UNUSED == set(), f"declared in the parameters cell, used by nothing: {sorted(unused)}"
    assert {u for u in KNOWN_UNUSED if u[0] == notebook} <= unused, "no longer unused: drop it from KNOWN_UNUSED"


def test_a_parameter_named_only_in_a_comment_or_a_string_is_unused(tmp_path, monkeypatch):
    """The usage check reads code, not text: a name in a comment, a string or an assignment is not a use."""
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    book = nbformat.v4.new_notebook(metadata={**kernel, "language_info": {"name": "python"}})
    book.cells = [
        nbformat.v4.new_code_cell(
            "window: int = 1000\nstale: int = 2\nquoted: str = ''\nlost: int = 3", metadata={"tags": ["parameters"]}
        ),
        nbformat.v4.new_code_cell("%matplotlib inline\n# stale is gone\nprint('quoted', f'{window}')\nlost = 4"),
    ]
    nbformat.write(book, tmp_path / "99_probe.ipynb")
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", tmp_path)
    assert _unused("99_probe") == ["lost", "quoted", "stale"]
