"""Parameters fail first (issue #12 item 9): one check of a profile's and --set parameters, before any work."""

import nbformat
import pytest

from compaction_lab.core import paths
from compaction_lab.core.errors import ProfileError
from compaction_lab.run import parameter_rules, params, runner, sweep


def _problems(**overrides) -> list[str]:
    return params.problems(runner.load_profile("smoke").with_parameters(overrides))


def _one(problems: list[str], *needles: str) -> str:
    """The single problem mentioning every needle (fails when none or several do)."""
    hits = [p for p in problems if all(n in p for n in needles)]
    assert len(hits) == 1, (needles, problems)
    return hits[0]


# --------------------------------------------------------------------------- the committed profiles


@pytest.mark.parametrize("name", ["smoke", "default", "model", "my_sessions"])
def test_committed_profiles_validate(name):
    # my_sessions' paths need not exist here (missing paths are counted skips at import); their type is checked.
    assert params.problems(runner.load_profile(name)) == []


# --------------------------------------------------------------------------- the findings, one test each


@pytest.mark.parametrize("window", [0, -5])
def test_a_window_below_one_is_an_error_naming_it(window):
    # Was: a traceback for FutureOS, "capacity -31,990" for the others, or a failure in notebook 02 only.
    _one(_problems(window=window), f"window = {window}", ">= 1")


def test_a_window_no_larger_than_the_output_ceiling_names_both():
    # Was: accepted, and every arm scored 0/23.
    problem = _one(_problems(window=32_000, output_ceiling=32_000), "window = 32,000", "output_ceiling = 32,000")
    assert "must exceed" in problem


def test_futureos_margin_names_the_strategy_and_both_parameters():
    # W > O, but FutureOS keeps min(2048, W // 16) as a margin: its capacity W - O - margin is negative.
    found = _problems(window=33_000, output_ceiling=32_000)
    for name in ("futureos-summarized", "futureos-deterministic"):
        problem = _one(found, repr(name))
        assert "window = 33,000" in problem and "output_ceiling = 32,000" in problem and "-1,048" in problem
    assert not any("'codex'" in p for p in found)  # Codex's 90% of W still leaves room


def test_capacity_is_each_strategys_own():
    from compaction_lab.strategies import trigger

    w, o = 128_000, 32_000
    assert params.strategy_capacity("futureos-summarized", w, o) == trigger.futureos_trigger(w, o).effective
    assert params.strategy_capacity("codex", w, o) == trigger.codex_trigger(w).auto_compact
    assert params.strategy_capacity("opencode", w, o) == trigger.opencode_trigger(w, o).usable
    assert params.strategy_capacity("full", w, o) == w - o


def test_only_the_strategies_that_run_are_weighed():
    # Codex alone fits a window FutureOS cannot use; the open-book arm (notebook 05) is FutureOS, though.
    found = _problems(window=33_000, output_ceiling=32_000, strategy_names=["codex"], strategy="codex")
    assert found == []


def test_zero_chains_is_an_error_naming_n_chains():
    # Was: "run notebook 01 first" from a later notebook.
    _one(_problems(n_chains=0), "n_chains = 0", ">= 1")


def test_a_seed_of_the_wrong_type_is_an_error():
    # Was: accepted silently.
    problem = _one(_problems(seed="abc"), "seed = 'abc'")
    assert "an integer" in problem and "01_context_composition" in problem


def test_unknown_keys_are_an_error_unless_allowed():
    prof = runner.load_profile("smoke").with_parameters({"windw": 3000, "bogus": 1})
    found = params.problems(prof)
    assert "did you mean 'window'" in _one(found, "windw = 3000") and "--allow-unknown" in _one(found, "bogus = 1")
    assert params.problems(prof, allow_unknown=True) == []


def test_runner_parameters_are_known_without_notebook_01():
    prof = runner.Profile("p", "d", ("02_projection_anatomy",), {"redact": True, "redact_patterns": ""})
    assert params.problems(prof) == []
    bad = runner.Profile("p", "d", ("02_projection_anatomy",), {"redact": "yes"})
    assert "true or false" in _one(params.problems(bad), "redact = 'yes'")


def test_session_paths_of_the_wrong_type_is_an_error():
    # Was: TypeError inside notebook 01.
    _one(_problems(session_paths=5), "session_paths = 5", "a path or a list of paths")


def test_empty_session_paths_is_an_error_not_synthetic_chains():
    # Was: silently ran synthetic chains instead of the user's sessions.
    mine = runner.load_profile("my_sessions")
    problem = _one(params.problems(mine.with_parameters({"session_paths": []})), "session_paths = []")
    assert "synthetic" in problem and "leave session_paths out" in problem
    _one(params.problems(mine.with_parameters({"session_paths": ""})), "session_paths = ['']")
    yaml_empty = runner.Profile("p", "d", ("01_context_composition",), {"session_paths": []})
    _one(params.problems(yaml_empty), "session_paths = []")


def test_one_session_path_is_made_a_list():
    mine = runner.load_profile("my_sessions").with_parameters({"session_paths": "~/somewhere"})
    assert params.checked(mine).parameters["session_paths"] == ["~/somewhere"]


def test_every_problem_is_reported_together():
    with pytest.raises(ProfileError) as info:
        params.checked(
            runner.load_profile("smoke").with_parameters(
                {"seed": "abc", "n_chains": 0, "window": -5, "summarizer": "nope", "bogus": 1}
            )
        )
    text = str(info.value)
    assert "5 problems" in text
    for needle in ("seed = 'abc'", "n_chains = 0", "window = -5", "summarizer = 'nope'", "bogus = 1"):
        assert needle in text


@pytest.mark.parametrize(
    "overrides, needles",
    [
        ({"window": True}, ("window = True", "an integer")),  # a bool is not an int
        ({"window": None}, ("window = None", "an integer")),  # null only where the default is None
        ({"followup_min_score": "high"}, ("followup_min_score = 'high'", "a number")),
        ({"strategy_names": ["codx"]}, ("strategy_names = ['codx']", "did you mean 'codex'")),
        ({"strategy": "nope"}, ("strategy = 'nope'", "allowed: futureos-summarized")),
        ({"summarizer": "modle"}, ("summarizer = 'modle'", "none, extractive, model")),
        ({"summarizer": "model"}, ("summarizer = model", "`model` parameter")),
        ({"reader": "oracle"}, ("reader = 'oracle'", "verbatim")),
        ({"encoding": "o200k_base"}, ("encoding = 'o200k_base'", "offline")),
        ({"pointer_mix": {"assist": 1}}, ("pointer_mix", "unknown pointers")),
        ({"pointer_mix": {"user": 0}}, ("pointer_mix", "positive sum")),
        ({"n_decoys": 9}, ("n_decoys = 9", "n_questions = 8")),
        ({"n_cases": 7}, ("n_cases = 7", "2 synthetic chains give at most 6")),
        ({"price_tables": ["nope"]}, ("price_tables = ['nope']", "no price table 'nope'")),
        ({"figure_simulator": "openai"}, ("figure_simulator = 'openai'", "would be empty")),
        ({"simulators": ["lru"]}, ("simulators = ['lru']", "deepseek")),
        ({"period": "noon"}, ("period = 'noon'", "off_peak")),
        ({"turns": 50, "simulated_turns": 2}, ("simulated_turns = 2", ">= 3")),
        ({"price_tables": ["deepseek-flash"], "price_table": "gpt-4.1"}, ("price_table = 'gpt-4.1'", "not among")),
        ({"wordings": ["only one"]}, ("wordings", "three wordings")),
        ({"k": 0}, ("k = 0", ">= 1")),
        ({"window_tokens": 10}, ("window_tokens = 10", f">= {parameter_rules.MIN_WINDOW_TOKENS:,}")),
        ({"fig8_windows": [1000], "fig8_output_ceilings": [4000]}, ("fig8_output_ceilings", "below a window")),
        ({"redact_patterns": "/no/such/patterns.yaml"}, ("redact_patterns", "cannot read")),
        ({"model": {"base_url": "http://x/v1"}}, ("model = ", "missing model")),
        ({"openai_api_key": "sk-x"}, ("'openai_api_key' looks like a secret", "environment variables")),
    ],
)
def test_types_ranges_and_names(overrides, needles):
    _one(_problems(**overrides), *needles)


def test_an_int_is_a_number_where_a_float_is_declared():
    assert _problems(followup_min_score=2) == []


# --------------------------------------------------------------------------- types come from the notebooks


def _notebook(folder, name: str, parameters: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]})]
    nbformat.write(nb, folder / f"{name}.ipynb")


def test_types_and_nullability_are_read_from_the_parameters_cell(tmp_path, monkeypatch):
    _notebook(
        tmp_path,
        "01_x",
        'run_dir: str = ""\nlimit: Optional[int] = None\nmaybe: int = None\n'
        "ratio: float = 0.5\nnames: List[str] = []\nplain = 3\n",
    )
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", tmp_path)
    decl = params.declared_parameters("01_x")
    assert (decl["limit"].type, decl["limit"].nullable) == ("int", True)
    assert (decl["maybe"].type, decl["maybe"].nullable) == ("int", True)  # the default says None is fine
    assert (decl["names"].type, decl["ratio"].nullable) == ("list", False)
    assert (decl["ratio"].type, decl["ratio"].default) == ("float", 0.5)
    assert decl["plain"].type is None  # not annotated: any value goes

    def check(**given):
        return params.problems(runner.Profile("p", "d", ("01_x",), given))

    assert check(limit=None, maybe=None, ratio=1, names=["a"], plain=[1]) == []
    assert "expected an integer or null" in _one(check(limit="3"), "limit = '3'")
    assert "a number" in _one(check(ratio=None), "ratio = None")


def test_per_notebook_values_are_checked_against_that_notebook():
    prof = runner.Profile(
        "p",
        "d",
        ("01_context_composition", "02_projection_anatomy"),
        {},
        {"01_context_composition": {"seed": "x", "window": 5}},
    )
    found = params.problems(prof)
    _one(found, "notebook_parameters.01_context_composition.seed = 'x'", "an integer")
    assert "02_projection_anatomy does" in _one(found, "notebook_parameters.01_context_composition.window")


# --------------------------------------------------------------------------- the profile file's own shape


@pytest.mark.parametrize(
    "text, needles",
    [
        ("notebooks: 5\n", ("notebooks: expected a list", "5")),
        (
            "notebooks: 01_context_composition\n",
            ("notebooks: expected a list", "write notebooks: [01_context_composition]"),
        ),
        ("parameters: [1, 2]\n", ("parameters: expected a mapping",)),
        ("notebook_parameters: [01_context_composition]\n", ("notebook_parameters: expected a mapping",)),
        (
            "notebooks: [01_context_composition]\nnotebook_parameters: {01_context_composition: 3}\n",
            ("notebook_parameters.01_context_composition: expected a mapping",),
        ),
        ("description: [a, b]\n", ("description: expected text",)),
        ("notebooks: []\n", ("notebooks: the list is empty",)),
        ("notebooks: [01_context_composition, 01_context_composition]\n", ("listed twice",)),
    ],
)
def test_profile_files_of_the_wrong_shape_are_one_clear_error(tmp_path, text, needles):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        runner.load_profile(path)
    assert all(n in str(info.value) for n in needles), str(info.value)
    assert str(info.value).count("\n") == 0  # one problem, said once (never one error per character)


def test_every_shape_problem_of_a_profile_file_is_listed(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("description: 4\nnotebooks: [01_context_composition, 5]\nparameters: 3\n")
    with pytest.raises(ProfileError, match="3 problems") as info:
        runner.load_profile(path)
    assert "description" in str(info.value) and "notebooks" in str(info.value) and "parameters" in str(info.value)


def test_a_model_run_checks_its_ledger_and_checkpoints_up_front(tmp_path, monkeypatch):
    (tmp_path / "ck").mkdir()
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck"))
    model = dict(runner.load_profile("model").parameters["model"], ledger=str(tmp_path))
    found = params.problems(runner.load_profile("model").with_parameters({"model": model}))
    _one(found, f"ledger {tmp_path} is a folder")
    _one(found, f"checkpoint database {tmp_path / 'ck'} is a folder")


def test_relative_session_paths_are_taken_from_where_the_run_starts(tmp_path, monkeypatch):
    """Each notebook runs inside its run folder: a relative path given on the command line is made absolute
    against the folder `compaction-lab run` was started from; ``~`` and absolute paths are kept."""
    monkeypatch.chdir(tmp_path)
    prof = runner.Profile(
        "p",
        "d",
        ("01_context_composition",),
        {"session_paths": ["logs/a.jsonl", "~/.pi/agent/sessions", "/abs/b.jsonl"]},
    )
    got = params.normalised(prof).parameters["session_paths"]
    assert got == [str(tmp_path / "logs" / "a.jsonl"), "~/.pi/agent/sessions", "/abs/b.jsonl"]
    one = params.normalised(runner.Profile("p", "d", ("01_context_composition",), {"session_paths": "x"}))
    assert one.parameters["session_paths"] == [str(tmp_path / "x")]


# --------------------------------------------------------------------------- the engine's runner parameters


def test_tokenizer_and_scheduler_are_runner_parameters_checked_before_a_run():
    assert _problems(tokenizer="tiktoken", scheduler="tcp://127.0.0.1:8786") == []
    assert _problems(tokenizer="bpe-openai", scheduler="local") == []
    _one(_problems(tokenizer="fast"), "tokenizer", "auto, tiktoken, bpe-openai")
    _one(_problems(scheduler="everywhere"), "scheduler", "tcp://")
    _one(_problems(tokenizer=3), "tokenizer")


def test_a_profiles_tokenizer_and_scheduler_reach_the_kernels_environment(monkeypatch):
    monkeypatch.delenv("COMPACTION_LAB_TOKENIZER", raising=False)
    monkeypatch.setenv("COMPACTION_LAB_SCHEDULER", "sync")
    prof = runner.load_profile("smoke").with_parameters({"tokenizer": "tiktoken", "scheduler": "local"})
    import os

    with runner._kernel_environment(prof):
        assert os.environ["COMPACTION_LAB_TOKENIZER"] == "tiktoken"
        assert os.environ["COMPACTION_LAB_SCHEDULER"] == "local"
    assert "COMPACTION_LAB_TOKENIZER" not in os.environ and os.environ["COMPACTION_LAB_SCHEDULER"] == "sync"


def test_a_sweeps_planned_run_names_are_distinct_even_when_values_read_the_same(tmp_path, monkeypatch):
    """Was: an endless loop when two swept values slug to one name (``a b`` and ``a/b``)."""
    monkeypatch.setattr(runner.runfolder, "new_run_name", lambda stem: f"{stem}-20260101-000000")  # one clock second
    (tmp_path / "taken").mkdir()
    names = sweep._run_names("smoke", [{"tag": "a b"}, {"tag": "a/b"}, {"tag": "c"}], tmp_path)
    assert len(set(names)) == 3 and names[1] == f"{names[0]}-2"
    (tmp_path / names[2]).mkdir()
    assert sweep._run_names("smoke", [{"tag": "c"}], tmp_path)[0] == f"{names[2]}-2"


# --------------------------------------------------------------------------- issue 25: sweep values


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("7,7", ["'7'", "'7'"]),
        ("1,01,0x1,+1", ["'1'", "'01'", "'0x1'", "'+1'"]),
        ("[16000, 16000.0]", ["'16000'", "'16000.0'"]),
        ("a, 'a', \"a\"", ["'a'", "\"'a'\"", "'\"a\"'"]),
        ([7, 8, 7], ["7", "7"]),
        ("[[1, 2], [1, 2]]", ["'[1, 2]'"]),
    ],
)
def test_sweep_values_equal_after_parsing_are_an_error_naming_them(raw, shown):
    with pytest.raises(ValueError, match=r"^sweep seed: ") as caught:
        params.sweep_values("seed", raw)
    msg = str(caught.value)
    assert "read as" in msg and all(s in msg for s in shown), msg


def test_sweep_values_that_differ_in_kind_are_distinct():
    # true is not 1, "1" is not 1: each is its own run (and the checks judge its type).
    assert params.sweep_values("x", "1,true,'1',1.5") == [1, True, "1", 1.5]
    assert params.sweep_values("x", "range(0, 3)") == [0, 1, 2]


def test_a_profiles_duplicate_sweep_values_are_a_layout_problem():
    found = params.layout_problems({"sweeps": {"seed": [3, 3]}}, [])
    assert len(found) == 1 and found[0].startswith("sweeps.seed: ") and "read as 3" in found[0]


def test_a_range_is_counted_before_it_is_listed():
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"sweep seed: range\(0,100000000\) gives 100,000,000 values"):
            params.sweep_values("seed", "range(0,100000000)")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, peak
    assert (
        params.sweep_values("seed", f"range({parameter_rules.MAX_SWEEP_VALUES})")[-1]
        == parameter_rules.MAX_SWEEP_VALUES - 1
    )
    assert params.sweep_values("seed", "range(10, 0, -3)") == [10, 7, 4, 1]


# --------------------------------------------------------------------------- n_questions past a sane maximum (issue 25, item 15)


def test_n_questions_past_the_maximum_is_an_error_naming_it():
    """Was: ``--set n_questions=1000000`` ran, reported 9 questions and exited 0."""
    from compaction_lab.exam.questions.bank import MAX_QUESTIONS_PER_CASE

    n_cases = runner.load_profile("smoke").parameters["n_cases"]
    limit = MAX_QUESTIONS_PER_CASE * n_cases
    problem = _one(_problems(n_questions=1_000_000), "n_questions = 1,000,000")
    assert f"{MAX_QUESTIONS_PER_CASE:,} per case" in problem and f"n_cases = {n_cases}" in problem
    assert f"{limit:,}" in problem
    assert not any("n_questions" in p for p in _problems(n_questions=limit))
    _one(_problems(n_questions=limit + 1), f"n_questions = {limit + 1:,}")
    _one(_problems(probe_n_questions=MAX_QUESTIONS_PER_CASE + 1), f"probe_n_questions = {MAX_QUESTIONS_PER_CASE + 1:,}")


def test_a_run_asking_a_million_questions_stops_before_any_work(tmp_path, capsys):
    from compaction_lab import cli

    code = cli.main(["run", "--profile", "smoke", "--set", "n_questions=1000000", "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "n_questions = 1,000,000" in err and "per case" in err
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- issue 44: hard ceilings, huge numbers


def test_max_sweep_runs_past_the_hard_ceiling_is_an_error_naming_it():
    """Was: a profile could set ``max_sweep_runs`` to anything (1e11 planned billions of runs)."""
    assert _problems(max_sweep_runs=parameter_rules.MAX_SWEEP_RUNS_CEILING) == []
    over = parameter_rules.MAX_SWEEP_RUNS_CEILING + 1
    _one(_problems(max_sweep_runs=over), f"max_sweep_runs = {over}", f"{parameter_rules.MAX_SWEEP_RUNS_CEILING:,}")
    _one(_problems(max_sweep_runs=10**11), "max_sweep_runs = 100000000000", "most runs any sweep may plan")


def test_a_key_takes_no_more_values_than_a_sweep_may_have_runs():
    """A key with more values than the hard ceiling of runs could never run: refused before it is listed."""
    assert parameter_rules.MAX_SWEEP_VALUES <= parameter_rules.MAX_SWEEP_RUNS_CEILING
    too_many = parameter_rules.MAX_SWEEP_RUNS_CEILING + 1
    with pytest.raises(ValueError, match=f"sweep seed: range\\(0,{too_many}\\) gives {too_many:,} values"):
        params.sweep_values("seed", f"range(0,{too_many})")
    with pytest.raises(ValueError, match=f"sweep seed: {too_many:,} values"):
        params.sweep_values("seed", list(range(too_many)))


@pytest.mark.parametrize(
    "raw, says",
    [
        ("range(0,10000000000000000000)", "gives 10,000,000,000,000,000,000 values"),  # was: OverflowError
        ("range(-9223372036854775809, 9223372036854775807, 1)", "gives 18,446,744,073,709,551,616 values"),
        (f"range(0,{'9' * 5000})", "a bound of 5,000 digits"),  # was: Python's "Exceeds the limit (4300 digits)"
        (f"range({'9' * 4300})", "more than 10^4299 values"),  # a count too long to print
    ],
)
def test_a_range_too_large_for_python_is_a_one_line_error_naming_the_key(raw, says):
    with pytest.raises(ValueError) as err:
        params.sweep_values("seed", raw)
    message = str(err.value)
    assert message.startswith("sweep seed: ") and says in message and "\n" not in message, message
    assert "set_int_max_str_digits" not in message and len(message) < 400
