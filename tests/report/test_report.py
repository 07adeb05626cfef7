"""The runner: profiles, a real smoke run through papermill, and failure reporting."""

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest

from compaction_lab import cli
from compaction_lab.core import paths, runfolder
from compaction_lab.core.session import Session
from compaction_lab.run import runner, sweep
from compaction_lab.tally import composition

# --------------------------------------------------------------------------- profiles


def test_shipped_profiles_load():
    names = runner.list_profiles()
    assert {"smoke", "default"} <= set(names)
    for name in names:
        prof = runner.load_profile(name)
        assert prof.notebooks and prof.description


def test_unknown_profile_names_the_available_ones():
    with pytest.raises(runner.ProfileError, match="available: .*smoke"):
        runner.load_profile("no-such-profile")


@pytest.mark.parametrize(
    "text, match",
    [
        ("parameters: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "mapping at top level"),
        ("notebooks: [01_context_composition]\nparamters: {seed: 1}\n", "unknown keys"),
        ("notebooks: [99_nothing]\n", "notebooks not found"),
        ("notebooks: [01_context_composition]\nparameters: {run_dir: /tmp/x}\n", "run_dir is set by the runner"),
        ("notebooks: [01_context_composition]\nnotebook_parameters: {02_x: {a: 1}}\n", "not in the profile"),
    ],
)
def test_malformed_profiles_are_clear_errors(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(runner.ProfileError, match=match):
        runner.load_profile(path)


def test_secret_parameters_are_refused(tmp_path):
    path = tmp_path / "leaky.yaml"
    path.write_text("notebooks: [01_context_composition]\nparameters: {openai_api_key: sk-xyz}\n")
    with pytest.raises(runner.ProfileError, match="environment variables"):
        runner.run_profile(path, results=tmp_path / "results", progress=False)


def test_notebook_overrides_win():
    prof = runner.Profile("p", "d", ("a",), {"seed": 1, "n": 2}, {"a": {"seed": 5}})
    assert prof.parameters_for("a") == {"seed": 5, "n": 2}


# --------------------------------------------------------------------------- a real smoke run


# `smoke_run` (conftest): the smoke profile run once per test session, shared with the browser check.


def test_smoke_run_fills_the_run_folder_contract(smoke_run):
    d = smoke_run.run_dir
    assert (d / "01_context_composition.ipynb").exists()
    assert (d / "01_context_composition.html").exists()
    assert (d / "report.html").exists()
    for fmt in ("png", "svg", "html"):
        assert (d / "figures" / f"fig2_composition.{fmt}").stat().st_size > 0
    assert (d / "figures" / "fig2_composition.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    comp = pd.read_parquet(d / "composition.parquet")
    assert list(comp.columns) == ["session_id", "source_format", "kind", "records", "chars", "tokens"]
    fu = pd.read_parquet(d / "followups.parquet")
    assert list(fu.columns) == composition.FOLLOWUP_COLUMNS


def test_smoke_run_tables_match_the_sessions_it_wrote(smoke_run):
    d = smoke_run.run_dir
    prof = runner.load_profile("smoke")
    files = sorted((d / "sessions").glob("syn-*.jsonl"))
    assert len(files) == prof.parameters["n_chains"]
    sessions = [Session.from_jsonl(f.read_bytes()) for f in files]
    comp = pd.read_parquet(d / "composition.parquet")
    for s in sessions:
        assert comp.loc[comp["session_id"] == s.id, "chars"].sum() == s.chars
    # Recomputing from the written sessions gives the same table: nothing was lost on the way.
    again = composition.composition_table(sessions)
    pd.testing.assert_frame_equal(
        again.sort_values(["session_id", "kind"]).reset_index(drop=True),
        comp.sort_values(["session_id", "kind"]).reset_index(drop=True),
    )


def test_run_json_records_what_a_reader_needs(smoke_run):
    info = json.loads((smoke_run.run_dir / "run.json").read_text())
    assert info["status"] == "ok" and info["profile"] == "smoke"
    assert info["parameters"]["n_chains"] == runner.load_profile("smoke").parameters["n_chains"]
    assert info["packages"]["papermill"] and info["packages"]["tiktoken"]
    assert "commit" in info["git"]
    assert [nb["notebook"] for nb in info["notebooks"]] == list(runner.load_profile("smoke").notebooks)
    for nb in info["notebooks"]:
        assert nb["status"] == "ok" and nb["seconds"] > 0
        assert nb["parameters"]["run_dir"] == str(smoke_run.run_dir)
    assert info["unused_parameters"] == []


def test_executed_notebook_got_the_profile_parameters(smoke_run):
    nb = nbformat.read(smoke_run.run_dir / "01_context_composition.ipynb", as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    wt = runner.load_profile("smoke").parameters["window_tokens"]
    assert injected and f"window_tokens = {wt}" in injected[0].source
    assert all(c.get("outputs") is not None for c in nb.cells if c.cell_type == "code")


def test_report_html_is_readable_offline(smoke_run):
    d = smoke_run.run_dir
    html = (d / "report.html").read_text(encoding="utf-8")
    assert "compaction-lab report" in html
    # The index: the measured text, the headline, a link to every notebook, every figure inlined as SVG.
    assert "What this run measured" in html and "retained of N (95% CI)" in html
    for nb in runner.load_profile("smoke").notebooks:
        assert f'href="{nb}.html"' in html
    stems = {p.stem for p in (d / "figures").glob("*.svg")}
    for stem in stems:
        assert f'id="{stem}"><svg' in html, stem
    for page in [d / "report.html", *d.glob("0*.html")]:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]+src=", text), page.name  # no script fetched from anywhere
        assert not re.search(r"""<(?:img|link|iframe)[^>]+(?:src|href)=["']https?:""", text), page.name
        assert "charts.setup_notebook()" not in text  # inputs hidden for readers
    assert "data:image/png;base64" in (d / "03_closed_book_exam.html").read_text(encoding="utf-8")


def test_notebook_06_headline_agrees_with_the_exam_and_cost(smoke_run):
    d = smoke_run.run_dir
    head = pd.read_parquet(d / "headline.parquet")
    recall = pd.read_parquet(d / "exam_recall.parquet").set_index("strategy")
    cost = pd.read_parquet(d / "cost.parquet")
    assert set(head["strategy"]) == set(recall.index)
    for _, row in head.iterrows():
        assert row["retained"] == recall.loc[row["strategy"], "retained"]
        assert row["retained_of_n"].startswith(f"{recall.loc[row['strategy'], 'retained']:.0f}/")
        c = cost[
            (cost["strategy"] == row["strategy"])
            & (cost["price_table"] == row["price_table"])
            & (cost["simulator"] == row["simulator"])
        ]
        assert len(c) == 1 and c["compaction_cost_cached"].iloc[0] == pytest.approx(row["compaction_cost_cached"])
    # Sendable arms first, best recall first; an arm over W − O (the smoke window is small) only after them.
    sendable, over = head[~head["over_window"]], head[head["over_window"]]
    assert list(head["strategy"]) == list(sendable["strategy"]) + list(over["strategy"])
    assert list(sendable["recall"]) == sorted(sendable["recall"], reverse=True)
    assert (head["over_window"] == recall.loc[head["strategy"], "over_window"].to_numpy()).all()


# --------------------------------------------------------------------------- failures


def _failing_chain(tmp_path, monkeypatch) -> Path:
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# boom\npurpose inputs outputs parameters"),
        nbformat.v4.new_code_cell('run_dir: str = ""  # run folder', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("raise ValueError('planted failure 4471')"),
    ]
    nbformat.write(nb, nbdir / "01_boom.ipynb")
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", nbdir)
    prof = tmp_path / "boom.yaml"
    prof.write_text("description: fails on purpose\nnotebooks: [01_boom]\n")
    return prof


def test_failing_notebook_raises_with_the_cell_error(tmp_path, monkeypatch):
    prof = _failing_chain(tmp_path, monkeypatch)
    with pytest.raises(runner.NotebookFailed) as info:
        runner.run_profile(prof, results=tmp_path / "results", progress=False)
    exc = info.value
    assert exc.notebook == "01_boom" and exc.ename == "ValueError" and "planted failure 4471" in exc.evalue
    assert "\x1b[" not in exc.traceback
    run = json.loads((exc.run_dir / "run.json").read_text())
    assert run["status"] == "failed" and run["error"]["evalue"] == "planted failure 4471"
    assert (exc.run_dir / "01_boom.ipynb").exists()  # the partial notebook is kept for debugging


def test_cli_exits_nonzero_with_the_failing_cell(tmp_path, monkeypatch, capsys):
    prof = _failing_chain(tmp_path, monkeypatch)
    code = cli.main(["run", "--profile", str(prof), "--results", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "ValueError" in err and "planted failure 4471" in err and "01_boom" in err


def test_cli_bad_profile_exits_2(capsys):
    assert cli.main(["run", "--profile", "nope"]) == 2
    assert "no profile 'nope'" in capsys.readouterr().err


def test_run_folders_are_never_reused(tmp_path):
    a = runfolder.create_run_dir("same", tmp_path)
    b = runfolder.create_run_dir("same", tmp_path)
    assert a != b and a.exists() and b.name == "same-2"


@pytest.mark.slow
def test_parameters_no_notebook_declares_are_an_error_unless_allowed(tmp_path, capsys):
    smoke = runner.load_profile("smoke")
    prof = tmp_path / "typo.yaml"
    prof.write_text(
        "description: smoke with a typo\nnotebooks: [01_context_composition]\n"
        f"parameters: {{n_chains: 1, window_tokens: {smoke.parameters['window_tokens']}, windw_tokens: 9}}\n"
    )
    # Issue #12 item 9: a typo'd key was accepted silently; now it stops the run before anything is made.
    with pytest.raises(runner.ProfileError, match=r"unknown parameter windw_tokens = 9.*did you mean 'window_tokens'"):
        runner.run_profile(prof, results=tmp_path / "results", progress=False, render=False)
    assert not (tmp_path / "results").exists()
    # With allow_unknown the run goes on and records the key, as before.
    result = runner.run_profile(prof, results=tmp_path / "results", progress=False, render=False, allow_unknown=True)
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["unused_parameters"] == ["windw_tokens"]
    assert "windw_tokens" in capsys.readouterr().err
    assert result.report is None and not (result.run_dir / "report.html").exists()


# --------------------------------------------------------------------------- real sessions through notebook 01

from tests.helpers import FIXTURES  # noqa: E402  (the real-session tests below start here)

HERE_FIXTURES = FIXTURES


def test_my_sessions_profile_loads():
    prof = runner.load_profile("my_sessions")
    assert prof.parameters["session_paths"] and all(p.startswith("~") for p in prof.parameters["session_paths"])


@pytest.mark.slow
def test_notebook_01_on_every_fixture_session(tmp_path, warm_kernels):
    """Every fixture session of every format through notebooks 01-05. Four arms (every arm meets the public
    sessions in the `my_sessions` runs: `tests/report/test_my_sessions.py`, `tests.redaction_pair`)."""
    prof = tmp_path / "fixtures.yaml"
    prof.write_text(
        "description: every fixture session\n"
        "notebooks: [01_context_composition, 02_projection_anatomy, 03_closed_book_exam, 04_cost_model,"
        " 05_open_book_exam]\n"
        f"parameters:\n  session_paths: ['{HERE_FIXTURES}', '{tmp_path / 'absent'}']\n"
        "  strategy_names: [full, futureos-deterministic, codex, claude-code]\n"
        "  tail_tokens: 600\n  window: 16000\n  output_ceiling: 4000\n  n_boot: 200\n  turns: 10\n  cost_cases: 2\n"
    )
    result = runner.run_profile(prof, results=tmp_path / "results", progress=False, render=False, launch=warm_kernels)
    d = result.run_dir
    comp = pd.read_parquet(d / "composition.parquet")
    assert set(comp["source_format"]) == {"claude_code", "pi", "swe_agent", "codex", "opencode", "chat_jsonl"}
    imported = json.loads((d / "import_audit.json").read_text())
    # The hand-written broken fixtures are counted, the missing path too; nothing crashed.
    assert imported["skipped"] > 0 and imported["reasons"]["unreadable"] == 1
    skips = pd.read_parquet(d / "import_skips.parquet")
    assert len(skips) == imported["skipped"]
    files = list((d / "sessions").glob("*.jsonl"))
    assert len(files) == comp["session_id"].nunique() == imported["sessions"]
    assert (d / "figures" / "fig2_composition.png").exists()
    # The exams ran on probes mined from the real sessions.
    answers = pd.read_parquet(d / "exam_closed.parquet")
    assert set(answers["pointer"]) == {"assistant", "user", "tool"}
    assert answers["question_id"].str.contains("-probe-").all()
    full = answers[(answers["strategy"] == "full") & ~answers["decoy"]]
    assert len(full) >= 10 and full["correct"].all()  # nothing is dropped when nothing is compacted
    assert (d / "figures" / "fig9_open_book.png").exists()
    # pi records cacheRead / cacheWrite per call: measured and simulated hit ratios side by side.
    measured = pd.read_parquet(d / "cache_measured.parquet")
    pi = measured[measured["source_format"] == "pi"]
    big = pi[pi["session_id"] == "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"]  # the shared large-session fixture
    assert len(big) == 1 and 0 < big["measured_hit_ratio"].iloc[0] <= 1 and 0 < big["simulated_hit_ratio"].iloc[0] <= 1


def test_smoke_run_has_projection_anatomy(smoke_run):
    d = smoke_run.run_dir
    from compaction_lab import strategies
    from compaction_lab.strategies import anatomy

    proj = pd.read_parquet(d / "projections.parquet")
    assert list(proj.columns) == anatomy.PROJECTION_COLUMNS
    assert set(proj["strategy"]) == set(strategies.names())
    # The offline summary provider is labelled as a stand-in wherever it shows.
    summarising = proj[proj["segment_kind"] == "summary"]
    assert not summarising.empty and summarising["strategy_label"].str.contains("extractive stand-in").all()
    for fig in ("fig7_projection_anatomy", "fig8_trigger_budgets"):
        assert (d / "figures" / f"{fig}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (d / "02_projection_anatomy.ipynb").exists()


def test_smoke_run_has_cost_figures(smoke_run):
    d = smoke_run.run_dir
    cost = pd.read_parquet(d / "cost.parquet")
    from compaction_lab.cost.model import COST_COLUMNS

    assert list(cost.columns) == COST_COLUMNS and len(cost) > 0
    for fig in ("fig3_complete", "fig5_compaction_cost", "fig6_cost_per_point", "fig1_retained", "fig9_open_book"):
        assert (d / "figures" / f"{fig}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shapes = pd.read_parquet(d / "cache_shapes.parquet")
    assert {"variant", "simulator", "hit_ratio"} <= set(shapes.columns)


# --------------------------------------------------------------------------- batches


def test_set_and_sweep_values_are_read_as_yaml():
    assert runner.parse_assignment("n_chains=3") == ("n_chains", 3)
    assert runner.parse_assignment("pointer_mix={assistant: 1.0}") == ("pointer_mix", {"assistant": 1.0})
    assert runner.parse_assignment("summarizer=none") == ("summarizer", "none")
    assert sweep.parse_sweep("seed=7,8") == ("seed", [7, 8])
    assert sweep.parse_sweep("session_paths=[[a], [b, c]]") == ("session_paths", [["a"], ["b", "c"]])
    for bad in ("novalue", "=3"):
        with pytest.raises(runner.ProfileError):
            runner.parse_assignment(bad)
    with pytest.raises(runner.ProfileError):
        sweep.parse_sweep("seed=")


def test_overrides_replace_profile_and_notebook_parameters():
    prof = runner.Profile("p", "d", ("a",), {"seed": 1, "n": 2}, {"a": {"seed": 5}})
    over = prof.with_parameters({"seed": 9})
    assert over.parameters_for("a") == {"seed": 9, "n": 2}
    with pytest.raises(runner.ProfileError, match="run_dir"):
        prof.with_parameters({"run_dir": "/x"})
    assert not prof.redact and prof.with_parameters({"redact": True}).redact


# --------------------------------------------------------------------------- sharing: redaction end to end

PLANTED = {
    "key": "sk-proj-Zq8WbT3kLm9RxV2cN7pY4dHs",
    "bearer": "eyQ7mN2pX9kL4vB8",
    "email": "dana.whitfield@example-corp.com",
    "home": "/home/danaw",
}
ENV_KEY = "sk-envonly-Hk29Lq8Vn3Rt7Wx1Zs5Pm"


def _secret_session(path: Path) -> Path:
    """A chat-JSONL session with secrets planted in user, assistant and tool text."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(30):
        msgs += [
            {
                "role": "user",
                "content": f"Step {i}: check module_{i}.py under {PLANTED['home']}/proj/pkg_{i} "
                f"and mail {PLANTED['email']} if build_{i:03d} fails.",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"cat {PLANTED['home']}/proj/module_{i}.py"}),
                        },
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"OPENAI_API_KEY={PLANTED['key']}\ncurl -H 'Authorization: Bearer {PLANTED['bearer']}' "
                f"https://api.internal/v{i}\nresult_{i} = {1000 + 37 * i}\nleaked {ENV_KEY}",
            },
            {"role": "assistant", "content": f"Decision {i}: keep retry_limit_{i} at {3 + i} for module_{i}."},
        ]
    path.write_text("\n".join(json.dumps(m) for m in msgs) + "\n")
    return path


def _on_my_sessions(session: Path) -> dict:
    """Overrides that point the `my_sessions` profile at one file and keep the run small."""
    return {
        "session_paths": [str(session)],
        "window": 6000,
        "output_ceiling": 1000,
        "tail_tokens": 600,
        "n_boot": 50,
        "turns": 5,
        "cost_cases": 1,
        "probe_n_questions": 8,
    }


@pytest.mark.slow
def test_redacted_run_leaks_none_of_the_planted_secrets(tmp_path, monkeypatch, warm_kernels):
    from compaction_lab.privacy.leaks import find_leaks

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    session = _secret_session(tmp_path / "secrets.jsonl")
    mine = runner.load_profile("my_sessions")
    assert mine.redact  # on by default for the user's own sessions
    red = runner.run_profile(
        mine, results=tmp_path / "r", progress=False, overrides=_on_my_sessions(session), launch=warm_kernels
    )
    assert red.report is not None and (red.run_dir / "archive.sqlite").exists()
    assert find_leaks(red.run_dir, [*PLANTED.values(), ENV_KEY]) == []
    info = json.loads((red.run_dir / "run.json").read_text())
    assert info["redaction"]["enabled"] and "email" in " ".join(info["redaction"]["patterns"])
    # Redaction masks, it does not drop: the sessions keep every record.
    comp = pd.read_parquet(red.run_dir / "composition.parquet")
    assert comp["records"].sum() == 1 + 30 * 4

    # Without redaction the planted values do reach the run folder (so the check above can fail) --
    # but the environment's API key never does.
    first = replace(mine, notebooks=("01_context_composition",))  # the later notebooks' parameters go unused
    plain = runner.run_profile(
        first,
        results=tmp_path / "r",
        progress=False,
        redact=False,
        overrides=_on_my_sessions(session),
        allow_unknown=True,
        launch=warm_kernels,
    )
    leaks = {needle for _, needle in find_leaks(plain.run_dir, [*PLANTED.values(), ENV_KEY])}
    assert leaks == set(PLANTED.values())


# --------------------------------------------------------------------------- parameters fail first (issue #12 item 9)


@pytest.mark.parametrize(
    "profile, overrides, needle",
    [
        ("smoke", {"window": -5}, "window = -5"),  # was: failed in notebook 02, after 01 ran
        ("smoke", {"n_chains": 0}, "n_chains = 0"),  # was: "run notebook 01 first"
        ("smoke", {"window": 500}, "output_ceiling = 500"),  # window == output ceiling: was 0 everywhere
        ("smoke", {"seed": "abc"}, "seed = 'abc'"),  # was: accepted silently
        ("smoke", {"bogus": 1}, "unknown parameter bogus"),  # was: accepted silently
        ("smoke", {"session_paths": 5}, "session_paths = 5"),  # was: TypeError inside notebook 01
        ("my_sessions", {"session_paths": []}, "session_paths = []"),  # was: synthetic chains, silently
    ],
)
def test_bad_parameters_fail_before_any_run_folder(tmp_path, profile, overrides, needle):
    with pytest.raises(runner.ProfileError, match=re.escape(needle)):
        runner.run_profile(profile, results=tmp_path / "results", progress=False, overrides=overrides)
    assert not (tmp_path / "results").exists()


def test_a_sweep_checks_every_combination_before_the_first_run(tmp_path):
    with pytest.raises(runner.ProfileError) as info:
        sweep.run_sweep("smoke", {"window": [3000, 0], "seed": [7, "x"]}, results=tmp_path / "r", progress=False)
    assert "window = 0" in str(info.value) and "seed = 'x'" in str(info.value)
    assert not (tmp_path / "r").exists()  # not even the first, valid combination ran
