"""Inspect eval logs read back into a run folder (``compaction-lab import-inspect LOG...``).

Every sample of a `compaction_lab.inspect.tasks.closed_book` or ``open_book`` log, every epoch,
becomes one row of ``exam_inspect.parquet`` in the run folder the task was built from: the case,
question, arm and pointer, the answer as graded, whether it was right, and the draw. The reader is
Inspect's model (``reader_label`` ``<model> (Inspect)``). Importing a log again replaces its rows
(a log is known by its eval id), so a log can be re-read after ``inspect score``.

A log is text someone else wrote, so nothing in it is trusted (`read_log`): reads are bounded
(`MAX_MEMBER_BYTES`, `core.bounded_json`), every field is checked for type and range, every
sample's question must be one of the run's exam bank, duplicates count once, an answer longer than
`MAX_ANSWER_CHARS` is kept cut, and the table is written atomically only after every log and the
run folder passed (``run.json`` checked with `run.runner.report_inputs`).

Design: docs/real-models.md#the-closed-book-in-inspect-ai; the checks: docs/security.md.
"""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai.log import read_eval_log  # noqa: F401  # imported for its side effect: zipfile reads zstd members
from inspect_ai.scorer import CORRECT, INCORRECT

from compaction_lab.core import bounded_json, regular_file, runfolder
from compaction_lab.exam.imported import COLUMNS, TABLE, cluster_of
from compaction_lab.exam.questions.cases import BANK_FILE
from compaction_lab.exam.statistics import power

#: The scorer whose value is read (`compaction_lab.inspect.tasks.exact_value`).
SCORER = "exact_value"

#: Most bytes a member of an ``.eval`` log (its header, one sample), or a whole ``.json`` log, may take
#: uncompressed: a sample of the suite's tasks is some kilobytes to a few megabytes (its projection, the
#: model's turns). A hard ceiling: a larger member is never read.
MAX_MEMBER_BYTES = 64 * 2**20

#: Longest answer kept in ``exam_inspect`` (characters); a longer one is kept cut, with `CUT_MARKER`.
#: The grade is the scorer's, made on the whole answer; an exact value is some characters long.
MAX_ANSWER_CHARS = 4096

#: What follows an answer cut to `MAX_ANSWER_CHARS`.
CUT_MARKER = " … [answer cut: {n:,} characters in all]"

#: Longest text kept from a sample's other fields (ids, arm, labels); longer: the sample is skipped.
MAX_FIELD_CHARS = 1000

#: Largest epoch (and open-book round) and projection size a sample may say: beyond any real run, within int64.
MAX_EPOCH, MAX_TOKENS = 100_000, 10**12

#: A question as a model answered it (one draw per epoch of each eval).
QUESTION_KEY: tuple[str, ...] = ("reader_label", "case_id", "question_id", "strategy")
#: A sample x epoch of one eval: one answer, whichever log holds it (a copy, a converted log); so is a row
#: whose ``sample_uuid`` (Inspect's id of the sample x epoch as run) was read already.
SAMPLE_KEY: tuple[str, ...] = ("eval_id", *QUESTION_KEY, "epoch")

#: The units an interval resamples (`exam.questions.cases.RunCases.unit`).
UNITS = ("question", "session")

#: Largest exam bank read (``exam_bank.jsonl``, `exam.questions.cases.BANK_FILE`): a real one is megabytes at most.
MAX_BANK_BYTES = 256 * 2**20

#: The skip reason of a sample whose question is not in the run's bank.
FOREIGN = "not a question of this run's exam bank"

_HEADER, _JOURNAL_START, _SAMPLES = "header.json", "_journal/start.json", "samples/"

try:  # the errors a damaged member raises while it inflates, whichever its compression
    from zstandard import ZstdError as _ZstdError
except ImportError:  # pragma: no cover - Inspect installs zstandard

    class _ZstdError(Exception):  # type: ignore[no-redef]  # stands in for the absent import
        """Stands in when zstandard is absent."""


_INFLATE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, _ZstdError)


class _Skip(Exception):
    """A sample not read into the table: the reason, counted."""


@dataclass(frozen=True)
class LogRead:
    """One Inspect log as read: its rows and what was left out, with why."""

    path: Path
    #: The run folder its task was built from (None when it does not say).
    run: Path | None
    #: `COLUMNS`: one row per usable sample.
    rows: pd.DataFrame
    #: Samples the log holds (usable or not).
    samples: int
    #: Why samples were skipped: reason -> count.
    skipped: Mapping[str, int] = field(default_factory=dict)
    #: Answers kept cut to `MAX_ANSWER_CHARS`.
    cut: int = 0
    #: Per row, the value its question asks (the sample's metadata; None when it does not say).
    asked: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Imported:
    """What `import_logs` did to one run folder's table."""

    #: Rows in ``exam_inspect`` after the import.
    rows: int
    #: Lines to show: skipped samples and files, duplicates dropped, answers cut.
    notes: tuple[str, ...] = ()


def _first_line(exc: BaseException) -> str:
    """Return an exception's message on one line, at most 200 characters."""
    text = (str(exc).splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= 200 else text[:200] + "…"


def _json(data: bytes, what: str) -> Any:
    """Parse a member's bytes (`core.bounded_json`); ValueError naming `what` when it is not JSON."""
    try:
        return bounded_json.loads(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, TooDeep
        raise ValueError(f"{what} is not JSON ({_first_line(exc)})") from None


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """Read one member, at most `MAX_MEMBER_BYTES` (the directory's size is checked first)."""
    if info.file_size > MAX_MEMBER_BYTES:
        raise _Skip(f"over the {MAX_MEMBER_BYTES // 2**20} MiB a sample may take")
    try:
        with z.open(info) as f:
            data = f.read(MAX_MEMBER_BYTES + 1)  # the stream stops at the declared size: a lie fails its CRC
    except _INFLATE_ERRORS as exc:
        raise _Skip(f"unreadable ({_first_line(exc)})") from None
    if len(data) > MAX_MEMBER_BYTES:
        raise _Skip(f"over the {MAX_MEMBER_BYTES // 2**20} MiB a sample may take")
    return data


def _eval_parts(path: Path) -> Generator[Any, None, None]:
    """Yield an ``.eval`` log's header, then each sample: a dict, or the `_Skip` of one that could not be read."""
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"{path}: not a readable .eval log ({_first_line(exc)})") from None
    with z:
        infos = {i.filename: i for i in z.infolist()}
        head = infos.get(_HEADER) or infos.get(_JOURNAL_START)  # a log still running has only its journal
        if head is None:
            raise ValueError(f"{path}: an .eval log without {_HEADER} (not an Inspect log)")
        try:
            yield _json(_member(z, head), f"its {head.filename}")
        except (_Skip, ValueError) as exc:
            raise ValueError(f"{path}: its {head.filename}: {exc}") from None
        for name, info in infos.items():
            if not (name.startswith(_SAMPLES) and name.endswith(".json")):
                continue
            try:
                yield _json(_member(z, info), "the sample")
            except _Skip as skip:
                yield skip
            except ValueError as exc:
                yield _Skip(str(exc))


def _json_parts(path: Path) -> Generator[Any, None, None]:
    """Yield a ``.json`` log's header (the document without its samples), then each sample."""
    size = path.stat().st_size
    if size > MAX_MEMBER_BYTES:
        raise ValueError(
            f"{path}: a .json log of {size / 2**20:,.0f} MiB, over the {MAX_MEMBER_BYTES // 2**20} MiB read at once; "
            f"write it as .eval (inspect log convert {path} --to eval --output-dir DIR) and import that"
        )
    try:
        doc = _json(path.read_bytes(), "the log")
    except ValueError as exc:
        raise ValueError(f"{path}: neither an .eval log (a zip) nor a .json log: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("samples") or [], list):
        raise ValueError(f"{path}: a JSON document, not an Inspect log")
    yield {k: v for k, v in doc.items() if k != "samples"}
    yield from doc.get("samples") or []


def _text(d: Mapping[str, Any], key: str, default: str | None = None) -> str:
    """Return a text field of at most `MAX_FIELD_CHARS` characters (`default` when absent; required when None)."""
    value = d.get(key, default)
    if not isinstance(value, str) or (default is None and not value) or len(value) > MAX_FIELD_CHARS:
        raise _Skip(f"{key} {'missing, empty or not text' if default is None else 'not text'} or over "
                    f"{MAX_FIELD_CHARS:,} characters")  # fmt: skip
    return value


def _flag(d: Mapping[str, Any], key: str) -> bool:
    value = d.get(key, False)
    if not isinstance(value, bool):
        raise _Skip(f"{key} not true or false")
    return value


def _whole(value: Any, key: str, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise _Skip(f"{key} not a whole number from {least} to {most:,}")
    return value


def _header(path: Path, header: Any) -> tuple[str, str, str, Path | None]:
    """Return the task, eval id, model and run folder a log's header names, checked."""
    ev = header.get("eval") if isinstance(header, dict) else None
    if not isinstance(ev, dict):
        raise ValueError(f"{path}: its header has no eval (not an Inspect log)")
    try:
        task, eval_id, model = (_text(ev, k) for k in ("task", "eval_id", "model"))
    except _Skip as exc:
        raise ValueError(f"{path}: its header's {exc}") from None
    run = None
    for where in ("metadata", "task_args"):  # the task's metadata holds the folder resolved when it was built
        given = ev.get(where)
        if isinstance(given, dict) and isinstance(given.get("run"), str) and given["run"]:
            run = Path(given["run"])
            break
    return task, eval_id, model, run


def _row(sample: Any, task: str, eval_id: str, model: str, log: str) -> tuple[dict[str, Any], bool, str | None]:
    """Return one sample as a row of `COLUMNS`, whether its answer was cut, and the value its question asks.

    Every field is checked (`_Skip` says what is wrong); the value asked is checked against the bank by `import_logs`.
    """
    if not isinstance(sample, dict):
        raise _Skip("sample not an object")
    meta = sample.get("metadata")
    if not isinstance(meta, dict):
        raise _Skip("metadata not an object")
    epoch = _whole(sample.get("epoch"), "epoch", 1, MAX_EPOCH)
    scores = sample.get("scores")
    score = scores.get(SCORER) if isinstance(scores, dict) else None
    if not isinstance(score, dict):
        raise _Skip(f"{SCORER} score missing")
    if score.get("value") not in (CORRECT, INCORRECT):
        raise _Skip(f"{SCORER} score neither {CORRECT} nor {INCORRECT}")
    answer = score.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise _Skip("answer not text")
    given, cut = answer or "", False
    if len(given) > MAX_ANSWER_CHARS:
        given, cut = given[:MAX_ANSWER_CHARS] + CUT_MARKER.format(n=len(given)), True
    strategy = _text(meta, "strategy")
    unit = meta.get("unit", "question")
    if unit not in UNITS:
        raise _Skip(f"unit neither {' nor '.join(UNITS)}")
    rnd = meta.get("round")
    if rnd is not None:
        _whole(rnd, "round", 1, MAX_EPOCH)
    question = meta.get("question")
    asked = question.get("answer") if isinstance(question, dict) else None
    row = {
        "case_id": _text(meta, "case_id"),
        "question_id": _text(meta, "question_id"),
        "strategy": strategy,
        "strategy_label": _text(meta, "strategy_label", strategy),
        "session_id": _text(meta, "session_id", ""),
        "pointer": _text(meta, "pointer", ""),
        "category": _text(meta, "category", ""),
        "decoy": _flag(meta, "decoy"),
        "unit": unit,
        "draw": epoch - 1,  # numbered across the folder's evals by `_merged`
        "epoch": epoch,
        "given": given,
        "correct": score["value"] == CORRECT,
        "projection_tokens": _whole(meta.get("projection_tokens", 0), "projection_tokens", 0, MAX_TOKENS),
        "over_window": _flag(meta, "over_window"),
        "reader": "inspect",
        # An open-book round's answers (tools offered, its wording) are not the closed book's: kept apart.
        "reader_label": f"{model} (Inspect)" if rnd is None else f"{model} (Inspect, open book round {rnd})",
        "task": task,
        "eval_id": eval_id,
        # Inspect's id of this sample x epoch as run: the same answer in a log whose header was changed.
        "sample_uuid": _text({"uuid": sample.get("uuid") or ""}, "uuid", ""),
        "log": log,
    }
    return row, cut, asked if isinstance(asked, str) else None


def read_log(path: str | Path) -> LogRead:
    """Read one Inspect log of the suite's question tasks: its run folder, its usable rows, what was skipped.

    Raises
    ------
    ValueError
        When the log cannot be read (not an Inspect log, its header or a ``.json`` log over
        `MAX_MEMBER_BYTES`), holds no samples, is a continuation log, or holds no usable sample.
    FileNotFoundError
        When `path` is not a file (missing, a folder, a FIFO).
    """
    path = Path(path)
    if not path.is_file():  # a folder, a FIFO (whose open would wait for ever), a device
        raise FileNotFoundError(f"{path}: no such log file")
    parts = _eval_parts(path) if zipfile.is_zipfile(path) else _json_parts(path)
    header = next(parts)
    task, eval_id, model, run = _header(path, header)
    if task.rsplit("/", 1)[-1] == "continuation":
        parts.close()
        raise ValueError(
            f"{path}: a continuation log grades next calls (tool, target, arguments), not answers to questions: "
            "it is not read into exam_inspect; its scores are in the log (inspect view)"
        )
    rows, asked, skipped, cut, samples = [], [], Counter[str](), 0, 0
    for sample in parts:
        samples += 1
        try:
            if isinstance(sample, _Skip):
                raise sample
            row, was_cut, value = _row(sample, task, eval_id, model, path.name)
        except _Skip as skip:
            skipped[str(skip)] += 1
            continue
        rows.append(row)
        asked.append(value)
        cut += was_cut
    if not samples:
        status = header.get("status") if isinstance(header.get("status"), str) else "unknown"
        raise ValueError(f"{path}: the log holds no samples (status {status[:40]})")
    if not rows:
        raise ValueError(f"{path}: no usable sample: {_counts(skipped)}")
    return LogRead(path, run, pd.DataFrame(rows, columns=list(COLUMNS)), samples, dict(skipped), cut, tuple(asked))


def _counts(counts: Mapping[str, int]) -> str:
    """``3 reason, 1 other reason``, the most frequent first."""
    return ", ".join(f"{n} {reason}" for reason, n in Counter(counts).most_common())


def _digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read a megabyte at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(2**20), b""):
            h.update(chunk)
    return h.hexdigest()


def _bank(folder: Path) -> dict[tuple[str, str], tuple[bool, str]]:
    """Return the run's questions: (case, question) -> (decoy, the value asked).

    Raises
    ------
    ValueError
        When the folder has no bank, or it cannot be read.
    """
    from compaction_lab.exam.types import bank_from_jsonl

    path = folder / BANK_FILE
    if not path.is_file():
        raise ValueError(
            f"{folder}: no {BANK_FILE}: the closed book (notebook 03) has not run in this folder, and a log's "
            "questions are checked against it"
        )
    try:
        cases = bank_from_jsonl(regular_file.read(path, MAX_BANK_BYTES))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise ValueError(f"{path}: not a readable exam bank ({_first_line(exc)})") from None
    return {(c.id, q.id): (bool(q.decoy), str(q.answer)) for c in cases for q in c.questions}


def _of_bank(read: LogRead, bank: Mapping[tuple[str, str], tuple[bool, str]]) -> pd.Series:
    """Whether each row asks a question of `bank`: its case and question, decoy and (when the log says) value."""

    def asks(r: Any, value: str | None) -> bool:
        known = bank.get((r.case_id, r.question_id))
        return known is not None and known[0] == r.decoy and (value is None or value == known[1])

    rows = read.rows
    return pd.Series(
        [asks(r, v) for r, v in zip(rows.itertuples(), read.asked, strict=True)], index=rows.index, dtype=bool
    )


def _check_folder(
    folder: Path, check_run: Callable[[Path], object] | None = None
) -> dict[tuple[str, str], tuple[bool, str]]:
    """Check a run folder before anything is written into it (`check_run` too); return its bank (`_bank`).

    Raises
    ------
    FileNotFoundError
        When it is not a run folder.
    ValueError
        When `check_run` refuses it (a damaged ``run.json``) or its bank is missing or unreadable.
    """
    if not (folder / runfolder.RUN_JSON).is_file():
        raise FileNotFoundError(f"{folder}: not a run folder (no {runfolder.RUN_JSON})")
    if check_run is not None:
        check_run(folder)
    return _bank(folder)


def import_logs(
    logs: Iterable[str | Path], run_dir: str | Path | None = None, check_run: Callable[[Path], object] | None = None
) -> dict[Path, Imported]:
    """Add the rows of Inspect logs to their run folders' ``exam_inspect`` table; what was done per folder.

    Every log and folder is read and checked first; a table is written only when all passed.

    Parameters
    ----------
    logs : iterable of paths
    run_dir : path, optional
        The run folder to write into; None: the one each log's task names (``-T run=...``).
    check_run : callable, optional
        Checks a run folder before anything is written into it, raising `ValueError` when it cannot take
        the import (the command passes `run.runner.report_inputs`: the report it refreshes afterwards must
        be buildable). Run from above: this stage does not import the runner.

    Raises
    ------
    ValueError
        For a log `read_log` refuses, one that names no run folder when `run_dir` is None, one none of
        whose samples is a question of the folder's bank, or a folder whose ``run.json`` or bank is damaged.
    FileNotFoundError
        When a log or the run folder does not exist.
    """
    banks: dict[Path, dict[tuple[str, str], tuple[bool, str]]] = {}
    frames: dict[Path, list[pd.DataFrame]] = {}
    notes: dict[Path, list[str]] = {}
    seen: dict[str, tuple[Path, Path]] = {}
    for given in logs:
        path = Path(given)
        if not path.is_file():  # a folder, a FIFO (whose open would wait for ever), a device
            raise FileNotFoundError(f"{path}: no such log file")
        digest = _digest(path)
        if digest in seen:
            first, folder = seen[digest]
            notes[folder].append(f"{path}: the same content as {first}, skipped")
            continue
        read = read_log(path)
        named = Path(run_dir) if run_dir is not None else read.run
        if named is None:
            raise ValueError(f"{path}: the log names no run folder (task argument run); give one (--run)")
        folder = named
        if folder not in banks:
            banks[folder] = _check_folder(folder, check_run)
            frames[folder], notes[folder] = [], []
        seen[digest] = (path, folder)
        ours = _of_bank(read, banks[folder])
        if not ours.any():
            raise ValueError(
                f"{path}: none of its {read.samples} samples is a question of {folder}'s exam bank ({BANK_FILE}): "
                f"the log was built from another run ({read.run or 'it names none'}); import it into that run folder"
            )
        skipped = Counter(read.skipped)
        if (~ours).any():
            skipped[FOREIGN] += int((~ours).sum())
        if skipped:
            notes[folder].append(
                f"{path}: {sum(skipped.values())} of {read.samples} samples skipped: {_counts(skipped)}"
            )
        if read.cut:
            notes[folder].append(
                f"{path}: {read.cut} answers over {MAX_ANSWER_CHARS:,} characters cut (kept with a marker; graded whole)"
            )
        frames[folder].append(read.rows[ours])
    tables = {folder: _merged(folder, parts, notes[folder]) for folder, parts in frames.items()}
    for folder, table in tables.items():  # written only when every log and folder passed
        runfolder.save_table(table, folder, TABLE)  # atomic
    return {folder: Imported(len(table), tuple(notes[folder])) for folder, table in tables.items()}


def _merged(folder: Path, parts: list[pd.DataFrame], notes: list[str]) -> pd.DataFrame:
    """Return the folder's table with the new rows: a log imported again replaces its rows, a duplicate is dropped.

    A sample x epoch of one eval (`SAMPLE_KEY`) counts once, whichever log holds it (a copy, a converted log):
    the first read stays (an earlier import, then the logs in the order given); how many were dropped joins
    `notes`. Two evals of one model are two sets of draws: ``draw`` numbers a question's answers across them.
    """
    new = pd.concat(parts, ignore_index=True)
    read = len(new)
    try:
        old = runfolder.maybe_table(folder, TABLE)
        if old is not None:
            if "epoch" not in old.columns:  # a table imported before epochs were kept: each eval's draw was its epoch
                old = old.assign(epoch=old["draw"] + 1)
            if "sample_uuid" not in old.columns:
                old = old.assign(sample_uuid="")
            old = old[~old["eval_id"].isin(set(new["eval_id"]))][list(COLUMNS)]
    except (ValueError, KeyError, OSError) as exc:  # pyarrow's errors are ValueErrors
        path = runfolder.table_path(folder, TABLE)
        raise ValueError(f"{path}: not readable ({_first_line(exc)}); move it away to import afresh") from None
    if old is not None and len(old):
        new = pd.concat([old, new], ignore_index=True)
        read += len(old)
    new = new.drop_duplicates(list(SAMPLE_KEY))
    named = new["sample_uuid"].astype(bool)
    new = new[~named | ~new["sample_uuid"].duplicated()].reset_index(drop=True)
    dropped = read - len(new)
    if dropped:
        notes.append(
            f"{dropped} duplicate sample{'s' if dropped != 1 else ''} dropped: the same eval, sample and epoch "
            "as a row read already (a copy of a log, or an earlier import)"
        )
    # Each eval's epochs are that model's draws of a question; two evals of one model are more draws, numbered
    # on after each other in the order read (an earlier import first), never merged into one.
    first_seen = {e: i for i, e in enumerate(dict.fromkeys(new["eval_id"]))}
    rank = new["eval_id"].map(first_seen) * (MAX_EPOCH + 1) + new["epoch"]
    new = new.assign(draw=rank.groupby([new[k] for k in QUESTION_KEY]).rank(method="dense").astype("int64") - 1)
    return new


def summary_lines(run_dir: str | Path) -> list[str]:
    """One line per reader x arm of a run folder's ``exam_inspect`` table: recall, its interval, draws, consistency.

    Over the real questions (decoys apart, as the closed book's recall and `exam.imported.readers_table`).

    The interval is `exam.statistics.power.hierarchical_interval` over the sessions (questions nested in them, draws
    in the questions) when the questions were mined from real sessions (``unit`` ``session``), else over
    the questions.
    """
    rows = runfolder.load_table(Path(run_dir), TABLE)
    real = rows[~rows["decoy"].astype(bool)]  # recall is over real questions; a decoy is right only by abstaining
    table = power.draw_recall_table(real, by=("reader_label", "strategy"), cluster=cluster_of(real))
    return [
        f"{r.reader_label}  {r.strategy:<28} {r.correct:>5} right of {r.n_questions} questions x {r.draws:g} "
        f"draws = {r.recall:6.1%} [{r.ci_low:.1%}, {r.ci_high:.1%}]; all draws agree on {r.consistent:.0%} "
        "of the questions"
        for r in table.itertuples()
    ]
