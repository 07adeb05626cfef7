"""Rendering a run folder: each executed notebook as HTML (inputs hidden) and the run's ``report.html``.

The page's pieces come from `share` (and `decision`); after its own blocks it shows the block of every
registered exam that gives one (`exam.Exam.block`), all with one macro of the template. See docs/report.md.
"""

from __future__ import annotations

import threading
import urllib.parse
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
from nbconvert import HTMLExporter

from compaction_lab import __version__
from compaction_lab.core import bounded_json, runfolder
from compaction_lab.core.profile import NotebookRun, Profile
from compaction_lab.report import charts, decision, share

TEMPLATES_DIR = Path(__file__).parent / "templates"
NBCONVERT_TEMPLATE = "offline"


def exporter(**kw: Any) -> HTMLExporter:
    """Make the offline HTML exporter, with every ``<script>`` block's content escaped."""
    # nbconvert writes widget state and views as JSON inside <script> blocks, escaping only "/": a
    # "<!--<script" from a log in a widget's value would still hide the block's end. Escape it all.
    return HTMLExporter(
        template_name=NBCONVERT_TEMPLATE,
        extra_template_basedirs=[str(TEMPLATES_DIR / "nbconvert")],
        filters={"escape_html_script": charts.script_safe},
        **kw,
    )


#: Each thread's notebook exporter (`_notebook_exporter`).
_local = threading.local()


def _notebook_exporter() -> HTMLExporter:
    """Return the exporter `render_notebook` uses on this thread, made once (templates compiled at its first page).

    Compiling nbconvert's templates was a third of a notebook's rendering; nbconvert's own command reuses
    one exporter for every notebook it converts, as this does (one per thread: an exporter is not shared).
    """
    found = getattr(_local, "exporter", None)
    if found is None:
        found = _local.exporter = exporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    return found


def render_notebook(executed: Path) -> Path:
    """Render an executed notebook next to it as HTML, inputs hidden (the code is in the .ipynb beside it)."""
    nb = nbformat.read(executed, as_version=4)
    body, _ = _notebook_exporter().from_notebook_node(nb)
    out = executed.with_suffix(".html")
    out.write_text(charts.page_safe(body), encoding="utf-8")
    return out


def build_index(
    run_dir: Path,
    profile: Profile,
    runs: list[NotebookRun] | None = None,
    price_table: str | None = None,
    simulator: str | None = None,
) -> Path:
    """``report.html``: what the run measured, the headline table, each notebook's block, every figure, links, versions.

    The figures are the run's SVG files inlined: the page needs no script and
    no network. The headline is notebook 07's (``headline.parquet``) when it
    ran, so the index and the notebook agree; otherwise it is computed here
    (under `price_table` / `simulator`, default: see `share.cost_view`).
    """
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from compaction_lab.exam.questions import cases as exam_cases

    run_dir = Path(run_dir)
    info = bounded_json.load_file(run_dir / runfolder.RUN_JSON)
    saved = runfolder.table_path(run_dir, share.HEADLINE)
    head = (
        pd.read_parquet(saved)
        if saved.exists() and price_table is None and simulator is None
        else share.headline_table(run_dir, price_table, simulator)
    )
    runs = runs or []
    # Numbered down the page: the lead figure (the decision's) opens the decision section, those that drew
    # something fill the gallery, those that measured nothing are one collapsed line after them.
    numbered = share.page_order(share.figures(run_dir))
    leads = share.lead_figures()
    lead = [(n, f) for n, f in numbered if f.stem in leads]
    shown = [(n, f) for n, f in numbered if f.stem not in leads]
    env = Environment(loader=FileSystemLoader(str(TEMPLATES_DIR)), autoescape=select_autoescape(["html", "j2"]))
    page = env.get_template("report_index.html.j2").render(
        run=run_dir.name,
        profile=profile.name,
        description=profile.description or "(no description)",
        started=info.get("started", "?"),
        version=__version__,
        commit=((info.get("git") or {}).get("commit") or "unknown")[:12],
        redacted=profile.redact,
        measured=share.measured_text(head),
        decision=decision.decide(run_dir, head),
        decision_figures=[share.figure_html(f, number=n) for n, f in lead],
        numbers={f.stem: n for n, f in numbered},  # figure numbers as the page shows them
        shortfall=exam_cases.shortfall_of_run(run_dir),  # fewer questions than asked: said, with why
        headline=share.headline_html(head),
        recorded=share.recorded_block(run_dir),
        exam=share.exam_block(run_dir),
        continuation=share.continuation_block(run_dir),
        inspect=share.inspect_block(run_dir),  # models run through Inspect AI (`import-inspect`), when any
        blocks=_exam_blocks(run_dir, numbered),  # every other exam's block, from its own module (`Exam.block`)
        notebooks=[
            {
                "name": r.notebook,
                # A relative link, percent-encoded: a name from run.json never becomes a scheme (javascript:).
                "html": urllib.parse.quote(r.html.name if r.html else r.output.name),
                "status": r.status,
                "seconds": f"{r.seconds:.1f}",
            }
            for r in runs
        ],
        figures=[share.figure_html(f, number=n) for n, f in shown if share.measured_figure(f)],
        # Figures that measured nothing in this run: one collapsed line, each still there with its reason.
        unmeasured=[(f.numbered(n), share.figure_html(f, number=n)) for n, f in shown if not share.measured_figure(f)],
        facts=share.run_facts(run_dir).to_html(index=False),
    )
    out = run_dir / runfolder.REPORT_HTML
    out.write_text(charts.page_safe(page), encoding="utf-8")
    return out


def _exam_blocks(run_dir: Path, numbered: list[tuple[int, share.Figure]]) -> list[dict[str, Any]]:
    """Return the blocks of the registered exams that give one (`share.exam_blocks`), ready for the page's macro.

    Each: the block, its tables as collapsed HTML (`share.collapsed_tables`) and, of its figures, those the
    run saved, as (stem, caption with the page's number).
    """
    by_stem = {f.stem: (n, f) for n, f in numbered}
    return [
        {
            "block": b,
            "tables": share.collapsed_tables(b.tables),
            "figures": [(stem, by_stem[stem][1].numbered(by_stem[stem][0])) for stem in b.figures if stem in by_stem],
        }
        for b in share.exam_blocks(run_dir)
    ]
