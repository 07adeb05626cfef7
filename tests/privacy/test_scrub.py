"""The run-folder sweep leaves no planted value in text, notebook, HTML, parquet or SQLite files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from unittest import mock

import nbformat
import pandas as pd

from compaction_lab.privacy import scrub
from compaction_lab.privacy.leaks import find_leaks
from compaction_lab.privacy.patterns import DEFAULT_PATTERNS
from compaction_lab.privacy.redactor import Redactor, redactor
from compaction_lab.privacy.scrub import ScrubReport, scrub_run_folder
from compaction_lab.store import archive
from tests.helpers import make_session
from tests.privacy.privacy_samples import AWS, GITHUB, JWT, OPENAI

# --------------------------------------------------------------------------- run folder

ENV_VALUE = "Xylophone-Marmalade-77"
BEARER = "tok_9f8e7d6c5b4a39281706"
NEEDLES = [OPENAI, GITHUB, AWS, "zed.quux@example.org", "zedquux", BEARER, ENV_VALUE, JWT]


def _planted_session():
    return make_session(
        [
            ("user", f"Use {OPENAI} and mail zed.quux@example.org; env {ENV_VALUE}"),
            (
                "tool_call",
                'bash {"cmd": "cat /home/zedquux/.aws/credentials"}',
                {"tool": "bash", "target": "/home/zedquux/.aws/credentials", "call_id": "c1"},
            ),
            ("tool_output", f"aws_access_key_id = {AWS}\ncookie={JWT}", {"tool": "bash", "call_id": "c1"}),
            ("assistant", f"Pushed with {GITHUB}."),
        ],
        session_id="planted",
    )


def _make_run_folder(run: Path) -> None:
    run.mkdir()
    (run / "figures").mkdir()
    (run / "sessions").mkdir()
    (run / "run.json").write_text(
        json.dumps(
            {
                "parameters": {"note": "by zed.quux@example.org in /home/zedquux"},
                "error": f"HTTP 401 for Authorization: Bearer {BEARER}",
            },
            indent=1,
        )
    )
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(f'KEY = "{OPENAI}"\nprint(KEY)')
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"{OPENAI}\n/home/zedquux/x.py\n{ENV_VALUE}\n")
    ]
    nb.cells = [cell, nbformat.v4.new_markdown_cell(f"Token `{GITHUB}`")]
    nbformat.write(nb, run / "01_chain.ipynb")
    (run / "report.html").write_text(
        f"<html><body><pre>Authorization: Bearer {BEARER}</pre>"
        f"<td>{GITHUB}</td><script>var data = {json.dumps({'t': f'{JWT} {ENV_VALUE}'})};</script></body></html>"
    )
    (run / "sessions" / "planted.jsonl").write_bytes(_planted_session().to_jsonl())
    df = pd.DataFrame(
        {
            "session_id": ["planted", "planted", "other"],
            "text": [f"key {OPENAI}", "clean", None],
            "paths": [["/home/zedquux/a", "b"], [], ["c"]],
            "n": [1, 2, 3],
        }
    )
    df.to_parquet(run / "table.parquet", index=False)
    # A PNG cannot be rewritten: listed, not touched.
    (run / "figures" / "fig1.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    # An archive the store did not mask (written by an earlier version, or another tool): the sweep cleans it.
    with mock.patch.object(archive, "store_masker", Redactor), archive.Archive(run / "archive.sqlite") as a:
        a.add_sessions([_planted_session(), make_session([("user", "nothing secret here")], session_id="clean")])


def test_scrub_run_folder_leaves_no_planted_value(tmp_path):
    run = tmp_path / "run"
    _make_run_folder(run)
    r = Redactor(patterns=DEFAULT_PATTERNS, literals=frozenset({ENV_VALUE}))

    before = find_leaks(run, NEEDLES)
    assert {n for _, n in before} == set(NEEDLES)
    assert {f for f, _ in before} == {
        "run.json",
        "01_chain.ipynb",
        "report.html",
        "sessions/planted.jsonl",
        "table.parquet",
        "archive.sqlite",
    }
    # The full-text index holds the key's lower-cased tokens, not only the record text.
    fts_token = OPENAI.split("-")[-1].lower().encode()
    assert fts_token in (run / "archive.sqlite").read_bytes()

    rep = scrub_run_folder(run, r)
    assert isinstance(rep, ScrubReport)
    assert find_leaks(run, NEEDLES) == []
    assert fts_token not in (run / "archive.sqlite").read_bytes()
    assert rep.unscannable == ("figures/fig1.png",)
    assert set(rep.files_changed) == {
        "run.json",
        "01_chain.ipynb",
        "report.html",
        "sessions/planted.jsonl",
        "table.parquet",
        "archive.sqlite",
    }
    assert rep.files_scanned == 6 and rep.replacements >= 20
    assert not list(run.rglob("*.redact-tmp")) and not list(run.glob("archive.sqlite-*"))

    # Every file is still what it was: valid JSON, a valid notebook, a readable table, a searchable archive.
    assert "[REDACTED:bearer-token]" in json.loads((run / "run.json").read_text())["error"]
    nb = nbformat.read(run / "01_chain.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].source == 'KEY = "[REDACTED:openai-key]"\nprint(KEY)'
    df = pd.read_parquet(run / "table.parquet")
    assert df["text"].tolist()[:2] == ["key [REDACTED:openai-key]", "clean"] and df["text"].isna().tolist()[2]
    assert [list(p) for p in df["paths"]] == [["/home/[REDACTED:home-user]/a", "b"], [], ["c"]]
    assert df["n"].tolist() == [1, 2, 3]
    from compaction_lab.core.session import Session

    Session.from_jsonl((run / "sessions" / "planted.jsonl").read_bytes())
    with archive.Archive(run / "archive.sqlite", readonly=True) as a:
        assert a.count() == 5
        hits = a.search("openai-key")
        assert [h.session_id for h in hits] == ["planted"]
        assert a.search("nothing secret") and a.search(OPENAI.split("-")[-1]) == []
        texts = [rec.text for rec in a.session_records("planted")]
        assert texts[0] == "Use [REDACTED:openai-key] and mail [REDACTED:email]; env [REDACTED:env-secret]"
        assert a.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con = sqlite3.connect(run / "archive.sqlite")
    con.execute("INSERT INTO records_fts(records_fts) VALUES('integrity-check')")  # raises if index != content
    con.close()

    again = scrub_run_folder(run, r)
    assert again.files_changed == () and again.replacements == 0


def test_scrub_is_a_no_op_when_nothing_can_be_masked(tmp_path):
    run = tmp_path / "run"
    _make_run_folder(run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert scrub_run_folder(run, Redactor()) == ScrubReport(0, (), 0, ())
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_scrub_with_redaction_off_masks_only_env_secrets(tmp_path):
    run = tmp_path / "run"
    _make_run_folder(run)
    rep = scrub_run_folder(run, redactor(False, environ={"OPENAI_API_KEY": ENV_VALUE}))
    assert rep.replacements > 0
    leaks = {n for _, n in find_leaks(run, NEEDLES)}
    assert ENV_VALUE not in leaks and OPENAI in leaks


def test_scrub_handles_fts_tables_with_their_own_content_and_without_rowid(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    db = run / "other.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE VIRTUAL TABLE notes USING fts5(body);CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;"
    )
    con.execute("INSERT INTO notes(body) VALUES (?)", (f"deploy key {GITHUB} ok",))
    con.execute("INSERT INTO kv VALUES (?, ?)", ("token", "mail zed.quux@example.org"))
    con.commit()
    con.close()
    assert find_leaks(run, [GITHUB, "zed.quux@example.org"])
    rep = scrub_run_folder(run, Redactor(patterns=DEFAULT_PATTERNS))
    assert rep.files_changed == ("other.db",) and rep.replacements == 2
    assert find_leaks(run, [GITHUB, "zed.quux@example.org", GITHUB[4:].lower()]) == []
    con = sqlite3.connect(db)
    assert con.execute("SELECT body FROM notes WHERE notes MATCH 'deploy'").fetchall() == [
        ("deploy key [REDACTED:github-token] ok",)
    ]
    assert con.execute("SELECT v FROM kv").fetchall() == [("mail [REDACTED:email]",)]
    con.close()


def test_unknown_files_are_sniffed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes").write_text(f"key {OPENAI}\n")
    (run / "blob.bin").write_bytes(b"\x00\x01" + OPENAI.encode())
    rep = scrub_run_folder(run, Redactor(patterns=DEFAULT_PATTERNS))
    assert rep.files_changed == ("notes",) and rep.unscannable == ("blob.bin",)
    assert find_leaks(run, [OPENAI]) == [("blob.bin", OPENAI)]


def test_settle_databases_folds_and_removes_wal_side_files_holding_old_text(tmp_path):
    """A WAL left by a process that exited without closing holds the text before an UPDATE; settling folds
    it in, drops ``-wal``/``-shm`` and vacuums the freed pages, so the old text is nowhere in the folder."""
    import subprocess
    import sys

    db = tmp_path / "archive.sqlite"
    # A child writes in WAL mode and exits without closing (os._exit): its side files stay, as a kernel's do.
    code = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL')\n"
        "c.execute('PRAGMA wal_autocheckpoint=0')\n"
        "c.execute('CREATE TABLE t(x TEXT)'); c.execute(\"INSERT INTO t VALUES ('old-secret-value-7731')\")\n"
        "c.commit(); c.execute(\"UPDATE t SET x = 'masked'\"); c.commit(); os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)
    wal = tmp_path / "archive.sqlite-wal"
    assert wal.exists() and b"old-secret-value-7731" in wal.read_bytes()  # the negative control

    assert scrub.settle_databases(tmp_path) == ["archive.sqlite"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive.sqlite"]
    assert b"old-secret-value-7731" not in db.read_bytes()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT x FROM t").fetchall() == [("masked",)]


# --------------------------------------------------------------------------- opaque spans


def _png_base64(secret: str) -> str:
    """A PNG's base64 as a notebook holds it, with `secret` (base64 letters) inside its payload."""
    import base64

    head = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(49))).decode()  # 'iVBORw0KGgo...'
    tail = base64.b64encode(bytes(range(200, 256)) * 8).decode()
    return head + secret + tail


def test_embedded_pngs_and_verbatim_texts_are_left_whole_and_the_text_around_them_masked(tmp_path):
    """A notebook's PNG output, a page's ``<img>`` PNG and a `verbatim` text are not scanned (a literal
    inside them is chance there, and masking it would break the image or the script); a value planted
    right beside each, and anywhere else in the file, is masked; a session's file is scanned whole."""
    literal = "QmFzZTY0U2VjcmV0VmFsdWU"  # base64 letters only: found anywhere a scan looks
    png = _png_base64(literal)
    assert png.startswith("iVBORw0KGgo") and literal in png
    bundle = f"/* Vega */ var v = '{literal}'; contact: vega@example.org; " + "x" * 300
    r = Redactor(patterns=DEFAULT_PATTERNS, literals=frozenset({literal}))
    run = tmp_path / "run"
    (run / "figures").mkdir(parents=True)
    (run / "sessions").mkdir()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("chart")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": f"<Chart {literal}>"}),
        nbformat.v4.new_output("stream", name="stdout", text=f"mail zed.quux@example.org\n{literal}\n"),
    ]
    nb.cells = [cell]
    nbformat.write(nb, run / "03.ipynb")
    page = (
        f'<p>{literal}</p><img alt="" class="" src="data:image/png;base64,{png}"/>{literal}'
        f'<script type="text/javascript">{bundle}</script><p>zed.quux@example.org {literal}</p>'
    )
    (run / "03.html").write_text(page)
    (run / "figures" / "fig.html").write_text(f"<script>{bundle}</script><script>{literal}</script>")
    # In a session's own file the same shapes are text like any other: scanned whole.
    (run / "sessions" / "s.jsonl").write_text(json.dumps({"image/png": png, "page": page}) + "\n")

    rep = scrub_run_folder(run, r, verbatim=[bundle])

    out_nb = nbformat.read(run / "03.ipynb", as_version=4)
    nbformat.validate(out_nb)
    outputs = out_nb.cells[0].outputs
    assert outputs[0].data["image/png"] == png  # the image is intact
    assert outputs[0].data["text/plain"] == "<Chart [REDACTED:env-secret]>"
    assert outputs[1].text == "mail [REDACTED:email]\n[REDACTED:env-secret]\n"
    html_out = (run / "03.html").read_text()
    assert f'base64,{png}"/>' in html_out and bundle in html_out
    assert html_out.count(literal) == 2 and html_out.count("[REDACTED:env-secret]") == 3
    assert html_out.count("zed.quux") == 0 and html_out.count("vega@example.org") == 1
    fig = (run / "figures" / "fig.html").read_text()
    assert fig == f"<script>{bundle}</script><script>[REDACTED:env-secret]</script>"
    session = (run / "sessions" / "s.jsonl").read_text()
    assert literal not in session and "vega@example.org" not in session
    assert set(rep.files_changed) == {"03.ipynb", "03.html", "figures/fig.html", "sessions/s.jsonl"}


def test_only_a_real_embedded_png_is_left_whole(tmp_path):
    """What only looks like one is scanned: an ``<img>`` written as a page's escaped text, an image value
    that is not base64 through to its quote, one without the PNG signature, and a verbatim text in a notebook."""
    literal = "QmFzZTY0U2VjcmV0VmFsdWU"
    png = _png_base64(literal)
    r = Redactor(literals=frozenset({literal}))
    run = tmp_path / "run"
    run.mkdir()
    escaped = f"<p>&lt;img src=&quot;data:image/png;base64,{png}&quot;&gt;</p>"
    broken = f'<img src="data:image/png;base64,{png}_x"/>'  # '_' is no base64 letter: the span ends early
    unsigned = f'<img src="data:image/png;base64,{png[11:]}"/>'
    (run / "page.html").write_text(escaped + broken + unsigned)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="v" * 300 + literal)]
    nb.cells = [cell]
    nbformat.write(nb, run / "n.ipynb")

    scrub_run_folder(run, r, verbatim=["v" * 300 + literal])

    assert literal not in (run / "page.html").read_text()
    assert (run / "page.html").read_text().count("[REDACTED:env-secret]") == 3
    assert literal not in (run / "n.ipynb").read_text()
