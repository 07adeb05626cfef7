import sqlite3

import pytest

from compaction_lab.core.session import Session
from compaction_lab.store import archive
from tests.helpers import make_session


def _sessions():
    a = make_session(
        [
            ("user", "Create order for customer cus_77 please."),
            (
                "tool_call",
                'http_request {"url": "https://api.test/orders"}',
                {"tool": "http_request", "target": "https://api.test/orders", "call_id": "c1"},
            ),
            (
                "tool_output",
                '{"order": {"id": "ORD-58213-QX", "status": "pending"}}\n',
                {"tool": "http_request", "target": "https://api.test/orders", "call_id": "c1"},
            ),
            ("assistant", "The order ORD-58213-QX is pending; I chose the LRU cache."),
        ],
        session_id="sa",
    )
    b = make_session(
        [
            ("user", "Run tests/test_cart.py::test_total_rounding"),
            (
                "tool_output",
                "FAILED tests/test_cart.py::test_total_rounding - AssertionError\n  trailing spaces   \n\ttab",
                {"tool": "bash", "target": "pytest", "is_error": True},
            ),
        ],
        session_id="sb",
    )
    return [a, b]


@pytest.fixture
def arch(tmp_path):
    with archive.Archive(tmp_path / "a.sqlite") as a:
        a.add_sessions(_sessions())
        yield a


def test_search_finds_planted_identifier(arch):
    hits = arch.search("ORD-58213-QX")
    assert sorted((h.session_id, h.kind) for h in hits) == [("sa", "assistant"), ("sa", "tool_output")]
    assert all("ORD" in h.snippet for h in hits)


def test_search_handles_fts_operators_literally(arch):
    (hit,) = arch.search("tests/test_cart.py::test_total_rounding", session="sb", limit=5)[:1]
    assert hit.session_id == "sb"
    assert arch.search("test_total_rounding", session="sa") == []


def test_search_filters_and_limits(arch):
    assert len(arch.search("ORD-58213-QX", limit=1)) == 1
    assert arch.search("cart", session="sa") == []
    assert arch.search("nonexistentword") == []
    assert {h.kind for h in arch.search("cus_77 LRU", any_term=True)} == {"user", "assistant"}


def test_empty_query_is_an_error(arch):
    with pytest.raises(ValueError, match="empty"):
        arch.search("   ")


def test_get_returns_original_text_byte_for_byte(arch):
    original = _sessions()[1].records[1]
    (rec,) = arch.get(original.entry_id, session="sb")
    assert rec == original
    assert rec.text.encode() == original.text.encode()


def test_reimport_adds_no_rows(tmp_path):
    path = tmp_path / "a.sqlite"
    with archive.Archive(path) as a:
        first = a.add_sessions(_sessions())
        assert first.records_added == 6
        again = a.add_sessions(_sessions())
        assert again.records_added == 0 and a.count() == 6
        assert len(a.search("ORD-58213-QX")) == 2  # the FTS index has no duplicates either


def test_grown_session_adds_only_new_records(tmp_path):
    with archive.Archive(tmp_path / "a.sqlite") as a:
        s = _sessions()[0]
        a.add_session(Session(s.id, s.source_format, s.records[:2]))
        assert a.add_session(s) == 2
        assert [r.source_order for r in a.session_records("sa")] == [0, 1, 2, 3]


def test_readonly_open(tmp_path):
    path = tmp_path / "a.sqlite"
    with archive.Archive(path) as a:
        a.add_sessions(_sessions())
    with archive.Archive(path, readonly=True) as ro:
        assert ro.count() == 6
        with pytest.raises(sqlite3.OperationalError):
            ro.conn.execute("DELETE FROM records")
    with pytest.raises(archive.ArchiveError, match="compaction-lab import"):
        archive.Archive(tmp_path / "missing.sqlite", readonly=True)


def test_sessions_listing(arch):
    rows = arch.sessions()
    assert [(r["session_id"], r["records"]) for r in rows] == [("sa", 4), ("sb", 2)]


def test_fts_query_quotes_terms():
    assert archive.fts_query('ORD-1 say "hi"') == '"ORD-1" "say" """hi"""'
    assert archive.fts_query("a b", any_term=True) == '"a" OR "b"'


def test_reads_from_other_threads_see_the_same_archive(arch):
    """A model reader answers several questions at once: each worker thread reads through its own connection."""
    from concurrent.futures import ThreadPoolExecutor

    here = [h.entry_id for h in arch.search("ORD-58213")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        there = list(pool.map(lambda _: [h.entry_id for h in arch.search("ORD-58213")], range(8)))
        counts = list(pool.map(lambda _: arch.count(), range(4)))
    assert here and all(t == here for t in there) and set(counts) == {arch.count()}
    arch.close()


# --------------------------------------------------------------------------- a path that is not an archive


@pytest.mark.parametrize("readonly", [False, True])
def test_a_path_that_is_not_an_archive_is_refused_untouched(tmp_path, readonly):
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE calls (id INTEGER)")
    before = other.read_bytes()
    for path, match in (
        (tmp_path, "is a folder"),
        (text, "is not an SQLite database"),
        (other, "not an archive of originals"),
    ):
        with pytest.raises(archive.ArchiveError, match=match):
            archive.Archive(path, readonly=readonly)
    assert text.read_text() == "not a database" and other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "other.sqlite"]
