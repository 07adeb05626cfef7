"""Any code point in an identifier draws in every figure (issue 44, item 3).

A session id or model name holding U+2028 or U+2029 failed the whole run: Vega-Lite writes a figure's
``sort=[…]`` list into a Vega expression, whose parser rejects a raw line separator. Every string a
figure's spec carries now goes through `report.theme.vega_safe`; these tests draw every registered
figure with identifiers from all of Unicode (line separators, NUL, lone surrogates included).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compaction_lab.core import runfolder
from compaction_lab.exam import imported
from compaction_lab.exam.exams.continuation import closed_recall
from compaction_lab.ingest import sources
from compaction_lab.report import charts, decision, theme
from compaction_lab.strategies import CompactionContext, anatomy, trigger
from compaction_lab.tally import composition
from tests.report.test_charts import PNG_SIGNATURE, comparison_table

#: What a figure's spec may never hold raw: each breaks a renderer (a line separator: Vega's expression
#: parser; a C0 control or U+FFFE/U+FFFF: the SVG's XML; a lone surrogate: UTF-8) or a page.
FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")

#: Any code point, one at a time: every category, surrogates and controls included.
ANY_CHAR = st.characters(exclude_categories=())
#: An identifier as a log can carry it.
ANY_TEXT = st.text(ANY_CHAR, min_size=1, max_size=12)


# --------------------------------------------------------------------------- the one function


@given(st.lists(st.text(ANY_CHAR, max_size=8), min_size=2, max_size=6, unique=True))
@example(["a\u2028b", "a\u2029b", "a\x00b", "a\x01b", "a\ud800b", "a\ufffdb", "a\u27e8U+2028\u27e9b"])
@settings(max_examples=200, derandomize=True)
def test_vega_safe_is_safe_one_to_one_and_keeps_safe_text(texts):
    """Every string comes out without a character that breaks a renderer; two different strings never
    become one (two ids differing only in such a character stay two categories); text without one is
    kept as it is, and a string is written character by character, so a label inside a longer text
    (a title, an expression) is written as the label alone is."""
    safe = [theme.vega_safe(t) for t in texts]
    assert not [s for s in safe if FORBIDDEN.search(s)]
    assert len(set(safe)) == len(texts)
    for t, s in zip(texts, safe, strict=True):
        if not FORBIDDEN.search(t) and "\u27e8" not in t:
            assert s == t
        assert theme.vega_safe(t + texts[0]) == s + safe[0]
        s.encode("utf-8")  # no lone surrogate left


def test_vega_safe_names_the_code_point_and_walks_a_spec():
    assert theme.vega_safe("s\u2028x\x00") == "s\u27e8U+2028\u27e9x\u27e8U+0000\u27e9"
    spec = {"a\u2029": ["b\ud800", {"c": "d\x07", "n": 3}], "t": None}
    assert theme.vega_safe(spec) == {
        "a\u27e8U+2029\u27e9": ["b\u27e8U+D800\u27e9", {"c": "d\u27e8U+0007\u27e9", "n": 3}],
        "t": None,
    }


# --------------------------------------------------------------------------- every figure


@pytest.fixture(scope="module")
def chain_tables(hostile_sweep) -> Path:
    """The run folder of `tests.hostile_sweep`: `my_sessions` on Codex, pi and Claude Code sessions with
    recorded compactions, whose tables give every run figure rows to draw (figure 11 and the recorded
    compactions included). Their identifiers are payloads; each test here replaces them with its own."""
    (_, res, status) = hostile_sweep.runs[0]
    assert status == "ok"
    return res.run_dir


def figure_inputs(run_dir: Path) -> dict[str, tuple[Any, ...]]:
    """Every registered figure's arguments, built as its notebook (or the sweep page) builds them."""
    table = lambda name: runfolder.load_table(run_dir, name)
    projections, cost = table("projections"), table("cost")
    shown = cost[
        (cost["price_table"] == cost["price_table"].iloc[0]) & (cost["simulator"] == cost["simulator"].iloc[0])
    ]
    ctx = CompactionContext(window=128_000, output_ceiling=32_000)
    recall, answers = table("exam_recall"), table("exam_closed")
    # Two draws a question (a model reader's), the second right where the first was wrong: figure 13's rows.
    draws = pd.concat([answers.assign(draw=0), answers.assign(draw=1, correct=~answers["correct"].astype(bool))])
    sweep = comparison_table(("model", ["m-1", "m-2"]))
    seeds = comparison_table(("seed", [7, 8]))
    return {
        "fig1_retained": (answers,),
        "fig2_composition": (table("composition"), composition.pointer_table(table("followups"))),
        "fig3_complete": (recall, shown),
        "fig3_recall_tokens": (recall,),
        "fig4_size_recall": (recall,),
        "fig12_readers": (imported.readers_table(run_dir, n_boot=50),),
        "fig13_consistency": (draws,),
        "fig5_compaction_cost": (shown,),
        "fig6_cost_per_point": (shown,),
        "fig7_projection_anatomy": (projections[projections["case_id"] == projections["case_id"].iloc[0]],),
        "fig8_trigger_budgets": (
            trigger.trigger_table([8_000, 128_000], [4_000, 32_000]),
            anatomy.budgets_table(ctx, sources.load_saved(run_dir)[0]),
        ),
        "fig9_open_book": (table("exam_open_outcomes"),),
        # The closed book's recall stands in for the needed-next recall (short sessions leave none to score).
        "fig10_continuation": (recall.assign(block="closed"), closed_recall(run_dir)),
        "fig11_rediscovery": (table("rediscovery_compactions"), table("rediscovery")),
        "sensitivity_mix": (table("exam_sensitivity"),),
        "fig_recorded": (table("exam_recorded"),),
        "fig_decision": (decision.decide(run_dir).weighed_strategies,),
        "fig_sweep_small_multiples": (sweep, "window", "model"),
        "fig_sweep_ranks": (sweep, "model"),
        "fig_sweep_lines": (sweep, "model"),
        "fig_sweep_seeds": (seeds.assign(model=seeds["seed"].map({7: "m-1", 8: "m-2"})), "seed"),
    }


@pytest.fixture(scope="module")
def inputs(chain_tables) -> dict[str, tuple[Any, ...]]:
    """`figure_inputs` of the run, built once (hypothesis calls a test many times)."""
    return figure_inputs(chain_tables)


#: Columns whose values are the suite's own vocabulary (record kinds, pointers, registry names, price
#: tables, statuses), which figures key colours and filters on; every other text column is what a log
#: names (session, case, model, agent, tool, file, the arms' labels, answers) and is replaced.
VOCABULARY = frozenset(
    {
        "kind", "source_format", "pointer", "category", "strategy", "segment_kind", "role",
        "record_kind", "price_table", "simulator", "currency", "period", "block", "search", "status",
        "ci_method", "priced_as", "part", "outcome", "target_kind",
    }
)  # fmt: skip


def _text_columns(df: pd.DataFrame) -> Iterator[str]:
    for col in df.columns:
        if (
            col not in VOCABULARY
            and not pd.api.types.is_numeric_dtype(df[col])
            and not pd.api.types.is_bool_dtype(df[col])
        ):
            if df[col].map(lambda v: isinstance(v, str)).any():
                yield col


def with_identifiers(args: tuple[Any, ...], ids: list[str]) -> tuple[Any, ...]:
    """`args` with every identifier in their tables replaced by one of `ids`, the same one wherever it recurs.

    The k-th distinct identifier becomes ``ids[k % len(ids)]`` followed by k when `ids` runs out.
    """
    given: dict[str, str] = {}

    def replace(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        if v not in given:
            k = len(given)
            given[v] = ids[k % len(ids)] + (str(k) if k >= len(ids) else "")
        return given[v]

    out = []
    for arg in args:
        if isinstance(arg, pd.DataFrame):
            arg = arg.copy()
            for col in list(_text_columns(arg)):
                # Object dtype: a string column of pandas 3 cannot hold a lone surrogate, a log's string can.
                arg[col] = pd.Series([replace(v) for v in arg[col]], index=arg.index, dtype=object)
        out.append(arg)
    return tuple(out)


def _strings(value: Any) -> Iterator[str]:
    """Every string in a spec, its keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


STEMS = [f.stem for f in (*charts.run_figures(), *charts.sweep_figures())]

#: Identifiers that broke a figure: line separators (the sort list's expression), NUL, a C0 control,
#: a lone surrogate, U+FFFF, and two ids that differ only in a character a renderer cannot take.
HOSTILE_IDS = ["a\u2028b", "a\u2029b", "n\x00l", "\x01", "\ud800x", "\uffff", "a\u2028", "a\u2029", "\u27e8"]


@pytest.mark.slow
def test_every_figure_has_inputs_here(inputs):
    """A new figure is drawn by the property test below: its inputs must be added to `figure_inputs`."""
    assert sorted(inputs) == sorted(STEMS)


@pytest.mark.parametrize("stem", STEMS)
@given(ids=st.lists(ANY_TEXT, min_size=6, max_size=6, unique=True))
@example(ids=HOSTILE_IDS)
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@pytest.mark.slow
def test_every_figure_draws_any_identifier(stem, ids, inputs, tmp_path_factory):
    """Item 3: each registered figure, its identifiers drawn from all of Unicode, is written as PNG, SVG
    and HTML; the page's spec holds no character that breaks Vega, XML or UTF-8, and as many distinct
    strings as the chart's own spec (no two categories merged)."""
    args = with_identifiers(inputs[stem], ids)
    chart = charts.figure(stem).draw(*args)
    out = charts.save_chart(chart, tmp_path_factory.mktemp("fig") / stem)
    assert out["png"].read_bytes()[:8] == PNG_SIGNATURE
    assert out["svg"].read_text(encoding="utf-8").lstrip().startswith("<svg")
    page = out["html"].read_text(encoding="utf-8")
    shown = json.loads(re.search(r"const spec = (.*?);\n\s*const embedOpt", page, re.S).group(1))
    strings = set(_strings(shown))
    assert not [s for s in strings if FORBIDDEN.search(s)]
    # The chart's own spec: the one `save_chart` made of it (`theme._drawn_spec` keeps the last), not made again.
    assert len(strings) == len(set(_strings(theme._drawn_spec(chart))))


@pytest.mark.slow
def test_the_test_plants_identifiers_in_every_figure(inputs):
    """Each figure's spec carries at least one of the planted identifiers (else the property says nothing)."""
    marks = [f"id{i}\u2028" for i in range(6)]
    missing = []
    for stem in STEMS:
        args = with_identifiers(inputs[stem], marks)
        text = json.dumps(charts.figure(stem).draw(*args).to_dict())
        if "\\u27e8U+2028\\u27e9" not in text:  # the planted line separator, as `vega_safe` writes it
            missing.append(stem)
    assert not missing, missing
