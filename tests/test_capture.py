"""Tests of `compaction_lab.verify.requests.capture` and ``compaction-lab capture-shape``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction_lab import cli
from compaction_lab.core import paths
from compaction_lab.core.fingerprints import shape_fingerprint
from compaction_lab.core.projection import SummaryRequest
from compaction_lab.core.shapes import CallShape
from compaction_lab.verify import capture
from compaction_lab.verify.capture import CaptureError
from tests.helpers import FIXTURES

CODEX = FIXTURES / "codex"
CODEX_MAIN = CODEX / "rollout-2025-09-14T10-02-11-0199a1b2-7c3d-7e10-9f00-5d2c8e4b1a01.jsonl"
CODEX_TWO = CODEX / "rollout-2025-09-15T08-00-00-two-sessions.jsonl"
CODEX_BROKEN = CODEX / "rollout-2025-09-16T12-00-00-broken.jsonl"
CHAT_JSONL = FIXTURES / "chat_jsonl" / "conversations.jsonl"

SECRET = "sk-test-DO-NOT-COPY-0123456789"

PARAMS = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
CHAT_TOOL = {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": PARAMS}}


def _chat_request() -> dict:
    """A logged Chat Completions call: headers with a key beside the body."""
    return {
        "url": "https://api.example.com/v1/chat/completions",
        "headers": {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"},
        "api_key": SECRET,
        "body": {
            "model": "some-model",
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "developer", "content": [{"type": "text", "text": "Prefer small patches."}]},
                {"role": "user", "content": "Fix the build."},
                {"role": "system", "content": "A later system note, part of the conversation."},
            ],
            "tools": [CHAT_TOOL],
        },
    }


def _responses_body() -> dict:
    return {
        "model": "some-model",
        "instructions": "You are Codex-like.",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Sandbox: read-only."}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ],
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "description": "Run a shell command.",
                "parameters": PARAMS,
                "strict": False,
            },
            {"type": "web_search"},
            {
                "type": "mcp",
                "server_label": "docs",
                "server_url": "https://mcp.example.com",
                "headers": {"Authorization": f"Bearer {SECRET}"},
                "require_approval": "never",
            },
        ],
    }


def _write(tmp_path: Path, name: str, obj) -> Path:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return p


# --------------------------------------------------------------------------- request bodies


def test_chat_request_keeps_only_system_and_tools(tmp_path: Path):
    src = _write(tmp_path, "req.json", _chat_request())
    shape = capture.shape_from_request_file(src, "captured-chat")
    assert shape.name == "captured-chat"
    assert shape.system_prompt == "You are a coding agent.\n\nPrefer small patches."
    assert shape.tools == (CHAT_TOOL,)
    out = capture.write_shape(shape, tmp_path / "captured-chat.json")
    text = out.read_text(encoding="utf-8")
    for leaked in (SECRET, "Bearer", "Authorization", "api_key", "api.example.com", "Fix the build"):
        assert leaked not in text
    assert CallShape.load(out) == shape


def test_bare_body_with_a_key_beside_it():
    body = {**_chat_request()["body"], "api_key": SECRET, "user": "someone"}
    shape = capture.shape_from_request(body, "bare")
    assert SECRET not in json.dumps(capture.shape_document(shape))


def test_body_given_as_a_json_string_inside_a_wrapper():
    wrapped = {"headers": {"authorization": SECRET}, "body": json.dumps(_chat_request()["body"])}
    assert capture.shape_from_request(wrapped, "w").system_prompt.startswith("You are a coding agent.")


def test_responses_body_instructions_and_flat_tools():
    shape = capture.shape_from_request(_responses_body(), "responses")
    assert shape.system_prompt == "You are Codex-like.\n\nSandbox: read-only."
    fn, search, mcp = shape.tools
    assert fn == {
        "type": "function",
        "function": {"name": "shell", "description": "Run a shell command.", "parameters": PARAMS, "strict": False},
    }
    assert search == {"type": "web_search"}
    assert mcp == {"type": "mcp", "server_label": "docs", "require_approval": "never"}  # no URL, no headers
    assert SECRET not in json.dumps(capture.shape_document(shape))
    assert capture.tool_names(shape.tools) == ["shell", "web_search", "mcp"]


def test_legacy_functions_become_tools():
    body = {"messages": [{"role": "system", "content": "S"}], "functions": [CHAT_TOOL["function"]]}
    assert capture.shape_from_request(body, "legacy").tools == (CHAT_TOOL,)


def test_fingerprint_matches_a_request_carrying_the_shape():
    shape = capture.shape_from_request(_chat_request(), "fp")
    req = SummaryRequest("s", "prefix-shared", shape.system_prompt, shape.tools, (), "t", 1)
    assert shape_fingerprint(shape.system_prompt, shape.tools) == req.shape_fingerprint()


@pytest.mark.parametrize(
    "body, message",
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "no system prompt found"),
        ({"model": "x", "temperature": 0}, "not an OpenAI-style request body"),
        ([1, 2, 3], "not an OpenAI-style request body"),
        ({"messages": [{"role": "system", "content": "S"}], "tools": {"bash": {}}}, "'tools' must be a list"),
        ({"messages": [{"role": "system", "content": "S"}], "tools": [{"type": "function"}]}, "without a name"),
        ({"messages": [{"role": "system", "content": "S"}], "tools": ["bash"]}, r"tools\[0\] is not an object"),
    ],
)
def test_bad_request_bodies(body, message):
    with pytest.raises(CaptureError, match=message):
        capture.shape_from_request(body, "bad")


def test_bad_request_files(tmp_path: Path):
    with pytest.raises(CaptureError, match="not JSON"):
        capture.shape_from_request_file(_write(tmp_path, "x.json", "{not json"), "x")
    with pytest.raises(CaptureError, match="no such file"):
        capture.shape_from_request_file(tmp_path / "missing.json", "x")
    with pytest.raises(CaptureError, match="x.json: no system prompt"):
        capture.shape_from_request_file(_write(tmp_path, "x.json", {"messages": []}), "x")


@pytest.mark.parametrize("name", ["", "../evil", "a/b", ".hidden", "verify.lock", "x.json"])
def test_bad_names(name):
    with pytest.raises(CaptureError, match="bad shape name"):
        capture.shape_from_request(_chat_request(), name)


# --------------------------------------------------------------------------- Codex rollouts


def test_codex_rollout_base_instructions():
    shape = capture.shape_from_codex_session(CODEX_MAIN, "codex-ledger")
    assert shape.system_prompt.startswith("You are a coding agent running in a terminal.")
    assert shape.tools == ()  # Codex records no tool definitions
    assert capture.codex_instructions(CODEX_MAIN)[1] == "base_instructions"
    assert capture.codex_instructions(CODEX_TWO) == ("You are a careful coding agent.", "base_instructions")


def test_codex_rollout_older_instructions_field(tmp_path: Path):
    line = {
        "timestamp": "2025-05-01T00:00:00Z",
        "type": "session_meta",
        "payload": {"id": "old", "cwd": "/repo", "instructions": "Old-style instructions."},
    }
    src = _write(tmp_path, "rollout-old.jsonl", json.dumps(line) + "\n")
    assert capture.codex_instructions(src) == ("Old-style instructions.", "instructions")


def test_codex_rollout_compressed(tmp_path: Path):
    import zstandard

    dst = tmp_path / (CODEX_MAIN.name + ".zst")
    dst.write_bytes(zstandard.ZstdCompressor().compress(CODEX_MAIN.read_bytes()))
    assert capture.shape_from_codex_session(dst, "z") == capture.shape_from_codex_session(CODEX_MAIN, "z")


def test_codex_bad_inputs(tmp_path: Path):
    with pytest.raises(CaptureError, match="records no base_instructions"):
        capture.shape_from_codex_session(CODEX_BROKEN, "x")
    with pytest.raises(CaptureError, match="not a Codex rollout"):
        capture.shape_from_codex_session(CHAT_JSONL, "x")
    with pytest.raises(CaptureError, match="not a Codex rollout"):
        capture.shape_from_codex_session(_write(tmp_path, "junk.jsonl", "not json\n"), "x")
    with pytest.raises(CaptureError, match="no such file"):
        capture.shape_from_codex_session(tmp_path / "missing.jsonl", "x")


# --------------------------------------------------------------------------- writing and CLI


def test_write_shape_default_path_and_overwrite(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(paths, "SHAPES_DIR", tmp_path)
    shape = capture.shape_from_request(_chat_request(), "mine")
    out = capture.write_shape(shape, description="test")
    assert out == tmp_path / "mine.json"
    assert json.loads(out.read_text())["description"] == "test"
    with pytest.raises(CaptureError, match="exists"):
        capture.write_shape(shape)
    changed = CallShape("mine", "Other prompt.", ())
    assert CallShape.load(capture.write_shape(changed, overwrite=True)) == changed


def test_cli_capture_shape(tmp_path: Path, capsys):
    src = _write(tmp_path, "req.json", _chat_request())
    out = tmp_path / "shapes" / "cli.json"
    args = ["capture-shape", "--from-request", str(src), "--name", "cli", "--output", str(out)]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    shape = CallShape.load(out)
    assert str(out) in printed and shape_fingerprint(shape.system_prompt, shape.tools) in printed
    assert SECRET not in out.read_text()

    assert cli.main(args) == 2  # exists, no --force
    assert "exists" in capsys.readouterr().err
    assert cli.main(args + ["--force"]) == 0
    capsys.readouterr()

    codex_out = tmp_path / "codex.json"
    assert (
        cli.main(["capture-shape", "--from-codex", str(CODEX_MAIN), "--name", "codex-cli", "--output", str(codex_out)])
        == 0
    )
    doc = json.loads(codex_out.read_text())
    assert doc["tools"] == [] and "base_instructions" in doc["description"]
    capsys.readouterr()

    assert (
        cli.main(
            [
                "capture-shape",
                "--from-request",
                str(_write(tmp_path, "bad.json", "[")),
                "--name",
                "bad",
                "--output",
                str(tmp_path / "bad-shape.json"),
            ]
        )
        == 2
    )
    assert "not JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["capture-shape", "--from-request", str(src), "--from-codex", str(CODEX_MAIN), "--name", "x"])


def test_a_request_file_nested_100k_levels_is_a_clear_error_not_a_recursion_error(tmp_path: Path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(CaptureError, match="deep.json: not JSON.*deeper than"):
        capture.load_json_file(path)
