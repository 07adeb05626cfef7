"""The model summarizer and the model reader, against a scripted OpenAI-compatible server.

Plumbing, not quality: what is sent (each strategy's own request shape, the exam's request), how
answers are read, how failures fall back, that checkpoints and the ledger keep a summary from being
requested twice, and that labels name the model.
"""

import json

import pytest

from compaction_lab import strategies, summarize
from compaction_lab.core import paths
from compaction_lab.endpoints import shared
from compaction_lab.exam import readers
from compaction_lab.exam.readers.model import ModelReader, normalise_answer
from compaction_lab.exam.types import NOT_FOUND, Question
from compaction_lab.ingest import synthetic
from compaction_lab.strategies import CompactionContext, labels
from compaction_lab.strategies.arms import gemini_cli
from compaction_lab.strategies.arms import pi as pi_strategy
from compaction_lab.summarize.endpoint import TOOL_OUTPUT_PREFIX, wire_body
from tests.fake_openai_server import FakeOpenAIServer, Scripted, completion
from tests.helpers import fake_model, make_session


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def model(server, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    shared._CLIENTS.clear()  # one client per config per process: a fresh ledger per test
    return fake_model(server.base_url, tmp_path / "ledger.sqlite")


@pytest.fixture(scope="module")
def chain():
    (c,) = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=8000))
    return c.session


def _question(answer="ORD-58213", decoy=False):
    return Question(
        id="q1",
        case_id="c1",
        prompt="Which order id did the tool return?",
        answer=answer,
        pointer="tool",
        category="tool_output_line",
        decoy=decoy,
    )


def test_summary_request_goes_out_in_the_strategys_own_shape(server, model, chain):
    ctx = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("model", model))
    p = strategies.compact(chain, "futureos-summarized", None, ctx)
    assert p.receipt.summarizer == "model: fake-model" and not p.receipt.stand_in and not p.receipt.fallback
    assert labels.strategy_label(p) == "futureos-summarized (model: fake-model)"
    sent = server.requests[-1]["body"]
    expected = wire_body(p.summary_request)
    assert sent["messages"] == expected["messages"] and sent["tools"] == expected["tools"]
    assert sent["model"] == "fake-model" and sent["max_tokens"] == p.summary_request.max_output_tokens
    # House tool messages carry no call id: they go out as user messages, text unchanged.
    assert not any(m["role"] == "tool" for m in sent["messages"])
    assert any(m["content"].startswith(TOOL_OUTPUT_PREFIX) for m in sent["messages"] if m["role"] == "user")
    summary = [s for s in p.segments if s.kind == "summary"]
    assert summary and "echo:" in summary[0].text  # the fake server's answer is the summary


def test_failures_fall_back_as_documented(server, model, chain):
    server.script(Scripted(status=401, body={"error": {"message": "bad key"}}))
    ctx = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("model", model))
    p = strategies.compact(chain, "futureos-summarized", None, ctx)
    assert p.receipt.fallback and ("401" in p.receipt.error or "auth" in p.receipt.error.lower())
    assert labels.strategy_label(p) == "futureos-summarized (fallback: deterministic)"
    server.script(Scripted(body=completion("", finish_reason="length")))
    p2 = strategies.compact(chain, "codex", None, ctx)
    assert p2.receipt.fallback and "finish_reason=length" in p2.receipt.error
    # no summary: Codex does not compact (issue 27 item 6), the history goes out unchanged
    assert p2.notes["compaction_failed"] == p2.receipt.error and "(no summary available)" not in p2.text()


def test_an_empty_answer_is_an_answer_each_arm_reads(server, model, chain):
    """Issue 46: a normal answer with no text is billed and returned as ``""``, not a failure."""
    ctx = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("model", model))
    server.script(Scripted(body=completion("")))
    p = strategies.compact(chain, "codex", None, ctx)
    # Codex reads it as a compaction turn with no assistant message (param no_answer), and compacts
    assert not p.receipt.fallback and p.receipt.error is None and p.receipt.output_tokens == 2
    assert not p.notes.get("compaction_failed") and p.notes["summary_suffix"] in ("previous_reply", "empty")
    # pi keeps it (its file lists after it); Claude Code does not compact; Gemini CLI's client retries it and
    # gives up: a failed call, the history kept (no probe)
    server.script(Scripted(body=completion("")))
    pi = strategies.compact(chain, "pi", None, ctx)
    (summ,) = [s for s in pi.segments if s.kind == "summary"]
    lists = pi_strategy.format_file_operations(list(pi.notes["read_files"]), list(pi.notes["modified_files"]))
    body = pi.receipt.text  # the answer, "" (after "No prior history." and the separator on a split turn)
    assert not pi.receipt.fallback and summ.text == body + lists
    assert body in ("", pi_strategy.NO_PRIOR_HISTORY + pi_strategy.SPLIT_TURN_SEPARATOR)
    server.script(Scripted(body=completion("")))
    cc = strategies.compact(chain, "claude-code", None, ctx)
    assert not cc.receipt.fallback and cc.notes["compaction_failed"] and "summary" not in [s.kind for s in cc.segments]
    server.script(Scripted(body=completion("")))
    gem = strategies.compact(chain, "gemini-cli", None, ctx)
    assert not gem.receipt.fallback and gem.notes["compression_status"] == gemini_cli.CALL_FAILED
    assert gem.notes["compaction_failed"] == gemini_cli.EMPTY_RETRIED and gem.notes["failed_call"] == "snapshot"
    assert "summary" not in [s.kind for s in gem.segments]


def test_a_committed_summary_is_not_requested_again(server, model, chain, tmp_path):
    ctx = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("model", model))
    first = strategies.compact(chain, "opencode", None, ctx)
    n = server.count()
    shared._CLIENTS.clear()
    fresh = dict(model, ledger=str(tmp_path / "other-ledger.sqlite"))  # no ledger to reuse from: only the checkpoint
    ctx2 = CompactionContext(window=6000, output_ceiling=1000, summarizer=summarize.get_summarizer("model", fresh))
    again = strategies.compact(chain, "opencode", None, ctx2)
    assert server.count() == n
    assert again.text() == first.text() and again.summary_request == first.summary_request
    assert again.receipt.request_fingerprint == first.receipt.request_fingerprint


def test_closed_book_reader_sends_the_exam_request_and_reads_the_answer(server, model):
    server.script(
        Scripted(
            body=completion(
                "`ORD-58213`.",
                usage={"prompt_tokens": 40, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 32}},
            )
        )
    )
    reader = readers.get_reader("model", model=model)
    assert reader.label == "model reader: fake-model" and not reader.stand_in
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "the tool said ORD-58213"}]
    shape_tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    a = reader.answer(msgs, _question(), shape_tools=shape_tools)
    assert a.given == "ORD-58213" and (a.input_tokens, a.output_tokens) == (40, 5) and not a.stand_in
    sent = server.requests[-1]["body"]
    assert sent["messages"] == readers.request_messages(msgs, _question())
    assert sent["tools"] == shape_tools and sent["tool_choice"] == "none"


def test_open_book_reader_runs_the_tool_loop(server, model, tmp_path):
    from compaction_lab.store.archive import Archive

    s = make_session([("user", "go"), ("tool_call", "run"), ("tool_output", "order id ORD-58213 created")])
    archive = Archive(tmp_path / "a.sqlite")
    archive.add_sessions([s])
    tools = readers.HistoryTools(archive, s.id).tools()
    search = {
        "id": "t1",
        "type": "function",
        "function": {"name": "history_search", "arguments": json.dumps({"query": "order id"})},
    }
    bogus = {"id": "t2", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}}
    server.script(
        Scripted(body=completion(None, tool_calls=[search, bogus], finish_reason="tool_calls")),
        Scripted(body=completion("ORD-58213")),
    )
    a = readers.get_reader("model", model=model).answer([{"role": "user", "content": "hi"}], _question(), tools)
    assert a.given == "ORD-58213" and [c.name for c in a.tool_calls] == ["history_search", "rm_rf"]
    second = server.requests[-1]["body"]["messages"]
    tool_msgs = [m for m in second if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["t1", "t2"]
    assert "ORD-58213" in tool_msgs[0]["content"] and "not available" in tool_msgs[1]["content"]
    names = {t["function"]["name"] for t in server.requests[-1]["body"]["tools"]}
    assert names == {"history_search", "history_get"}


def test_open_book_reader_stops_after_its_rounds(server, model):
    loop = {"id": "t", "type": "function", "function": {"name": "history_get", "arguments": "not json"}}
    server.script(
        *[Scripted(body=completion(None, tool_calls=[loop])) for _ in range(2)], Scripted(body=completion("NOT_FOUND"))
    )
    reader = ModelReader(model, max_tool_rounds=2)
    tool = readers.Tool("history_get", readers.HISTORY_GET_TOOL, lambda **kw: None)
    a = reader.answer([{"role": "user", "content": "x"}], _question(), [tool])
    assert a.given == NOT_FOUND and len(a.tool_calls) == 2 and server.count() == 3
    assert server.requests[-1]["body"]["tool_choice"] == "none"


@pytest.mark.parametrize(
    "raw, given",
    [
        ("ORD-1", "ORD-1"),
        ("  'ORD-1'.\nbecause...", "ORD-1"),
        ("Answer: ORD-1", "ORD-1"),
        ("I think NOT_FOUND", NOT_FOUND),
        ("", NOT_FOUND),
        (None, NOT_FOUND),
        ("v1.2..", "v1.2.."),
    ],
)
def test_answers_are_normalised(raw, given):
    assert normalise_answer(raw) == given


def test_model_without_configuration_is_a_clear_error():
    with pytest.raises(ValueError, match="model configuration"):
        summarize.get_summarizer("model", {})
    with pytest.raises(ValueError, match="model configuration"):
        readers.get_reader("model")


# --------------------------------------------------------------------------- the model profile, end to end


@pytest.mark.slow
def test_model_profile_runs_labels_the_model_and_leaks_no_key(server, tmp_path, monkeypatch, warm_kernels):
    """The whole chain with `summarizer: model` and `reader: model` against the scripted endpoint: every
    model-backed table names the model, the ledger holds every call, and the API key is nowhere."""
    from compaction_lab.privacy.leaks import find_leaks
    from compaction_lab.run import runner

    key = "sk-modeltest-Qx81Vb27Nd5Lm0Rt9Zy4"
    monkeypatch.setenv("COMPACTION_LAB_TEST_API_KEY", key)
    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    ledger = tmp_path / "ledger.sqlite"
    prof = runner.load_profile("model")
    endpoint = dict(
        prof.parameters["model"],
        base_url=server.base_url,
        model="fake-model",
        api_key_env="COMPACTION_LAB_TEST_API_KEY",
        ledger=str(ledger),
    )
    res = runner.run_profile(
        prof, results=tmp_path / "r", progress=False, overrides={"model": endpoint}, launch=warm_kernels
    )
    d = res.run_dir
    assert server.count() > 0 and all(a == f"Bearer {key}" for a in server.authorizations)

    import pandas as pd

    recall = pd.read_parquet(d / "exam_recall.parquet")
    assert (recall["reader_label"] == "model reader: fake-model").all()
    summarising = recall[recall["strategy"].isin(["futureos-summarized", "codex", "opencode"])]
    assert summarising["strategy_label"].str.endswith("(model: fake-model)").all()
    opened = pd.read_parquet(d / "exam_open.parquet")
    assert set(opened["reader_label"]) == {"model reader: fake-model"} and not opened["stand_in"].any()
    assert "model reader: fake-model" in (d / "03_closed_book_exam.html").read_text()
    ledger_cache = pd.read_parquet(d / "cache_ledger.parquet")
    assert len(ledger_cache) >= 1 and (ledger_cache["measured_input"] > 0).all()
    from compaction_lab.store.ledger import open_ledger

    calls = open_ledger(ledger).calls()
    assert (calls["status"] == "done").all() and len(calls) == server.count()
    assert find_leaks(d, [key]) == [] and key.encode() not in ledger.read_bytes()


def test_closed_book_asks_a_model_reader_concurrently_in_order(tmp_path, monkeypatch):
    from compaction_lab.exam.exams import closed
    from compaction_lab.exam.types import Case

    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    shared._CLIENTS.clear()
    with FakeOpenAIServer(default_delay=0.3) as server:
        cfg = {
            "base_url": server.base_url,
            "model": "fake-model",
            "api_key_env": "",
            "concurrency": 3,
            "ledger": str(tmp_path / "l.sqlite"),
        }
        s = make_session([("user", "go"), ("assistant", "value V1 and V2")])
        qs = tuple(
            Question(
                id=f"q{i}",
                case_id="c",
                prompt=f"question number {i}?",
                answer=f"V{i}",
                pointer="assistant",
                category="assistant_decision",
            )
            for i in range(6)
        )
        case = Case(id="c", session_id=s.id, cut=2, tail_start=2, questions=qs)
        res = closed.run_closed(
            [case], {s.id: s}, ["full"], CompactionContext(), readers.get_reader("model", model=cfg)
        )
    assert server.max_in_flight == 3 and server.count() == 6
    assert list(res.answers["question_id"]) == [f"q{i}" for i in range(6)]
    asked = sorted(r["body"]["messages"][-1]["content"].split("?")[0] for r in server.requests)
    assert asked == [f"question number {i}" for i in range(6)]


def test_live_shape_experiment_reaches_the_provider_every_time(server, model):
    """Five requests (prime + four variants), none answered from the ledger, counters as reported."""
    from compaction_lab.core.shapes import CallShape
    from compaction_lab.cost import model as cost

    s = make_session(
        [("system", "You are the agent."), ("user", "fix it"), ("assistant", "done"), ("tool_output", "ok")]
    )
    call_shape = CallShape("t", "You are the agent.", ({"type": "function", "function": {"name": "bash"}},))
    usage = {"prompt_tokens": 200, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 128}}
    for _ in range(2):  # twice: the second run must still send everything
        server.script(*[Scripted(body=completion("x", usage=usage)) for _ in range(5)])
        df = cost.cache_shape_experiment_for(s, call_shape, live_model=model)
    assert server.count() == 10
    live = df[df["simulator"] == "measured (fake-model)"]
    assert list(live["variant"]) == ["identical", "system_substituted", "tools_dropped", "line_added_at_top"]
    assert (live["hit_ratio"] == 0.64).all()
    sent = [r["body"] for r in server.requests[:5]]
    assert sent[0] == sent[1]  # the prime and the identical variant
    assert "tools" not in sent[3] and sent[2]["messages"][0]["content"] != sent[0]["messages"][0]["content"]
    assert sent[4]["messages"][0]["content"].endswith(sent[0]["messages"][0]["content"])
    assert set(df["simulator"]) >= {"deepseek", "openai", "anthropic", "none"}


def test_exam_command_on_a_model_profile_asks_the_model(server, tmp_path, monkeypatch, capsys):
    """`compaction-lab exam --profile model` built its summarizer and reader without the profile's endpoint,
    so it could not run a model profile at all."""
    import json

    import yaml

    from compaction_lab import cli

    monkeypatch.setenv("COMPACTION_LAB_CHECKPOINTS", str(tmp_path / "ck.sqlite"))
    shared._CLIENTS.clear()
    prof = yaml.safe_load((paths.params_dir() / "model.yaml").read_text())
    prof["parameters"]["model"].update(
        base_url=server.base_url, model="fake-model", ledger=str(tmp_path / "l.sqlite"), max_retries=0
    )
    prof["parameters"]["strategy_names"] = ["full"]
    path = tmp_path / "model-here.yaml"
    path.write_text(yaml.safe_dump(prof))
    assert cli.main(["exam", "--profile", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["reader_label"] for r in rows} == {"model reader: fake-model"}
    assert server.count() > 0
