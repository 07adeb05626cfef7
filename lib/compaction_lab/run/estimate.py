"""A run's model calls counted from its cases, arms and questions: ``doctor``'s plan without running a notebook.

`estimate_run` does what the notebooks do *before* they ask a model, in this process and with nothing
sent: it imports (or generates) the sessions as notebook 01 does (redaction included), builds each exam's
cases and questions from the profile's parameters, and compacts every case with every arm the notebooks
compact it with. Summaries go to a counting summarizer that answers as the dry run's stand-in endpoint
does (`compaction_lab.endpoints.standin`: a reply of exactly ``max_tokens``), so every summary request and
every projection are the ones the dry run makes. The exams' requests are then *counted*, never built:
one per question × arm × draw (closed book, recorded block), per question × round × draw (open book),
per keyed case × arm × draw (continuation); a request identical to one already counted (two arms whose
projections are the same) is counted once, as the ledger answers it once. Prompt tokens are each
projection's messages counted once (the report tokenizer, memoised per message) plus the question and
the tool definitions, by the stand-in's rule (`standin.MESSAGE_OVERHEAD_TOKENS` per message).

What it cannot know (beyond the dry run's list in `compaction_lab.run.plan`), and how it is bounded:

- *Answers already paid.* The ledger is not searched for the requests (that needs every request built):
  the count assumes none is answered yet, an upper bound; `CountedPlan.ledger_calls` says how many
  answered calls of this model the ledger holds. Compactions committed in the checkpoint store are also
  counted as asked again.
- *The live cache-shape experiment* (notebook 04, ``live_shape_experiment: true``) is not counted; its
  calls are named as missing.

The exact count is the dry run (`plan.plan_run`, ``doctor --dry-run``); ``tests/run/test_doctor_counts.py``
holds this count to it. Design: docs/architecture.md (the run stage).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.run.plan import CONTINUATION_PURPOSE, OPEN_BOOK_PURPOSE, Plan, calls_by_purpose, planned_notebooks

#: Purpose of a closed-book answer (`compaction_lab.exam.readers.model`).
CLOSED_PURPOSE = "exam:closed"

# --------------------------------------------------------------------------- counting


class _Counter:
    """Requests counted once each by what makes them identical, with their tokens (the stand-in's rule)."""

    def __init__(self) -> None:
        from compaction_lab.core.tokens import counter

        self._count = counter("cl100k_base").count
        self._memo: dict[str, int] = {}
        self.requests: dict[Any, tuple[str, int, int]] = {}

    def text_tokens(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            n = self._memo[text] = self._count(text)
        return n

    def message_tokens(self, message: Mapping[str, Any]) -> int:
        from compaction_lab.endpoints.standin import MESSAGE_OVERHEAD_TOKENS

        content = message.get("content") or ""
        text = content if isinstance(content, str) else json.dumps(content)
        if message.get("tool_calls"):
            text += json.dumps(message["tool_calls"])
        return self.text_tokens(text) + MESSAGE_OVERHEAD_TOKENS

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        return self.text_tokens(json.dumps([dict(t) for t in tools])) if tools else 0

    def add(self, key: Any, purpose: str, prompt_tokens: int, output_tokens: int) -> None:
        self.requests.setdefault(key, (purpose, prompt_tokens, output_tokens))


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode("utf-8")).hexdigest()


class _CountingSummarizer:
    """A model summarizer that counts each summary request and answers as the stand-in endpoint would."""

    stand_in = False
    deterministic = False

    def __init__(self, counts: _Counter, model: str):
        self.counts, self.model, self.name = counts, model, f"model: {model}"

    def summarize(self, request: Any) -> Any:
        from compaction_lab.endpoints.standin import DEFAULT_REPLY_TOKENS
        from compaction_lab.summarize import SummaryResult
        from compaction_lab.summarize.endpoint import wire_body

        body = wire_body(request)
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_REPLY_TOKENS)
        prompt = sum(self.counts.message_tokens(m) for m in body["messages"]) + self.counts.tools_tokens(
            body.get("tools") or ()
        )
        self.counts.add(("summary", _digest(body)), f"summary:{request.strategy}", prompt, n)
        return SummaryResult(("(dry run)" + " x" * n).strip(), prompt, 0, n)


@dataclass
class _Projector:
    """Every (session, arm, cut, context) compacted once, as `strategies.compact` does (no checkpoint, no memo)."""

    done: dict[Any, Any] = dataclasses.field(default_factory=dict)

    def __call__(self, session: Any, strategy_name: str, cut: int, ctx: Any) -> Any:
        from compaction_lab import strategies
        from compaction_lab.strategies import calibration

        key = (
            session.id,
            strategy_name,
            cut,
            ctx.window,
            ctx.output_ceiling,
            _digest(dict(ctx.params)),
            id(ctx.summarizer),
        )
        if key not in self.done:
            c = dataclasses.replace(ctx, shape=ctx.shape.for_session(session))
            c = calibration.calibrated_context(session, c)
            self.done[key] = strategies.get(strategy_name).compact(session, cut, c).finalize(c.encoding)
        return self.done[key]


@dataclass(frozen=True)
class _Prefix:
    """A projection's messages as a reader sends them: what identifies them, and their tokens."""

    key: str
    tokens: int


def _prefix(counts: _Counter, messages: list[dict[str, Any]]) -> _Prefix:
    from compaction_lab.summarize.endpoint import wire_messages

    wired = wire_messages(messages)
    return _Prefix(_digest(wired), sum(counts.message_tokens(m) for m in wired))


def _ask(
    counts: _Counter,
    prefix: _Prefix,
    finals: Iterable[tuple[dict[str, Any] | None, int]],
    tools: Sequence[Mapping[str, Any]],
    tool_choice: Any,
    max_tokens: int,
    purpose: str,
    temperature: float | None,
) -> None:
    """Count one request per (final message, draw) after `prefix`, with `tools` beside it."""
    tools_key = _digest([dict(t) for t in tools])
    base = prefix.tokens + counts.tools_tokens(tools)
    choice = tool_choice if tools else None
    for final, draw in finals:
        extra = counts.message_tokens(final) if final is not None else 0
        content = None if final is None else final["content"]
        key = ("ask", prefix.key, tools_key, _digest(choice), max_tokens, temperature, content, draw)
        counts.add(key, purpose, base + extra, max_tokens)


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class CountedPlan(Plan):
    """A `Plan` counted from the run's cases (`estimate_run`), not from a dry run.

    Attributes
    ----------
    ledger_calls : int
        Answered calls of this model the ledger holds already (not matched to the planned requests: the
        count assumes none of them is reused, an upper bound on what the run pays).
    not_counted : tuple of str
        Calls the count leaves out, named (the live cache-shape experiment).
    """

    ledger_calls: int = 0
    not_counted: tuple[str, ...] = ()

    def method_lines(self) -> list[str]:
        """Return the lines saying the plan is an estimate from counts, what it leaves out and cannot know."""
        lines = []
        if self.ledger_calls:
            lines.append(
                f"  the ledger holds {self.ledger_calls} answered call(s) of this model: not matched to these "
                "requests, so a rerun may pay less (--dry-run counts it exactly)"
            )
        lines += [f"  not counted: {missing}" for missing in self.not_counted]
        lines.append(
            f"  (estimate from counts -- cases x arms x questions x draws, summaries and projections computed, "
            f"no request built or sent: {self.seconds:.0f} s; it cannot know how often an open-book reader "
            "searches, reply lengths, the provider's tokenizer or cache hits; --dry-run runs the notebooks "
            "against a stand-in endpoint for the exact count)"
        )
        return lines

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``doctor --json``), with the method and what was not counted."""
        return {
            **super().as_dict(),
            "method": "counts",
            "ledger_calls": self.ledger_calls,
            "not_counted": list(self.not_counted),
        }


def _effective(prof: Any, notebook: str) -> dict[str, Any]:
    """Return what `notebook` runs with: its declared defaults, then the profile's values (`params._effective`)."""
    from compaction_lab.run import params

    declared = params.declared_parameters(notebook)
    eff = {k: d.default for k, d in declared.items() if d.has_default}
    eff.update({k: v for k, v in prof.parameters_for(notebook).items() if k in declared})
    return eff


def _ledger_calls(path: Path, model: str) -> int:
    """Answered calls of `model` in the ledger at `path` (0 when there is none); read-only."""
    if not path.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            row = db.execute("SELECT COUNT(*) FROM calls WHERE status = 'done' AND model = ?", (model,)).fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0]) if row else 0


def _temperature(eff: Mapping[str, Any]) -> float | None:
    t = eff.get("reader_temperature")
    return float(t) if t is not None and float(t) >= 0 else None


def estimate_run(profile: Any, *, overrides: Mapping[str, Any] | None = None) -> CountedPlan | None:
    """Count the calls a run of a profile would send, from its cases, arms and questions (nothing sent).

    Parameters
    ----------
    profile : Profile or str
        A loaded profile, a name or a YAML path (providers resolved as a run resolves them).
    overrides : mapping, optional
        Chain-wide parameters (``--set``).

    Returns
    -------
    CountedPlan, or None when the profile calls no model.

    Raises
    ------
    ProfileError
        When the profile cannot make a run (its parameters checked as `run_profile` checks them).
    ValueError
        When a stage refuses its parameters (as the notebook would).
    """
    from compaction_lab.core import paths
    from compaction_lab.endpoints import providers, shared
    from compaction_lab.run import params as params_mod
    from compaction_lab.run import runner

    prof = runner.load_profile(profile) if isinstance(profile, (str, Path)) else profile
    prof = providers.resolve_profile(prof.with_parameters(dict(overrides or {})))
    prof = params_mod.checked(prof)
    notebooks = planned_notebooks(prof)
    if not notebooks:
        return None
    cfg = shared.config_of(prof.parameters["model"])
    started = time.perf_counter()
    counts = _Counter()
    not_counted: list[str] = []
    with tempfile.TemporaryDirectory(prefix="compaction-lab-estimate-") as tmp:
        out = Path(tmp)
        _count_chain(prof, notebooks, out, counts, cfg.model, not_counted)
    rows = pd.DataFrame(list(counts.requests.values()), columns=["purpose", "prompt_tokens", "output_tokens"])
    currency = None
    if cfg.price_table:
        from compaction_lab.core.usage import Usage
        from compaction_lab.endpoints import prices
        from compaction_lab.endpoints.client import price_usage

        table = prices.load_price_table(cfg.price_table)
        currency = table.currency
        rows["cost"] = [
            price_usage(table, Usage(int(p), 0, int(o)))
            for p, o in zip(rows["prompt_tokens"], rows["output_tokens"], strict=True)
        ]
    else:
        rows["cost"] = None
    calls = calls_by_purpose(rows)
    from compaction_lab.exam.readers.model import ModelReader

    n_open = int(calls.loc[calls["purpose"] == OPEN_BOOK_PURPOSE, "calls"].sum())
    return CountedPlan(
        profile=prof.name,
        model=cfg.model,
        base_url=cfg.base_url,
        calls=calls,
        reused=0,
        open_book_extra=n_open * ModelReader.max_tool_rounds,
        currency=currency,
        seconds=time.perf_counter() - started,
        ledger_calls=_ledger_calls(Path(cfg.ledger) if cfg.ledger else paths.ledger_path(), cfg.model),
        not_counted=tuple(not_counted),
    )


def _count_chain(
    prof: Any, notebooks: Sequence[str], out: Path, counts: _Counter, model: str, not_counted: list[str]
) -> None:
    """Walk the chain's notebooks in order, counting what each would send (the module docstring)."""
    from compaction_lab import summarize
    from compaction_lab.exam import exam
    from compaction_lab.exam.actions.next_action import action_messages, offered_tools
    from compaction_lab.exam.exams import continuation, open_book
    from compaction_lab.exam.questions import cases as exam_cases
    from compaction_lab.exam.readers import HISTORY_TOOL_DEFINITIONS
    from compaction_lab.exam.readers.model import ACTION_TOKENS, ANSWER_TOKENS
    from compaction_lab.exam.readers.reading import question_message
    from compaction_lab.ingest import sources, synthetic
    from compaction_lab.privacy import redactor as redaction
    from compaction_lab.report import explorer
    from compaction_lab.strategies import anatomy
    from compaction_lab.strategies import names as all_strategies
    from compaction_lab.strategies.base import CompactionContext

    project = _Projector()
    summarizers: dict[str, Any] = {}

    def context(eff: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> CompactionContext:
        name = str(eff.get("summarizer") or "extractive")
        if name not in summarizers:
            summarizers[name] = (
                _CountingSummarizer(counts, model) if name == "model" else summarize.get_summarizer(name)
            )
        return CompactionContext(
            window=int(eff["window"]),
            output_ceiling=int(eff["output_ceiling"]),
            summarizer=summarizers[name],
            params=dict(extra or {}),
        )

    def closed_requests(
        cases: Sequence[Any], sessions: Mapping[str, Any], run_strategies: Sequence[str], eff: Any
    ) -> None:
        ctx = context(eff)
        reader = eff.get("reader") == "model"
        for case in cases:
            s = sessions[case.session_id]
            for strategy_name in run_strategies:
                p = project(s, strategy_name, case.cut, ctx)
                if reader:
                    finals = [(question_message(q), d) for q in case.questions for d in range(int(eff["draws"]))]
                    tools = ctx.shape.for_session(s).tools
                    _ask(
                        counts, _prefix(counts, p.messages()), finals, tools, "none", ANSWER_TOKENS,
                        CLOSED_PURPOSE, _temperature(eff),
                    )  # fmt: skip

    eff01 = _effective(prof, "01_context_composition")
    spec = synthetic.SyntheticSpec(
        seed=int(eff01["seed"]),
        n_chains=int(eff01["n_chains"]),
        window_tokens=int(eff01["window_tokens"]),
        decoys_per_chain=int(eff01["decoys_per_chain"]),
        encoding=str(eff01["encoding"]),
    )
    src = sources.gather(eff01.get("session_paths") or [], spec, progress=False, redactor=redaction.redactor(False))
    sources.save(src, out, redact=bool(eff01.get("redact")), redact_patterns=eff01.get("redact_patterns") or None)
    for nb in notebooks:
        eff = _effective(prof, nb)
        run_strategies = list(eff.get("strategy_names") or all_strategies())
        if nb == "02_projection_anatomy" and eff.get("summarizer") == "model":
            ctx = context(eff)
            saved = sources.load_saved(out)
            for cut in anatomy.cases_at_end(saved):
                for strategy_name in run_strategies:
                    project(cut.session, strategy_name, cut.cut, ctx)
            if saved:
                # The notebook's explorer widget draws once as it opens: the first session at its end, the
                # run's first arm, its sliders' starting values (W and O held to the sliders' ranges).
                first = anatomy.cases_at_end(saved[:1])[0]
                project(first.session, run_strategies[0], first.cut, explorer.start_context(context(eff)))
        elif nb == "03_closed_book_exam":
            closed_params = exam.get("closed").params(eff)
            rc = exam.get("closed").cases(out, closed_params)
            closed_requests(rc.cases, rc.sessions, run_strategies, eff)
            rec = exam.get("recorded").cases(out, closed_params)
            closed_requests(rec.cases, rec.sessions, ["recorded", *[a for a in run_strategies if a != "recorded"]], eff)
        elif nb == "04_cost_model":
            if eff.get("live_shape_experiment"):
                not_counted.append("notebook 04's live cache-shape experiment (live_shape_experiment: true)")
            if eff.get("summarizer") != "model":
                continue
            rc = exam_cases.for_run(out, {})
            ctx = context(eff)
            priced = exam_cases.priced_cases(rc, int(eff["cost_cases"]))
            for case in priced:
                for strategy_name in run_strategies:
                    project(rc.sessions[case.session_id], strategy_name, case.cut, ctx)
                if eff.get("what_if_codex_tools"):
                    project(rc.sessions[case.session_id], "codex", case.cut, context(eff, {"summary_tools": True}))
        elif nb == "05_open_book_exam":
            book = open_book.OpenBookParams.coerce(exam.get("open_book").params(eff))
            rc = exam_cases.for_source(out, book.case_params())
            ctx = context(eff)
            reader = eff.get("reader") == "model"
            for case in rc.cases:
                p = project(rc.sessions[case.session_id], book.strategy, case.cut, ctx)
                if not reader:
                    continue
                prefix, shape_tools = _prefix(counts, p.messages()), list(open_book.shape_tools_of(p))
                history = [t for t in HISTORY_TOOL_DEFINITIONS if t not in shape_tools]
                for rnd in book.rounds():
                    finals = [(question_message(q, rnd.wording), d) for q in case.questions for d in range(book.draws)]
                    if rnd.book == "open":
                        _ask(
                            counts, prefix, finals, [*shape_tools, *history], None, ANSWER_TOKENS,
                            OPEN_BOOK_PURPOSE, _temperature(eff),
                        )  # fmt: skip
                    else:
                        _ask(
                            counts, prefix, finals, shape_tools, "none", ANSWER_TOKENS, CLOSED_PURPOSE,
                            _temperature(eff),
                        )  # fmt: skip
        elif nb == "06_continuation_exam":
            cp = continuation.ContinuationParams.coerce(exam.get("continuation").params(eff))
            keys = continuation.keys_for(out, cp, context({**eff, "summarizer": "none"}))
            ctx = context(eff)
            reader = eff.get("reader") == "model"
            for cc in keys.keys:
                s = keys.sessions[cc.case.session_id]
                for strategy_name in continuation.strategies_of(cc.block, cp.names):
                    p = project(s, strategy_name, cc.case.cut, ctx)
                    tools = offered_tools(ctx.shape.for_session(s).tools, s)
                    if reader and cc.actions and tools:
                        prefix = _prefix(counts, action_messages(p.messages()))
                        asks: list[tuple[dict[str, Any] | None, int]] = [(None, d) for d in range(cp.draws)]
                        _ask(
                            counts, prefix, asks, tools, "required", ACTION_TOKENS, CONTINUATION_PURPOSE,
                            _temperature(eff),
                        )  # fmt: skip


__all__ = ["CLOSED_PURPOSE", "CountedPlan", "estimate_run"]
