"""The ``recorded`` arm: what an agent itself sent after a compaction its log records.

Hand-built fixtures (written by tests/fixtures/make_recorded_fixtures.py into each format's folder) hold
one compaction each, in the formats of pi, Claude Code, Codex and OpenCode. Each recorded projection
is compared with an expectation built by hand from that agent's rules.
"""

from __future__ import annotations

import pytest

from compaction_lab import ingest, strategies
from compaction_lab.core.projection import projection_from_json
from compaction_lab.ingest.builder import SessionBuilder
from compaction_lab.strategies.arms import recorded
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import FIXTURES
from tests.recorded_expectations import EXPECTED, FILES, MODELS, S, load


@pytest.mark.parametrize("agent", sorted(FILES))
def test_recorded_projection_is_what_the_agent_sent(agent):
    s = load(agent)
    (rc,) = recorded.find(s)[0]
    assert (rc.agent, rc.model) == (agent, MODELS[agent])
    p = strategies.compact(s, "recorded", rc.cut, CompactionContext())
    got = [(seg.kind, seg.role, seg.text) for seg in p.segments[2:]]
    assert got == EXPECTED[agent]
    assert [seg.kind for seg in p.segments[:2]] == ["system", "tools"]
    assert p.receipt is None and p.summary_request is None  # nothing was asked of any provider
    summary = next(seg for seg in p.segments if seg.kind == "summary")
    assert summary.label == f"recorded summary ({agent}, {MODELS[agent]})"


@pytest.mark.parametrize("agent", sorted(FILES))
def test_label_names_agent_and_model_from_the_log(agent):
    from compaction_lab.strategies.labels import strategy_label

    s = load(agent)
    (rc,) = recorded.find(s)[0]
    p = strategies.compact(s, "recorded", rc.cut, CompactionContext())
    assert strategy_label(p) == f"recorded ({agent}, {MODELS[agent]})" == rc.label


@pytest.mark.parametrize("agent", sorted(FILES))
def test_cut_is_the_compaction_and_nothing_after_it_reaches_the_projection(agent):
    s = load(agent)
    (rc,) = recorded.find(s)[0]
    before = [r for r in s.records if r.source_order < rc.cut]
    assert S.ASSIST_2 in [r.text for r in before]  # the last record before the compaction
    assert all(S.SUMMARY not in r.text for r in before)
    p = strategies.compact(s, "recorded", rc.cut, CompactionContext())
    assert all(S.AFTER not in seg.text for seg in p.segments)


def test_every_agent_with_a_renderer_is_declared_by_an_importer():
    assert set(recorded._RENDER) <= {ingest.agent_of_format(fmt) for fmt in ingest.formats()}


def test_no_compaction_at_the_cut_is_a_clear_error():
    s = load("pi")
    with pytest.raises(recorded.NoRecordedCompaction, match="recorded compactions at: 9"):
        strategies.compact(s, "recorded", 3, CompactionContext())


def test_sessions_without_compaction_give_a_reason_not_an_error():
    b = SessionBuilder("plain", "pi", None)
    b.add("user", "hello", "e1")
    s = b.build()
    assert recorded.find(s) == ([], [])
    assert recorded.skip_reason(s) == "no compaction in its pi log"
    swe = next(iter(ingest.load_sessions(FIXTURES / "swe_agent" / "function_calling.traj")))
    assert recorded.skip_reason(swe) == "its format (swe_agent) records no compactions"


def test_a_compaction_without_its_summary_is_counted_not_used():
    b = SessionBuilder("cut-short", "pi", None)
    b.add("user", "hello", "e1")
    rec = b.add("meta", "compaction without a summary", "e2")
    b.metadata["compactions"] = [
        {"entry_id": "e2", "source_order": rec.source_order},
        {"entry_id": "e9"},
    ]  # no position at all
    s = b.build()
    found, problems = recorded.find(s)
    assert found == []
    assert problems == [
        "compaction 1 (entry e2): no recorded summary follows it",
        "compaction 2: its position in the session is not recorded",
    ]
    assert "no recorded summary follows it" in recorded.skip_reason(s)


def test_recorded_is_registered_but_not_listed():
    assert "recorded" not in strategies.names()
    assert strategies.get("recorded").name == "recorded"


def test_two_compactions_each_show_their_own_next_request():
    (s,) = list(ingest.load_sessions(FIXTURES / "pi" / "two-compactions.jsonl"))
    found, _ = recorded.find(s)
    assert [rc.index for rc in found] == [0, 1]
    texts = []
    for rc in found:
        p = strategies.compact(s, "recorded", rc.cut, CompactionContext())
        texts.append("\n".join(seg.text for seg in p.segments[2:]))
    assert "SUMMARY-ONE" in texts[0] and "SUMMARY-TWO" not in texts[0]
    assert "SUMMARY-TWO" in texts[1] and "SUMMARY-ONE" not in texts[1]  # pi: the latest compaction replaces


# --------------------------------------------------------------------------- Codex remote compaction (issue 27, item 2)

#: openai/codex core/tests/suite/compact_remote.rs @ a13f6a86 as a rollout (tests/fixtures/SOURCES.md).
REMOTE = FIXTURES / "codex" / "rollout-2026-01-20T09-00-00-0199c0de-0000-7000-8000-00000000e0c1.jsonl"


def _remote(tmp_path=None, payload=None):
    path = REMOTE
    if payload is not None:
        path = tmp_path / REMOTE.name
        path.write_text(REMOTE.read_text("utf-8").replace("ENCRYPTED_COMPACTION_SUMMARY", payload), "utf-8")
    (s,) = list(ingest.load_sessions(path))
    return s


def test_remote_compaction_shows_an_opaque_summary_labelled_with_its_estimated_size(tmp_path):
    """Its `compacted` item has an empty message; what the agent sent next is the replacement history, whose
    encrypted `compaction` item the model reads and we cannot: a segment labelled "summary opaque (encrypted)",
    sized by Codex's estimate (28 bytes of upstream's test payload: 0 tokens; 4,000 bytes: 588)."""
    s = _remote()
    (rc,), problems = recorded.find(s)
    assert problems == [] and (rc.agent, rc.cut, rc.after) == ("codex", 2, 3)
    p = strategies.compact(s, "recorded", rc.cut, CompactionContext())
    assert [(g.kind, g.role, g.label, g.opaque) for g in p.segments[2:]] == [
        ("tail", "user", "", False),
        ("summary", "assistant", "summary opaque (encrypted)", True),
        ("tail", "assistant", "", False),
    ]
    assert [g.text for g in p.segments[2:5:2]] == ["COMPACTED_USER_SUMMARY", "COMPACTED_ASSISTANT_NOTE"]
    opaque = p.segments[3]
    assert opaque.tokens == 0 == p.notes["opaque_summary_tokens"] and "ENCRYPTED" not in opaque.text
    big = _remote(tmp_path, "QUJD" * 1_000)
    p = strategies.compact(big, "recorded", rc.cut, CompactionContext())
    (opaque,) = [g for g in p.segments if g.opaque]
    assert opaque.tokens == 588 == p.notes["opaque_summary_tokens"] and "588 tokens" in opaque.text
    assert opaque.label == "summary opaque (encrypted)" and "QUJD" not in p.text()
    # the size counts in the request, the placeholder's own tokens do not
    assert p.tokens == p.notes["tokens"] == sum(g.tokens for g in p.segments)
    assert p.to_json()["segments"][3]["opaque"] is True
    back = projection_from_json(p.to_json()).finalize()  # a stored projection keeps the flag and the estimate
    assert back.segments[3].opaque and back.segments[3].tokens == 588
