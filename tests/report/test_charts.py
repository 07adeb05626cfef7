import base64
import json
import re
import subprocess
import sys

import altair as alt
import pandas as pd
import pytest
import vl_convert as vlc

from compaction_lab.core import paths
from compaction_lab.core.registry import UnknownName
from compaction_lab.report import charts, figures, theme
from compaction_lab.run import chain
from compaction_lab.tally import composition
from tests.helpers import make_session

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def fig2_inputs(small_session):
    other = make_session(
        [
            ("user", "Change the retry in payments/client.py."),
            ("assistant", "I chose exponential backoff for payments/client.py retries."),
            ("tool_output", "x" * 500),
            ("user", "Remind me why you chose the backoff for payments/client.py?"),
        ],
        session_id="s2",
    )
    sessions = [small_session, other]
    comp = composition.composition_table(sessions)
    pointers = composition.pointer_table(composition.followups_table(sessions))
    return comp, pointers


def test_fig2_spec_is_valid(fig2_inputs):
    comp, pointers = fig2_inputs
    chart = charts.fig2_composition(comp, pointers)
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert "hconcat" in spec and len(spec["hconcat"]) == 2
    text = json.dumps(spec)
    assert "lexical heuristic" in text  # the method is labelled on the figure
    # The left panel carries an ALL bar besides every session.
    left_data = spec["datasets"]
    assert any(any(row.get("session_id") == "ALL" for row in rows) for rows in left_data.values())


def test_fig2_with_no_followups_still_renders(small_session):
    comp = composition.composition_table([small_session])
    pointers = composition.pointer_table(composition.followups_table([small_session]))
    chart = charts.fig2_composition(comp, pointers)
    assert "0 follow-ups attributed" in json.dumps(chart.to_dict())


def test_save_chart_writes_png_svg_html(tmp_path, fig2_inputs):
    comp, pointers = fig2_inputs
    written = charts.save_chart(charts.fig2_composition(comp, pointers), tmp_path / "figures" / "fig2")
    assert set(written) == {"png", "svg", "html"}
    assert written["png"].read_bytes()[:8] == PNG_SIGNATURE
    svg = written["svg"].read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<svg") and "What fills the window" in svg
    html = written["html"].read_text(encoding="utf-8")
    # Self-contained: Vega is inlined, nothing is fetched from a CDN.
    assert "vegaEmbed" in html and "cdn.jsdelivr" not in html


#: Session ids a log can carry that would end, or hide the end of, the HTML page's script block.
HOSTILE_IDS = ("</script><script>alert(1)</script>a\u2028b\u2029c & </SCRIPT >", "<!--<script>alert(2)//")


def test_saved_html_keeps_data_inside_its_script_block(tmp_path, fig2_inputs):
    """Issue 25, item 1: a session id planted in a log is data in the figure's HTML, never markup."""
    comp, pointers = fig2_inputs
    comp = comp.copy()
    comp["session_id"] = comp["session_id"].map(dict(zip(comp["session_id"].unique(), HOSTILE_IDS, strict=True)))
    chart = charts.fig2_composition(comp, pointers)
    html = charts.save_chart(chart, tmp_path / "fig2", formats=("html",))["html"].read_text(encoding="utf-8")
    spec_text = re.search(r"const spec = (.*?);\n\s*const embedOpt", html, re.S).group(1)
    # Nothing the data carries can close the block, open a comment, or end a JavaScript line.
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in spec_text, f"{raw!r} left raw in the embedded spec"
    assert "alert(1)</script>" not in html and "<!--<script>" not in html
    # The page's only script-closing tags are its own (the Vega bundle's and the spec's blocks).
    assert html.lower().count("</script") == 2
    # Escaped, not altered: the spec parses back to exactly the chart's.
    assert json.loads(spec_text) == json.loads(json.dumps(chart.to_dict()))
    shown = {row.get("session_id") for rows in json.loads(spec_text)["datasets"].values() for row in rows}
    # Each id whole; its line separators written as code points, which Vega's expression parser takes (issue 44).
    assert shown >= {theme.vega_safe(i) for i in HOSTILE_IDS}


@pytest.mark.slow
def test_control_characters_and_lone_surrogates_in_data_still_render(tmp_path):
    """Issue 25, acceptance 2: a label holding characters XML forbids (a C0 control, U+FFFF) made
    vl-convert panic and abort the whole process (a notebook's kernel died), and a long label of emoji
    made it fail (Vega shortens labels by UTF-16 units, splitting a character); now the figure is drawn
    with those characters written as their code points (issue 44: U+FFFD for all of them made two ids one
    category). Run in a child process, so a regression fails this test instead of
    killing the test run."""
    code = f"""
import sys
sys.path.insert(0, {str(paths.REPO_ROOT / "tests")!r})
import pandas as pd
from compaction_lab.report import charts
comp = pd.DataFrame({{"session_id": ["a\\x04b", "c\\x1fd\\uffff", "\\U0001F600" * 200],
                     "kind": ["user", "assistant", "user"], "records": [1, 1, 1], "chars": [10, 20, 5],
                     "tokens": [3, 5, 1]}})
pointers = pd.DataFrame({{"pointer": ["user"], "followups": [0], "share": [0.0]}})
out = charts.save_chart(charts.fig2_composition(comp, pointers), {str(tmp_path / "fig2")!r})
print(sorted(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['html', 'png', 'svg']"
    svg = (tmp_path / "fig2.svg").read_text(encoding="utf-8")
    assert "a\u27e8U+0004\u27e9b" in svg and "c\u27e8U+001F\u27e9d\u27e8U+FFFF\u27e9" in svg
    assert (tmp_path / "fig2.png").read_bytes()[:8] == PNG_SIGNATURE


def test_script_safe_escapes_only_what_html_would_read(tmp_path):
    text = json.dumps({"s": "</script>&<!--\u2028\u2029", "n": 1})
    safe = charts.script_safe(text)
    assert not set("<>&\u2028\u2029") & set(safe)
    assert json.loads(safe) == json.loads(text)


def test_a_figures_bytes_do_not_depend_on_what_the_process_drew_before(tmp_path):
    """Vega numbers gradients and clip paths from counters global to vl-convert's runtime: a kernel a sweep's
    earlier run used wrote ``gradient_28`` where a fresh one wrote ``gradient_0`` (the same figure, other bytes)."""
    gradient = alt.Gradient(
        gradient="linear", stops=[alt.GradientStop(color="red", offset=0), alt.GradientStop(color="blue", offset=1)]
    )
    data = pd.DataFrame({"a": [1, 5], "b": [1, 2]})
    chart = alt.layer(
        alt.Chart(data).mark_bar(color=gradient).encode(x="a:O", y="b"),
        alt.Chart(data).mark_line(clip=True).encode(x="a:O", y=alt.Y("b", scale=alt.Scale(domain=[0, 1.5]))),
    )
    spec = chart.to_dict()
    raw = [vlc.vegalite_to_svg(spec) for _ in range(2)]
    assert raw[0] != raw[1]  # what the counters do
    first = theme.save_chart(chart, tmp_path / "one", formats=("svg",))["svg"].read_bytes()
    vlc.vegalite_to_svg(spec)  # the runtime draws something else in between
    theme._rendered.clear()  # and this process's cache of drawn figures is no help
    second = theme.save_chart(chart, tmp_path / "two", formats=("svg",))["svg"].read_bytes()
    assert first == second
    ids = re.findall(rb'id="([^"]+)"', first)
    assert set(ids) >= {b"gradient_0", b"clip0"}
    assert all(b"url(#%s)" % i in first for i in ids if i.startswith((b"gradient_", b"clip")))  # uses follow


def test_stable_ids_leave_a_labels_text_alone():
    svg = '<svg><text>a id="clip7" fill="url(#gradient_9)"</text><path fill="url(#gradient_9)"/><g id="gradient_9"/>'
    assert theme.stable_ids(svg) == (
        '<svg><text>a id="clip7" fill="url(#gradient_9)"</text><path fill="url(#gradient_0)"/><g id="gradient_0"/>'
    )


def test_save_chart_rejects_unknown_format(tmp_path, fig2_inputs):
    with pytest.raises(ValueError, match="unknown chart format"):
        charts.save_chart(charts.fig2_composition(*fig2_inputs), tmp_path / "x", formats=("gif",))


def test_theme_is_registered_and_applied():
    assert charts.THEME in alt.theme.names()
    charts.use_theme()
    assert alt.theme.active == charts.THEME


def test_notebook_renderer_bundles_png_and_spec(fig2_inputs):
    chart = charts.fig2_composition(*fig2_inputs)
    bundle = theme._renderer(chart.to_dict())
    assert base64.b64decode(bundle["image/png"])[:8] == PNG_SIGNATURE
    assert any(k.startswith("application/vnd.vegalite") for k in bundle)


def test_fig7_and_fig8_specs_and_png(tmp_path):
    from compaction_lab.ingest import synthetic
    from compaction_lab.strategies import CompactionContext, anatomy, trigger

    sessions = [c.session for c in synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=5000))]
    ctx = CompactionContext(window=4000, output_ceiling=500)
    table = anatomy.projections_table(anatomy.project_cases(anatomy.cases_at_end(sessions), ["codex", "full"], ctx))
    fig7 = charts.fig7_projection_anatomy(table)
    assert charts.title_of("fig7_projection_anatomy") in json.dumps(fig7.to_dict(), ensure_ascii=False)
    triggers = trigger.trigger_table([16_000, 128_000, 1_000_000], [8_000, 32_000])
    budgets = anatomy.budgets_table(ctx, sessions[0])
    fig8 = charts.fig8_trigger_budgets(triggers, budgets)
    spec = fig8.to_dict()
    assert len(spec["vconcat"]) == 2
    for name, fig in (("f7", fig7), ("f8", fig8)):
        assert charts.save_chart(fig, tmp_path / name, formats=("png",))["png"].read_bytes()[:8] == PNG_SIGNATURE


def _recall_frame(reader_label):
    import pandas as pd

    return pd.DataFrame(
        {
            "strategy": ["full", "codex"],
            "strategy_label": ["full", "codex (model: m1)"],
            "retained": [4, 2],
            "n": [4, 4],
            "recall": [1.0, 0.5],
            "ci_low": [1.0, 0.0],
            "ci_high": [1.0, 1.0],
            "projection_tokens": [900.0, 300.0],
            "reader_label": [reader_label] * 2,
        }
    )


@pytest.mark.parametrize("make", [charts.fig3_recall_tokens, charts.fig4_size_recall])
def test_recall_figures_name_who_answered(make):
    for who in ("model reader: m1", "verbatim reader (retention ceiling)"):
        spec = make(_recall_frame(who)).to_dict()
        assert who in json.dumps(spec["title"])


# --------------------------------------------------------------------------- a run that asked nothing (issue 12 item 2)


def _empty_exam_tables():
    import pandas as pd

    from compaction_lab.exam.statistics import stats

    answers = pd.DataFrame(
        columns=[
            "strategy",
            "strategy_label",
            "reader",
            "reader_label",
            "case_id",
            "question_id",
            "pointer",
            "category",
            "decoy",
            "answer",
            "given",
            "correct",
            "projection_tokens",
        ]
    )
    recall = stats.recall_table(answers, n_boot=20, seed=7)
    cost = pd.DataFrame(columns=["strategy_label", "cost_per_point", "currency", "turns", "price_table", "simulator"])
    return answers, recall, stats.sensitivity_table(answers), cost


@pytest.mark.parametrize(
    "build",
    [
        lambda a, r, s, c: charts.fig1_retained(a),
        lambda a, r, s, c: charts.fig3_recall_tokens(r),
        lambda a, r, s, c: charts.fig4_size_recall(r),
        lambda a, r, s, c: charts.sensitivity_mix(s),
        lambda a, r, s, c: charts.fig6_cost_per_point(c),
        lambda a, r, s, c: charts.fig3_complete(r, c),
    ],
    ids=["fig1", "fig3", "fig4", "mix", "fig6", "fig3_complete"],
)
def test_exam_figures_say_not_measured_when_no_question_was_asked(build):
    """fig1 raised "Cannot set a DataFrame with multiple columns" on an exam that asked nothing."""
    chart = build(*_empty_exam_tables())
    text = json.dumps(chart.to_dict())
    assert "not measured" in text and "No question could be asked" in text
    assert vlc.vegalite_to_png(chart.to_dict(), scale=1).startswith(PNG_SIGNATURE)


def test_fig9_says_not_measured_without_rounds():
    import pandas as pd

    text = json.dumps(charts.fig9_open_book(pd.DataFrame()).to_dict())
    assert "not measured" in text


def _figure_functions():
    """Every public function of the figure modules that returns a chart of its own (not the shared helpers)."""
    import importlib
    import inspect
    import pkgutil

    found = set()
    for mod in pkgutil.iter_modules(figures.__path__):
        if mod.name.startswith("_"):
            continue  # shared helpers (`no_data`, the arm flags), no figure of their own
        module = importlib.import_module(f"{figures.__name__}.{mod.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and not name.startswith("_") and name != "sweep_rank_labels":
                found.add(fn)
    return found


def test_every_figure_is_one_hop_from_the_registry():
    """The registry names each figure's drawing function, in its notebook's module; every figure function is
    registered once, and the chart shows the registry's title (read at draw time, so the report's caption
    and the chart agree)."""
    run, sweep = figures.run_figures(), figures.sweep_figures()
    drawn = [f.draw for f in (*run, *sweep)]
    assert len(drawn) == len(set(drawn)) and set(drawn) == _figure_functions()
    # The report's order: the lead (decision) figure, then notebook by notebook in chain order (issue 48).
    assert [f.stem for f in run] == [
        "fig_decision", "fig2_composition", "fig7_projection_anatomy", "fig8_trigger_budgets",
        "fig1_retained", "fig3_recall_tokens", "fig4_size_recall", "fig12_readers", "fig13_consistency",
        "sensitivity_mix", "fig_recorded", "fig3_complete", "fig5_compaction_cost", "fig6_cost_per_point",
        "fig9_open_book", "fig10_continuation", "fig11_rediscovery",
    ]  # fmt: skip
    assert [f.seed for f in run if f.seed] == [2, 7, 8, 1, 3, 4, 3, 5, 6, 9]  # the seed report's figures they redraw
    assert not any(f.title.startswith("Figure") for f in run)  # the page numbers them
    assert [f.stem for f in (*run, *sweep)] == [f.draw.__name__ for f in (*run, *sweep)]  # one name per figure
    for f in run:
        assert figures.figure(f.stem) == f and f.notebook in chain.names()
        assert (paths.NOTEBOOKS_DIR / f"{f.notebook}.ipynb").exists()
        assert getattr(charts, f.draw.__name__) is f.draw  # the notebooks' one import still names it
    empty = charts.fig4_size_recall(pd.DataFrame(columns=["strategy_label", "n", "recall"]))
    assert empty.to_dict()["title"]["text"] == charts.title_of("fig4_size_recall")
    with pytest.raises(UnknownName, match="unknown figure 'fig99'; known: fig_decision, fig1_retained, "):
        charts.figure("fig99")
    with pytest.raises(UnknownName, match="unknown figure 'fig99'"):
        charts.draw("unused", "fig99")


def test_draw_draws_saves_and_returns_the_registered_figure(tmp_path, fig2_inputs):
    """`draw` names a figure once: the registry's function draws it, the run folder's figures/ gets its three
    files, byte for byte what drawing and saving it by hand writes."""
    chart = charts.draw(tmp_path / "run", "fig2_composition", *fig2_inputs, width=300)
    assert chart.to_dict() == charts.fig2_composition(*fig2_inputs, width=300).to_dict()
    saved = tmp_path / "run" / "figures"
    assert sorted(p.name for p in saved.iterdir()) == [f"fig2_composition.{x}" for x in ("html", "png", "svg")]
    by_hand = charts.save_chart(charts.fig2_composition(*fig2_inputs, width=300), tmp_path / "by_hand")
    assert (saved / "fig2_composition.svg").read_bytes() == by_hand["svg"].read_bytes()
    assert (saved / "fig2_composition.png").read_bytes()[:8] == PNG_SIGNATURE


def test_notebooks_draw_each_registered_figure_once_in_its_notebook():
    """Every notebook names its figures once (`charts.draw`), exactly the figures the chain lists for it.

    The share notebook also draws, in one generic cell (`charts.draw_registered`), every figure that names
    the tables it reads (none of the shipped figures does; `tests/report/test_exam_blocks.py` adds one).
    """
    drawn: dict[str, list[str]] = {}
    from_tables = [f.stem for f in figures.run_figures() if f.reads]
    for nb in sorted(paths.NOTEBOOKS_DIR.glob("*.ipynb")):
        src = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        assert "save_chart" not in src and "figure_stem" not in src, nb.name  # no draw/save/show triple
        drawn[nb.stem] = re.findall(r'charts\.draw\(out, "([a-z0-9_]+)"', src)
        calls = src.count("charts.draw_registered(out)")
        assert calls == (nb.stem == figures.SHARE_NOTEBOOK), nb.name  # the share notebook's one generic cell
        drawn[nb.stem] += from_tables if calls else []
    # The cells draw in the notebook's reading order; the chain lists in the report's (figure 3 before 5 and 6).
    assert {nb: sorted(stems) for nb, stems in drawn.items()} == {
        nb: sorted(chain.step(nb).figures) for nb in chain.names()
    }
    assert all(len(stems) == len(set(stems)) for stems in drawn.values())


# --------------------------------------------------------------------------- sweep figures (issue 18 part A)

#: Recall per (window, strategy) of the hand-built sweep: at 1000 codex and pi tie, at 2000 pi overtakes codex.
SWEEP_RECALL = {
    1000: {"full": 1.0, "codex": 0.5, "pi": 0.5},
    2000: {"full": 1.0, "codex": 0.25, "pi": 0.75},
}
SWEEP_LABELS = {"full": "full", "codex": "codex (extractive stand-in)", "pi": "pi (extractive stand-in)"}


def comparison_table(extra=None, reader="verbatim reader (retention ceiling)", failed=True, windows=(1000, 2000)):
    """A comparison table shaped like `run.run_sweep`'s: swept keys, run, status, the headline columns.

    `extra` is a second swept key and its values (e.g. ``("seed", [7, 8])``); a seed shifts recall by
    0.1 per step so the seeds differ. With `failed`, one more combination failed: one row, NaN numbers.
    """
    key2, vals2 = extra or (None, [None])
    rows = []
    for v2_i, v2 in enumerate(vals2):
        for w in windows:
            run = f"p-window={w}" + (f"-{key2}={v2}" if key2 else "")
            for strategy, r in SWEEP_RECALL[w].items():
                r = max(0.0, r - 0.1 * v2_i) if key2 == "seed" else r
                rows.append(
                    {
                        "window": w,
                        **({key2: v2} if key2 else {}),
                        "run": run,
                        "status": "ok",
                        "strategy": strategy,
                        "strategy_label": SWEEP_LABELS[strategy],
                        "retained": round(r * 8),
                        "n": 8,
                        "recall": r,
                        "ci_low": max(0.0, r - 0.25),
                        "ci_high": min(1.0, r + 0.25),
                        "retained_of_n": f"{round(r * 8)}/8",
                        "projection_tokens": 1000.0 + w / 2 + (3000 if strategy == "full" else 0),
                        "compaction_cost_cold": 0.01,
                        "compaction_cost_cached": 0.004,
                        "break_even": "3",
                        "cost_per_point": 0.002 / r if r else float("nan"),
                        "currency": "CNY",
                        "price_table": "deepseek-flash",
                        "simulator": "deepseek",
                        "reader_label": reader,
                    }
                )
    if failed:
        rows.append({"window": 3000, **({key2: vals2[0]} if key2 else {}), "run": "p-window=3000", "status": "failed"})
    return pd.DataFrame(rows)


def _png_ok(chart) -> bool:
    return vlc.vegalite_to_png(chart.to_dict(), scale=1).startswith(PNG_SIGNATURE)


def test_fig_sweep_lines_numeric_parameter_three_panels_and_png():
    chart = charts.fig_sweep_lines(comparison_table(), "window")
    spec = chart.to_dict()
    assert len(spec["hconcat"]) == 3  # recall (with its band), projection tokens, cost per point
    text = json.dumps(spec)
    x = spec["hconcat"][1]["encoding"]["x"]
    assert x["type"] == "quantitative" and x["axis"]["values"] == [1000.0, 2000.0]
    assert "the run's 95% interval" in text and "extractive stand-in" in text
    assert "CNY per point of recall" in text
    assert spec["title"]["text"].startswith(charts.title_of("fig_sweep_lines"))
    assert _png_ok(chart)


def test_fig_sweep_lines_string_values_are_ordinal_in_sweep_order():
    table = comparison_table().assign(window=lambda d: d["window"].map({1000: "small", 2000: "large", 3000: "huge"}))
    spec = charts.fig_sweep_lines(table, "window").to_dict()
    x = spec["hconcat"][0]["layer"][0]["encoding"]["x"]
    assert x["type"] == "ordinal" and x["sort"] == ["small", "large"]  # the failed run's value has no point
    assert _png_ok(charts.fig_sweep_lines(table, "window"))


def test_fig_sweep_lines_without_money_says_so():
    table = comparison_table().assign(cost_per_point=float("nan"), currency=None, price_table=None)
    spec = charts.fig_sweep_lines(table, "window").to_dict()
    assert len(spec["hconcat"]) == 2 and "money: not measured" in json.dumps(spec["title"])


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["searcher stand-in", "verbatim reader (retention ceiling)", "model reader: m1"])
def test_sweep_figures_name_who_answered(reader):
    table = comparison_table(("seed", [7, 8]), reader=reader)
    for chart in (
        charts.fig_sweep_lines(table, "window"),
        charts.fig_sweep_small_multiples(table, "window", "seed"),
        charts.fig_sweep_ranks(table, "window", "seed"),
        charts.fig_sweep_seeds(table, "seed", by=["window"]),
    ):
        assert reader in json.dumps(chart.to_dict()["title"])


def test_fig_sweep_small_multiples_one_panel_per_value():
    chart = charts.fig_sweep_small_multiples(
        comparison_table(("summarizer", ["extractive", "none"])), "window", "summarizer"
    )
    spec = chart.to_dict()
    assert spec["facet"]["column"]["sort"] == ["summarizer = extractive", "summarizer = none"]
    assert _png_ok(chart)


def test_fig_sweep_ranks_reversed_axis_and_end_labels():
    chart = charts.fig_sweep_ranks(comparison_table(), "window")
    spec = chart.to_dict()
    y = spec["layer"][0]["encoding"]["y"]
    assert y["scale"]["reverse"] is True and y["scale"]["domain"] == [1, 2]  # `full` is never ranked (issue 48)
    assert any(layer["mark"]["type"] == "text" for layer in spec["layer"])
    assert _png_ok(chart)
    faceted = charts.fig_sweep_ranks(comparison_table(("seed", [7, 8])), "window", "seed")
    assert "facet" in faceted.to_dict() and _png_ok(faceted)


@pytest.mark.slow
def test_fig_sweep_seeds_shows_both_kinds_of_interval():
    chart = charts.fig_sweep_seeds(comparison_table(("seed", [7, 8])), "seed", by=["window"])
    spec = chart.to_dict()
    text = json.dumps(spec)
    assert "95% interval (within a run)" in text and "across seeds" in text
    assert len(spec["vconcat"]) == 2  # one pair of panels per window
    assert _png_ok(chart)
    alone = charts.fig_sweep_seeds(comparison_table(("seed", [7, 8])), "seed")  # averaged over nothing: one pair
    assert len(alone.to_dict()["vconcat"]) == 1


def test_sweep_figures_with_no_finished_run_say_not_measured():
    table = comparison_table().iloc[-1:]  # only the failed run
    for chart in (
        charts.fig_sweep_lines(table, "window"),
        charts.fig_sweep_ranks(table, "window"),
        charts.fig_sweep_small_multiples(table.assign(seed=7), "window", "seed"),
        charts.fig_sweep_seeds(table.assign(seed=7), "seed"),
    ):
        assert "not measured" in json.dumps(chart.to_dict())


def test_sweep_figures_are_registered_apart_from_the_run_figures():
    stems = [f.stem for f in charts.sweep_figures()]
    assert stems == ["fig_sweep_small_multiples", "fig_sweep_ranks", "fig_sweep_lines", "fig_sweep_seeds"]
    assert not set(stems) & {f.stem for f in charts.run_figures()}  # no notebook saves them
    for f in charts.sweep_figures():
        assert charts.figure(f.stem) == f and f.notebook is None
        assert f.draw.__module__ == "compaction_lab.report.figures.sweep"


@pytest.mark.slow
def test_vega_bundle_is_built_once_kept_by_its_hash_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    """The figures' HTML inlines Vega's JavaScript from data/cache, built by vl-convert only when missing."""
    monkeypatch.setenv("COMPACTION_LAB_CACHE", str(tmp_path))
    built = []
    real = vlc.javascript_bundle
    monkeypatch.setattr(vlc, "javascript_bundle", lambda **kw: built.append(kw) or real(**kw))
    theme.vega_bundle.cache_clear()
    assert theme.verbatim_texts() == () and built == []  # the final sweep never builds one
    first = theme.vega_bundle()
    assert theme.verbatim_texts() == (first,)
    (kept,) = tmp_path.glob("vega-bundle-*.js")
    assert kept.read_text(encoding="utf-8") == first and len(built) == 1
    theme.vega_bundle.cache_clear()
    assert theme.verbatim_texts() == (first,) and len(built) == 1  # the kernels kept it: the runner reads it
    assert theme.vega_bundle() == first and len(built) == 1  # another process: read from the file
    kept.write_text(first[:-100], encoding="utf-8")  # damaged: its content no longer matches its name
    theme.vega_bundle.cache_clear()
    assert theme.vega_bundle() == first and len(built) == 2
    assert kept.read_text(encoding="utf-8") == first
    theme.vega_bundle.cache_clear()


def test_saved_html_is_what_altair_writes_inline(tmp_path, fig2_inputs):
    """The cached bundle changes nothing in the page: byte for byte Altair's own ``inline=True`` output."""
    chart = figures.figure("fig2_composition").draw(*fig2_inputs)
    theme.save_chart(chart, tmp_path / "ours", formats=("html",))
    theme.use_theme()
    chart.save(tmp_path / "altair.html", format="html", inline=True, json_kwds={"cls": theme._ScriptSafeEncoder})
    assert (tmp_path / "ours.html").read_bytes() == (tmp_path / "altair.html").read_bytes()


def test_a_notebook_shows_a_chart_over_altairs_row_limit():
    """A figure of one long session (figure 7: a row per segment) is displayed in the notebook, as it is saved."""
    import altair as alt
    import pandas as pd

    from compaction_lab.report import theme

    chart = alt.Chart(pd.DataFrame({"x": range(6_000)})).mark_point().encode(x="x:Q")
    with alt.data_transformers.enable("default"):
        with pytest.raises(alt.MaxRowsError):
            chart.to_dict()
        theme.setup_notebook()
        assert len(chart.to_dict()["datasets"][next(iter(chart.to_dict()["datasets"]))]) == 6_000


def _counting_validations(monkeypatch, parts: bool = False) -> list[dict]:
    """Record every whole chart (and with `parts`, every part) Altair validates against Vega-Lite's schema."""
    seen: list[dict] = []
    real = alt.utils.schemapi.validate_jsonschema

    def validate(spec, schema, *args, **kw):
        if parts or schema.get("$ref", "").startswith("#/definitions/TopLevel"):  # a whole chart, not a part
            seen.append(spec)
        return real(spec, schema, *args, **kw)

    monkeypatch.setattr(alt.utils.schemapi, "validate_jsonschema", validate)
    return seen


@pytest.fixture
def notebook_display(monkeypatch):
    """IPython's display formatter as a notebook's shell holds it, `setup_notebook` run against it."""
    from types import SimpleNamespace

    import IPython
    from IPython.core.formatters import DisplayFormatter

    formatter = DisplayFormatter()
    monkeypatch.setattr(IPython, "get_ipython", lambda: SimpleNamespace(display_formatter=formatter))
    with alt.renderers.enable(theme.RENDERER):
        theme.setup_notebook()
        yield formatter


def test_a_figure_saved_and_then_shown_is_validated_once(tmp_path, monkeypatch, fig2_inputs, notebook_display):
    """A notebook saves a figure and shows it: one validation against Vega-Lite's schema, not one per step."""
    chart = charts.fig2_composition(*fig2_inputs).properties(title="validated once")
    theme._validated.clear()
    seen = _counting_validations(monkeypatch)
    theme.save_chart(chart, tmp_path / "fig", formats=("svg",))
    shown, _ = notebook_display.format(chart)
    assert len(seen) == 1
    assert base64.b64decode(shown["image/png"])[:8] == PNG_SIGNATURE
    assert "validated once" in json.dumps(shown[theme._vegalite_mimetype()])
    other = chart.properties(title="another spec")
    notebook_display.format(other)
    assert len(seen) == 2  # a spec not seen before is validated


def test_a_chart_saved_and_then_shown_is_made_into_a_spec_once_unless_it_changed(
    tmp_path, monkeypatch, notebook_display
):
    """The spec `save_chart` made is what the notebook shows, its tables turned into rows once; a chart whose
    parts changed since (a title set, a layer added), or shown under another theme, is made again."""
    made: list[object] = []
    real = alt.TopLevelMixin.to_dict

    def counted(self, *args, **kw):
        made.append(self)
        return real(self, *args, **kw)

    monkeypatch.setattr(alt.TopLevelMixin, "to_dict", counted)
    rows = pd.DataFrame({"x": [1, 2, 3]})
    chart = alt.layer(alt.Chart(rows).mark_point().encode(x="x:Q"))
    theme.save_chart(chart, tmp_path / "a", formats=("svg",))
    first = len(made)
    shown, _ = notebook_display.format(chart)
    assert len(made) == first  # shown as saved
    chart.title = "set after saving"
    shown, _ = notebook_display.format(chart)
    assert len(made) > first and shown[theme._vegalite_mimetype()]["title"] == "set after saving"
    chart.layer.append(alt.Chart(rows).mark_rule().encode(x="x:Q"))
    shown, _ = notebook_display.format(chart)
    assert len(shown[theme._vegalite_mimetype()]["layer"]) == 2
    with alt.theme.enable("default"):
        shown, _ = notebook_display.format(chart)
    assert "font" not in shown[theme._vegalite_mimetype()]["config"]  # the reader's theme, not the saved spec's


def test_a_chart_drawn_alike_from_other_rows_is_not_validated_again(tmp_path, monkeypatch):
    """Altair validates a chart before it adds its rows (``datasets``, named by their hash): the same figure
    drawn from another run's rows is valid alike (a sweep's runs in one warm kernel), a new encoding is not."""

    def chart(rows: pd.DataFrame, **encoding: str) -> alt.TopLevelMixin:
        base = alt.Chart(rows).mark_point().encode(x="x:Q", **encoding)
        return alt.layer(base, alt.Chart(rows.head(1)).mark_rule().encode(x="x:Q"))

    theme._validated.clear()
    seen = _counting_validations(monkeypatch)
    first = theme.save_chart(chart(pd.DataFrame({"x": [1, 2]})), tmp_path / "a", formats=("svg",))["svg"]
    again = theme.save_chart(chart(pd.DataFrame({"x": [5, 6, 7]})), tmp_path / "b", formats=("svg",))["svg"]
    assert len(seen) == 1 and first.read_text() != again.read_text()  # other rows, drawn: one validation
    names = set(seen[0]["datasets"])
    assert names == {"data-0", "data-1"} and all(rows == [] for rows in seen[0]["datasets"].values())
    theme.save_chart(chart(pd.DataFrame({"x": [1.0], "y": [2.0]}), y="y:Q"), tmp_path / "c", formats=("svg",))
    assert len(seen) == 2  # another encoding: validated


def test_an_invalid_chart_is_refused_as_altair_refuses_it(tmp_path):
    chart = alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x:Q")
    chart.width = "wide"  # set after construction: only the chart's own validation sees it
    with pytest.raises(alt.utils.schemapi.SchemaValidationError) as altairs:
        chart.to_dict()
    with pytest.raises(alt.utils.schemapi.SchemaValidationError) as ours:
        theme.save_chart(chart, tmp_path / "bad", formats=("svg",))
    assert str(ours.value) == str(altairs.value)
    assert not (tmp_path / "bad.svg").exists()


def test_a_label_holding_what_html_forbids_is_written_safe_and_the_bundle_once(tmp_path):
    chart = alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x:Q").properties(title="nul\x00here")
    page = theme.save_chart(chart, tmp_path / "page", formats=("html",))["html"].read_text(encoding="utf-8")
    assert "\x00" not in page and "nul\\u27e8U+0000\\u27e9here" in page  # code points, JSON-escaped in the script
    assert page.count(theme.vega_bundle()) == 1 and theme._BUNDLE_MARK not in page


def test_a_registered_figure_is_built_unchecked_and_validated_whole_when_saved(tmp_path, monkeypatch, fig2_inputs):
    """Altair checks each part of a chart as it is made (a figure of hatched bars: one check per gradient stop);
    a registered figure skips that, and the whole chart is still validated where it is saved."""
    from compaction_lab.report.figures import _common

    rows = pd.DataFrame({"x": [0.0], "x2": [300.0], "arm": ["a"]})
    made = _counting_validations(monkeypatch, parts=True)
    _common.hatched_bars(rows, lambda row: "#4c78a8", x_max=300, width=300, y="arm:N")
    assert len(made) > 100  # outside a registered figure: a check per stop
    made.clear()
    with theme.unchecked_parts():
        layers = _common.hatched_bars(rows, lambda row: "#4c78a8", x_max=300, width=300, y="arm:N")
    assert made == []
    theme._validated.clear()
    theme.save_chart(alt.layer(*layers), tmp_path / "bars", formats=("svg",))
    assert [s for s in made if "layer" in s]  # the whole chart, once it is saved
    fig2 = figures.figure("fig2_composition").draw  # every registered figure is built so
    made.clear()
    fig2.__wrapped__(*fig2_inputs)
    checked = len(made)
    made.clear()
    fig2(*fig2_inputs)
    assert len(made) < checked / 2  # what is left: `properties`, which Altair checks in any mode
    bad = alt.layer(*layers)
    bad.width = "wide"
    with pytest.raises(alt.utils.schemapi.SchemaValidationError):
        theme.save_chart(bad, tmp_path / "bad", formats=("svg",))


def test_a_notebook_shows_a_chart_under_the_theme_its_reader_chose(notebook_display):
    """A reader's own chart is shown under the theme the reader enabled, not switched to the house theme."""
    assert alt.theme.active == theme.THEME
    with alt.theme.enable("default"):
        shown, _ = notebook_display.format(alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_point().encode(x="x:Q"))
        assert alt.theme.active == "default"
    config = shown[theme._vegalite_mimetype()]["config"]
    assert "font" not in config and config["view"]["continuousWidth"] != 360  # Altair's default, not the house's
