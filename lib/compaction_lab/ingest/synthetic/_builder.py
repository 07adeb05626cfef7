"""The chain builder: emits records along task arcs until the window is full.

A chain is a system prompt followed by tasks. Each task follows the arc of a real
coding session (goal, explore, change, test until green, lint, report, sometimes
commit), with side steps between phases that host planted tool facts, measurements
and filler (logs, listings, builds, benchmarks). `_ChainBuilder` owns the order of
records, their timestamps and the token count that ends the chain; what a tool
prints comes from `_world`, `_testruns` and `_tools`, what is planted from
`_planting`, and the wording from `_prose`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from compaction_lab.core import tokens
from compaction_lab.core.session import Record, Session
from compaction_lab.ingest.synthetic import _testruns, _tools
from compaction_lab.ingest.synthetic._planting import _HOSTS, _Draft, _Planter
from compaction_lab.ingest.synthetic._project import (
    _COMMIT_THINGS,
    _COMMIT_VERBS,
    _THEMES,
    _Area,
    _area_ctx,
    _make_project,
    _module_of,
)
from compaction_lab.ingest.synthetic._prose import (
    _ACKS,
    _BUGS,
    _CAUSES,
    _CHANGES,
    _COMMIT_ASKS,
    _CONSTRAINT_LEADS,
    _DECIDE,
    _EXPLAIN,
    _EXPLORE_REASON,
    _FAIL,
    _FEATURES,
    _FOLLOWUP_ASSISTANT_PROPOSAL,
    _FOLLOWUP_ASSISTANT_SAID,
    _FOLLOWUP_EDIT,
    _FOLLOWUP_READ,
    _FOLLOWUP_REPLIES,
    _FOLLOWUP_TOOL,
    _FOLLOWUP_TOOL_ERROR,
    _FOLLOWUP_USER,
    _GOAL_EXTRAS,
    _GOALS,
    _INTERJECT,
    _NEXTS,
    _PASS,
    _PLAN,
    _REASON,
    _REPORT,
    _REPORT_FIX,
    _SYMPTOMS,
)
from compaction_lab.ingest.synthetic._random import _BASE_TIME, _b62, _fill, _heavy, _pick, _seed_int
from compaction_lab.ingest.synthetic._types import GENERATOR_VERSION, SyntheticChain, SyntheticSpec
from compaction_lab.ingest.synthetic._world import _World

#: A follow-up user turn every this many user turns (uniform draw); the first comes sooner.
_FOLLOWUP_GAP = (15, 30)
_FIRST_FOLLOWUP = (8, 16)


class _Full(Exception):
    """Raised when the chain has reached its window (after any open tool pairs are closed)."""


@dataclass(frozen=True)
class _Note:
    """What a record is about, for follow-ups: a subject phrase (never a planted value)."""

    subject: str
    kind: str  # goal constraint plan explain decision value fix report reasoning tool followup misc
    error: bool = False


@dataclass
class _Call:
    """A tool call about to be emitted, with its (already generated) output."""

    tool: str
    target: str
    args: dict[str, Any]
    output: str
    note: _Note
    is_error: bool = False
    draft: _Draft | None = None
    dt: tuple[int, int] = (300, 6000)  # how long the tool ran, in ms (min, max)


class _ChainBuilder:
    """Grows one chain. All randomness comes from ``self.rng``; see the package docstring.

    Parameters
    ----------
    profile : SyntheticSpec
        Generation parameters (window, encoding, decoys per chain).
    index : int
        Chain index; seeds the chain's stream and picks its theme.
    """

    def __init__(self, profile: SyntheticSpec, index: int) -> None:
        self.profile = profile
        self.index = index
        self.sid = f"syn-{profile.seed}-{index}"
        self.rng = random.Random(_seed_int(f"{profile.seed}:{index}"))
        # Rotate themes across chains (offset by the seed) so every profile covers all of them.
        theme = _THEMES[(_seed_int(f"{profile.seed}:themes") + index) % len(_THEMES)]
        self.project = _make_project(self.rng, theme)
        self.world = _World(self.rng, self.project)
        self.counter = tokens.counter(profile.encoding)
        self.records: list[Record] = []
        self.notes: list[_Note | None] = []
        self.total_tokens = 0
        self.full = False
        self.n_entries = 0
        self.clock = _BASE_TIME + timedelta(days=3 * index, minutes=self.rng.randint(0, 600))
        # Planting state draws from the same stream; creating it here keeps the draw order.
        self.plants = _Planter(self.rng, self.sid, self.world)
        self.user_turns = 0
        self.next_followup = self.rng.randint(*_FIRST_FOLLOWUP)
        self.followups: list[dict[str, Any]] = []
        self.last_area: _Area | None = None

    # -- emission ------------------------------------------------------------------------

    def _stamp(self, lo_ms: int, hi_ms: int) -> str:
        """Advance the chain's clock by a seeded step and return it as an ISO-8601 UTC timestamp."""
        self.clock += timedelta(milliseconds=self.rng.randint(lo_ms, hi_ms))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def _entry(self) -> str:
        """Return the next entry id (entries group the blocks of one message)."""
        self.n_entries += 1
        return f"{self.sid}-e{self.n_entries:05d}"

    def _emit(
        self,
        kind: str,
        text: str,
        entry: str,
        block: int,
        note: _Note | None,
        dt: tuple[int, int],
        *,
        tool: str | None = None,
        target: str | None = None,
        call_id: str | None = None,
        is_error: bool = False,
        draft: _Draft | None = None,
    ) -> Record:
        """Append one record, count its report tokens, and register the fact it carries, if any."""
        rec = Record(
            session_id=self.sid,
            entry_id=entry,
            block_index=block,
            source_order=len(self.records),
            kind=kind,
            text=text,
            tool=tool,
            target=target,
            call_id=call_id,
            is_error=is_error,
            timestamp=self._stamp(*dt),
        )
        self.records.append(rec)
        self.notes.append(note)
        # One count per record as it is added (cached by the shared counter); never re-join the chain.
        self.total_tokens += self.counter.count(text)
        if draft is not None:
            self.plants.register(draft, rec)
        if self.total_tokens >= self.profile.window_tokens:
            self.full = True
        return rec

    def _stop_if_full(self) -> None:
        """End the chain (via `_Full`) once the window is reached."""
        if self.full:
            raise _Full

    def _user(self, text: str, note: _Note | None, draft: _Draft | None = None) -> Record:
        """Add a user turn (one entry, one record)."""
        rec = self._emit("user", text, self._entry(), 0, note, (15_000, 600_000), draft=draft)
        self.user_turns += 1
        self._stop_if_full()
        return rec

    def _turn(self, blocks: Sequence[tuple[str, str, _Note | None, _Draft | None]], calls: Sequence[_Call]) -> None:
        """One assistant entry (prose / reasoning blocks, then tool calls) and the tool outputs.

        If the window fills on a call, that call's output is still emitted (and those of
        earlier calls of the entry), so a chain never ends on a dangling call.
        """
        entry = self._entry()
        b = 0
        for kind, text, note, draft in blocks:
            self._emit(kind, text, entry, b, note, (2_000, 25_000) if b == 0 else (50, 800), draft=draft)
            b += 1
            self._stop_if_full()
        open_calls: list[tuple[_Call, str]] = []
        for call in calls:
            cid = f"call_{_b62(self.rng, 24)}"
            text = f"{call.tool} {json.dumps(call.args, ensure_ascii=False)}"
            self._emit(
                "tool_call",
                text,
                entry,
                b,
                call.note,
                (100, 1_500) if b == 0 else (20, 300),
                tool=call.tool,
                target=call.target,
                call_id=cid,
            )
            b += 1
            open_calls.append((call, cid))
            if self.full:
                break
        for call, cid in open_calls:
            self._emit(
                "tool_output",
                call.output,
                self._entry(),
                0,
                call.note,
                call.dt,
                tool=call.tool,
                target=call.target,
                call_id=cid,
                is_error=call.is_error,
                draft=call.draft,
            )
        self._stop_if_full()

    def _say(
        self, text: str, note: _Note | None, draft: _Draft | None = None
    ) -> tuple[str, str, _Note | None, _Draft | None]:
        """Write an assistant prose block, with the planted sentence appended when there is one."""
        if draft is not None:
            text = f"{text} {draft.sentence}"
        return ("assistant", text, note, draft)

    # -- planting --------------------------------------------------------------------------

    def _due(self, categories: Sequence[str]) -> str | None:
        """Return the most overdue of `categories` at the chain's current size, if any is due."""
        return self.plants.due(categories, self.total_tokens)

    def _take(self, category: str) -> bool:
        """Claim a plant of `category` if it is due now, and schedule its next one."""
        return self.plants.take(category, self.total_tokens)

    # -- tool calls ------------------------------------------------------------------------

    def _c_read(self, path: str) -> _Call:
        """Build a ``read_file`` call and its output."""
        args, out = self.world.read(path)
        return _Call("read_file", path, args, out, _Note(path, "read"), dt=(20, 400))

    def _c_edit(self, path: str, name: str | None = None) -> _Call:
        """Build an ``edit_file`` call that replaces one block of `path` (the named one when it exists)."""
        args, out, edited = self.world.edit(path, name)
        what = f"`{edited}` in {path}" if edited != path else path
        return _Call("edit_file", path, args, out, _Note(what, "edit"), dt=(20, 400))

    def _c_bash(
        self,
        cmd: str,
        out: str,
        subject: str,
        error: bool = False,
        draft: _Draft | None = None,
        dt: tuple[int, int] = (300, 8_000),
    ) -> _Call:
        """Build a ``bash`` call with its output; a failing command gets the ``Exit code`` line tools print."""
        args: dict[str, Any] = {"command": cmd}
        if self.rng.random() < 0.3:
            args["timeout"] = self.rng.choice((60000, 120000, 300000))
        if error:
            out = f"Exit code {self.rng.choice((1, 1, 1, 2))}\n{out}"
        return _Call("bash", cmd, args, out or "(no output)", _Note(subject, "tool", error), error, draft, dt)

    def _c_grep(self, pattern: str, scope: str) -> _Call:
        """Build a ``grep`` call over the generated files."""
        out = self.world.grep(pattern, scope) or "No matches found"
        target = f"{pattern} {scope}"
        return _Call(
            "grep",
            target,
            {"pattern": pattern, "path": scope, "flags": "-rn"},
            out,
            _Note(f"the search for `{pattern}`", "tool"),
            dt=(30, 900),
        )

    def _c_http(
        self, method: str, url: str, body: Any, out: str, subject: str, error: bool = False, draft: _Draft | None = None
    ) -> _Call:
        """Build an ``http_request`` call against the local stack."""
        args: dict[str, Any] = {"method": method, "url": url, "headers": {"accept": "application/json"}}
        if body is not None:
            args["json"] = body
        return _Call("http_request", url, args, out, _Note(subject, "tool", error), error, draft, (40, 3_000))

    def _test_cmd(self, areas: Sequence[_Area], style: str) -> str:
        """Return the command that runs the tests of `areas` (the whole suite when all areas are given)."""
        lang = self.project.lang
        whole = len(areas) == len(self.project.theme.areas)
        if lang == "python":
            target = "" if whole else " " + " ".join(a.test for a in areas)
            flag = {"verbose": " -v", "q": " -q"}.get(style, "")
            return f"pytest{target}{flag}"
        if lang == "typescript":
            target = "" if whole else " " + " ".join(a.test for a in areas)
            return f"npx vitest run{target}" + (" --reporter=verbose" if style == "verbose" else "")
        if whole:
            return "cargo test"
        return "cargo test " + " ".join(f"--test {a.test.rsplit('/', 1)[-1][:-3]}" for a in areas)

    def _lint_tools(self) -> list[tuple[str, str]]:
        """(tool, command) of the project's linters and type checkers."""
        pkg = self.project.theme.package
        return {
            "python": [("ruff", f"ruff check {pkg} tests"), ("mypy", f"mypy {pkg}")],
            "typescript": [("tsc", "npx tsc --noEmit"), ("eslint", "npx eslint src --ext .ts,.tsx")],
            "rust": [("clippy", "cargo clippy --all-targets -- -D warnings")],
        }[self.project.lang]

    # -- the arc -----------------------------------------------------------------------------

    def _system(self) -> None:
        """Add the system prompt: the agent's tools, working rules and environment."""
        p = self.project
        runtime = {"python": f"Python {p.python}", "typescript": "Node.js v20.12.2", "rust": "rustc 1.77.2"}[p.lang]
        text = (
            f"You are an autonomous coding agent working in the repository at {p.root}. You can run shell commands, "
            "read, write and edit files, search the code and call HTTP endpoints of the local stack through the "
            "provided tools (bash, read_file, edit_file, write_file, grep, http_request). Work in small, verifiable "
            "steps: read the relevant code before changing it, run the tests after every change, and report what "
            "you changed and why. Never commit, push or delete data unless the user asks. Ask before touching "
            f"production resources.\n\nEnvironment: Linux 6.5, {runtime}, git branch {p.branch}. "
            f"Today's date: {self.clock.strftime('%Y-%m-%d')}."
        )
        self._emit("system", text, self._entry(), 0, None, (0, 0))
        self._stop_if_full()

    def _pick_area(self) -> _Area:
        """Pick the area of the next task; tasks often stay in the previous area, as real sessions do."""
        areas = self.project.theme.areas
        if self.last_area is not None and self.rng.random() < 0.45:
            return self.last_area
        self.last_area = _pick(self.rng, areas)
        return self.last_area

    def _task(self) -> None:
        """One task along the arc: goal, explore, change, test, lint, report, sometimes commit."""
        rng = self.rng
        area = self._pick_area()
        fn = _pick(rng, area.funcs)
        ctx = _area_ctx(rng, self.project, area, fn)
        ctx["module"] = _module_of(area, fn)
        ctx["config"] = self.project.theme.configs[0]
        others = [m for a in self.project.theme.areas for m in a.modules if m != ctx["module"]]
        ctx["other_module"] = _pick(rng, others)
        self._added_test = False
        bugs = _BUGS if self.project.theme.key != "rust_cli" else tuple(b for b in _BUGS if "currency" not in b[0])
        bug, bug_short = _pick(rng, bugs)
        ctx.update(
            bug=_fill(bug, ctx),
            bug_short=_fill(bug_short, ctx),
            symptom=_fill(_pick(rng, _SYMPTOMS), ctx),
            feature=_fill(_pick(rng, _FEATURES), ctx),
        )
        kind, goal_t, subject_t = _pick(rng, _GOALS)

        self._maybe_followup(ctx)
        # Opening user turn: the goal, sometimes a constraint, sometimes a house rule.
        draft = self.plants.templated("user_constraint", ctx) if self._take("user_constraint") else None
        text = _fill(goal_t, ctx)
        # No paste in the very first turn: a smoke-size window must still reach the first plants.
        if kind in ("bug", "flaky", "perf") and self.user_turns > 0 and rng.random() < 0.35:
            text += "\n\n" + self._pasted(area)
        if draft is not None:
            text += " " + draft.sentence
        elif rng.random() < 0.4:
            text += " " + _pick(rng, _GOAL_EXTRAS)
        note = _Note(draft.subject if draft else _fill(subject_t, ctx), "constraint" if draft else "goal")
        self._user(text, note, draft)

        self._explore(area, ctx, kind)
        self._side_slot(area, ctx)
        self._change(area, ctx, kind)
        self._side_slot(area, ctx)
        self._test_loop(area, ctx)
        if rng.random() < 0.5:
            self._interject(area, ctx)
        self._lint(area, ctx)
        self._side_slot(area, ctx)
        self._report(area, ctx, kind)
        if rng.random() < 0.35:
            self._commit(area, ctx)

    def _pasted(self, area: _Area) -> str:
        """Something the user pastes into a turn: a CI log excerpt or a stack trace from staging."""
        rng, world = self.rng, self.world
        if rng.random() < 0.5:
            body = _tools.logs(world, _heavy(rng, 12, 0.8, 3, 60))
            lead = _pick(
                rng, ("Here's what the staging logs show:", "Log excerpt from staging:", "From the CI job log:")
            )
        else:
            msg = f"{area.noun} {area.noun[:3]}_{_b62(rng, 14)} could not be processed"
            cls = {
                "python": ("TimeoutError: ", "KeyError: ", "RuntimeError: "),
                "typescript": ("TypeError: ", "Error: "),
                "rust": ("",),
            }[self.project.lang]
            body = _tools.traceback(world, area, _pick(rng, cls) + msg, None)
            lead = _pick(rng, ("Stack trace from staging:", "This is the traceback we get:", "Sentry shows this:"))
        return f"{lead}\n```\n{body}\n```"

    def _assistant_draft(self, ctx: Mapping[str, Any], hosts: Sequence[str]) -> _Draft | None:
        """Draw a due assistant fact of one of the `hosts` categories, if any."""
        due = self._due(hosts)
        return self.plants.templated(due, ctx) if due is not None and self._take(due) else None

    def _prose(
        self, templates: Sequence[str], ctx: Mapping[str, Any], kind: str, subject: str
    ) -> tuple[str, str, _Note | None, _Draft | None]:
        """Write an assistant prose block of `kind`, hosting a due assistant fact that fits the kind.

        Decisions are stated where the assistant plans or decides; measured values where it
        explains results or reports.
        """
        hosts = _HOSTS.get(kind, ())
        draft = self._assistant_draft(ctx, hosts)
        if draft is not None:
            note = _Note(draft.subject, "decision" if draft.category == "assistant_decision" else "value")
        else:
            note = _Note(subject, kind)
        return self._say(_fill(_pick(self.rng, templates), ctx), note, draft)

    def _explore(self, area: _Area, ctx: dict[str, Any], kind: str) -> None:
        """Read the code around the task (module, test, grep, listing, config, schema), then explain it."""
        rng, world = self.rng, self.world
        module = ctx["module"]
        calls = [self._c_read(module)]
        if rng.random() < 0.6:
            calls.append(self._c_read(area.test))
        if rng.random() < 0.5:
            scope = {"python": f"{self.project.theme.package} tests", "typescript": "src", "rust": "src tests"}[
                self.project.lang
            ]
            calls.append(self._c_grep(ctx["fn"], scope))
        if rng.random() < 0.25:
            d = module.rsplit("/", 1)[0]
            calls.append(
                _Call(
                    "bash",
                    f"ls -la {d}",
                    {"command": f"ls -la {d}"},
                    world.ls(d),
                    _Note(f"the listing of {d}/", "tool"),
                    dt=(20, 200),
                )
            )
        if rng.random() < 0.25:
            calls.append(self._c_bash("git status", world.git_status(), "`git status`", dt=(20, 300)))
        if kind in ("config",) or rng.random() < 0.2:
            calls.append(self._c_read(ctx["config"]))
        if kind == "schema" or rng.random() < 0.1:
            schemas = [p for p in world.paths if p in world.schema]
            mine = [p for p in schemas if world.schema[p][0] is area]
            calls.append(self._c_read((mine or schemas)[-1]))
        first = [self._prose(_PLAN, ctx, "plan", f"the plan for `{ctx['fn']}`")]
        # A planted probe goes first, so its output comes early even in a smoke-size chain.
        due = self._due(("tool_output_line", "tool_returned_id"))
        if due is not None:
            probe = self._planted_tool_call(due, area, ctx)
            if probe is not None:
                calls.insert(0, probe)
        k = 1 + (rng.random() < 0.5) + (rng.random() < 0.3)
        self._turn(first, calls[:k])
        for call in calls[k:]:
            blocks = []
            if rng.random() < 0.35:
                blocks.append(
                    (
                        "reasoning",
                        _fill(_pick(rng, _EXPLORE_REASON), ctx),
                        _Note(f"where `{ctx['fn']}` is used", "reasoning"),
                        None,
                    )
                )
            self._turn(blocks, [call])
        self._turn([self._prose(_EXPLAIN, ctx, "explain", f"how `{ctx['fn']}` works today")], [])

    def _change(self, area: _Area, ctx: dict[str, Any], kind: str) -> None:
        """Add the edits of the task, each announced by a decision, plus a migration for schema tasks."""
        rng, world = self.rng, self.world
        module = ctx["module"]
        edits: list[Callable[[], _Call]] = [
            lambda: self._c_edit(module, ctx["fn"] if ctx["fn"] in world.file(module).names else None)
        ]
        if kind in ("bug", "flaky", "feature") and rng.random() < 0.6:
            edits.append(lambda: self._add_test_call(area))
        if kind == "config":
            edits.append(lambda: self._c_edit(ctx["config"]))
        for _ in range(rng.choice((0, 0, 1, 2))):
            edits.append(lambda: self._c_edit(_pick(rng, area.modules)))
        for make in edits:
            blocks: list[tuple[str, str, _Note | None, _Draft | None]] = []
            if rng.random() < 0.2:
                blocks.append(
                    (
                        "reasoning",
                        _fill(_pick(rng, _REASON), ctx),
                        _Note(f"how to change `{ctx['fn']}`", "reasoning"),
                        None,
                    )
                )
            if rng.random() < 0.8:
                blocks.append(self._prose(_DECIDE, ctx, "decision", f"the approach for `{ctx['fn']}`"))
            self._turn(blocks, [make()])
        if kind == "schema" or rng.random() < 0.08:
            args, out, path = world.write_schema(area)
            lead = {
                "alembic": (
                    "I'll add the migration now; it only adds the column and an index, so it is safe to run online.",
                    "Next, the migration for «table».",
                ),
                "sql": (
                    "Next, the SQL migration for «table»: a new column plus an index, nothing that rewrites the table.",
                    "I'll write the migration as a plain SQL file next to the others.",
                ),
                "zod": ("The API schema needs the new field too; I'll add a new version of the «noun» schema.",),
                "jsonschema": ("I'll add a new version of the «noun» JSON Schema so old files still validate.",),
            }[self.project.theme.schema_kind]
            self._turn(
                [self._prose(lead, ctx, "decision", f"the schema change for {area.table}")],
                [_Call("write_file", path, args, out, _Note(f"the new migration {path}", "tool"), dt=(20, 300))],
            )
            cmd, mout = _tools.migrate(world, path)
            self._turn([], [self._c_bash(cmd, mout, f"applying {path}")])

    def _add_test_call(self, area: _Area) -> _Call:
        """Build an ``edit_file`` call that appends a new test for `area`."""
        self._added_test = True
        args, out, title = self.world.add_test(area)
        return _Call("edit_file", area.test, args, out, _Note(f"the new test {title}", "edit"), dt=(20, 400))

    def _test_loop(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Run the area's tests, fixing failures until green; sometimes the whole suite after."""
        rng, world = self.rng, self.world
        n_fail_rounds = rng.choices((0, 1, 2, 3), (35, 40, 20, 5))[0]
        for r in range(n_fail_rounds + 1):
            failing = r < n_fail_rounds
            style = rng.choice(("q", "q", "default", "verbose"))
            cmd = self._test_cmd([area], style)
            out, failures = _testruns.run_tests(world, [area], rng.randint(1, 2) if failing else 0, style)
            blocks: list[tuple[str, str, _Note | None, _Draft | None]] = (
                []
                if rng.random() < 0.5
                else [
                    (
                        "assistant",
                        _pick(rng, ("Running the tests.", "Let me run the tests again.", f"Now {area.test}.")),
                        None,
                        None,
                    )
                ]
            )
            self._turn(blocks, [self._c_bash(cmd, out, f"the `{cmd}` run", error=bool(failures), dt=(800, 40_000))])
            if not failures:
                break
            f0 = failures[0]
            fctx = dict(ctx, title=f0.title, short=f0.short.splitlines()[0], fn=f0.fn)
            blocks = []
            if rng.random() < 0.6:
                blocks.append(
                    ("reasoning", _fill(_pick(rng, _REASON), fctx), _Note(f"the {f0.title} failure", "reasoning"), None)
                )
            blocks.append(self._prose(_FAIL, fctx, "fix", f"the cause of the {f0.title} failure"))
            target = _module_of(f0.area, f0.fn) if f0.fn in f0.area.funcs else ctx["module"]
            self._turn(blocks, [self._c_edit(target, f0.fn)])
        k = len(self.project.tests[area.name])
        new = ", including the new one" if self._added_test else ""
        self._turn([self._prose(_PASS, dict(ctx, k=k, new=new), "explain", f"the {area.name} test results")], [])
        if rng.random() < 0.45:
            style = rng.choice(("q", "default", "verbose"))
            cmd = self._test_cmd(self.project.theme.areas, style)
            out, _ = _testruns.run_tests(world, self.project.theme.areas, 0, style)
            self._turn([], [self._c_bash(cmd, out, "the full test suite run", dt=(5_000, 120_000))])

    def _lint(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Run the project's linters and type checkers, fixing what they report."""
        rng, world = self.rng, self.world
        if rng.random() < 0.35:
            return
        for tool, cmd in self._lint_tools():
            n_err = rng.choice((0, 0, 0, 1, 2, 3, 5)) if rng.random() < 0.5 else 0
            out = _tools.lint(world, tool, n_err)
            self._turn([], [self._c_bash(cmd, out, f"the `{cmd}` run", error=n_err > 0, dt=(500, 30_000))])
            if n_err:
                msg = (
                    "«tool» found a few issues in code I touched; fixing them now."
                    if n_err > 1
                    else "One «tool» complaint; quick fix."
                )
                self._turn(
                    [("assistant", _fill(msg, {"tool": tool}), _Note(f"the {tool} findings", "explain"), None)],
                    [self._c_edit(ctx["module"])],
                )
                self._turn([], [self._c_bash(cmd, _tools.lint(world, tool, 0), f"the `{cmd}` run", dt=(500, 30_000))])

    def _report(self, area: _Area, ctx: dict[str, Any], kind: str) -> None:
        """Add the assistant's closing summary of the task."""
        rng = self.rng
        c = dict(
            ctx,
            change=_fill(_pick(rng, _CHANGES), ctx),
            cause=_fill(_pick(rng, _CAUSES), ctx),
            next=_fill(_pick(rng, _NEXTS), ctx),
        )
        templates = _REPORT_FIX if kind in ("bug", "flaky", "perf") else _REPORT
        self._turn([self._prose(templates, c, "report", f"the summary of the {area.name} change")], [])

    def _commit(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Add a commit: the user asks for one; the assistant checks status and diff, then commits."""
        world = self.world
        if not world.dirty() and not world.untracked:
            return
        self._user(_pick(self.rng, _COMMIT_ASKS), None)
        self._turn(
            [("assistant", "Checking what changed before committing.", None, None)],
            [
                self._c_bash("git status", world.git_status(), "`git status`", dt=(20, 300)),
                self._c_bash("git diff", world.git_diff(), "`git diff`", dt=(20, 500)),
            ],
        )
        msg = f"{_pick(self.rng, _COMMIT_VERBS)} {_fill(_pick(self.rng, _COMMIT_THINGS), ctx)}"
        cmd = f'git add -A && git commit -m "{msg}"'
        out = world.git_commit(msg, self.clock)
        self._turn([], [self._c_bash(cmd, out, "the commit", dt=(50, 900))])

    def _interject(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Add a user interjection mid-task: a due follow-up, a new constraint, or a casual remark."""
        rng = self.rng
        if self.user_turns >= self.next_followup:
            self._maybe_followup(ctx)
            return
        draft = self.plants.templated("user_constraint", ctx) if self._take("user_constraint") else None
        if draft is not None:
            self._user(_pick(rng, _CONSTRAINT_LEADS) + draft.sentence, _Note(draft.subject, "constraint"), draft)
            self._turn([("assistant", _fill(_pick(rng, _ACKS), ctx), None, None)], [])
            return
        ask, reply, read = _pick(rng, _INTERJECT)
        self._user(_fill(ask, ctx), _Note(_fill("the request about «other_module»", ctx), "goal") if read else None)
        self._turn([("assistant", _fill(reply, ctx), None, None)], [self._c_read(ctx["other_module"])] if read else [])

    def _maybe_followup(self, ctx: dict[str, Any]) -> None:
        """Add a user turn that refers back to an earlier record by its subject."""
        rng = self.rng
        if self.user_turns < self.next_followup:
            return
        horizon = len(self.records) - 8  # "earlier" means not the last few records
        eligible = [i for i in range(1, max(1, horizon)) if (n := self.notes[i]) is not None and n.kind != "followup"]
        if not eligible:
            return
        i = _pick(rng, eligible)
        target, note = self.records[i], self.notes[i] or _Note("", "misc")
        pointer = target.pointer
        table: tuple[str, ...]
        if pointer == "user":
            table = _FOLLOWUP_USER
        elif pointer == "assistant":
            table = _FOLLOWUP_ASSISTANT_PROPOSAL if note.kind in ("plan", "decision") else _FOLLOWUP_ASSISTANT_SAID
        elif note.kind == "edit":
            table = _FOLLOWUP_EDIT
        elif note.kind == "read":
            table = _FOLLOWUP_READ
        else:
            table = _FOLLOWUP_TOOL_ERROR if note.error else _FOLLOWUP_TOOL
        rec = self._user(_fill(_pick(rng, table), {"subject": note.subject}), _Note("the follow-up", "followup"))
        self.followups.append(
            {
                "entry_id": rec.entry_id,
                "source_order": rec.source_order,
                "refers_to_entry_id": target.entry_id,
                "refers_to_source_order": target.source_order,
                "pointer": pointer,
            }
        )
        self.next_followup = self.user_turns + rng.randint(*_FOLLOWUP_GAP)
        reply = (
            "assistant",
            _fill(_pick(rng, _FOLLOWUP_REPLIES), {"subject": note.subject}),
            _Note("the follow-up", "followup"),
            None,
        )
        calls = [self._c_read(target.target)] if target.tool == "read_file" and target.target else []
        self._turn([reply], calls)

    def _side_slot(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Add a side step between phases: whichever planted category is due, else sometimes filler."""
        due = self._due(("error_string", "tool_output_line", "tool_returned_id", "assistant_value"))
        if due == "error_string":
            self._planted_error_step(area, ctx)
        elif due in ("tool_output_line", "tool_returned_id"):
            call = self._planted_tool_call(due, area, ctx)
            if call is not None:
                lead = {
                    "tool_output_line": "Let me run this once so we have a baseline to compare against after the change.",
                    "tool_returned_id": _fill(
                        "I'll create a test «noun» through the local API to exercise the new path end to end.", ctx
                    ),
                }[due]
                self._turn([("assistant", lead, _Note(f"the check of {area.name}", "plan"), None)], [call])
                self._turn(
                    [
                        (
                            "assistant",
                            _pick(
                                self.rng,
                                (
                                    "That worked as expected.",
                                    "Good, that looks right.",
                                    "Fine; nothing surprising there.",
                                ),
                            ),
                            None,
                            None,
                        )
                    ],
                    [],
                )
        elif due == "assistant_value":
            self._measurement_step(area, ctx)
        elif self.rng.random() < 0.45:
            self._filler_step(area, ctx)

    def _planted_tool_call(self, category: str, area: _Area, ctx: dict[str, Any]) -> _Call | None:
        """Build a command (script run or API call) whose output carries a due tool fact."""
        rng, world = self.rng, self.world
        if not self._take(category):
            return None
        draft = self.plants.tool_draft(category, ctx, area)
        if draft is None:
            return None
        p = draft.params
        if category == "tool_returned_id":
            url = f"{self.project.theme.api_base}{area.path}"
            method, body = area.method, p["body"]
            if method == "GET":
                url += "?" + "&".join(f"{k}={v}" for k, v in p["body"].items())
                body = None
            obj = _tools.api_object(world, area, draft.value, p["lparams"])
            return self._c_http(
                method,
                url,
                body,
                _tools.http_response(world, 201 if method == "POST" else 200, obj),
                draft.subject,
                draft=draft,
            )
        kind = p["kind"]
        if kind == "export":
            cmd = _tools.script(world, f"export_{area.noun}s", f"--since {p['date']}")
            nb = rng.randint(1, 6)
            rows = [rng.randint(200, 5000) for _ in range(nb)]
            lines = [f"exporting {area.noun}s since {p['date']} (batch size {rng.choice((500, 1000, 5000))})"]
            lines += [f"  batch {i + 1}/{nb}: {n} rows" for i, n in enumerate(rows)]
            lines += [
                f"wrote exports/{area.noun}s-{p['date']}.csv ({sum(rows)} rows, {sum(rows) * rng.randint(90, 300) // 1024} KiB)",
                f"checksum: {draft.value}",
                f"done in {rng.uniform(0.5, 30):.1f}s",
            ]
        elif kind == "package":
            cmd = f"./scripts/package.sh {area.name}"
            lines = (
                [f"==> building {area.name} bundle"]
                + [f"  adding {m}" for m in area.modules]
                + [
                    f"  adding {self.project.theme.configs[0]}",
                    f"artifact: dist/{self.project.name}-{area.name}.tar.gz ({rng.randint(20, 9000)} KiB)",
                    f"build id: {draft.value}",
                    "==> ok",
                ]
            )
        elif kind == "seed":
            cmd = _tools.script(world, "seed_db", f"--fixture {p['fixture']}")
            lines = [f"loading fixture {p['fixture']} ..."]
            lines += [f"  {a.table}: {rng.randint(5, 3000)} rows" for a in rng.sample(self.project.theme.areas, 3)]
            lines += [f"fixture digest: {draft.value}", "seed complete"]
        else:
            cmd = _tools.script(world, "config", f"show --profile {p['profile']}")
            lines = [f"# profile: {p['profile']}"]
            for a in self.project.theme.areas:
                lines += [
                    f"{a.name}.timeout_s = {rng.choice((2.5, 5, 10, 30))}",
                    f"{a.name}.max_retries = {rng.randint(1, 6)}",
                ]
            lines.append(f"fingerprint: {draft.value}")
        return self._c_bash(cmd, "\n".join(lines), draft.subject, draft=draft)

    def _planted_error_step(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Add a job run that fails with the planted error string, then a successful rerun."""
        rng, world = self.rng, self.world
        if not self._take("error_string"):
            return
        draft = self.plants.tool_draft("error_string", ctx, area)
        if draft is None:
            return
        p = draft.params
        cmd = _tools.job(world, p["job"], f"--batch-size {p['batch']}")
        log = _tools.job_log(world, area, _heavy(rng, 6, 0.9, 1, 300))
        exc = (
            f"{self.project.theme.package}.errors.{p['cls']}: {draft.value}"
            if self.project.lang == "python"
            else draft.value
        )
        out = "\n".join(log) + "\n" + _tools.traceback(world, area, exc, None)
        self._turn(
            [
                (
                    "assistant",
                    _fill(
                        f"Let me run the {p['job']} job against the local stack to check the change end to end.", ctx
                    ),
                    _Note(f"the plan to run {p['job']}", "plan"),
                    None,
                )
            ],
            [self._c_bash(cmd, out, draft.subject, error=True, draft=draft, dt=(2_000, 90_000))],
        )
        blocks = []
        if rng.random() < 0.5:
            blocks.append(
                (
                    "reasoning",
                    "The failure is in the job's storage layer, not in the code I changed; the local stack "
                    "probably still holds state from an earlier run. A smaller batch should get under the limit.",
                    _Note(f"the {p['job']} failure", "reasoning"),
                    None,
                )
            )
        smaller = max(50, p["batch"] // rng.choice((2, 4, 5)))
        blocks.append(
            (
                "assistant",
                f"It failed with a storage error unrelated to this change. I'll retry with a batch size of {smaller}.",
                _Note(f"the failure of the {p['job']} job", "explain"),
                None,
            )
        )
        cmd2 = _tools.job(world, p["job"], f"--batch-size {smaller}")
        out2 = "\n".join(_tools.job_log(world, area, _heavy(rng, 10, 0.9, 2, 400)) + [f"{p['job']}: done"])
        self._turn(blocks, [self._c_bash(cmd2, out2, f"the {p['job']} rerun", dt=(2_000, 120_000))])

    def _filler_step(self, area: _Area, ctx: dict[str, Any], kind: str | None = None) -> None:
        """Add a tool call with no planted fact (logs, listings, history, builds, benchmarks, reads)."""
        rng, world = self.rng, self.world
        kind = (
            kind
            or rng.choices(
                ("logs", "list", "gitlog", "build", "bench", "grep", "ls", "read", "deps"),
                (20, 18, 12, 10, 10, 12, 8, 10, 6),
            )[0]
        )
        lead = None
        if kind == "logs":
            n = _heavy(rng, 60, 1.2, 5, 2500)
            cmd = {
                "python": f"tail -n {n} logs/app.log",
                "typescript": f"tail -n {n} .logs/dev-server.log",
                "rust": f"RUST_LOG=debug ./target/debug/{self.project.name} sync --dry-run 2>&1 | tail -n {n}",
            }[self.project.lang]
            call = self._c_bash(cmd, _tools.logs(world, n), "the log tail", dt=(20, 600))
            lead = "Let me check the recent log output for related errors."
        elif kind == "list":
            url, out = _tools.http_list(world, area)
            call = self._c_http("GET", url, None, out, f"the GET {area.path} listing")
            lead = _fill("Let me see what the local API currently returns for «nouns».", ctx)
        elif kind == "gitlog":
            oneline = rng.random() < 0.6
            n = rng.choice((5, 10, 20, 30)) if oneline else rng.choice((3, 5, 8))
            cmd = f"git log --oneline -n {n}" if oneline else f"git log -n {n}"
            call = self._c_bash(cmd, world.git_log(n, oneline), "the git history", dt=(20, 300))
        elif kind == "build":
            cmd = {"python": "pip install -e '.[dev]'", "typescript": "npm run build", "rust": "cargo build --release"}[
                self.project.lang
            ]
            call = self._c_bash(cmd, _tools.build(world), f"the `{cmd}` run", dt=(5_000, 180_000))
            lead = "Rebuilding to make sure everything still compiles from a clean state."
        elif kind == "bench":
            runs = rng.randint(2, 5)
            cmd = _tools.script(world, "bench", f"--endpoint '{ctx['endpoint']}' --runs {runs}")
            call = self._c_bash(
                cmd,
                _tools.bench(world, ctx["endpoint"], runs),
                f"the benchmark of {ctx['endpoint']}",
                dt=(10_000, 200_000),
            )
            lead = _fill("A quick benchmark of «endpoint» before going further.", ctx)
        elif kind == "grep":
            pat = _pick(rng, ("TIMEOUT", "MAX_RETRIES", ctx["attr"], "TODO", ctx["noun"], _pick(rng, area.funcs)))
            scope = {"python": f"{self.project.theme.package} tests", "typescript": "src", "rust": "src tests"}[
                self.project.lang
            ]
            call = self._c_grep(pat, scope)
        elif kind == "deps":
            cmd = {"python": "pip list", "typescript": "npm ls --all", "rust": "cargo tree"}[self.project.lang]
            call = self._c_bash(cmd, _tools.deps(world), f"the `{cmd}` output", dt=(300, 6_000))
            lead = "Checking which versions are actually installed."
        elif kind == "ls":
            d = _pick(rng, (area.modules[0].rsplit("/", 1)[0], self.project.theme.schema_dir, "."))
            call = _Call(
                "bash",
                f"ls -la {d}",
                {"command": f"ls -la {d}"},
                world.ls(d),
                _Note(f"the listing of {d}", "tool"),
                dt=(20, 200),
            )
        else:
            call = self._c_read(_pick(rng, list(self.project.theme.configs) + [area.test, _pick(rng, area.modules)]))
        blocks = (
            [("assistant", lead, _Note(f"the check of {area.name}", "plan"), None)]
            if lead and rng.random() < 0.7
            else []
        )
        self._turn(blocks, [call])
        if kind == "bench":
            self._turn(
                [
                    self._prose(
                        (
                            "The numbers are in line with the previous runs; no regression from this change.",
                            "Latency looks stable across runs, so the change doesn't cost anything measurable.",
                        ),
                        ctx,
                        "explain",
                        f"the benchmark of {ctx['endpoint']}",
                    )
                ],
                [],
            )

    def _measurement_step(self, area: _Area, ctx: dict[str, Any]) -> None:
        """Run a measurement, then have the assistant report a value derived from it (the planted fact).

        The raw output never shows the reported value itself: the assistant aggregates
        (p95 over runs, total rows, peak memory), so the value exists only in its prose.
        """
        rng, world = self.rng, self.world
        if not self._take("assistant_value"):
            return
        draft = self.plants.templated("assistant_value", ctx)
        if draft is None:
            return
        what = draft.key.split(":", 1)[0]
        ask = {
            "rows": "Running the «table» backfill now.",
            "mem": "Let me profile `«fn»` on the large fixture.",
            "cov": "Let me check coverage for this area.",
            "p95": "A quick benchmark of «endpoint».",
            "rps": "Let me load-test «endpoint».",
            "errrate": "Replaying recorded traffic against «endpoint».",
        }[what]
        if what in ("p95", "rps", "errrate"):
            runs = int(ctx["n"])
            cmd = _tools.script(world, "bench", f"--endpoint '{ctx['endpoint']}' --runs {runs}")
            out, lead = _tools.bench(world, ctx["endpoint"], runs), "I aggregated the per-run numbers."
        elif what == "rows":
            cmd = _tools.job(world, f"backfill_{area.table}", f"--batch-size {rng.choice((500, 1000, 5000))}")
            out = "\n".join(
                _tools.job_log(world, area, _heavy(rng, 12, 0.8, 3, 400)) + [f"backfill_{area.table}: done"]
            )
            lead = "The backfill finished without errors."
        elif what == "mem":
            prof = {
                "python": f"python -m memray run -o /tmp/{ctx['fn']}.bin scripts/profile_{area.name}.py --fixture large",
                "typescript": f"node --heap-prof scripts/profile-{area.name}.mjs --fixture large",
                "rust": f"/usr/bin/time -v ./target/release/{self.project.name} {area.name} --fixture large",
            }[self.project.lang]
            cmd = prof
            out = "\n".join(
                [f"profiling {ctx['fn']} on fixture large ({rng.randint(10, 900)}k rows)"]
                + [
                    f"  sample {i + 1}: rss={rng.randint(80, 1900)} MiB elapsed={rng.randint(200, 9000)} ms"
                    for i in range(rng.randint(3, 12))
                ]
                + ["profile written"]
            )
            lead = "Profiling done."
        else:  # coverage
            cmd = {
                "python": f"pytest --cov={self.project.theme.package} --cov-report=term-missing -q",
                "typescript": "npx vitest run --coverage",
                "rust": "cargo llvm-cov --summary-only",
            }[self.project.lang]
            rows = []
            for a in self.project.theme.areas:
                for m in a.modules:
                    stmts = rng.randint(20, 400)
                    rows.append(f"{m:<44} {stmts:>6} {rng.randint(0, stmts // 3):>6} {rng.randint(40, 100):>5}%")
            out = "\n".join(
                ["Name                                          Stmts   Miss Cover", "-" * 66]
                + rows
                + [
                    "-" * 66,
                    f"TOTAL                                        {rng.randint(800, 5000):>6} {rng.randint(50, 900):>6} {rng.randint(60, 95):>5}%",
                ]
            )
            lead = "Coverage run finished."
        self._turn(
            [("assistant", _fill(ask, ctx), _Note(f"the measurement for {area.name}", "plan"), None)],
            [self._c_bash(cmd, out, f"the `{cmd}` run", dt=(3_000, 200_000))],
        )
        self._turn([self._say(lead, _Note(draft.subject, "value"), draft)], [])

    # -- finish -----------------------------------------------------------------------------

    def build(self) -> SyntheticChain:
        """Grow the chain until the window is full and return it with its facts and decoys."""
        try:
            self._system()
            while True:
                self._task()
        except _Full:
            pass
        p, prof = self.project, self.profile
        metadata = {
            "generator": GENERATOR_VERSION,
            "seed": prof.seed,
            "index": self.index,
            "window_tokens": prof.window_tokens,
            "encoding": prof.encoding,
            "report_tokens": self.total_tokens,
            "theme": p.theme.key,
            "project": p.name,
            "cwd": p.root,
            "model": "synthetic",
            "followups": self.followups,
        }
        session = Session(
            id=self.sid, source_format="synthetic", records=tuple(self.records), source_path=None, metadata=metadata
        )
        joined = _joined(session)
        return SyntheticChain(
            session, tuple(self.plants.facts), tuple(self.plants.decoys(joined, prof.decoys_per_chain))
        )


def _joined(session: Session) -> str:
    """All record texts of `session` in one string, for occurrence checks of planted values."""
    # A separator that no generated text contains, so no match can straddle two records.
    return "\n\x00\n".join(r.text for r in session.records)
