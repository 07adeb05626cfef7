"""What fills the context window, and where follow-up questions point.

Two studies of the same sessions (figure 2):

* **Composition** (`composition_table`, `tally` for logs on disk through the engine) -- records,
  characters and report tokens by record kind, per session and overall, plus the coarse three-way
  view (`coarse_view`: tool traffic / assistant prose / user text).
* **Follow-up pointers** (`find_followups`, `followups_table`, `pointer_table`) -- user turns that
  refer back to earlier work (`CUE_PATTERN`), each attributed to the kind of the earlier record it
  points at by a deterministic *lexical heuristic*: shared content terms weighted by inverse
  document frequency (identifiers 1, plain words `PLAIN_WORD_WEIGHT`, back-quoted spans
  `SPAN_WEIGHT`), candidates narrowed by a speaker cue (`SPEAKER_CUES`), ``unresolved`` below
  ``min_score`` rather than guessed.

Design: docs/report.md#figures (figure 2, the heuristic step by step).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compaction_lab.core.excerpt import RECORD_CAP_CHARS, for_stage
from compaction_lab.core.session import CONTEXT_KINDS, POINTER_OF_KIND, Session
from compaction_lab.core.tokens import DEFAULT_ENCODING, counter, default_tokenizer, resolve_tokenizer
from compaction_lab.engine.scheduler import POOL, Engine, Handle, open_engine
from compaction_lab.ingest.import_audit import ImportAudit
from compaction_lab.ingest.units import SPAN_BYTES, Admission, Unit
from compaction_lab.tally import tasks as tally_tasks
from compaction_lab.tally.tasks import PART_CHARS

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a table is made: ``compaction-lab tally --json`` prints a tally's rows without it.

#: Coarse groups of the three-way view; system prompts and earlier summaries
#: are "other" (they are neither conversation nor tool traffic).
COARSE_GROUPS: dict[str, str] = {
    "tool_call": "tool traffic",
    "tool_output": "tool traffic",
    "assistant": "assistant prose",
    "reasoning": "assistant prose",
    "user": "user text",
    "system": "other",
    "summary": "other",
}
COARSE_ORDER: tuple[str, ...] = ("tool traffic", "assistant prose", "user text", "other")

COMPOSITION_COLUMNS = ["session_id", "source_format", "kind", "records", "chars", "tokens"]


# --------------------------------------------------------------------------- composition


def composition_table(
    sessions: Iterable[Session],
    encoding: str = DEFAULT_ENCODING,
    progress: bool = False,
    *,
    tokenizer: str | None = None,
    scheduler: str | None = None,
) -> pd.DataFrame:
    """Count records, characters and tokens per session x kind.

    Parameters
    ----------
    sessions : iterable of Session
        Any sessions, from any importer. A sequence (list, tuple) whose texts
        reach `compaction_lab.engine.scheduler.SYNC_BELOW_BYTES` characters is counted
        on the engine (in batches of about `PART_CHARS`); anything else here,
        streamed one session at a time.
    encoding : str
        Report tokenizer encoding.
    progress : bool
        Show a progress bar over sessions.
    tokenizer : str, optional
        ``auto``, ``tiktoken`` or ``bpe-openai`` (default: the process default).
    scheduler : str, optional
        Where counting runs (`compaction_lab.engine.scheduler.open_engine`; default:
        ``--scheduler`` / ``COMPACTION_LAB_SCHEDULER`` / auto).

    Returns
    -------
    DataFrame
        One row per session x context kind (every kind in `CONTEXT_KINDS`,
        zeros included, so tables from different runs line up), columns
        `COMPOSITION_COLUMNS`. ``meta`` records are not context and not counted.
        The same whichever engine counts.
    """
    name = tokenizer or default_tokenizer()
    if isinstance(sessions, Sequence):
        chars = sum(len(r.text) for s in sessions for r in s.records if r.kind in CONTEXT_KINDS)
        eng = open_engine(scheduler, input_bytes=chars)
        if eng.distributed:
            with eng:
                # Resolved here, so every worker counts with the same backend.
                backend = resolve_tokenizer(name, encoding)
                return _frame(_rows_on_engine(eng, sessions, encoding, backend, progress))
    tok = counter(encoding, name)
    rows: list[dict] = []
    for s in _progress(sessions, progress, "composition", "session"):
        rows += _session_rows(s, tok.count_many([r.text for r in s.records if r.kind in CONTEXT_KINDS]))
    return _frame(rows)


def _rows_on_engine(
    eng: Engine, sessions: Sequence[Session], encoding: str, backend: str, progress: bool
) -> list[dict]:
    """Composition rows of in-memory sessions, counted on the engine in batches of about `PART_CHARS`."""
    batches: list[list[Session]] = [[]]
    size = 0
    for s in sessions:
        if size >= PART_CHARS:
            batches.append([])
            size = 0
        batches[-1].append(s)
        size += sum(len(r.text) for r in s.records if r.kind in CONTEXT_KINDS)

    def start(e: Engine, batch: list[Session]) -> Handle[tally_tasks.PartCount]:
        texts = [r.text for s in batch for r in s.records if r.kind in CONTEXT_KINDS]
        return e.submit(tally_tasks.count_part, e.scatter(texts), encoding, backend)

    rows: list[dict] = []
    for batch, handle in _progress(eng.ordered(batches, start), progress, "composition", "batch"):
        counts = handle.result().counts
        handle.release()
        at = 0
        for s in batch:
            n = sum(1 for r in s.records if r.kind in CONTEXT_KINDS)
            rows += _session_rows(s, counts[at : at + n])
            at += n
    return rows


def _session_rows(s: Session, counts: Sequence[int]) -> list[dict]:
    """Composition rows of one session from the token counts of its context records."""
    recs = [r for r in s.records if r.kind in CONTEXT_KINDS]
    return _rows(
        s.id, s.source_format, tally_tasks.kind_totals([r.kind for r in recs], [r.chars for r in recs], counts)
    )


def _rows(session_id: str, source_format: str, totals: Sequence[tuple[int, int, int]]) -> list[dict]:
    """Composition rows of one session: every context kind, from its records, characters and tokens by kind."""
    return [
        {
            "session_id": session_id,
            "source_format": source_format,
            "kind": kind,
            "records": records,
            "chars": chars,
            "tokens": tokens,
        }
        for kind, (records, chars, tokens) in zip(CONTEXT_KINDS, totals, strict=True)
    ]


def _frame(rows: Sequence[dict]) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame(list(rows), columns=COMPOSITION_COLUMNS)
    return df.astype({"records": "int64", "chars": "int64", "tokens": "int64"})


# --------------------------------------------------------------------------- the tally of files, on the engine


@dataclass(frozen=True)
class TallyStats:
    """How a tally ran: units, the tasks that read them, the engine, and how often the count caches answered.

    ``parts`` counts the reading tasks: one per unit, more for a unit read in
    pieces. ``cache_hits`` / ``cache_misses`` count texts answered without /
    with encoding (a text met again -- in the cache or earlier in its
    session -- is a hit); ``hit_chars`` / ``miss_chars`` the same in
    characters, so a corpus of many short repeated texts is seen not to
    flatter the throughput.
    """

    units: int
    parts: int
    input_bytes: int
    cache_hits: int
    cache_misses: int
    hit_chars: int
    miss_chars: int
    engine: str

    @property
    def hit_rate(self) -> float:
        """Share of texts counted without encoding."""
        total = self.cache_hits + self.cache_misses
        return self.cache_hits / total if total else 0.0

    @property
    def hit_rate_chars(self) -> float:
        """Share of characters counted without encoding."""
        total = self.hit_chars + self.miss_chars
        return self.hit_chars / total if total else 0.0


@dataclass(frozen=True)
class Tally:
    """A tally's rows (`COMPOSITION_COLUMNS`; as a DataFrame: `table`), its import audit and how it ran."""

    rows: tuple[dict, ...]
    audit: ImportAudit
    stats: TallyStats

    @functools.cached_property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame (`composition_table`'s table), made when first asked for."""
        return _frame(self.rows)

    def to_json(self) -> str:
        """Return the table as JSON records, exactly as ``table.to_json(orient="records", indent=2)`` writes it.

        Written from the rows without pandas (``compaction-lab tally --json`` does not import it).
        """
        records = (
            "  {\n" + ",\n".join(f"    {_pandas_json(c)}:{_pandas_json(r[c])}" for c in COMPOSITION_COLUMNS) + "\n  }"
            for r in self.rows
        )
        return "[\n" + ",\n".join(records) + "\n]"


def _pandas_json(value: str | int) -> str:
    """Write a string or integer as pandas' JSON writer does: ``json.dumps``, but ``/`` escaped and DEL (0x7f) not."""
    if isinstance(value, str):
        return '"' + "\x7f".join(json.dumps(part)[1:-1].replace("/", "\\/") for part in value.split("\x7f")) + '"'
    return str(int(value))


def tally(
    paths: str | Path | Iterable[str | Path],
    *,
    formats: Iterable[str] | None = None,
    encoding: str = DEFAULT_ENCODING,
    tokenizer: str | None = None,
    scheduler: str | None = None,
    engine: Engine | None = None,
    progress: bool = False,
    piece_bytes: int | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Tally:
    """Tally the composition of session files, read and counted on the engine (``compaction-lab tally``).

    The same table as ``composition_table(load_sessions(paths))`` and the same
    import audit, whichever engine runs it: files (and spans of whole sessions
    of large files) are read by tasks that count their texts where they read
    them (`compaction_lab.tally.tasks`); on a cluster a large unit -- one long
    session -- is read in pieces by several tasks at once. Everything is
    combined here in reading order, through the one admission rule for
    sessions met twice.

    Parameters
    ----------
    paths : path or iterable of paths
    formats : iterable of str, optional
        Only sources of these formats.
    encoding : str
    tokenizer : str, optional
        ``auto``, ``tiktoken`` or ``bpe-openai`` (default: the process default);
        resolved here, so every worker counts with the same backend.
    scheduler : str, optional
        See `compaction_lab.engine.scheduler.open_engine` (ignored when `engine` is given);
        ``auto`` runs a tally from ``POOL_FROM_BYTES`` of input on a pool of forked workers.
    engine : Engine, optional
        An open engine to use (and leave open).
    progress : bool
        A progress bar over the input's bytes.
    piece_bytes : int, optional
        Read units of at least twice this many bytes in pieces of about this
        size (`compaction_lab.tally.tasks.plan_pieces`). Default: on a cluster, about
        `PIECES_PER_WORKER` pieces per worker of the input (`POOL_PIECES_PER_WORKER`
        on a pool; between `MIN_PIECE_BYTES` and `SPAN_BYTES`); in this process, whole units.
    meanwhile : callable, optional
        Called once in this process when the first tasks are started, before
        their results are awaited: the caller's own preparation (the command
        imports pandas to print the table) overlaps the workers' reading.

    Raises
    ------
    FileNotFoundError
        When a path does not exist at all.
    """
    from compaction_lab.ingest import admit_id, plan, units_on_engine

    if isinstance(paths, (str, Path)):
        paths = [paths]
    name = tokenizer or default_tokenizer()
    # The workers of an engine given load the importers and the tokenizer while the input is planned.
    ready = _prepare(engine, encoding, name) if engine is not None else []
    steps = list(plan(paths, formats, split_bytes=SPAN_BYTES))
    total = sum(st.unit.size for st in steps if st.unit is not None)
    eng: Engine = engine if engine is not None else open_engine(scheduler, input_bytes=total, pool=True)
    audit = ImportAudit()
    admission = _Admission(Admission())
    rows: list[dict] = []
    counted: list[tally_tasks.PartCount] = []
    bar = None
    try:
        if engine is None:
            ready = _prepare(eng, encoding, name)
        bar = _bar(progress, total)  # after `_prepare`: a pool's workers are forked before its thread starts
        # Every task counts with the one backend resolved here, in this process too: bpe-openai's load and
        # self-check take milliseconds (`core.tokens.SELF_CHECK_IDS_SHA256`), tiktoken's encoding a tenth of a second.
        backend = resolve_tokenizer(name, encoding)
        piece = piece_bytes if piece_bytes is not None else _piece_bytes(eng, total)

        def start(e: Engine, unit: Unit) -> list[Handle[tally_tasks.UnitRead]]:
            pieces = tally_tasks.plan_pieces(unit, piece) if piece else (unit,)
            whole = len(pieces) == 1
            return [e.submit(tally_tasks.read_for_tally, p, encoding, backend, whole) for p in pieces]

        for unit, handles in units_on_engine(steps, audit, eng, start):
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
            reads = []
            for h in handles:
                reads.append(h.result())
                h.release()
            read = tally_tasks.stitch(reads)
            counted += [r.counted for r in reads]
            for index, (segment, st) in enumerate(zip(read.segments, (*read.sessions, None), strict=True)):
                audit.merge(segment)
                if st is None:
                    continue
                digest = admission.digest(st, functools.partial(eng.submit, tally_tasks.session_digest, unit, index))
                sid = admit_id(admission.admission, st.source_format, st.session_id, digest, unit.path, audit)
                if sid is not None:
                    audit.count_session(st.source_format, st.n_records)
                    rows += _rows(sid, st.source_format, st.totals)
            if bar is not None:
                bar.update(unit.size)
    finally:
        for prepared in ready:
            prepared.release()
        if bar is not None:
            bar.close()
        if engine is None:
            eng.close()
    stats = TallyStats(
        units=sum(1 for st in steps if st.unit is not None),
        parts=len(counted),
        input_bytes=total,
        cache_hits=sum(p.hits for p in counted),
        cache_misses=sum(p.misses for p in counted),
        hit_chars=sum(p.hit_chars for p in counted),
        miss_chars=sum(p.miss_chars for p in counted),
        engine=eng.kind,
    )
    return Tally(tuple(rows), audit, stats)


#: On a cluster a tally's input is read in about this many pieces per worker (`tally`'s
#: ``piece_bytes``): enough that the workers finish together, few enough that a task's
#: fixed cost stays small.
PIECES_PER_WORKER = 4
#: The same on a pool of forked workers (`compaction_lab.engine.scheduler.POOL`), where a task costs
#: a millisecond: more, smaller pieces, so a worker slowed by other work on the machine delays the end less.
POOL_PIECES_PER_WORKER = 8
#: The smallest piece a unit is cut into.
MIN_PIECE_BYTES = 1024 * 1024


def _prepare(eng: Engine, encoding: str, name: str) -> list[Handle[None]]:
    """Start `tally_tasks.prepare` on every worker of a cluster (nothing in this process)."""
    if not eng.distributed:
        return []
    return eng.on_every_worker(tally_tasks.prepare, encoding, resolve_tokenizer(name, encoding))


def _piece_bytes(eng: Engine, total: int) -> int | None:
    """Default piece size of a tally (see `tally`): None (whole units) in this process."""
    if not eng.distributed:
        return None
    per_worker = POOL_PIECES_PER_WORKER if eng.kind == POOL else PIECES_PER_WORKER
    return max(MIN_PIECE_BYTES, min(SPAN_BYTES, total // (per_worker * max(1, eng.workers))))


@dataclass
class _Admission:
    """`Admission` for tallies: a session read in pieces has no digest until a second session takes its id.

    Its placeholder is kept in the admission's list until then, and replaced
    by the digest `session_digest` computes from one reading of its unit: only
    sessions met twice are read twice.
    """

    admission: Admission
    later: dict[bytes, Callable[[], Handle[bytes]]] = dataclasses.field(default_factory=dict)
    placeholders: int = 0

    def digest(self, st: tally_tasks.SessionTally, compute: Callable[[], Handle[bytes]]) -> bytes:
        """Return the digest to admit `st` with: its own, one computed now, or a placeholder (first of its id)."""
        taken = self.admission.seen.get((st.source_format, st.session_id))
        if not taken:
            if st.digest is not None:
                return st.digest
            # Longer than a digest's 16 bytes: never equal to one.
            placeholder = b"digest not computed yet: %d" % self.placeholders
            self.placeholders += 1
            self.later[placeholder] = compute
            return placeholder
        for i, d in enumerate(taken):
            if d in self.later:
                taken[i] = self.later.pop(d)().result()
        return st.digest if st.digest is not None else compute().result()


def _bar(enabled: bool, total: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="tally", unit="B", unit_scale=True)


def with_shares(df: pd.DataFrame, by: str | list[str] = "session_id") -> pd.DataFrame:
    """Add ``char_share`` and ``token_share`` columns (fractions within each `by` group)."""
    out = df.copy()
    for col in ("chars", "tokens"):
        totals = out.groupby(by)[col].transform("sum")
        out[f"{col[:-1]}_share"] = (out[col] / totals.where(totals > 0)).fillna(0.0)
    return out


def overall_by_kind(comp: pd.DataFrame) -> pd.DataFrame:
    """Totals by kind over every session, with shares of characters and tokens."""
    g = comp.groupby("kind", sort=False)[["records", "chars", "tokens"]].sum().reset_index()
    g["char_share"] = g["chars"] / max(int(g["chars"].sum()), 1)
    g["token_share"] = g["tokens"] / max(int(g["tokens"].sum()), 1)
    return g


def coarse_view(comp: pd.DataFrame) -> pd.DataFrame:
    """Reduce the composition to the three-way view per session and overall.

    Returns
    -------
    DataFrame
        Columns session_id (``ALL`` for the total), group (`COARSE_ORDER`),
        records, chars, tokens, char_share, token_share.
    """
    import pandas as pd

    c = comp.assign(group=comp["kind"].map(COARSE_GROUPS))
    per = c.groupby(["session_id", "group"], sort=False)[["records", "chars", "tokens"]].sum()
    per = per.reset_index()
    tot = c.groupby("group", sort=False)[["records", "chars", "tokens"]].sum().reset_index()
    tot.insert(0, "session_id", "ALL")
    out = with_shares(pd.concat([per, tot], ignore_index=True))
    out["group"] = pd.Categorical(out["group"], categories=list(COARSE_ORDER), ordered=True)
    sessions = list(dict.fromkeys(out["session_id"]))
    out["session_id"] = pd.Categorical(out["session_id"], categories=sessions, ordered=True)
    out = out.sort_values(["session_id", "group"]).reset_index(drop=True)
    out["session_id"] = out["session_id"].astype(str)
    out["group"] = out["group"].astype(str)
    return out


# --------------------------------------------------------------------------- follow-ups

#: Phrases by which a person refers back to earlier work.
CUE_PATTERN = re.compile(
    r"\b(?:earlier|previously|last time|remind me|going back to|"
    r"(?:you|we) (?:said|mentioned|proposed|suggested|chose|picked|found|measured|reported|decided|"
    r"agreed|discussed|concluded|saw|got)|(?:i|we) (?:told|asked) you|as (?:i|we) (?:said|asked|mentioned)|"
    r"what (?:was|were|did)|which \w+ did (?:you|we|i)|the one (?:you|we)|from before|(?:said|told you|"
    r"asked|mentioned|discussed|ran|saw|did) (?:\w+ )?before)\b",
    re.IGNORECASE,
)
#: Speaker cues: words that say *whose* words the follow-up means. Checked in
#: this order; the first that matches restricts the candidates to those kinds
#: (falling back to every kind when none of them matches well enough).
SPEAKER_CUES: tuple[tuple[str, tuple[str, ...], re.Pattern], ...] = (
    (
        "assistant",
        ("assistant", "reasoning"),
        re.compile(
            r"\b(?:you (?:said|mentioned|proposed|suggested|chose|picked|decided|concluded|recommended|planned|wrote|"
            r"explained|measured|reported|found)|your (?:plan|conclusion|decision|proposal|suggestion|reasoning|"
            r"recommendation|explanation|choice|answer|estimate|measurement|analysis)|why did you)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "user",
        ("user",),
        re.compile(
            r"\b(?:(?:i|we) (?:said|asked|told|wanted|mentioned|agreed|required)|did i (?:say|ask|mention|want)|"
            r"what did i|my (?:request|instruction|constraint|requirement)|we agreed)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "tool",
        ("tool_call", "tool_output"),
        re.compile(
            r"\b(?:run|output|returned|show|showed|printed|log|logs|listing|traceback|exit code|came back|"
            r"response|stack trace|diff)\b",
            re.IGNORECASE,
        ),
    ),
)

# Bare "before" and "again" are left out on purpose: "Before you continue: ..." and
# "run the tests again" are instructions, not references back.

_TERM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9_]|[A-Za-z0-9]{3,}")
_STOP = frozenset(
    """
    the and for that this with from what was were you your have has had are but not can could
    would should will did does done into about there their them then than when which who how
    why where again earlier before previously last time remind said mentioned proposed suggested
    chose picked found measured reported decided wrote ran agreed discussed one also just still
    now please let use used make sure does doesn any all some our out its it's get got see
    value number error output run test tests file files thing things hold holds after back
    """.split()
)
_EXT = frozenset({"py", "ts", "js", "tsx", "json", "yaml", "yml", "toml", "sql", "md", "txt", "cfg"})

#: Kinds a follow-up can point at.
TARGET_KINDS: tuple[str, ...] = ("user", "assistant", "reasoning", "tool_call", "tool_output")


@dataclass(frozen=True)
class FollowUp:
    """A user turn that refers back to earlier work, with its attributed target."""

    session_id: str
    entry_id: str
    source_order: int
    cue: str
    text: str
    target_entry_id: str | None
    target_source_order: int | None
    target_kind: str | None
    pointer: str  # user | assistant | tool | unresolved
    score: float


#: Weight of a plain word relative to an identifier-shaped term: "came" or
#: "returned" may be rare in a session and still say little about which record
#: is meant; `dispatch_event`, ``payments/client.py`` or ``ORD-58213`` do.
PLAIN_WORD_WEIGHT = 0.5
#: Weight of an exact back-quoted span (`pytest -q tests/test_cart.py`) found in a record.
SPAN_WEIGHT = 2.0

_IDENTIFIER = re.compile(r"[\d_./:-]|[a-z][A-Z]")
_SPAN = re.compile(r"`([^`\n]{3,200})`")


def terms(text: str) -> dict[str, float]:
    """Content terms of a text with their shape weight.

    Terms are lower-cased identifiers, paths, numbers and words of 3+
    characters that are not stop words. Identifier-shaped terms (digits,
    ``_ . / : -`` or camelCase) weigh 1, plain words `PLAIN_WORD_WEIGHT`.
    Paths, dotted and namespaced names also contribute their components, so
    "client.py" in a question matches "payments/client.py" in a tool call and
    "rebuild_index" matches "app.jobs.rebuild_index".
    """
    out: dict[str, float] = {}
    for m in _TERM.finditer(text):
        raw = m.group(0).strip(".:-/")
        _add_term(out, raw)
        if any(sep in raw for sep in "/.:="):
            for part in re.split(r"[/:=]+", raw):
                _add_term(out, part)
                if "." in part:
                    for sub in part.split("."):
                        _add_term(out, sub)
    return out


def _add_term(out: dict[str, float], raw: str) -> None:
    t = raw.lower()
    if len(t) < 3 or t in _STOP or t in _EXT:
        return
    w = 1.0 if _IDENTIFIER.search(raw) else PLAIN_WORD_WEIGHT
    out[t] = max(out.get(t, 0.0), w)


def find_followups(session: Session, min_score: float = 1.5) -> list[FollowUp]:
    """Detect follow-up user turns in a session and attribute each to an earlier record.

    Parameters
    ----------
    session : Session
    min_score : float
        Minimum weighted IDF of shared terms for a target to count; below it
        the follow-up is ``unresolved``.

    Returns
    -------
    list of FollowUp, in source order.
    """
    recs = [r for r in session.records if r.kind in TARGET_KINDS and not r.injected]
    if not recs:
        return []
    term_sets = [terms(r.text) for r in recs]
    # Inverted index term -> positions (ascending), and document frequencies for IDF.
    postings: dict[str, list[int]] = defaultdict(list)
    for i, ts in enumerate(term_sets):
        for t in ts:
            postings[t].append(i)
    n_other = len(recs) - 1
    lowered: list[str] | None = None  # built only if some follow-up quotes a span

    found: list[FollowUp] = []
    for i, r in enumerate(recs):
        if r.kind != "user" or i == 0:
            continue
        cue = CUE_PATTERN.search(r.text)
        if not cue:
            continue
        scores: dict[int, float] = defaultdict(float)
        for t, weight in sorted(term_sets[i].items()):  # fixed order: float sums must not depend on set order
            plist = postings[t]
            # IDF over the *other* records: the follow-up's own mention is no evidence.
            df = len(plist) - 1
            idf = math.log(n_other / df) if df else 0.0
            for j in plist:
                if j >= i:
                    break
                scores[j] += weight * idf
        spans = sorted({m.group(1).lower() for m in _SPAN.finditer(r.text)})
        if spans:
            if lowered is None:
                lowered = [f"{x.text}\n{x.target or ''}".lower() for x in recs]
            for span in spans:
                hits = [j for j, text in enumerate(lowered) if j != i and span in text]
                if hits:
                    idf = math.log(n_other / len(hits))
                    for j in hits:
                        if j < i:
                            scores[j] += SPAN_WEIGHT * idf
        best_j, best = _best(scores, recs, _speaker_kinds(r.text), min_score)
        tgt = recs[best_j] if best_j is not None else None
        found.append(
            FollowUp(
                session.id,
                r.entry_id,
                r.source_order,
                cue.group(0).lower(),
                r.text,
                tgt.entry_id if tgt else None,
                tgt.source_order if tgt else None,
                tgt.kind if tgt else None,
                POINTER_OF_KIND[tgt.kind] if tgt else "unresolved",
                round(best, 4),
            )
        )
    return found


def _speaker_kinds(text: str) -> tuple[str, ...] | None:
    for _, kinds, pattern in SPEAKER_CUES:
        if pattern.search(text):
            return kinds
    return None


def _best(
    scores: dict[int, float], recs: Sequence, kinds: tuple[str, ...] | None, min_score: float
) -> tuple[int | None, float]:
    """Highest-scoring record (ties to the most recent), preferring the speaker cue's kinds."""
    pools = ([j for j in scores if recs[j].kind in kinds],) if kinds else ()
    top: tuple[int | None, float] = (None, 0.0)
    for pool in (*pools, list(scores)):
        best_j, best = None, 0.0
        for j in pool:
            sc = scores[j]
            if sc > best or (sc == best and best_j is not None and j > best_j):
                best_j, best = j, sc
        if best_j is not None and best >= min_score:
            return best_j, best
        top = max(top, (best_j, best), key=lambda x: x[1])
    return None, top[1]


FOLLOWUP_COLUMNS = [f for f in FollowUp.__dataclass_fields__]


def followups_table(sessions: Iterable[Session], min_score: float = 1.5, cap: int = RECORD_CAP_CHARS) -> pd.DataFrame:
    """Every detected follow-up of every session, one row each (`FollowUp` fields).

    Records longer than `cap` characters are read as excerpts
    (`excerpt.for_stage`, with a note): the attribution runs regexes over
    every record, and a 50 MB tool output would dominate its time.
    """
    import pandas as pd

    sessions = for_stage(sessions, "the follow-up attribution", cap)
    rows = [asdict(f) for s in sessions for f in find_followups(s, min_score=min_score)]
    df = pd.DataFrame(rows, columns=FOLLOWUP_COLUMNS)
    return df.astype({"target_source_order": "Int64", "score": "float64"})


POINTERS: tuple[str, ...] = ("assistant", "user", "tool")


def pointer_table(followups: pd.DataFrame) -> pd.DataFrame:
    """Where follow-ups point: count and share per pointer class.

    Shares are over *resolved* follow-ups; unresolved ones are listed with a
    count and no share, so they are visible but never distort the split.
    """
    import pandas as pd

    counts = followups["pointer"].value_counts()
    resolved = int(sum(counts.get(p, 0) for p in POINTERS))
    rows = [
        {
            "pointer": p,
            "followups": int(counts.get(p, 0)),
            "share": (counts.get(p, 0) / resolved) if resolved else float("nan"),
        }
        for p in POINTERS
    ]
    rows.append({"pointer": "unresolved", "followups": int(counts.get("unresolved", 0)), "share": float("nan")})
    return pd.DataFrame(rows, columns=["pointer", "followups", "share"])


# --------------------------------------------------------------------------- helpers


def _progress(items: Iterable, enabled: bool, desc: str, unit: str) -> Iterable:
    if not enabled:
        return items
    from tqdm.auto import tqdm

    total = len(items) if isinstance(items, Sequence) else None
    return tqdm(items, desc=desc, unit=unit, total=total)
