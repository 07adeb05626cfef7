"""A real local model behind a real OpenAI-compatible server (llama.cpp, SmolLM2-135M from site-packages).

Acceptance of the model issue: a tiny closed-book exam and one summary go through the real
client; usage counters and the ledger are checked; and the `model` profile runs end to end
against the local server with every model-backed table labelled. Model quality is irrelevant.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from compaction_lab import cli, strategies, summarize
from compaction_lab.exam import readers
from compaction_lab.exam.exams import closed
from compaction_lab.exam.questions import bank
from compaction_lab.ingest import synthetic
from compaction_lab.run import runner
from compaction_lab.store.ledger import open_ledger
from compaction_lab.strategies import CompactionContext
from tests.helpers import make_session
from tests.llm_server import MODEL_ALIAS, model_config, request_timeout

pytestmark = pytest.mark.slow


@pytest.fixture
def local_model(llm_server, tmp_path, monkeypatch):
    return model_config(llm_server, tmp_path, monkeypatch)


#: A hand-made session of about 400 tokens: FutureOS compacts it at W = 400, and its summary request re-sends
#: all of it, read at the 135M model's speed (a synthetic chain is over 1,800 tokens, whatever its size).
SMALL = make_session(
    [
        ("system", "You are a coding agent."),
        ("user", "The payments client drops requests under load. Add a retry with backoff to payments/client.py."),
        ("assistant", "I will read payments/client.py first."),
        (
            "tool_call",
            'read_file {"path": "payments/client.py"}',
            {"tool": "read_file", "target": "payments/client.py", "call_id": "c1"},
        ),
        (
            "tool_output",
            "import httpx\n\nTIMEOUT_S = 7.5\n\nclass PaymentsClient:\n    def __init__(self, base_url):\n"
            "        self.http = httpx.Client(base_url=base_url, timeout=TIMEOUT_S)\n\n"
            "    def charge(self, account_id, cents):\n"
            "        r = self.http.post('/v2/charges', json={'account': account_id, 'amount': cents})\n"
            "        r.raise_for_status()\n        return r.json()['charge_id']\n",
            {"tool": "read_file", "target": "payments/client.py", "call_id": "c1"},
        ),
        (
            "assistant",
            "The client posts to /v2/charges with a 7.5 s timeout and no retry. I will wrap charge() in a retry "
            "of 4 attempts with exponential backoff starting at 0.2 s.",
        ),
        (
            "tool_call",
            'edit_file {"path": "payments/client.py"}',
            {"tool": "edit_file", "target": "payments/client.py", "call_id": "c2"},
        ),
        (
            "tool_output",
            "Edited payments/client.py: charge() retries 4 times on httpx.TransportError, sleeping 0.2, 0.4, 0.8 s.",
            {"tool": "edit_file", "target": "payments/client.py", "call_id": "c2"},
        ),
        ("user", "Good. Now run the tests in tests/test_payments.py and tell me which fail."),
    ],
    session_id="small",
)


def test_a_summary_and_a_tiny_closed_book_exam_through_the_real_client(local_model):
    summarizer = summarize.get_summarizer("model", local_model)
    ctx = CompactionContext(window=400, output_ceiling=100, summarizer=summarizer)
    p = strategies.compact(SMALL, "futureos-summarized", None, ctx)
    assert p.receipt is not None and not p.receipt.fallback, p.receipt
    assert p.receipt.summarizer == f"model: {MODEL_ALIAS}" and p.receipt.text.strip()
    assert p.receipt.input_tokens > 0 and p.receipt.output_tokens > 0

    # The exam asks a synthetic chain's planted facts of the model reader, on an arm that asks for no summary.
    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=1200, seed=3))
    s = chain.session
    exam_ctx = CompactionContext(window=500, output_ceiling=100, summarizer=summarize.get_summarizer("extractive"))
    cases = bank.build_bank([chain], n_cases=1, n_questions=2, n_decoys=1, tail_tokens=300, seed=1)
    reader = readers.get_reader("model", model=local_model)
    result = closed.run_closed(cases, {s.id: s}, ["futureos-deterministic"], exam_ctx, reader)
    answers = result.answers
    assert len(answers) == 2 and (answers["reader_label"] == f"model reader: {MODEL_ALIAS}").all()
    assert answers["given"].map(lambda g: isinstance(g, str) and g != "").all()

    calls = open_ledger(local_model["ledger"]).calls()
    assert (calls["status"] == "done").all()
    assert sorted(calls["purpose"]) == ["exam:closed", "exam:closed", "summary:futureos-summarized"]
    assert (calls["prompt_tokens"] > 0).all() and (calls["completion_tokens"] > 0).all()
    assert calls["cost"].isna().all()  # a local model has no price table: no cost is invented

    # Asked again, nothing is sent: the checkpoint holds the summary, the ledger the answers.
    assert strategies.compact(SMALL, "futureos-summarized", None, ctx).receipt.text == p.receipt.text
    again = closed.run_closed(cases, {s.id: s}, ["futureos-deterministic"], exam_ctx, reader)
    assert len(open_ledger(local_model["ledger"]).calls()) == len(calls)
    assert again.answers["given"].tolist() == answers["given"].tolist()


def test_the_model_profile_runs_against_the_local_server(local_model, tmp_path, capsys, monkeypatch, warm_kernels):
    prof = runner.load_profile("model")
    over = {
        "model": dict(
            prof.parameters["model"], base_url=local_model["base_url"], model=MODEL_ALIAS, ledger=local_model["ledger"]
        ),
        # One small chain, one summarizing strategy (the open book's arm too), one question: the 135M model
        # reads a prompt slowly on one thread of a 2-core machine. FutureOS's summary through the real client
        # is the first test's (its request re-sends the whole history: two of them were half this test's time).
        # Notebook 02's explorer opens on the first strategy at W >= 8,000, where a summarizing arm asks for a
        # summary of the whole chain (half this test's time again): it opens on an arm that asks for none.
        "n_chains": 1,
        "window_tokens": 1200,
        "window": 500,
        "output_ceiling": 200,
        "strategy_names": ["futureos-deterministic", "codex"],
        "strategy": "codex",
        "n_cases": 1,
        "n_questions": 1,  # no decoy: the fake server's twin (test_model_backed) asks decoys
        "n_decoys": 0,
    }
    # `doctor` first: its planned call count (a dry run, nothing sent) against what the run then records.
    argv = ["doctor", "--profile", "model", "--json"] + [f"--set={k}={json.dumps(v)}" for k, v in over.items()]
    assert cli.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    planned = doc["plan"]
    assert planned["model"] == MODEL_ALIAS and planned["cost_estimate"] is None  # no price table: no cost
    assert open_ledger(local_model["ledger"]).calls().empty, "the dry run wrote into the real ledger"

    res = runner.run_profile(
        prof, results=tmp_path / "r", progress=False, overrides=over, notebook_html=False, launch=warm_kernels
    )
    sent = open_ledger(local_model["ledger"]).calls()
    by_purpose = {r["purpose"]: r["calls"] for r in planned["by_purpose"]}
    print(f"doctor planned {planned['total_calls']} calls (at most {planned['max_calls']}); the run sent {len(sent)}")
    print(sent.groupby("purpose")["latency_s"].agg(["count", "sum"]).to_string())
    assert abs(len(sent) - planned["total_calls"]) <= 0.1 * len(sent), (by_purpose, sent["purpose"].value_counts())
    assert len(sent) <= planned["max_calls"]
    # notebook 06's next-action requests: exactly as many as the dry run planned (none here: the one case is cut
    # at the chain's end, so no next action follows it)
    assert by_purpose.get("exam:continuation", 0) == int((sent["purpose"] == "exam:continuation").sum())
    d = res.run_dir
    recall = pd.read_parquet(d / "exam_recall.parquet")
    assert (recall["reader_label"] == f"model reader: {MODEL_ALIAS}").all()
    assert set(pd.read_parquet(d / "exam_open.parquet")["reader_label"]) == {f"model reader: {MODEL_ALIAS}"}
    proj = pd.read_parquet(d / "projections.parquet")
    labels = set(proj.loc[proj["strategy"] == "codex", "strategy_label"])
    # A summary the tiny model fails to give falls back and is labelled so; none is a stand-in.
    assert labels and labels <= {f"codex (model: {MODEL_ALIAS})", "codex"}
    assert (sent["purpose"] == "summary:codex").any()  # asked of the model, whether it gave one or not
    html = (d / "report.html").read_text()
    assert f"model reader: {MODEL_ALIAS}" in html
    assert (open_ledger(local_model["ledger"]).calls()["status"] == "done").all()


def _draws_run(cfg: dict) -> pd.DataFrame:
    """A closed book of two questions on one arm, asked three times each of the local model at temperature 0.8."""
    (chain,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=2000, seed=3))
    s = chain.session
    ctx = CompactionContext(window=500, output_ceiling=100, summarizer=summarize.get_summarizer("extractive"))
    cases = bank.build_bank([chain], n_cases=1, n_questions=2, n_decoys=0, tail_tokens=300, seed=1)
    reader = readers.get_reader("model", model=cfg, temperature=0.8)
    return closed.run_closed(cases, {s.id: s}, ["codex"], ctx, reader, draws=3).answers


def test_three_draws_are_three_calls_and_a_killed_run_resumes_without_sending_one_twice(local_model, tmp_path):
    """Issue 31, acceptance 2: with draws 3 the ledger holds three answers per question (not deduplicated);
    a run killed part-way and run again sends only what had not been answered."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from compaction_lab.core.paths import REPO_ROOT

    cfg = {**local_model, "concurrency": 1}  # one call at a time: the kill lands between answers
    code = f"import json, sys\nfrom tests.endpoints.test_model_local import _draws_run\n_draws_run(json.loads({json.dumps(cfg)!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, env=dict(os.environ))
    deadline = time.monotonic() + 2 * request_timeout()  # two answers, each within its request's timeout
    done = pd.DataFrame()
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            calls = open_ledger(cfg["ledger"]).calls()
        except Exception:  # the ledger is being created
            calls = pd.DataFrame(columns=["status"])
        done = calls[calls["status"] == "done"]
        if len(done) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert 2 <= len(done) < 6, f"the run was not killed part-way: {len(done)} answers by then"
    before = done.set_index("id")[["finished_at", "draw"]]

    answers = _draws_run(cfg)  # run again: resumes
    calls = open_ledger(cfg["ledger"]).calls()
    finished = calls[calls["status"] == "done"]
    assert len(answers) == 6 and sorted(answers.groupby("question_id")["draw"].apply(sorted).sum()) == [
        0,
        0,
        1,
        1,
        2,
        2,
    ]
    # Three calls per question, each its own ledger entry: 6 answered requests, no fingerprint answered twice.
    assert len(finished) == 6 and finished["request_fingerprint"].is_unique
    assert sorted(finished["draw"]) == [0, 0, 1, 1, 2, 2] and (finished["purpose"] == "exam:closed").all()
    # What was answered before the kill was reused, not sent again: the same rows, finished when they were.
    pd.testing.assert_frame_equal(finished.set_index("id").loc[before.index, ["finished_at", "draw"]], before)
