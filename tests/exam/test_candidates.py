"""exam.probes.candidates: the extraction rules and the values they find in one record."""

from __future__ import annotations

import pytest

from compaction_lab.core.session import Record
from compaction_lab.exam import probes
from compaction_lab.exam.probes import extract

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
                    "ValueError: invalid literal for int() with base 10: 'abc'",
                    "FAILED tests/test_orders.py::test_refund_rounding - AssertionError: assert 3 == 4",
                    "error[E0308]: mismatched types",
                    "src/a.ts(3,8): error TS2345: Argument of type 'string' is not assignable",
                    "Error: connect ECONNREFUSED",
                ]
            ),
            tool="bash",
            target="make check",
        )
    )
    errors = {v for cat, v in out if cat == "error_string"}
    assert {
        "ValueError: invalid literal for int() with base 10: 'abc'",
        "tests/test_orders.py::test_refund_rounding",
        "AssertionError: assert 3 == 4",
        "error[E0308]: mismatched types",
        "error TS2345: Argument of type 'string' is not assignable",
        "Error: connect ECONNREFUSED",
    } <= errors


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
    assert {
        ("quoted", "LRU cache"),
        ("quoted", "the TTL one"),
        ("quoted", "invoice totals"),
        ("quoted", "Dry Run Mode"),
    } <= out


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
    assert extract(_rec("system", "ORD-58213")) == []
    assert extract(_rec("meta", "ORD-58213")) == []


@pytest.mark.parametrize(
    "value,guessable",
    [("abc", True), ("404", True), ("true", True), ("Hello", True), ("7412", False), ("ORD-58213", False)],
)
def test_guessable(value, guessable):
    assert probes.guessable(value) is guessable
