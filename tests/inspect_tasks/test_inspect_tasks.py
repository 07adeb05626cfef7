"""The closed book as an Inspect AI task, offline and against the local llama.cpp server, and its logs read back (issue 31)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from compaction_lab.core import runfolder
from compaction_lab.core.tokens import PUBLIC_ENCODINGS_IN_BPE_OPENAI, seed_tiktoken_cache

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def _offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment with a fresh, empty tiktoken cache: o200k_base must come from the seeding."""
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken-cache"), **extra}
    env.pop("OPENAI_API_KEY", None)
    return env


def _inspect_eval(
    run_dir: Path, log_dir: Path, env: dict[str, str], *args: str, timeout: float = 900
) -> subprocess.CompletedProcess:
    cmd = [
        str(BIN / "inspect"),
        "eval",
        "compaction_lab/closed_book",
        "-T",
        f"run={run_dir}",
        "--log-dir",
        str(log_dir),
    ]
    return subprocess.run(
        [*cmd, "--display", "plain", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=log_dir.parent,
    )


@pytest.fixture
def run_copy(smoke_run, tmp_path):
    """A copy of the session's smoke run folder (the import writes into it)."""
    dest = tmp_path / "run"
    shutil.copytree(smoke_run.run_dir, dest)
    return dest


def test_closed_book_runs_offline_with_epochs_and_its_log_reads_back(run_copy, tmp_path):
    """Acceptance 1: mockllm, 3 epochs, offline; import-inspect gives questions x strategies x 3 rows."""
    logs = tmp_path / "logs"
    done = _inspect_eval(run_copy, logs, _offline_env(tmp_path), "--model", "mockllm/model", "--epochs", "3")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = sorted(logs.glob("*.eval"))
    assert len(written) == 1
    imported = subprocess.run(
        [str(BIN / "compaction-lab"), "import-inspect", str(written[0])],  # the run folder comes from the log
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == str(run_copy.resolve())  # the folder written, for scripts
    rows = runfolder.load_table(run_copy, "exam_inspect")
    # One summary line per arm: the three draws of every question, which mockllm answers alike.
    lines = [ln for ln in imported.stderr.splitlines() if "mockllm/model (Inspect)" in ln]
    assert len(lines) == rows["strategy"].nunique()
    assert all("questions x 3 draws" in ln and "all draws agree on 100%" in ln for ln in lines)
    closed = runfolder.load_table(run_copy, "exam_closed")  # the suite's own closed book: one row per question x arm
    assert len(rows) == len(closed) * 3
    keys = ["case_id", "strategy", "question_id"]
    assert set(map(tuple, rows[keys].to_numpy())) == set(map(tuple, closed[keys].to_numpy()))
    assert sorted(rows["draw"].unique()) == [0, 1, 2]
    assert set(rows["reader_label"]) == {"mockllm/model (Inspect)"}
    assert not rows["correct"].any()  # mockllm's canned text is no value, and it does not abstain on decoys
    # Figure 12 and the report now show the model beside the suite's readers, and say it came from Inspect.
    assert "report.html (figure 12 and the Inspect block)" in imported.stderr
    page = (run_copy / "report.html").read_text(encoding="utf-8")
    assert "Models run through Inspect AI" in page and "mockllm/model (Inspect)" in page and written[0].name in page
    assert "mockllm/model (Inspect)" in (run_copy / "figures" / "fig12_readers.svg").read_text(encoding="utf-8")
    assert json.loads((run_copy / "run.json").read_text())["report_refreshed"]["at"]
    # The same log again (the command in this process) replaces its rows rather than adding them.
    from compaction_lab import cli

    assert cli.main(["import-inspect", str(written[0]), "--run", str(run_copy)]) == 0
    assert len(runfolder.load_table(run_copy, "exam_inspect")) == len(rows)


def test_the_scorer_grades_as_the_suite_abstention_and_decoys(run_copy, tmp_path):
    """A model that always answers NOT_FOUND is right exactly on the decoys."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    from compaction_lab.inspect import logs, tasks

    task = tasks.closed_book(str(run_copy), strategy="codex")
    n = len(task.dataset)
    model = get_model(
        "mockllm/model", custom_outputs=[ModelOutput.from_content("mockllm/model", "NOT_FOUND.") for _ in range(n)]
    )
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    rows = logs.read_log(log.location).rows
    assert len(rows) == n and set(rows["strategy"]) == {"codex"}
    assert rows["decoy"].any() and (~rows["decoy"]).any()
    assert (rows["correct"] == rows["decoy"]).all()
    assert set(rows["given"]) == {"NOT_FOUND"}


def test_unknown_strategy_and_folder_are_errors(tmp_path, run_copy):
    from compaction_lab.inspect import tasks

    with pytest.raises(KeyError, match="unknown strategy 'nope'"):
        list(tasks.closed_book_samples(run_copy, "nope"))
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        list(tasks.closed_book_samples(tmp_path))


def test_closed_book_against_the_local_llama_server(llm_server, run_copy, tmp_path):
    """Inspect's OpenAI-compatible provider against the local llama.cpp server: a real model answers."""
    from tests.llm_server import MODEL_ALIAS, request_timeout

    logs = tmp_path / "logs"
    env = _offline_env(tmp_path, LOCAL_BASE_URL=llm_server, LOCAL_API_KEY="unused")
    done = _inspect_eval(
        run_copy,
        logs,
        env,
        "-T",
        "strategy=codex",
        "--model",
        f"openai-api/local/{MODEL_ALIAS}",
        "--limit",
        "3",
        "--max-tokens",
        "24",
        "--max-connections",
        "1",
        "--timeout",  # each request's, sized from the server's measured speed
        str(round(request_timeout())),
        timeout=900 + 3 * request_timeout(),  # three samples, one request each
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    from compaction_lab.inspect import logs as logs_mod

    (log,) = sorted(logs.glob("*.eval"))
    read = logs_mod.read_log(log)
    rows = read.rows
    assert read.run == run_copy.resolve()
    assert len(rows) == 3 and set(rows["reader_label"]) == {f"openai-api/local/{MODEL_ALIAS} (Inspect)"}
    assert rows["given"].map(lambda g: isinstance(g, str)).all()
    assert isinstance(rows, pd.DataFrame)


def test_o200k_is_seeded_from_bpe_openai_and_loads_without_a_network(tmp_path):
    url, expected = PUBLIC_ENCODINGS_IN_BPE_OPENAI["o200k_base"]
    cache = tmp_path / "cache"
    code = (
        "import tiktoken\n"
        "from compaction_lab.core.tokens import seed_tiktoken_cache\n"
        "assert seed_tiktoken_cache('o200k_base')\n"
        "assert tiktoken.get_encoding('o200k_base').encode('hello world') == [24912, 2375]\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    seeded = cache / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(seeded.read_bytes()).hexdigest() == expected


def test_seeding_respects_a_switched_off_cache_and_unknown_encodings(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert seed_tiktoken_cache("o200k_base") is False
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    assert seed_tiktoken_cache("not_an_encoding") is False


def test_the_open_book_offers_the_archive_as_inspect_tools_and_reads_back_apart(run_copy, tmp_path):
    """Round 3 of the open book: the model's history_search runs the suite's search over the run's archive and its
    answer is graded as the suite grades; round 4 (the control) offers no tool; the rows import apart from the
    closed book's, labelled with the round."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    from compaction_lab.inspect import logs, tasks

    task = tasks.open_book(str(run_copy))  # round 3, notebook 05's arm
    samples = list(task.dataset)
    assert (
        samples and {s.metadata["round"] for s in samples} == {3} and {s.metadata["book"] for s in samples} == {"open"}
    )
    outputs = []
    for s in samples:  # one search for the value, then the value itself
        outputs += [
            ModelOutput.for_tool_call("mockllm/model", "history_search", {"query": s.target[0]}),
            ModelOutput.from_content("mockllm/model", s.target[0]),
        ]
    model = get_model("mockllm/model", custom_outputs=outputs)
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_samples=1)
    assert log.status == "success"
    tool_messages = [m for s in log.samples for m in s.messages if m.role == "tool"]
    assert len(tool_messages) == len(samples) and all(m.function == "history_search" for m in tool_messages)
    assert all('"hits"' in m.text for m in tool_messages)
    rows = logs.read_log(log.location).rows
    assert set(rows["reader_label"]) == {"mockllm/model (Inspect, open book round 3)"}
    assert rows.loc[~rows["decoy"], "correct"].all()  # the value given back is graded right
    control = tasks.open_book(str(run_copy), round=4)
    assert {s.metadata["book"] for s in control.dataset} == {"closed"}
    with pytest.raises(ValueError, match="round must be one of"):
        tasks.open_book(str(run_copy), round=9)
    (run_copy / "archive.sqlite").unlink()
    with pytest.raises(FileNotFoundError, match="the open book .notebook 05. has not run"):
        tasks.open_book(str(run_copy))


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory):
    """A run of notebooks 01 and 03 with two cases per chain: a case cut before a session's end has next actions."""
    from compaction_lab.run import runner

    prof = runner.load_profile("smoke")
    prof = runner.Profile("keyed", "two cases per chain", ("01_context_composition", "03_closed_book_exam"), {
        **prof.parameters, "n_cases": 4,
    })  # fmt: skip
    return runner.run_profile(
        prof, results=tmp_path_factory.mktemp("keyed"), progress=False, kernels=1, allow_unknown=True, render=False
    ).run_dir


def test_the_continuation_task_grades_the_first_call_as_notebook_07(keyed_run, tmp_path):
    """A model that calls each case's recorded next tool with its recorded arguments matches tool, target and
    arguments; one that talks instead of acting matches nothing. The offered tools are never run."""
    import json as json_mod

    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    from compaction_lab.inspect import tasks

    task = tasks.continuation(str(keyed_run), strategy="full")
    samples = list(task.dataset)
    assert samples and all(s.metadata["tools"] for s in samples)
    _, cases = tasks._continuation_cases(str(keyed_run))
    by_id = {(k.block, k.case.id): k for k in cases.keys}
    outputs = []
    for s in samples:
        first = by_id[(s.metadata["block"], s.metadata["case_id"])].actions[0]
        outputs.append(ModelOutput.for_tool_call("mockllm/model", first.tool, json_mod.loads(first.arguments)))
    model = get_model("mockllm/model", custom_outputs=outputs)
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_samples=1)
    assert log.status == "success"
    values = [s.scores["next_action_grade"].value for s in log.samples]
    assert all(v["tool_match"] == "C" and v["exact_match"] == "C" for v in values)
    assert not [m for s in log.samples for m in s.messages if m.role == "tool"]  # the call was graded, not run
    talk = get_model("mockllm/model", custom_outputs=[ModelOutput.from_content("mockllm/model", "ok") for _ in samples])
    (log,) = inspect_eval(task, model=talk, log_dir=str(tmp_path / "logs2"), display="none", max_samples=1)
    assert all(s.scores["next_action_grade"].value["tool_match"] == "I" for s in log.samples)
    from compaction_lab.inspect import logs

    with pytest.raises(ValueError, match="a continuation log grades next calls"):
        logs.read_log(log.location)


def test_the_continuation_task_says_why_a_run_has_nothing_to_predict(smoke_run, tmp_path):
    """The smoke run cuts each chain at its end: no case has a recorded next call. The task says so in one line,
    before Inspect starts, instead of Inspect's "dataset is empty" traceback."""
    from compaction_lab.inspect import tasks

    with pytest.raises(
        ValueError, match=r"nothing to predict: none of its 2 cases has a recorded tool call after its cut"
    ):
        tasks.continuation(str(smoke_run.run_dir))
    logs = tmp_path / "logs"
    logs.mkdir()
    done = subprocess.run(
        [str(BIN / "inspect"), "eval", "compaction_lab/continuation", "-T", f"run={smoke_run.run_dir}",
         "--model", "mockllm/model", "--log-dir", str(logs), "--display", "plain"],
        capture_output=True, text=True, timeout=600, env=_offline_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert "nothing to predict" in said and "Traceback" not in said and "dataset is empty" not in said, said[-3000:]
