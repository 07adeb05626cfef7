"""``compaction-lab verify``: rebuild every request the suite would send and check it has not drifted.

No model and no network. On a small canonical session built here (user,
assistant, reasoning, tool call, tool output and an injected-context user
message; fixed text, so the same on every machine), `build_manifest` rebuilds

* every call shape in ``data/shapes``: sha256 of its system prompt and of each
  tool definition (canonical JSON), by tool name;
* each registered strategy's summary request, as the summarizer receives
  it: request shape (prefix-shared, history+instruction, dedicated), template,
  output cap, sha256 of system prompt, tools and every prompt text in use, the
  role sequence of its messages and the request fingerprint;
* the exam's reader requests: closed book (the projection's messages plus the
  question message, the call shape's tools beside them) and each open-book round
  (the call shape's tools plus ``history_search`` / ``history_get``, the round's
  wording).

`verify` compares the manifest with the committed lock
(``data/shapes/verify.lock.json``) and also checks, independently of the lock,
that every request has the request shape ``docs/strategies.md`` and ``docs/exams.md`` document -- so a
documented property cannot be blessed away with ``--update``. Drift fails with
the dotted keys that changed and a unified diff.

Only hashes, names, roles and the rebuild's settings are stored, never a prompt's
text: the lock is safe to commit whatever call shape was captured.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compaction_lab import strategies
from compaction_lab.core import paths
from compaction_lab.core.fingerprints import canonical_json, sha256_json, sha256_text, shape_fingerprint
from compaction_lab.core.projection import SummaryRequest
from compaction_lab.core.session import Record, Session
from compaction_lab.core.shapes import LOCK_NAME, CallShape, shape_files
from compaction_lab.core.text import tool_call_text
from compaction_lab.exam import readers
from compaction_lab.exam.exams import open_book
from compaction_lab.exam.readers import reading
from compaction_lab.exam.types import Question
from compaction_lab.strategies.base import STRATEGIES, CompactionContext
from compaction_lab.summarize import SummaryResult
from compaction_lab.verify.capture import tool_name, tool_names

#: Version of the manifest layout (bump when the layout, not the content, changes).
MANIFEST_VERSION = 1

#: Window and output ceiling the requests are rebuilt with (the suite's defaults).
VERIFY_WINDOW = 128_000
VERIFY_OUTPUT_CEILING = 32_000

#: A small recent tail, so that every strategy with a tail still has a head to summarise
#: in the short canonical session (with the default tails the whole session would be tail).
#: Aider summarises only past its soft limit (`min(max(max_input/16, 1024), 8192)` tokens), far above the
#: canonical session: a tiny limit makes it send its requests (two: its recursion runs once).
VERIFY_PARAMS: Mapping[str, Any] = {"tail_tokens": 64, "max_chat_history_tokens": 64}

#: The projection the exam requests are rebuilt from: the uncompacted session, so every
#: message of it reaches the request.
EXAM_PROJECTION = "full"

#: What each request shape sends (docs/strategies.md): where its system prompt and tools come
#: from, and whether the instruction closes the request.
REQUEST_SHAPE_RULES: Mapping[str, Mapping[str, Any]] = {
    # the session's own system prompt, tools and messages, instruction appended: a prefix cache serves it
    "prefix-shared": {"system_from": "call-shape", "tools_from": "call-shape", "instruction_at_end": True},
    # OpenCode main's opt-in "suffix" compaction: the session's own request with an anchored summarise
    # instruction after it (the same prefix rules; its own name so it is priced and listed apart)
    "suffix": {"system_from": "call-shape", "tools_from": "call-shape", "instruction_at_end": True},
    # the session's base instructions and history, instruction appended, no tool definitions
    "history+instruction": {"system_from": "call-shape", "tools_from": "none", "instruction_at_end": True},
    # its own system prompt, no tools, one user message holding transcript and instruction
    "dedicated": {"system_from": "own", "tools_from": "none", "roles": ["user"], "instruction_at_end": True},
    # Gemini CLI: its compression prompt as the system instruction, no tools, the history in the session's
    # roles, the "generate the <state_snapshot>" instruction as the last user message
    "own-system+history": {"system_from": "own", "tools_from": "none", "instruction_at_end": True},
    # Aider: its summarize prompt as the system message, one user message holding the transcript; the
    # instruction is the system prompt, nothing follows the transcript
    "dedicated-system": {"system_from": "own", "tools_from": "none", "roles": ["user"], "instruction_at_end": None},
}

#: The fixed answer the recording summarizer gives (no model is asked).
RECORDED_ANSWER = "(verify: no model was called)"


# --------------------------------------------------------------------------- canonical inputs


def canonical_session() -> Session:
    """Return the fixed session every request is rebuilt from.

    It holds each record kind the strategies treat differently: an injected
    AGENTS.md block, user turns with constraints, reasoning, assistant prose,
    tool calls with their outputs (one an error) and a later user turn. No
    system record: the call shape's system prompt is the one sent.
    """
    sid = "verify-canonical"
    items: list[tuple[str, str, dict[str, Any]]] = [
        (
            "user",
            "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nRun `pytest -q` before you say you are "
            "done.\n</INSTRUCTIONS>",
            {"injected": True},
        ),
        (
            "user",
            "The invoice export rounds refunds the wrong way. Fix it, never touch migrations/0007, and keep "
            "the API on port 7412.",
            {},
        ),
        ("reasoning", "The rounding probably happens in export/invoice.py; read it before changing anything.", {}),
        ("assistant", "I will read export/invoice.py to find where amounts are rounded.", {}),
        (
            "tool_call",
            tool_call_text("read_file", {"path": "export/invoice.py"}),
            {"tool": "read_file", "target": "export/invoice.py", "call_id": "call-1"},
        ),
        (
            "tool_output",
            "def total(rows):\n    return round(sum(r.amount for r in rows), 2)\n",
            {"tool": "read_file", "target": "export/invoice.py", "call_id": "call-1"},
        ),
        (
            "tool_call",
            tool_call_text("bash", {"command": "pytest -q tests/test_invoice.py"}),
            {"tool": "bash", "target": "pytest -q tests/test_invoice.py", "call_id": "call-2"},
        ),
        (
            "tool_output",
            "F.\nFAILED tests/test_invoice.py::test_refund_rounding - AssertionError: -10.05 != -10.04"
            "\n1 failed, 1 passed in 0.12s",
            {"tool": "bash", "target": "pytest -q tests/test_invoice.py", "call_id": "call-2", "is_error": True},
        ),
        (
            "assistant",
            "The export rounds floats half to even on the binary value; I switched it to Decimal with "
            "ROUND_HALF_UP. The p95 of the export was 184 ms before the change.",
            {},
        ),
        (
            "tool_call",
            tool_call_text(
                "edit_file", {"path": "export/invoice.py", "old_string": "round(", "new_string": "quantize_money("}
            ),
            {"tool": "edit_file", "target": "export/invoice.py", "call_id": "call-3"},
        ),
        (
            "tool_output",
            "Edited export/invoice.py (1 replacement).",
            {"tool": "edit_file", "target": "export/invoice.py", "call_id": "call-3"},
        ),
        ("user", "Good. Add a test for negative amounts too.", {}),
        ("assistant", "Adding tests/test_invoice.py::test_negative_amounts and running the suite.", {}),
        (
            "tool_call",
            tool_call_text("bash", {"command": "pytest -q"}),
            {"tool": "bash", "target": "pytest -q", "call_id": "call-4"},
        ),
        ("tool_output", "...\n3 passed in 0.21s", {"tool": "bash", "target": "pytest -q", "call_id": "call-4"}),
        ("assistant", "All three tests pass; migrations/0007 is untouched.", {}),
    ]
    records = [
        Record(session_id=sid, entry_id=f"v{i:02d}", block_index=0, source_order=i, kind=kind, text=text, **extra)
        for i, (kind, text, extra) in enumerate(items)
    ]
    return Session(id=sid, source_format="verify", records=tuple(records))


def canonical_question() -> Question:
    """Return the fixed exam question the reader requests carry."""
    return Question(
        id="verify-q1",
        case_id="verify-case",
        pointer="user",
        category="user_constraint",
        prompt="Which port must the API stay on?",
        answer="7412",
        source_entry_id="v01",
        source_order=1,
    )


def _session_sha(session: Session) -> str:
    return sha256_json([dataclasses.asdict(r) for r in session.records])


def verify_context(call_shape: CallShape, summarizer: Any) -> CompactionContext:
    """Return the compaction context requests are rebuilt with (fixed window, ceiling and params)."""
    return CompactionContext(
        window=VERIFY_WINDOW,
        output_ceiling=VERIFY_OUTPUT_CEILING,
        shape=call_shape,
        summarizer=summarizer,
        params=dict(VERIFY_PARAMS),
    )


# --------------------------------------------------------------------------- call shapes


def default_shape_name() -> str:
    """Name of the call shape the suite uses by default (`CallShape.default`)."""
    return CallShape.default().name


def load_shapes(shapes_dir: str | Path | None = None) -> dict[str, CallShape]:
    """Every call-shape file of a folder, by file stem.

    Raises
    ------
    ValueError
        A file that is not a call shape (not JSON, no ``system_prompt``, tools not a list).
    """
    out: dict[str, CallShape] = {}
    for f in shape_files(shapes_dir):
        try:
            call_shape = CallShape.load(f)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{f.name} is not a call shape ({type(exc).__name__}: {exc})") from None
        if not isinstance(call_shape.system_prompt, str) or not all(isinstance(t, Mapping) for t in call_shape.tools):
            raise ValueError(f"{f.name} is not a call shape (system_prompt must be text, tools a list of objects)")
        out[f.stem] = call_shape
    return out


def _keyed_tools(tools: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """sha256 of each tool definition by name (a repeated name gets ``#2``, ``#3``...)."""
    out: dict[str, str] = {}
    for t in tools:
        name = key = tool_name(t)
        n = 1
        while key in out:
            n += 1
            key = f"{name}#{n}"
        out[key] = sha256_json(dict(t))
    return out


def shape_entry(call_shape: CallShape) -> dict[str, Any]:
    """Return a call shape's manifest entry: fingerprints of its system prompt and each tool, and the tool order."""
    return {
        "name": call_shape.name,
        "fingerprint": shape_fingerprint(call_shape.system_prompt, call_shape.tools),
        "system": sha256_text(call_shape.system_prompt),
        "tools": _keyed_tools(call_shape.tools),
        "tool_order": tool_names(call_shape.tools),
    }


# --------------------------------------------------------------------------- summary requests


class RecordingSummarizer:
    """A summarizer that keeps every request it receives and answers a fixed text (no model)."""

    name = "verify-recorder"
    stand_in = True

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Keep `request` and answer the fixed text."""
        self.requests.append(request)
        return SummaryResult(RECORDED_ANSWER)


def strategy_prompts(strategy: Any, ctx: CompactionContext) -> dict[str, str]:
    """Return the prompt texts a strategy uses, by name.

    Strategies with a ``prompts(ctx)`` method (Codex, OpenCode) say so
    themselves; claude-code exposes ``instruction(ctx)`` (its forked request
    sends the session's own system prompt); FutureOS keeps its instruction at module level.
    Every text is read at call time, so an edited constant shows.
    """
    if callable(getattr(strategy, "prompts", None)):
        return {str(k): str(v) for k, v in strategy.prompts(ctx).items()}
    from compaction_lab.strategies.arms import futureos

    if isinstance(strategy, futureos.FutureOS):
        return (
            {"instruction": futureos.handoff_instruction(ctx), "summary_prefix": futureos.SUMMARY_PREFIX}
            if strategy.summarized
            else {}
        )
    out: dict[str, str] = {}
    for key, attr in (("system", "system_prompt"), ("instruction", "instruction")):
        fn = getattr(strategy, attr, None)
        if callable(fn):
            out[key] = str(fn(ctx))
    return out


def _tools_from(tools: Sequence[Mapping[str, Any]], call_shape: CallShape) -> str:
    """Where a request's tool definitions come from: none, the call shape, the call shape plus the history tools."""
    sent = canonical_json([dict(t) for t in tools])
    if not tools:
        return "none"
    if sent == canonical_json([dict(t) for t in call_shape.tools]):
        return "call-shape"
    if sent == canonical_json([dict(t) for t in open_book_tools(call_shape.tools)]):
        return "call-shape+history"
    return "other"


def _roles(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(m.get("role")) for m in messages]


def _instruction_at_end(messages: Sequence[Mapping[str, Any]], prompts: Mapping[str, str]) -> bool | None:
    """Whether the last message is a user message ending with the strategy's instruction (None: none known)."""
    instruction = prompts.get("instruction") or prompts.get("instructions")
    if not instruction:
        return None
    if not messages or messages[-1].get("role") != "user":
        return False
    content = messages[-1].get("content")
    return isinstance(content, str) and content.rstrip().endswith(instruction.rstrip())


def summary_entry(name: str, session: Session, call_shape: CallShape) -> dict[str, Any] | None:
    """Return the manifest entry of one strategy's summary request (None when it sends none)."""
    recorder = RecordingSummarizer()
    ctx = verify_context(call_shape, recorder)
    projection = strategies.compact(session, name, None, ctx)
    request = recorder.requests[0] if recorder.requests else projection.summary_request
    if request is None:
        return None
    prompts = strategy_prompts(strategies.get(name), ctx)
    return {
        "shape": request.shape,
        "call_shape": call_shape.name,
        "template": request.template,
        "max_output_tokens": int(request.max_output_tokens),
        "calls": len(recorder.requests),
        "system": sha256_text(request.system),
        "system_from": "call-shape" if request.system == call_shape.system_prompt else "own",
        "tools": sha256_json([dict(t) for t in request.tools]),
        "tools_from": _tools_from(request.tools, call_shape),
        "tool_names": tool_names(request.tools),
        "prompts": {k: sha256_text(v) for k, v in sorted(prompts.items())},
        "roles": _roles(request.messages),
        "instruction_at_end": _instruction_at_end(request.messages, prompts),
        "fingerprint": request.fingerprint(),
        "shape_fingerprint": request.shape_fingerprint(),
    }


# --------------------------------------------------------------------------- exam requests


def open_book_tools(shape_tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the tools an open-book request sends: the call shape's, then each history tool it lacks."""
    own = [dict(t) for t in shape_tools]
    have = {canonical_json(t) for t in own}
    return own + [dict(t) for t in readers.HISTORY_TOOL_DEFINITIONS if canonical_json(dict(t)) not in have]


def reader_request(
    messages: Sequence[Mapping[str, Any]], question: Question, tools: Sequence[Mapping[str, Any]], wording: str = ""
) -> dict[str, Any]:
    """Return the canonical body of one exam request: messages as `readers.request_messages` builds them, tools."""
    return {"messages": readers.request_messages(messages, question, wording), "tools": [dict(t) for t in tools]}


def _question_sent(messages: Sequence[Mapping[str, Any]], wording: str) -> bool:
    """Whether the last message is the question with `reading.QUESTION_INSTRUCTION` and the round's wording.

    The instruction is read from the module at call time, so this is False
    when the text a reader sends is not the one the module documents.
    """
    last = messages[-1] if messages else {}
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, str):
        return False
    return reading.QUESTION_INSTRUCTION.strip() in content and content.endswith(wording.strip())


def _request_entry(body: Mapping[str, Any], call_shape: CallShape, wording: str = "") -> dict[str, Any]:
    msgs = body["messages"]
    first = msgs[0] if msgs else {}
    system_from = (
        "call-shape" if first.get("role") == "system" and first.get("content") == call_shape.system_prompt else "other"
    )
    return {
        "question_sent": _question_sent(msgs, wording),
        "system": sha256_text(str(first.get("content", ""))) if first.get("role") == "system" else None,
        "system_from": system_from,
        "tools": sha256_json(body["tools"]),
        "tools_from": _tools_from(body["tools"], call_shape),
        "tool_names": tool_names(body["tools"]),
        "roles": _roles(msgs),
        "fingerprint": sha256_json(body),
    }


def exam_entry(session: Session, call_shape: CallShape) -> dict[str, Any]:
    """Return the manifest entry of the exam's reader requests (closed book and the five open-book rounds)."""
    ctx = verify_context(call_shape, RecordingSummarizer())
    projection = strategies.compact(session, EXAM_PROJECTION, None, ctx)
    messages = projection.messages()
    shape_tools = open_book.shape_tools_of(projection)
    question = canonical_question()
    rounds: dict[str, Any] = {}
    for rnd in open_book.make_rounds():
        tools = open_book_tools(shape_tools) if rnd.book == "open" else list(shape_tools)
        body = reader_request(messages, question, tools, rnd.wording)
        rounds[str(rnd.number)] = {
            "book": rnd.book,
            "search": rnd.search,
            "wording": sha256_text(rnd.wording),
            **_request_entry(body, call_shape, rnd.wording),
        }
    return {
        "call_shape": call_shape.name,
        "projection": EXAM_PROJECTION,
        "question_instruction": sha256_text(reading.QUESTION_INSTRUCTION),
        "history_tools": _keyed_tools(readers.HISTORY_TOOL_DEFINITIONS),
        "closed_book": _request_entry(reader_request(messages, question, shape_tools), call_shape),
        "open_book": rounds,
    }


# --------------------------------------------------------------------------- manifest


def build_manifest(shapes_dir: str | Path | None = None) -> dict[str, Any]:
    """Rebuild every request offline and fingerprint it (see the module docstring).

    Parameters
    ----------
    shapes_dir : path, optional
        Folder of call-shape files (default ``data/shapes``). The default call shape
        (`CallShape.default`'s name) is read from it, so an edited copy
        changes the summary and exam requests too.

    Returns
    -------
    dict
        JSON-ready; equal on every machine and run for the same code and shapes.
    """
    call_shapes = load_shapes(shapes_dir)
    default = default_shape_name()
    if default not in call_shapes:
        where = Path(shapes_dir).name if shapes_dir is not None else "data/shapes"
        raise ValueError(f"the default call shape {default!r} has no file {default}.json in {where}")
    call_shape = call_shapes[default]
    session = canonical_session()
    return {
        "version": MANIFEST_VERSION,
        "default_shape": default,
        "canonical": {
            "session": _session_sha(session),
            "question": sha256_json(dataclasses.asdict(canonical_question())),
            "window": VERIFY_WINDOW,
            "output_ceiling": VERIFY_OUTPUT_CEILING,
            "params": dict(VERIFY_PARAMS),
        },
        "shapes": {stem: shape_entry(s) for stem, s in call_shapes.items()},
        "summary": {name: summary_entry(name, session, call_shape) for name in strategies.names()},
        "exam": exam_entry(session, call_shape),
    }


def documented_request_shapes() -> dict[str, str]:
    """Return the summary-request shape of each listed arm that documents one, by arm name.

    Each arm declares the request shape docs/strategies.md documents for it where it registers
    (``STRATEGIES.add(..., request_shape=...)``), written out rather than taken from the code
    that builds the request, so the check below is independent of that code and of the lock.
    """
    listed = set(strategies.names())
    return {
        e.name: str(e.meta["request_shape"])
        for e in STRATEGIES.entries()
        if e.name in listed and "request_shape" in e.meta
    }


def request_shape_rules() -> dict[str, Mapping[str, Any]]:
    """Return every request shape's rules: `REQUEST_SHAPE_RULES`, and those a strategy declares.

    A strategy whose request has a shape of its own declares its rules where it registers
    (``STRATEGIES.add(..., request_shape="mine", request_shape_rules={"mine": {...}})``), so a new
    request shape is checked without editing this module. A shape declared twice with different rules
    is a ValueError naming it.
    """
    rules: dict[str, Mapping[str, Any]] = dict(REQUEST_SHAPE_RULES)
    for entry in STRATEGIES.entries():
        for shape, declared in (entry.meta.get("request_shape_rules") or {}).items():
            if shape in rules and dict(rules[shape]) != dict(declared):
                raise ValueError(
                    f"request shape {shape!r}: {entry.name} declares rules that differ from the known ones"
                )
            rules[shape] = declared
    return rules


def documented_problems(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """Where a manifest breaks what the specs document (independent of any lock).

    * each arm of `documented_request_shapes` sends a request of its
      documented request shape, and every request follows its request shape's rules
      (`REQUEST_SHAPE_RULES`);
    * exam requests carry the call shape's system prompt and tools (plus the
      history tools on the open arm) and end with the question,
      `reading.QUESTION_INSTRUCTION` and the round's wording;
    * a call shape offering ``history_search`` / ``history_get`` offers the exam's
      own definitions.
    """
    problems: list[str] = []
    summary = manifest.get("summary", {})
    for name, documented in documented_request_shapes().items():
        entry = summary.get(name)
        if name not in summary:
            problems.append(
                f"summary.{name}: strategy not registered (docs/strategies.md documents a {documented} request)"
            )
        elif entry is None:
            problems.append(
                f"summary.{name}: sends no summary request (docs/strategies.md documents a {documented} request)"
            )
        elif entry["shape"] != documented:
            problems.append(f"summary.{name}.shape: {entry['shape']!r}, documented as {documented!r}")
    for name, entry in summary.items():
        if entry is None:
            continue
        known = request_shape_rules()
        rules = known.get(entry["shape"])
        if rules is None:
            problems.append(
                f"summary.{name}.shape: unknown request shape {entry['shape']!r} (known: {', '.join(known)})"
            )
            continue
        for key, want in rules.items():
            if entry.get(key) != want:
                problems.append(f"summary.{name}.{key}: {entry.get(key)!r}, a {entry['shape']} request has {want!r}")
    exam = manifest.get("exam", {})
    reqs = [("exam.closed_book", exam.get("closed_book", {}), "call-shape")]
    reqs += [
        (f"exam.open_book.{n}", r, "call-shape+history" if r.get("book") == "open" else "call-shape")
        for n, r in exam.get("open_book", {}).items()
    ]
    for key, entry, tools_want in reqs:
        if entry.get("system_from") != "call-shape":
            problems.append(
                f"{key}.system_from: {entry.get('system_from')!r}, the exam sends the call shape's system prompt"
            )
        if entry.get("tools_from") != tools_want:
            problems.append(f"{key}.tools_from: {entry.get('tools_from')!r}, expected {tools_want!r}")
        if entry.get("question_sent") is not True:
            problems.append(
                f"{key}.question_sent: the last message is not the question with "
                "reading.QUESTION_INSTRUCTION and the round's wording"
            )
    history = exam.get("history_tools", {})
    for stem, entry in manifest.get("shapes", {}).items():
        for tool, digest in entry.get("tools", {}).items():
            if tool in history and digest != history[tool]:
                problems.append(
                    f"shapes.{stem}.tools.{tool}: differs from the exam's {tool} definition "
                    "(exam.readers); the open book would offer two"
                )
    return tuple(problems)


def manifest_text(manifest: Mapping[str, Any]) -> str:
    """Pretty JSON with sorted keys: the lock file's text and the form diffs compare."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values of nested mappings by dotted key (lists and None are leaves)."""
    if isinstance(obj, Mapping) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    """Dotted keys whose values differ, or that only one side has, sorted."""
    a, b = flatten(old), flatten(new)
    return tuple(sorted(k for k in set(a) | set(b) if a.get(k, _MISSING) != b.get(k, _MISSING)))


_MISSING = object()


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of `verify`.

    Parameters
    ----------
    ok : bool
        The rebuilt manifest equals the lock and breaks nothing documented.
    diff : str
        Unified diff of the lock's pretty JSON against the rebuilt one ("" when equal).
    changed : tuple of str
        Dotted keys that differ (``shapes.synthetic-agent.system``,
        ``summary.codex.prompts.instruction``, ...).
    problems : tuple of str
        Breaches of the documented request shapes (`documented_problems`).
    lock_path : str
    lock_missing : bool
        No lock file was found (every key counts as changed).
    manifest : mapping
        The rebuilt manifest.
    """

    ok: bool
    diff: str
    changed: tuple[str, ...]
    problems: tuple[str, ...] = ()
    lock_path: str = ""
    lock_missing: bool = False
    manifest: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def parts(self) -> tuple[str, ...]:
        """Return the changed parts, two levels deep.

        For example ``shapes.coding-agent``, ``summary.codex``, ``exam.closed_book``.
        """
        return tuple(dict.fromkeys(".".join(k.split(".")[:2]) for k in self.changed))


def default_lock_path(shapes_dir: str | Path | None = None) -> Path:
    """Return the lock beside the shapes: ``<shapes_dir>/verify.lock.json`` (default ``data/shapes``)."""
    return (Path(shapes_dir) if shapes_dir is not None else paths.SHAPES_DIR) / LOCK_NAME


def verify(lock_path: str | Path | None = None, shapes_dir: str | Path | None = None) -> VerifyResult:
    """Rebuild the manifest and compare it with the lock.

    Parameters
    ----------
    lock_path : path, optional
        Default: `default_lock_path` of `shapes_dir`.
    shapes_dir : path, optional
        Default ``data/shapes``.
    """
    lock = Path(lock_path) if lock_path is not None else default_lock_path(shapes_dir)
    rebuilt = build_manifest(shapes_dir)
    problems = documented_problems(rebuilt)
    try:
        locked: Mapping[str, Any] = json.loads(lock.read_text(encoding="utf-8"))
        missing = False
    except FileNotFoundError:
        locked, missing = {}, True
    except ValueError as exc:
        raise ValueError(f"{lock.name} is not JSON ({exc}); rebuild it with `compaction-lab verify --update`") from None
    old_text, new_text = (manifest_text(locked) if not missing else ""), manifest_text(rebuilt)
    diff = (
        ""
        if old_text == new_text
        else "".join(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                new_text.splitlines(keepends=True),
                fromfile=f"{lock.name} (locked)",
                tofile=f"{lock.name} (rebuilt)",
            )
        )
    )
    changed = changed_keys(locked, rebuilt)
    return VerifyResult(
        ok=not diff and not problems,
        diff=diff,
        changed=changed,
        problems=problems,
        lock_path=str(lock),
        lock_missing=missing,
        manifest=rebuilt,
    )


def update_lock(lock_path: str | Path | None = None, shapes_dir: str | Path | None = None) -> Path:
    """Rebuild the manifest and write it as the lock; returns the lock's path.

    Documented-request-shape problems are not a reason to refuse (the lock records
    what is); `verify` keeps reporting them until they are fixed.
    """
    lock = Path(lock_path) if lock_path is not None else default_lock_path(shapes_dir)
    text = manifest_text(build_manifest(shapes_dir))
    lock.parent.mkdir(parents=True, exist_ok=True)
    tmp = lock.with_name(lock.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(lock)
    return lock


def counts(manifest: Mapping[str, Any]) -> tuple[int, int]:
    """(shapes, summary requests) a manifest covers."""
    return len(manifest.get("shapes", {})), sum(1 for v in manifest.get("summary", {}).values() if v is not None)


def report_text(result: VerifyResult) -> str:
    """Return what ``compaction-lab verify`` prints."""
    n_shapes, n_summary = counts(result.manifest)
    if result.ok:
        return f"verify: ok ({n_shapes} shapes, {n_summary} summary requests, exam requests)"
    lines = ["verify: FAILED"]
    if result.lock_missing:
        lines.append(f"no lock file at {result.lock_path}")
    elif result.changed:
        lines.append(f"changed since the lock ({Path(result.lock_path).name}): {', '.join(result.parts())}")
        lines += [f"  {k}" for k in result.changed]
    if result.problems:
        lines.append("not the documented request shapes (docs/strategies.md / docs/exams.md):")
        lines += [f"  {p}" for p in result.problems]
    if result.diff and not result.lock_missing:  # with no lock the diff is the whole manifest
        lines += ["", result.diff.rstrip("\n"), ""]
    if result.lock_missing or result.changed:
        lines.append("If the change is intended, run `compaction-lab verify --update` and commit the lock.")
    return "\n".join(lines)


__all__ = [
    "EXAM_PROJECTION",
    "MANIFEST_VERSION",
    "REQUEST_SHAPE_RULES",
    "request_shape_rules",
    "RecordingSummarizer",
    "VERIFY_OUTPUT_CEILING",
    "VERIFY_PARAMS",
    "VERIFY_WINDOW",
    "VerifyResult",
    "build_manifest",
    "canonical_question",
    "canonical_session",
    "changed_keys",
    "counts",
    "default_lock_path",
    "default_shape_name",
    "documented_problems",
    "documented_request_shapes",
    "exam_entry",
    "flatten",
    "load_shapes",
    "manifest_text",
    "open_book_tools",
    "reader_request",
    "report_text",
    "shape_entry",
    "strategy_prompts",
    "summary_entry",
    "update_lock",
    "verify",
]
