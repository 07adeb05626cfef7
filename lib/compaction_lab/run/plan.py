"""What a run of a profile would send to its model, found before anything is spent (a dry run).

The only faithful count of a run's model calls is the run itself: which summaries are asked for
depends on every strategy's trigger on every case, and a summary already in the checkpoint store or
an answer already in the ledger is not asked again. So `plan_run` runs the profile's notebooks,
unchanged, with the client's HTTP transport replaced by a stand-in endpoint (`stand_in_client`):
nothing leaves the machine, no key is needed. It works on copies of the ledger and the checkpoint
store (SQLite's backup API; `DRY_RUN_ENV` points every kernel at them), so recorded answers are
reused as the real run would reuse them and no stand-in answer reaches the real stores; the calls
the dry run adds to the ledger copy are the planned calls (`Plan`).

This is ``doctor --dry-run``; by default the doctor plans from counts (`compaction_lab.run.estimate`),
held to this dry run by ``tests/run/test_doctor_counts.py``. `continuation_calls` counts the
continuation exam's next-action requests without running anything: one per case with a recorded
next action × arm, identical requests sent once.

What neither can know -- how often an open-book reader searches (`Plan.open_book_extra`), output
lengths (every reply at its ``max_tokens``), the provider's tokenizer, cache hits (priced as
misses) -- is listed in the design.

Design: docs/real-models.md#before-a-run-spends-compaction-lab-doctor.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from compaction_lab.core import processes
from compaction_lab.core.paths import DRY_RUN_ENV
from compaction_lab.endpoints.standin import reused_fingerprints
from compaction_lab.privacy.secrets import mask_url
from compaction_lab.run.chain import model_notebooks
from compaction_lab.store.checkpoints import CHECKPOINTS_ENV

#: Purpose of the open-book exam's first request per question (`compaction_lab.exam.readers.model`).
OPEN_BOOK_PURPOSE = "exam:open"

#: Purpose of the continuation exam's next-action requests (`compaction_lab.exam.actions.next_action.ACTION_PURPOSE`).
CONTINUATION_PURPOSE = "exam:continuation"


# --------------------------------------------------------------------------- the plan

#: The columns of `Plan.calls` that count calls or tokens.
_COUNTS = ("calls", "prompt_tokens", "output_tokens")


@dataclass(frozen=True)
class Plan:
    """The calls a run of a profile would make.

    Attributes
    ----------
    profile : str
    model : str
        The endpoint's model name.
    base_url : str
        As shown: its credentials masked (`mask_url`) on construction.
    calls : pandas.DataFrame
        One row per purpose (``summary:codex``, ``exam:closed``, ...):
        ``calls``, ``prompt_tokens``, ``output_tokens`` (at ``max_tokens``), ``cost`` (None: no price table).
        The three counts are made whole numbers on construction (a sum over the ledger's nullable
        columns comes back as floats).
    reused : int
        Requests already answered in the ledger before the dry run (free on the real run).
    open_book_extra : int
        More requests the open-book exam may make if its reader searches every allowed round.
    currency : str or None
        The price table's currency (None: no price table, cost not estimated).
    seconds : float
        How long the dry run took.
    """

    profile: str
    model: str
    base_url: str
    calls: pd.DataFrame
    reused: int
    open_book_extra: int
    currency: str | None
    seconds: float

    def __post_init__(self) -> None:
        """Mask the URL's credentials and make the counts whole numbers."""
        object.__setattr__(self, "base_url", mask_url(self.base_url))
        counts = [c for c in _COUNTS if c in self.calls.columns]
        if counts:
            calls = self.calls.copy()
            calls[counts] = calls[counts].fillna(0).round().astype("int64")
            object.__setattr__(self, "calls", calls)

    @property
    def total_calls(self) -> int:
        """Requests the run would send (open-book readers answering without searching)."""
        return int(self.calls["calls"].sum()) if len(self.calls) else 0

    @property
    def cost(self) -> float | None:
        """The planned calls priced: prompts in report tokens, every reply at its ``max_tokens``, no cache hits.

        None without a price table. Output is an upper bound; prompts are counted with the report
        tokenizer, so a provider whose tokenizer splits text finer bills somewhat more input.
        """
        if self.currency is None or not len(self.calls):
            return None if self.currency is None else 0.0
        return float(self.calls["cost"].sum())

    def describe(self) -> str:
        """Describe the plan in a few lines for the doctor's output."""
        lines = [f"planned model calls ({self.model} at {self.base_url}): {self.total_calls}"]
        if self.open_book_extra:
            lines[0] += (
                f" (up to {self.total_calls + self.open_book_extra} if the open-book reader searches every round)"
            )
        for row in self.calls.itertuples():
            lines.append(
                f"  {row.purpose:<32} {row.calls:>5} calls  {row.prompt_tokens:>10,} prompt tokens  "
                f"<= {row.output_tokens:>8,} output tokens"
            )
        if self.reused:
            lines.append(f"  already answered in the ledger (not paid again): {self.reused}")
        if self.cost is None:
            lines.append("  cost estimate: none (the model config names no price_table)")
        else:
            lines.append(
                f"  cost estimate: {self.cost:.4f} {self.currency} (prompts counted with the report tokenizer, "
                "every reply at its max_tokens, no cache hits)"
            )
        lines += self.method_lines()
        return "\n".join(lines)

    def method_lines(self) -> list[str]:
        """Return the lines that say how the plan was made (the last of `describe`)."""
        return [f"  (dry run against a stand-in endpoint: {self.seconds:.0f} s, nothing sent)"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``doctor --json``)."""
        return {
            "profile": self.profile,
            "method": "dry run",
            "model": self.model,
            "base_url": self.base_url,
            "total_calls": self.total_calls,
            "max_calls": self.total_calls + self.open_book_extra,
            "reused": self.reused,
            "cost_estimate": self.cost,
            "currency": self.currency,
            # Python ints and floats (not NumPy's), so the document is plain JSON.
            "by_purpose": json.loads(self.calls.to_json(orient="records")),
        }


def _copy_sqlite(src: Path, dst: Path) -> None:
    """Copy an SQLite file consistently (the backup API, safe while another process writes); nothing when absent."""
    if not src.is_file():
        return
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as source, sqlite3.connect(dst) as target:
        source.backup(target)


def planned_notebooks(prof: Any) -> tuple[str, ...]:
    """Return the profile's notebooks up to its last one that calls a model (the rest would call nothing).

    Parameters
    ----------
    prof : Profile
        A resolved profile (`compaction_lab.run.chain.model_notebooks` reads which notebooks call a model).

    Returns
    -------
    tuple of str
        Empty when no notebook calls a model.
    """
    calling = {nb for nb, _ in model_notebooks(prof)}
    last = max((i for i, nb in enumerate(prof.notebooks) if nb in calling), default=-1)
    return tuple(prof.notebooks[: last + 1])


def calls_by_purpose(rows: pd.DataFrame) -> pd.DataFrame:
    """Sum planned calls per purpose: ``calls``, ``prompt_tokens``, ``output_tokens``, ``cost`` (None: not priced).

    `rows`: one planned call each, with ``purpose``, ``prompt_tokens``, ``output_tokens`` and ``cost``.
    """
    return (
        rows.groupby("purpose", sort=True)
        .agg(
            calls=("purpose", "size"),
            prompt_tokens=("prompt_tokens", "sum"),
            output_tokens=("output_tokens", "sum"),
            cost=("cost", lambda s: None if s.isna().all() else float(s.sum())),
        )
        .reset_index()
    )


def plan_run(
    profile: Any, *, overrides: Mapping[str, Any] | None = None, progress: bool = True, launch: Any = None
) -> Plan | None:
    """Dry-run a profile against the stand-in endpoint and count what it would send.

    Parameters
    ----------
    profile : Profile or str
        A loaded profile, a name or a YAML path (providers resolved as a run resolves them).
    overrides : mapping, optional
        Chain-wide parameters (``--set``).
    progress : bool
        Show the notebooks' progress bars.
    launch : kernel.Launch, optional
        Kernels started before the call, as `runner.run_profile` takes them: moved into the dry run's
        environment first, as kernels it started would have it.

    Returns
    -------
    Plan, or None when the profile calls no model.

    Raises
    ------
    ProfileError
        When the profile cannot make a run (as `run_profile` would raise).
    NotebookFailed
        When a notebook fails in the dry run (it would fail in the real run too).
    """
    from compaction_lab.core import paths
    from compaction_lab.endpoints import providers, shared
    from compaction_lab.run import runner
    from compaction_lab.store import checkpoints
    from compaction_lab.store.ledger import open_ledger

    prof = runner.load_profile(profile) if isinstance(profile, (str, Path)) else profile
    prof = providers.resolve_profile(prof.with_parameters(dict(overrides or {})))
    notebooks = planned_notebooks(prof)
    if not notebooks:
        return None
    cfg = shared.config_of(prof.parameters["model"])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compaction-lab-plan-") as tmp:
        folder = Path(tmp)
        _copy_sqlite(Path(cfg.ledger) if cfg.ledger else paths.ledger_path(), folder / "ledger.sqlite")
        _copy_sqlite(checkpoints.default_path(), folder / "checkpoints.sqlite")
        with open_ledger(folder / "ledger.sqlite") as ledger:
            before = ledger.calls()
        with processes.environment({DRY_RUN_ENV: str(folder), CHECKPOINTS_ENV: str(folder / "checkpoints.sqlite")}):
            # The notebooks run in kernels started now, or started before and moved to it (`launch`): they
            # have this environment, and no client made earlier in this process or in them is used.
            runner.run_profile(
                replace(prof, notebooks=notebooks),
                results=folder / "results",
                progress=progress,
                render=False,
                launch=launch,
            )
        with open_ledger(folder / "ledger.sqlite") as ledger:
            after = ledger.calls()
        # Only answers recorded before the dry run are "already paid"; a request the dry run itself asked
        # twice is paid once by the real run too, and counted once among the planned calls.
        reused = len(reused_fingerprints(folder) & set(before["request_fingerprint"]))
    new = after[~after["id"].isin(before["id"])]
    new = new[new["status"] == "done"]
    calls = calls_by_purpose(new.rename(columns={"completion_tokens": "output_tokens"}))
    from compaction_lab.exam.readers.model import ModelReader

    n_open = int(calls.loc[calls["purpose"] == OPEN_BOOK_PURPOSE, "calls"].sum())
    currency = None
    if cfg.price_table:
        from compaction_lab.endpoints import prices

        currency = prices.load_price_table(cfg.price_table).currency
    return Plan(
        profile=prof.name,
        model=cfg.model,
        base_url=cfg.base_url,
        calls=calls,
        reused=reused,
        open_book_extra=n_open * ModelReader.max_tool_rounds,
        currency=currency,
        seconds=time.perf_counter() - started,
    )


def continuation_calls(source: Any, params: Any = None) -> int:
    """Count the next-action requests the continuation exam's model grade sends, without running anything.

    One request per case with at least one recorded next action × arm: the listed arms, and for a case of
    the recorded block (a compaction an agent logged) also the agent's own (``recorded``,
    `continuation.strategies_of`); none when the call shape offers no tool to call. The keys
    (`continuation.keys_for`) need no model: a summary is not part of them, so they are built with no
    summarizer whatever the profile's.

    Parameters
    ----------
    source : Path, str or Sources
        A run folder (its saved bank is reused; one is built and saved when missing, as notebook 03
        would) or sessions gathered in memory.
    params : ContinuationParams or mapping, optional
        The exam's parameters (arms, cases, ``continuation_k``); defaults otherwise.

    Returns
    -------
    int
        The requests a run with a model reader would make when none is answered yet. Identical requests
        are sent once (the ledger answers the second: two arms whose projections are the same), so the
        run may send fewer; the dry run (`plan_run`) counts exactly that, and what is already answered.
    """
    from compaction_lab import summarize
    from compaction_lab.exam.exams import continuation
    from compaction_lab.strategies.base import CompactionContext

    p = continuation.ContinuationParams.coerce(params)
    ctx = CompactionContext(
        window=p.window, output_ceiling=p.output_ceiling, summarizer=summarize.get_summarizer("none")
    )
    if not ctx.shape.tools:
        return 0
    keys = continuation.keys_for(source, p, ctx).keys
    return sum(len(continuation.strategies_of(k.block, p.names)) for k in keys if k.actions)


__all__ = [
    "CONTINUATION_PURPOSE",
    "OPEN_BOOK_PURPOSE",
    "Plan",
    "continuation_calls",
    "plan_run",
    "planned_notebooks",
]
