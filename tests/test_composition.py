import json

import pandas as pd
import pytest

from compaction_lab.core.session import CONTEXT_KINDS
from compaction_lab.core.tokens import TokenCounter
from compaction_lab.tally import composition
from tests.helpers import FIXTURES, PUBLIC_FIXTURES, make_session


def _other_session():
    return make_session(
        [
            ("user", "Run the tests."),
            ("reasoning", "Pytest is configured in pyproject.toml."),
            ("tool_call", "bash pytest -q", {"tool": "bash", "target": "pytest -q", "call_id": "c9"}),
            (
                "tool_output",
                "F" * 300 + "\n1 failed",
                {"tool": "bash", "target": "pytest -q", "call_id": "c9", "is_error": True},
            ),
            ("summary", "Earlier summary text."),
        ],
        session_id="s2",
        source_format="other",
    )


def _tool_share(comp):
    """Each session's share of characters in tool calls and outputs (the coarse view's "tool traffic")."""
    coarse = composition.coarse_view(comp)
    tool = coarse[coarse["group"] == "tool traffic"].set_index("session_id")["char_share"]
    return tool.drop("ALL", errors="ignore")


def test_composition_sums_equal_record_totals(small_session):
    sessions = [small_session, _other_session()]
    comp = composition.composition_table(sessions)
    assert list(comp.columns) == composition.COMPOSITION_COLUMNS
    # One row per session x context kind, zeros included.
    assert len(comp) == 2 * len(CONTEXT_KINDS)
    tc = TokenCounter()
    for s in sessions:
        recs = [r for r in s.records if r.kind in CONTEXT_KINDS]
        sub = comp[comp["session_id"] == s.id]
        assert sub["records"].sum() == len(recs)
        assert sub["chars"].sum() == sum(len(r.text) for r in recs) == s.chars
        assert sub["tokens"].sum() == sum(len(tc.encoding.encode_ordinary(r.text)) for r in recs)
        for kind in CONTEXT_KINDS:
            row = sub[sub["kind"] == kind].iloc[0]
            assert row["chars"] == sum(len(r.text) for r in recs if r.kind == kind)
    assert set(comp["source_format"]) == {"test", "other"}


def test_shares_and_coarse_view(small_session):
    comp = composition.composition_table([small_session, _other_session()])
    shares = composition.with_shares(comp)
    assert shares.groupby("session_id")["char_share"].sum().round(9).eq(1.0).all()

    coarse = composition.coarse_view(comp)
    assert set(coarse["group"]) == set(composition.COARSE_ORDER)
    for _sid, g in coarse.groupby("session_id"):
        assert g["char_share"].sum() == pytest.approx(1.0)
    allrow = coarse[coarse["session_id"] == "ALL"].set_index("group")
    tool_chars = comp[comp["kind"].isin(["tool_call", "tool_output"])]["chars"].sum()
    assert allrow.loc["tool traffic", "chars"] == tool_chars
    assert allrow.loc["assistant prose", "chars"] == comp[comp["kind"].isin(["assistant", "reasoning"])]["chars"].sum()

    share = _tool_share(comp)
    s1 = comp[comp["session_id"] == "s1"]
    assert share["s1"] == pytest.approx(s1[s1["kind"].str.startswith("tool")]["chars"].sum() / s1["chars"].sum())

    overall = composition.overall_by_kind(comp)
    assert overall["char_share"].sum() == pytest.approx(1.0)
    assert overall["chars"].sum() == comp["chars"].sum()


def test_empty_session_gives_zero_rows_not_errors():
    s = make_session([("meta", "nothing here")], session_id="empty")
    comp = composition.composition_table([s])
    assert comp["chars"].sum() == 0 and len(comp) == len(CONTEXT_KINDS)
    assert composition.with_shares(comp)["char_share"].sum() == 0


# --------------------------------------------------------------------------- follow-ups


def _work_session(followup: str, injected: bool = False):
    return make_session(
        [
            ("user", "Please keep the staging proxy on the usual port and never touch migrations/0007_add_index.py."),
            (
                "assistant",
                "I chose the LRU eviction policy for the session cache in cache/store.py because entries are hot.",
            ),
            (
                "tool_call",
                "bash pytest tests/test_orders.py",
                {"tool": "bash", "target": "pytest tests/test_orders.py", "call_id": "c1"},
            ),
            (
                "tool_output",
                "FAILED tests/test_orders.py::test_refund_rounding - AssertionError: 10.01 != 10.00",
                {"tool": "bash", "target": "pytest tests/test_orders.py", "call_id": "c1", "is_error": True},
            ),
            ("assistant", "The refund rounding bug is fixed now."),
            ("user", followup, {"injected": injected}),
        ]
    )


@pytest.mark.parametrize(
    "followup, pointer, kind",
    [
        ("Remind me why you chose the eviction policy for cache/store.py?", "assistant", "assistant"),
        ("What was the failing assertion in test_refund_rounding earlier?", "tool", "tool_output"),
        ("Which file did I say earlier you must never touch in migrations?", "user", "user"),
    ],
)
def test_followup_attribution_on_hand_made_sessions(followup, pointer, kind):
    s = _work_session(followup)
    found = composition.find_followups(s)
    assert len(found) == 1
    f = found[0]
    assert (f.pointer, f.target_kind) == (pointer, kind)
    assert f.target_source_order < f.source_order
    assert f.entry_id == "e5"


def test_plain_request_without_cue_is_not_a_followup():
    assert composition.find_followups(_work_session("Now add a changelog entry for the release.")) == []


def test_cue_without_match_is_unresolved_not_guessed():
    found = composition.find_followups(_work_session("What was that thing again with zebra quokka?"))
    assert [f.pointer for f in found] == ["unresolved"]
    assert found[0].target_entry_id is None


def test_injected_user_text_is_ignored():
    s = _work_session("Remind me why you chose the eviction policy for cache/store.py?", injected=True)
    assert composition.find_followups(s) == []


def test_ties_go_to_the_most_recent_record():
    s = make_session(
        [
            ("user", "Start the release train."),
            ("assistant", "Deployed build kestrel to canary."),
            ("assistant", "Deployed build kestrel to canary."),
            ("tool_output", "ok"),
            ("assistant", "All green."),
            ("user", "Remind me about kestrel from before?"),
        ]
    )
    (f,) = composition.find_followups(s, min_score=0.1)
    assert f.target_source_order == 2


def test_followups_and_pointer_tables():
    sessions = [
        _work_session("Remind me why you chose the eviction policy for cache/store.py?"),
        make_session([("user", "x"), ("user", "What was that again, zebra quokka?")], session_id="s9"),
    ]
    fu = composition.followups_table(sessions)
    assert list(fu.columns) == composition.FOLLOWUP_COLUMNS
    assert len(fu) == 2
    pt = composition.pointer_table(fu).set_index("pointer")
    assert pt.loc["assistant", "followups"] == 1 and pt.loc["assistant", "share"] == 1.0
    assert pt.loc["unresolved", "followups"] == 1 and pd.isna(pt.loc["unresolved", "share"])
    assert pt.loc[["assistant", "user", "tool"], "share"].sum() == pytest.approx(1.0)


def test_empty_followups_table_has_columns():
    fu = composition.followups_table([make_session([("user", "hello")])])
    assert fu.empty and list(fu.columns) == composition.FOLLOWUP_COLUMNS
    pt = composition.pointer_table(fu)
    assert pt["followups"].sum() == 0


def test_terms_split_paths_and_drop_stopwords():
    t = composition.terms("Did you change payments/client.py before the ORD-58213 run of app.jobs.rebuildIndex?")
    assert {"payments/client.py", "payments", "client.py", "client", "ord-58213", "rebuildindex"} <= set(t)
    assert "the" not in t and "before" not in t and "py" not in t
    # Identifier-shaped terms outweigh plain words.
    assert t["ord-58213"] == t["rebuildindex"] == 1.0
    assert t["payments"] == composition.PLAIN_WORD_WEIGHT < 1.0


def test_speaker_cue_prefers_the_named_speaker():
    s = make_session(
        [
            ("user", "Refactor `dispatch_event` in webhooks.py."),
            ("assistant", "My plan for `dispatch_event`: batch the writes and retry once."),
            (
                "tool_output",
                "def dispatch_event(evt):\n    return handle(evt)  # dispatch_event body",
                {"tool": "read_file"},
            ),
            ("tool_output", "dispatch_event called 3 times; dispatch_event took 40 ms", {"tool": "bash"}),
            ("assistant", "Done."),
            ("user", "Going back to your plan for `dispatch_event`: is that still the plan?"),
        ]
    )
    (f,) = composition.find_followups(s, min_score=0.1)
    assert (f.pointer, f.target_source_order) == ("assistant", 1)


@pytest.mark.slow
def test_heuristic_agrees_with_the_generators_ground_truth():
    """Synthetic chains record which earlier record each follow-up refers to: measure the heuristic on them."""
    from compaction_lab.ingest import synthetic

    chains = synthetic.generate_chains(synthetic.SyntheticSpec(seed=11, n_chains=4, window_tokens=128_000))
    detected = agree = truth_n = false_pos = 0
    for c in chains:
        truth = {f["entry_id"]: f for f in c.session.metadata["followups"]}
        found = {f.entry_id: f for f in composition.find_followups(c.session)}
        truth_n += len(truth)
        false_pos += len(set(found) - set(truth))
        for e, t in truth.items():
            if e in found:
                detected += 1
                agree += found[e].pointer == t["pointer"]
    assert truth_n >= 4
    assert detected == truth_n  # every planted follow-up is detected
    assert false_pos <= truth_n // 4  # few turns are mistaken for follow-ups
    assert agree >= 0.7 * truth_n  # the pointer class is mostly right


def test_composition_on_a_real_fixture_session_built_by_hand():
    """Real pi traffic: tool output must dominate, as the fixtures' own numbers say (75-94%)."""
    path = PUBLIC_FIXTURES / "pi" / "large-session.jsonl"
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if obj.get("type") != "message":
            continue
        msg = obj["message"]
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
        for b in blocks:
            t = b.get("type")
            if msg["role"] == "toolResult" and t == "text":
                items.append(("tool_output", b.get("text", "")))
            elif t == "text":
                items.append(("user" if msg["role"] == "user" else "assistant", b.get("text", "")))
            elif t == "thinking":
                items.append(("reasoning", b.get("thinking", "")))
            elif t == "toolCall":
                items.append(("tool_call", json.dumps(b.get("arguments", {}))))
    comp = composition.composition_table([make_session(items, session_id="pi")])
    share = _tool_share(comp)["pi"]
    assert 0.6 < share < 0.99


def test_default_synthetic_chains_are_mostly_tool_traffic():
    """Acceptance: on the default profile's chains, tool calls + outputs are the large majority of characters."""
    from compaction_lab.ingest import synthetic

    chains = synthetic.generate_chains(synthetic.SyntheticSpec())
    comp = composition.composition_table([c.session for c in chains])
    share = _tool_share(comp)
    assert len(share) == 6
    assert (share >= 0.75).all(), share.to_dict()
    coarse = composition.coarse_view(comp).set_index(["session_id", "group"])
    assert coarse.loc[("ALL", "user text"), "char_share"] < 0.10


def test_tally_equals_the_table_of_the_sessions_and_their_audit():
    """`tally` (units read as tasks, counted in parts, combined in reading order) gives the table of
    `composition_table` over `load_sessions` and the same import audit, in this process."""
    from compaction_lab.ingest import ImportAudit, load_sessions

    paths = [FIXTURES]  # the public sessions (tests/fixtures/public) included
    audit = ImportAudit()
    expected = composition.composition_table(list(load_sessions(paths, audit)), scheduler="sync")
    got = composition.tally(paths, scheduler="sync")
    pd.testing.assert_frame_equal(got.table, expected)
    assert got.audit == audit and got.stats.engine == "sync" and got.stats.units == audit.files
    empty = composition.tally([FIXTURES / "SOURCES.md"], scheduler="sync")
    assert empty.table.empty and empty.audit.sessions == 0 and empty.audit.n_skipped == 1


def test_tally_counts_repeated_texts_as_cache_hits(tmp_path, monkeypatch):
    from compaction_lab.core import tokens

    monkeypatch.setattr(tokens, "_COUNTERS", {})  # a fresh cache: nothing counted by earlier tests
    src = next((FIXTURES / "pi").glob("*.jsonl"))
    for i in range(3):
        (tmp_path / f"copy{i}.jsonl").write_bytes(src.read_bytes())
    got = composition.tally([tmp_path], scheduler="sync")
    # The same session three times is one session (duplicates skipped), its texts counted once.
    assert got.audit.sessions == 1 and got.audit.reasons["duplicate_session"] == 2
    assert got.stats.cache_hits >= 2 * got.stats.cache_misses > 0
    assert 0.6 < got.stats.hit_rate < 1 and 0.6 < got.stats.hit_rate_chars < 1
