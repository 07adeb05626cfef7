"""Rediscovery's classes and money: state checks apart from rediscoveries, priced from the log or the model's family."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from compaction_lab import ingest
from compaction_lab.core.session import Record
from compaction_lab.core.tokens import counter
from compaction_lab.endpoints.prices import load_price_table
from compaction_lab.exam.actions import rediscovery as rd
from tests.helpers import PUBLIC_FIXTURES, make_session

PI_PUBLIC = PUBLIC_FIXTURES / "pi" / "before-compaction.jsonl"

#: Per-1M rates the hand-built logs' costs are computed with: cache miss, cache read, cache write, output.
RATES = (3.0, 0.3, 3.75, 15.0)


def _usage(n: int, linear: bool = True) -> dict:
    """The n-th request's usage: token counts that vary independently; cost from `RATES` (or a flat fee)."""
    tokens = {"input": 100 + 37 * n, "cacheRead": 1000 * n, "cacheWrite": 50 * (n % 3), "output": 20 + n * n}
    miss, read, write, out = (tokens[k] for k in ("input", "cacheRead", "cacheWrite", "output"))
    cost = (RATES[0] * miss + RATES[1] * read + RATES[2] * write + RATES[3] * out) / 1e6 if linear else 0.01
    return {**tokens, "totalTokens": sum(tokens.values()), "cost": {"total": cost}}


def _pi_log(path, entries, *, model=None, usage=None, session_id="pi-cls", cwd="/w"):
    """Write a pi session from short specs and import it; `usage(n)` gives the n-th call's usage, if any."""
    lines = [{"type": "session", "id": session_id, "timestamp": "2025-01-01T10:00:00.000Z", "cwd": cwd}]
    calls = 0
    for n, spec in enumerate(entries, start=1):
        eid, ts = f"e{n:02d}", f"2025-01-01T10:{n:02d}:00.000Z"
        if spec[0] == "compaction":
            _, summary, first_kept = spec
            lines.append(
                {"type": "compaction", "id": eid, "timestamp": ts, "summary": summary, "firstKeptEntryId": first_kept}
            )
            continue
        if spec[0] == "call":
            _, cid, name, args = spec
            msg = {"role": "assistant", "content": [{"type": "toolCall", "id": cid, "name": name, "arguments": args}]}
            if model:
                msg["model"] = model
            if usage is not None:
                msg["usage"] = usage(calls)
            calls += 1
        else:
            _, cid, name, text = spec
            msg = {
                "role": "toolResult",
                "toolCallId": cid,
                "toolName": name,
                "content": [{"type": "text", "text": text}],
            }
        lines.append(
            {"type": "message", "id": eid, "parentId": None, "timestamp": ts, "message": {**msg, "timestamp": 1}}
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (session,) = list(ingest.load_sessions(path))
    return session


LOG = "commit 1a2b3c fix parser\ncommit 4d5e6f add tests\n"
A_TEXT = "def a():\n    return 'alpha-7731'\n"
B_TEXT = "def b():\n    return 'beta-2290'\n"

#: Before the compaction: git log, a.py and b.py read; b.py's read is kept (first kept entry e07).
#: After it: git log again, a.py again (dropped: a rediscovery), b.py again (held), a.py edited twice alike.
ENTRIES = [
    ("call", "c1", "bash", {"command": "cd /w && git log --oneline -5"}),  # e01
    ("result", "c1", "bash", LOG),  # e02: dropped
    ("call", "c2", "read", {"path": "/w/src/a.py"}),  # e03
    ("result", "c2", "read", A_TEXT),  # e04: dropped
    ("call", "c3", "edit", {"path": "/w/src/a.py", "old": "7731", "new": "7732"}),  # e05
    ("result", "c3", "edit", "ok"),  # e06: dropped
    ("call", "c4", "read", {"path": "/w/src/b.py"}),  # e07: first kept entry
    ("result", "c4", "read", B_TEXT),  # e08: kept
    ("compaction", "We looked at the history and the sources.", "e07"),  # e09
    ("call", "c5", "bash", {"command": "cd /w && git log --oneline -5"}),  # e10: state check
    ("result", "c5", "bash", LOG),  # e11
    ("call", "c6", "read", {"path": "/w/src/a.py"}),  # e12: rediscovery
    ("result", "c6", "read", A_TEXT),  # e13
    ("call", "c7", "read", {"path": "/w/src/b.py"}),  # e14: held
    ("result", "c7", "read", B_TEXT),  # e15
    ("call", "c8", "edit", {"path": "/w/src/a.py", "old": "7731", "new": "7732"}),  # e16: other
    ("result", "c8", "edit", "no match"),  # e17
]


def _by_entry(table):
    return {e: row for e, (_, row) in zip(table["repeat_entry_id"], table.iterrows(), strict=True)}


# --------------------------------------------------------------------------- classes


def test_a_repeated_git_log_is_a_state_check_and_a_dropped_re_read_a_rediscovery(tmp_path):
    s = _pi_log(tmp_path / "classes.jsonl", ENTRIES)
    result = rd.rediscovery([s])
    rows = _by_entry(result.repeats)
    assert {e: r["call_class"] for e, r in rows.items()} == {
        "e10": rd.STATE_CHECK,  # its earlier output was dropped, yet re-running git log is no loss
        "e12": rd.REDISCOVERY,
        "e14": rd.HELD,
        "e16": rd.OTHER,
    }
    assert not rows["e10"]["earlier_output_kept"] and rows["e14"]["earlier_output_kept"]
    (comp,) = result.compactions.to_dict("records")
    assert (comp["repeats"], comp["repeats_kept"], comp["state_checks"], comp["repeats_other"]) == (1, 1, 1, 1)
    cnt = counter("cl100k_base")
    assert comp["repeat_output_tokens"] == cnt.count(A_TEXT)  # the rediscovery only
    assert comp["state_check_output_tokens"] == cnt.count(LOG)
    assert list(result.repeats.columns) == rd.REDISCOVERY_COLUMNS
    assert list(result.compactions.columns) == rd.COMPACTION_COLUMNS


def _call(tool, args):
    text = f"{tool} {json.dumps(args)}"
    return Record("s", "e1", 0, 0, "tool_call", text, tool=tool)


@pytest.mark.parametrize(
    ("tool", "args", "head", "kind"),
    [
        ("bash", {"command": "cd /repo && npm run check 2>&1 | tail -30"}, "npm run check 2>&1", rd.STATE_CHECK),
        ("Bash", {"command": "FOO=1 uv run pytest -q tests/a.py"}, "pytest -q tests/a.py", rd.STATE_CHECK),
        ("bash", {"command": ".venv/bin/python -m mypy lib"}, "mypy lib", rd.STATE_CHECK),
        ("shell", {"command": ["bash", "-lc", "git -C /r status --short"]}, "git -C /r status --short", rd.STATE_CHECK),
        ("exec_command", {"cmd": "cargo clippy --all"}, "cargo clippy --all", rd.STATE_CHECK),
        ("bash", {"command": "ls -la src"}, "ls -la src", rd.STATE_CHECK),
        ("bash", {"command": "cd /r; grep -n parse src/a.py"}, "grep -n parse src/a.py", "lookup"),
        ("bash", {"command": "sed -n 1,40p a.py"}, "sed -n 1,40p a.py", "lookup"),
        ("bash", {"command": "sed -i s/a/b/ a.py"}, "sed -i s/a/b/ a.py", rd.OTHER),
        ("bash", {"command": "git commit -m x"}, "git commit -m x", rd.OTHER),
        ("Read", {"file_path": "/r/a.py"}, "read", "lookup"),
        ("Glob", {"pattern": "**/*.py"}, "glob", "lookup"),
        ("Edit", {"file_path": "/r/a.py", "old_string": "a", "new_string": "b"}, "edit", rd.OTHER),
    ],
)
def test_call_rules_read_the_command_head(tool, args, head, kind):
    call = _call(tool, args)
    assert rd.call_head(call) == head
    assert rd.call_kind(call) == kind


# --------------------------------------------------------------------------- money


def test_a_log_with_costs_is_priced_at_its_own_rate_in_its_currency(tmp_path):
    s = _pi_log(tmp_path / "costed.jsonl", ENTRIES, model="claude-sonnet-4-5", usage=_usage)
    result = rd.rediscovery([s], price_table="deepseek-flash")
    row = _by_entry(result.repeats)["e12"]
    assert row["currency"] == "USD" and pd.isna(row["price_table"])
    assert row["priced_as"].startswith("uncached input, once, at the log's own rate: 3 USD per 1M input tokens")
    assert row["repeat_cost"] == pytest.approx(row["repeat_output_tokens"] * RATES[0] / 1e6)
    (comp,) = result.compactions.to_dict("records")
    assert comp["repeat_cost"] == pytest.approx(comp["repeat_output_tokens"] * RATES[0] / 1e6)
    assert comp["state_check_cost"] == pytest.approx(comp["state_check_output_tokens"] * RATES[0] / 1e6)


def test_costs_that_are_no_price_list_give_the_logs_average_cost_per_token(tmp_path):
    s = _pi_log(tmp_path / "flat.jsonl", ENTRIES, model="claude-sonnet-4-5", usage=lambda n: _usage(n, linear=False))
    usage = s.metadata["usage"]
    total = sum(u["cost"] for u in usage)
    tokens = sum(u["input_tokens"] + u["cached_tokens"] + u["cache_write_tokens"] + u["output_tokens"] for u in usage)
    row = _by_entry(rd.rediscovery_table([s]))["e12"]
    assert row["currency"] == "USD" and row["priced_as"].startswith("once, at the log's average cost per token")
    assert row["repeat_cost"] == pytest.approx(row["repeat_output_tokens"] * total / tokens)


def test_a_claude_log_without_cost_is_never_priced_by_a_deepseek_table(tmp_path):
    s = _pi_log(tmp_path / "claude.jsonl", ENTRIES, model="claude-opus-4-5")
    row = _by_entry(rd.rediscovery_table([s], price_table="deepseek-flash"))["e12"]
    anthropic = load_price_table("claude-sonnet-4-6")
    # the family's table (Anthropic), named as a stand-in for the log's model; never DeepSeek's CNY prices
    assert (row["price_table"], row["currency"]) == ("claude-sonnet-4-6", "USD")
    assert "claude-sonnet-4-6 prices stand in for claude-opus-4-5" in row["priced_as"]
    assert row["repeat_cost"] == pytest.approx(row["repeat_output_tokens"] * anthropic.input / 1e6)


def test_no_cost_and_no_table_of_the_family_is_not_priced(tmp_path):
    for model, what in (("gemini-2.5-pro", "Google (gemini-2.5-pro)"), (None, "model not in log")):
        s = _pi_log(tmp_path / f"{model}.jsonl", ENTRIES, model=model)
        result = rd.rediscovery([s], price_table="deepseek-flash")
        t, comp = result.repeats, result.compactions
        assert t["repeat_cost"].isna().all() and comp["repeat_cost"].isna().all()
        assert comp["state_check_cost"].isna().all()
        assert t["currency"].isna().all() and t["price_table"].isna().all()
        assert set(t["priced_as"]) == {f"not priced: no recorded cost and no price table for {what}"}
        assert (t["repeat_output_tokens"] > 0).all()


def test_the_runs_table_prices_a_session_of_its_family(tmp_path):
    s = _pi_log(tmp_path / "deepseek.jsonl", ENTRIES, model="deepseek-chat")
    table = load_price_table("deepseek-v4-pro")
    row = _by_entry(rd.rediscovery_table([s], price_table="deepseek-v4-pro"))["e12"]
    assert (row["price_table"], row["currency"]) == ("deepseek-v4-pro", "CNY")
    assert row["repeat_cost"] == pytest.approx(row["repeat_output_tokens"] * table.input / 1e6)


# --------------------------------------------------------------------------- the public pi session, end to end


def _raw_input_rate(path):
    """USD per uncached input token, from the raw file alone: pi's own cost.input over usage.input."""
    cost = tokens = 0.0
    for line in path.read_text(encoding="utf-8").splitlines():
        usage = (json.loads(line).get("message") or {}).get("usage") if line.strip() else None
        if usage and usage.get("input"):
            cost, tokens = cost + usage["cost"]["input"], tokens + usage["input"]
    return cost / tokens


def test_public_pi_session_splits_its_five_repeats_and_prices_them_with_its_own_cost():
    (session,) = list(ingest.load_sessions(PI_PUBLIC))
    result = rd.rediscovery([session], price_table="deepseek-flash")
    t, comp = result.repeats, result.compactions
    # 5 exact repeats: two re-reads whose output was dropped; `npm run check` twice and `git log` are state checks
    assert list(zip(t["tool"], t["call_class"], strict=True)) == [
        ("read", rd.REDISCOVERY),
        ("read", rd.REDISCOVERY),
        ("bash", rd.STATE_CHECK),
        ("bash", rd.STATE_CHECK),
        ("bash", rd.STATE_CHECK),
    ]
    assert not t[t["call_class"] == rd.REDISCOVERY]["earlier_output_kept"].any()
    assert comp["repeats"].tolist() == [2, 0] and comp["state_checks"].tolist() == [2, 1]
    assert comp["repeats_kept"].tolist() == [0, 0] and comp["repeats_other"].tolist() == [0, 0]
    # priced at the log's own rate (claude-opus-4-5: 5 USD per 1M uncached input), not DeepSeek's CNY
    rate = _raw_input_rate(PI_PUBLIC)
    assert rate == pytest.approx(5e-6)
    assert set(t["currency"]) == {"USD"} and t["price_table"].isna().all()
    assert all(p.startswith("uncached input, once, at the log's own rate: 5 USD") for p in t["priced_as"])
    for tokens, cost in zip(t["repeat_output_tokens"], t["repeat_cost"], strict=True):
        assert cost == pytest.approx(tokens * rate)
    found = t[t["call_class"] == rd.REDISCOVERY].groupby("compaction")["repeat_output_tokens"].sum()
    assert comp["repeat_output_tokens"].tolist() == [found.get(0, 0), found.get(1, 0)]
    assert comp["repeat_cost"].tolist() == pytest.approx([x * rate for x in comp["repeat_output_tokens"]])
    checks = t[t["call_class"] == rd.STATE_CHECK].groupby("compaction")["repeat_output_tokens"].sum()
    assert comp["state_check_output_tokens"].tolist() == checks.tolist()


def _with_usage(source_format, usage, **metadata):
    s = make_session([("user", "hi")], session_id="u", source_format=source_format)
    return dataclasses.replace(s, metadata={"usage": usage, **metadata})


def test_opencode_reasoning_tokens_are_billed_as_output_in_the_fit():
    rows = []
    for n in range(10):
        miss, read, write, out, reasoning = 100 + 37 * n, 1000 * n, 50 * (n % 3), 20 + n * n, 40 * (n % 4) ** 2
        cost = (RATES[0] * miss + RATES[1] * read + RATES[2] * write + RATES[3] * (out + reasoning)) / 1e6
        rows.append(
            {
                "entry_id": f"m{n}",
                "model": "claude-sonnet-4-5",
                "input_tokens": miss,
                "cached_tokens": read,
                "cache_write_tokens": write,
                "output_tokens": out,
                "reasoning_tokens": reasoning,
                "cost": cost,
            }
        )
    pricing = rd.log_pricing(_with_usage("opencode", rows), "claude-sonnet-4-5")
    assert pricing is not None and pricing.currency == "USD"
    assert pricing.per_token == pytest.approx(RATES[0] / 1e6)
    assert "OpenCode" in pricing.priced_as


def test_claude_codes_session_total_gives_the_average_and_a_zero_cost_is_no_cost():
    rows = [{"entry_id": "a", "input_tokens": 10, "cached_tokens": 900, "cache_write_tokens": 0, "output_tokens": 90}]
    pricing = rd.log_pricing(_with_usage("claude_code", rows, total_cost_usd=0.5), None)
    assert pricing is not None and pricing.per_token == pytest.approx(0.5 / 1000)
    assert "total_cost_usd" in pricing.priced_as
    assert rd.log_pricing(_with_usage("claude_code", rows, total_cost_usd=0.0), None) is None
    assert rd.log_pricing(_with_usage("codex", [{**rows[0], "cost": 1.0}]), None) is None  # no known currency
