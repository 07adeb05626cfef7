"""The dry run's stand-in endpoint: a chat completion per request, nothing sent, only the ledger copy written."""

from __future__ import annotations

from compaction_lab.core import paths
from compaction_lab.core.tokens import count_tokens
from compaction_lab.endpoints import standin
from compaction_lab.endpoints.client import ChatClient, parse_choice, parse_usage
from compaction_lab.endpoints.config import ModelConfig
from compaction_lab.store.ledger import open_ledger
from tests.fake_openai_server import FakeOpenAIServer


def test_the_stand_in_reply_is_a_chat_completion_of_max_tokens():
    short = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40}
    long = {**short, "messages": [{"role": "user", "content": "hi " * 500}]}
    reply = standin.stand_in_reply(short)
    message, finish = parse_choice(reply)
    usage = parse_usage(reply["usage"])
    assert finish == "stop" and "tool_calls" not in message
    assert usage.completion_tokens == 40 and abs(count_tokens(message["content"]) - 40) <= 4
    assert 0 < usage.prompt_tokens < parse_usage(standin.stand_in_reply(long)["usage"]).prompt_tokens
    no_cap = standin.stand_in_reply({"messages": short["messages"]})
    assert no_cap["usage"]["completion_tokens"] == standin.DEFAULT_REPLY_TOKENS


def test_a_client_in_a_dry_run_sends_nothing_needs_no_key_and_writes_only_the_copy(tmp_path, monkeypatch):
    dry = tmp_path / "dry"
    dry.mkdir()
    monkeypatch.setenv(paths.DRY_RUN_ENV, str(dry))
    monkeypatch.delenv("PLAN_TEST_KEY", raising=False)
    real_ledger = tmp_path / "real.sqlite"
    with FakeOpenAIServer() as server:
        cfg = ModelConfig(base_url=server.base_url, model="m", api_key_env="PLAN_TEST_KEY", ledger=str(real_ledger))
        with ChatClient(cfg) as client:
            body = {"messages": [{"role": "user", "content": "what is x?"}], "max_tokens": 8}
            first = client.complete(body, purpose="exam:closed")
            again = client.complete(body, purpose="exam:closed")
        assert server.count() == 0
    assert first.content.startswith("(dry run)") and not first.from_ledger and again.from_ledger
    assert not real_ledger.exists()
    assert len(open_ledger(dry / "ledger.sqlite").calls()) == 1
    assert (dry / standin.REUSED_FILE).read_text().split() == [first.request_fingerprint]
