"""Where a run's sessions come from: the seeded synthetic chains, or the user's own logs.

A notebook calls `gather` once with its parameters; with no session paths it
generates the synthetic chains (the embedded default, offline), otherwise it
imports the paths (any supported format, files or directories). `save`
writes what was studied into the run folder so later notebooks read exactly
the same sessions.

Redaction never moves a number: a redacted run's stages read the sessions as
they were written (``sessions/``, private to the account until the run's final
sweep masks it), and what they write is masked by the run's one redactor
(`run_redactor`: the patterns notebook 01 was given, ``redaction.json``, and the
account names the sessions tell). See docs/architecture.md, "Redaction".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import bounded_json, excerpt, runfolder
from compaction_lab.core.session import Session
from compaction_lab.ingest import ImportAudit, load_sessions, synthetic
from compaction_lab.ingest.import_audit import os_reason
from compaction_lab.privacy import redactor as redactor_mod

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

#: What notebook 01 leaves in a redacted run folder: its ``redact_patterns`` (`save`, `run_redactor`).
REDACTION_FILE = "redaction.json"

#: An import's audit in the run folder: its counts (`save`, `load_audit`; the skips are ``import_skips.parquet``).
AUDIT_FILE = "import_audit.json"

#: The name run folders written before the audit was named so: still read when `AUDIT_FILE` is missing.
OLD_AUDIT_FILE = "import_report.json"


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
    audit : ImportAudit or None
        What an import read, produced and skipped, and why; None for synthetic chains.
    """

    sessions: tuple[Session, ...]
    kind: str
    chains: tuple = ()
    audit: ImportAudit | None = None


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
    redactor : privacy.redactor.Redactor, optional
        Masks every imported session in memory when it has patterns or
        literals. A run passes the always-on one (``redactor(False)``: values
        of secret environment variables), whether it is redacted or not: its
        stages compute on the sessions as written and its files are masked
        (`save` with ``redact``, the runner's final sweep), so redaction never
        moves a number.

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
    audit = ImportAudit()
    existing = []
    for p in paths:
        path = Path(p).expanduser()
        try:
            os.lstat(path)  # a link is judged by the import walk (dangling, looping), not here
        except FileNotFoundError:
            # A profile may list the usual places of several agents; a user has some, not all.
            audit.skip(path, None, "unreadable", "no such file or directory")
        except OSError as exc:  # a parent folder this account may not enter
            audit.skip(path, None, "unreadable", os_reason(exc))
        else:
            existing.append(path)
    it = load_sessions(existing, audit)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="import", unit="session")
    sessions = tuple(it)
    if not sessions:
        raise ValueError(f"no sessions imported from {paths}: {audit.summary()}")
    if redactor is not None and (redactor.enabled or redactor.literals):
        sessions = tuple(redactor.session(s) for s in sessions)
    return Sources(sessions, "imported", (), audit)


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


def save(
    sources: Sources,
    run_dir: Path,
    redact: bool = False,
    redact_patterns: str | Path | Sequence[Mapping] | None = None,
) -> Path:
    """Write the run's sessions (and facts or the import audit) into the run folder.

    Writes ``sessions/<session>.jsonl`` per session; for synthetic chains also
    ``sessions/facts.jsonl``; for imports the audit: `AUDIT_FILE` (counts) and
    ``import_skips.parquet`` (kept skips).

    Parameters
    ----------
    sources : Sources
    run_dir : path
    redact : bool
        The run is redacted: the sessions are written as they are (the stages compute on them) into a
        folder only this account may read (0700, files 0600), each file named after its masked id, and
        ``redaction.json`` records `redact_patterns` for the run's later readers (`run_redactor`); the
        run's final sweep masks them all. False: a ``redaction.json`` left by an earlier run is removed.
    redact_patterns : path or list of mappings, optional
        Extra patterns (`privacy.patterns.load_patterns`); read now, so a bad file fails here.
    """
    out = runfolder.sessions_dir(run_dir)
    marker = Path(run_dir) / REDACTION_FILE
    red = None
    if redact:
        red = redactor_mod.redactor(True, redact_patterns or None).learn(sources.sessions)
        os.chmod(out, 0o700)
        marker.write_text(
            json.dumps({"redact": True, "redact_patterns": _as_json(redact_patterns)}, indent=2) + "\n",
            encoding="utf-8",
        )
    else:
        marker.unlink(missing_ok=True)
    if sources.kind == "synthetic":
        synthetic.write_chains(sources.chains, out)
    else:
        names: dict[str, str] = {}
        for s in sources.sessions:
            # A redacted run's file names are made of masked ids: the sweep masks what files hold, not their names.
            name = session_file(s.id if red is None else red.text(s.id))
            if names.setdefault(name, s.id) != s.id:  # only a hash collision could get here
                raise ValueError(f"sessions {names[name]!r} and {s.id!r} would share the file {name}")
            s.write_jsonl(out / name)
    if red is not None:
        for f in out.iterdir():
            if f.is_file() and not f.is_symlink():
                os.chmod(f, 0o600)
    if sources.audit is not None:
        audit = sources.audit
        (Path(run_dir) / AUDIT_FILE).write_text(
            json.dumps(
                {
                    "files": audit.files,
                    "sessions": audit.sessions,
                    "records": audit.records,
                    "formats": dict(audit.formats),
                    "skipped": audit.n_skipped,
                    "reasons": dict(audit.reasons),
                    "notes": dict(audit.notes),
                },
                indent=2,
                sort_keys=True,
            )
            + "\n",
            encoding="utf-8",
        )
        (Path(run_dir) / OLD_AUDIT_FILE).unlink(missing_ok=True)  # a rerun in an old folder leaves one audit
        runfolder.save_table(audit.to_frame(), run_dir, "import_skips")
    return out


def load_audit(run_dir: Path) -> dict[str, Any] | None:
    """Return the counts of the import audit `save` wrote into a run folder, or None when the run imported nothing.

    Reads `AUDIT_FILE`, or `OLD_AUDIT_FILE` when it is missing, so a run folder written before the
    rename still opens.

    Parameters
    ----------
    run_dir : path
        The run folder.

    Returns
    -------
    dict or None
        ``files``, ``sessions``, ``records``, ``formats``, ``skipped``, ``reasons``, ``notes``; None for a
        synthetic run (no audit file under either name).

    Raises
    ------
    ValueError
        When the file is not a JSON object, or cannot be read (the message names it).
    """
    for name in (AUDIT_FILE, OLD_AUDIT_FILE):
        path = Path(run_dir) / name
        try:
            found = bounded_json.load_file(path)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read the import audit ({exc})") from None
        if not isinstance(found, dict):
            raise ValueError(f"{path}: the import audit is not a JSON object")
        return found
    return None


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


def session_headers(run_dir: Path) -> tuple[Session, ...]:
    """Read what each saved session says about itself (id, source path, metadata; no records), in name order.

    What `privacy.redactor.Redactor.learn` reads: the first line of each ``sessions/*.jsonl``
    (`Session.to_jsonl`'s header), so learning costs no record. Empty when the folder holds none.
    """
    folder = Path(run_dir) / runfolder.SESSIONS
    if not folder.is_dir():
        return ()
    heads = []
    for p in sorted(folder.glob("*.jsonl")):
        if p.name == "facts.jsonl" or p.is_symlink() or not p.is_file():
            continue
        with open(p, "rb") as fh:
            first = fh.readline()
        try:
            heads.append(Session.from_lines([first]))
        except (ValueError, KeyError, TypeError):  # not a session file: nothing to learn from it
            continue
    return tuple(heads)


def run_redactor(run_dir: Path) -> redactor_mod.Redactor | None:
    """Return the redactor of a redacted run folder, or None when its sessions were saved unredacted.

    Its patterns are those notebook 01 was given (``redaction.json``, `save`), the names it learns are
    those every saved session tells (`session_headers`), so what a later stage writes -- a figure's PNG,
    which no sweep can rewrite -- is masked as the final sweep masks every other file. A pattern file
    that can no longer be read (moved, or its path masked by a finished run's sweep) gives the built-in
    patterns.
    """
    marker = Path(run_dir) / REDACTION_FILE
    if not marker.is_file():
        return None
    try:
        doc = bounded_json.load_file(marker)
    except (OSError, ValueError):
        doc = {}
    extra = doc.get("redact_patterns") if isinstance(doc, dict) else None
    try:
        red = redactor_mod.redactor(True, extra or None)
    except (OSError, ValueError):
        red = redactor_mod.redactor(True, None)
    return red.learn(session_headers(run_dir))


def _as_json(value: Any) -> Any:
    """`value` as JSON holds it: a path as its text, a list of mappings as it is."""
    if value is None or value == "":
        return None
    if isinstance(value, (str, os.PathLike)):
        return str(value)
    return [dict(v) for v in value]


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
    if sources.audit is not None:
        return f"Imported: {sources.audit.summary()}"
    return f"Synthetic: {len(sources.chains)} seeded chains (offline generator)."


__all__ = [
    "AUDIT_FILE",
    "OLD_AUDIT_FILE",
    "REDACTION_FILE",
    "Sources",
    "describe",
    "gather",
    "load_audit",
    "load_saved",
    "run_redactor",
    "save",
    "session_file",
    "session_headers",
    "summary",
]
