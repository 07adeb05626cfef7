"""The dry run behind ``doctor``'s planned calls: nothing sent, the real stores untouched, the count exact."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from compaction_lab.endpoints import shared
from compaction_lab.endpoints.client import ChatClient
from compaction_lab.endpoints.config import ModelConfig
from compaction_lab.run import chain, plan, runner
from compaction_lab.store.ledger import open_ledger
from tests.fake_openai_server import FakeOpenAIServer

#: One short synthetic chain, compacted at a small window: what both dry runs here plan on.
SMALL_CHAIN = {
    "seed": 7,
    "n_chains": 1,
    "window_tokens": 3000,
    "decoys_per_chain": 1,
    "window": 1500,
    "output_ceiling": 300,
}


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_plan_counts_exactly_what_the_run_sends_and_leaves_the_stores_alone(tmp_path, monkeypatch, warm_kernels):
    """Summaries depend only on the sessions: the dry run's count is the real run's count, request for request."""
    ledger_path, checkpoints = tmp_path / "ledger.sqlite", tmp_path / "checkpoints.sqlite"
    monkeypatch.setenv("COMPACTION_LAB_LEDGER", str(ledger_path))
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(checkpoints))
    shared._CLIENTS.clear()
    with FakeOpenAIServer() as server:
        # A ledger with history already: the dry run must reuse from a copy and never write the original.
        with ChatClient(ModelConfig(base_url=server.base_url, model="m", api_key_env="")) as client:
            client.complete({"messages": [{"role": "user", "content": "earlier"}]}, purpose="summary:old")
        assert server.count() == 1
        doc = {
            "description": "plan test",
            "notebooks": ["01_context_composition", "02_projection_anatomy"],
            "parameters": {
                **SMALL_CHAIN,
                "summarizer": "model",
                "strategy_names": ["full", "futureos-summarized", "codex", "opencode"],
                "model": {"base_url": server.base_url, "model": "m", "api_key_env": ""},
            },
        }
        profile = tmp_path / "plan.yaml"
        profile.write_text(yaml.safe_dump(doc), encoding="utf-8")
        before = {p: _digest(p) for p in (ledger_path,)}
        planned = plan.plan_run(str(profile), progress=False, launch=warm_kernels)
        assert server.count() == 1, "the dry run sent a request"
        assert {p: _digest(p) for p in before} == before and not checkpoints.exists()
        assert planned is not None and planned.total_calls > 0
        assert set(planned.calls["purpose"]) <= {"summary:futureos-summarized", "summary:codex", "summary:opencode"}
        assert all(chain.step("02_projection_anatomy").may_call(p) for p in planned.calls["purpose"])
        assert planned.open_book_extra == 0 and planned.cost is None

        runner.run_profile(
            str(profile), results=tmp_path / "results", progress=False, render=False, launch=warm_kernels
        )
        sent = server.count() - 1
        assert sent == planned.total_calls, planned.describe()
        sent_by_purpose = open_ledger(ledger_path).calls()["purpose"].value_counts().drop("summary:old").to_dict()
        assert sent_by_purpose == dict(zip(planned.calls["purpose"], planned.calls["calls"], strict=True))

        # After the run every answer is in the ledger: with the checkpoint store gone (so every summary is
        # asked of the client again), a second plan finds them all already paid and nothing left to send.
        for leftover in tmp_path.glob("checkpoints.sqlite*"):
            leftover.unlink()
        replanned = plan.plan_run(str(profile), progress=False, launch=warm_kernels)
        assert replanned is not None and replanned.total_calls == 0 and replanned.reused == sent
        assert server.count() == sent + 1
    shared._CLIENTS.clear()


@pytest.mark.slow
def test_the_plan_counts_every_draw_of_the_closed_book(tmp_path, monkeypatch, warm_kernels):
    """Issue 31: with ``draws: 3`` the dry run plans three requests per question and arm, as the run sends."""
    monkeypatch.setenv("COMPACTION_LAB_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "checkpoints.sqlite"))
    shared._CLIENTS.clear()
    doc = {
        "description": "draws plan test",
        "notebooks": ["01_context_composition", "03_closed_book_exam"],
        "parameters": {
            **SMALL_CHAIN,
            "strategy_names": ["full", "codex"],
            "n_cases": 1,
            "n_questions": 3,
            "n_decoys": 1,
            "tail_tokens": 300,
            "n_boot": 50,
            "reader": "model",
            "draws": 3,
            "reader_temperature": 0.7,
        },
    }
    with FakeOpenAIServer() as server:
        doc["parameters"]["model"] = {"base_url": server.base_url, "model": "m", "api_key_env": ""}
        profile = tmp_path / "draws.yaml"
        profile.write_text(yaml.safe_dump(doc), encoding="utf-8")
        planned = plan.plan_run(str(profile), progress=False, launch=warm_kernels)
        assert planned is not None and server.count() == 0
        closed_calls = int(planned.calls.set_index("purpose").loc["exam:closed", "calls"])
        run = runner.run_profile(
            str(profile), results=tmp_path / "results", progress=False, render=False, launch=warm_kernels
        )
        sent = open_ledger(tmp_path / "ledger.sqlite").calls()
        answers = __import__("pandas").read_parquet(run.run_dir / "exam_closed.parquet")
    shared._CLIENTS.clear()
    # Every question x arm asked three times: planned as sent (two arms whose requests are identical would be
    # answered once per draw by the ledger, so the count is at most that).
    assert len(answers) == 3 * answers.groupby(["strategy", "question_id"]).ngroups
    assert sorted(answers["draw"].unique()) == [0, 1, 2]
    assert closed_calls == int((sent["purpose"] == "exam:closed").sum()) == server.count()
    assert 0 < closed_calls <= len(answers) and closed_calls % 3 == 0


def test_plan_as_json_and_text(tmp_path):
    import pandas as pd

    calls = pd.DataFrame(
        {"purpose": ["exam:open", "summary:codex"], "calls": [3, 2], "prompt_tokens": [900, 400],
         "output_tokens": [192, 1000], "cost": [0.01, 0.02]}
    )  # fmt: skip
    p = plan.Plan("model", "m", "http://x/v1", calls, reused=4, open_book_extra=12, currency="USD", seconds=3.0)
    text = p.describe()
    assert "planned model calls (m at http://x/v1): 5 (up to 17" in text and "0.0300 USD" in text
    assert "not paid again): 4" in text
    doc = json.loads(json.dumps(p.as_dict()))
    assert doc["total_calls"] == 5 and doc["max_calls"] == 17 and doc["cost_estimate"] == pytest.approx(0.03)


def test_the_chain_says_which_notebooks_call_a_model_through_which_parameters():
    """`plan` and `doctor` read the model-calling notebooks from the chain: a notebook calls the model when one
    of its model parameters is ``model``, per-notebook settings included."""
    assert dict(chain.MODEL_PARAMETERS_BY_NOTEBOOK) == {
        "02_projection_anatomy": ("summarizer",),
        "03_closed_book_exam": ("summarizer", "reader"),
        "04_cost_model": ("summarizer",),
        "05_open_book_exam": ("summarizer", "reader"),
        "06_continuation_exam": ("summarizer", "reader"),
    }
    prof = runner.Profile(
        "p",
        "d",
        chain.names(),
        {"summarizer": "extractive", "reader": "model"},
        {"04_cost_model": {"summarizer": "model"}},
    )
    assert chain.model_notebooks(prof) == [
        ("03_closed_book_exam", ("reader",)),
        ("04_cost_model", ("summarizer",)),
        ("05_open_book_exam", ("reader",)),
        ("06_continuation_exam", ("reader",)),
    ]
    # Every purpose a model endpoint is called for is declared by the notebook that sends it.
    assert chain.step("05_open_book_exam").may_call("exam:open-final")
    assert chain.step("06_continuation_exam").may_call("exam:continuation")
    assert chain.step("03_closed_book_exam").may_call("summary:codex")
    assert not chain.step("03_closed_book_exam").may_call("exam:open")
    assert not chain.step("01_context_composition").purposes
