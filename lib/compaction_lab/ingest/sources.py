"""Where a run's sessions come from: the seeded synthetic chains, or the user's own logs.

A notebook calls `gather` once with its parameters; with no session paths it
generates the synthetic chains (the embedded default, offline), otherwise it
imports the paths (any supported format, files or directories). `save`
writes what was studied into the run folder so later notebooks read exactly
the same sessions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from compaction_lab.core import excerpt, runfolder
from compaction_lab.core.session import Session
from compaction_lab.ingest import ImportReport, load_sessions, synthetic
from compaction_lab.ingest.import_report import os_reason

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Sources:
    """The sessions of a run and how they were obtained.

    Attributes
    ----------
    sessions : tuple of Session
    kind : str
        ``synthetic`` or ``imported``.
    chains : tuple of SyntheticChain
        The synthetic chains (facts and decoys included); empty when imported.
    report : ImportReport or None
        Counts and skips of an import; None for synthetic chains.
    """

    sessions: tuple[Session, ...]
    kind: str
    chains: tuple = ()
    report: ImportReport | None = None


def gather(
    session_paths: Sequence[str] | str | None = None,
    profile: synthetic.SyntheticSpec | None = None,
    progress: bool = True,
    redactor=None,
) -> Sources:
    """Import `session_paths`, or generate the synthetic chains of `profile` when there are none.

    Parameters
    ----------
    session_paths : path or list of paths, optional
        Files or directories of real sessions (``~`` is expanded).
    profile : SyntheticSpec, optional
        Generator parameters used when no paths are given (default profile if None).
    progress : bool
        Progress bars.
    redactor : redact.Redactor, optional
        Masks secrets and personal data in every imported session before
        anything is computed from it or saved (``redact.redactor``); sessions
        are left untouched when it has nothing to mask.

    Raises
    ------
    ValueError
        When paths were given but no session could be imported from them.
    """
    paths = [session_paths] if isinstance(session_paths, (str, Path)) else list(session_paths or [])
    paths = [str(p) for p in paths if str(p).strip()]
    if not paths:
        spec = profile or synthetic.SyntheticSpec()
        # The chains are a pure function of the generator's parameters: a sweep's runs that share them
        # (a window swept over the same seeds) generate them once (`store.memo`, kept by the parameters).
        from compaction_lab.store import memo

        chains = memo.remembered(
            "chains", memo.key("chains", repr(spec)), lambda: synthetic.generate_chains(spec, progress=progress)
        )
        return Sources(tuple(c.session for c in chains), "synthetic", tuple(chains), None)
    report = ImportReport()
    existing = []
    for p in paths:
        path = Path(p).expanduser()
        try:
            os.lstat(path)  # a link is judged by the import walk (dangling, looping), not here
        except FileNotFoundError:
            # A profile may list the usual places of several agents; a user has some, not all.
            report.skip(path, None, "unreadable", "no such file or directory")
        except OSError as exc:  # a parent folder this account may not enter
            report.skip(path, None, "unreadable", os_reason(exc))
        else:
            existing.append(path)
    it = load_sessions(existing, report)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="import", unit="session")
    sessions = tuple(it)
    if not sessions:
        raise ValueError(f"no sessions imported from {paths}: {report.summary()}")
    if redactor is not None and (redactor.enabled or redactor.literals):
        sessions = tuple(redactor.session(s) for s in sessions)
    return Sources(sessions, "imported", (), report)


#: Session ids kept as their own file name: lower case (so that case-insensitive file
#: systems cannot merge two ids), no leading dot, short.
_PLAIN_NAME = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,119}")
#: Names the run folder uses for something else (``sessions/facts.jsonl``).
RESERVED_NAMES = frozenset({"facts"})


def session_file(session_id: str) -> str:
    """Name a session id's file, filesystem-safe and distinct for distinct ids.

    An id that is already a plain lower-case name is its own file name
    (``0195c1de-....jsonl``). Any other id (``/``, ``:``, spaces, capitals,
    over 120 characters, a reserved name such as ``facts``) is made safe and
    suffixed with ``~`` and a hash of the whole id: ``~`` never occurs in a
    plain name, so ``a b``, ``a:b`` and ``a_b`` get three different files
    (``a_b~….jsonl``, ``a_b~….jsonl``, ``a_b.jsonl``). The id itself is read
    back from the file's content, never from its name.
    """
    if _PLAIN_NAME.fullmatch(session_id) and session_id not in RESERVED_NAMES:
        return f"{session_id}.jsonl"
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return f"{_UNSAFE.sub('_', session_id)[:80]}~{digest}.jsonl"


def save(sources: Sources, run_dir: Path) -> Path:
    """Write the run's sessions (and facts or the import report) into the run folder.

    Writes ``sessions/<session>.jsonl`` per session; for synthetic chains also
    ``sessions/facts.jsonl``; for imports ``import_report.json`` and
    ``import_skips.parquet``.
    """
    out = runfolder.sessions_dir(run_dir)
    if sources.kind == "synthetic":
        synthetic.write_chains(sources.chains, out)
    else:
        names: dict[str, str] = {}
        for s in sources.sessions:
            name = session_file(s.id)
            if names.setdefault(name, s.id) != s.id:  # only a hash collision could get here
                raise ValueError(f"sessions {names[name]!r} and {s.id!r} would share the file {name}")
            s.write_jsonl(out / name)
    if sources.report is not None:
        rep = sources.report
        (Path(run_dir) / "import_report.json").write_text(
            json.dumps(
                {
                    "files": rep.files,
                    "sessions": rep.sessions,
                    "records": rep.records,
                    "formats": dict(rep.formats),
                    "skipped": rep.n_skipped,
                    "reasons": dict(rep.reasons),
                    "notes": dict(rep.notes),
                },
                indent=2,
                sort_keys=True,
            )
            + "\n",
            encoding="utf-8",
        )
        runfolder.save_table(rep.to_frame(), run_dir, "import_skips")
    return out


def load_saved(run_dir: Path, cap: int = excerpt.RECORD_CAP_CHARS, stage: str = "this notebook") -> tuple[Session, ...]:
    """Load the sessions an earlier notebook of this run wrote (``sessions/*.jsonl``), in name order, as stages do.

    Every stage after the tally reads them through here, so a record longer
    than `cap` characters comes back excerpted (`excerpt.excerpt_text`), with
    a note on stderr naming `stage` and the count (`excerpt.for_stage`); the
    files keep the full text.

    Raises
    ------
    FileNotFoundError
        When the run folder holds no sessions: notebook 01 has not run there.
    ValueError
        When `cap` is not a valid per-record cap (checked before anything is read).
    """
    excerpt.check_cap(cap)
    folder = Path(run_dir) / runfolder.SESSIONS
    files = sorted(p for p in folder.glob("*.jsonl") if p.name != "facts.jsonl") if folder.is_dir() else []
    if not files:
        raise FileNotFoundError(
            f"no sessions in {folder}: run notebook 01_context_composition into this run folder first"
        )
    # Each file read a line at a time and each record capped as it is read: a 50 MB record costs about
    # twice its size for a moment, not the whole file decoded, split and parsed at once (~5x).
    capper = excerpt.Capper(cap)
    return capper.excerpts(Session.read_jsonl(p, capper) for p in files).told(stage)


def summary(sources: Sources) -> pd.DataFrame:
    """One row per session: where it came from and its size (records, characters)."""
    if sources.kind == "synthetic":
        return synthetic.chains_summary(sources.chains)
    rows = [
        {
            "session_id": s.id,
            "source_format": s.source_format,
            "source_path": s.source_path,
            "records": len(s.records),
            "chars": s.chars,
            "model": s.metadata.get("model"),
        }
        for s in sources.sessions
    ]
    return pd.DataFrame(rows)


def describe(sources: Sources) -> str:
    """One line saying what was studied (and what an import skipped)."""
    if sources.report is not None:
        return f"Imported: {sources.report.summary()}"
    return f"Synthetic: {len(sources.chains)} seeded chains (offline generator)."


__all__ = ["Sources", "describe", "gather", "load_saved", "save", "session_file", "summary"]
