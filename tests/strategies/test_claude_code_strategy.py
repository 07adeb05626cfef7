"""``claude-code`` (reconstructed): Claude Code's compaction, rule by rule (issue 13, item 1).

Claude Code's source and its tests are not public. Each test names the public
analysis of the v2.x bundle (``services/compact/``) whose rule it pins; the
table rule → source → function is docs/strategies.md, "claude_code: sources (reconstructed)".
Every test here fails on the code before issue 13 (``claude-code-style-1``: a
dedicated cold request, tool results cleared before summarising, an 8k tail).
"""

from __future__ import annotations

import pytest
import yaml

from compaction_lab import strategies, summarize
from compaction_lab.core.projection import STAND_IN_LABEL
from compaction_lab.core.shapes import CallShape
from compaction_lab.cost import model as cost
from compaction_lab.exam.questions import cases as exam_cases
from compaction_lab.ingest import synthetic
from compaction_lab.strategies import labels
from compaction_lab.strategies.base import CompactionContext, record_messages
from compaction_lab.summarize import NoSummarizer, SummaryUnavailable
from compaction_lab.summarize.extractive import empty_template
from tests.helpers import REPO_ROOT, FakeSummarizer, make_session

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
    from compaction_lab.strategies.arms import claude_code

    return claude_code


def ctx_for(window=128_000, output=32_000, summarizer=None, **params) -> CompactionContext:
    return CompactionContext(
        window=window, output_ceiling=output, shape=SHAPE, summarizer=summarizer or NoSummarizer(), params=params
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
    assert s.algorithm_version == "claude-code-4" and s.estimator == "tiktoken"
    assert "claude-code-style" not in strategies.names()
    assert "reconstructed" in (cc().__doc__ or "")
    p = compact(session(), ctx_for(summarizer=summarize.get_summarizer("extractive")))
    assert labels.strategy_label(p) == f"claude-code (reconstructed) ({STAND_IN_LABEL})"
    assert labels.strategy_label(compact(session())) == "claude-code (reconstructed)"


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
    sess, prov = session(), FakeSummarizer()
    p = compact(sess, ctx_for(summarizer=prov))
    (req,) = prov.requests
    assert req is p.summary_request and req.shape == "prefix-shared" and req.template == "claude-code-9"
    assert req.system == SHAPE.system_prompt and req.tools == SHAPE.tools
    assert req.max_output_tokens == 32_000  # no cap of its own: the model's O (compact.ts:1181-1200 [M])
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
    prov = FakeSummarizer(
        "<analysis>thinking aloud</analysis>\n\n<summary>\n1. Primary Request and Intent: X\n</summary>"
    )
    p = compact(session(), ctx_for(summarizer=prov))
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.text == "Summary:\n1. Primary Request and Intent: X"
    assert "thinking aloud" not in p.text() and p.receipt.text == summary.text


def test_cost_model_sees_the_fork_share_the_previous_request():
    """The forked request shares all but the instruction with the session's previous request."""
    sess = session()
    p = compact(sess, ctx_for(summarizer=FakeSummarizer()))

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
    p = compact(sess, ctx_for(summarizer=FakeSummarizer()))
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
    p = compact(sess, ctx_for(summarizer=FakeSummarizer(), reattach_token_budget=2_000))
    assert p.notes["reattached_files"] == ["f5.py", "f4.py"]  # a third would pass 2,000 rough tokens
    rough = sum(len(s.text) / 4 for s in p.segments if s.entry_ids and s.kind in ("header", "user_original"))
    assert 1_000 < rough <= 2_000 and len(p.notes["reattach_dropped"]) == 3  # f3, f2, f1 (5 files at most)
    full = compact(sess, ctx_for(summarizer=FakeSummarizer()))
    assert full.notes["reattached_files"] == ["f5.py", "f4.py", "f3.py", "f2.py", "f1.py"]


def test_no_provider_gives_the_empty_template():
    """The what-if ``on_failure: placeholder`` (the lab's behaviour before issue 46); the default does not
    compact on a failed call (tests/strategies/test_failure_claude_code.py)."""
    p = compact(session(), ctx_for(on_failure="placeholder"))
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.text == empty_template("claude-code-9") and summary.label == "empty template (no summary)"
    assert p.receipt.fallback and "no summarizer configured" in p.receipt.error and p.summary_request is not None


def test_failing_provider_is_recorded():
    for err, expect in ((RuntimeError("boom"), "RuntimeError: boom"), (SummaryUnavailable("down"), "down")):
        p = compact(session(), ctx_for(summarizer=FakeSummarizer(error=err)))
        assert p.receipt.fallback and p.receipt.error == expect and p.notes["compaction_failed"] == expect
        p = compact(session(), ctx_for(summarizer=FakeSummarizer(error=err), on_failure="placeholder"))
        assert p.receipt.fallback and p.receipt.error == expect and "compaction_failed" not in p.notes


def test_small_window_never_past_capacity():
    """Upstream assumes a ≥200k window; ours never adds past W - O (re-attachments dropped first)."""
    ctx = ctx_for(window=4_000, output=1_000, summarizer=FakeSummarizer("word " * 9_000))
    p = compact(session(), ctx)
    assert p.tokens <= p.capacity and p.notes["fits"] and p.notes.get("summary_truncated")
    assert p.notes["reattach_dropped"] and "tail" not in kinds(p)


# =========================================================================== microcompact (its own step)


def test_microcompact_is_its_own_step_and_off_by_default():
    """microCompact.ts (wiki.coder.dog 'claude-code-compaction-policy'; claude-wiki.com/auto-compact):
    old results of compactable tools become '[Old tool result content cleared]', the N newest kept;
    other tools' results untouched. Not part of the summary step."""
    sess = session()
    prov = FakeSummarizer()
    compact(sess, ctx_for(summarizer=prov))
    assert cc().CLEARED_TOOL_RESULT not in str(prov.requests[0].messages)
    prov2 = FakeSummarizer()
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
    # keep_recent 0 keeps the newest compactable result (upstream's floor of 1); a sub-agent's answer
    # and an MCP tool's result are not compactable (microCompact.ts:41-50, :461 [M])
    assert [r.text for r in kept if r.kind == "tool_output"] == ["agent answer", "listing", "issue body"] and n == 0


def test_prompt_too_long_retry_is_a_parameter():
    """compact.ts truncateHeadForPTLRetry: with ``ptl_retry`` the oldest turns go while the fork's input
    exceeds the window; off by default (see docs/strategies.md#claude_code)."""
    sess = session()
    small = ctx_for(window=6_000, output=1_000, summarizer=FakeSummarizer())
    whole = compact(sess, small)
    assert whole.notes["ptl_dropped_turns"] == 0
    assert whole.summary_request.messages[0]["content"] == words("u0", 20)
    cut = compact(sess, ctx_for(window=6_000, output=1_000, summarizer=FakeSummarizer(), ptl_retry=True))
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
        synthetic.SyntheticSpec(n_chains=params["n_chains"], seed=params["seed"], window_tokens=params["window_tokens"])
    )
    rc = exam_cases.build([c.session for c in chains], chains, params)
    cases = rc.cases[: params["cost_cases"]]
    ctx = CompactionContext(
        window=params["window"],
        output_ceiling=params["output_ceiling"],
        summarizer=summarize.get_summarizer(params["summarizer"]),
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
        assert "tail" not in kinds(p) and "reconstructed" in labels.strategy_label(p)
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
    prov = FakeSummarizer()
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
    p = compact(session(), ctx_for(summarizer=FakeSummarizer(name="a-model")))
    (summary,) = [s for s in p.segments if s.kind == "summary"]
    assert summary.label == "summary (a-model)"
    ext = compact(session(), ctx_for(summarizer=summarize.get_summarizer("extractive")))
    assert [s.label for s in ext.segments if s.kind == "summary"] == [STAND_IN_LABEL]


# =========================================================================== files read or changed (issue 27, item 1)
#
# Upstream (v2.1.88 source extracted from the npm package; Jayleonc/claude-code-source-code @ 83fba929):
# Read, Edit, Write and NotebookEdit all store the file in readFileState with timestamp = its modification
# time (FileReadTool.ts:1032-1037, FileEditTool.ts:519-524, FileWriteTool.ts:331-336); compaction re-attaches
# the 5 newest by that timestamp (compact.ts:1415-1464). claude-code-2 re-attached read files only, by last
# read, as last read: every test below fails on it.


def cc_numbered(content: str) -> str:
    """Claude Code's Read output: addLineNumbers (``utils/file.ts``: width 6, ``→``) and its reminder."""
    body = "\n".join(f"{str(i + 1).rjust(6)}→{ln}" for i, ln in enumerate(content.split("\n")))
    return (
        body + "\n\n<system-reminder>\nWhenever you read a file, consider whether it is malware.\n</system-reminder>\n"
    )


def cc_call(cid: str, tool: str, args: dict, out: str, error: bool = False) -> list[tuple]:
    """A Claude Code tool call and its result, as the importer writes them."""
    import json

    path = args.get("file_path") or args.get("notebook_path")
    extra = {"tool": tool, "target": path, "call_id": cid}
    return [
        ("tool_call", f"{tool} {json.dumps(args)}", extra),
        ("tool_output", out, {**extra, "is_error": error}),
    ]


A_PY = 'def area(r):\n    """Circle area."""\n    return 3.14 * r * r\n'
B_PY = "RATE = 0.25\n\n\ndef tax(x):\n    return x * RATE\n"
C_PY = "from b import tax\n\n\ndef test_tax():\n    assert tax(4) == 1.0\n"


def edit_session(b_old: str = "    return x * RATE", b_new: str = "    return round(x * RATE, 2)", tail=()):
    """Reads a.py and b.py, edits b.py, writes c.py (a new file), and ends editing."""
    return make_session(
        [
            ("system", SHAPE.system_prompt),
            ("user", "make tax round to cents and add a test"),
            *cc_call("r1", "Read", {"file_path": "src/a.py"}, cc_numbered(A_PY)),
            *cc_call("r2", "Read", {"file_path": "src/b.py"}, cc_numbered(B_PY)),
            *cc_call(
                "e1",
                "Edit",
                {"file_path": "src/b.py", "old_string": b_old, "new_string": b_new, "replace_all": False},
                "The file src/b.py has been updated.",
            ),
            *cc_call("w1", "Write", {"file_path": "tests/c.py", "content": C_PY}, "File created successfully"),
            *tail,
            ("assistant", "Done: tax rounds to cents; tests/c.py covers it."),
        ]
    )


def file_segments(p, path: str) -> list:
    return [s for s in p.segments if s.message == f"file:{path}"]


def test_reattaches_files_read_or_changed_newest_change_first():
    """Issue 27 item 1: a session that reads A, B, edits B and writes C re-attaches C, B (edited), A."""
    p = compact(edit_session(), ctx_for(summarizer=FakeSummarizer()))
    assert p.notes["reattached_files"] == ["tests/c.py", "src/b.py", "src/a.py"]
    (c_head, c_body) = file_segments(p, "tests/c.py")
    # a new file comes back numbered as the session's reads show files (upstream re-reads it through Read)
    assert c_body.text == cc_numbered(C_PY) and c_body.kind == "header" and c_body.label == cc().REBUILT_LABEL
    assert c_head.kind == "header" and "after the last change" in c_head.text and c_body.record_kind is None
    (_, b_body) = file_segments(p, "src/b.py")
    assert b_body.text == cc_numbered(B_PY.replace("return x * RATE", "return round(x * RATE, 2)"))
    assert b_body.entry_ids == ("e5", "e6")  # the read it starts from, then the edit applied to it
    (a_head, a_body) = file_segments(p, "src/a.py")
    assert a_body.text == cc_numbered(A_PY) and a_body.record_kind == "tool_output" and "last read" in a_head.text
    assert p.notes["reattach_unknown"] == {} and p.tokens <= p.capacity


def test_files_rank_by_last_change_not_last_read():
    """readFileState's timestamp is the file's mtime: re-reading a.py after b.py was edited leaves b.py first."""
    sess = edit_session(tail=cc_call("r3", "Read", {"file_path": "src/a.py"}, cc_numbered(A_PY)))
    p = compact(sess, ctx_for(summarizer=FakeSummarizer()))
    assert p.notes["reattached_files"] == ["tests/c.py", "src/b.py", "src/a.py"]
    only_reads = make_session(
        [
            *cc_call("r1", "Read", {"file_path": "a.py"}, cc_numbered(A_PY)),
            *cc_call("r2", "Read", {"file_path": "b.py"}, cc_numbered(B_PY)),
            *cc_call("e1", "Edit", {"file_path": "b.py", "old_string": "0.25", "new_string": "0.2"}, "updated"),
            *cc_call("r3", "Read", {"file_path": "a.py"}, cc_numbered(A_PY)),
        ]
    )
    assert [f.path for f in cc().recent_files(only_reads.records)] == ["b.py", "a.py"]


def test_edit_whose_old_string_is_not_found_leaves_the_path_only():
    """Content unknown (the edit cannot be replayed): the reference form, the reason in the notes."""
    p = compact(edit_session(b_old="    return x * TAX_RATE"), ctx_for(summarizer=FakeSummarizer()))
    assert p.notes["reattached_files"] == ["tests/c.py", "src/b.py", "src/a.py"]
    (ref,) = file_segments(p, "src/b.py")
    assert ref.kind == "omitted_marker" and ref.text == cc().FILE_UNKNOWN.format(path="src/b.py")
    assert "RATE = 0.25" not in p.text()
    assert "e6" in p.notes["reattach_unknown"]["src/b.py"] and "not found" in p.notes["reattach_unknown"]["src/b.py"]


def test_write_over_five_thousand_tokens_comes_back_as_its_path():
    big = "\n".join(f"VALUE_{i} = {i * 7}" for i in range(3_000))
    sess = make_session(
        [
            ("user", "generate the table"),
            *cc_call("w1", "Write", {"file_path": "gen/table.py", "content": big}, "File created successfully"),
        ]
    )
    p = compact(sess, ctx_for(summarizer=FakeSummarizer()))
    (ref,) = file_segments(p, "gen/table.py")
    assert ref.kind == "omitted_marker" and ref.text.startswith("[gen/table.py was read before")
    assert "VALUE_17" not in p.text() and p.notes["reattached_files"] == ["gen/table.py"]


def test_a_failed_edit_changes_nothing_and_multiedit_applies_in_order():
    failed = edit_session(
        tail=cc_call(
            "e2", "Edit", {"file_path": "src/a.py", "old_string": "3.14", "new_string": "PI"}, "Error", error=True
        )
    )
    p = compact(failed, ctx_for(summarizer=FakeSummarizer()))
    assert p.notes["reattached_files"][-1] == "src/a.py" and "3.14 * r * r" in p.text()
    multi = edit_session(
        tail=cc_call(
            "m1",
            "MultiEdit",
            {
                "file_path": "src/a.py",
                "edits": [
                    {"old_string": "3.14", "new_string": "PI"},
                    {"old_string": "def area", "new_string": "PI = 3.14159\n\n\ndef area"},
                    {"old_string": "PI", "new_string": "MATH_PI", "replace_all": True},
                ],
            },
            "Applied 3 edits",
        )
    )
    (f,) = [f for f in cc().recent_files(multi.records) if f.path == "src/a.py"]
    # upstream's applyEditToFile: a deletion takes the newline after it; an empty old string fills an empty file
    assert cc().apply_edit("a\nb\nc\n", "b", "") == "a\nc\n" and cc().apply_edit("", "", "new") == "new"
    assert cc().apply_edit("x x", "x", "y") is None and cc().apply_edit("x x", "x", "y", replace_all=True) == "y y"
    # in order: the third edit sees the PI the first two wrote
    assert f.source == "edited" and cc().read_view(f.text).content == (
        'MATH_PI = 3.14159\n\n\ndef area(r):\n    """Circle area."""\n    return MATH_PI * r * r\n'
    )


@pytest.mark.parametrize(
    ("read", "edit", "path_key", "old_key", "new_key", "numbered"),
    [
        ("Read", "Edit", "file_path", "old_string", "new_string", "arrow"),  # Claude Code
        ("read_file", "edit_file", "path", "old_string", "new_string", "tab"),  # the synthetic chains (cat -n)
        ("read", "edit", "path", "oldText", "newText", ""),  # pi
        ("read", "edit", "filePath", "oldString", "newString", ""),  # OpenCode
    ],
)
def test_edits_replay_for_each_agents_tool_dialect(read, edit, path_key, old_key, new_key, numbered):
    import json

    shown = {
        "arrow": cc_numbered(B_PY),
        "tab": "\n".join(f"{i + 1:>6}\t{ln}" for i, ln in enumerate(B_PY.split("\n"))),
        "": B_PY,
    }[numbered]
    ra, ea = {path_key: "b.py"}, {path_key: "b.py", old_key: "RATE = 0.25", new_key: "RATE = 0.2"}
    sess = make_session(
        [
            ("tool_call", f"{read} {json.dumps(ra)}", {"tool": read, "target": "b.py", "call_id": "r"}),
            ("tool_output", shown, {"tool": read, "target": "b.py", "call_id": "r"}),
            ("tool_call", f"{edit} {json.dumps(ea)}", {"tool": edit, "target": "b.py", "call_id": "e"}),
            ("tool_output", "ok", {"tool": edit, "target": "b.py", "call_id": "e"}),
        ]
    )
    (f,) = cc().recent_files(sess.records)
    assert f.source == "edited" and cc().read_view(f.text).content == B_PY.replace("0.25", "0.2")
    if numbered:
        assert f.text.splitlines()[0] == shown.splitlines()[0].replace("0.25", "0.2")


def test_an_edit_before_any_read_and_a_notebook_edit_leave_the_path_only():
    sess = make_session(
        [
            ("tool_call", 'edit {"path": "x.py", "oldText": "a", "newText": "b"}', {"tool": "edit", "target": "x.py"}),
            *cc_call("n1", "NotebookEdit", {"notebook_path": "nb.ipynb", "new_source": "x = 1"}, "Updated cell"),
        ]
    )
    files = cc().recent_files(sess.records)
    assert [(f.path, f.text) for f in files] == [("nb.ipynb", None), ("x.py", None)]
    assert "not in the log" in files[1].reason and "cannot be rebuilt" in files[0].reason


def test_a_ranged_read_or_an_unchanged_stub_keeps_the_whole_file_known():
    """Upstream re-reads the whole file: a later ranged Read, or Read's 'File unchanged' stub
    (FileReadTool/prompt.ts FILE_UNCHANGED_STUB), does not replace the whole content the log holds."""
    stub = "File unchanged since last read. The content from the earlier Read tool_result is still current."
    sess = make_session(
        [
            *cc_call("r1", "Read", {"file_path": "b.py"}, cc_numbered(B_PY)),
            *cc_call("e1", "Edit", {"file_path": "b.py", "old_string": "0.25", "new_string": "0.2"}, "updated"),
            *cc_call(
                "r2", "Read", {"file_path": "b.py", "offset": 4, "limit": 2}, "     4→def tax(x):\n     5→    ret"
            ),
            *cc_call("r3", "Read", {"file_path": "b.py"}, stub),
        ]
    )
    (f,) = cc().recent_files(sess.records)
    assert f.source == "edited" and f.text == cc_numbered(B_PY.replace("0.25", "0.2"))


def test_codex_patch_adds_updates_and_deletes():
    """A Codex apply_patch: an added file's text is known; an updated one's is not; a deleted one is gone."""
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: docs/new.md",
            "+# New",
            "+body line",
            "*** Update File: src/old.py",
            "@@ def f():",
            "-    return 1",
            "+    return 2",
            "*** Delete File: src/gone.py",
            "*** End Patch",
        ]
    )
    sess = make_session(
        [
            ("tool_call", f"apply_patch {patch}", {"tool": "apply_patch", "call_id": "p1"}),
            ("tool_output", "Success.", {"tool": "apply_patch", "call_id": "p1"}),
        ]
    )
    files = {f.path: f for f in cc().recent_files(sess.records)}
    assert files["docs/new.md"].text == "# New\nbody line\n" and files["src/old.py"].text is None
    assert files["src/gone.py"].source == "deleted"
    p = compact(sess, ctx_for(summarizer=FakeSummarizer()))
    assert "src/gone.py" not in p.notes["reattached_files"] and "deleted" in p.notes["reattach_unknown"]["src/gone.py"]
    assert "body line" in p.text()


def test_read_view_takes_line_numbers_off_and_puts_them_back():
    """utils/file.ts addLineNumbers / stripLineNumberPrefix: `N→` (padded to 6) or `N\\t`; a reminder may follow."""
    v = cc().read_view(cc_numbered(B_PY))
    assert v.content == B_PY and (v.start, v.sep, v.width) == (1, "→", 6)
    assert v.tail.startswith("\n\n<system-reminder>") and v.render(v.content) == cc_numbered(B_PY)
    ranged = cc().read_view("    41\tx = 1\n    42\ty = 2")
    assert ranged.content == "x = 1\ny = 2" and ranged.start == 41 and ranged.render("z") == "    41\tz"
    compact_prefix = cc().read_view("7\tone\n8\ttwo")
    assert compact_prefix.render("a\nb") == "7\ta\n8\tb"
    for raw in ("1\tone\n3\tthree", "     1→a\nprose after the listing", "no numbers at all"):
        assert cc().read_view(raw).content == raw and cc().read_view(raw).sep == ""
    # whatever is parsed, an unchanged content is shown back exactly as it was read
    for out in (cc_numbered(B_PY), "Here's the result of running `cat -n` on b.py:\n     1\tRATE = 1\n", "x\n2\ty"):
        v = cc().read_view(out)
        assert v.render(v.content) == out


def test_public_claude_code_transcript_reattaches_its_edited_files():
    """A real Claude Code session (tests/fixtures/public/claude-code): Read, Edit, Read, Edit. The rebuilt
    files equal what upstream recorded on disk (each Edit's toolUseResult: originalFile with the edit
    applied), numbered as Read shows them; the last edited first."""
    import json

    from compaction_lab.ingest import load_sessions

    path = REPO_ROOT / "tests" / "fixtures" / "public" / "claude-code" / "coverage-test-fix.jsonl"
    (sess,) = load_sessions(path)
    on_disk = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        res = json.loads(line).get("toolUseResult")
        if isinstance(res, dict) and "originalFile" in res:
            on_disk[res["filePath"]] = res["originalFile"].replace(res["oldString"], res["newString"], 1)
    p = compact(sess, ctx_for(summarizer=FakeSummarizer()))
    root = "/tmp/tmpw6sk2trg/"
    order = [root + ".gitignore", root + "tests/test_math_utils.py", root + "src/math_utils.py"]
    assert p.notes["reattached_files"] == order and p.notes["reattach_unknown"] == {}
    for f in order:
        (head, body) = file_segments(p, f)
        assert cc().read_view(body.text).content == on_disk[f] and body.text.startswith("     1→")
    assert "multiply_numbers" in file_segments(p, root + "src/math_utils.py")[1].text
