"""The `Exam` interface: each registered exam, run through it, writes what the notebooks' wiring wrote.

The "old" side of each comparison is the notebook's own cells as they were before the interface (notebook
03's closed book and recorded block, notebook 05's open book, the CLI's ``exam``), run on a copy of the same
run folder; the new side is `exam.run_exam`. Tables must be equal, frame for frame and file for file.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import uuid

import pandas as pd
import pytest

from compaction_lab import summarize
from compaction_lab.core import runfolder
from compaction_lab.exam import exam, readers
from compaction_lab.exam.exams import closed, open_book, recorded
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.exam.statistics import stats
from compaction_lab.ingest import sources, synthetic
from compaction_lab.run import params as run_params
from compaction_lab.store.archive import Archive
from compaction_lab.strategies import CompactionContext
from tests.recorded_expectations import FILES, load

#: A smoke-sized synthetic run (as ``papermill_params/smoke.yaml``), three arms to keep it quick.
NOTEBOOK = dict(
    strategy_names=["full", "codex", "futureos-summarized"],
    window=3000,
    output_ceiling=500,
    summarizer="extractive",
    reader="verbatim",
    model={},
    n_cases=2,
    n_questions=8,
    n_decoys=2,
    pointer_mix={"assistant": 0.8, "user": 0.1, "tool": 0.1},
    tail_tokens=600,
    bank_seed=7,
    probe_n_questions=20,
    probe_n_decoys=2,
    probe_pointer_mix="natural",
    probe_max_per_record=2,
    cut="capacity",
    n_boot=200,
    stats_seed=7,
)


def _bank_params(nb: dict) -> dict:
    """The ``params`` dict notebooks 03 and 05 built in their second cell."""
    return dict(
        n_cases=nb["n_cases"],
        n_questions=nb["n_questions"],
        n_decoys=nb["n_decoys"],
        pointer_mix=nb["pointer_mix"],
        tail_tokens=nb["tail_tokens"],
        seed=nb["bank_seed"],
        probe_n_questions=nb["probe_n_questions"],
        probe_n_decoys=nb["probe_n_decoys"],
        probe_pointer_mix=nb["probe_pointer_mix"],
        probe_max_per_record=nb["probe_max_per_record"],
        cut=nb["cut"],
        window=nb["window"],
        output_ceiling=nb["output_ceiling"],
    )


def _context(nb: dict) -> CompactionContext:
    return CompactionContext(
        window=nb["window"],
        output_ceiling=nb["output_ceiling"],
        summarizer=summarize.get_summarizer(nb["summarizer"], nb["model"]),
    )


def notebook_03(out, nb: dict) -> None:
    """Notebook 03's cells 4–24 as they were: the closed book, its statistics, the recorded block."""
    params = _bank_params(nb)
    rc = exam_cases.for_run(out, params)
    ctx = _context(nb)
    result = closed.run_closed(
        rc.cases, rc.sessions, nb["strategy_names"] or None, ctx, readers.get_reader(nb["reader"], model=nb["model"])
    )
    runfolder.save_table(result.answers, out, "exam_closed")
    runfolder.save_table(result.projections, out, "exam_projections")
    recall = stats.recall_table(result.answers, n_boot=nb["n_boot"], seed=nb["stats_seed"], unit=rc.unit)
    runfolder.save_table(closed.with_compacted(recall, result.answers), out, "exam_recall")
    runfolder.save_table(stats.session_table(result.answers), out, "exam_by_session")
    runfolder.save_table(stats.paired_table(result.answers, unit=rc.unit, seed=nb["stats_seed"]), out, "exam_paired")
    mix, mix_label = rc.question_mix(nb["pointer_mix"])
    sensitivity = stats.sensitivity_table(result.answers, default_mix=mix, mix_label=mix_label)
    runfolder.save_table(sensitivity, out, "exam_sensitivity")
    rec = recorded.for_run(out, params)
    rec_result = recorded.run(
        rec,
        nb["strategy_names"] or None,
        ctx,
        readers.get_reader(nb["reader"], model=nb["model"]),
        n_boot=nb["n_boot"],
        seed=nb["stats_seed"],
    )
    runfolder.save_table(rec.found, out, "recorded_compactions")
    runfolder.save_table(rec.skipped, out, "recorded_skipped")
    runfolder.save_table(rec_result.answers, out, "exam_recorded_answers")
    runfolder.save_table(rec_result.table, out, "exam_recorded")


def notebook_05(out, nb: dict) -> None:
    """Notebook 05's cells 3–8 as they were: five rounds on one arm, the outcomes per round."""
    rc = exam_cases.for_run(out, _bank_params(nb))
    projections = exam_cases.projections_for(rc.cases, rc.sessions, nb["strategy"], _context(nb))
    archive = Archive(out / "archive.sqlite")
    archive.add_sessions(rc.sessions.values())
    rounds = open_book.make_rounds(
        nb["wordings"] or open_book.DEFAULT_WORDINGS, nb["required_wording"] or open_book.REQUIRED_WORDING
    )
    answers = open_book.run_open_book(
        rc.cases,
        rc.sessions,
        projections,
        archive,
        readers.reader_factory(nb["reader"], model=nb["model"]),
        k=nb["k"],
        rounds=rounds,
    )
    archive.close()
    runfolder.save_table(answers, out, "exam_open")
    runfolder.save_table(open_book.outcome_table(answers).reset_index(), out, "exam_open_outcomes")


def interface_03(out, nb: dict) -> None:
    """Notebook 03 through the interface: the closed book, then the recorded block with the same context."""
    params = exam.get("closed").params(nb)
    run = exam.run_exam("closed", out, params)
    exam.run_exam("recorded", out, params, ctx=run.ctx)


def _tables(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


def _assert_same_folders(old, new) -> None:
    old_tables, new_tables = _tables(old), _tables(new)
    assert sorted(new_tables) == sorted(old_tables)
    for name in old_tables:
        pd.testing.assert_frame_equal(pd.read_parquet(new / name), pd.read_parquet(old / name), check_exact=True)
        assert new_tables[name] == old_tables[name], name
    for bank in sorted(p.name for p in old.glob("exam_*.jsonl")):
        assert (new / bank).read_bytes() == (old / bank).read_bytes(), bank


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    """A run folder holding notebook 01's output for two small synthetic chains."""
    base = tmp_path_factory.mktemp("synthetic-run")
    src = sources.gather(None, synthetic.SyntheticSpec(n_chains=2, window_tokens=6000), progress=False)
    sources.save(src, runfolder.resolve(base))
    return base


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A run folder of imported sessions whose agents recorded compactions (pi, Claude Code, Codex, OpenCode)."""
    base = tmp_path_factory.mktemp("recorded-run")
    sessions = tuple(load(a) for a in sorted(FILES))
    sources.save(sources.Sources(sessions, "imported"), runfolder.resolve(base))
    return base


def _copy(run, tmp_path, name):
    dest = tmp_path / name
    shutil.copytree(run, dest)
    return dest


def test_the_registry_lists_the_three_exams_in_chain_order():
    assert exam.names()[:3] == ("closed", "recorded", "open_book")
    assert isinstance(exam.get("closed"), closed.ClosedBookExam)
    assert isinstance(exam.get("recorded"), recorded.RecordedExam)
    assert isinstance(exam.get("open_book"), open_book.OpenBookExam)
    assert exam.EXAMS.entry("open_book").meta["notebook"] == "05_open_book_exam"


def test_an_unknown_exam_is_an_error_naming_it_and_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown exam 'continuatoin'; known: closed, recorded, open_book"):
        exam.run_exam("continuatoin", ".", {})


def test_closed_book_and_recorded_block_write_what_notebook_03_wrote(synthetic_run, tmp_path):
    old, new = _copy(synthetic_run, tmp_path, "old"), _copy(synthetic_run, tmp_path, "new")
    notebook_03(old, NOTEBOOK)
    interface_03(new, NOTEBOOK)
    _assert_same_folders(old, new)
    names = set(_tables(new))
    assert {"exam_closed.parquet", "exam_recall.parquet", "exam_sensitivity.parquet"} <= names
    assert len(pd.read_parquet(new / "exam_closed.parquet")) > 0


@pytest.mark.slow
def test_recorded_block_on_real_compactions_writes_what_notebook_03_wrote(recorded_run, tmp_path):
    old, new = _copy(recorded_run, tmp_path, "old"), _copy(recorded_run, tmp_path, "new")
    nb = {**NOTEBOOK, "strategy_names": ["full", "codex", "pi"], "tail_tokens": 8, "probe_n_questions": 8}
    notebook_03(old, nb)
    interface_03(new, nb)
    _assert_same_folders(old, new)
    assert len(pd.read_parquet(new / "exam_recorded.parquet")) > 0  # the block measured something


def test_open_book_writes_what_notebook_05_wrote(synthetic_run, tmp_path):
    old, new = _copy(synthetic_run, tmp_path, "old"), _copy(synthetic_run, tmp_path, "new")
    nb = {
        **NOTEBOOK,
        "strategy": "futureos-summarized",
        "reader": "searcher",
        "wordings": [],
        "required_wording": "",
        "k": 3,
    }
    notebook_05(old, nb)
    run = exam.run_exam("open_book", new, {k: v for k, v in nb.items() if k != "reader"})  # its own reader
    assert run.params.reader == "searcher" and isinstance(run.params, open_book.OpenBookParams)
    _assert_same_folders(old, new)
    assert (new / open_book.ARCHIVE_FILE).is_file()
    assert sorted(run.tables) == ["exam_open", "exam_open_outcomes"]
    assert len(run.result) == 5 * run.cases.run.n_questions


def test_sessions_gathered_in_memory_give_the_cli_its_recall_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = sources.gather(None, synthetic.SyntheticSpec(n_chains=2, window_tokens=6000), progress=False)
    profile = {**NOTEBOOK, "seed": 7, "n_chains": 2}  # a profile's parameters: the generator's beside the exam's
    # What ``compaction-lab exam`` did before the interface (with every key given, its defaults play no part).
    rc = exam_cases.build(src.sessions, src.chains or None, {**profile, "seed": profile["bank_seed"]})
    old = closed.run_closed(
        rc.cases, rc.sessions, profile["strategy_names"], _context(profile), readers.get_reader("verbatim")
    )
    old_recall = closed.with_compacted(stats.recall_table(old.answers, n_boot=200, seed=7, unit=rc.unit), old.answers)
    run = exam.run_exam("closed", src, profile)
    assert run.written == () and list(tmp_path.iterdir()) == []
    pd.testing.assert_frame_equal(run.result.answers, old.answers)
    pd.testing.assert_frame_equal(run.tables["exam_recall"], old_recall)


def test_gathered_sessions_get_a_temporary_archive_for_the_open_book(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = sources.gather(None, synthetic.SyntheticSpec(n_chains=2, window_tokens=6000), progress=False)
    run = exam.run_exam("open_book", src, {**NOTEBOOK, "n_cases": 1, "n_questions": 3, "n_decoys": 1})
    assert run.cases.archive_path is None and run.written == ()
    assert set(run.result["round"]) == {1, 2, 3, 4, 5} and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("notebook", "name"),
    [
        ("03_closed_book_exam", "closed"),
        ("03_closed_book_exam", "recorded"),
        ("05_open_book_exam", "open_book"),
        ("06_continuation_exam", "continuation"),
    ],
)
def test_the_notebooks_declare_the_exams_defaults(notebook, name):
    """One place for the defaults: a notebook's parameters cell must say what the library's defaults say."""
    declared = run_params.declared_parameters(notebook)
    defaults = exam.get(name).defaults()
    # Every parameter but run_dir is the exam's (the notebook hands them over by name: a typo would be lost).
    assert set(declared) - {"run_dir"} <= set(defaults), sorted(set(declared) - {"run_dir"} - set(defaults))
    shared = sorted(set(declared) & set(defaults))
    assert len(shared) >= 15, shared  # the cell declares the exam's parameters, not a few of them
    for key in shared:
        want = defaults[key]
        got = declared[key].default
        assert (list(got) if isinstance(want, tuple) else got) == (list(want) if isinstance(want, tuple) else want), key


def test_params_take_a_notebooks_values_by_name_and_the_exams_defaults_for_the_rest():
    p = exam.get("open_book").params({"window": "4000", "wordings": ["a", "b", "c"], "n_chains": 3, "k": None})
    assert p.window == 4000 and p.wordings == ("a", "b", "c") and p.k == 3 and p.reader == "searcher"
    closed_p = exam.get("closed").params(p)  # the open book's parameters serve the closed book as they are
    assert closed_p is p
    back = exam.get("open_book").params(exam.ExamParams(window=4000))  # the shared ones kept, its own defaults
    assert isinstance(back, open_book.OpenBookParams) and back.window == 4000 and back.strategy == "futureos-summarized"
    assert back.reader == "verbatim"  # a value given (even a default of the other exam's) is kept
    assert exam.get("closed").params({"strategy_names": "full"}).names == ["full"]
    assert exam.get("closed").params({}).names is None  # empty: every registered strategy


def test_a_new_exam_is_one_module_of_its_own(tmp_path, monkeypatch):
    """The continuation exam's shape: its own module, its own parameters and tables; nothing else touched."""
    package = f"throwaway_exams_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "continuation.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            import pandas as pd

            from compaction_lab.exam.exam import EXAMS, Exam, ExamParams


            @dataclass(frozen=True)
            class ContinuationParams(ExamParams):
                turns_after: int = 5


            @EXAMS.register("throwaway-continuation", rank=40)
            class ContinuationExam(Exam):
                params_type = ContinuationParams

                def cases(self, source, params):
                    return ["case-a", "case-b"]

                def grade(self, cases, params, ctx, *, progress=False):
                    return pd.DataFrame({"case_id": cases, "turns_after": params.turns_after, "window": ctx.window})

                def tables(self, cases, result, params):
                    return {"exam_throwaway": result}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    exam.EXAMS.add_package(package)
    try:
        assert exam.names()[-1] == "throwaway-continuation"
        assert exam.get("throwaway-continuation").defaults()["turns_after"] == 5
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        run = exam.run_exam("throwaway-continuation", run_dir, {"turns_after": 2, "window": 9000})
        table = pd.read_parquet(run_dir / "exam_throwaway.parquet")
        assert list(table["turns_after"]) == [2, 2] and list(table["window"]) == [9000, 9000]
        assert run.exam == "throwaway-continuation"
    finally:
        exam.EXAMS.remove("throwaway-continuation")
        sys.modules.pop(f"{package}.continuation", None)
        sys.modules.pop(package, None)


@pytest.mark.parametrize("name", exam.names())
def test_each_exam_writes_exactly_the_tables_it_declares(name, synthetic_run, tmp_path):
    """`Exam.writes` (what the chain lists as its notebook's outputs) is what `tables` returns, in its order.

    Every exam registered before it runs first in the same folder (the continuation exam keys the closed
    book's cases), each under the smoke-sized parameters with one draw.
    """
    out = _copy(synthetic_run, tmp_path, "run")
    names = exam.names()
    for earlier in names[: names.index(name)]:
        exam.run_exam(earlier, out, NOTEBOOK)
    run = exam.run_exam(name, out, NOTEBOOK)
    declared = exam.get(name).writes
    assert declared and tuple(run.tables) == declared
    assert tuple(p.name for p in run.written) == tuple(runfolder.table_path(out, t).name for t in declared)


def test_the_exams_with_cells_of_their_own_are_named_in_their_notebooks():
    """An exam with `Exam.own_cells` is run by name in its notebook; every exam notebook ends with the generic cell."""
    from pathlib import Path

    import nbformat

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    own = {name for name in exam.names() if exam.get(name).own_cells}
    assert own == {"closed", "recorded", "open_book", "continuation"}
    for name in own:
        stem = exam.EXAMS.entry(name).meta["notebook"]
        cells = nbformat.read(notebooks / f"{stem}.ipynb", as_version=4).cells
        assert f'exam.get("{name}")' in "".join(c.source for c in cells), (name, stem)
        assert cells[-1].source.startswith(f'others = exam.run_registered(out, globals(), "{stem}")'), stem
