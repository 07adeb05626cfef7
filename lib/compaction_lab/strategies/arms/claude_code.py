"""``claude-code``: Claude Code's compaction, **reconstructed** (its source is not public).

Claude Code (v2.x, ``services/compact/``) ships as a minified bundle with no public repository to
pin: every rule is reconstructed from public analyses and Anthropic's documentation, and the
TypeScript extracted from npm ``@anthropic-ai/claude-code`` 2.1.88 (Jayleonc/claude-code-source-code
@ 83fba929f14ad08f743591c19e945afe5130ab13, a third party's copy). Tables label the arm
``claude-code (reconstructed)`` (`LABEL_TAG`, read by `labels.strategy_label`).

Key names: `ClaudeCode` (the strategy), `fork_request`, `output_cap`, `format_summary`, `microcompact`,
`recent_files` / `apply_edit` / `read_view`, `live_history`, `NINE_SECTION_INSTRUCTION`,
`SUMMARY_PREFACE`, `CONTINUE_INSTRUCTION`, `REBUILT_LABEL`, `FILE_UNKNOWN`.

Rules, reconstruction decisions, what is not modelled: docs/strategies.md#claude_code; each rule's
source and the function here: docs/strategies.md#claude_code-sources-reconstructed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compaction_lab.core import bounded_json
from compaction_lab.core.fingerprints import sha256_text
from compaction_lab.core.projection import Projection, Segment, SentRequest, SummaryReceipt, SummaryRequest
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import counter, truncate_tokens
from compaction_lab.strategies.base import (
    COMPACTION_FAILED,
    STRATEGIES,
    CompactionContext,
    est_chars4,
    failure_mode,
    history,
    projection,
    read_prompt,
    record_messages,
    role_of,
    summarize_or_template,
    summary_label,
)

ALGORITHM_VERSION = "claude-code-4"

#: Shown after the name in every table and figure: Claude Code's source is not public.
LABEL_TAG = "reconstructed"

AUTOCOMPACT_BUFFER = 13_000  # AUTOCOMPACT_BUFFER_TOKENS, autoCompact.ts:62 [M]
#: Reserved for the summary's output in the effective window: ``min(O, 20,000)`` (MAX_OUTPUT_TOKENS_FOR_SUMMARY,
#: autoCompact.ts:30-37 [M]). The trigger's constant only; it caps no request.
RESERVED_OUTPUT_CAP = 20_000
MAX_FILES_TO_RESTORE = 5  # POST_COMPACT_MAX_FILES_TO_RESTORE
MAX_TOKENS_PER_FILE = 5_000  # POST_COMPACT_MAX_TOKENS_PER_FILE
FILES_TOKEN_BUDGET = 50_000  # POST_COMPACT_TOKEN_BUDGET
CLEARED_TOOL_RESULT = "[Old tool result content cleared]"

#: ``notes["compaction_failed"]`` when the summarizer answered with no text: upstream's compaction throws
#: (``getAssistantMessageText`` trims the text, ``""`` is null, messages.ts:2843-2859; ``if (!summary)`` throws
#: "Failed to generate conversation summary", compact.ts:493-506 [M]) and auto-compact returns
#: ``wasCompacted: false`` (autoCompact.ts:334-349 [M]): the next request carries the history unchanged.
NO_SUMMARY_TEXT = "empty answer: Claude Code throws 'Failed to generate conversation summary' and does not compact"
# A failed summary call (param ``on_failure``, `base.ON_FAILURE_CHOICES`; default ``"upstream"``): the summarizer
# unavailable or raising stands for the API failing. Upstream's fork then fails — the API error comes back as a
# synthetic ``isApiErrorMessage`` or throws, and the fork falls back (compact.ts:1201-1247 [M]) — and so does the
# streaming fallback to the same model: its error is yielded as an assistant message starting "API Error"
# (claude.ts:2743-2806), which ``compactConversation`` throws (compact.ts:507-515), or no response comes and it
# throws (compact.ts:1359-1392). ``compactConversation`` rethrows (compact.ts:749-756), ``autoCompactIfNeeded``
# returns ``wasCompacted: false`` (autoCompact.ts:334-349) and the turn goes on with ``messagesForQuery`` as it
# was, microcompact applied (query.ts:419, 454-549): the history unchanged, ``notes["compaction_failed"]`` = the
# receipt's error. ``"placeholder"``: compact around the empty template (the lab's behaviour before issue 46).
# Not modelled: the fallback's caller checks only the "API Error" prefix, so an error worded otherwise (a timeout's
# "Request timed out", errors.ts:433-443) becomes the summary upstream; the receipt keeps no error kind to tell.

#: Label of a record microcompact cleared, in a history sent unchanged.
MICROCOMPACT_LABEL = "microcompact (cleared tool result)"

TEMPLATE = "claude-code-9"
REQUEST_SHAPE = "prefix-shared"
ESTIMATOR = "tiktoken"

#: Tool names (lower case) whose results upstream re-attaches as files.
READ_TOOLS = frozenset({"read", "read_file", "readfile", "file_read", "view", "view_file"})
TODO_TOOLS = frozenset({"todowrite", "todo_write", "todo", "update_todos"})
#: The tools whose results microcompact clears, exactly upstream's set (microCompact.ts:41-50 [M]: Read, the
#: shell tools Bash and PowerShell, Grep, Glob, WebSearch, WebFetch, Edit, Write), compared as upstream
#: does (``Set.has``: exact, case-sensitive). Not MultiEdit, NotebookEdit, MCP (``mcp__*``) or any other tool.
COMPACTABLE_TOOLS = frozenset({"Read", "Bash", "PowerShell", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write"})
#: Another agent's name for one of those tools (a session imported from pi, OpenCode, Codex or the synthetic
#: bank): read as its Claude Code counterpart, as `READ_TOOLS` reads them for re-attachment. Exact names; none
#: is a name Claude Code itself gives a tool (its built-ins are capitalised, MCP tools ``mcp__``-prefixed).
FOREIGN_COMPACTABLE_TOOLS = frozenset(
    {
        "read",
        "read_file",
        "readfile",
        "file_read",
        "view",
        "view_file",
        "bash",
        "shell",
        "exec_command",
        "grep",
        "glob",
        "websearch",
        "web_search",
        "webfetch",
        "web_fetch",
        "edit",
        "edit_file",
        "write",
        "write_file",
    }
)
#: Files upstream never re-attaches (re-injected from disk with every request instead).
_NOT_RESTORED = re.compile(r"(^|/)(CLAUDE(\.local)?\.md|MEMORY\.md)$", re.I)

#: The compact instruction appended to the forked conversation (our words, upstream's instructions).
NINE_SECTION_INSTRUCTION = "\n".join(
    (
        "Reply with text only and do not call any tools: tool calls will be rejected, and this turn must "
        "produce the summary.",
        "",
        "Write a detailed summary of the conversation above so that the work can continue without it. Pay "
        "close attention to what the user explicitly asked for and to what was done in response. Capture the "
        "technical details, code patterns and design decisions someone would need to carry on the development"
        " work.",
        "",
        "Before the summary, think it through inside <analysis> tags. Go through the conversation in order "
        "and, for each part, note: the user's explicit requests and intent; how they were addressed; key "
        "decisions, technical concepts and code patterns; concrete details such as file names, full code "
        "snippets, function signatures and edits; errors met and how they were fixed; and any feedback from "
        "the user, above all where the user asked for something to be done differently. Then check your notes"
        " for technical accuracy and completeness.",
        "",
        "Then write the summary inside <summary> tags with exactly these nine sections:",
        "1. Primary Request and Intent: every explicit request and intent of the user, in detail.",
        "2. Key Technical Concepts: the important technical concepts, technologies and frameworks discussed.",
        "3. Files and Code Sections: the files and code sections examined, changed or created, with why each "
        "read or edit matters; give full snippets where they help, most of all for the latest messages.",
        "4. Errors and Fixes: every error met and how it was fixed, including the user's feedback on it.",
        "5. Problem Solving: the problems solved and any troubleshooting still under way.",
        "6. All User Messages: every user message that is not a tool result, listed; they show the user's "
        "feedback and how their intent changed.",
        "7. Pending Tasks: the tasks you were explicitly asked to do that are not finished.",
        "8. Current Work: precisely what was being worked on just before this summary, from the latest user "
        "and assistant messages, with file names and code snippets.",
        "9. Optional Next Step: the next step, only if it follows directly from the user's most recent "
        "explicit request and the work in progress; if the last task was finished, name a next step only if "
        "the user asked for it. Quote the latest messages verbatim to show exactly where the work stopped. Do"
        " not pick up side requests or old requests that were already done without asking the user first.",
        "",
        "Do not use any tools. Reply with the <summary> block only after your analysis.",
    )
)

#: First part of the summary user message (our words for upstream's continuation preface).
SUMMARY_PREFACE = (
    "This session continues an earlier conversation that ran out of context. The summary "
    "below covers the earlier part of the conversation."
)
#: Last part of the summary user message on auto-compaction (our words).
CONTINUE_INSTRUCTION = (
    "Continue the conversation from where it stopped without asking the user any further "
    "questions. Resume directly: do not acknowledge the summary or recap what was happening; "
    "carry on with the last task you were asked to work on."
)
FILE_HEADER = "[Re-attached after compaction: {path} — its content when it was last read (entry {entry}).]"
FILE_HEADER_CHANGED = (
    "[Re-attached after compaction: {path} — its content after the last change to it (entry {entry}).]"
)
#: Label of a changed file's content, rebuilt from the log (a write's text, or edits replayed on a read).
REBUILT_LABEL = "file rebuilt from the log"
#: A file the session changed whose new content the log does not hold: its path only (our words).
FILE_UNKNOWN = (
    "[{path} was read or changed before the conversation was summarised; its current content is not "
    "re-attached. Read it again if you need it.]"
)
FILE_REFERENCE = (
    "[{path} was read before the conversation was summarised, but it is too large to re-attach "
    "({tokens} tokens). Read it again if you need it.]"
)
TODO_HEADER = "[The todo list at compaction, as last written (entry {entry}):]\n{text}"


# --------------------------------------------------------------------------- helpers


def _count(text: str, ctx: CompactionContext) -> int:
    return counter(ctx.encoding).count(text)


def live_history(session: Session, cut: int, ctx: CompactionContext) -> list[Record]:
    """Return the records the session's next request would carry (the system-prompt record is the system prompt).

    After a compaction Claude Code's conversation restarts at the compact
    boundary: its next request holds the compact summary (the user message
    ``isCompactSummary``, imported as a ``summary`` record) and what came after
    it, never the messages before (``compact.ts`` ``buildPostCompactMessages``;
    the transcript keeps them only for the UI). So the live history starts at
    the latest ``summary`` record before the cut. A session from another agent
    is read the same way: its recorded compaction summary stands for Claude
    Code's summary message (the rule every arm follows for a foreign agent's
    compaction).
    """
    sp = ctx.shape.system_prompt
    recs = [r for r in history(session, cut) if not (r.kind == "system" and r.text == sp)]
    last = max((i for i, r in enumerate(recs) if r.kind == "summary"), default=None)
    return recs if last is None else recs[last:]


def is_compactable(tool: str | None) -> bool:
    """Whether microcompact may clear this tool's results: upstream's `COMPACTABLE_TOOLS`, exact names.

    ``COMPACTABLE_TOOLS.has(block.name)`` (microCompact.ts:234 [M]): case-sensitive, no MCP tools, no
    MultiEdit. Another agent's name for the same tool (`FOREIGN_COMPACTABLE_TOOLS`) counts as it.
    """
    return tool is not None and (tool in COMPACTABLE_TOOLS or tool in FOREIGN_COMPACTABLE_TOOLS)


def microcompact(records: Sequence[Record], keep_recent: int) -> tuple[list[Record], int]:
    """Clear the results of every compactable tool call but the `keep_recent` newest (at least one).

    Upstream's time-based microcompact (microCompact.ts:446-530 [M]): the calls of compactable tools
    are listed in order (``collectCompactableToolIds``, :226-241 — the *calls*, so a call whose result
    is already cleared, or not yet in, still counts); the newest ``max(1, keepRecent)`` are kept
    (:461-463); every result of another listed call becomes `CLEARED_TOOL_RESULT` unless it already is
    (:475-485). When that saves nothing (chars/4 of what is cleared sums to 0) nothing changes
    (:494-496). A result is matched to its call by ``call_id``.

    Returns the records (cleared ones replaced by a copy whose text is `CLEARED_TOOL_RESULT`) and how
    many were cleared. The originals are untouched.
    """
    ids = [r.call_id for r in records if r.kind == "tool_call" and r.call_id and is_compactable(r.tool)]
    keep = set(ids[-max(1, keep_recent) :])
    clear_ids = {i for i in ids if i not in keep}
    clear = {
        i
        for i, r in enumerate(records)
        if r.kind == "tool_output" and r.call_id in clear_ids and r.text != CLEARED_TOOL_RESULT
    }
    if sum(est_chars4(records[i].text) for i in clear) == 0:  # tokensSaved === 0: upstream returns null
        return list(records), 0
    out = [replace(r, text=CLEARED_TOOL_RESULT) if i in clear else r for i, r in enumerate(records)]
    return out, len(clear)


def _messages(records: Sequence[Record]) -> list[dict[str, str]]:
    """Turn the records into messages as the session's own request sends them.

    The one rule the cost model prices the session's previous request by
    (`cost.model`), so the fork carries the very same messages by construction.
    """
    return [dict(m) for m in record_messages(records)]


def _turn_starts(records: Sequence[Record]) -> list[int]:
    """Find the indices where an API round starts (a real user message), the first record always."""
    starts = [i for i, r in enumerate(records) if r.kind == "user" and not r.injected]
    return sorted({0, *starts}) if records else []


_ANALYSIS_RE = re.compile(r"<analysis>.*?</analysis>", re.S)
_SUMMARY_RE = re.compile(r"<summary>(.*?)</summary>", re.S)


def format_summary(text: str) -> str:
    """Upstream's formatting of the model's answer: ``<analysis>`` dropped, ``<summary>`` → ``Summary:``."""
    out = _ANALYSIS_RE.sub("", text)
    m = _SUMMARY_RE.search(out)
    if m:
        out = out[: m.start()] + "Summary:\n" + m.group(1).strip() + out[m.end() :]
    return re.sub(r"\n\n+", "\n\n", out).strip()


# --------------------------------------------------------------------------- files re-attached after compaction
#
# Upstream (v2.1.88's TypeScript as extracted from the npm package; we read the copy at
# Jayleonc/claude-code-source-code @ 83fba929, see docs/strategies.md "claude_code: sources (reconstructed)"):
# Read, Edit, Write and NotebookEdit each store
# the file in ``readFileState`` with ``timestamp`` = the file's modification time on disk (FileReadTool.ts:1032-1037
# ``Math.floor(mtimeMs)``; FileEditTool.ts:519-524, FileWriteTool.ts:331-336, NotebookEditTool.ts:437-442
# ``getFileModificationTime``); compaction snapshots it (compact.ts:518) and createPostCompactFileAttachments
# (compact.ts:1415-1464) sorts it by that timestamp, newest first, keeps 5 and re-reads each from disk. The log
# has no modification times and no disk, so both are rebuilt from the records: see `recent_files`.


@dataclass(frozen=True)
class ReadView:
    """What a read tool's output shows of a file: its text with the line numbers taken off, and their format.

    Claude Code's Read (and ``cat -n``) prefixes each line with its number and ``→`` or a tab
    (``utils/file.ts`` addLineNumbers / stripLineNumberPrefix); an edit's old string never carries them.
    ``sep`` is empty when the output is not numbered: then ``content`` is the output as it is. ``head``
    and ``tail`` are what the output shows before and after the numbered lines (a tool's "result of
    running `cat -n`" line; Claude Code's ``<system-reminder>``), so that `render` of an unchanged
    content gives the output back exactly.
    """

    content: str
    start: int = 0
    sep: str = ""
    width: int = 0
    head: str = ""
    tail: str = ""

    def render(self, content: str) -> str:
        """`content` shown the way this view showed its file: numbered from its first line, head and tail kept."""
        if not self.sep:
            return content
        lines = content.split("\n") if content else []
        body = "\n".join(f"{str(self.start + i).rjust(self.width)}{self.sep}{ln}" for i, ln in enumerate(lines))
        return self.head + body + self.tail

    def style(self) -> ReadView:
        """Return this view's numbering from line 1 and its tail, without content or head (for a file re-read whole)."""
        return ReadView("", 1, self.sep, self.width, "", self.tail)


#: One numbered line (upstream's stripLineNumberPrefix: ``^\s*\d+[→\t](.*)$``).
_NUMBERED = re.compile(r"^( *)(\d+)([\u2192\t])(.*)$")
#: At most this many lines before the numbered ones (a tool's "Here's the result of running `cat -n`" line).
_MAX_VIEW_HEAD = 2


def read_view(text: str) -> ReadView:
    """Read the file a read output shows: one run of consecutively numbered lines, else the output itself.

    Around the run only a short head (at most two lines) and a trailer of blank lines or a tag
    (Claude Code's ``<system-reminder>``) are allowed; anything else means the output is not a
    numbered listing, and it is taken as it is.
    """
    raw = ReadView(text)
    lines = text.split("\n")
    first = next((i for i, ln in enumerate(lines[: _MAX_VIEW_HEAD + 1]) if _NUMBERED.match(ln)), None)
    if first is None:
        return raw
    m = _NUMBERED.match(lines[first])
    assert m is not None
    start, sep = int(m.group(2)), m.group(3)
    width = len(m.group(1)) + len(m.group(2)) if m.group(1) else 0
    body: list[str] = []
    i = first
    while i < len(lines) and (m := _NUMBERED.match(lines[i])) and int(m.group(2)) == start + len(body):
        if m.group(3) != sep:
            break
        body.append(m.group(4))
        i += 1
    rest = [ln for ln in lines[i:] if ln.strip()]
    if rest and not rest[0].lstrip().startswith("<"):
        return raw
    head = "".join(ln + "\n" for ln in lines[:first])
    tail = "".join("\n" + ln for ln in lines[i:])
    return ReadView("\n".join(body), start, sep, width, head, tail)


#: Tool names (lower case) that write a whole file (its text in ``content``; ``file_text`` for an editor's create).
WRITE_TOOLS = frozenset({"write", "write_file", "writefile", "file_write", "create_file"})
#: Tool names (lower case) that change part of a file (old → new strings, a notebook cell, a patch).
EDIT_TOOLS = frozenset(
    {"edit", "edit_file", "editfile", "file_edit", "multiedit", "multi_edit", "notebookedit", "notebook_edit"}
)
#: Editors that take a ``command`` (view / create / str_replace / insert): Anthropic's text editor tool.
EDITOR_TOOLS = frozenset({"str_replace_based_edit_tool", "str_replace_editor", "text_editor"})
#: Tools whose call is a Codex-style patch (``*** Begin Patch``); a shell call carrying one is read the same way.
PATCH_TOOLS = frozenset({"apply_patch", "patch"})
#: Shell tools (lower case): a shell call that runs ``apply_patch`` is read as that patch.
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run_shell_command"})
#: Claude Code's Read answer for a file it already showed, unchanged (FileReadTool/prompt.ts FILE_UNCHANGED_STUB).
UNCHANGED_STUB = "File unchanged since last read."

_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path")
_OLD_KEYS = ("old_string", "oldString", "old_str", "oldText", "old_text")
_NEW_KEYS = ("new_string", "newString", "new_str", "newText", "new_text")
_ALL_KEYS = ("replace_all", "replaceAll")
_CONTENT_KEYS = ("content", "file_text")
_PATCH_HEAD = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$")


def call_args(rec: Record) -> Any:
    """Decode a tool call's arguments from its text (``name {json}``, `core.text.tool_call_text`).

    Returns the decoded JSON value; the raw argument string when it is not JSON or nests deeper than
    `bounded_json.MAX_DEPTH`; None when there is none.
    """
    name = rec.tool or ""
    raw = rec.text[len(name) + 1 :] if name and rec.text.startswith(name + " ") else rec.text
    if not raw.strip() or raw == name:
        return None
    return bounded_json.parse_or_text(raw)


def _first_str(args: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    return next((v for k in keys if isinstance(v := args.get(k), str)), None)


def _patch_text(args: Any) -> str | None:
    """Find the ``*** Begin Patch`` text a call carries (its raw input, or any string argument), if any."""
    if isinstance(args, str):
        return args if "*** Begin Patch" in args else None
    if isinstance(args, Mapping):
        return next((t for v in args.values() if (t := _patch_text(v)) is not None), None)
    if isinstance(args, list):
        return next((t for v in args if (t := _patch_text(v)) is not None), None)
    return None


def apply_edit(content: str, old: str, new: str, replace_all: bool = False) -> str | None:
    """Claude Code's string edit (``FileEditTool/utils.ts`` applyEditToFile), or None when it cannot apply.

    The old string must occur exactly once (any number of times with `replace_all`); an empty old
    string only fills an empty file. Deleting text (`new` empty) also takes the newline after it when
    the old string does not end with one. Upstream's curly-quote normalisation is not modelled: an old
    string that does not match exactly makes the content unknown.
    """
    if old == "":
        return new if content == "" else None
    n = content.count(old)
    if n == 0 or (n > 1 and not replace_all):
        return None
    if new == "" and not old.endswith("\n") and old + "\n" in content:
        old = old + "\n"
    return content.replace(old, new) if replace_all else content.replace(old, new, 1)


@dataclass(frozen=True)
class RecentFile:
    """One file to re-attach after compaction, rebuilt from the log (see `recent_files`).

    Parameters
    ----------
    path : str
    text : str or None
        What is re-attached: the last read's output when the file is unchanged since, else its content
        rebuilt from the log and numbered like the agent's reads. None: unknown — only the path is
        re-attached (``reason`` says why).
    source : str
        ``read`` (a read's output), ``written`` (a whole-file write), ``edited`` (edits applied to what
        was read or written), ``deleted`` (a patch deleted it: upstream's re-read finds nothing).
    entry_ids : tuple of str
        The records the text comes from (a read output, then the write / edit calls applied to it).
    modified : bool
        Whether the session changed the file (it then ranks by its last change).
    reason : str or None
    """

    path: str
    text: str | None
    source: str
    entry_ids: tuple[str, ...]
    modified: bool = False
    reason: str | None = None

    @property
    def entry(self) -> str:
        """The latest record the file's state comes from."""
        return self.entry_ids[-1] if self.entry_ids else ""

    @property
    def verbatim(self) -> bool:
        """Whether `text` is a read's output as recorded (else it was rebuilt, or is unknown)."""
        return self.source == "read"


@dataclass
class _FileState:
    """A file as the walk over the log knows it (mutable while walking; `RecentFile` is the result)."""

    path: str
    read_at: int = -1
    modified_at: int = -1
    content: str | None = None  # known text, line numbers stripped
    whole: bool = False  # the known text is the whole file (not a ranged read)
    verbatim: Record | None = None  # a read output still showing the file as it is
    view: ReadView | None = None  # how the agent's reads number it
    entries: list[str] = field(default_factory=list)
    source: str = "read"
    reason: str | None = None

    def result(self, style: ReadView | None) -> RecentFile:
        if self.source == "deleted" or self.content is None:
            text = None
        elif self.verbatim is not None:
            text = self.verbatim.text
        else:
            view = self.view or style or ReadView("")
            text = view.render(self.content)
        return RecentFile(
            self.path, text, self.source, tuple(dict.fromkeys(self.entries)), self.modified_at >= 0, self.reason
        )


class _Walk:
    """Replays the log's reads, writes and edits into one `_FileState` per path."""

    def __init__(self) -> None:
        self.files: dict[str, _FileState] = {}
        self.style: ReadView | None = None  # the latest numbered read: how a re-read would show a new file

    def state(self, path: str) -> _FileState:
        return self.files.setdefault(path, _FileState(path))

    def read(self, path: str, out: Record, args: Any, pos: int) -> None:
        if out.text.startswith(UNCHANGED_STUB):
            return  # Claude Code's stub for a file it already showed: what it showed still stands
        f = self.state(path)
        view = read_view(out.text)
        if view.sep:
            self.style = view.style()
        fields = args if isinstance(args, Mapping) else {}
        ranged = view.start > 1 or fields.get("offset") not in (None, 0, 1, "") or fields.get("limit") is not None
        f.read_at = pos
        if ranged and f.content is not None and f.whole:
            return  # the whole file is known: upstream re-reads it whole, not the range last shown
        f.content, f.whole, f.verbatim, f.view = view.content, not ranged, out, view
        f.entries, f.source, f.reason = [out.entry_id], "read", None

    def write(self, path: str, content: str, call: Record, pos: int) -> None:
        f = self.state(path)
        f.modified_at, f.content, f.whole, f.verbatim = pos, content, True, None
        # written whole: a re-read shows it from line 1, numbered like the file's last read
        f.view = replace(f.view, content="", start=1) if f.view is not None and f.view.sep else None
        f.entries, f.source, f.reason = [call.entry_id], "written", None

    def edit(self, path: str, edits: Sequence[tuple[str, str, bool]], call: Record, pos: int) -> None:
        f = self.state(path)
        f.modified_at = pos
        f.verbatim, f.source = None, "edited"
        f.entries.append(call.entry_id)
        if f.content is None:
            f.reason = f.reason or f"edited at entry {call.entry_id}, but its content before the edit is not in the log"
            return
        content: str | None = f.content
        for old, new, every in edits:
            content = apply_edit(content, old, new, every) if content is not None else None
        if content is None:
            f.content = None
            f.reason = f"edit at entry {call.entry_id}: an old string is not found exactly once in the known content"
        else:
            f.content = content

    def unknown(self, path: str, call: Record, pos: int, why: str) -> None:
        f = self.state(path)
        f.modified_at, f.content, f.verbatim, f.source = pos, None, None, "edited"
        f.entries.append(call.entry_id)
        f.reason = f"{why} at entry {call.entry_id}: its new content cannot be rebuilt from the log"

    def delete(self, path: str, call: Record, pos: int) -> None:
        f = self.state(path)
        f.modified_at, f.content, f.verbatim, f.source = pos, None, None, "deleted"
        f.entries.append(call.entry_id)
        f.reason = f"deleted by the patch at entry {call.entry_id}: upstream's re-read finds no file"

    def patch(self, text: str, call: Record, pos: int) -> None:
        """Apply a Codex-style patch: an added file's content is known, an updated one's not, a deleted one is gone."""
        lines = text.split("\n")
        heads = [(i, m) for i, ln in enumerate(lines) if (m := _PATCH_HEAD.match(ln))]
        for k, (i, m) in enumerate(heads):
            op, path = m.group(1), m.group(2)
            end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
            body = [ln for ln in lines[i + 1 : end] if not ln.startswith("*** End Patch")]
            if op == "Add":
                self.write(path, "".join(ln[1:] + "\n" for ln in body if ln.startswith("+")), call, pos)
            elif op == "Delete":
                self.delete(path, call, pos)
            else:
                move = next((mv.group(1) for ln in body if (mv := _PATCH_MOVE.match(ln))), None)
                if move is not None:
                    self.delete(path, call, pos)
                self.unknown(move or path, call, pos, "patched")

    def call(self, call: Record, args: Any, pos: int) -> None:
        """Apply one tool call that may change files (a failed one is never passed here)."""
        tool = (call.tool or "").lower()
        fields: Mapping[str, Any] = args if isinstance(args, Mapping) else {}
        path = _first_str(fields, _PATH_KEYS) or call.target
        if tool in PATCH_TOOLS or (tool in SHELL_TOOLS and "apply_patch" in call.text):
            patch = _patch_text(args)
            if patch is not None:
                self.patch(patch, call, pos)
            elif tool in PATCH_TOOLS and path:
                self.unknown(path, call, pos, "patched")
            return
        command = fields.get("command") if tool in EDITOR_TOOLS else None
        if not path or not (tool in WRITE_TOOLS or tool in EDIT_TOOLS or command is not None):
            return
        if tool in WRITE_TOOLS or command == "create":
            content = _first_str(fields, _CONTENT_KEYS)
            if content is None:
                self.unknown(path, call, pos, "written")
            else:
                self.write(path, content, call, pos)
        elif tool in EDIT_TOOLS or command == "str_replace":
            edits = _edits(fields)
            if edits is None:  # a notebook cell, or arguments we cannot read
                self.unknown(path, call, pos, "edited")
            else:
                self.edit(path, edits, call, pos)
        elif command == "insert":
            self.insert(path, fields, call, pos)
        elif command != "view":
            self.unknown(path, call, pos, str(command))

    def insert(self, path: str, fields: Mapping[str, Any], call: Record, pos: int) -> None:
        """Apply the text editor's insert: ``new_str`` after line ``insert_line`` (0: at the top) of a whole file."""
        f = self.state(path)
        text = _first_str(fields, ("new_str", "insert_text"))
        at = fields.get("insert_line")
        lines = f.content.split("\n") if f.content is not None and f.whole else None
        if lines is None or text is None or not isinstance(at, int) or not 0 <= at <= len(lines):
            self.unknown(path, call, pos, "inserted into")
            return
        f.modified_at, f.verbatim, f.source = pos, None, "edited"
        f.entries.append(call.entry_id)
        f.content = "\n".join(lines[:at] + text.split("\n") + lines[at:])


def _edits(fields: Mapping[str, Any]) -> list[tuple[str, str, bool]] | None:
    """Read the (old, new, replace_all) edits of an edit call: one pair, or a list under ``edits`` (MultiEdit)."""
    listed = fields.get("edits")
    items: list[Any] = listed if isinstance(listed, list) else [fields]
    out: list[tuple[str, str, bool]] = []
    for item in items:
        if not isinstance(item, Mapping):
            return None
        old, new = _first_str(item, _OLD_KEYS), _first_str(item, _NEW_KEYS)
        if old is None or new is None:
            return None
        out.append((old, new, any(item.get(k) is True for k in _ALL_KEYS)))
    return out or None


_FILE_TOOLS = WRITE_TOOLS | EDIT_TOOLS | EDITOR_TOOLS | PATCH_TOOLS


def _may_touch_files(call: Record) -> bool:
    """Whether a call can change a file (its arguments are only parsed then)."""
    tool = (call.tool or "").lower()
    return tool in _FILE_TOOLS or (tool in SHELL_TOOLS and "apply_patch" in call.text)


def _is_read(tool: str, args: Any) -> bool:
    return tool in READ_TOOLS or (tool in EDITOR_TOOLS and isinstance(args, Mapping) and args.get("command") == "view")


def recent_files(records: Sequence[Record], max_files: int = MAX_FILES_TO_RESTORE) -> list[RecentFile]:
    """Return the files Claude Code would re-attach, most recently modified first, at most `max_files`.

    Upstream ranks every file its tools read or changed by ``readFileState``'s timestamp, which is the
    file's modification time (see the section comment above), and re-reads each from disk. From the log:

    * a file the session changed (write, edit, patch; a failed call changes nothing) ranks by its last
      change, newest first; its content is what it was last written with, or the last known content
      with the edits applied in order when each old string is found exactly once (`apply_edit`); else
      it is unknown (path only, ``reason`` says why);
    * a file only read ranks after every changed one — its modification time predates what the log
      shows — most recently read first (the log has no times to order them by); its content is its
      last read's output (a ranged read does not replace a whole file already known);
    * CLAUDE.md / memory files are never re-attached (upstream re-injects them from disk).

    Rebuilt content is numbered like the file's last read (else like the session's latest numbered
    read), as upstream's re-read through the Read tool would show it.
    """
    calls = {r.call_id: r for r in records if r.kind == "tool_call" and r.call_id}
    failed = {r.call_id for r in records if r.kind == "tool_output" and r.is_error and r.call_id}
    walk = _Walk()
    for pos, r in enumerate(records):
        if r.kind == "tool_call" and _may_touch_files(r) and not (r.call_id and r.call_id in failed):
            args = call_args(r)
            if not _is_read((r.tool or "").lower(), args):
                walk.call(r, args, pos)
        elif r.kind == "tool_output" and not r.is_error:
            call = calls.get(r.call_id or "")
            tool = (r.tool or (call.tool if call is not None else None) or "").lower()
            if tool not in READ_TOOLS and tool not in EDITOR_TOOLS:
                continue
            args = call_args(call) if call is not None else None
            if not _is_read(tool, args):
                continue
            fields = args if isinstance(args, Mapping) else {}
            path = r.target or (call.target if call is not None else None) or _first_str(fields, _PATH_KEYS)
            if path:
                walk.read(path, r, args, pos)
    kept = [f for f in walk.files.values() if not _NOT_RESTORED.search(f.path)]
    # changed files first, by their last change; then files only read, by their last read
    kept.sort(key=lambda f: (f.modified_at >= 0, f.modified_at if f.modified_at >= 0 else f.read_at), reverse=True)
    return [f.result(walk.style) for f in kept[:max_files]]


def latest_todo(records: Sequence[Record]) -> Record | None:
    """Return the latest todo-tool call (its arguments are the todo list as last written)."""
    return next((r for r in reversed(records) if r.kind == "tool_call" and (r.tool or "").lower() in TODO_TOOLS), None)


def output_cap(ctx: CompactionContext) -> int:
    """Return the summary request's output cap before any room: the model's output limit O, or less.

    The fork sets no ``maxOutputTokens`` of its own (compact.ts:1181-1200 [M]: setting one would break
    the prompt-cache key), so the main loop's limit applies (claude.ts:1591-1594
    ``getMaxOutputTokensForModel``); the profile's output ceiling O stands for it. Param
    ``summary_tokens`` (a positive int) can only lower it.

    Raises
    ------
    ValueError
        ``summary_tokens`` is not a positive integer.
    """
    override = ctx.param("summary_tokens", None)
    if override is None:
        return max(0, int(ctx.output_ceiling))
    if isinstance(override, bool) or not isinstance(override, int) or override <= 0:
        raise ValueError(f"claude-code summary_tokens {override!r}: expected a positive integer (it lowers O)")
    return max(0, min(override, int(ctx.output_ceiling)))


def _keep_recent(ctx: CompactionContext) -> int | None:
    """Param ``microcompact_keep_recent``: None (off, the default) or an int (upstream floors it at 1)."""
    value = ctx.param("microcompact_keep_recent", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"claude-code microcompact_keep_recent {value!r}: expected an integer, or None (off)")
    return value


# --------------------------------------------------------------------------- the strategy


@dataclass(frozen=True)
class ClaudeCode:
    """Claude Code's compaction, reconstructed: a forked nine-section summary, re-attached files, no tail."""

    name: str = "claude-code"
    algorithm_version: str = ALGORITHM_VERSION
    estimator: str = ESTIMATOR
    template: str = TEMPLATE
    label_tag: str = LABEL_TAG

    def fires(self, tokens: int, ctx: CompactionContext) -> bool:
        """Claude Code's auto-compact threshold ``W - min(O, 20,000) - 13,000``, on the API's usage (calibrated)."""
        reserved = min(ctx.output_ceiling, int(ctx.param("reserved_output_cap", RESERVED_OUTPUT_CAP)))
        return ctx.model_tokens(tokens) >= ctx.window - reserved - int(
            ctx.param("autocompact_buffer", AUTOCOMPACT_BUFFER)
        )

    def instruction(self, ctx: CompactionContext) -> str:
        """Return the nine-section compact instruction in use (``prompt_file`` points at exact upstream text)."""
        return read_prompt(ctx.param("prompt_file", None), NINE_SECTION_INSTRUCTION)

    def fork_request(self, records: Sequence[Record], ctx: CompactionContext, cap: int) -> SummaryRequest:
        """Build the summary request: the main conversation forked, the instruction as the last user message."""
        messages = _messages(records) + [{"role": "user", "content": self.instruction(ctx)}]
        return SummaryRequest(
            strategy=self.name,
            shape=REQUEST_SHAPE,
            system=ctx.shape.system_prompt,
            tools=tuple(ctx.shape.tools),
            messages=tuple(messages),
            template=self.template,
            max_output_tokens=cap,
            source_entry_ids=tuple(dict.fromkeys(r.entry_id for r in records)),
        )

    def _fit_fork(self, records: list[Record], ctx: CompactionContext, cap: int) -> tuple[SummaryRequest, int, int]:
        """Fit the forked request: drop its oldest turns while it does not fit the window (prompt too long).

        Returns the request, the turns dropped and the request's input tokens (system, tools, messages,
        instruction). ``max_output_tokens`` is `cap`, or the room that input leaves in the window when
        that is less (the API stops the answer at the window's end); a fork whose input is past the
        window (a forced cut, sent whole by default: see ``ptl_retry``) keeps `cap`.
        """
        cnt = counter(ctx.encoding)
        frame = cnt.count(ctx.shape.system_prompt) + cnt.count(ctx.shape.tools_text())
        limit = ctx.window  # "prompt is too long": the input alone past the context window
        sizes = cnt.count_many([r.text for r in records])
        instr = cnt.count(self.instruction(ctx))
        total = frame + sum(sizes) + instr
        starts = _turn_starts(records)
        dropped, k = 0, 0
        while bool(ctx.param("ptl_retry", False)) and total > limit and k + 1 < len(starts):
            k += 1
            total -= sum(sizes[starts[k - 1] : starts[k]])
            dropped += 1
        kept = records[starts[k] :] if dropped else records
        fork_room = ctx.window - ctx.model_tokens(total)
        if fork_room > 0:
            cap = min(cap, fork_room)
        return self.fork_request(kept, ctx, cap), dropped, total

    def compact(self, session: Session, cut: int, ctx: CompactionContext) -> Projection:
        """Project the next request after the reconstructed Claude Code compacts the session at `cut`."""
        keep_recent, summary_out = _keep_recent(ctx), output_cap(ctx)  # bad parameters fail before any work
        on_failure = failure_mode(ctx, self.name)
        recs = live_history(session, cut, ctx)
        notes: dict[str, Any] = {
            "label_tag": self.label_tag,
            "summarised": len(recs),
            "microcompact_cleared": 0,
            "ptl_dropped_turns": 0,
            "reattached_files": [],
            "reattach_dropped": [],
            "reattach_unknown": {},
            "todo_entry": None,
        }
        if keep_recent is not None:
            recs, n_cleared = microcompact(recs, keep_recent)
            notes["microcompact_cleared"] = n_cleared
        cnt = counter(ctx.encoding)
        segs = [
            Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text()),
        ]
        frame_tokens = sum(cnt.count_many([s.text for s in segs]))
        cap = ctx.window - ctx.output_ceiling
        room = cap - frame_tokens
        req = receipt = None
        if recs:
            reserve = cnt.count(SUMMARY_PREFACE) + cnt.count(CONTINUE_INSTRUCTION)
            summary_cap = max(0, min(summary_out, room - reserve))
            req, notes["ptl_dropped_turns"], fork_tokens = self._fit_fork(recs, ctx, summary_cap)
            notes["fork_tokens"] = fork_tokens
            text, receipt, no_text = self._summarise(req, ctx)
            if no_text:  # upstream throws: no compaction, the history goes out as it was (`NO_SUMMARY_TEXT`)
                return self._unchanged(session, cut, ctx, recs, req, receipt, notes, NO_SUMMARY_TEXT)
            if receipt.fallback and req.max_output_tokens > 0 and on_failure == "upstream":
                # the call failed: upstream's fork and its streaming fallback fail, compaction throws (see above);
                # no room under W - O is the lab's ceiling, not a failure upstream: it compacts below
                failed = receipt.error or COMPACTION_FAILED
                return self._unchanged(session, cut, ctx, recs, req, receipt, notes, failed)
            if cnt.count(text) > room - reserve:  # a summarizer overshot its cap
                text = truncate_tokens(text, room - reserve, ctx.encoding)
                notes["summary_truncated"] = True
            receipt = replace(receipt, text=text or receipt.text)  # formatted to nothing: the answer (`_summarise`)
            # one user message: the preface, the summary, the instruction to carry on
            segs.append(Segment("header", "user", SUMMARY_PREFACE, message="compact-summary"))
            # Labelled as every arm labels its summary: the stand-in, the summarizer, or the empty template.
            segs.append(
                Segment(
                    "summary",
                    "user",
                    text,
                    req.source_entry_ids,
                    message="compact-summary",
                    label=summary_label(receipt, "empty template (no summary)"),
                )
            )
            segs.append(Segment("continue", "user", CONTINUE_INSTRUCTION, message="compact-summary"))
            used = sum(cnt.count_many([s.text for s in segs[2:]]))
            segs += self._reattach(recs, ctx, room - used, notes)
            notes.update(
                {
                    "summary_cap": req.max_output_tokens,
                    "instruction_sha256": sha256_text(self.instruction(ctx)),
                    "compact_boundary": {
                        "trigger": "auto",
                        "pre_tokens": sum(cnt.count_many([r.text for r in recs])),
                        "last_entry": recs[-1].entry_id,
                    },
                }
            )
        tokens = frame_tokens + sum(cnt.count_many([s.text for s in segs[2:]]))
        notes.update({"tokens": tokens, "fits": tokens <= cap})
        return projection(self, session, cut, segs, cap, summary_request=req, receipt=receipt, notes=notes)

    def _reattach(
        self, recs: Sequence[Record], ctx: CompactionContext, room: int, notes: dict[str, Any]
    ) -> list[Segment]:
        """Re-attached recent files (newest first) and the todo list, within upstream's budgets and `room`."""
        cnt = counter(ctx.encoding)
        todo = latest_todo(recs)
        todo_seg = None
        if todo is not None:
            todo_seg = Segment(
                "header",
                "user",
                TODO_HEADER.format(entry=todo.entry_id, text=todo.text),
                (todo.entry_id,),
                message="todo",
            )
            t = cnt.count(todo_seg.text)
            if t <= room:
                room -= t
                notes["todo_entry"] = todo.entry_id
            else:
                notes["reattach_dropped"].append(todo.entry_id)
                todo_seg = None
        out: list[Segment] = []
        budget = int(ctx.param("reattach_token_budget", FILES_TOKEN_BUDGET))
        per_file = int(ctx.param("reattach_tokens_per_file", MAX_TOKENS_PER_FILE))
        max_files = int(ctx.param("reattach_max_files", MAX_FILES_TO_RESTORE))
        rough = 0
        for f in recent_files(recs, max_files):
            key = f"file:{f.path}"
            if f.reason is not None:
                notes["reattach_unknown"][f.path] = f.reason
            if f.source == "deleted":
                continue  # upstream's re-read finds no file: its slot gives no attachment
            if f.text is None:  # content unknown: the reference form, as upstream for a file too large
                segs = [
                    Segment(
                        "omitted_marker",
                        "user",
                        FILE_UNKNOWN.format(path=f.path),
                        f.entry_ids,
                        message=key,
                    )
                ]
            elif (size := cnt.count(f.text)) > per_file:
                segs = [
                    Segment(
                        "omitted_marker",
                        "user",
                        FILE_REFERENCE.format(path=f.path, tokens=size),
                        f.entry_ids,
                        message=key,
                        record_kind="tool_output" if f.verbatim else None,
                    )
                ]
            elif f.verbatim:  # one attachment message per file: the header naming it, then its content
                segs = [
                    Segment("header", "user", FILE_HEADER.format(path=f.path, entry=f.entry), f.entry_ids, message=key),
                    Segment("user_original", "user", f.text, f.entry_ids, message=key, record_kind="tool_output"),
                ]
            else:  # rebuilt from the log: not any record's text, so an authored segment, labelled
                segs = [
                    Segment(
                        "header",
                        "user",
                        FILE_HEADER_CHANGED.format(path=f.path, entry=f.entry),
                        f.entry_ids,
                        message=key,
                    ),
                    Segment("header", "user", f.text, f.entry_ids, message=key, label=REBUILT_LABEL),
                ]
            est = sum(est_chars4(s.text) for s in segs)  # upstream's rough estimate of the attachment
            need = sum(cnt.count_many([s.text for s in segs]))
            if rough + est > budget or need > room:
                notes["reattach_dropped"].append(f.entry)
                continue
            rough += est
            room -= need
            out += segs
            notes["reattached_files"].append(f.path)
        return out + ([todo_seg] if todo_seg is not None else [])

    def _summarise(self, req: SummaryRequest, ctx: CompactionContext) -> tuple[str, SummaryReceipt, bool]:
        """Return the formatted summary, its receipt, and whether the answer had no text (upstream throws).

        No text is judged on the answer as upstream reads it, trimmed, before formatting
        (``getAssistantMessageText``, messages.ts:2843-2859 [M]): an answer of only an ``<analysis>``
        block is a summary upstream, formatted to nothing. Its receipt keeps the answer, so a replayed
        checkpoint formats it again.
        """
        text, receipt = summarize_or_template(ctx, req)
        if receipt.fallback:  # no room, unavailable or failed: the empty template, the receipt says why
            return text, receipt, False
        if not text.strip():
            return "", replace(receipt, text=text), True
        formatted = format_summary(text)
        return formatted, replace(receipt, text=formatted or text), False

    def _unchanged(
        self,
        session: Session,
        cut: int,
        ctx: CompactionContext,
        recs: Sequence[Record],
        req: SummaryRequest,
        receipt: SummaryReceipt,
        notes: dict[str, Any],
        reason: str,
    ) -> Projection:
        """Project the next request when upstream's compaction throws: system, tools, the live history unchanged.

        `reason` goes into ``notes["compaction_failed"]``: `NO_SUMMARY_TEXT` for an answer with no text, the
        receipt's error for a failed call. A record microcompact cleared (param ``microcompact_keep_recent``)
        goes out cleared, as an ``omitted_marker``. The summary request was sent (``sent_requests``) and
        nothing came back; the cost model bills it when an answer came (no text), not when the call failed
        (``receipt.fallback``).
        """
        cnt = counter(ctx.encoding)
        original = {r.source_order: r.text for r in history(session, cut)}
        segs = [
            Segment("system", "system", ctx.shape.system_prompt),
            Segment("tools", "system", ctx.shape.tools_text()),
        ]
        for r in recs:
            if r.text == original.get(r.source_order, r.text):
                segs.append(Segment("tail", role_of(r), r.text, (r.entry_id,), record_kind=r.kind))
            else:
                segs.append(
                    Segment(
                        "omitted_marker",
                        role_of(r),
                        r.text,
                        (r.entry_id,),
                        record_kind=r.kind,
                        label=MICROCOMPACT_LABEL,
                    )
                )
        cap = ctx.window - ctx.output_ceiling
        tokens = sum(cnt.count_many([s.text for s in segs]))
        notes.update(
            {
                "compaction_failed": reason,
                "summary_cap": req.max_output_tokens,
                "instruction_sha256": sha256_text(self.instruction(ctx)),
                "tokens": tokens,
                "fits": tokens <= cap,
            }
        )
        return projection(
            self,
            session,
            cut,
            segs,
            cap,
            summary_request=req,
            receipt=receipt,
            notes=notes,
            sent_requests=(SentRequest(req, 0),),
        )


# request_shape: as docs/strategies.md documents it, written out (not REQUEST_SHAPE) so verify checks the code.
STRATEGIES.add(
    "claude-code", ClaudeCode(), rank=50, request_shape="prefix-shared", trigger_rule="W - min(O, 20,000) - 13,000"
)

__all__ = [
    "ALGORITHM_VERSION",
    "CLEARED_TOOL_RESULT",
    "CONTINUE_INSTRUCTION",
    "ClaudeCode",
    "LABEL_TAG",
    "MICROCOMPACT_LABEL",
    "NINE_SECTION_INSTRUCTION",
    "NO_SUMMARY_TEXT",
    "ReadView",
    "RecentFile",
    "SUMMARY_PREFACE",
    "apply_edit",
    "call_args",
    "format_summary",
    "latest_todo",
    "live_history",
    "microcompact",
    "output_cap",
    "read_view",
    "recent_files",
]
