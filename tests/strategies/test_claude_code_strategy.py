"""``claude-code`` (reconstructed): Claude Code's compaction, rule by rule (issue 13, item 1).

Claude Code's source and its tests are not public. Each test names the public
analysis of the v2.x bundle (``services/compact/``) whose rule it pins; the
table rule → source → function is ``strategies/UPSTREAM.md`` (claude-code part).
Every test here fails on the code before issue 13 (``claude-code-style-1``: a
dedicated cold request, tool results cleared before summarising, an 8k tail).
"""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO_ROOT, FakeProvider, make_session

from compaction_lab import strategies, summarize
from compaction_lab.core.projection import STAND_IN_LABEL
from compaction_lab.core.shapes import CallShape
from compaction_lab.cost import model as cost
from compaction_lab.exam import cases as exam_cases
from compaction_lab.ingest import synthetic
from compaction_lab.strategies import anatomy
from compaction_lab.strategies.base import CompactionContext, record_messages
from compaction_lab.summarize import NoneProvider, SummaryUnavailable
from compaction_lab.summarize.extractive import empty_template

SHAPE = CallShape(
    "test",
    "You are a test agent.",
    (
        {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
    ),
)
NAME = "claude-code"


def cc():
    from compaction_lab.strategies import claude_code

    return claude_code


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoneProvider(), params=params
    )


def words(tag: str, n: int) -> str:
    return f"{tag}:" + " word" * n


def read(cid: str, path: str, body: str, error: bool = False) -> list[tuple]:
    extra = {"tool": "read_file", "target": path, "call_id": cid}
    return [
        ("tool_call", f'read_file {{"path": "{path}"}}', extra),
        ("tool_output", body, {**extra, "is_error": error}),
    ]


def bash(cid: str, cmd: str, out: str) -> list[tuple]:
    extra = {"tool": "bash", "target": cmd, "call_id": cid}
    return [("tool_call", f'bash {{"command": "{cmd}"}}', extra), ("tool_output", out, extra)]


def session():
    """Eight turns: reads of seven files (one twice, one too large, one CLAUDE.md), shell runs, two todo writes."""
    items = [("system", SHAPE.system_prompt)]
    files = ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py", "g.py"]
    for i, f in enumerate(files):
        items += [
            ("user", words(f"u{i}", 20)),
            ("assistant", words(f"a{i}", 20)),
            *read(f"r{i}", f"src/{f}", f"CONTENT-{f} " + words(f"body{i}", 300)),
            *bash(f"b{i}", f"pytest -k t{i}", f"OUT-{i} " + words(f"out{i}", 200)),
        ]
        if i == 2:
            items.append(
                ("tool_call", 'TodoWrite {"todos": [{"content": "old todo"}]}', {"tool": "TodoWrite", "call_id": "t1"})
            )
    items += [
        ("user", "now the big one"),
        *read("rbig", "src/big.py", "BIG " + words("big", 6000)),
        *read("rmd", "CLAUDE.md", "project memory"),
        *read("again", "src/b.py", "CONTENT-b.py second read " + words("b2", 50)),
        (
            "tool_call",
            'TodoWrite {"todos": [{"content": "ship it", "status": "in_progress"}]}',
            {"tool": "TodoWrite", "call_id": "t2"},
        ),
        ("assistant", "LAST ASSISTANT WORDS"),
    ]
    return make_session(items)


def compact(sess, ctx=None, cut=None):
    return strategies.compact(sess, NAME, cut=cut, ctx=ctx or ctx_for())


def kinds(p):
    return [s.kind for s in p.segments]


# =========================================================================== registry and label


def test_registered_and_labelled_reconstructed():
    """Claude Code's source is not public: the arm says 'reconstructed' wherever it is named."""
    s = strategies.get(NAME)
    assert s.algorithm_version == "claude-code-2" and s.estimator == "tiktoken"
    assert "claude-code-style" not in strategies.names()
    assert "reconstructed" in (cc().__doc__ or "")
    p = compact(session(), ctx_for(summarizer=summarize.get_provider("extractive")))
    assert anatomy.strategy_label(p) == f"claude-code (reconstructed) ({STAND_IN_LABEL})"
    assert anatomy.strategy_label(compact(session())) == "claude-code (reconstructed)"


# =========================================================================== trigger


def test_fires_at_the_autocompact_threshold():
    """autoCompact.ts (claude-wiki.com/auto-compact, claude-code-source.doccupine.app/compact-service):
    effective window = W - min(O, 20,000); auto-compact at effective - 13,000."""
    s, ctx = strategies.get(NAME), ctx_for(200_000, 32_000)
    assert s.fires(167_000, ctx) and not s.fires(166_999, ctx)
    small_out = ctx_for(200_000, 8_000)
    assert s.fires(179_000, small_out) and not s.fires(178_999, small_out)


# =========================================================================== the forked summary request


def test_summary_request_forks_the_main_conversation():
    """compact.ts streamCompactSummary (tengu_compact_cache_prefix, default on; public analyses
    wiki.coder.dog 'claude-code-compaction-prompt-cache', codehub.bot compact.ts): the fork carries the
    session's system prompt, tools and messages, the compact instruction appended as the last user
    message; the summariser sees the tool results (clearing is microcompact's, not this step's)."""
    sess, prov = session(), FakeProvider()
    p = compact(sess, ctx_for(summarizer=prov))
    (req,) = prov.requests
    assert req is p.summary_request and req.shape == "prefix-shared" and req.template == "claude-code-9"
    assert req.system == SHAPE.system_prompt and req.tools == SHAPE.tools
    assert req.max_output_tokens == 20_000
    # the same messages the session's previous request carried, then the instruction
    previous = record_messages([r for r in sess.records])
    assert list(req.messages[:-1]) == previous
    assert req.messages[-1] == {"role": "user", "content": cc().NINE_SECTION_INSTRUCTION}
    outs = [r for r in sess.records if r.kind == "tool_output"]
    sent = [m["content"] for m in req.messages if m["role"] == "tool"]
    assert sent == [r.text for r in outs]  # every tool result verbatim, none cleared
    assert cc().CLEARED_TOOL_RESULT not in "".join(m["content"] for m in req.messages)
    assert req.source_entry_ids == tuple(r.entry_id for r in sess.records[1:])


def test_instruction_has_the_nine_sections_and_an_analysis_block():
    """prompt.ts (ccprompts.info service-compact-analysis-base; r/ClaudeAI 'Claude Code's /compact prompt'):
    an <analysis> scratch block, then nine sections in a <summary> block; text only, no tool calls."""
    ins = cc().NINE_SECTION_INSTRUCTION
    sections = [
        "Primary Request and Intent",
        "Key Technical Concepts",
        "Files and Code Sections",
        "Errors and Fixes",
        "Problem Solving",
        "All User Messages",
        "Pending Tasks",
        "Current Work",
        "Optional Next Step",
    ]
    assert [ins.index(f"{i}. {s}") for i, s in enumerate(sections, 1)] == sorted(
        ins.index(f"{i}. {s}") for i, s in enumerate(sections, 1)
    )
    assert "<analysis>" in ins and "<summary>" in ins and "do not call any tools" in ins


def test_analysis_block_stripped_and_summary_tag_formatted():
    """prompt.ts formatCompactSummary (decodeclaude.com/claude-code-compaction): <analysis> dropped,
    <summary>…</summary> becomes 'Summary:' and its content."""
    prov = FakeProvider(
        "<analysis>thinking aloud</analysis>\n\n<summary>\n1. Primary Request and Intent: X\n</summary>"
    )
    p = compact(session(), ctx_for(summarizer=prov))
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.text == "Summary:\n1. Primary Request and Intent: X"
    assert "thinking aloud" not in p.text() and p.receipt.text == summary.text


def test_cost_model_sees_the_fork_share_the_previous_request():
    """The forked request shares all but the instruction with the session's previous request."""
    sess = session()
    p = compact(sess, ctx_for(summarizer=FakeProvider()))

    class Case:
        id, session_id, cut = "c", sess.id, len(sess.records)

    t = cost.compaction_prefix_table([Case], {sess.id: sess}, {("c", NAME): p}, SHAPE).set_index("strategy")
    assert t.loc[NAME, "previous_part"] == "end" and t.loc[NAME, "shared_ratio"] > 0.9


# =========================================================================== the next request


def test_next_request_summary_message_then_reattachments_and_no_tail():
    """compact.ts buildPostCompactMessages / getCompactUserSummaryMessage (public analyses: juejin.cn
    'Claude Code-7', dev.to 'What survives /compact'): one user message (continuation preface, summary,
    continue without asking), then up to 5 recently read files newest first and the todo list;
    nothing of the history verbatim."""
    sess = session()
    p = compact(sess, ctx_for(summarizer=FakeProvider()))
    k = kinds(p)
    assert k[:5] == ["system", "tools", "header", "summary", "continue"]
    assert "tail" not in k and "assistant_original" not in k
    assert p.segments[2].text == cc().SUMMARY_PREFACE and p.segments[4].text == cc().CONTINUE_INSTRUCTION
    assert all(s.role == "user" for s in p.segments[2:])
    # the preface, the summary and the continue instruction reach the model as one user message
    msgs = p.messages()
    assert msgs[1]["role"] == "user" and msgs[1]["content"].startswith(cc().SUMMARY_PREFACE)
    assert "SUMMARY TEXT" in msgs[1]["content"] and cc().CONTINUE_INSTRUCTION in msgs[1]["content"]
    # files: newest first, distinct, CLAUDE.md never, the latest read of b.py, at most 5
    assert p.notes["reattached_files"] == ["src/b.py", "src/big.py", "src/g.py", "src/f.py", "src/e.py"]
    originals = [s for s in p.segments if s.kind == "user_original"]
    assert originals[0].text.startswith("CONTENT-b.py second read")
    assert all(s.record_kind == "tool_output" for s in originals) and len(originals) == 4
    # a file over 5,000 tokens comes back as its path only
    (ref,) = [s for s in p.segments if s.kind == "omitted_marker"]
    assert "src/big.py" in ref.text and "BIG" not in ref.text
    # the todo list as last written closes the request
    assert p.segments[-1].kind == "header" and '"ship it"' in p.segments[-1].text and "old todo" not in p.text()
    # no verbatim tail: the last assistant words are only in the summary's source
    assert "LAST ASSISTANT WORDS" not in p.text()
    assert p.notes["fits"] and p.tokens <= p.capacity


def test_reattachment_budget_is_fifty_thousand_rough_tokens():
    """compact.ts POST_COMPACT_TOKEN_BUDGET = 50,000 (estimated as characters / 4) over at most
    POST_COMPACT_MAX_FILES_TO_RESTORE = 5 files of at most POST_COMPACT_MAX_TOKENS_PER_FILE = 5,000;
    attachments are kept newest first while the running estimate stays within the budget."""
    m = cc()
    assert (m.FILES_TOKEN_BUDGET, m.MAX_FILES_TO_RESTORE, m.MAX_TOKENS_PER_FILE) == (50_000, 5, 5_000)
    items = [("user", "read them all")]
    for i in range(6):
        items += read(f"r{i}", f"f{i}.py", f"F{i}" + " word" * 700)
    sess = make_session(items)
    p = compact(sess, ctx_for(summarizer=FakeProvider(), reattach_token_budget=2_000))
    assert p.notes["reattached_files"] == ["f5.py", "f4.py"]  # a third would pass 2,000 rough tokens
    rough = sum(len(s.text) / 4 for s in p.segments if s.entry_ids and s.kind in ("header", "user_original"))
    assert 1_000 < rough <= 2_000 and len(p.notes["reattach_dropped"]) == 3  # f3, f2, f1 (5 files at most)
    full = compact(sess, ctx_for(summarizer=FakeProvider()))
    assert full.notes["reattached_files"] == ["f5.py", "f4.py", "f3.py", "f2.py", "f1.py"]


def test_no_provider_gives_the_empty_template():
    p = compact(session())
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.text == empty_template("claude-code-9") and summary.label == "empty template (no summary)"
    assert p.receipt.fallback and "no summary provider" in p.receipt.error and p.summary_request is not None


def test_failing_provider_is_recorded():
    for err, expect in ((RuntimeError("boom"), "RuntimeError: boom"), (SummaryUnavailable("down"), "down")):
        p = compact(session(), ctx_for(summarizer=FakeProvider(error=err)))
        assert p.receipt.fallback and p.receipt.error == expect


def test_small_window_never_past_capacity():
    """Upstream assumes a ≥200k window; ours never adds past W - O (re-attachments dropped first)."""
    ctx = ctx_for(window=4_000, output=1_000, summarizer=FakeProvider("word " * 9_000))
    p = compact(session(), ctx)
    assert p.tokens <= p.capacity and p.notes["fits"] and p.notes.get("summary_truncated")
    assert p.notes["reattach_dropped"] and "tail" not in kinds(p)


# =========================================================================== microcompact (its own step)


def test_microcompact_is_its_own_step_and_off_by_default():
    """microCompact.ts (wiki.coder.dog 'claude-code-compaction-policy'; claude-wiki.com/auto-compact):
    old results of compactable tools become '[Old tool result content cleared]', the N newest kept;
    other tools' results untouched. Not part of the summary step."""
    sess = session()
    prov = FakeProvider()
    compact(sess, ctx_for(summarizer=prov))
    assert cc().CLEARED_TOOL_RESULT not in str(prov.requests[0].messages)
    prov2 = FakeProvider()
    p = compact(sess, ctx_for(summarizer=prov2, microcompact_keep_recent=3))
    sent = [m["content"] for m in prov2.requests[0].messages if m["role"] == "tool"]
    outs = [r for r in sess.records if r.kind == "tool_output"]
    assert sent[-3:] == [r.text for r in outs[-3:]]
    assert sent[:-3] == [cc().CLEARED_TOOL_RESULT] * (len(outs) - 3)
    assert p.notes["microcompact_cleared"] == len(outs) - 3
    mixed = make_session(
        [
            ("tool_call", "agent {}", {"tool": "Task", "call_id": "x"}),
            ("tool_output", "agent answer", {"tool": "Task", "call_id": "x"}),
            *bash("y", "ls", "listing"),
            ("tool_call", "mcp {}", {"tool": "mcp__gh__issue", "call_id": "z"}),
            ("tool_output", "issue body", {"tool": "mcp__gh__issue", "call_id": "z"}),
        ]
    ).records
    kept, n = cc().microcompact(list(mixed), 0)
    # only compactable tools (and MCP tools) are cleared; a sub-agent's answer stays
    assert [r.text for r in kept if r.kind == "tool_output"] == [
        "agent answer",
        cc().CLEARED_TOOL_RESULT,
        cc().CLEARED_TOOL_RESULT,
    ] and n == 2


def test_prompt_too_long_retry_is_a_parameter():
    """compact.ts truncateHeadForPTLRetry: with ``ptl_retry`` the oldest turns go while the fork's input
    exceeds the window; off by default (see the module docstring)."""
    sess = session()
    small = ctx_for(window=6_000, output=1_000, summarizer=FakeProvider())
    whole = compact(sess, small)
    assert whole.notes["ptl_dropped_turns"] == 0
    assert whole.summary_request.messages[0]["content"] == words("u0", 20)
    cut = compact(sess, ctx_for(window=6_000, output=1_000, summarizer=FakeProvider(), ptl_retry=True))
    assert cut.notes["ptl_dropped_turns"] > 0
    assert cut.summary_request.messages[0]["role"] == "user"
    assert cut.summary_request.messages[0]["content"] != words("u0", 20)
    assert set(cut.summary_request.source_entry_ids) < set(whole.summary_request.source_entry_ids)


# =========================================================================== acceptance 2 (default profile)


@pytest.fixture(scope="module")
def default_cost_cases():
    """The default profile's priced cases (notebook 04: the first ``cost_cases``, each chain at its end)."""
    profile = REPO_ROOT / "papermill_params" / "default.yaml"
    params = yaml.safe_load(profile.read_text(encoding="utf-8"))["parameters"]
    chains = synthetic.generate_chains(
        synthetic.SyntheticProfile(
            n_chains=params["n_chains"], seed=params["seed"], window_tokens=params["window_tokens"]
        )
    )
    rc = exam_cases.build([c.session for c in chains], chains, params)
    cases = rc.cases[: params["cost_cases"]]
    ctx = CompactionContext(
        window=params["window"],
        output_ceiling=params["output_ceiling"],
        summarizer=summarize.get_provider(params["summarizer"]),
    )
    projs = {(c.id, NAME): strategies.compact(rc.sessions[c.session_id], NAME, c.cut, ctx) for c in cases}
    return cases, rc.sessions, projs, ctx


def test_acceptance_fork_shares_the_prefix_on_the_default_profile(default_cost_cases):
    """Issue 13 acceptance 2: the summary request shares ≥ 95% of its tokens with the session's previous
    request under the deepseek and anthropic simulators (default profile), the projection has no
    verbatim tail, and its label says 'reconstructed'."""
    cases, sessions, projs, ctx = default_cost_cases
    t = cost.compaction_prefix_table(cases, sessions, projs, ctx.shape).set_index("strategy")
    assert t.loc[NAME, "shared_ratio"] >= 0.95 and t.loc[NAME, "cases"] == len(cases)
    assert "reconstructed" in t.loc[NAME, "strategy_label"]
    a = cost.CostAssumptions(turns=3, simulated_turns=3)
    for sim in ("deepseek", "anthropic"):
        for c in cases:
            bill = cost.simulate_case(sessions[c.session_id], c.cut, projs[(c.id, NAME)], ctx.shape, sim, a)
            warm = bill.compaction_cached
            assert warm.cached_tokens / warm.input_tokens >= 0.95, (sim, c.id)
    for p in projs.values():
        assert "tail" not in kinds(p) and "reconstructed" in anatomy.strategy_label(p)
        assert p.tokens <= p.capacity


def test_a_session_compacted_twice_forks_only_its_live_history(tmp_path):
    """Issue 13 item 2 / acceptance 3: after Claude Code compacts, the conversation restarts at the compact
    boundary (the compact summary and what followed; `compact.ts` buildPostCompactMessages, reconstructed).
    A hand-built transcript with two recorded compactions: the fork carries the second summary and the turns
    after it — nothing from before — then the instruction. The -2 code forked the whole raw journal."""
    import json

    from compaction_lab.ingest import load_sessions

    sid = "cc-two-compactions"

    def line(uuid, parent, kind, **kw):
        return {
            "parentUuid": parent,
            "sessionId": sid,
            "uuid": uuid,
            "type": kind,
            "timestamp": f"2025-11-02T09:{int(uuid[1:]):02d}:00.000Z",
            **kw,
        }

    def user(uuid, parent, text, **kw):
        return line(uuid, parent, "user", message={"role": "user", "content": text}, **kw)

    def assistant(uuid, parent, text):
        return line(
            uuid,
            parent,
            "assistant",
            message={"role": "assistant", "id": f"m{uuid}", "content": [{"type": "text", "text": text}]},
        )

    def boundary(uuid, parent):
        return line(
            uuid,
            None,
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid=parent,
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        )

    prefix = "This session is being continued from a previous conversation that ran out of context."
    lines = [
        user("u01", None, "add retries to billing/client.py"),
        assistant("u02", "u01", "reading the client"),
        boundary("u03", "u02"),
        user("u04", "u03", f"{prefix} SUMMARY-ONE", isCompactSummary=True),
        user("u05", "u04", "also keep ORD-58213 in the export"),
        assistant("u06", "u05", "kept ORD-58213"),
        boundary("u07", "u06"),
        user("u08", "u07", f"{prefix} SUMMARY-TWO", isCompactSummary=True),
        user("u09", "u08", "now run the tests"),
        assistant("u10", "u09", "tests pass: 42 passed"),
    ]
    path = tmp_path / f"{sid}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (s,) = load_sessions(path)
    assert len(s.metadata["compactions"]) == 2
    prov = FakeProvider()
    ctx = ctx_for(summarizer=prov)
    p = compact(s, ctx)
    (req,) = prov.requests
    assert req is p.summary_request and req.shape == "prefix-shared"
    expected = [
        {"role": "user", "content": f"{prefix} SUMMARY-TWO"},
        {"role": "user", "content": "now run the tests"},
        {"role": "assistant", "content": "tests pass: 42 passed"},
    ]
    assert list(req.messages[:-1]) == expected
    assert req.messages[-1] == {"role": "user", "content": strategies.get("claude-code").instruction(ctx)}
    sent = " ".join(m["content"] for m in req.messages)
    assert "SUMMARY-ONE" not in sent and "ORD-58213" not in sent and "billing/client.py" not in sent


def test_summary_segment_says_who_wrote_it():
    """Every arm labels its summary segment (`base.summary_label`); claude-code left a provider's summary
    unlabelled and the empty template unlabelled too, so tables could not tell them apart."""
    p = compact(session(), ctx_for(summarizer=FakeProvider(name="a-model")))
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.label == "summary (a-model)"
    ext = compact(session(), ctx_for(summarizer=summarize.get_provider("extractive")))
    assert [s.label for s in ext.segments if s.kind == "summary"] == [STAND_IN_LABEL]
