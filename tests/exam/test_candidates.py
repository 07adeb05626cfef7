"""exam.questions.probes.candidates: the extraction rules and the values they find in one record."""

from __future__ import annotations

import pytest

from compaction_lab.core.session import Record
from compaction_lab.exam.questions import probes
from compaction_lab.exam.questions.probes import extract

# --------------------------------------------------------------------------- helpers


def _rec(kind: str, text: str, **extra) -> Record:
    return Record(session_id="s", entry_id="e0", block_index=0, source_order=0, kind=kind, text=text, **extra)


def _found(record: Record) -> set[tuple[str, str]]:
    return {(c.category, c.value) for c in extract(record)}


def _values(record: Record) -> set[str]:
    return {c.value for c in extract(record)}


# --------------------------------------------------------------------------- extraction rules


def test_identifier_rules():
    out = _found(
        _rec(
            "tool_output",
            "\n".join(
                [
                    "order ORD-58213 created, refund RFD-39055-FU pending",
                    "request 3f2b9c4e-8a1d-4e6f-9b2c-7d5e4f3a2b1c accepted",
                    "[main 6322cf4] Add hello function",
                    "key ord_8f3k2q9x saved; build id: bld-20240308-d2s27z",
                    "scratch dir tmpw6sk2trg ready",
                ]
            ),
            tool="bash",
            target="./scripts/run.sh",
        )
    )
    assert ("identifier", "ORD-58213") in out
    assert ("identifier", "RFD-39055-FU") in out
    assert ("identifier", "3f2b9c4e-8a1d-4e6f-9b2c-7d5e4f3a2b1c") in out
    assert ("identifier", "6322cf4") in out
    assert ("identifier", "ord_8f3k2q9x") in out
    assert ("identifier", "bld-20240308-d2s27z") in out
    assert ("identifier", "tmpw6sk2trg") in out


def test_identifier_rules_skip_standards_dates_and_words():
    vals = _values(
        _rec(
            "assistant",
            "Files are UTF-8 and hashed with SHA-256; the run on 2024-03-20T23:55 used "
            "claude-sonnet-4-5 on x86_64 with test_math_utils and cpython-312.",
        )
    )
    assert not vals & {
        "UTF-8",
        "SHA-256",
        "2024-03-20T23",
        "claude-sonnet-4-5",
        "x86_64",
        "test_math_utils",
        "cpython-312",
    }


def test_ids_in_api_outputs_are_tool_returned_ids():
    text = '{\n  "id": "ORD-58213",\n  "status": "pending"\n}'
    api = _rec("tool_output", text, tool="http_request", target="http://localhost:8000/v1/orders")
    posted = _rec("tool_output", text, tool="create_order", target="POST /v1/orders")
    cat = _rec("tool_output", text, tool="bash", target="cat fixtures/order.json")
    assert ("tool_returned_id", "ORD-58213") in _found(api)
    assert ("tool_returned_id", "ORD-58213") in _found(posted)
    assert ("identifier", "ORD-58213") in _found(cat)


def test_path_rules():
    out = _found(
        _rec(
            "assistant",
            "I edited /srv/app/config/settings.yaml, ran ./scripts/deploy.sh and "
            "app/refunds/service.py:45 still calls hello.sh; see ~/notes/todo.md.",
        )
    )
    assert {
        ("path", "/srv/app/config/settings.yaml"),
        ("path", "./scripts/deploy.sh"),
        ("path", "app/refunds/service.py"),
        ("path", "hello.sh"),
        ("path", "~/notes/todo.md"),
    } <= out


def test_slash_lists_are_not_paths():
    rec = _rec(
        "assistant",
        "The Model/thinking/theme selectors (showError/showWarning/showNewVersionNotification) in the old "
        "main.ts/tui-renderer.ts stay; src/modes/interactive/ holds them, packages/coding-agent/src too, "
        "and ../lib/x and src/app/main.py.",
    )
    vals = _values(rec)
    assert not vals & {
        "Model/thinking/theme",
        "showError/showWarning/showNewVersionNotification",
        "main.ts/tui-renderer.ts",
    }
    assert {"src/modes/interactive/", "packages/coding-agent/src", "src/app/main.py", "../lib/x"} <= vals
    rejected = {(x.reason, x.cand.value) for x in probes.scan(rec).rejected}
    assert ("slash-list", "Model/thinking/theme") in rejected
    assert ("slash-list", "main.ts/tui-renderer.ts") in rejected
    assert probes.slash_list("a/b") and not probes.slash_list("/a/b") and not probes.slash_list("a/b.py")


def test_a_mention_prefix_is_not_part_of_a_path():
    vals = _values(
        _rec("user", "alright, read @packages/coding-agent/src/main.ts and @README.md; mail noreply@anthropic.com")
    )
    assert {"packages/coding-agent/src/main.ts", "README.md"} <= vals
    assert not any(v.startswith("@") for v in vals) and not any("anthropic" in v for v in vals)


def test_a_unit_must_be_on_the_numbers_line():
    vals = _values(_rec("tool_output", "took 184\nms to start; p95 184.37 ms", tool="bash", target="x"))
    assert "184.37 ms" in vals and not any("\n" in v for v in vals)


def test_path_rules_skip_urls_and_words_with_slashes():
    vals = _values(
        _rec(
            "assistant", "GET http://localhost:8000/v1/refunds and/or text/html at 120 req/s; Node.js ships fs.watch()."
        )
    )
    assert not any("/v1/refunds" in v or v in ("and/or", "text/html", "Node.js", "v1/refunds") for v in vals)


def test_number_rules():
    out = _found(
        _rec(
            "assistant",
            "The p95 was 184.37 ms and the dump is 3.2 GB; error rate 0.0421. "
            "Serve on port 7412, the API is on localhost:8000. The table holds 1,792,546 rows.",
        )
    )
    assert {
        ("number", "184.37 ms"),
        ("number", "3.2 GB"),
        ("number", "0.0421"),
        ("number", "7412"),
        ("number", "8000"),
        ("number", "1,792,546 rows"),
    } <= out
    assert ("number", "546 rows") not in out


def test_number_rules_skip_versions_and_trivial_values():
    vals = _values(
        _rec(
            "tool_output",
            "pi-coding-agent@0.7.29 built in 5s, 100% done, 0.00s idle, ip 127.0.0.1",
            tool="bash",
            target="npm run build",
        )
    )
    assert not vals & {"0.7.29", "7.29", "0.7", "5s", "100%", "0.00s", "127.0.0.1", "0.0"}


def test_error_rules():
    out = _found(
        _rec(
            "tool_output",
            "\n".join(
                [
                    "Traceback (most recent call last):",
                    '  File "app/x.py", line 3, in <module>',
                    "ValueError: invalid literal",
                    "FAILED tests/test_orders.py::test_refund_rounding - AssertionError: assert 3 == 4",
                    "error[E0308]: mismatched types",
                    "src/a.ts(3,8): error TS2345: Argument of type 'string' is not assignable",
                    "Error: connect ECONNREFUSED",
                    "SyntaxError: invalid syntax\r",
                ]
            ),
            tool="bash",
            target="make check",
        )
    )
    errors = {v for cat, v in out if cat == "error_string"}
    assert errors == {
        "ValueError: invalid literal",
        "tests/test_orders.py::test_refund_rounding",
        "error[E0308]: mismatched types",
        "Error: connect ECONNREFUSED",
        "SyntaxError: invalid syntax",  # a CRLF line's carriage return is not part of it
    }
    # four words or more is a sentence, not a value a reader could repeat exactly
    assert not errors & {"AssertionError: assert 3 == 4", "error TS2345: Argument of type 'string' is not assignable"}
    assert ("path", "src/a.ts") in out


def test_long_error_lines_leave_their_inner_values_to_the_other_rules():
    # the exception line is rejected as a phrase; it claims no span, so its id, path and quoted value are found
    rec = _rec(
        "tool_output",
        "TypeError: Cannot read properties of undefined (reading 'refundTotal') at src/orders/client.ts:45 ORD-58213",
        tool="bash",
        target="npm test",
    )
    out = _found(rec)
    assert {("identifier", "ORD-58213"), ("path", "src/orders/client.ts"), ("quoted", "refundTotal")} <= out
    assert not any(cat == "error_string" for cat, _ in out)
    rejected = {(x.reason, x.cand.value) for x in probes.scan(rec).rejected}
    assert ("phrase", rec.text) in rejected


def test_error_rules_need_a_message():
    vals = _values(_rec("assistant", "Error handling is fine here.\nValueError was expected."))
    assert not any("Error" in v for v in vals)


def test_quoted_rules():
    out = _found(
        _rec(
            "assistant",
            'I picked the `LRU cache` over "the TTL one"; the key is \u201cinvoice totals\u201d '
            "and the flag 'Dry Run Mode' stays.",
        )
    )
    assert {("quoted", "LRU cache"), ("quoted", "the TTL one"), ("quoted", "Dry Run Mode")} <= out
    # words of lowercase letters only are a phrase, not a value: "invoice totals" was one once
    assert ("quoted", "invoice totals") not in out


def test_quoted_phrases_are_rejected_as_phrases():
    rec = _rec(
        "assistant",
        'The docs say "how to show it" and `flatten one level deep`; the mode is `Plan Mode` and the error '
        "`No assistant message to copy`.",
    )
    assert _values(rec) == {"Plan Mode"}
    reasons = {x.cand.value: x.reason for x in probes.scan(rec).rejected}
    assert reasons == {
        "how to show it": "phrase",
        "flatten one level deep": "phrase",
        "No assistant message to copy": "phrase",
    }


def test_backticks_escaped_inside_a_template_literal_are_not_a_value():
    rec = _rec("tool_output", "let text = `Ran \\`${msg.command}\\`\\n`;", tool="read", target="x.ts")
    assert not any(v.endswith("\\") for v in _values(rec))


def test_quoted_rules_skip_json_keys_lone_words_and_tool_calls():
    out = _values(_rec("tool_output", '{"status_code": "pending", "note": "Two Words Here"}', tool="bash", target="x"))
    assert "status_code" not in out and "pending" not in out and "Two Words Here" in out
    assert _values(_rec("tool_call", 'bash {"command": "echo Two Words Here"}', tool="bash", target="echo")) == set()
    assert "I'll add it" not in _values(_rec("assistant", "I'll add it, don't worry about it."))


def test_a_later_rule_never_matches_inside_an_earlier_claim():
    # the path claims "dist/ORD-58213.json"; its id part is not mined a second time from that span
    vals = _values(_rec("tool_output", "wrote dist/ORD-58213.json", tool="bash", target="x"))
    assert vals == {"dist/ORD-58213.json"}


def test_pointers_follow_the_record_kind_and_unmined_records_give_nothing():
    assert {c.pointer for c in extract(_rec("reasoning", "the id is ORD-58213"))} == {"assistant"}
    assert {c.pointer for c in extract(_rec("tool_call", "get ORD-58213", tool="get", target="ORD-58213"))} == {"tool"}
    assert extract(_rec("user", "AGENTS.md says ORD-58213", injected=True)) == []
    # a harness's injected demonstration is not mined whatever the role it plays
    assert extract(_rec("assistant", "created ORD-58213", injected=True)) == []
    assert extract(_rec("tool_output", "created ORD-58213", injected=True, tool="bash")) == []
    assert extract(_rec("system", "ORD-58213")) == []
    assert extract(_rec("meta", "ORD-58213")) == []


@pytest.mark.parametrize(
    "value,guessable",
    [("abc", True), ("404", True), ("true", True), ("Hello", True), ("7412", False), ("ORD-58213", False)],
)
def test_guessable(value, guessable):
    assert probes.guessable(value) is guessable


def test_masked_spans_are_rejected_as_template_and_claim_nothing():
    text = "Run `python <script_name>.py` then ORD-58213.\nMy id: ORD-77120"
    rec = _rec("user", text)
    cut = text.index("\n")
    sc = probes.scan(rec, [(0, cut)])
    assert {c.value for c in sc.found} == {"ORD-77120"}
    assert {(x.reason, x.cand.value) for x in sc.rejected} == {
        ("template", "python <script_name>.py"),
        ("template", "ORD-58213"),
    }
    assert {c.value for c in extract(rec)} == {"python <script_name>.py", "ORD-58213", "ORD-77120"}


def test_each_value_is_placed_on_its_own_line_with_its_words_and_a_rescan_is_the_same():
    from compaction_lab.exam.questions.probes import candidates

    text = (
        "build 4f3a9c2 finished\n\nwrote /srv/app/config/settings.yaml (2 KB)\n"
        + "x" * 300
        + "\nrequest id req_8f2k1m9q7z returned 503 after 1.25 s\nlisted /srv/app/logs/error.log"
    )
    rec = _rec("tool_output", text, tool="bash")
    found = candidates.scan(rec).found
    assert len(found) >= 3
    for c in found:
        assert c.line_no == text.count("\n", 0, c.start) + 1
        # the line lookup in the record's newline offsets says what a search of the text says
        assert (c.before, c.after, c.line_no) == candidates._context(rec, c.start, c.end)
    assert candidates.scan(rec) == candidates._scan(rec, ())  # the kept scan is the scan
