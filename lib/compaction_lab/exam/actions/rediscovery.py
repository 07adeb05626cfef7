"""Rediscovery: what the agents' own compactions cost them, read from their logs (no model needed).

For every compaction an imported log records (`strategies.arms.recorded.find`: pi, Claude Code, Codex,
OpenCode), this module lists the tool calls the agent made *after* it that repeat a call it had made
*before* it (same tool, identical canonical arguments), and sorts each into a class (``call_class``,
`CALL_CLASSES`): a *state check* re-runs a command to see what is true now (``git status``, a test or lint
run, a build, ``ls``; `CALL_RULES`), so repeating it is no loss; a repeat is *held* when the earlier
output was still kept verbatim in the agent's next request; a *rediscovery* re-reads a file or re-runs a
lookup (read, grep, find, cat, search) whose output the compaction dropped: the agent lost what it had
looked up and looked it up again; any other repeat (an edit, a script) is *other*.

Per repeat: ``earlier_output_kept``, ``target_in_summary``, ``repeat_output_tokens`` and ``repeat_cost``:
the output priced once as input, at the log's own recorded costs when it has them (`log_pricing`), else at
a price table of the model's family (`family_of`), never another provider's; else not priced (NA).
Nothing is predicted and no model is asked; every number is read off the log.

Design: docs/exams.md#8a-continuation-notebook-06 (the "Rediscovery after real compactions" paragraphs)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from compaction_lab import strategies
from compaction_lab.core.session import Record, Session
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter
from compaction_lab.endpoints.prices import PriceTable, list_price_tables, load_price_table, price
from compaction_lab.exam.actions.calls import agent_calls, call_arguments, call_key
from compaction_lab.exam.actions.targets import command_line, forms
from compaction_lab.exam.exams.recorded import VERBATIM_KINDS
from compaction_lab.exam.grading import normalise
from compaction_lab.strategies.arms import recorded as rec
from compaction_lab.strategies.base import CompactionContext

# --------------------------------------------------------------------------- classes of a repeat

#: ``call_class`` values, in the order tables list them. A *rediscovery* is a lookup (`CALL_RULES`) whose
#: earlier output the compaction dropped; *held*: a repeat (not a state check) whose earlier output was
#: still kept verbatim; a *state check* re-runs a command to see the state now; *other*: anything else.
REDISCOVERY, HELD, STATE_CHECK, OTHER = "rediscovery", "held", "state check", "other"
CALL_CLASSES: tuple[str, ...] = (REDISCOVERY, HELD, STATE_CHECK, OTHER)


@dataclass(frozen=True)
class CallRule:
    """One line of `CALL_RULES`.

    Attributes
    ----------
    kind : str
        ``"state check"`` or ``"lookup"``.
    pattern : str
        A regular expression matched at the start of a call's head (`call_head`), up to a space or the end.
    what : str
        What the line covers, in words.
    """

    kind: str
    pattern: str
    what: str


_LOOKUP = "lookup"

#: How a repeated call is told apart, first match wins, on its head (`call_head`): the command a shell call
#: runs, else the tool's name in lower case (a tool named like a command does what the command does).
#: No match: a repeat of an action (an edit, a write, a script), class ``other``.
CALL_RULES: tuple[CallRule, ...] = (
    CallRule(STATE_CHECK, r"git(?: -C \S+)? (?:status|log|diff|show|branch|rev-parse|remote|stash list)", "git state"),
    CallRule(STATE_CHECK, r"(?:pytest|py\.test|tox|nox|unittest)", "Python test runs"),
    CallRule(
        STATE_CHECK,
        r"(?:npm|pnpm|yarn|bun)(?: run)? (?:test|check|lint|build|typecheck|type-check|format|tsc|ci)[\w:.-]*",
        "npm/pnpm/yarn/bun test, check, lint and build scripts",
    ),
    CallRule(STATE_CHECK, r"(?:npm|pnpm|yarn|bun) t", "npm t"),
    CallRule(STATE_CHECK, r"cargo (?:test|check|clippy|build|fmt|nextest|run)", "cargo test, check, lint, build"),
    CallRule(STATE_CHECK, r"go (?:test|vet|build|run)", "go test, vet, build"),
    CallRule(STATE_CHECK, r"(?:make|gmake|ninja|cmake|just|mvn|gradle|gradlew|bazel|dotnet)", "build tools"),
    CallRule(
        STATE_CHECK,
        r"(?:tsc|tsgo|ruff|mypy|pyright|pylint|flake8|black|isort|eslint|prettier|biome|vitest|jest|mocha"
        r"|golangci-lint|clippy-driver|shellcheck)",
        "type checkers, linters, formatters, JS test runners",
    ),
    CallRule(STATE_CHECK, r"(?:ls|pwd|tree|list|list_dir|list_directory|list_files)", "directory listings"),
    CallRule(
        _LOOKUP,
        r"(?:read|read_file|readfile|view|view_file|open_file|notebookread|cat|head|tail|less|more|nl|bat"
        r"|sed -n|wc|file|stat|jq|yq|xxd|hexdump)",
        "reading a file",
    ),
    CallRule(
        _LOOKUP,
        r"(?:grep|egrep|fgrep|rg|ag|ack|glob|find|fd|find_files|search|search_files|file_search|codebase_search"
        r"|grep_search|git grep|git blame|git ls-files|locate|which|type)",
        "searching for text or files",
    ),
    CallRule(
        _LOOKUP,
        r"(?:webfetch|web_fetch|fetch|websearch|web_search|curl|wget|gh (?:issue|pr|api|repo) view|gh api)",
        "fetching a page or a search result",
    ),
)

_RULES = tuple((rule, re.compile(rf"(?:{rule.pattern})(?=\s|$)")) for rule in CALL_RULES)
_SEGMENT = re.compile(r"&&|\|\||[;|\n]")
# Segments that only set up the real command: changing directory, exporting, activating.
_SETUP = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "ulimit", "true", ":"})
# Words before the command proper: environment assignments, wrappers, runners.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
_WRAPPERS = frozenset({"sudo", "time", "env", "command", "exec", "nice", "nohup", "npx", "bunx", "xvfb-run"})
_RUNNERS = (("uv", "run"), ("poetry", "run"), ("pdm", "run"), ("hatch", "run"), ("pnpm", "exec"), ("rye", "run"))
_PYTHON = re.compile(r"python[\d.]*")


def _command_head(line: str) -> str:
    """Return the first real command of a shell line: setup segments, assignments, wrappers and runners left out."""
    for segment in _SEGMENT.split(line):
        words = segment.strip().split()
        if not words or words[0] in _SETUP:
            continue
        while words:
            first = words[0]
            if _ASSIGNMENT.fullmatch(first) or first in _WRAPPERS:
                words = words[1:]
            elif first == "timeout" and len(words) > 1:
                words = words[2:]  # timeout DURATION command
            elif len(words) > 1 and (first, words[1]) in _RUNNERS:
                words = words[2:]
            elif _PYTHON.fullmatch(first.rsplit("/", 1)[-1]) and len(words) > 2 and words[1] == "-m":
                words = words[2:]  # python -m pytest -> pytest
            else:
                break
        if words:
            return " ".join([words[0].rsplit("/", 1)[-1], *words[1:]])
    return ""


def call_head(record: Record) -> str:
    """Return what `CALL_RULES` read of a call: its command's first words, else its tool's name.

    A shell call (one whose arguments carry a command line, `exam.actions.targets.command_line`) gives the first
    command it really runs: ``cd /repo && npm run check 2>&1 | tail`` gives ``npm run check 2>&1``
    (``cd``/``export`` segments, ``VAR=x`` assignments, ``sudo``/``time``/``npx`` and ``uv run``-style
    runners, ``python -m`` and the executable's directory left out). Any other call gives its tool name in
    lower case.
    """
    line = command_line(call_arguments(record))
    if line is not None:
        head = _command_head(line)
        if head:
            return head
    return (record.tool or "").lower()


def call_kind(record: Record) -> str:
    """Return ``"state check"``, ``"lookup"`` or ``"other"`` for a call, by the first rule of `CALL_RULES` its head matches."""
    head = call_head(record)
    for rule, pattern in _RULES:
        if pattern.match(head):
            return rule.kind
    return OTHER


def call_class(record: Record, earlier_output_kept: Any) -> str:
    """Return the ``call_class`` of a repeat (`CALL_CLASSES`).

    A state check stays a state check whatever was kept; any other repeat whose earlier output was kept
    verbatim (`earlier_output_kept` True) is ``held``; a lookup otherwise is a ``rediscovery``; the rest
    is ``other``.
    """
    kind = call_kind(record)
    if kind == STATE_CHECK:
        return STATE_CHECK
    if earlier_output_kept is True:
        return HELD
    return REDISCOVERY if kind == _LOOKUP else OTHER


# --------------------------------------------------------------------------- what a repeat's output cost

#: How a repeat's output tokens are priced from a price table (the start of ``priced_as``).
PRICED_AS = "uncached input, once (off-peak)"

#: The currency each format's log records its costs in; a format not listed is never priced from its log.
LOG_CURRENCY: Mapping[str, str] = {"pi": "USD", "claude_code": "USD", "opencode": "USD"}

#: Where each format's recorded cost is read from (`ingest`), as ``priced_as`` names it.
LOG_COST: Mapping[str, str] = {
    "pi": "pi's usage.cost.total per request",
    "claude_code": "Claude Code's total_cost_usd",
    "opencode": "OpenCode's cost per message",
}

#: Formats whose usage rows count reasoning tokens apart from ``output_tokens`` (billed as output).
REASONING_APART: frozenset[str] = frozenset({"opencode"})

#: Largest share of the recorded cost the fitted per-token rates may miss (`log_pricing`).
FIT_TOLERANCE = 0.01

#: A model name's family: the provider its price tables name (`PriceTable.provider`); first match wins.
MODEL_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"claude|anthropic|opus|sonnet|haiku", "Anthropic"),
    (r"deepseek", "DeepSeek"),
    (r"gpt|chatgpt|openai|codex|(?<![a-z0-9])o[1-9](?![a-z])", "OpenAI"),
    (r"gemini|gemma|google", "Google"),
    (r"grok|x-ai|xai/", "xAI"),
    (r"mistral|codestral|devstral|magistral", "Mistral"),
    (r"qwen", "Qwen"),
    (r"kimi|moonshot", "Moonshot"),
    (r"glm|zhipu|z-ai", "Zhipu"),
)
_FAMILIES = tuple((re.compile(p), family) for p, family in MODEL_FAMILIES)


def family_of(model: str | None) -> str | None:
    """Return the provider family a model name belongs to (`MODEL_FAMILIES`), None when unknown."""
    name = (model or "").lower()
    for pattern, family in _FAMILIES:
        if name and pattern.search(name):
            return family
    return None


@dataclass(frozen=True)
class Pricing:
    """How the repeats after one compaction are priced.

    Attributes
    ----------
    per_token : float or None
        Money per output token priced as input; None: not priced (costs are NA, never 0).
    currency : str or None
        ISO 4217 code of `per_token`.
    price_table : str or None
        The price table used; None when the log's own costs price it, or nothing does.
    priced_as : str
        How, in words: which rate, read from what.
    """

    per_token: float | None
    currency: str | None
    price_table: str | None
    priced_as: str

    def cost(self, tokens: Any) -> Any:
        """Return what `tokens` output tokens cost, NA when not priced or the tokens are unknown."""
        if self.per_token is None or tokens is pd.NA or tokens is None:
            return pd.NA
        return int(tokens) * self.per_token


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _tokens(row: Mapping[str, Any], includes_cached: bool) -> tuple[float, float, float, float] | None:
    """Return a usage row's (cache-miss input, cache read, cache write, output) tokens; None without both."""
    inp, out = _num(row.get("input_tokens")), _num(row.get("output_tokens"))
    if inp is None or out is None:
        return None
    cached = _num(row.get("cached_tokens")) or 0.0
    write = _num(row.get("cache_write_tokens")) or 0.0
    return (max(inp - cached, 0.0) if includes_cached else inp, cached, write, out)


def _fit_input_rate(rows: Sequence[Mapping[str, Any]], includes_cached: bool) -> tuple[float, int] | None:
    """Return the cache-miss input rate the rows' recorded costs imply, and their number; None if not fixed.

    Fits cost = rates · (miss, read, write, output) tokens by non-negative least squares (`scipy.optimize.nnls`)
    over the rows that record cost and tokens. Accepted when the miss column is used, the columns are
    independent, there are at least two rows per rate and the rates reproduce the recorded total to within
    `FIT_TOLERANCE` (summed absolute error): then the log's costs are a per-token price list and this is it.
    """
    data = []
    for r in rows:
        tokens, cost = _tokens(r, includes_cached), _num(r.get("cost"))
        if tokens is not None and cost is not None:
            data.append((*tokens, cost))
    if not data:
        return None
    arr = np.asarray(data, dtype=float)
    x, y = arr[:, :4], arr[:, 4]
    used = np.flatnonzero(x.any(axis=0))
    if not len(used) or used[0] != 0 or len(data) < 2 * len(used) or y.sum() <= 0:
        return None
    xu = x[:, used]
    if np.linalg.matrix_rank(xu) < len(used):
        return None
    # here: scipy.optimize takes a third of a second to import, in every kernel, and only a log that
    # records its costs comes this far
    from scipy.optimize import nnls

    scale = np.linalg.norm(xu, axis=0)
    rates, _ = nnls(xu / scale, y)
    rates = rates / scale
    if rates[0] <= 0 or np.abs(xu @ rates - y).sum() > FIT_TOLERANCE * y.sum():
        return None
    return float(rates[0]), len(data)


def log_pricing(session: Session, model: str | None) -> Pricing | None:
    """Price from the session's own recorded costs (`LOG_CURRENCY`, `LOG_COST`), None when it records none.

    The usage rows (``metadata["usage"]``) of `model` (all rows when none names it). First choice: the
    cache-miss input rate their costs imply (`_fit_input_rate`), once per output token, as a price table
    would. Else the log's average cost per token: the recorded cost (the rows' ``cost``, else Claude Code's
    session ``total_cost_usd``) over every token of those rows, input, cache and output together. A
    recorded total of zero is no recorded cost (a harness that does not track it).
    """
    currency = LOG_CURRENCY.get(session.source_format)
    if currency is None:
        return None
    where = LOG_COST.get(session.source_format, "the log's cost")
    includes_cached = bool(session.metadata.get("usage_input_includes_cached"))
    usage = [r for r in session.metadata.get("usage") or () if isinstance(r, Mapping)]
    if session.source_format in REASONING_APART:
        usage = [
            {**r, "output_tokens": (_num(r.get("output_tokens")) or 0.0) + (_num(r.get("reasoning_tokens")) or 0.0)}
            if _num(r.get("output_tokens")) is not None
            else r
            for r in usage
        ]
    named = [r for r in usage if model and r.get("model") == model]
    rows = named or usage
    fit = _fit_input_rate(rows, includes_cached)
    if fit is not None:
        rate, n = fit
        return Pricing(
            rate,
            currency,
            None,
            f"uncached input, once, at the log's own rate: {rate * 1e6:.4g} {currency} per 1M input tokens, "
            f"fit to the recorded cost of {n} requests ({where})",
        )
    costed = [r for r in rows if _num(r.get("cost")) is not None]
    total = sum(_num(r.get("cost")) or 0.0 for r in costed) if costed else _num(session.metadata.get("total_cost_usd"))
    counted = [t for r in (costed or usage) if (t := _tokens(r, includes_cached)) is not None]
    tokens = sum(sum(t) for t in counted)
    if not total or not tokens:
        return None
    return Pricing(
        total / tokens,
        currency,
        None,
        f"once, at the log's average cost per token: {total:.4g} {currency} recorded ({where}) over "
        f"{int(tokens):,} tokens of {len(counted)} requests (input, cache and output together)",
    )


def _table_rate(table: PriceTable) -> float:
    return price(table, input_tokens=1_000_000, cached_tokens=0, output_tokens=0) / 1_000_000


def table_pricing(model: str | None, run_table: PriceTable | None, shipped: Sequence[PriceTable]) -> Pricing:
    """Price from a price table of the model's family (`family_of`), never another provider's.

    The run's table when its provider is the model's family; else a shipped table of that family, the
    model's own when there is one (its name starts the model's), else the first by name. None of the
    family: not priced.
    """
    family = family_of(model)
    same = [
        t for t in ([run_table] if run_table else []) + list(shipped) if family and t.provider.lower() == family.lower()
    ]
    own = [t for t in same if model and model.lower().startswith(t.model.lower())]
    chosen = (run_table if run_table in same else None) or (own[0] if own else None) or (same[0] if same else None)
    if chosen is None:
        what = f"{family} ({model})" if family else (model or rec.UNKNOWN_MODEL)
        return Pricing(None, None, None, f"not priced: no recorded cost and no price table for {what}")
    stand_in = (
        ""
        if model and model.lower().startswith(chosen.model.lower())
        else (f"; {chosen.model} prices stand in for {model or rec.UNKNOWN_MODEL} (same family: {family})")
    )
    return Pricing(_table_rate(chosen), chosen.currency, chosen.name, PRICED_AS + stand_in)


# --------------------------------------------------------------------------- the tables

#: What names a recorded compaction in both tables: its session, agent and model, which compaction, where
#: it cut and the span of calls after it that were read.
COMPACTION_KEY: list[str] = [
    "session_id",
    "agent",
    "model",
    "compaction",
    "compaction_entry_id",
    "cut",
    "after",
    "until",
]

#: One row per recorded compaction x repeated call (`rediscovery_table`).
REDISCOVERY_COLUMNS: list[str] = [
    *COMPACTION_KEY,
    "repeat_source_order",
    "repeat_entry_id",
    "tool",
    "arguments",
    "target",
    "call_class",
    "earlier_source_order",
    "earlier_entry_id",
    "earlier_output_source_order",
    "earlier_output_kept",
    "target_in_summary",
    "repeat_output_tokens",
    "price_table",
    "currency",
    "priced_as",
    "repeat_cost",
]

#: One row per usable recorded compaction, also those the agent repeated nothing after (`compactions_table`).
#: ``repeats`` and ``repeat_*`` count rediscoveries only; ``repeats_kept`` the held repeats, ``state_checks``
#: and ``state_check_*`` the state checks, ``repeats_other`` the rest (`CALL_CLASSES`).
COMPACTION_COLUMNS: list[str] = [
    *COMPACTION_KEY,
    "calls_after",
    "repeats",
    "repeats_kept",
    "state_checks",
    "repeats_other",
    "repeats_target_in_summary",
    "repeat_output_tokens",
    "state_check_output_tokens",
    "price_table",
    "currency",
    "priced_as",
    "repeat_cost",
    "state_check_cost",
]

_SEP = "\n\x00\n"  # joins summary texts so that no target straddles two


@dataclass(frozen=True)
class Rediscovery:
    """Both tables of one pass over the sessions.

    Attributes
    ----------
    repeats : DataFrame
        One row per recorded compaction x repeated call (`REDISCOVERY_COLUMNS`).
    compactions : DataFrame
        One row per usable recorded compaction (`COMPACTION_COLUMNS`).
    """

    repeats: pd.DataFrame
    compactions: pd.DataFrame


class _Outputs:
    """Finds a call's output records in one session: by ``call_id``, else the next unlinked output."""

    def __init__(self, session: Session) -> None:
        self.records = session.records
        self.position = {r.source_order: i for i, r in enumerate(session.records)}
        self.by_call: dict[str, list[Record]] = {}
        for r in session.records:
            if r.kind == "tool_output" and r.call_id:
                self.by_call.setdefault(r.call_id, []).append(r)

    def of(self, call: Record) -> list[Record]:
        linked = [r for r in self.by_call.get(call.call_id or "", ()) if r.source_order > call.source_order]
        if linked:
            return linked
        for r in self.records[self.position[call.source_order] + 1 :]:
            # an output linked to another call answers that call, not this one
            if r.kind == "tool_output" and (not r.call_id or r.call_id == call.call_id):
                return [r]
        return []


def _price_of(price_table: str | PriceTable | None) -> PriceTable | None:
    if price_table is None or price_table == "":
        return None
    return price_table if isinstance(price_table, PriceTable) else load_price_table(price_table)


class _Pricer:
    """Prices per session and model: the log's own costs, else a table of the model's family (`Pricing`)."""

    def __init__(self, run_table: PriceTable | None) -> None:
        self.run_table = run_table
        self._shipped: tuple[PriceTable, ...] | None = None
        self._memo: dict[tuple[str, str | None], Pricing] = {}

    def shipped(self) -> tuple[PriceTable, ...]:
        if self._shipped is None:
            self._shipped = tuple(load_price_table(name) for name in list_price_tables())
        return self._shipped

    def of(self, session: Session, model: str | None) -> Pricing:
        key = (session.id, model)
        if key not in self._memo:
            found = log_pricing(session, model)
            self._memo[key] = found or table_pricing(model, self.run_table, self.shipped())
        return self._memo[key]


def _session_model(session: Session, rc: rec.RecordedCompaction) -> str | None:
    model = rc.model or session.metadata.get("model")
    return model if isinstance(model, str) and model else None


def _compaction_rows(
    session: Session,
    rc: rec.RecordedCompaction,
    until: int,
    calls: Sequence[Record],
    outputs: _Outputs,
    ctx: CompactionContext,
    pricing: Pricing,
    encoding: str,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the repeat rows of one compaction and its row in the per-compaction table."""
    cnt = counter(encoding)
    nxt = strategies.compact(session, "recorded", rc.cut, ctx)  # the agent's own next request, from its log
    kept = {e for seg in nxt.segments if seg.kind in VERBATIM_KINDS for e in seg.entry_ids}
    readable = [seg.text for seg in nxt.segments if seg.kind == "summary" and not seg.opaque]
    opaque = any(seg.opaque for seg in nxt.segments if seg.kind == "summary")
    summary = normalise(_SEP.join(readable))
    cwd = session.cwd
    latest: dict[tuple[str, str], Record] = {}
    for c in calls:
        if c.source_order < rc.cut:
            latest[call_key(c)] = c  # calls are in order: the last one written wins
    window = [c for c in calls if rc.after <= c.source_order < until]
    base = {
        "session_id": session.id,
        "agent": rc.agent,
        "model": rc.model or rec.UNKNOWN_MODEL,
        "compaction": rc.index,
        "compaction_entry_id": rc.entry_id,
        "cut": rc.cut,
        "after": rc.after,
        "until": until,
    }
    money = {
        "price_table": pricing.price_table if pricing.price_table else pd.NA,
        "currency": pricing.currency if pricing.currency else pd.NA,
        "priced_as": pricing.priced_as,
    }
    rows = []
    for c in window:
        key = call_key(c)
        earlier = latest.get(key)
        if earlier is None:
            continue
        before_out = outputs.of(earlier)
        own_out = outputs.of(c)
        tokens: Any = sum(cnt.count_many([r.text for r in own_out])) if own_out else pd.NA
        target = c.target or ""
        if not target:
            in_summary: Any = False
        elif not readable and opaque:
            in_summary = pd.NA  # an encrypted summary: nothing is claimed about what it holds
        else:
            in_summary = any(
                f in summary for f in forms(target, cwd, path="/" in target and not any(c.isspace() for c in target))
            )
        was_kept: Any = all(r.entry_id in kept for r in before_out) if before_out else pd.NA
        rows.append(
            {
                **base,
                "repeat_source_order": c.source_order,
                "repeat_entry_id": c.entry_id,
                "tool": key[0],
                "arguments": key[1],
                "target": target,
                "call_class": call_class(c, was_kept),
                "earlier_source_order": earlier.source_order,
                "earlier_entry_id": earlier.entry_id,
                "earlier_output_source_order": before_out[0].source_order if before_out else pd.NA,
                "earlier_output_kept": was_kept,
                "target_in_summary": in_summary,
                "repeat_output_tokens": tokens,
                **money,
                "repeat_cost": pricing.cost(tokens),
            }
        )

    def of_class(name: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["call_class"] == name]

    def tokens_of(name: str) -> int:
        return sum(r["repeat_output_tokens"] for r in of_class(name) if r["repeat_output_tokens"] is not pd.NA)

    found, checks = tokens_of(REDISCOVERY), tokens_of(STATE_CHECK)
    summary_row = {
        **base,
        "calls_after": len(window),
        "repeats": len(of_class(REDISCOVERY)),
        "repeats_kept": len(of_class(HELD)),
        "state_checks": len(of_class(STATE_CHECK)),
        "repeats_other": len(of_class(OTHER)),
        "repeats_target_in_summary": sum(1 for r in of_class(REDISCOVERY) if r["target_in_summary"] is True),
        "repeat_output_tokens": found,
        "state_check_output_tokens": checks,
        **money,
        "repeat_cost": pricing.cost(found),
        "state_check_cost": pricing.cost(checks),
    }
    return rows, summary_row


def rediscovery(
    sessions: Iterable[Session],
    *,
    price_table: str | PriceTable | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    ctx: CompactionContext | None = None,
) -> Rediscovery:
    """Measure every recorded compaction of `sessions` once: the repeats after it, and a row per compaction.

    Parameters
    ----------
    sessions : iterable of Session
        Imported sessions; those of formats that record no compaction give no row.
    price_table : str, PriceTable or None
        The run's price table (a name in ``data/prices`` or a YAML path, `endpoints.prices.load_price_table`),
        used for a session only when the log records no cost and the table is of the session model's family
        (`family_of`); else a shipped table of that family prices it, else nothing (``repeat_cost`` NA).
    encoding : str
        Report tokenizer for the output tokens (`core.tokens`).
    progress : bool
        Show a progress bar over the sessions.
    ctx : CompactionContext, optional
        How the agent's next request is projected (`strategies.arms.recorded`); default: the defaults with
        `encoding`. Output tokens are counted with `encoding` either way.

    Returns
    -------
    Rediscovery
        ``repeats`` (`REDISCOVERY_COLUMNS`) and ``compactions`` (`COMPACTION_COLUMNS`), each ordered by
        session id, compaction and the repeat's position.
    """
    pricer = _Pricer(_price_of(price_table))
    ctx = ctx or CompactionContext(encoding=encoding)
    session_list = sorted(sessions, key=lambda s: s.id)
    it: Iterable[Session] = session_list
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(session_list, desc="rediscovery", unit="session")
    repeats: list[dict[str, Any]] = []
    per_compaction: list[dict[str, Any]] = []
    for s in it:
        found, _ = rec.find(s)  # unusable compactions are the recorded exam's skips, not ours
        if not found:
            continue
        calls = agent_calls(s)
        outputs = _Outputs(s)
        for k, rc in enumerate(found):
            until = found[k + 1].cut if k + 1 < len(found) else s.end
            pricing = pricer.of(s, _session_model(s, rc))
            rows, row = _compaction_rows(s, rc, until, calls, outputs, ctx, pricing, encoding)
            repeats += rows
            per_compaction.append(row)
    return Rediscovery(_frame(repeats, REDISCOVERY_COLUMNS), _frame(per_compaction, COMPACTION_COLUMNS))


_DTYPES: Mapping[str, str] = {
    "compaction": "int64",
    "cut": "int64",
    "after": "int64",
    "until": "int64",
    "repeat_source_order": "int64",
    "earlier_source_order": "int64",
    "earlier_output_source_order": "Int64",
    "earlier_output_kept": "boolean",
    "target_in_summary": "boolean",
    "repeat_output_tokens": "Int64",
    "state_check_output_tokens": "Int64",
    "calls_after": "int64",
    "repeats": "int64",
    "repeats_kept": "int64",
    "state_checks": "int64",
    "repeats_other": "int64",
    "repeats_target_in_summary": "int64",
    "repeat_cost": "Float64",
    "state_check_cost": "Float64",
    "price_table": "string",
    "currency": "string",
    "priced_as": "string",
}


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    df = df.astype({c: t for c, t in _DTYPES.items() if c in df.columns})
    order = [c for c in ("session_id", "compaction", "repeat_source_order") if c in df.columns]
    return df.sort_values(order, kind="stable").reset_index(drop=True)


def rediscovery_table(
    sessions: Iterable[Session],
    *,
    price_table: str | PriceTable | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    ctx: CompactionContext | None = None,
) -> pd.DataFrame:
    """One row per recorded compaction x call after it that repeats a call made before it (`REDISCOVERY_COLUMNS`).

    See docs/exams.md#8a-continuation-notebook-06 for the window, the repeat, its class, the earlier output
    and the money (`rediscovery`). Arguments as `rediscovery`.
    """
    return rediscovery(sessions, price_table=price_table, encoding=encoding, progress=progress, ctx=ctx).repeats


def compactions_table(
    sessions: Iterable[Session],
    *,
    price_table: str | PriceTable | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    ctx: CompactionContext | None = None,
) -> pd.DataFrame:
    """One row per usable recorded compaction, those with no repeat included (`COMPACTION_COLUMNS`).

    ``calls_after`` counts the agent's calls in the window; of its exact repeats, ``repeats`` counts the
    rediscoveries, ``repeats_kept`` the held ones, ``state_checks`` the state checks and ``repeats_other``
    the rest (`CALL_CLASSES`); ``repeats_target_in_summary`` the rediscoveries whose target the summary
    mentions. ``repeat_output_tokens``/``repeat_cost`` sum the rediscoveries whose output the log holds,
    ``state_check_output_tokens``/``state_check_cost`` the state checks. Arguments as `rediscovery`.
    """
    return rediscovery(sessions, price_table=price_table, encoding=encoding, progress=progress, ctx=ctx).compactions


__all__ = [
    "CALL_CLASSES",
    "CALL_RULES",
    "COMPACTION_COLUMNS",
    "HELD",
    "LOG_COST",
    "LOG_CURRENCY",
    "MODEL_FAMILIES",
    "OTHER",
    "PRICED_AS",
    "REDISCOVERY",
    "REDISCOVERY_COLUMNS",
    "STATE_CHECK",
    "CallRule",
    "Pricing",
    "Rediscovery",
    "call_class",
    "call_head",
    "call_kind",
    "compactions_table",
    "family_of",
    "log_pricing",
    "rediscovery",
    "rediscovery_table",
    "table_pricing",
]
