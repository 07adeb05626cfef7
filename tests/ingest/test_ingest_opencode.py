"""OpenCode importer: SQLite database, JSON storage tree and export JSON.

The hand-made session under tests/fixtures/opencode/ exists as a storage tree
and as an export; the database is built in each test from the same files (as
OpenCode's migration does: ids move to columns, the rest stays in ``data``),
so all three forms must import to identical records.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from compaction_lab.ingest import files, import_audit
from compaction_lab.ingest.importers import opencode
from tests.helpers import FIXTURES

FIXTURES = FIXTURES
OC = FIXTURES / "opencode"
STORAGE = OC / "storage"
EXPORT = OC / "export.json"
SID = "ses_01JDEMO"


def load(path):
    audit = import_audit.ImportAudit()
    return list(opencode.load(Path(path), audit)), audit


def record_view(session):
    """The records as plain dicts (every field, for cross-form equality)."""
    return [r.to_dict() for r in session.records]


def _storage_objects():
    session = json.loads(next((STORAGE / "session").glob("*/*.json")).read_text())
    messages = [json.loads(p.read_text()) for p in sorted((STORAGE / "message" / SID).glob("*.json"))]
    parts = {
        m["id"]: [json.loads(p.read_text()) for p in sorted((STORAGE / "part" / m["id"]).glob("*.json"))]
        for m in messages
    }
    return session, messages, parts


def build_db(path: Path, extra_rows: bool = True) -> Path:
    """An ``opencode.db`` with the documented 1.x tables, holding the fixture session.

    Rows are inserted in reverse order so the importer's ORDER BY is exercised.
    With `extra_rows`, an empty second session and a message with a malformed
    ``data`` (plus one valid and one malformed part row under it) are added.
    """
    session, messages, parts = _storage_objects()
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT);
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,
            directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
            time_updated INTEGER NOT NULL, data TEXT NOT NULL);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
        """
    )
    t = session["time"]
    conn.execute(
        "INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?)",
        (
            session["id"],
            session["projectID"],
            None,
            "brave-otter",
            session["directory"],
            session["title"],
            session["version"],
            t["created"],
            t["updated"],
        ),
    )
    for m in reversed(messages):
        data = {k: v for k, v in m.items() if k not in ("id", "sessionID")}
        conn.execute(
            "INSERT INTO message VALUES (?,?,?,?,?)",
            (m["id"], SID, m["time"]["created"], m["time"]["created"], json.dumps(data)),
        )
        for p in reversed(parts[m["id"]]):
            pdata = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
            conn.execute(
                "INSERT INTO part VALUES (?,?,?,?,?,?)",
                (p["id"], m["id"], SID, m["time"]["created"], m["time"]["created"], json.dumps(pdata)),
            )
    if extra_rows:
        conn.execute(
            "INSERT INTO session VALUES ('ses_02EMPTY','prj_4f1c',NULL,'calm-fox','/home/dev/x','Empty','0.15.8',?,?)",
            (t["created"] + 10, t["created"] + 10),
        )
        last = messages[-1]["time"]["created"]
        conn.execute(
            "INSERT INTO message VALUES ('msg_01Z', ?, ?, ?, ?)",
            (SID, last + 1, last + 1, '{"role": "assistant", "time": '),
        )
        conn.execute(
            "INSERT INTO part VALUES ('prt_01Z1','msg_01Z',?,?,?,?)",
            (SID, last + 1, last + 1, json.dumps({"type": "text", "text": "lost with its message"})),
        )
        conn.execute("INSERT INTO part VALUES ('prt_01Z2','msg_01Z',?,?,?,?)", (SID, last + 1, last + 1, "{oops"))
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def db(tmp_path):
    return build_db(tmp_path / "opencode.db")


# --------------------------------------------------------------------------- mapping


EXPECTED = [
    # (entry_id, block, kind, tool, target, call_id, is_error, injected)
    ("prt_01A1", 0, "user", None, None, None, False, False),
    ("prt_01A2", 0, "user", None, None, None, False, True),  # synthetic
    ("prt_01A3", 0, "meta", None, None, None, False, False),  # ignored
    ("prt_01A4", 0, "meta", None, None, None, False, False),  # file
    ("prt_01B1", 0, "meta", None, None, None, False, False),  # step-start
    ("prt_01B2", 0, "reasoning", None, None, None, False, False),
    ("prt_01B3", 0, "assistant", None, None, None, False, False),
    ("prt_01B4", 0, "tool_call", "read", "/home/dev/payments/client.py", "toolu_01", False, False),
    ("prt_01B4", 1, "tool_output", "read", "/home/dev/payments/client.py", "toolu_01", False, False),  # pruned
    ("prt_01B5", 0, "tool_call", "bash", "pytest -q", "toolu_02", False, False),
    ("prt_01B5", 1, "tool_output", "bash", "pytest -q", "toolu_02", True, False),  # error
    ("prt_01B6", 0, "meta", None, None, None, False, False),  # step-finish
    ("prt_01C1", 0, "tool_call", "edit", "/home/dev/payments/client.py", "call_03", False, False),  # pending
    (
        "prt_01C2",
        0,
        "tool_call",
        "bash",
        "pip install respx && pytest -q tests/test_client.py",
        "call_04",
        False,
        False,
    ),
    (
        "prt_01C2",
        1,
        "tool_output",
        "bash",
        "pip install respx && pytest -q tests/test_client.py",
        "call_04",
        False,
        False,
    ),
    ("prt_01C3", 0, "meta", None, None, None, False, False),  # patch
    ("prt_01C4", 0, "meta", None, None, None, False, False),
    ("prt_01D1", 0, "meta", None, None, None, False, False),  # compaction
    ("prt_01E1", 0, "summary", None, None, None, False, False),
    ("prt_01E2", 0, "meta", None, None, None, False, False),
    ("prt_01F1", 0, "user", None, None, None, False, False),
    ("prt_01F2", 0, "meta", None, None, None, False, False),  # agent
    ("prt_01G1", 0, "assistant", None, None, None, False, False),
    (
        "prt_01G2",
        0,
        "tool_call",
        "write",
        "/home/dev/payments/tests/test_backoff.py",
        "call_05",
        False,
        False,
    ),  # running
    ("prt_01G3", 0, "meta", None, None, None, False, False),  # retry
    ("prt_01G4", 0, "meta", None, None, None, False, False),  # unknown future type: tolerated
]


def test_storage_tree_maps_every_part_type():
    sessions, audit = load(STORAGE)
    assert audit.n_skipped == 0
    (s,) = sessions
    assert s.id == SID and s.source_format == "opencode"
    got = [(r.entry_id, r.block_index, r.kind, r.tool, r.target, r.call_id, r.is_error, r.injected) for r in s.records]
    assert got == EXPECTED
    assert [r.source_order for r in s.records] == list(range(len(EXPECTED)))
    by_id = {(r.entry_id, r.block_index): r for r in s.records}
    assert by_id[("prt_01A3", 0)].text == "(draft: maybe also jitter?)"
    # The pruned output keeps its original text; the error output is the error message.
    assert "class PaymentsClient" in by_id[("prt_01B4", 1)].text
    assert by_id[("prt_01B5", 1)].text.startswith("Error: command exited with code 1")
    assert by_id[("prt_01B4", 0)].text == 'read {"filePath": "/home/dev/payments/client.py"}'
    assert by_id[("prt_01E1", 0)].text.startswith("Summary: we added a retry wrapper")
    assert by_id[("prt_01B6", 0)].text.startswith("step-finish reason=tool-calls input=5200 output=310")
    assert by_id[("prt_01A1", 0)].timestamp == "2025-01-01T10:00:00.000Z"


def test_metadata_usage_model_system_prompt_compactions():
    (s,), _ = load(STORAGE)
    m = s.metadata
    assert m["title"] == "Add retry to payments client"
    assert m["cwd"] == "/home/dev/payments"
    assert m["system_prompt"].startswith("You are opencode, an interactive CLI tool")
    assert m["model"] == "claude-sonnet-4-5"
    assert m["models"] == ["claude-sonnet-4-5", "gpt-5"]
    assert m["pruned_outputs"] == 1
    # One usage row per assistant message, with the cache split and cost as recorded.
    assert [u["entry_id"] for u in m["usage"]] == ["msg_01B", "msg_01C", "msg_01E", "msg_01G"]
    assert m["usage"][0] == {
        "entry_id": "msg_01B",
        "model": "claude-sonnet-4-5",
        "input_tokens": 5200,
        "cached_tokens": 4096,
        "cache_write_tokens": 1024,
        "output_tokens": 310,
        "reasoning_tokens": 64,
        "cost": 0.0213,
    }
    (boundary,) = m["compactions"]
    assert boundary["entry_id"] == "prt_01D1"
    assert s.records[boundary["source_order"]].entry_id == "prt_01D1"


def test_three_forms_import_identically(db):
    (from_tree,), r1 = load(STORAGE)
    (from_export,), r2 = load(EXPORT)
    from_db, r3 = load(db)
    assert r1.n_skipped == 0 and r2.n_skipped == 0
    assert [s.id for s in from_db] == [SID, "ses_02EMPTY"]
    assert len(from_db[1].records) == 0
    assert record_view(from_tree) == record_view(from_export) == record_view(from_db[0])
    assert dict(from_tree.metadata) == dict(from_export.metadata) == dict(from_db[0].metadata)


def test_db_malformed_rows_are_counted_and_good_rows_kept(db):
    sessions, audit = load(db)
    assert audit.reasons == Counter({"malformed_json": 2, "missing_field": 1})
    details = {s.detail.split(":")[0]: s.reason for s in audit.skipped}
    assert details == {
        "message msg_01Z": "malformed_json",
        "part prt_01Z2": "malformed_json",
        "part prt_01Z1": "missing_field",
    }
    assert all(s.line is None and s.path == str(db) for s in audit.skipped)
    assert len(sessions[0].records) == len(EXPECTED)


def test_db_is_opened_read_only(tmp_path):
    path = build_db(tmp_path / "opencode.db")
    before = path.read_bytes()
    path.chmod(0o444)
    try:
        sessions, audit = load(path)
    finally:
        path.chmod(0o644)
    assert sessions and path.read_bytes() == before
    assert not (tmp_path / "opencode.db-journal").exists()


def test_db_missing_table_is_a_counted_skip(tmp_path):
    path = tmp_path / "opencode.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE session (id TEXT PRIMARY KEY)")
    conn.execute("CREATE TABLE message (id TEXT, session_id TEXT, time_created INTEGER, data TEXT)")
    conn.commit()
    conn.close()
    sessions, audit = load(path)
    assert sessions == []
    assert audit.reasons == Counter({"missing_field": 1})
    assert audit.skipped[0].detail == "no table part"


def test_reimport_is_identical(db):
    assert load(db)[0] == load(db)[0]
    assert load(STORAGE)[0] == load(STORAGE)[0]
    assert load(EXPORT)[0] == load(EXPORT)[0]


def test_storage_bad_files_are_counted_and_the_rest_imports(tmp_path):
    root = tmp_path / "storage"
    shutil.copytree(STORAGE, root)
    (root / "part" / "msg_01B" / "prt_01B3.json").write_text('{"id": "prt_01B3", "type": "text", "te')
    (root / "part" / "msg_01C" / "prt_01C9.json").write_text(
        '{"id": "prt_01C9", "sessionID": "ses_01JDEMO"}'
    )  # no type
    (root / "message" / SID / "msg_01F.json").write_text("[1, 2]")  # not an object: its parts cannot be placed
    (s,), audit = load(root)
    assert audit.reasons == Counter({"malformed_json": 1, "missing_field": 3, "not_an_object": 1})
    bad_paths = {Path(k.path).name for k in audit.skipped}
    assert {"prt_01B3.json", "msg_01F.json"} <= bad_paths
    ids = [r.entry_id for r in s.records]
    assert "prt_01B3" not in ids and "prt_01F1" not in ids and "prt_01C9" not in ids
    assert len(s.records) == len(EXPECTED) - 3  # prt_01B3, prt_01F1, prt_01F2


def test_export_truncated_or_not_an_export(tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_bytes(EXPORT.read_bytes()[:2000])
    sessions, audit = load(cut)
    assert sessions == [] and audit.reasons == Counter({"malformed_json": 1})
    odd = tmp_path / "odd.json"
    odd.write_text(
        json.dumps(
            {
                "info": {"id": "ses_x"},
                "messages": [1, {"parts": []}, {"info": {"id": "m", "role": "robot"}, "parts": []}],
            }
        )
    )
    (s,), audit = load(odd)
    assert s.id == "ses_x" and len(s.records) == 0
    assert audit.reasons == Counter({"not_an_object": 1, "missing_field": 1, "unknown_type": 1})


# --------------------------------------------------------------------------- sniffing


def test_sniff_recognises_all_three_forms(db):
    assert opencode.sniff(files.read_head(db))
    assert opencode.sniff(files.read_head(STORAGE))
    assert opencode.sniff(files.read_head(EXPORT))


def test_sniff_export_longer_than_the_head(tmp_path):
    doc = json.loads(EXPORT.read_text())
    doc["messages"][0]["parts"][0]["text"] = "x" * (files.HEAD_BYTES + 10)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc, indent=2))
    assert opencode.sniff(files.read_head(big))
    (s,), _ = load(big)
    assert len(s.records[0].text) == files.HEAD_BYTES + 10


def test_sniff_rejects_non_opencode_sources(tmp_path):
    other_db = tmp_path / "other.db"
    conn = sqlite3.connect(other_db)
    conn.execute("CREATE TABLE notes (id INTEGER)")
    conn.commit()
    conn.close()
    assert not opencode.sniff(files.read_head(other_db))
    assert not opencode.sniff(files.read_head(OC))  # the folder above the storage root
    assert not opencode.sniff(files.read_head(STORAGE / "session"))
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text('{"info": {}, "messages": []}\n{"info": {}, "messages": []}\n')
    assert not opencode.sniff(files.read_head(jsonl))


def _other_format_files():
    files = []
    for d in FIXTURES.iterdir():  # public/ (real sessions of other agents) included
        if d.is_dir() and d.name != "opencode":
            files += [p for p in d.rglob("*") if p.is_file()]
    return files


@pytest.mark.parametrize("path", _other_format_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_false_on_other_formats(path):
    assert not opencode.sniff(files.read_head(path))


def test_a_compactions_kept_tail_is_resolved_to_its_first_record(tmp_path):
    """A `compaction` part's `tail_start_id` names the first message OpenCode kept verbatim (upstream
    `filterCompacted`, issue 13 item 2): the boundary gives that message's first record, where the
    opencode strategy rebuilds the live history from."""

    def msg(mid, role, parts, summary=False):
        info = {"id": mid, "sessionID": "ses_T", "role": role, "time": {"created": 1}}
        if summary:
            info["summary"] = True
        return {
            "info": info,
            "parts": [{"id": f"{mid}.{i}", "messageID": mid, "sessionID": "ses_T", **p} for i, p in enumerate(parts)],
        }

    text = lambda t: {"type": "text", "text": t}
    doc = {
        "info": {"id": "ses_T", "title": "t"},
        "messages": [
            msg("m1", "user", [text("refactor the billing client")]),
            msg("m2", "assistant", [text("reading billing/client.py")]),
            msg("m3", "user", [text("keep ORD-58213 in the export")]),
            msg("m4", "assistant", [text("kept")]),
            msg("m5", "user", [{"type": "compaction", "auto": True, "tail_start_id": "m3"}]),
            msg("m6", "assistant", [text("SUMMARY-1")], summary=True),
        ],
    }
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    (s,), audit = load(path)
    (boundary,) = s.metadata["compactions"]
    assert boundary["tail_start_message_id"] == "m3"
    assert boundary["tail_start_entry_id"] == "m3.0"
    assert s.records[boundary["tail_start_source_order"]].text == "keep ORD-58213 in the export"
