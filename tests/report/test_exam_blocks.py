"""An exam and a figure reach the report from their own file (issue 49, acceptance 1).

A throwaway package in a temporary folder holds one exam module (registered for notebook 03, with a block)
and one figure module (naming the table it reads). Pointing the registries at it (`Registry.add_package`)
is all it takes: the chain lists the exam's table among notebook 03's outputs and the figure among
notebook 07's, `exam.run_registered` runs the exam and writes its table, `charts.draw_registered` draws
the figure, and `render.build_index` shows the exam's block and the figure. The registries are restored
afterwards, and then neither is listed.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.core.profile import Profile
from compaction_lab.exam import exam
from compaction_lab.exam.exam import ExamBlock
from compaction_lab.report import charts, render, share
from compaction_lab.report.figures import FIGURES
from compaction_lab.run import chain

EXAM = "throwaway-reach"
TABLE = "exam_throwaway_reach"
FIGURE = "fig_throwaway_reach"
UNMEASURED = "fig_throwaway_unmeasured"

EXAM_MODULE = f'''"""A throwaway exam: one row per question asked, and a block of its own."""
from dataclasses import dataclass

import pandas as pd

from compaction_lab.core import runfolder
from compaction_lab.exam.exam import EXAMS, Exam, ExamBlock, ExamParams


@dataclass(frozen=True)
class ReachParams(ExamParams):
    reach_rows: int = 3


@EXAMS.register("{EXAM}", rank=15, notebook="03_closed_book_exam")
class ReachExam(Exam):
    params_type = ReachParams
    writes = ("{TABLE}",)

    def cases(self, source, params):
        return [f"case-{{i}}" for i in range(params.reach_rows)]

    def grade(self, cases, params, ctx, *, progress=False):
        return pd.DataFrame({{"case_id": cases, "window": ctx.window, "note": "<b>kept</b>"}})

    def tables(self, cases, result, params):
        return {{"{TABLE}": result}}

    def block(self, run_dir):
        path = runfolder.table_path(run_dir, "{TABLE}")
        if not path.exists():
            return None
        table = pd.read_parquet(path)
        return ExamBlock(
            "Reach <exam>",
            "reach",
            (f"{{len(table)}} cases reached & graded",),
            (("Reach per case", table), ("Nothing", table.iloc[:0])),
            ("{FIGURE}", "fig_no_such_figure"),
        )
'''

FIGURE_MODULE = f'''"""Throwaway figures drawn from the tables they name."""
import altair as alt

from compaction_lab.report.figures import register


@register("{FIGURE}", rank=90, title="Throwaway reach per case", reads=("{TABLE}",))
def {FIGURE}(table):
    return alt.Chart(table).mark_bar().encode(x="case_id:N", y="window:Q").properties(title="Throwaway reach per case")


@register(
    "{UNMEASURED}",
    rank=91,
    title="Throwaway from a table never written",
    reads=("exam_never_written", "{TABLE}"),
    arguments=lambda never, table: (never, table),
)
def {UNMEASURED}(never, table):
    return alt.Chart(never).mark_point()
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway package holding one exam and one figure module, discovered by both registries."""
    package = f"throwaway_reach_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "plugins" / package
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "reach_exam.py").write_text(EXAM_MODULE)
    (root / "reach_figure.py").write_text(FIGURE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    exam.EXAMS.add_package(package)
    FIGURES.add_package(package)
    try:
        yield package
    finally:
        for registry, names in ((exam.EXAMS, (EXAM,)), (FIGURES, (FIGURE, UNMEASURED))):
            registry.remove_package(package)
            for name in names:
                registry.remove(name)
        for mod in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
            sys.modules.pop(mod)


def _run_folder(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / runfolder.RUN_JSON).write_text('{"started": "2026-01-01T00:00:00Z"}')
    return run_dir


def _profile() -> Profile:
    return Profile("throwaway", "a throwaway exam and figure", ("03_closed_book_exam", "07_share"))


def test_the_chain_lists_the_exams_tables_and_the_figure_from_their_own_files(plugin):
    step = chain.step("03_closed_book_exam")
    assert f"{TABLE}.parquet" in step.writes and step.mark in step.writes
    # Rank order: its rank (15) puts its table between the closed book's (10) and the recorded block's (20).
    tables = [w for w in step.writes if w.endswith(".parquet")]
    assert tables.index("exam_sensitivity.parquet") < tables.index(f"{TABLE}.parquet")
    assert tables.index(f"{TABLE}.parquet") < tables.index("recorded_compactions.parquet")
    assert exam.registered_for("03_closed_book_exam") == ("closed", EXAM, "recorded")
    assert {FIGURE, UNMEASURED} <= set(chain.step("07_share").figures)
    assert all(FIGURE not in chain.step(nb).figures for nb in chain.names() if nb != "07_share")


def test_the_chain_forgets_them_once_their_files_are_gone(plugin):
    assert f"{TABLE}.parquet" in chain.step("03_closed_book_exam").writes
    exam.EXAMS.remove_package(plugin)
    exam.EXAMS.remove(EXAM)
    FIGURES.remove_package(plugin)
    FIGURES.remove(FIGURE)
    FIGURES.remove(UNMEASURED)
    assert f"{TABLE}.parquet" not in chain.step("03_closed_book_exam").writes
    assert FIGURE not in chain.step("07_share").figures


def test_run_registered_runs_only_the_exams_without_cells_of_their_own(plugin, tmp_path, capsys):
    run_dir = _run_folder(tmp_path)
    runs = exam.run_registered(run_dir, {"reach_rows": 2, "window": 4000, "unknown": 1}, "03_closed_book_exam")
    assert list(runs) == [EXAM]  # the closed book and the recorded block have cells of their own in notebook 03
    table = pd.read_parquet(runfolder.table_path(run_dir, TABLE))
    assert list(table["case_id"]) == ["case-0", "case-1"] and set(table["window"]) == {4000}
    assert runs[EXAM].written == (runfolder.table_path(run_dir, TABLE),)
    shown = capsys.readouterr().out
    assert "Reach <exam>" in shown and "2 cases reached & graded" in shown and "Reach per case" in shown
    assert exam.run_registered(run_dir, {}, "05_open_book_exam") == {}  # the open book has its own cells


def test_draw_registered_draws_from_the_tables_and_says_not_measured_without_them(plugin, tmp_path):
    run_dir = _run_folder(tmp_path)
    exam.run_registered(run_dir, {}, "03_closed_book_exam", show=False)
    drawn = charts.draw_registered(run_dir)
    assert list(drawn) == [FIGURE, UNMEASURED]
    saved = run_dir / runfolder.FIGURES
    for stem in drawn:
        assert all((saved / f"{stem}.{ext}").is_file() for ext in ("png", "svg", "html")), stem
    assert share.NOT_MEASURED_SVG not in (saved / f"{FIGURE}.svg").read_text()
    unmeasured = (saved / f"{UNMEASURED}.svg").read_text()
    assert share.NOT_MEASURED_SVG in unmeasured and "exam_never_written" in unmeasured


def test_draw_registered_without_the_table_draws_every_figure_as_not_measured(plugin, tmp_path):
    run_dir = _run_folder(tmp_path)
    drawn = charts.draw_registered(run_dir)
    assert list(drawn) == [FIGURE, UNMEASURED]
    svg = (run_dir / runfolder.FIGURES / f"{FIGURE}.svg").read_text()
    assert share.NOT_MEASURED_SVG in svg and TABLE in svg


def test_the_report_shows_the_exams_block_and_the_figure(plugin, tmp_path):
    run_dir = _run_folder(tmp_path)
    exam.run_registered(run_dir, {"reach_rows": 3}, "03_closed_book_exam", show=False)
    charts.draw_registered(run_dir)
    page = render.build_index(run_dir, _profile()).read_text(encoding="utf-8")
    assert '<h2 id="reach">Reach &lt;exam&gt;</h2>' in page  # the title escaped
    assert '<a href="#reach">Reach &lt;exam&gt;</a>' in page  # listed in the contents
    assert "<li>3 cases reached &amp; graded</li>" in page
    assert "<b>Reach per case</b> (3 rows)" in page and "&lt;b&gt;kept&lt;/b&gt;" in page  # collapsed, escaped
    assert "<b>Nothing</b>" not in page  # a table without rows is left out
    numbers = dict(share.page_order(share.figures(run_dir)))
    number = next(n for n, f in numbers.items() if f.stem == FIGURE)
    assert f'<a href="#{FIGURE}">Figure {number} — Throwaway reach per case</a>' in page
    assert "fig_no_such_figure" not in page  # a figure the run did not save is not linked
    assert f'<figure class="cl-figure" id="{FIGURE}">' in page
    assert page.index('id="reach"') > page.index('id="figures"') and page.index('id="reach"') < page.index(
        'id="notebooks"'
    )


def test_without_the_files_the_report_has_no_block(tmp_path):
    run_dir = _run_folder(tmp_path)
    (run_dir / f"{TABLE}.parquet").write_bytes(b"")  # a table alone gives no block: the exam's module does
    page = render.build_index(run_dir, _profile()).read_text(encoding="utf-8")
    assert 'id="reach"' not in page and share.exam_blocks(run_dir) == []


def test_a_block_anchor_must_be_a_free_id(plugin, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="anchor 'Reach here'"):
        ExamBlock("Reach", "Reach here")
    with pytest.raises(TypeError, match="table 'x' is a list"):
        ExamBlock("Reach", "reach", tables=(("x", []),))
    run_dir = _run_folder(tmp_path)
    exam.run_registered(run_dir, {}, "03_closed_book_exam", show=False)
    taken = ExamBlock("Reach", "headline")
    monkeypatch.setattr(type(exam.get(EXAM)), "block", lambda self, run_dir: taken)
    with pytest.raises(ValueError, match="anchor 'headline' is already an id of the report"):
        share.exam_blocks(run_dir)


def test_a_figure_that_reads_tables_is_the_share_notebooks():
    from compaction_lab.report.figures import register

    with pytest.raises(ValueError, match="drawn by 07_share, not 03_closed_book_exam"):
        register("fig_x", rank=1, title="x", notebook="03_closed_book_exam", reads=("t",))
    with pytest.raises(TypeError, match="name the notebook"):
        register("fig_x", rank=1, title="x")
    with pytest.raises(ValueError, match="it reads none"):
        register("fig_x", rank=1, title="x", notebook="07_share", arguments=lambda: ())
    assert "fig_x" not in FIGURES


def test_every_steps_mark_is_among_what_it_writes_and_a_lost_mark_is_an_error(monkeypatch):
    for nb in chain.names():
        step = chain.step(nb)
        assert step.mark in step.writes and len(step.writes) == len(set(step.writes)), nb
    assert chain.step("05_open_book_exam").writes == (
        "archive.sqlite",
        "exam_open.parquet",
        "exam_open_outcomes.parquet",
    )
    closed = type(exam.get("closed"))
    monkeypatch.setattr(closed, "writes", ("exam_closed", "exam_recall_renamed"))
    with pytest.raises(ValueError, match="its mark 'exam_recall.parquet' is not among the files it writes"):
        _ = chain.step("03_closed_book_exam").writes
