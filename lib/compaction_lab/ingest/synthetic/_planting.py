"""Planting facts: the templates, the schedule, and the ledger that keeps each value unique.

A planted fact is a random value placed in one record with known provenance (a user
constraint, an assistant decision or measured value, a script output line, an id an
API returned, an error string) plus a question whose exact answer is that value.
`_Planter` decides when each category is due, reserves every subject, question and
value so that none repeats within a chain, records the facts as they are emitted,
and draws the decoys: values of the same shapes that occur in no record.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction_lab.core.session import POINTER_OF_KIND, Record
from compaction_lab.ingest.synthetic import _tools
from compaction_lab.ingest.synthetic._project import _BIRDS, _CURRENCIES, _FIRST, _LAST, _Area, _area_ctx, _module_of
from compaction_lab.ingest.synthetic._random import _fill, _hex, _pick, _tok
from compaction_lab.ingest.synthetic._types import CATEGORIES, CATEGORY_WEIGHTS, PlantedFact
from compaction_lab.ingest.synthetic._world import _World

#: Categories planted in assistant prose (their pointer is ``assistant``).
_ASSISTANT_CATEGORIES = ("assistant_decision", "assistant_value")

#: Mean tokens between two plants of any category (uniform draw). Each category keeps its
#: own schedule, spaced by this gap times (total weight / its weight), so a category that
#: waits for a suitable record (a user turn, a side step) never blocks the others. With the
#: waiting included this gives roughly one fact per 2-3k tokens.
_PLANT_GAP_TOKENS = (1200, 2400)
_TOTAL_WEIGHT = sum(CATEGORY_WEIGHTS.values())


@dataclass(frozen=True)
class _Draft:
    """A fact about to be planted: its value, the text that carries it and the question."""

    category: str
    value: str
    aliases: tuple[str, ...]
    question: str
    key: str  # subject key; one fact per key per chain keeps questions unambiguous
    subject: str  # how a follow-up names it (never contains the value)
    sentence: str = ""  # user / assistant sentence carrying the value
    params: Mapping[str, Any] = field(default_factory=dict)  # tool facts: what the command was


# (key, value maker, sentence, question, subject); «v» is the value. Keys with «area»
# may be planted once per area, the others once per chain.
_USER_CONSTRAINTS: tuple[tuple[str, Callable[[random.Random, Mapping[str, Any]], str], str, str, str], ...] = (
    (
        "proxy:«area»",
        lambda r, c: f"10.{r.randint(16, 250)}.{r.randint(0, 255)}.{r.randint(2, 254)}:{r.randint(20000, 64999)}",
        "Use «v» for the staging proxy in front of the «area» service; it's the only address the firewall lets through.",
        "Which host and port did the user say to use for the staging proxy in front of the «area» service?",
        "the staging proxy for the «area» service",
    ),
    (
        "flag:«area»",
        lambda r, c: f"ff_{c['area']}_{_tok(r, 6)}",
        "Put the new «area» behaviour behind the feature flag `«v»` so product can switch it off without a deploy.",
        "Which feature flag did the user ask to gate the new «area» behaviour behind?",
        "the feature flag for the «area» change",
    ),
    (
        "db:«area»",
        lambda r, c: f"{c['project'].replace('-', '_')}_it_{_tok(r, 6)}",
        "Integration tests for «area» may only run against the database `«v»`; the shared one is used for demos.",
        "Which database did the user say the «area» integration tests may run against?",
        "the database for the «area» integration tests",
    ),
    (
        "sa:«area»",
        lambda r, c: f"svc-{c['area']}-{_tok(r, 6)}",
        "Anything in the «area» code that calls the «ext» API has to use the service account `«v»`.",
        "Which service account did the user require for «area» calls to the «ext» API?",
        "the service account for «area»",
    ),
    (
        "bucket:«area»",
        lambda r, c: f"s3://{c['project']}-{c['area']}-{_tok(r, 6)}",
        "Exports from «area» have to go to the bucket `«v»`, nowhere else.",
        "Which bucket did the user say «area» exports must go to?",
        "where the «area» exports go",
    ),
    (
        "tag:«area»",
        lambda r, c: f"{r.randint(1, 9)}.{r.randint(0, 40)}.{r.randint(0, 20)}-rc.{_tok(r, 6)}",
        "When you cut the release for the «area» work, tag it exactly `«v»`.",
        "What exact release tag did the user ask for the «area» release?",
        "the release tag for the «area» work",
    ),
    (
        "canary:«area»",
        lambda r, c: f"cnry_{_tok(r, 10)}",
        "Send the header `X-Canary-Token: «v»` on every staging request to the «area» endpoints.",
        "What canary token did the user say to send on staging requests to the «area» endpoints?",
        "the canary header for the «area» endpoints",
    ),
    (
        "protected-migration",
        lambda r, c: _hex(r, 12),
        "Don't touch the migration with revision «v» — it's already applied in production.",
        "Which migration revision did the user say must not be touched?",
        "the migration that must not be touched",
    ),
    (
        "scratch-dir",
        lambda r, c: f"/tmp/{c['project']}-scratch-{_tok(r, 6)}",
        "Write temporary files only under «v»; CI wipes everything else.",
        "Which directory did the user say temporary files must go in?",
        "where temporary files should go",
    ),
)

_ASSISTANT_DECISIONS: tuple[tuple[str, Callable[[random.Random, Mapping[str, Any]], str], str, str, str], ...] = (
    (
        "cache:«fn»",
        lambda r, c: f"lru-{_pick(r, _BIRDS)}-{r.randint(1000, 9999)}",
        "I chose an LRU cache over a plain TTL cache for `«fn»` because the same keys repeat within a request burst; "
        "the cache profile is named `«v»`.",
        "What name did the assistant give the cache profile for `«fn»`?",
        "the cache for `«fn»`",
    ),
    (
        "retry:«module»",
        lambda r, c: f"retry-{_tok(r, 3)}-{_tok(r, 4)}",
        "I'm going with exponential backoff with full jitter in «module», capped at «n» attempts, and I registered the "
        "policy as `«v»`.",
        "Under what name did the assistant register the retry policy for «module»?",
        "the retry policy for «module»",
    ),
    (
        "lock:«fn»",
        lambda r, c: f"lock:{c['area']}:{_tok(r, 6)}",
        "To stop two workers from processing the same «noun», I'll take an advisory lock named `«v»` around `«fn»`.",
        "What lock name did the assistant decide to take around `«fn»`?",
        "the lock around `«fn»`",
    ),
    (
        "idem:«endpoint»",
        lambda r, c: f"idem_{_tok(r, 8)}",
        "I decided to prefix idempotency keys for «endpoint» with `«v»` so they can't collide with the legacy keys.",
        "What prefix did the assistant choose for idempotency keys on «endpoint»?",
        "idempotency keys on «endpoint»",
    ),
    (
        "queue:«noun»",
        lambda r, c: f"{c['area']}-events-{_tok(r, 6)}",
        "I'll route «noun» events through a dedicated queue, `«v»`, instead of the shared default one, because a "
        "backlog there shouldn't delay «area».",
        "Which queue did the assistant decide to route «noun» events through?",
        "the queue for «noun» events",
    ),
    (
        "fixture:«test»",
        lambda r, c: f"fx_{c['noun']}_{_tok(r, 6)}",
        "I'll record the upstream responses for «test» in a fixture called `«v»`, so the tests stop depending on the sandbox.",
        "What fixture name did the assistant choose for the recorded responses in «test»?",
        "the recorded fixture for «test»",
    ),
    (
        "alert:«area»",
        lambda r, c: f"{c['project']}-{c['area']}-{_tok(r, 6)}",
        "I'm naming the new alert rule `«v»`; it pages only when the «area» error rate stays above the threshold for ten minutes.",
        "What name did the assistant give the new alert rule for «area»?",
        "the alert rule for «area»",
    ),
)

_ASSISTANT_VALUES: tuple[tuple[str, Callable[[random.Random, Mapping[str, Any]], str], str, str, str], ...] = (
    (
        "p95:«endpoint»",
        lambda r, c: f"{r.randint(100, 900)}.{r.randint(100, 999)} ms",
        "Across the «n» benchmark runs, the p95 latency of «endpoint» came out at «v», comfortably under the budget.",
        "What p95 latency did the assistant report for «endpoint»?",
        "the p95 latency of «endpoint»",
    ),
    (
        "rows:«table»",
        lambda r, c: f"{r.randint(1, 9)},{r.randint(0, 999):03d},{r.randint(0, 999):03d}",
        "After the backfill the «table» table holds «v» rows, which matches the source count.",
        "How many rows did the assistant say the «table» table holds after the backfill?",
        "the «table» backfill",
    ),
    (
        "mem:«fn»",
        lambda r, c: f"{r.randint(100, 2000)}.{r.randint(100, 999)} MiB",
        "Peak memory of `«fn»` on the large fixture was «v», so streaming the rows is worth it.",
        "What peak memory did the assistant measure for `«fn»` on the large fixture?",
        "the memory use of `«fn»`",
    ),
    (
        "cov:«module»",
        lambda r, c: f"{r.randint(60, 98)}.{r.randint(1000, 9999)}%",
        "Line coverage of «module» is now «v».",
        "What line coverage did the assistant report for «module»?",
        "the coverage of «module»",
    ),
    (
        "rps:«endpoint»",
        lambda r, c: f"{r.randint(1000, 9999)}.{r.randint(10, 99)} req/s",
        "The load test sustained «v» on «endpoint» before the first errors appeared.",
        "What throughput did the assistant say «endpoint» sustained in the load test?",
        "the load test of «endpoint»",
    ),
    (
        "errrate:«endpoint»",
        lambda r, c: f"{r.randint(1, 4)}.{r.randint(10000, 99999)}%",
        "The error rate on «endpoint» during the traffic replay was «v», down from the previous release.",
        "What error rate did the assistant report for «endpoint» during the traffic replay?",
        "the error rate of «endpoint»",
    ),
)

_ERROR_KINDS = (
    ("LockTimeout", "lock timeout on shard", "kv"),
    ("ChecksumMismatch", "checksum mismatch in segment", "seg"),
    ("QuotaExhausted", "quota exhausted for tenant", "tn"),
    ("StaleLease", "stale lease held by worker", "w"),
    ("SchemaDrift", "schema drift detected in partition", "p"),
    ("UpstreamReset", "upstream reset on connection", "conn"),
)
_JOBS = ("backfill_«nouns»", "rebuild_«noun»_index", "replay_«noun»_events", "sync_«nouns»", "compact_«table»")
_PROFILES = ("staging-eu", "staging-us", "canary", "perf", "dr-drill", "sandbox", "qa-blue", "qa-green")
_FIXTURES = ("small", "large", "multi_currency", "edge_cases", "holiday_peak", "legacy_import")


def _aliases(category: str, value: str) -> tuple[str, ...]:
    """Other accepted spellings: the bare number of a measured value, the message of an error."""
    out: list[str] = []
    m = re.fullmatch(r"([\d.,]+) ?(ms|MiB|%|req/s)", value)
    if m:
        num, unit = m.groups()
        out += [num + unit, num]
        if "," in num:
            out.append(num.replace(",", ""))
    elif category == "error_string" and ": " in value:
        out.append(value.split(": ", 1)[1])
    elif value.startswith("s3://"):
        out.append(value[5:])
    elif value.startswith("sha256:"):
        out.append(value[7:])
    return tuple(dict.fromkeys(a for a in out if a != value))


#: Which assistant fact categories a prose block of each kind may carry.
_HOSTS: Mapping[str, tuple[str, ...]] = {
    "plan": ("assistant_decision",),
    "decision": ("assistant_decision",),
    "fix": ("assistant_decision",),
    "explain": ("assistant_decision",),
    "report": ("assistant_decision",),
    "measurement": ("assistant_value",),
}


class _Planter:
    """The planting state of one chain: what is due, what is reserved, what was planted.

    It draws from the chain's own `random.Random`, shared with the builder, so its draws
    interleave with the builder's in call order: which object makes a draw does not
    matter to the generated bytes, only when it is made.

    Parameters
    ----------
    rng : random.Random
        The chain's stream.
    sid : str
        Session id; fact ids are derived from it.
    world : _World
        The chain's project state (its project names the areas and the id shapes).
    """

    def __init__(self, rng: random.Random, sid: str, world: _World) -> None:
        self.rng = rng
        self.sid = sid
        self.world = world
        self.project = world.project
        self.facts: list[PlantedFact] = []
        self.keys: set[str] = set()  # membership only (never iterated: set order is not reproducible)
        self.questions: set[str] = set()
        self.values: set[str] = set()
        self.labels: set[str] = set()
        self.counts = {c: 0 for c in CATEGORIES}
        # Token total at which each category is next due. A user constraint, an assistant
        # decision and one tool fact are due at once, so the first user turn, the first
        # assistant prose and the first tool output carry them: even a smoke-size chain
        # has all three pointer classes.
        first_tool = self.rng.choice(("tool_output_line", "tool_returned_id"))
        self.due_at = {
            c: 0
            if c in ("user_constraint", "assistant_decision", first_tool)
            else int(self.rng.uniform(0.3, 1.0) * self._gap(c))
            for c in CATEGORIES
        }

    # -- schedule --------------------------------------------------------------------

    def _gap(self, category: str) -> float:
        """Tokens until the next plant of `category`: the shared gap scaled by the category's weight."""
        return self.rng.randint(*_PLANT_GAP_TOKENS) * _TOTAL_WEIGHT / CATEGORY_WEIGHTS[category]

    def due(self, categories: Sequence[str], total_tokens: int) -> str | None:
        """Return the most overdue of `categories` at `total_tokens`, if any is due."""
        due = [(self.due_at[c], i, c) for i, c in enumerate(categories) if total_tokens >= self.due_at[c]]
        return min(due)[2] if due else None

    def take(self, category: str, total_tokens: int) -> bool:
        """Claim a plant of `category` if it is due at `total_tokens`, and schedule its next one."""
        if total_tokens < self.due_at[category]:
            return False
        self.due_at[category] = total_tokens + int(self._gap(category))
        return True

    # -- ledger ----------------------------------------------------------------------

    def register(self, draft: _Draft, rec: Record) -> None:
        """Record `draft` as a fact planted in `rec` (called once the record is emitted)."""
        self.counts[draft.category] += 1
        self.facts.append(
            PlantedFact(
                fact_id=f"{self.sid}-f{len(self.facts):03d}",
                session_id=self.sid,
                category=draft.category,
                pointer=POINTER_OF_KIND[rec.kind],
                value=draft.value,
                aliases=draft.aliases,
                entry_id=rec.entry_id,
                source_order=rec.source_order,
                question=draft.question,
            )
        )

    def _claim(self, draft: _Draft | None) -> _Draft | None:
        """Reserve a draft's key, question and value (so no later fact or decoy can repeat them)."""
        if draft is None or draft.key in self.keys or draft.question in self.questions or draft.value in self.values:
            return None
        self.keys.add(draft.key)
        self.questions.add(draft.question)
        self.values.add(draft.value)
        return draft

    # -- drafts ----------------------------------------------------------------------

    def templated(self, category: str, ctx: Mapping[str, Any]) -> _Draft | None:
        """Draft a user constraint or assistant fact from its template table, or None if every subject is taken."""
        table = {
            "user_constraint": _USER_CONSTRAINTS,
            "assistant_decision": _ASSISTANT_DECISIONS,
            "assistant_value": _ASSISTANT_VALUES,
        }[category]
        order = list(range(len(table)))
        self.rng.shuffle(order)
        for i in order:
            key_t, maker, sentence, question, subject = table[i]
            key = _fill(key_t, ctx)
            if key in self.keys:
                continue
            value = maker(self.rng, ctx)
            c = dict(ctx, v=value)
            draft = self._claim(
                _Draft(
                    category,
                    value,
                    _aliases(category, value),
                    _fill(question, c),
                    key,
                    _fill(subject, c),
                    _fill(sentence, c),
                )
            )
            if draft is not None:
                return draft
        return None

    def tool_draft(self, category: str, ctx: Mapping[str, Any], area: _Area) -> _Draft | None:
        """Draft a tool fact (output line, returned id or error string) with the command parameters that produce it."""
        rng, world = self.rng, self.world
        for _ in range(20):
            if category == "tool_output_line":
                kind = _pick(rng, ("export", "package", "seed", "fingerprint"))
                if kind == "export":
                    date = f"2024-0{rng.randint(1, 2)}-{rng.randint(1, 28):02d}"
                    value = _hex(rng, 12)
                    d = _Draft(
                        category,
                        value,
                        (),
                        f"What checksum did the {ctx['nouns']} export since {date} print?",
                        f"export:{area.name}:{date}",
                        f"the {ctx['nouns']} export since {date}",
                        params={"kind": kind, "date": date},
                    )
                elif kind == "package":
                    value = f"bld-202403{rng.randint(1, 11):02d}-{_tok(rng, 6)}"
                    d = _Draft(
                        category,
                        value,
                        (),
                        f"What build id did packaging the {area.name} bundle print?",
                        f"package:{area.name}",
                        f"packaging the {area.name} bundle",
                        params={"kind": kind},
                    )
                elif kind == "seed":
                    fixture = _pick(rng, _FIXTURES)
                    value = f"sha256:{_hex(rng, 16)}"
                    d = _Draft(
                        category,
                        value,
                        _aliases(category, value),
                        f"What fixture digest did seeding the `{fixture}` fixture print?",
                        f"seed:{fixture}",
                        f"seeding the `{fixture}` fixture",
                        params={"kind": kind, "fixture": fixture},
                    )
                else:
                    profile = _pick(rng, _PROFILES)
                    value = f"{_tok(rng, 4)}-{_tok(rng, 4)}-{_tok(rng, 4)}"
                    d = _Draft(
                        category,
                        value,
                        (),
                        f"What config fingerprint was printed for the {profile} profile?",
                        f"config:{profile}",
                        f"the config dump for the {profile} profile",
                        params={"kind": kind, "profile": profile},
                    )
            elif category == "tool_returned_id":
                label, body, lparams = self._fresh_label(area)
                value = _tools.obj_id(world, area)
                d = _Draft(
                    category,
                    value,
                    (),
                    f"What {area.noun} ID did the {ctx['endpoint']} call for {label} return?",
                    f"id:{ctx['endpoint']}:{label}",
                    f"the {ctx['endpoint']} call for {label}",
                    params={"label": label, "body": body, "lparams": lparams},
                )
            else:
                cls, msg, pre = _pick(rng, _ERROR_KINDS)
                job = _fill(_pick(rng, _JOBS), ctx)
                batch = rng.choice((100, 200, 250, 500, 1000, 2000, 5000))
                value = f"E{rng.randint(1000, 9999)}: {msg} {pre}-{_tok(rng, 5)}"
                d = _Draft(
                    category,
                    value,
                    _aliases(category, value),
                    f"What error did the {job} job fail with when it ran with batch size {batch}?",
                    f"job:{job}:{batch}",
                    f"the {job} run with batch size {batch}",
                    params={"cls": cls, "job": job, "batch": batch},
                )
            claimed = self._claim(d)
            if claimed is not None:
                return claimed
        return None

    def _fresh_label(self, area: _Area) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """Draw a request subject never used before in this chain: (label, request body, object fields)."""
        rng = self.rng
        while True:
            key = self.project.theme.key
            if key in ("payments_service", "storefront_web"):
                first, last = _pick(rng, _FIRST), _pick(rng, _LAST)
                label = f"test customer {first} {last}"
                who = {"name": f"{first} {last}", "email": f"{first.lower()}.{last.lower()}+test@example.com"}
                body: dict[str, Any] = {
                    "customer": who,
                    "amount_minor": rng.randint(100, 90000),
                    "currency": _pick(rng, _CURRENCIES),
                }
                lparams: dict[str, Any] = who
            elif key == "ledger_pipeline":
                date = f"2024-0{rng.randint(1, 3)}-{rng.randint(1, 28):02d}"
                label = f"the {date} settlement date"
                body = {"conf": {"date": date, "full_refresh": rng.random() < 0.3}}
                lparams = {"date": date}
            else:
                pkg = f"{_pick(rng, _BIRDS)}-{_pick(rng, ('utils', 'core', 'cli', 'assets', 'schemas'))}"
                ver = f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
                label = f"package {pkg} {ver}"
                body = {"package": pkg, "version": ver}
                lparams = {"package": pkg, "version": ver}
            if label not in self.labels:
                self.labels.add(label)
                return label, body, lparams

    # -- decoys ----------------------------------------------------------------------

    def decoys(self, joined: str, n: int) -> list[PlantedFact]:
        """`n` facts of the same shapes whose values occur nowhere in the chain.

        Parameters
        ----------
        joined : str
            The chain's record texts joined (see `_builder._joined`).
        n : int
            Number of decoys to draw.

        Raises
        ------
        ValueError
            If 1000 draws do not yield `n` decoys.
        """
        rng = self.rng
        out: list[PlantedFact] = []
        cats = list(CATEGORIES)
        rng.shuffle(cats)
        attempts = 0
        while len(out) < n:
            attempts += 1
            if attempts > 1000:
                raise ValueError(f"{self.sid}: could not draw {n} decoys")
            cat = cats[len(out) % len(cats)]
            area = _pick(rng, self.project.theme.areas)
            fn = _pick(rng, area.funcs)
            ctx = _area_ctx(rng, self.project, area, fn)
            ctx["module"] = _module_of(area, fn)
            draft = (
                self.templated(cat, ctx)
                if cat in ("user_constraint",) + _ASSISTANT_CATEGORIES
                else self.tool_draft(cat, ctx, area)
            )
            if draft is None or draft.value in joined:
                continue  # regenerate: a decoy must be absent from the chain
            pointer = "user" if cat == "user_constraint" else "assistant" if cat in _ASSISTANT_CATEGORIES else "tool"
            out.append(
                PlantedFact(
                    fact_id=f"{self.sid}-d{len(out):02d}",
                    session_id=self.sid,
                    category=cat,
                    pointer=pointer,
                    value=draft.value,
                    aliases=draft.aliases,
                    entry_id="",
                    source_order=-1,
                    question=draft.question,
                    is_decoy=True,
                )
            )
        return out
