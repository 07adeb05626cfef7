"""``doctor``'s plan from counts (`compaction_lab.run.estimate`) held to the dry run, and its options checked."""

from __future__ import annotations

import json

import pytest
import yaml

from compaction_lab import cli
from compaction_lab.endpoints import shared
from compaction_lab.run import estimate, plan
from tests.helpers import PUBLIC_FIXTURES

#: Prompt tokens may differ from the dry run's by at most this share, per purpose. The count builds the
#: very messages the notebooks send and counts them by the stand-in's own rule with the same tokenizer,
#: so today they agree to the token (the public fixtures: 85.6 M prompt tokens, equal); the margin is
#: for the one thing the two paths do not share: the kernels pick their tokenizer backend themselves
#: (``tokenizer: auto``: bpe-openai or tiktoken, held to the same ids by a self-check, not by identity).
TOKEN_BOUND = 0.01

#: A small run of real public sessions: two short logs cut at a small window, four arms, every notebook
#: that calls a model, the summarizer and both readers on the model (an address nothing listens on: the
#: dry run never connects, the count never builds a request).
SMALL_REAL = {
    "session_paths": [
        str(PUBLIC_FIXTURES / "claude-code" / "coverage-test-fix.jsonl"),
        str(PUBLIC_FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"),
    ],
    "window": 12000,
    "output_ceiling": 2000,
    "summarizer": "model",
    "reader": "model",
    "strategy_names": ["full", "futureos-summarized", "codex", "opencode"],
    "strategy": "futureos-summarized",
    "probe_n_questions": 4,
    "probe_n_decoys": 1,
    "tail_tokens": 600,
    "n_boot": 50,
    "turns": 5,
    "cost_cases": 2,
    "model": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "", "price_table": "deepseek-flash"},
}

#: One short synthetic chain (as tests/run/test_plan.py's), the closed book only.
SMALL_CHAIN = {
    "seed": 7,
    "n_chains": 1,
    "window_tokens": 3000,
    "decoys_per_chain": 1,
    "window": 1500,
    "output_ceiling": 300,
    "strategy_names": ["full", "codex"],
    "n_cases": 1,
    "n_questions": 3,
    "n_decoys": 1,
    "tail_tokens": 300,
    "reader": "model",
    "model": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": ""},
}


def _profile(tmp_path, notebooks, parameters, name="counts"):
    path = tmp_path / f"{name}.yaml"
    doc = {"description": "doctor counts test", "notebooks": notebooks, "parameters": parameters}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """A ledger and a checkpoint store of the test's own (both empty), and no client left from another test."""
    monkeypatch.setenv("COMPACTION_LAB_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "checkpoints.sqlite"))
    shared._CLIENTS.clear()
    yield tmp_path
    shared._CLIENTS.clear()


def _same_plan(counted, dry) -> None:
    """The count plans the dry run's calls purpose by purpose, its tokens within `TOKEN_BOUND`."""
    assert counted is not None and dry is not None
    by_count = counted.calls.set_index("purpose")
    by_dry = dry.calls.set_index("purpose")
    # Every kind of call is planned (a count of zero everywhere would agree with anything).
    assert {"exam:closed", "exam:open", "summary:codex"} <= set(by_dry.index)
    assert by_count["calls"].to_dict() == by_dry["calls"].to_dict(), counted.describe() + "\n" + dry.describe()
    assert counted.total_calls == dry.total_calls and counted.open_book_extra == dry.open_book_extra
    for purpose, tokens in by_dry["prompt_tokens"].items():
        assert by_count.loc[purpose, "prompt_tokens"] == pytest.approx(tokens, rel=TOKEN_BOUND), purpose
    assert by_count["output_tokens"].to_dict() == by_dry["output_tokens"].to_dict()
    assert counted.currency == dry.currency
    if dry.cost is not None:
        assert counted.cost == pytest.approx(dry.cost, rel=TOKEN_BOUND)


@pytest.mark.slow
def test_the_count_equals_the_dry_run_on_real_sessions(stores, warm_kernels):
    """Issue 48: the plan from counts plans the dry run's calls, purpose by purpose, and its tokens within the bound."""
    notebooks = [
        "01_context_composition",
        "02_projection_anatomy",
        "03_closed_book_exam",
        "04_cost_model",
        "05_open_book_exam",
        "06_continuation_exam",
    ]
    profile = _profile(stores, notebooks, SMALL_REAL)
    counted = estimate.estimate_run(profile)
    _same_plan(counted, plan.plan_run(profile, progress=False, launch=warm_kernels))
    assert counted is not None and counted.currency == "CNY" and counted.cost


@pytest.mark.slow
def test_the_count_equals_the_dry_run_on_the_model_profile(stores, warm_kernels):
    """The shipped ``model`` profile (synthetic chains at W = 2000, below the explorer widget's range): the same."""
    _same_plan(estimate.estimate_run("model"), plan.plan_run("model", progress=False, launch=warm_kernels))


def test_the_count_multiplies_by_draws_and_says_it_is_an_estimate(stores):
    """Each draw is a request of its own; the description names the method and what a count cannot know."""
    notebooks = ["01_context_composition", "03_closed_book_exam"]
    once = estimate.estimate_run(_profile(stores, notebooks, SMALL_CHAIN))
    thrice = estimate.estimate_run(_profile(stores, notebooks, {**SMALL_CHAIN, "draws": 3, "reader_temperature": 0.7}))
    assert once is not None and thrice is not None
    closed_once = int(once.calls.set_index("purpose").loc["exam:closed", "calls"])
    assert closed_once > 0
    assert int(thrice.calls.set_index("purpose").loc["exam:closed", "calls"]) == 3 * closed_once
    assert not (stores / "ledger.sqlite").exists(), "the count opened the ledger for writing"
    text = once.describe()
    assert "estimate from counts" in text and "--dry-run" in text
    assert "open-book reader searches" in text and "cache hits" in text
    doc = json.loads(json.dumps(once.as_dict()))
    assert doc["method"] == "counts" and doc["total_calls"] == once.total_calls and doc["ledger_calls"] == 0


def test_a_profile_without_a_model_call_is_not_counted(stores):
    params = {k: v for k, v in SMALL_CHAIN.items() if k != "reader"}
    assert estimate.estimate_run(_profile(stores, ["01_context_composition", "03_closed_book_exam"], params)) is None


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["doctor", "--profile", "model", "--dry-run", "--no-plan"], "--dry-run"),
        (["doctor", "--dry-run"], "--dry-run"),
    ],
)
def test_dry_run_option_is_refused_where_it_means_nothing(argv, named, capsys):
    """``--dry-run`` with ``--no-plan`` or without a profile: one line naming the option, exit 2."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err and err.startswith("error:")


def test_answers_in_the_ledger_are_said_and_the_ledger_is_left_alone(stores):
    """The count does not match requests to the ledger: it says how many answers it holds, and never writes it."""
    import hashlib

    from compaction_lab.endpoints.client import ChatClient
    from compaction_lab.endpoints.config import ModelConfig
    from tests.fake_openai_server import FakeOpenAIServer

    ledger = stores / "ledger.sqlite"
    with FakeOpenAIServer() as server:
        with ChatClient(ModelConfig(base_url=server.base_url, model="m", api_key_env="")) as client:
            client.complete({"messages": [{"role": "user", "content": "earlier"}]}, purpose="summary:old")
        before = hashlib.sha256(ledger.read_bytes()).hexdigest()
        counted = estimate.estimate_run(
            _profile(stores, ["01_context_composition", "03_closed_book_exam"], SMALL_CHAIN)
        )
        assert server.count() == 1, "the count sent a request"
    assert counted is not None and counted.ledger_calls == 1 and counted.reused == 0
    assert "the ledger holds 1 answered call(s) of this model" in counted.describe()
    assert hashlib.sha256(ledger.read_bytes()).hexdigest() == before


def test_run_doctor_refuses_a_dry_run_without_a_plan():
    import io

    from compaction_lab.run import doctor

    with pytest.raises(ValueError, match="dry_run"):
        doctor.run_doctor(None, False, io.StringIO(), plan=False, dry_run=True)
