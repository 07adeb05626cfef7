"""The cost model: what a compaction and the turns after it cost, and per point of recall.

For one case (a session compacted at a point) and one strategy, under one
price table and one prefix-cache simulator:

* **compaction cost** — the strategy's summary request (its own token
  sequence, in its documented shape) priced *cold* (nothing cached) and
  *cached* (after the session's previous request primed the cache, as it does
  in production). Deterministic strategies send no request: they cost 0.
* **per-turn cost** — every later turn re-sends the projection plus what the
  turns since added (``turn_growth_tokens`` of new input and
  ``turn_output_tokens`` of reply per turn); the simulator decides what hits.
  The baseline continues on the uncompacted context instead.
* **break-even turns** — the first T at which compaction + T compacted turns
  cost no more than T uncompacted turns; "never" when the per-turn saving
  cannot repay it.
* **one compaction + T turns**, and that total **per point of recall** (recall
  from the closed-book exam, in percentage points).

Every cache hit here is *simulated* on the real token sequences under the
provider's documented rule, never assumed; recorded usage from real sessions
is shown beside it where a session has it. All assumptions are the fields of
`CostAssumptions`, shown next to the figures.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from compaction_lab.core.projection import Projection
from compaction_lab.core.session import Session
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import DEFAULT_ENCODING
from compaction_lab.cost import cache as cache_mod
from compaction_lab.cost.assumptions import CostAssumptions
from compaction_lab.endpoints import prices as prices_mod
from compaction_lab.strategies import calibration
from compaction_lab.strategies.base import history, record_messages
from compaction_lab.strategies.labels import strategy_label

#: Filler token ids for simulated growth and replies: never the start of real text.
_FILLER_BASE = 50_000


# --------------------------------------------------------------------------- token sequences


def uncompacted_layout(session: Session, cut: int, call_shape: CallShape, encoding: str) -> cache_mod.RequestLayout:
    """Lay out the request the session sends at the cut without compaction (what primed the provider's cache)."""
    call_shape = call_shape.for_session(session)
    return cache_mod.request_layout(
        call_shape.system_prompt, list(call_shape.tools), record_messages(history(session, cut)), encoding
    )


def uncompacted_request(session: Session, cut: int, call_shape: CallShape, encoding: str) -> tuple[np.ndarray, int]:
    """Token ids of the request the session would send without compaction, and its prefix length.

    The prefix (system prompt + tool definitions) is where an Anthropic
    harness puts its first cache breakpoint. The same request is asked for by
    every strategy and simulator of a case, so the last few are kept (by the
    very session and call-shape objects, which the entry holds).
    """
    for held_session, held_cut, held_call_shape, held_encoding, result in _UNCOMPACTED:
        if held_session is session and held_cut == cut and held_call_shape is call_shape and held_encoding == encoding:
            return result
    lay = uncompacted_layout(session, cut, call_shape, encoding)
    tokens = np.asarray(lay.tokens, dtype=np.int64)
    tokens.setflags(write=False)
    result = (tokens, max(lay.system_end, lay.tools_end))
    _UNCOMPACTED.appendleft((session, cut, call_shape, encoding, result))
    return result


#: The last uncompacted requests built (`uncompacted_request`): a case's strategies and simulators share one.
_UNCOMPACTED: deque[tuple[Session, int, CallShape, str, tuple[np.ndarray, int]]] = deque(maxlen=8)


def projection_request(p: Projection, call_shape: CallShape, encoding: str) -> tuple[np.ndarray, int]:
    """Token ids of the next request after compaction: the projection's messages with the call shape."""
    msgs = p.messages()
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else call_shape.system_prompt
    rest = msgs[1:] if msgs and msgs[0]["role"] == "system" else msgs
    prefix = cache_mod.request_array(system, list(call_shape.tools), [], encoding)
    return cache_mod.request_array(system, list(call_shape.tools), rest, encoding), len(prefix)


def _requests(
    projection: Projection, session: Session, call_shape: CallShape, encoding: str
) -> tuple[tuple[np.ndarray, int], tuple[tuple[np.ndarray, int], ...]]:
    """Build the next request after compaction and every summary request sent (read-only ids, prefix lengths).

    A case x strategy is simulated under every simulator with the same requests, so the last few are
    kept (by the very projection, session and call-shape objects, which the entry holds).
    """
    for held_projection, held_session, held_call_shape, held_encoding, result in _PROJECTED:
        if (
            held_projection is projection
            and held_session is session
            and held_call_shape is call_shape
            and held_encoding == encoding
        ):
            return result
    arrays = [projection_request(projection, call_shape.for_session(session), encoding)]
    for one in projection.requests_sent():
        req = one.request
        prefix = cache_mod.request_array(req.system, list(req.tools), [], encoding)
        arrays.append((cache_mod.summary_request_array(req, encoding), len(prefix)))
    for ids, _ in arrays:
        ids.setflags(write=False)
    result = (arrays[0], tuple(arrays[1:]))
    _PROJECTED.appendleft((projection, session, call_shape, encoding, result))
    return result


#: The last requests built from projections (`_requests`): a case x strategy's simulators share them.
_PROJECTED: deque[
    tuple[Projection, Session, CallShape, str, tuple[tuple[np.ndarray, int], tuple[tuple[np.ndarray, int], ...]]]
] = deque(maxlen=8)


#: Filler ids are drawn below this (above `_FILLER_BASE`); 16 bits hold it (`_filler`).
_FILLER_SPAN = 40_000


def _filler(rng: random.Random, n: int) -> np.ndarray:
    """`n` filler token ids: exactly ``[_FILLER_BASE + rng.randrange(_FILLER_SPAN) for _ in range(n)]``, fast.

    ``randrange(40_000)`` takes the top 16 bits of one 32-bit Mersenne Twister word and draws again while
    they are 40 000 or more; ``getrandbits(32 * m)`` returns the next `m` words, the first in the lowest
    bits. Asking for no more words than values still needed consumes exactly the words the loop would,
    so the generator is left in the same state and the ids are the same (a test compares both).
    """
    parts: list[np.ndarray] = []
    got = 0
    while got < n:
        need = n - got
        words = np.frombuffer(rng.getrandbits(32 * need).to_bytes(4 * need, "little"), dtype="<u4") >> 16
        kept = words[words < _FILLER_SPAN].astype(np.int64) + _FILLER_BASE
        parts.append(kept)
        got += len(kept)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class Bill:
    """Tokens of one request as a simulator serves them (prices are applied later)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Bill) -> Bill:
        """Add two bills token count by token count."""
        return Bill(
            self.input_tokens + other.input_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.output_tokens + other.output_tokens,
        )

    def cost(self, table, period: str) -> float:
        """Price the bill with a price table in a period (``off_peak`` or ``peak``)."""
        return prices_mod.price(
            table,
            input_tokens=self.input_tokens,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            output_tokens=self.output_tokens,
            period=period,
        )


def _send(sim, tokens: cache_mod.Tokens, output: cache_mod.Tokens, prefix_len: int) -> Bill:
    # Anthropic caches only at explicit breakpoints: after the tools, and at the end of the input.
    bps = [b for b in (prefix_len, len(tokens)) if 0 < b <= len(tokens)]
    r = sim.send(tokens, output, breakpoints=bps)
    return Bill(r.input_tokens, r.cached_tokens, r.cache_write_tokens, len(output))


def _turn_bills(sim, base: cache_mod.Tokens, prefix_len: int, a: CostAssumptions, rng: random.Random) -> list[Bill]:
    """Later turns re-sending `base` plus the growth of the turns so far (each turn's reply included).

    The first `simulated_turns` turns go through the simulator. Every later
    turn extends the previous one by the same growth and reply, so the rule
    serves it the same way: the last simulated turn's split is carried
    forward with the input growing by that amount (stated in the notebook).
    """
    seq = np.asarray(base, dtype=np.int64)
    out: list[Bill] = []
    for _ in range(min(a.turns, a.simulated_turns)):
        seq = np.concatenate((seq, _filler(rng, a.turn_growth_tokens)))
        reply = _filler(rng, a.turn_output_tokens)
        out.append(_send(sim, seq, reply, prefix_len))
        seq = np.concatenate((seq, reply))  # the reply is part of the next turn's input
    if len(out) >= 3:
        # Carry the last simulated step forward (the first turn after a compaction is
        # special, so the step is read off two later turns): input and cached tokens grow by what
        # they grew by between the last two simulated turns (nothing cached stays nothing).
        d_in = out[-1].input_tokens - out[-2].input_tokens
        d_cached = out[-1].cached_tokens - out[-2].cached_tokens
        d_write = out[-1].cache_write_tokens - out[-2].cache_write_tokens
        while len(out) < a.turns:
            last = out[-1]
            n_in = last.input_tokens + d_in
            n_cached = min(n_in, max(0, last.cached_tokens + d_cached))
            n_write = min(n_in - n_cached, max(0, last.cache_write_tokens + d_write))
            out.append(Bill(n_in, n_cached, n_write, last.output_tokens))
    return out


def break_even(compaction: float, compacted: Sequence[float], uncompacted: Sequence[float]) -> float | None:
    """First T (1-based) where compaction + Σ compacted[:T] ≤ Σ uncompacted[:T]; None if never.

    Beyond the simulated turns the last turn's saving is extrapolated: the
    costs grow linearly in T, so a positive saving repays the gap in a
    computable number of further turns, and a non-positive one never does.
    """
    if compaction <= 0 and (not compacted or compacted[0] <= uncompacted[0]):
        return 0.0  # nothing to repay
    gap = compaction
    for t, (c, u) in enumerate(zip(compacted, uncompacted, strict=False), start=1):
        gap += c - u
        if gap <= 1e-15:
            return float(t)
    if not compacted:
        return 0.0 if compaction <= 0 else None
    saving = uncompacted[-1] - compacted[-1]
    if saving <= 0:
        return None
    return float(len(compacted) + math.ceil(gap / saving))


@dataclass(frozen=True)
class CaseBills:
    """What one case x strategy sends under one simulator, as token bills (no prices yet)."""

    compaction_cold: Bill
    compaction_cached: Bill
    compacted_turns: tuple[Bill, ...]
    uncompacted_turns: tuple[Bill, ...]
    projection_request_tokens: int
    uncompacted_request_tokens: int


def simulate_case(
    session: Session,
    cut: int,
    projection: Projection,
    call_shape: CallShape,
    simulator: str,
    a: CostAssumptions,
    encoding: str = DEFAULT_ENCODING,
    baseline: tuple[Bill, ...] | None = None,
) -> CaseBills:
    """Simulate the compaction request (cold and warm) and the later turns of one case x strategy.

    `baseline` (the uncompacted turns) does not depend on the strategy; pass
    it in to avoid simulating it once per strategy.
    """
    rng = random.Random(f"{a.seed}:{session.id}:{cut}")
    full, full_prefix = uncompacted_request(session, cut, call_shape, encoding)
    (proj, proj_prefix), summary_requests = _requests(projection, session, call_shape, encoding)
    sent = projection.requests_sent()
    cold = cached = Bill()
    if sent and not (projection.receipt and projection.receipt.fallback):
        # Every request the compaction sent, in order: a later one (Gemini CLI's verification probe re-sends
        # the first request's history) may be served from what an earlier one left in the cache.
        cold_sim, warm = cache_mod.get_simulator(simulator), cache_mod.get_simulator(simulator)
        _send(warm, full, [], full_prefix)  # the session's previous request primed the cache
        for one, (req_tokens, req_prefix) in zip(sent, summary_requests, strict=True):
            out_tokens = a.summary_output_tokens if a.summary_output_tokens is not None else one.output_tokens
            out = _filler(rng, out_tokens)
            cold = cold + _send(cold_sim, req_tokens, out, req_prefix)
            cached = cached + _send(warm, req_tokens, out, req_prefix)
    after = cache_mod.get_simulator(simulator)
    _send(after, full, [], full_prefix)  # what the provider had seen before the compaction
    compacted = _turn_bills(after, proj, proj_prefix, a, random.Random(f"{a.seed}:turns"))
    if baseline is None:
        baseline = uncompacted_bills(session, cut, call_shape, simulator, a, encoding)
    return CaseBills(cold, cached, tuple(compacted), tuple(baseline), len(proj), len(full))


def uncompacted_bills(
    session: Session,
    cut: int,
    call_shape: CallShape,
    simulator: str,
    a: CostAssumptions,
    encoding: str = DEFAULT_ENCODING,
) -> tuple[Bill, ...]:
    """Bill the baseline: later turns continuing on the uncompacted context (as if the window allowed it)."""
    full, full_prefix = uncompacted_request(session, cut, call_shape, encoding)
    base = cache_mod.get_simulator(simulator)
    _send(base, full, [], full_prefix)
    return tuple(_turn_bills(base, full, full_prefix, a, random.Random(f"{a.seed}:turns")))


def price_case(b: CaseBills, table, period: str) -> dict[str, Any]:
    """Every cost quantity of one simulated case x strategy under one price table."""
    comp = [t.cost(table, period) for t in b.compacted_turns]
    unc = [t.cost(table, period) for t in b.uncompacted_turns]
    cold, cached = b.compaction_cold.cost(table, period), b.compaction_cached.cost(table, period)
    ins = sum(t.input_tokens for t in b.compacted_turns)
    return {
        "compaction_input_tokens": b.compaction_cold.input_tokens,
        "compaction_cached_tokens": b.compaction_cached.cached_tokens,
        "compaction_output_tokens": b.compaction_cold.output_tokens,
        "compaction_hit_ratio": (
            b.compaction_cached.cached_tokens / b.compaction_cached.input_tokens
            if b.compaction_cached.input_tokens
            else 0.0
        ),
        "compaction_cost_cold": cold,
        "compaction_cost_cached": cached,
        "first_turn_cost": comp[0] if comp else 0.0,
        "per_turn_cost": sum(comp) / max(len(comp), 1),
        "per_turn_cost_uncompacted": sum(unc) / max(len(unc), 1),
        "turn_hit_ratio": sum(t.cached_tokens for t in b.compacted_turns) / ins if ins else 0.0,
        "break_even_turns": break_even(cached, comp, unc),
        "total_cost": cached + sum(comp),
        "total_cost_uncompacted": sum(unc),
        "projection_request_tokens": b.projection_request_tokens,
        "uncompacted_request_tokens": b.uncompacted_request_tokens,
    }


COST_COLUMNS = [
    "strategy",
    "strategy_label",
    "price_table",
    "simulator",
    "currency",
    "period",
    "cases",
    "compaction_input_tokens",
    "compaction_cached_tokens",
    "compaction_output_tokens",
    "compaction_hit_ratio",
    "compaction_cost_cold",
    "compaction_cost_cached",
    "first_turn_cost",
    "per_turn_cost",
    "per_turn_cost_uncompacted",
    "turn_hit_ratio",
    "break_even_turns",
    "break_even",
    "turns",
    "total_cost",
    "total_cost_uncompacted",
    "recall",
    "cost_per_point",
    "stand_in",
    "shown",
]


def cost_table(
    cases: Sequence[Any],
    sessions: Mapping[str, Session],
    projections: Mapping[tuple[str, str], Projection],
    call_shape: CallShape,
    tables: Sequence[str],
    simulators: Sequence[str] | None,
    assumptions: CostAssumptions,
    recall: pd.DataFrame | None = None,
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
) -> pd.DataFrame:
    """One row per strategy x price table x simulator, averaged over cases (`COST_COLUMNS`).

    Parameters
    ----------
    cases : exam cases (id, session_id, cut)
    sessions : by id
    projections : by (case_id, strategy)
    call_shape : the call shape (each session's own system prompt is applied)
    tables : price table names
    simulators : simulator names, or None: each table under its own provider's
        rule and under ``none`` (no cache) for reference
    assumptions : CostAssumptions
    recall : DataFrame, optional
        `exam.statistics.stats.recall_table` (strategy, recall); adds cost per point of recall.

    Every row's ``shown`` is False; `choice.mark_shown` marks the rows the figures show.
    """
    loaded = {t: prices_mod.load_price_table(t) for t in tables}
    pairs = [(t, sim) for t in tables for sim in (simulators or dict.fromkeys([loaded[t].cache_rule, "none"]))]
    sims = list(dict.fromkeys(sim for _, sim in pairs))
    strategies = list(dict.fromkeys(s for _, s in projections))
    # Simulate once per case x strategy x simulator; price tables only change the prices. A strategy's
    # simulators follow one another, so they share its requests (`_requests`).
    # One task per case (on the engine when a scheduler is given, `exam.tasks.each`).
    from compaction_lab.exam import tasks

    items = [
        (c.cut, sessions[c.session_id], {st: projections[(c.id, st)] for st in strategies if (c.id, st) in projections})
        for c in cases
    ]
    bills: dict[tuple[str, str, str], CaseBills] = {}
    labels: dict[str, tuple[str, bool]] = {}
    done = tasks.each(
        _case_bills,
        items,
        sims,
        call_shape,
        assumptions,
        encoding,
        progress=progress,
        desc="cost (simulated cache)",
        unit="case",
    )
    for c, (_, _, held), case_bills in zip(cases, items, done, strict=True):
        for st, p in held.items():
            labels[st] = (_label(st, p), bool(p.receipt and p.receipt.stand_in and not p.receipt.fallback))
            for sim in sims:
                bills[(c.id, st, sim)] = case_bills[(st, sim)]
    recall_of = {} if recall is None else dict(zip(recall["strategy"], recall["recall"], strict=False))
    rows = []
    for tname, sim in pairs:
        table = loaded[tname]
        for st in strategies:
            per_case = [
                price_case(bills[(c.id, st, sim)], table, assumptions.period) for c in cases if (c.id, st, sim) in bills
            ]
            if not per_case:
                continue
            df = pd.DataFrame(per_case)
            be = df["break_even_turns"]
            never = be.isna().any()
            row: dict[str, Any] = {k: float(df[k].mean()) for k in df.columns if k != "break_even_turns"}
            row.update(
                strategy=st,
                strategy_label=labels[st][0],
                stand_in=labels[st][1],
                price_table=tname,
                simulator=sim,
                currency=table.currency,
                period=assumptions.period,
                cases=len(df),
                turns=assumptions.turns,
                break_even_turns=None if never else float(be.mean()),
                break_even="never" if never else f"{be.mean():.0f}",
            )
            r = recall_of.get(st)
            row["recall"] = r
            row["cost_per_point"] = (row["total_cost"] / (100 * r)) if r else None
            row["shown"] = False  # the figures' table and rule: `choice.mark_shown`
            rows.append(row)
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def _case_bills(
    item: tuple[int, Session, Mapping[str, Projection]],
    sims: Sequence[str],
    call_shape: CallShape,
    assumptions: CostAssumptions,
    encoding: str,
) -> dict[tuple[str, str], CaseBills]:
    """One case of `cost_table`: each strategy's bills under each simulator, keyed (strategy, simulator)."""
    cut, session, held = item
    baselines = {sim: uncompacted_bills(session, cut, call_shape, sim, assumptions, encoding) for sim in sims}
    return {
        (st, sim): simulate_case(session, cut, p, call_shape, sim, assumptions, encoding, baselines[sim])
        for st, p in held.items()
        for sim in sims
    }


def _label(key: str, p: Projection) -> str:
    # A what-if keeps its projection's strategy but is shown under its own key.
    return strategy_label(p).replace(p.strategy, key, 1)


def what_if(
    cases: Sequence[Any], sessions: Mapping[str, Session], strategy: str, ctx: Any, params: Mapping[str, Any], key: str
) -> dict[tuple[str, str], Projection]:
    """One strategy's projections of every case under changed parameters, keyed ``(case_id, key)``.

    For counterfactual rows beside the faithful ones (e.g. Codex's request with
    its tool definitions kept); `key` names the row in every table.
    """
    from dataclasses import replace

    from compaction_lab import strategies

    wctx = replace(ctx, params={**dict(ctx.params), **dict(params)})
    return {(c.id, key): strategies.compact(sessions[c.session_id], strategy, c.cut, wctx) for c in cases}


def what_if_comparison(table: pd.DataFrame, what_if_table: pd.DataFrame, strategy: str) -> pd.DataFrame:
    """Compare a strategy's faithful cost rows with its what-if rows: warm hit ratio and cache-served cost.

    One row per (label, cache rule), one column per price table.
    """
    both = pd.concat([table[table["strategy"] == strategy], what_if_table], ignore_index=True)
    return both.pivot_table(
        index=["strategy_label", "simulator"],
        columns="price_table",
        values=["compaction_hit_ratio", "compaction_cost_cached"],
    )


PREFIX_COLUMNS = [
    "strategy",
    "strategy_label",
    "cases",
    "request_tokens",
    "shared_tokens",
    "shared_ratio",
    "diverges_in",
    "previous_part",
    "where_cases",
]


def compaction_prefix_table(
    cases: Sequence[Any],
    sessions: Mapping[str, Session],
    projections: Mapping[tuple[str, str], Projection],
    call_shape: CallShape,
    encoding: str = DEFAULT_ENCODING,
) -> pd.DataFrame:
    """Why a compaction request is or is not served from the cache: where it leaves the primed prefix.

    For each strategy that sends a summary request, the request is compared
    token by token with the session's previous request (the uncompacted one
    at the cut): the common prefix is the most any prefix cache can serve,
    and the part of each request at the first differing token says why it
    stops there (e.g. Codex's request has no tool definitions, so its first
    message sits where the session's request had its tools). Strategies with
    no request (deterministic) are left out: they send nothing to cache.

    Returns
    -------
    DataFrame
        `PREFIX_COLUMNS`, one row per strategy; ratios averaged over cases;
        ``diverges_in`` / ``previous_part`` the most common pair over cases,
        ``where_cases`` the number of cases it covers.
    """
    rows = []
    for c in cases:
        prev = uncompacted_layout(sessions[c.session_id], c.cut, call_shape, encoding)
        for (case_id, st), p in projections.items():
            req = p.summary_request
            if case_id != c.id or req is None:
                continue
            lay = cache_mod.request_layout(req.system, list(req.tools), list(req.messages), encoding)
            rows.append(
                {
                    "strategy": st,
                    "strategy_label": _label(st, p),
                    "request_tokens": len(lay.tokens),
                    **cache_mod.divergence(prev, lay),
                }
            )
    if not rows:
        return pd.DataFrame(columns=PREFIX_COLUMNS)
    df = pd.DataFrame(rows)
    df["where"] = list(zip(df["diverges_in"], df["previous_part"], strict=False))
    out = (
        df.groupby("strategy", sort=False)
        .agg(
            strategy_label=("strategy_label", "first"),
            cases=("request_tokens", "size"),
            request_tokens=("request_tokens", "mean"),
            shared_tokens=("shared_tokens", "mean"),
            shared_ratio=("shared_ratio", "mean"),
            where=("where", lambda v: v.value_counts().index[0]),
            where_cases=("where", lambda v: int(v.value_counts().iloc[0])),
        )
        .reset_index()
    )
    # The parts are reported as a pair, the most common one over cases, with how many cases it covers.
    out["diverges_in"] = [w[0] for w in out["where"]]
    out["previous_part"] = [w[1] for w in out["where"]]
    return out[PREFIX_COLUMNS]


def assumptions_table(a: CostAssumptions, tables: Sequence[str], simulators: Sequence[str]) -> pd.DataFrame:
    """Tabulate the assumptions in two columns, for the notebook to show beside the figures."""
    rows = [{"assumption": k, "value": v} for k, v in asdict(a).items()]
    rows += [
        {"assumption": "price tables", "value": ", ".join(tables)},
        {"assumption": "cache simulators", "value": ", ".join(simulators)},
        {"assumption": "cache hits", "value": "simulated on the real token sequences (not measured)"},
    ]
    return pd.DataFrame(rows)


def measured_vs_simulated(
    session: Session,
    simulator: str = "anthropic",
    encoding: str = DEFAULT_ENCODING,
    call_shape: CallShape | None = None,
) -> pd.DataFrame:
    """Compare a real session's recorded cache-hit ratio with the simulator's on the same request sequence.

    Each recorded model call is replayed as the request the session held at
    that point (every record before the call's entry); the session's own usage
    rows give the measured cached / input tokens.
    """
    usage = list(session.metadata.get("usage") or [])
    if not usage:
        return pd.DataFrame(
            columns=[
                "call",
                "entry_id",
                "measured_input",
                "measured_cached",
                "measured_hit_ratio",
                "simulated_input",
                "simulated_cached",
                "simulated_hit_ratio",
            ]
        )
    call_shape = (call_shape or CallShape.default()).for_session(session)
    sim = cache_mod.get_simulator(simulator)
    rows = []
    # One rule reads a usage row as the request it measured (`strategies.calibration`): the records before
    # the answer's first record, and the whole input whether or not the log counts cached tokens in it.
    # The requests grow call by call: each is built from the ids of the one before (`RequestSeries`), the
    # very ids `uncompacted_request` would build.
    series = cache_mod.RequestSeries(call_shape.system_prompt, list(call_shape.tools), encoding)
    prefix = max(series.system_end, series.tools_end)
    for i, cut, total in calibration.usage_requests(session):
        u = usage[i]
        tokens = series.array(record_messages(history(session, cut)))
        r = sim.send(tokens, [], breakpoints=[b for b in (prefix, len(tokens)) if 0 < b <= len(tokens)])
        cached = int(u.get("cached_tokens") or 0)
        rows.append(
            {
                "call": i,
                "entry_id": u.get("entry_id"),
                "measured_input": total,
                "measured_cached": cached,
                "measured_hit_ratio": cached / total if total else None,
                "simulated_input": r.input_tokens,
                "simulated_cached": r.cached_tokens,
                "simulated_hit_ratio": r.cached_tokens / r.input_tokens if r.input_tokens else None,
            }
        )
    return pd.DataFrame(rows)


LEDGER_CACHE_COLUMNS = [
    "call",
    "purpose",
    "model",
    "from_ledger",
    "measured_input",
    "measured_cached",
    "measured_hit_ratio",
    "simulated_input",
    "simulated_cached",
    "simulated_hit_ratio",
]


def ledger_vs_simulated(
    calls: Sequence[Mapping[str, Any]], simulator: str, encoding: str = DEFAULT_ENCODING
) -> pd.DataFrame:
    """Compare the provider's own cached-token counters with the simulator's, for the requests it was sent.

    Parameters
    ----------
    calls : sequence of mapping
        Ledger calls in the order they were sent, each with ``request`` (the
        chat body as sent), ``prompt_tokens``, ``cached_tokens``, ``purpose``
        and ``model`` (`ledger.Ledger.requests`).
    simulator : str
        The cache rule to predict with; one simulator sees the whole
        sequence, as the provider did.

    Notes
    -----
    Token counts differ between the provider's tokenizer and the report
    tokenizer, so ratios are the comparable figure; the simulated input is in
    report tokens.
    """
    sim = cache_mod.get_simulator(simulator)
    rows = []
    for i, c in enumerate(calls):
        body = c.get("request") or {}
        msgs = list(body.get("messages") or [])
        system = msgs[0].get("content") or "" if msgs and msgs[0].get("role") == "system" else ""
        rest = msgs[1:] if system else msgs
        lay = cache_mod.request_layout(str(system), list(body.get("tools") or []), rest, encoding)
        r = sim.send(lay.tokens, [], breakpoints=lay.breakpoints())
        prompt, cached = int(c.get("prompt_tokens") or 0), int(c.get("cached_tokens") or 0)
        rows.append(
            {
                "call": i,
                "purpose": c.get("purpose"),
                "model": c.get("model"),
                "from_ledger": c.get("from_ledger"),
                "measured_input": prompt,
                "measured_cached": cached,
                "measured_hit_ratio": cached / prompt if prompt else None,
                "simulated_input": r.input_tokens,
                "simulated_cached": r.cached_tokens,
                "simulated_hit_ratio": r.cached_tokens / r.input_tokens if r.input_tokens else None,
            }
        )
    return pd.DataFrame(rows, columns=LEDGER_CACHE_COLUMNS)


def ledger_calls_for(projections: Mapping[tuple[str, str], Projection], model: Any) -> list[dict[str, Any]]:
    """Find the ledger's record of every model-written summary among `projections`, in case x strategy order.

    Each summary request is rebuilt as it was sent (`summarize.endpoint.wire_body`
    plus the client's model and temperature) and looked up by fingerprint, so
    a rerun that reused recorded answers still finds the calls that paid for
    them. Projections without a model summary (offline summarizers, fallbacks)
    are skipped. Empty when `model` is empty (no endpoint configured).
    """
    if not model:
        return []
    from compaction_lab.endpoints.client import full_body, request_fingerprint
    from compaction_lab.endpoints.shared import config_of
    from compaction_lab.store.ledger import open_ledger
    from compaction_lab.summarize.endpoint import wire_body

    cfg = config_of(model)
    ledger = open_ledger(cfg.ledger)
    out = []
    for p in projections.values():
        r = p.receipt
        if p.summary_request is None or r is None or r.fallback or not r.summarizer.startswith("model"):
            continue
        body = full_body(cfg, wire_body(p.summary_request))
        rec = ledger.lookup(request_fingerprint(body))
        if rec is None:
            continue
        u = rec["usage"]
        out.append(
            {
                "request": body,
                "purpose": rec["purpose"],
                "model": rec["model"],
                "from_ledger": True,
                "prompt_tokens": u.prompt_tokens,
                "cached_tokens": u.cached_tokens,
            }
        )
    return out


def cache_shape_experiment_for(
    session: Session, call_shape: CallShape, encoding: str = DEFAULT_ENCODING, live_model: Any = None
) -> pd.DataFrame:
    """Run the cache-shape experiment on a session's own request (system prompt, tools, its messages).

    With `live_model` (a model configuration), the same requests are also
    sent to that endpoint (`cache_shape_experiment_live`) and its measured rows
    follow the simulated ones.
    """
    sess_call_shape = call_shape.for_session(session)
    sim = cache_mod.cache_shape_experiment(
        sess_call_shape.system_prompt,
        list(sess_call_shape.tools),
        record_messages(history(session, len(session.records))),
        encoding,
    )
    if not live_model:
        return sim
    return pd.concat([sim, cache_shape_experiment_live(session, call_shape, live_model)], ignore_index=True)


def cache_shape_experiment_live(session: Session, call_shape: CallShape, model: Any) -> pd.DataFrame:
    """Send the cache-shape experiment for real: the provider's own cached-token counters per variant.

    Primes the endpoint's cache with the session's request, then sends the
    four variants of `cache.cache_shape_experiment` in its order (identical, system
    prompt substituted, tools dropped, a line added at the top), each asking
    for one output token. The ledger records every call, but none is answered
    from it: an answer from the ledger would say nothing about the provider's
    cache now. Five requests of the session's size: this costs money on a
    paid endpoint.

    Returns
    -------
    DataFrame
        The columns of `cache.cache_shape_experiment`, ``simulator`` =
        ``measured (<model>)``; ``cache_write_tokens`` is not reported by
        chat-completions usage and stays empty.
    """
    from dataclasses import replace as dc_replace

    from compaction_lab.endpoints.client import ChatClient
    from compaction_lab.endpoints.shared import config_of
    from compaction_lab.store.ledger import open_ledger
    from compaction_lab.summarize.endpoint import wire_messages

    cfg = dc_replace(config_of(model), reuse=False)
    client = ChatClient(cfg, open_ledger(cfg.ledger))
    call_shape = call_shape.for_session(session)
    variants = cache_mod._cache_shape_variants(
        call_shape.system_prompt,
        list(call_shape.tools),
        record_messages(history(session, len(session.records))),
        cache_mod.SUBSTITUTE_SYSTEM,
        cache_mod.TOP_LINE,
    )

    def body(system: str, tools: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]) -> dict:
        b: dict[str, Any] = {
            "messages": [{"role": "system", "content": system}, *wire_messages(list(messages))],
            "max_tokens": 1,
        }
        if tools:
            b["tools"] = [dict(t) for t in tools]
        return b

    try:
        client.complete(body(*variants["identical"]), purpose="cache-shape:prime")
        rows = []
        for name in cache_mod.CACHE_SHAPE_VARIANTS:
            u = client.complete(body(*variants[name]), purpose=f"cache-shape:{name}").usage
            rows.append(
                {
                    "variant": name,
                    "simulator": f"measured ({cfg.model})",
                    "input_tokens": u.prompt_tokens,
                    "cached_tokens": u.cached_tokens,
                    "hit_ratio": u.cached_tokens / u.prompt_tokens if u.prompt_tokens else 0.0,
                    "cache_write_tokens": None,
                }
            )
    finally:
        client.close()
    return pd.DataFrame(
        rows, columns=["variant", "simulator", "input_tokens", "cached_tokens", "hit_ratio", "cache_write_tokens"]
    )


def measured_table(sessions, simulator: str = "anthropic", encoding: str = DEFAULT_ENCODING) -> pd.DataFrame:
    """`measured_vs_simulated` for every session that recorded usage, one row per session (totals)."""
    from compaction_lab.exam import tasks

    rows = []
    sessions = list(sessions)
    # One task per session (on the engine when a scheduler is given, `exam.tasks.each`).
    for s, df in zip(sessions, tasks.each(measured_vs_simulated, sessions, simulator, encoding), strict=True):
        if df.empty:
            continue
        rows.append(
            {
                "session_id": s.id,
                "source_format": s.source_format,
                "calls": len(df),
                "simulator": simulator,
                "measured_hit_ratio": df["measured_cached"].sum() / max(df["measured_input"].sum(), 1),
                "simulated_hit_ratio": df["simulated_cached"].sum() / max(df["simulated_input"].sum(), 1),
            }
        )
    return pd.DataFrame(
        rows, columns=["session_id", "source_format", "calls", "simulator", "measured_hit_ratio", "simulated_hit_ratio"]
    )


__all__ = [
    "Bill",
    "COST_COLUMNS",
    "CaseBills",
    "CostAssumptions",
    "assumptions_table",
    "break_even",
    "cost_table",
    "ledger_calls_for",
    "ledger_vs_simulated",
    "measured_table",
    "cache_shape_experiment_live",
    "measured_vs_simulated",
    "price_case",
    "cache_shape_experiment_for",
    "projection_request",
    "simulate_case",
    "uncompacted_bills",
    "uncompacted_request",
]
