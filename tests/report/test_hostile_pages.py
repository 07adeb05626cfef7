"""A log's own strings never run as script in any page a run writes (issue 25, item 1 and acceptance 2).

Hand-built Codex, pi and Claude Code sessions plant HTML/JS payloads in every field an importer
carries to a page (session id, model, agent name, cwd, tool name, file paths, message texts, the
file's own name); the `my_sessions` chain runs on them and headless Chromium opens every page of the
run folder and of a sweep: no dialog may fire, no console error appear, and every page still shows
its figures. Random strings in every field through the whole chain and its pages (acceptance 2):
`tests/report/test_hostile_identifiers.py`, in one run with its own drawn identifiers.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compaction_lab.core import runfolder
from compaction_lab.ingest import sources
from compaction_lab.privacy import redactor as redaction
from compaction_lab.report import charts, share
from tests.browser import PageCheck, check_pages
from tests.recorded_expectations import S

#: One payload per HTML context a string can land in: a script block, an element, an attribute,
#: a URL and a JavaScript string. Each alerts a different number, so a failure says which one ran.
PAYLOADS = (
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    '"><svg onload=alert(3)>',
    "javascript:alert(4)",
    "'};alert(5);//",
)

#: Every imported field the hostile sessions fill, each with every payload.
FIELDS = ("session_id", "model", "agent", "cwd", "tool", "path", "text")


def hostile(field: str) -> str:
    """A field's value: its name (so a page shows where it came from) and every payload."""
    return f"{field}-" + "".join(PAYLOADS)


def _ts(n: int) -> str:
    return f"2025-11-02T10:{n:02d}:00.000Z"


def _write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # UTF-8 as the agents write it: NEL, U+2028 and any other non-ASCII raw (C0 controls escaped, as JSON
    # requires); a lone surrogate as its \uXXXX escape, so the importer reads the string (raw, the line
    # would be invalid UTF-8: a counted skip).
    text = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    path.write_text(text, encoding="utf-8")
    return path


def codex_rollout(folder: Path, v: dict[str, str], name: str = "rollout-hostile.jsonl") -> Path:
    """A Codex rollout with a recorded compaction; `v` maps each of `FIELDS` to the string planted there."""
    item = lambda n, p: {"timestamp": _ts(n), "type": "response_item", "payload": p}
    user = lambda t: {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
    call = lambda n, cid, cmd: item(
        n,
        {
            "type": "function_call",
            "name": v["tool"],
            "arguments": json.dumps({"command": ["bash", "-lc", cmd], "path": v["path"]}, ensure_ascii=False),
            "call_id": cid,
        },
    )
    return _write_jsonl(
        folder / name,
        [
            {
                "timestamp": _ts(0),
                "type": "session_meta",
                "payload": {
                    "id": v["session_id"],
                    "timestamp": _ts(0),
                    "cwd": v["cwd"],
                    "originator": v["agent"],
                    "cli_version": "0.46.0",
                    "source": "cli",
                    "model_provider": v["agent"],
                },
            },
            {
                "timestamp": _ts(0),
                "type": "turn_context",
                "payload": {"cwd": v["cwd"], "model": v["model"], "approval_policy": "on-request"},
            },
            item(1, user(S.USER_1 + " " + v["text"])),
            call(2, "call_1", S.CALL_1["command"]),
            item(3, {"type": "function_call_output", "call_id": "call_1", "output": S.OUT_1 + "\n" + v["text"]}),
            item(4, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": S.ASSIST_1}]}),
            item(5, user(S.USER_2)),
            call(6, "call_2", S.CALL_2["command"]),
            item(7, {"type": "function_call_output", "call_id": "call_2", "output": S.OUT_2}),
            item(8, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": S.ASSIST_2}]}),
            {
                "timestamp": _ts(9),
                "type": "compacted",
                "payload": {
                    "message": S.SUMMARY + "\n" + v["text"],
                    "replacement_history": [user(S.USER_1), user(S.USER_2), user(S.SUMMARY + "\n" + v["text"])],
                },
            },
            item(10, user(S.AFTER + " " + v["text"])),
        ],
    )


def pi_session(folder: Path, v: dict[str, str], name: str = "pi-hostile.jsonl") -> Path:
    """A pi session with a recorded compaction; `v` as in `codex_rollout`."""

    def msg(i: str, n: int, m: dict) -> dict:
        return {"type": "message", "id": i, "parentId": None, "timestamp": _ts(n), "message": {**m, "timestamp": n}}

    def tool_call(i: str, n: int, cid: str, cmd: str) -> dict:
        args = {"command": cmd, "path": v["path"]}
        content = [{"type": "toolCall", "id": cid, "name": v["tool"], "arguments": args}]
        return msg(i, n, {"role": "assistant", "content": content, "model": v["model"]})

    def tool_result(i: str, n: int, cid: str, out: str) -> dict:
        content = [{"type": "text", "text": out}]
        return msg(i, n, {"role": "toolResult", "toolCallId": cid, "toolName": v["tool"], "content": content})

    def text(i: str, n: int, role: str, t: str) -> dict:
        extra = {"model": v["model"]} if role == "assistant" else {}
        return msg(i, n, {"role": role, "content": [{"type": "text", "text": t}], **extra})

    return _write_jsonl(
        folder / name,
        [
            {"type": "session", "version": 3, "id": v["session_id"], "timestamp": _ts(0), "cwd": v["cwd"]},
            {
                "type": "model_change",
                "id": "p01",
                "parentId": None,
                "timestamp": _ts(0),
                "provider": v["agent"],
                "modelId": v["model"],
            },
            text("p02", 1, "user", S.USER_1 + " " + v["text"]),
            tool_call("p03", 2, "c1", S.CALL_1["command"]),
            tool_result("p04", 3, "c1", S.OUT_1 + "\n" + v["text"]),
            text("p05", 4, "assistant", S.ASSIST_1),
            text("p06", 5, "user", S.USER_2),
            tool_call("p07", 6, "c2", S.CALL_2["command"]),
            tool_result("p08", 7, "c2", S.OUT_2),
            text("p09", 8, "assistant", S.ASSIST_2),
            {
                "type": "compaction",
                "id": "p10",
                "parentId": None,
                "timestamp": _ts(9),
                "summary": S.SUMMARY + "\n" + v["text"],
                "firstKeptEntryId": "p06",
                "tokensBefore": 151000,
            },
            text("p11", 10, "user", S.AFTER + " " + v["text"]),
        ],
    )


def claude_code_session(folder: Path, v: dict[str, str], name: str = "claude-hostile.jsonl") -> Path:
    """A Claude Code transcript with a recorded compaction and a named subagent's sidechain; `v` as above."""
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": v["cwd"],
        "sessionId": v["session_id"],
        "version": "2.0.31",
        "gitBranch": v.get("branch", v["agent"]),
    }
    lines: list[dict] = []
    parent: str | None = None

    def add(uuid: str, n: int, **fields) -> None:
        nonlocal parent
        lines.append({**base, "parentUuid": parent, "uuid": uuid, "timestamp": _ts(n), **fields})
        parent = uuid

    def assistant(uuid: str, n: int, content: list[dict]) -> None:
        message = {"id": f"msg_{uuid}", "role": "assistant", "model": v["model"], "content": content}
        add(uuid, n, type="assistant", message=message)

    def call(uuid: str, n: int, tid: str, cmd: str) -> None:
        assistant(uuid, n, [{"type": "tool_use", "id": tid, "name": v["tool"], "input": {"file_path": v["path"]}}])

    def result(uuid: str, n: int, tid: str, out: str) -> None:
        content = [{"type": "tool_result", "tool_use_id": tid, "content": out}]
        add(uuid, n, type="user", message={"role": "user", "content": content})

    add("c01", 1, type="user", message={"role": "user", "content": S.USER_1 + " " + v["text"]})
    call("c02", 2, "toolu_1", S.CALL_1["command"])
    result("c03", 3, "toolu_1", S.OUT_1 + "\n" + v["text"])
    assistant("c04", 4, [{"type": "text", "text": S.ASSIST_1}])
    add("c05", 5, type="user", message={"role": "user", "content": S.USER_2})
    call("c06", 6, "toolu_2", S.CALL_2["command"])
    result("c07", 7, "toolu_2", S.OUT_2)
    assistant("c08", 8, [{"type": "text", "text": S.ASSIST_2}])
    parent = None
    add("c09", 9, **S.CLAUDE_CODE_BOUNDARY)
    summary = "This session is being continued from a previous conversation that ran out of context. "
    summary += "The conversation is summarized below:\n" + S.SUMMARY + "\n" + v["text"]
    add("c10", 9, type="user", isCompactSummary=True, message={"role": "user", "content": summary})
    add("c11", 10, type="user", message={"role": "user", "content": S.AFTER + " " + v["text"]})
    # A subagent's sidechain, named by the log: its agent id becomes part of a session id.
    side = {**base, "isSidechain": True, "agentId": v["agent"]}
    for i, (role, content) in enumerate((("user", S.USER_2 + " " + v["text"]), ("assistant", S.ASSIST_2))):
        message = {"role": role, "content": content, **({"model": v["model"]} if role == "assistant" else {})}
        prev = f"s0{i}" if i else None
        lines.append(
            {
                **side,
                "parentUuid": prev,
                "uuid": f"s0{i + 1}",
                "timestamp": _ts(11 + i),
                "type": role,
                "message": message,
            }
        )
    return _write_jsonl(folder / name, lines)


def hostile_folder(folder: Path, values: dict[str, str] | None = None, name: str | None = None) -> Path:
    """The three hostile sessions in `folder`, one of them under a file name that is itself a payload.

    `values` may also name the Claude Code session's git ``branch`` (else its agent's); with `name`,
    every file is named by it (after its format's prefix).
    """
    v = values or {f: hostile(f) for f in FIELDS}
    # Each session its own id (the same id twice would be one case), each id still hostile.
    ids = {fmt: f"{fmt}-{v['session_id']}" for fmt in ("codex", "pi", "claude")}
    named = lambda fmt, default: f"{fmt}-{name}.jsonl" if name is not None else default
    codex_rollout(
        folder, {**v, "session_id": ids["codex"]}, name=named("rollout", "rollout-<img src=x onerror=alert(6)>.jsonl")
    )
    pi_session(folder, {**v, "session_id": ids["pi"]}, name=named("pi", "pi-hostile.jsonl"))
    claude_code_session(folder, {**v, "session_id": ids["claude"]}, name=named("claude", "claude-hostile.jsonl"))
    return folder


# --------------------------------------------------------------------------- pieces of a page, fast


def test_measured_markdown_shows_labels_as_text(tmp_path):
    """Notebook 07 shows `share.measured_markdown`; nbconvert renders Markdown with raw HTML and links
    allowed, so every label in it must arrive as literal text."""
    from nbconvert.exporters import HTMLExporter

    label = hostile("text") + " [x](javascript:alert(12)) <!--"
    run_dir = runfolder.resolve(tmp_path / "run")
    recall = [(s, f"{s} {label}", r, 4, r / 4, 0.0, 1.0, 100.0 * r, label) for s, r in (("a", 4), ("b", 1))]
    cols = ["strategy", "strategy_label", "retained", "n", "recall", "ci_low", "ci_high", "projection_tokens"]
    runfolder.save_table(pd.DataFrame(recall, columns=[*cols, "reader_label"]), run_dir, "exam_recall")
    md = share.measured_markdown(share.headline_table(run_dir)).data
    page = HTMLExporter().markdown2html({}, md)
    assert "<a " not in page and "<!--" not in page
    assert not [m for m in RAW_MARKUP if m in page], page
    # Still the same words: only markup was escaped.
    assert html.unescape(re.sub(r"<[^>]+>", "", page)).count(label) >= 2


def test_figure_html_escapes_names_and_title(tmp_path):
    name = 'f"><img src=x onerror=alert(13)>'
    files = [tmp_path / f"{name}.{ext}" for ext in ("png", "html")]
    for p in files:
        p.write_bytes(b"")
    shown = share.figure_html(share.Figure(name, f"title {name}", files[0], None, files[1]))
    assert "<img src=x" not in shown and 'f"><' not in shown, shown


# --------------------------------------------------------------------------- opening the pages


@contextmanager
def dialogs_recorded() -> Iterator[list[tuple[str, str]]]:
    """Every JavaScript dialog (alert, confirm, prompt) the pages `check_pages` opens fire: (page URL, message).

    `check_pages` lets Playwright dismiss dialogs unseen; here each new page gets a listener that
    records the dialog first (and still dismisses it, so the page goes on).
    """
    from playwright.sync_api import BrowserContext

    fired: list[tuple[str, str]] = []
    new_page = BrowserContext.new_page

    def watched(self, *args, **kwargs):
        page = new_page(self, *args, **kwargs)
        page.on("dialog", lambda d: (fired.append((page.url, d.message)), d.dismiss()))
        return page

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BrowserContext, "new_page", watched)
        yield fired


#: What a page's source may never hold raw: each payload's opening tag (escaped, it reads ``&lt;``
#: in text and ``\u003c`` in a script's JSON).
RAW_MARKUP = ("<script>alert(", "<img src=x onerror=", "<svg onload=", "<svg/onload=", "<!--<script>")


def run_pages(run_dir: Path) -> list[Path]:
    """Every HTML page of a run folder: report.html, the rendered notebooks and figures/*.html."""
    return sorted(run_dir.glob("*.html")) + sorted((run_dir / "figures").glob("*.html"))


def open_all(pages: list[Path]) -> tuple[list[PageCheck], list[tuple[str, str]]]:
    """Each page checked in Chromium (`browser.check_pages`), and every dialog any of them fired."""
    with dialogs_recorded() as fired:
        checks = check_pages(pages)
    return checks, fired


def problems(checks: list[PageCheck], fired: list[tuple[str, str]]) -> list[str]:
    """What is wrong with the pages: dialogs, console errors, raw markup from a log, a page with no figure."""
    by_page: dict[str, list[str]] = {}
    for url, msg in fired:
        by_page.setdefault(Path(url).name, []).append(msg)
    out = [f"{page}: {len(msgs)} dialog(s) fired, {sorted(set(msgs))}" for page, msgs in by_page.items()]
    for c in checks:
        if c.console_errors or not c.ok:
            out.append(c.describe())
        source = c.path.read_text(encoding="utf-8", errors="replace")
        out += [f"{c.path.name} holds raw {m!r}" for m in RAW_MARKUP if m in source]
    return out


# --------------------------------------------------------------------------- item 1: the payloads

#: Questions must point before the recent tail: a short one, so these short sessions give some, and
#: the exam's figures and tables carry the hostile ids too. They are far below W − O, so they are cut at
#: their end (the default cut would list them as "would not compact" and ask nothing).
SHORT_TAIL = {"tail_tokens": 64, "cut": "end"}


@pytest.mark.slow
def test_hostile_sessions_import_and_every_notebook_runs(hostile_sweep):
    """The test plants what it means to: every session imports, the chain runs, the payloads reach the pages."""
    assert [status for _, _, status in hostile_sweep.runs] == ["ok"]
    run_dir = hostile_sweep.runs[0][1].run_dir
    found = json.loads((run_dir / "import_audit.json").read_text(encoding="utf-8"))
    assert found["formats"] == {"codex": 1, "pi": 1, "claude_code": 2}, found
    # As JSON in the figure's script, escaped for it.
    shown = (run_dir / "figures" / "fig_recorded.html").read_text(encoding="utf-8")
    assert charts.script_safe(json.dumps(hostile("model"))[1:-1]) in shown


@pytest.mark.slow
def test_no_page_of_the_run_runs_a_payload(hostile_sweep, chromium):
    """Item 1: report.html, every rendered notebook and every figures/*.html: no dialog, no console
    error, no raw markup from the log, every page shows its figures."""
    pages = run_pages(hostile_sweep.runs[0][1].run_dir)
    checks, fired = open_all(pages)
    names = {c.path.name for c in checks}
    assert {"report.html", "fig2_composition.html", "fig_recorded.html", "03_closed_book_exam.html"} <= names
    bad = problems(checks, fired)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_sweep_page_runs_no_payload(hostile_sweep, chromium):
    """Item 1: the sweep's page over those runs, the same checks."""
    checks, fired = open_all([hostile_sweep.report])
    bad = problems(checks, fired)
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------- acceptance 2: random strings

#: More ways to break out of a context: a comment that hides a script's end, an upper-case closing tag,
#: JavaScript line terminators, an entity, a CSS escape hatch, markdown that links to script.
MORE_PAYLOADS = (
    "<!--<script>alert(7)//",
    "</SCRIPT ><svg/onload=alert(8)>",
    "\u2028alert(9)\u2029",
    "&lt;b&gt;&amp;",
    "</style><img src=x onerror=alert(10)>",
    "[x](javascript:alert(11))",
)

#: One piece of an identifier: a payload, any code points (controls and lone surrogates included),
#: control characters alone, or one character repeated into a very long string.
_PIECES = st.one_of(
    st.sampled_from(PAYLOADS + MORE_PAYLOADS),
    st.text(st.characters(exclude_categories=()), max_size=24),
    st.text(st.characters(max_codepoint=0x1F), min_size=1, max_size=6),
    st.builds(lambda c, n: c * n, st.characters(exclude_categories=()), st.integers(1_000, 4_000)),
)
#: A value for each of `FIELDS`.
HOSTILE_VALUES = st.fixed_dictionaries({f: st.lists(_PIECES, min_size=1, max_size=4).map("".join) for f in FIELDS})


#: Characters Python's `str.splitlines` breaks lines at besides LF and CR, which JSON leaves unescaped.
LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@pytest.mark.slow
@given(values=HOSTILE_VALUES)
@example(values={f: f"{f}{LINE_BREAKS}\ud800{PAYLOADS[0]}" for f in FIELDS})
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_importers_take_any_identifier(values, tmp_path_factory):
    """Acceptance 2, the importers: any string in any identifier field imports (or its file is a counted
    skip), is redacted, and survives the run folder's session files unchanged."""
    folder = hostile_folder(tmp_path_factory.mktemp("import") / "sessions", values)
    src = _imported(folder)
    if src is None:
        return
    # Each file gave its sessions (Claude Code two: the main one and the sidechain) or was skipped.
    report_ = src.audit
    assert report_.files + len({s.path for s in report_.skipped if s.line is None}) == 3, report_.summary()
    out = tmp_path_factory.mktemp("run")
    sources.save(src, out)
    assert sorted(s.id for s in sources.load_saved(out)) == sorted(s.id for s in src.sessions)


def _imported(folder: Path) -> sources.Sources | None:
    """The sessions of `folder` as a `my_sessions` run imports them, or None when no file was recognised.

    A file is recognised by its first lines (`ingest.files.HEAD_BYTES`); a first line longer than that
    (four very long identifiers) makes every file an unknown_format skip, and the import says so.
    """
    try:
        return sources.gather([str(folder)], progress=False, redactor=redaction.redactor(True, None))
    except ValueError as exc:
        assert f"no sessions imported from {[str(folder)]}" in str(exc) and "skipped 3" in str(exc), exc
        return None
