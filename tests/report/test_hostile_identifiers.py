"""Any code point in any identifier: every page is written without a character HTML forbids, and the whole
`my_sessions` chain runs and every page opens (issue 44, the NUL in pages and acceptance 2).

The hostile sessions and the page checks are `tests.report.test_hostile_pages`'s; here the identifiers
(session id, model, agent, cwd, branch, tool name, file name) are drawn from all of Unicode, in the same
run as that module's random payloads in every field (issue 25, acceptance 2).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from compaction_lab.core import runfolder
from compaction_lab.report import render, sweep_page
from compaction_lab.run import runner
from tests.helpers import LIGHTER
from tests.report.test_charts import comparison_table
from tests.report.test_hostile_pages import (
    _PIECES,
    FIELDS,
    HOSTILE_VALUES,
    LINE_BREAKS,
    PAYLOADS,
    SHORT_TAIL,
    _imported,
    hostile_folder,
    open_all,
    problems,
    run_pages,
)

#: What HTML forbids in a page: NUL, controls but tab, LF, FF and CR, lone surrogates, noncharacters.
NON_HTML = re.compile(
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"{chr(p + 0xFFFE)}{chr(p + 0xFFFF)}" for p in range(0, 0x110000, 0x10000))
    + "]"
)

#: Characters that each break something: NUL, a C0 and a C1 control, a noncharacter, a line separator.
BAD = "n\x00l\x01\x85\ufffe\u2028"


def forbidden_in(page: Path) -> list[str]:
    """The characters HTML forbids that `page` holds raw (its bytes must be UTF-8)."""
    return sorted(set(NON_HTML.findall(page.read_bytes().decode("utf-8"))))


# --------------------------------------------------------------------------- each page, fast


def test_rendered_notebook_holds_no_character_html_forbids(tmp_path):
    """A NUL from a session id reached a rendered notebook raw (a table, a printed line, Markdown)."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(session_id)")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"session {BAD}\n"),
        nbformat.v4.new_output("display_data", data={"text/html": f"<table><td>{BAD}</td></table>"}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {BAD}"), cell]
    executed = tmp_path / "01_x.ipynb"
    nbformat.write(nb, executed)
    page = render.render_notebook(executed)
    assert not forbidden_in(page)
    # Written as its code point, not dropped: the reader still sees there was one.
    assert "n\u27e8U+0000\u27e9l" in page.read_text(encoding="utf-8")


@pytest.mark.slow
def test_sweep_page_holds_no_character_html_forbids(tmp_path):
    """sweep.html and its figures: a swept model's name and the arms' labels hold NUL and its kin."""
    table = comparison_table(("model", [f"m1{BAD}", f"m2{BAD}"]))
    table["strategy_label"] = table["strategy_label"] + BAD
    out = sweep_page.render_sweep_page(tmp_path, f"p{BAD}", f"d{BAD}", ["model"], table, [])
    pages = [out, *sorted((tmp_path / runfolder.FIGURES).glob("*.html"))]
    assert len(pages) > 1
    assert {p.name: forbidden_in(p) for p in pages} == {p.name: [] for p in pages}


def test_report_holds_no_character_html_forbids(smoke_run, tmp_path):
    """report.html: the headline's labels (the arms', which carry a model name) hold NUL and its kin."""
    run_dir = tmp_path / smoke_run.run_dir.name
    shutil.copytree(smoke_run.run_dir, run_dir)
    recall = runfolder.load_table(run_dir, "exam_recall")
    recall["strategy_label"] = recall["strategy_label"].astype(object) + BAD
    runfolder.save_table(recall, run_dir, "exam_recall")
    runfolder.table_path(run_dir, "headline").unlink()  # the headline is computed again, from the table above
    page = render.build_index(run_dir, runner.load_profile("smoke"))
    assert not forbidden_in(page)
    assert "n\u27e8U+0000\u27e9l" in page.read_text(encoding="utf-8")  # written as its code point, not dropped


# --------------------------------------------------------------------------- acceptance 2: the whole chain

#: A file name as a folder can hold it: any code point but ``/`` and NUL, undecodable bytes as the
#: surrogates Python reads them as (``surrogateescape``), short enough for the file system.
FILE_NAMES = st.text(
    st.one_of(
        st.characters(exclude_categories=["Cs"], exclude_characters="/\x00"),
        st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF),
    ),
    min_size=1,
    max_size=24,
).filter(lambda s: len(os.fsencode(s)) <= 160)

#: The identifiers the issue names (session id, model, agent, cwd, branch, tool name) and the file's
#: path and text, each built of `test_hostile_pages`'s pieces (payloads, any code points, controls,
#: one character thousands of times).
IDENTIFIERS = st.fixed_dictionaries(
    {f: st.lists(_PIECES, min_size=1, max_size=3).map("".join) for f in (*FIELDS, "branch")}
)


#: The identifiers every run of the test below holds besides the drawn ones: each field every kind of
#: trouble at once (line and paragraph separators, NUL, a lone surrogate, line breaks, a payload).
WORST = {f: f"{f}\u2028\u2029\x00\ud800{LINE_BREAKS}{PAYLOADS[0]}" for f in (*FIELDS, "branch")}
WORST_NAME = "\u2028\x01\udc80<img src=x onerror=alert(6)>"


@pytest.mark.slow
@given(
    drawn=st.lists(HOSTILE_VALUES, min_size=2, max_size=2, unique_by=lambda v: v["session_id"]),
    values=IDENTIFIERS,
    name=FILE_NAMES,
)
@settings(
    max_examples=1,  # each example is a whole chain run and its pages in Chromium
    deadline=None,
    derandomize=True,
    # Each example is a whole chain run: no shrinking (the failure names the values drawn).
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_any_identifier_runs_the_chain_and_every_page_opens(
    drawn, values, name, chromium, warm_kernels, tmp_path_factory
):
    """Acceptance 2 (and issue 25's: random strings in every imported identifier field): the smoke-sized
    `my_sessions` chain on sessions whose identifiers are drawn from all of Unicode and from the payloads
    (`test_hostile_pages.HOSTILE_VALUES`, two draws, each its own folder), one whose file names are drawn
    too, and `WORST`'s: every notebook completes, no page holds a character HTML forbids, and every page
    opens in Chromium with its figures, no dialog, no console error and no raw markup."""
    folders = [hostile_folder(tmp_path_factory.mktemp("random") / "sessions", v) for v in drawn]
    folders.append(hostile_folder(tmp_path_factory.mktemp("any") / "sessions", values, name))
    assume(all(_imported(folder) is not None for folder in folders))
    folders.append(hostile_folder(tmp_path_factory.mktemp("worst") / "sessions", WORST, WORST_NAME))
    res = runner.run_profile(
        "my_sessions",
        results=tmp_path_factory.mktemp("results"),
        progress=False,
        overrides={"session_paths": [str(f) for f in folders], **LIGHTER, **SHORT_TAIL},
        launch=warm_kernels,
    )
    run_json = (res.run_dir / runfolder.RUN_JSON).read_text(encoding="utf-8")
    assert [nb.status for nb in res.notebooks] == ["ok"] * len(res.notebooks), run_json[-3000:]
    audit = json.loads((res.run_dir / "import_audit.json").read_text(encoding="utf-8"))
    # every file of every folder reached the run, each session its own
    assert audit["files"] == 3 * len(folders) and "duplicate_session" not in audit["reasons"], audit
    pages = run_pages(res.run_dir)
    assert len(pages) >= 1 + len(res.notebooks) + 2, [p.name for p in pages]
    assert {p.name: forbidden_in(p) for p in pages} == {p.name: [] for p in pages}
    checks, fired = open_all(pages)
    bad = problems(checks, fired)
    assert not bad, "\n".join(bad)
