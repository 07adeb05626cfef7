"""Tests of `compaction_lab.verify.requests` and ``compaction-lab verify``: drift in shapes, prompts or request shapes fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from compaction_lab import cli
from compaction_lab.core import paths
from compaction_lab.core.fingerprints import sha256_json
from compaction_lab.core.shapes import LOCK_NAME, CallShape
from compaction_lab.exam import readers
from compaction_lab.exam.readers import reading
from compaction_lab.strategies.arms import codex, futureos, opencode
from compaction_lab.verify import requests as verify


@pytest.fixture
def shapes_dir(tmp_path: Path) -> Path:
    """A copy of data/shapes (lock included) that a test may edit."""
    dst = tmp_path / "shapes"
    shutil.copytree(paths.SHAPES_DIR, dst)
    return dst


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _tool(data: dict, name: str) -> dict:
    return next(t["function"] for t in data["tools"] if t["function"]["name"] == name)


# --------------------------------------------------------------------------- clean tree


def test_clean_checkout_passes():
    result = verify.verify()
    assert result.ok, verify.report_text(result)
    assert result.diff == "" and result.changed == () and result.problems == ()
    assert verify.report_text(result) == "verify: ok (2 shapes, 7 summary requests, exam requests)"


def test_manifest_is_deterministic_and_path_free():
    a, b = verify.build_manifest(), verify.build_manifest()
    assert a == b
    text = verify.manifest_text(a)
    assert json.loads(text) == a  # JSON-only values: the lock round-trips
    assert str(paths.REPO_ROOT) not in text and "/home/" not in text
    assert (paths.SHAPES_DIR / LOCK_NAME).read_text(encoding="utf-8") == text


def test_manifest_covers_shapes_strategies_and_exam():
    m = verify.build_manifest()
    assert set(m["shapes"]) == {"synthetic-agent", "coding-agent"}
    assert m["default_shape"] == "synthetic-agent" == CallShape.default().name
    sent = {k: v["shape"] for k, v in m["summary"].items() if v is not None}
    assert sent == verify.documented_request_shapes()
    assert m["summary"]["futureos-deterministic"] is None and m["summary"]["full"] is None
    # Gemini CLI sends its snapshot request, then the verification probe; Aider's recursion runs once
    # under the canonical soft limit (VERIFY_PARAMS); every other arm sends one request.
    calls = {k: v["calls"] for k, v in m["summary"].items() if v is not None}
    assert calls == {**{k: 1 for k in calls}, "gemini-cli": 2, "aider": 2}
    assert m["exam"]["closed_book"]["tools_from"] == "call-shape"
    assert [r["book"] for r in m["exam"]["open_book"].values()] == ["open", "open", "open", "closed", "open"]
    assert m["exam"]["open_book"]["1"]["tool_names"][-2:] == ["history_search", "history_get"]
    # the canonical session holds every record kind the strategies treat differently
    kinds = {r.kind for r in verify.canonical_session().records}
    assert {"user", "assistant", "reasoning", "tool_call", "tool_output"} <= kinds
    assert any(r.injected for r in verify.canonical_session().records)


def test_coding_agent_shape_carries_the_exams_history_tools():
    call_shape = CallShape.load(paths.SHAPES_DIR / "coding-agent.json")
    by_name = {t["function"]["name"]: t for t in call_shape.tools}
    wanted = {"bash", "read_file", "write_file", "apply_patch", "list_files", "history_search", "history_get"}
    assert wanted <= set(by_name)
    assert by_name["history_search"] == readers.HISTORY_SEARCH_TOOL
    assert by_name["history_get"] == readers.HISTORY_GET_TOOL
    assert CallShape.default().name == "synthetic-agent"  # the default did not move


# --------------------------------------------------------------------------- drift in shapes


def test_changed_system_prompt_fails_naming_the_shape(shapes_dir: Path):
    _edit(shapes_dir / "coding-agent.json", lambda d: d.update(system_prompt=d["system_prompt"] + " Be brief."))
    result = verify.verify(shapes_dir=shapes_dir)
    assert not result.ok
    assert "shapes.coding-agent.system" in result.changed
    assert result.parts() == ("shapes.coding-agent",)  # not the default shape: no request changes
    assert '"coding-agent": {' in result.diff and "-" in result.diff


def test_changed_default_system_prompt_reaches_the_requests(shapes_dir: Path):
    _edit(shapes_dir / "synthetic-agent.json", lambda d: d.update(system_prompt="You are a different agent."))
    result = verify.verify(shapes_dir=shapes_dir)
    assert not result.ok
    for key in (
        "shapes.synthetic-agent.system",
        "summary.futureos-summarized.system",
        "summary.codex.system",
        "exam.closed_book.system",
        "exam.open_book.1.fingerprint",
    ):
        assert key in result.changed
    # claude-code forks the main conversation: its request carries the session's system prompt
    assert "summary.claude-code.system" in result.changed
    # the dedicated request shares nothing with the session's system prompt
    assert not any(k.startswith("summary.opencode") for k in result.changed)
    assert result.problems == ()


def test_changed_tool_description_fails_naming_the_tool(shapes_dir: Path):
    _edit(shapes_dir / "synthetic-agent.json", lambda d: _tool(d, "grep").update(description="Find things."))
    result = verify.verify(shapes_dir=shapes_dir)
    assert not result.ok
    assert "shapes.synthetic-agent.tools.grep" in result.changed
    assert "shapes.synthetic-agent.tools.bash" not in result.changed
    assert '"grep": ' in result.diff
    assert "summary.futureos-summarized.tools" in result.changed  # prefix-shared sends the tools
    assert not any(k.startswith("summary.codex") for k in result.changed)  # Codex sends none


def test_history_tool_in_a_shape_must_match_the_exam(shapes_dir: Path):
    _edit(shapes_dir / "coding-agent.json", lambda d: _tool(d, "history_get").update(description="Fetch an entry."))
    result = verify.verify(shapes_dir=shapes_dir)
    assert "shapes.coding-agent.tools.history_get" in result.changed
    assert any("shapes.coding-agent.tools.history_get" in p for p in result.problems)


def test_new_shape_file_is_drift_until_locked(shapes_dir: Path):
    (shapes_dir / "extra.json").write_text(json.dumps({"name": "extra", "system_prompt": "x", "tools": []}))
    result = verify.verify(shapes_dir=shapes_dir)
    assert not result.ok and "shapes.extra" in result.parts()
    verify.update_lock(shapes_dir=shapes_dir)
    assert verify.verify(shapes_dir=shapes_dir).ok


def test_a_file_that_is_not_a_shape_is_a_clear_error(shapes_dir: Path):
    (shapes_dir / "notes.json").write_text(json.dumps({"hello": "world"}))
    with pytest.raises(ValueError, match="notes.json is not a call shape"):
        verify.build_manifest(shapes_dir)


# --------------------------------------------------------------------------- drift in strategies and exam


def test_changed_strategy_instruction_fails_naming_the_strategy(monkeypatch):
    monkeypatch.setattr(codex, "COMPACT_INSTRUCTION", codex.COMPACT_INSTRUCTION + " Use bullet points.")
    result = verify.verify()
    assert not result.ok
    assert "summary.codex.prompts.instruction" in result.changed
    assert "summary.codex.fingerprint" in result.changed
    assert result.parts() == ("summary.codex",)
    assert result.problems == ()


def test_changed_dedicated_system_prompt_fails(monkeypatch):
    monkeypatch.setattr(opencode, "SYSTEM_PROMPT", "Summarise.")
    result = verify.verify()
    assert {"summary.opencode.system", "summary.opencode.prompts.system"} <= set(result.changed)
    assert result.parts() == ("summary.opencode",)


def test_changed_summary_request_shape_fails_twice(monkeypatch):
    monkeypatch.setattr(futureos, "REQUEST_SHAPE", "dedicated")
    result = verify.verify()
    assert not result.ok
    assert "summary.futureos-summarized.shape" in result.changed
    # a documented shape is checked apart from the lock: --update cannot bless it
    assert any(p.startswith("summary.futureos-summarized.shape") for p in result.problems)
    assert any(p.startswith("summary.futureos-summarized.system_from") for p in result.problems)


def test_changed_question_instruction_fails(monkeypatch):
    monkeypatch.setattr(reading, "QUESTION_INSTRUCTION", "Answer briefly.")
    result = verify.verify()
    assert not result.ok
    assert "exam.question_instruction" in result.changed
    # the readers still send the text bound as their default: verify says so
    assert any("exam.closed_book.question_sent" in p for p in result.problems)


def test_documented_problems_flag_a_tool_carrying_codex_request():
    m = verify.build_manifest()
    assert verify.documented_problems(m) == ()
    m["summary"]["codex"]["tools_from"] = "call-shape"
    m["exam"]["open_book"]["2"]["tools_from"] = "call-shape"
    problems = verify.documented_problems(m)
    assert any(p.startswith("summary.codex.tools_from") for p in problems)
    assert any(p.startswith("exam.open_book.2.tools_from") for p in problems)


# --------------------------------------------------------------------------- lock and CLI


def test_missing_lock_fails_and_says_how_to_write_one(tmp_path: Path):
    result = verify.verify(lock_path=tmp_path / "none.json")
    assert not result.ok and result.lock_missing
    text = verify.report_text(result)
    assert "no lock file" in text and "compaction-lab verify --update" in text


def test_update_lock_then_ok(shapes_dir: Path):
    _edit(shapes_dir / "synthetic-agent.json", lambda d: _tool(d, "bash").update(description="Run a command."))
    assert not verify.verify(shapes_dir=shapes_dir).ok
    lock = verify.update_lock(shapes_dir=shapes_dir)
    assert lock == shapes_dir / LOCK_NAME
    assert verify.verify(shapes_dir=shapes_dir).ok
    assert json.loads(lock.read_text())["shapes"]["synthetic-agent"]["tools"]["bash"] == sha256_json(
        next(t for t in CallShape.load(shapes_dir / "synthetic-agent.json").tools if t["function"]["name"] == "bash")
    )


def test_cli_exit_codes(shapes_dir: Path, capsys):
    assert cli.main(["verify"]) == 0
    assert "verify: ok (2 shapes, 7 summary requests, exam requests)" in capsys.readouterr().out

    _edit(shapes_dir / "coding-agent.json", lambda d: _tool(d, "apply_patch").update(description="Patch files."))
    assert cli.main(["verify", "--shapes", str(shapes_dir)]) == 1
    out = capsys.readouterr().out
    assert "verify: FAILED" in out and "shapes.coding-agent.tools.apply_patch" in out
    assert "--- verify.lock.json (locked)" in out and "compaction-lab verify --update" in out

    assert cli.main(["verify", "--update", "--shapes", str(shapes_dir)]) == 0
    assert "verify: ok" in capsys.readouterr().out
    assert cli.main(["verify", "--shapes", str(shapes_dir)]) == 0


def test_a_strategy_declares_the_rules_of_a_request_shape_of_its_own():
    """A new request shape is checked from its strategy's registration, with no edit of verify/requests.py."""
    from compaction_lab.strategies.base import STRATEGIES
    from compaction_lab.verify import requests as verify_requests

    rules = {"system_from": "own", "tools_from": "none", "instruction_at_end": True}
    manifest = {"summary": {"toy": {"shape": "toy-shape", **rules}}}
    unknown = [p for p in verify_requests.documented_problems(manifest) if p.startswith("summary.toy.")]
    assert unknown == [
        "summary.toy.shape: unknown request shape 'toy-shape' (known: "
        + ", ".join(verify_requests.REQUEST_SHAPE_RULES)
        + ")"
    ]
    STRATEGIES.add("toy", object(), listed=False, request_shape_rules={"toy-shape": rules})
    try:
        assert verify_requests.request_shape_rules()["toy-shape"] == rules
        assert [p for p in verify_requests.documented_problems(manifest) if p.startswith("summary.toy.")] == []
        broken = {"summary": {"toy": {"shape": "toy-shape", **rules, "tools_from": "call-shape"}}}
        assert [p for p in verify_requests.documented_problems(broken) if p.startswith("summary.toy.")] == [
            "summary.toy.tools_from: 'call-shape', a toy-shape request has 'none'"
        ]
    finally:
        STRATEGIES.remove("toy")
    clash = {"prefix-shared": {**verify_requests.REQUEST_SHAPE_RULES["prefix-shared"], "tools_from": "none"}}
    STRATEGIES.add("toy", object(), listed=False, request_shape_rules=clash)
    try:
        with pytest.raises(ValueError, match="request shape 'prefix-shared': toy declares rules"):
            verify_requests.request_shape_rules()
    finally:
        STRATEGIES.remove("toy")
