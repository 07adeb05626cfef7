"""The hand-built sessions with recorded compactions and what each agent sent next, by hand.

Shared by the recorded arm's tests (tests/strategies/test_recorded_strategy.py) and the recorded exam's
(tests/exam/test_exam_recorded.py). The sessions are written by tests/fixtures/make_recorded_fixtures.py.
"""

from __future__ import annotations

import importlib.util

from compaction_lab import ingest
from compaction_lab.core.session import Session
from tests.helpers import FIXTURES


def _story():
    spec = importlib.util.spec_from_file_location("recorded_fixtures", FIXTURES / "make_recorded_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


S = _story()

FILES = S.PATHS
CODEX_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. "
    "You also have access to the state of the tools that were used by that language model. Use this to "
    "build on the work that has already been done and avoid duplicating work. Here is the summary produced "
    "by the other language model, use the information in this summary to assist with your own analysis:"
)
PYTEST_CALL = 'bash {"command": "pytest -q tests/test_orders.py"}'

#: What each agent sent next, by hand: (segment kind, role, text), after the system prompt and tools.
EXPECTED = {
    "pi": [
        (
            "summary",
            "user",
            "The conversation history before this point was compacted into the following summary:"
            "\n\n<summary>\n" + S.SUMMARY + "\n</summary>",
        ),
        ("tail", "user", S.USER_2),
        ("tail", "assistant", PYTEST_CALL),
        ("tail", "tool", S.OUT_2),
        ("tail", "assistant", S.ASSIST_2),
    ],
    "claude-code": [
        (
            "summary",
            "user",
            "This session is being continued from a previous conversation that ran out of context. "
            "The conversation is summarized below:\n" + S.SUMMARY,
        ),
    ],
    "codex": [
        ("tail", "user", S.USER_1),
        ("tail", "user", S.USER_2),
        ("summary", "user", CODEX_PREFIX + "\n" + S.SUMMARY),
    ],
    "opencode": [
        ("header", "user", "What did we do so far?"),
        ("summary", "assistant", S.SUMMARY),
        ("tail", "user", S.USER_2),
        ("tail", "assistant", PYTEST_CALL),
        ("tail", "tool", S.OUT_2),
        ("tail", "assistant", S.ASSIST_2),
    ],
}
MODELS = {
    "pi": "claude-sonnet-4-5",
    "claude-code": "claude-opus-4-1-20250805",
    "codex": "gpt-5-codex",
    "opencode": "claude-sonnet-4-5",
}


def load(agent: str) -> Session:
    (s,) = list(ingest.load_sessions(FILES[agent]))
    return s
