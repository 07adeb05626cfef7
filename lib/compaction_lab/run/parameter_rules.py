"""What each run parameter may be: the rules table the parameter check (`run.params`) applies.

One place for what a parameter may hold beyond the type its notebook declares: minimums, list items
and names that must exist (`Rule`, `RULES`), the parameters the runner itself reads
(`RUNNER_PARAMETERS`), the keys a profile file holds (`PROFILE_KEYS`) and how many runs a sweep may
plan (`DEFAULT_MAX_SWEEP_RUNS`, `MAX_SWEEP_RUNS_CEILING`, `MAX_SWEEP_VALUES`). The checks that apply
them -- types, ranges, meaning, unknown keys, storage, sweeps, a profile file's layout -- are
`compaction_lab.run.params`. What each check says: docs/running.md (Parameters, and how they fail).

A name a rule checks against is read from its registry when a value is checked (strategies,
summarizers, readers, price tables, cache rules): a strategy or price table added later is covered.
"""

from __future__ import annotations

import difflib
import math
import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction_lab.core import bounded_json

#: Parameters the runner itself reads (`runner.run_profile`), whether or not a notebook declares them,
#: with their types: ``redact`` drives the final sweep, ``redact_patterns`` loads the sweep's patterns;
#: ``tokenizer`` and ``scheduler`` reach every notebook's kernel as ``COMPACTION_LAB_TOKENIZER`` /
#: ``COMPACTION_LAB_SCHEDULER`` (the token counter's backend, where heavy work runs; a sweep's runs too);
#: ``max_sweep_runs`` bounds how many runs a sweep may plan (`DEFAULT_MAX_SWEEP_RUNS`).
RUNNER_PARAMETERS: Mapping[str, str] = {
    "redact": "bool",
    "redact_patterns": "str",
    "tokenizer": "str",
    "scheduler": "str",
    "max_sweep_runs": "int",
}

#: Set by the runner for every notebook; never by a profile or ``--set``.
RUN_DIR = "run_dir"

#: Below this a synthetic chain is little more than its opening turn: 100 tokens give one record and no
#: planted fact, 500 the first three facts. A chain is grown to ``window_tokens`` report tokens.
MIN_WINDOW_TOKENS = 1_000

#: Longest echo of a value in a message. `reprlib` limits each level, so a nested value's echo grows with
#: the product of its levels (six levels of six items: 46,656 quoted); the whole echo is cut here.
MAX_SHOWN = 200


class _Shown(reprlib.Repr):
    """`reprlib.Repr` whose whole result is at most `MAX_SHOWN` characters."""

    def repr(self, x: Any) -> str:
        text = super().repr(x)
        return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


_show = _Shown()
_show.maxstring, _show.maxother, _show.maxlist, _show.maxdict, _show.maxlevel = 60, 60, 6, 6, 3


def quoted(value: Any) -> str:
    """Quote a parameter's value for a message: short, and with anything secret-looking masked.

    ``{api_key: hunter2}`` is quoted ``{'api_key': '***'}``: the value under a
    secret-looking key goes whatever it is, before `_show` could cut a key in two.
    """
    from compaction_lab.privacy.secrets import shown

    return _show.repr(shown(value))


def echo(value: Any) -> str:
    """Echo a value in a message as Python would write it, cut to `MAX_SHOWN` characters (nothing masked)."""
    return _show.repr(value)


# --------------------------------------------------------------------------- rules for known parameters


def known_strategies() -> Sequence[str]:
    """Return the names of the registered strategies (read when a value is checked)."""
    from compaction_lab import strategies

    return strategies.names()


def _simulators() -> Sequence[str]:
    from compaction_lab.cost.cache import SIMULATORS

    return SIMULATORS


def _periods() -> Sequence[str]:
    from compaction_lab.endpoints.prices import PERIODS

    return PERIODS


def _encoding_problem(name: str) -> str | None:
    from compaction_lab.core.tokens import EncodingUnavailable, check_encoding

    try:
        check_encoding(name)
    except EncodingUnavailable as exc:
        return str(exc)
    return None


def _summarizer_problem(name: str) -> str | None:
    # ``model`` needs the ``model`` mapping; it is checked with it (`_model_use_problems`). The offline
    # summarizers are made here for real: the library's own registry says which names exist.
    if name == "model":
        return None
    from compaction_lab import summarize

    try:
        summarize.get_summarizer(name)
    except ValueError as exc:
        return str(exc)
    return None


def _temperature_problem(value: Any) -> str | None:
    # -1: the model configuration's own temperature; OpenAI-compatible servers take 0 to 2.
    if value == -1 or (0 <= value <= 2):
        return None
    return f"must be from 0 to 2, or -1 for the model's own temperature (got {value!r})"


def _reader_problem(name: str) -> str | None:
    if name == "model":
        return None
    from compaction_lab.exam import readers

    try:
        readers.get_reader(name)
    except ValueError as exc:
        return str(exc)
    return None


def _price_table_problem(name: str) -> str | None:
    from compaction_lab.endpoints.prices import load_price_table

    try:
        load_price_table(name)
    except (LookupError, ValueError, OSError) as exc:
        return str(exc).strip("'\"")
    return None


def _figure_table_problem(name: str) -> str | None:
    from compaction_lab.cost.choice import AUTO

    return None if name == AUTO else _price_table_problem(name)


def _figure_simulator_problem(name: str) -> str | None:
    from compaction_lab.cost.choice import AUTO

    if name == AUTO or name in _simulators():
        return None
    near = difflib.get_close_matches(name, [AUTO, *_simulators()], n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown {name!r}{hint}; allowed: {AUTO}, {', '.join(_simulators())}"


def _price_tables_problem(names: list) -> str | None:
    found = [p for p in (_price_table_problem(n) for n in names if isinstance(n, str)) if p]
    return "; ".join(found) or None


def _pointer_mix_problem(mix: Mapping) -> str | None:
    from compaction_lab.exam.types import POINTERS

    unknown = sorted(str(k) for k in mix if k not in POINTERS)
    if unknown:
        return f"unknown pointers {unknown}; allowed: {', '.join(POINTERS)}"
    weights = list(mix.values())
    if (
        not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0 for w in weights
        )
        or sum(weights) <= 0
    ):
        return "weights must be numbers >= 0 with a positive sum"
    return None


def _probe_pointer_mix_problem(mix: Any) -> str | None:
    """``natural`` (the pool's own composition) or pointer weights (a mapping or its JSON text)."""
    if isinstance(mix, str):
        if mix.strip().lower() == "natural":
            return None
        try:
            mix = bounded_json.loads(mix)
        except ValueError:
            return f"{quoted(mix)} is neither 'natural' nor JSON pointer weights"
    if not isinstance(mix, Mapping):
        return 'expected \'natural\' or pointer weights such as {"assistant": 0.8, "user": 0.1, "tool": 0.1}'
    return _pointer_mix_problem(mix)


def _cut_modes() -> Sequence[str]:
    from compaction_lab.exam.questions.cuts import CUT_MODES

    return CUT_MODES


def _patterns_problem(path: str) -> str | None:
    if not path:
        return None
    from compaction_lab.privacy import patterns

    try:
        patterns.load_patterns(path)
    except OSError as exc:
        return f"cannot read the pattern file ({exc.strerror or exc})"
    except Exception as exc:
        return str(exc)
    return None


def _model_problem(model: Mapping) -> str | None:
    if not model:
        return None
    from compaction_lab.endpoints.config import ModelConfig

    try:
        cfg = ModelConfig.from_mapping(model)
    except (ValueError, TypeError) as exc:
        return str(exc)
    return _price_table_problem(cfg.price_table) if cfg.price_table else None


def _wordings_problem(wordings: list) -> str | None:
    if len(wordings) in (0, 3):
        return None
    return f"give three wordings (rounds 1-3), or none for the library's; got {len(wordings)}"


def max_sweep_runs_problem(value: Any) -> str | None:
    """Say what is wrong with a ``max_sweep_runs`` of the right type (None: nothing): past the hard ceiling."""
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SWEEP_RUNS_CEILING:
        return f"more than {MAX_SWEEP_RUNS_CEILING:,}, the most runs any sweep may plan (a ceiling no setting raises)"
    return None


@dataclass(frozen=True)
class Rule:
    """What a known parameter may hold beyond the type its notebook declares.

    Attributes
    ----------
    minimum : number, optional
        Smallest allowed value (numbers).
    choices : callable, optional
        Returns the allowed names (a registry, read when checked).
    blank : bool
        ``""`` is allowed too (the notebook's "use the default").
    item : str, optional
        Type of every list item (``int``, ``str``).
    item_minimum : number, optional
        Smallest allowed list item.
    nonempty : bool
        The list may not be empty.
    check : callable, optional
        ``check(value) -> problem or None`` for what the above cannot say.
    """

    minimum: float | None = None
    choices: Callable[[], Sequence[str]] | None = None
    blank: bool = False
    item: str | None = None
    item_minimum: float | None = None
    nonempty: bool = False
    check: Callable[[Any], str | None] | None = None


def _tokenizer_problem(name: str) -> str | None:
    from compaction_lab.core.tokens import TOKENIZERS

    return None if name in TOKENIZERS else f"allowed: {', '.join(TOKENIZERS)}"


def _scheduler_problem(value: str) -> str | None:
    from compaction_lab.engine.scheduler import POOL, SCHEDULER_CHOICES

    # A pool forks the process that opens it: a run's kernel (ipykernel's threads) or a sweep's command (its
    # kernels' threads) is no process to fork; the tally and import commands are.
    allowed = [c for c in SCHEDULER_CHOICES if c != POOL]
    if value in allowed or "://" in value:
        return None
    return f"allowed: {', '.join(allowed)} or a Dask scheduler address such as tcp://127.0.0.1:8786"


#: The known parameters of the chain (notebooks/0*.ipynb) and what each may hold.
RULES: Mapping[str, Rule] = {
    # 01: the sessions (``session_paths``: a path or a list of them, checked in `compaction_lab.run.params`)
    "seed": Rule(),
    "n_chains": Rule(minimum=1),
    "window_tokens": Rule(minimum=MIN_WINDOW_TOKENS),
    "decoys_per_chain": Rule(minimum=0),
    "encoding": Rule(check=_encoding_problem),
    "tokenizer": Rule(check=_tokenizer_problem),
    "scheduler": Rule(check=_scheduler_problem),
    "max_sweep_runs": Rule(minimum=1, check=max_sweep_runs_problem),
    "followup_min_score": Rule(minimum=0),
    "redact_patterns": Rule(check=_patterns_problem),
    # 02-05: the compaction
    "strategy_names": Rule(item="str", choices=known_strategies),
    "strategy": Rule(choices=known_strategies),
    "window": Rule(minimum=1),
    "output_ceiling": Rule(minimum=1),
    "summarizer": Rule(check=_summarizer_problem),
    "model": Rule(check=_model_problem),
    "fig8_windows": Rule(item="int", item_minimum=1, nonempty=True),
    "fig8_output_ceilings": Rule(item="int", item_minimum=0, nonempty=True),
    # 03, 05, 06: the exams
    "reader": Rule(check=_reader_problem),
    "n_cases": Rule(minimum=1),
    "n_questions": Rule(minimum=1),
    "n_decoys": Rule(minimum=0),
    "pointer_mix": Rule(check=_pointer_mix_problem),
    "tail_tokens": Rule(minimum=0),
    "bank_seed": Rule(),
    "probe_n_questions": Rule(minimum=1),
    "probe_n_decoys": Rule(minimum=0),
    "probe_pointer_mix": Rule(check=_probe_pointer_mix_problem),
    "probe_max_per_record": Rule(minimum=1),
    "cut": Rule(choices=_cut_modes),
    "n_boot": Rule(minimum=1),
    "stats_seed": Rule(),
    "draws": Rule(minimum=1),
    "reader_temperature": Rule(check=_temperature_problem),
    "wordings": Rule(item="str", check=_wordings_problem),
    "k": Rule(minimum=1),
    # 04: the cost model
    "price_tables": Rule(item="str", nonempty=True, check=_price_tables_problem),
    "simulators": Rule(item="str", choices=_simulators),
    "turns": Rule(minimum=0),
    "turn_growth_tokens": Rule(minimum=0),
    "turn_output_tokens": Rule(minimum=0),
    "simulated_turns": Rule(minimum=1),
    "period": Rule(choices=_periods),
    "cost_cases": Rule(minimum=1),
    "figure_table": Rule(check=_figure_table_problem),
    "figure_simulator": Rule(check=_figure_simulator_problem),
    # 06, 07: the price table and cache rule of the continuation exam and the shared report
    "price_table": Rule(blank=True, check=_price_table_problem),
    "simulator": Rule(blank=True, choices=_simulators),
}

# --------------------------------------------------------------------------- the profile file and sweeps

#: The keys a profile file holds.
PROFILE_KEYS: tuple[str, ...] = ("description", "notebooks", "parameters", "notebook_parameters", "sweeps")

#: How many runs a sweep may plan (the product of its value counts) unless ``max_sweep_runs`` says otherwise.
DEFAULT_MAX_SWEEP_RUNS = 1_000
#: The most runs any sweep may plan, whatever ``max_sweep_runs`` says: a hard ceiling that no profile,
#: ``--set`` or plan (``sweep.json``, on ``--resume``) raises. A plan is a list held in memory and a
#: folder per run; ten thousand runs of even the smoke chain are a day of one machine.
MAX_SWEEP_RUNS_CEILING = 10_000
#: No swept parameter takes more values than this, whatever ``max_sweep_runs`` allows -- more values than
#: a sweep may have runs could never run: a profile's ``sweeps:`` block is read as the profile loads,
#: before its limit is known, and a range is counted against this before it is listed
#: (``range(0,100000000)`` would otherwise take gigabytes first).
MAX_SWEEP_VALUES = MAX_SWEEP_RUNS_CEILING


__all__ = [
    "DEFAULT_MAX_SWEEP_RUNS",
    "MAX_SHOWN",
    "MAX_SWEEP_RUNS_CEILING",
    "MAX_SWEEP_VALUES",
    "MIN_WINDOW_TOKENS",
    "PROFILE_KEYS",
    "RULES",
    "RUNNER_PARAMETERS",
    "RUN_DIR",
    "Rule",
    "echo",
    "known_strategies",
    "max_sweep_runs_problem",
    "quoted",
]
