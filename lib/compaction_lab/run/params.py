"""The one check of a run's parameters: a profile's, with its ``--set`` / ``--sweep`` values.

A parameter that makes a run meaningless -- a window no larger than the output
ceiling, zero chains, an unknown strategy, a value of the wrong type -- is an
error naming the parameter, the value and what is allowed, before any work
starts: before a run folder exists and before notebook 01 imports anything.
Every problem is found and all are reported together, in one `ProfileError`.

What each parameter may hold is the rules table (`compaction_lab.run.parameter_rules`);
this module applies it: types against each notebook's ``parameters`` cell
(`declared_parameters`), ranges and names (`RULES`), meaning (the window
against the output ceiling for every strategy that runs, `window_problems`;
sizes against each other and across notebooks), unknown keys (an error unless
``allow_unknown``), storage (`paths.check_writable_folder`,
`paths.check_sqlite_file`), a sweep's values (`sweep_values`) and a profile
file's layout (`layout_problems`). Each check and what it says:
docs/running.md (Parameters, and how they fail).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import yaml

from compaction_lab.core import paths, python_source, user_yaml
from compaction_lab.core.errors import ProfileError
from compaction_lab.core.profile import Profile
from compaction_lab.privacy import secrets as _secrets  # noqa: F401  (masks every ProfileError: core.errors)
from compaction_lab.privacy.secrets import looks_secret_name
from compaction_lab.run.parameter_rules import (
    DEFAULT_MAX_SWEEP_RUNS,
    MAX_SWEEP_RUNS_CEILING,
    MAX_SWEEP_VALUES,
    PROFILE_KEYS,
    RULES,
    RUN_DIR,
    RUNNER_PARAMETERS,
    Rule,
    echo,
    known_strategies,
    quoted,
)

_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "text",
    "list": "a list",
    "dict": "a mapping",
}


def looks_secret(key: str) -> bool:
    """Whether a parameter name looks like it holds a credential (``openai_api_key``, ``token``).

    ``*_env`` (the NAME of a variable) and ``*_tokens`` (a size) are not secrets: `looks_secret_name`'s
    ``"parameter"`` rule.
    """
    return looks_secret_name(key, "parameter")


def secret_problem(key: str) -> str:
    """Word the problem of a secret-looking parameter (the value is never echoed)."""
    return (
        f"parameter {key!r} looks like a secret: secrets come from environment variables only "
        "(pass the variable's name, e.g. api_key_env: OPENAI_API_KEY)"
    )


# --------------------------------------------------------------------------- what the notebooks declare


@dataclass(frozen=True)
class Declared:
    """One parameter of a notebook's ``parameters`` cell.

    Attributes
    ----------
    name : str
    type : str or None
        ``int``, ``float``, ``bool``, ``str``, ``list`` or ``dict``; None when
        not annotated (or annotated with something else): any value goes.
    nullable : bool
        Whether ``None`` is allowed (the annotation or the default says so).
    default : Any
        The default, when it is a literal (`has_default`).
    has_default : bool
    """

    name: str
    type: str | None
    nullable: bool
    default: Any = None
    has_default: bool = False


_TYPE_NAMES = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "list": "list",
    "dict": "dict",
    "List": "list",
    "Dict": "dict",
    "Sequence": "list",
    "Mapping": "dict",
}


def _declared(name: str, type_name: str | None, default_text: str | None) -> Declared:
    parts = [p for p in re.split(r"[\s|\[\],.]+", type_name or "") if p]
    base = next((_TYPE_NAMES[p] for p in parts if p in _TYPE_NAMES), None)
    try:
        default, has_default = python_source.literal(default_text or ""), True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        default, has_default = None, False
    nullable = "None" in parts or "Optional" in parts or (has_default and default is None)
    return Declared(name, base, nullable, default, has_default)


@lru_cache(maxsize=64)
def _inspect(path: str, mtime_ns: int) -> Mapping[str, Declared]:
    import papermill as pm

    return {
        k: _declared(k, v.get("inferred_type_name"), v.get("default")) for k, v in pm.inspect_notebook(path).items()
    }


def declared_parameters(notebook: str) -> Mapping[str, Declared]:
    """Read the parameters a chain notebook declares (`Declared` by name) from its ``parameters`` cell."""
    path = paths.notebook_path(notebook)
    return _inspect(str(path), path.stat().st_mtime_ns)


def _has_type(value: Any, type_name: str | None) -> bool:
    if type_name is None:
        return True
    if type_name == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if type_name == "bool":
        return isinstance(value, bool)
    if type_name == "str":
        return isinstance(value, str)
    if type_name == "list":
        return isinstance(value, (list, tuple))
    if type_name == "dict":
        return isinstance(value, Mapping)
    return True


def _rule_problem(label: str, value: Any, rule: Rule) -> str | None:
    """Say what is wrong with a value of the right type under its `Rule` (None: nothing)."""
    shown = quoted(value)
    if rule.blank and value == "":
        return None
    if rule.minimum is not None and isinstance(value, (int, float)) and value < rule.minimum:
        return f"{label} = {shown}: must be >= {rule.minimum:,}"
    if isinstance(value, (list, tuple)):
        if rule.nonempty and not value:
            return f"{label} = []: give at least one value"
        if rule.item is not None:
            bad = [v for v in value if not _has_type(v, rule.item)]
            if bad:
                return f"{label} = {shown}: every item must be {_TYPE_WORDS[rule.item]} (not {echo(bad[0])})"
        if rule.item_minimum is not None:
            low = [v for v in value if v < rule.item_minimum]
            if low:
                return f"{label} = {shown}: every item must be >= {rule.item_minimum:,} (not {low[0]!r})"
    if rule.choices is not None:
        allowed = list(rule.choices())
        given = list(value) if isinstance(value, (list, tuple)) else [value]
        unknown = [v for v in given if v not in allowed]
        if unknown:
            near = difflib.get_close_matches(str(unknown[0]), allowed, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return f"{label} = {shown}: unknown {echo(unknown[0])}{hint}; allowed: {', '.join(allowed)}" + (
                ' or ""' if rule.blank else ""
            )
    if rule.check is not None:
        problem = rule.check(value)
        if problem:
            return f"{label} = {shown}: {problem}"
    return None


# --------------------------------------------------------------------------- the window against the output ceiling


@lru_cache(maxsize=1024)
def strategy_capacity(strategy: str, window: int, output_ceiling: int) -> int:
    """Return the tokens a strategy lets its projection hold for window W and output ceiling O.

    This is the strategy's own ``Projection.capacity`` (`strategies.trigger`:
    FutureOS's effective trigger ``min(0.8 W, W - O - margin)``, Codex's 90% of
    W, OpenCode's usable input, ``W - O`` for the baselines), read by
    projecting an empty session: no formula is restated here, and a strategy
    added later is covered too.

    Raises
    ------
    ValueError
        Unknown strategy; a window below 1 (FutureOS's trigger refuses it).
    """
    from compaction_lab.core.session import Session
    from compaction_lab.strategies import CompactionContext, compact

    empty = Session(id="capacity-probe", source_format="probe", records=())
    return compact(empty, strategy, 0, CompactionContext(window=window, output_ceiling=output_ceiling)).capacity


def window_problems(
    window: Any,
    output_ceiling: Any,
    strategy_names: Iterable[str],
    *,
    names: tuple[str, str] = ("window", "output_ceiling"),
) -> list[str]:
    """List what makes a window W and output ceiling O meaningless for these strategies (empty: nothing).

    W and O must be integers >= 1 and W > O (otherwise the model's reply alone
    fills the window and every arm scores 0); then every strategy's usable
    capacity (`strategy_capacity`) must be positive -- FutureOS also keeps a
    margin, so it needs ``W > O + min(2048, W // 16)``.

    Parameters
    ----------
    window, output_ceiling : int
    strategy_names : names of the strategies that will run (unknown ones are reported)
    names : how to name W and O in messages (``("--window", "--output-ceiling")`` on a command line)
    """
    w_name, o_name = names
    out = [
        f"{label} = {echo(v)}: must be an integer >= 1"
        for label, v in ((w_name, window), (o_name, output_ceiling))
        if not _has_type(v, "int") or v < 1
    ]
    if out:
        return out
    if window <= output_ceiling:
        return [
            f"{w_name} = {window:,} must exceed {o_name} = {output_ceiling:,}: the reply the model may write "
            "would fill the window, so no strategy could keep anything (every arm would score 0)"
        ]
    known = set(known_strategies())
    for name in dict.fromkeys(strategy_names):
        if name not in known:
            out.append(f"unknown strategy {name!r}; allowed: {', '.join(known_strategies())}")
            continue
        cap = strategy_capacity(name, window, output_ceiling)
        if cap <= 0:
            out.append(
                f"{w_name} = {window:,} with {o_name} = {output_ceiling:,} leaves strategy {name!r} no room "
                f"(its usable capacity is {cap:,} tokens): raise {w_name} or lower {o_name}"
            )
    return out


# --------------------------------------------------------------------------- the profile file itself


#: ``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)``: Python's range, stop excluded.
_RANGE = re.compile(r"^\s*range\(\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?(?:,\s*(-?\d+)\s*)?\)\s*$")
#: Most digits a range's bound may have: Python reads no longer integer from text (``sys.get_int_max_str_digits``).
_RANGE_DIGITS = 4_300


def _range_text(raw: str) -> str:
    """``range(...)`` text as a message echoes it: cut short past 80 characters (a bound may have thousands)."""
    text = raw.strip()
    return text if len(text) <= 80 else text[:76] + "…)"


def _counted(n: int) -> str:
    """``1,234`` -- or, for a count too long to print (Python's int-to-text limit), ``more than 10^k``."""
    if n < 10**30:
        return f"{n:,}"
    return f"more than 10^{(n.bit_length() - 1) * 30103 // 100000}"


def _sweep_range(key: str, raw: str) -> range | None:
    """``range(...)`` text as a (lazy) range; None for other text. ValueError for step 0 or a malformed range.

    Its values are counted, without ``len`` (an OverflowError past ``sys.maxsize``), against
    `MAX_SWEEP_VALUES` before the range is made.
    """
    m = _RANGE.match(raw)
    if not m:
        if raw.strip().startswith("range("):
            raise ValueError(
                f"sweep {key}: {_range_text(raw)!r} is not range(stop), range(start, stop) or range(start, stop, step)"
            )
        return None
    text = _range_text(raw)
    given = [g for g in m.groups() if g is not None]
    longest = max(len(g.lstrip("-")) for g in given)
    if longest > _RANGE_DIGITS:
        raise ValueError(
            f"sweep {key}: range(...) with a bound of {longest:,} digits; a bound has at most {_RANGE_DIGITS:,}"
        )
    bounds = [int(g) for g in given]
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds[:2], bounds[2] if len(bounds) == 3 else 1)
    if step == 0:
        raise ValueError(f"sweep {key}: {text} has step 0")
    whole, part = divmod(stop - start, step)
    count = max(0, whole + (part != 0))
    if count > MAX_SWEEP_VALUES:
        raise ValueError(
            f"sweep {key}: {text} gives {_counted(count)} values, more than a sweep may take "
            f"({MAX_SWEEP_VALUES:,} per parameter; the runs in all are limited by max_sweep_runs, "
            f"default {DEFAULT_MAX_SWEEP_RUNS:,}, at most {MAX_SWEEP_RUNS_CEILING:,})"
        )
    return range(start, stop, step)


def _yaml_values(key: str, raw: str) -> tuple[list[Any], list[str]]:
    """``v1,v2,...`` or ``[v1, v2]``: the values, and the text each was written as (for messages)."""
    text = raw if raw.lstrip().startswith("[") else f"[{raw}]"
    try:
        values = user_yaml.loads(text, f"sweep {key}")  # a profile's text: no aliases, bounded nesting
        node = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"sweep {key}: values {raw!r} are not valid YAML: {exc}") from exc
    if not isinstance(values, list):
        raise ValueError(f"sweep {key}: expected a list of values, got {_kind(values)}")
    items = node.value if isinstance(node, yaml.SequenceNode) else []
    if len(items) != len(values):  # anchors and the like: the parsed values speak for themselves
        return values, [echo(v) for v in values]
    return values, [text[n.start_mark.index : n.end_mark.index] for n in items]


def _same_run(value: Any) -> tuple[str, Any]:
    """Return what a run receives from a value: 1, 01, 0x1, +1 and 1.0 are one; true and 1, "1" and 1 are not."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", value)  # 1 == 1.0 and hash(1) == hash(1.0)
    return ("data", json.dumps(value, sort_keys=True, default=str))


def _duplicates(key: str, values: list[Any], texts: list[str]) -> str | None:
    """Word the message for values equal after parsing (None: all distinct); `texts` shows each value as given."""
    groups: dict[tuple[str, Any], list[int]] = {}
    for i, v in enumerate(values):
        groups.setdefault(_same_run(v), []).append(i)
    said = []
    for idx in (ix for ix in groups.values() if len(ix) > 1):
        written = [texts[i] for i in idx]
        listed = f"{', '.join(written[:-1])} and {written[-1]}"
        said.append(f"{listed} {'both' if len(idx) == 2 else 'all'} read as {echo(values[idx[0]])}")
    if not said:
        return None
    return f"sweep {key}: {'; '.join(said)}, so the same run would be planned more than once; give each value once"


def sweep_values(key: str, raw: Any) -> list[Any]:
    """Parse the values a swept parameter takes, from ``--sweep key=...`` or a profile's ``sweeps:`` block.

    Values equal after parsing are one value, and giving one twice is an error
    naming them: ``seed=7,7`` or ``seed=1,01,0x1,+1`` (YAML reads all four as 1)
    would plan identical runs, and whoever typed them most likely meant other
    values. Equal means what a run receives: ``16000`` and ``16000.0`` are
    equal; ``true`` and ``1``, ``"1"`` and ``1`` are not (the checks then judge
    each value's type).

    Parameters
    ----------
    key : str
        The swept parameter (named in errors).
    raw : str or list
        A YAML list (``[16000, 24000]``), ``v1,v2,...`` (each value read as YAML),
        or ``range(1,11)`` / ``range(0,100,10)`` -- Python's range, the stop excluded,
        so ``seed=range(1,11)`` sweeps seeds 1 to 10.

    Raises
    ------
    ValueError
        No values, a range with step 0 or no values, text that is not YAML,
        duplicate values, or more than `MAX_SWEEP_VALUES` values (counted
        before a range is listed); the message names `key`.
    """
    if isinstance(raw, list):
        values, texts = list(raw), [echo(v) for v in raw]
    elif isinstance(raw, str):
        rng = _sweep_range(key, raw)
        if rng is not None:
            if not rng:
                raise ValueError(f"sweep {key}: {_range_text(raw)} gives no values")
            return list(rng)  # distinct: a range never repeats itself
        values, written = _yaml_values(key, raw)
        texts = [repr(t) for t in written]  # '01', '0x1': the text typed, which is what a user recognises
    else:
        raise ValueError(f"sweep {key}: expected a list, 'v1,v2,...' or 'range(a,b)', got {_kind(raw)}")
    if not values:
        raise ValueError(f"sweep {key}: give at least one value")
    if len(values) > MAX_SWEEP_VALUES:
        raise ValueError(
            f"sweep {key}: {len(values):,} values, more than a sweep may take ({MAX_SWEEP_VALUES:,} per parameter)"
        )
    dup = _duplicates(key, values, texts)
    if dup:
        raise ValueError(dup)
    return values


_KINDS = {
    list: "a list",
    tuple: "a list",
    str: "text",
    int: "a number",
    float: "a number",
    bool: "true/false",
    dict: "a mapping",
    type(None): "null",
}


def _kind(value: Any) -> str:
    return f"{_KINDS.get(type(value), type(value).__name__)} {echo(value)}"


def layout_problems(data: Mapping[Any, Any], available: Sequence[str]) -> list[str]:
    """Every problem with the shape of a profile file's top-level mapping (empty: none).

    Each names the key and the type expected; a string is never read as a
    list of notebooks, nor a list as a mapping of parameters.

    Parameters
    ----------
    data : mapping
        The profile file as YAML read it.
    available : sequence of str
        The chain's notebooks (`report.chain_notebooks`).
    """
    out: list[str] = []
    unknown = sorted(str(k) for k in data if k not in PROFILE_KEYS)
    if unknown:
        out.append(f"unknown keys {unknown}; a profile holds {', '.join(PROFILE_KEYS)}")
    desc = data.get("description")
    if desc is not None and not isinstance(desc, str):
        out.append(f"description: expected text, got {_kind(desc)}")
    notebooks = data.get("notebooks")
    names: list[str] = list(available)
    if notebooks is not None:
        if not isinstance(notebooks, list):
            hint = f" (write notebooks: [{notebooks}])" if isinstance(notebooks, str) else ""
            out.append(f"notebooks: expected a list of notebook names, got {_kind(notebooks)}{hint}")
        elif not notebooks:
            out.append("notebooks: the list is empty; leave the key out to run every notebook")
        else:
            names = [n for n in notebooks if isinstance(n, str)]
            odd = [n for n in notebooks if not isinstance(n, str)]
            if odd:
                out.append(f"notebooks: expected notebook names, got {_kind(odd[0])}")
            missing = [n for n in names if n not in available]
            if missing:
                out.append(f"notebooks not found in {paths.NOTEBOOKS_DIR}: {missing}")
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                out.append(f"notebooks: listed twice: {twice} (a run executes each notebook once)")
    mappings = [("parameters", data.get("parameters"))]
    per_nb = data.get("notebook_parameters")
    if per_nb is not None and not isinstance(per_nb, dict):
        out.append(f"notebook_parameters: expected a mapping of notebook: {{name: value}}, got {_kind(per_nb)}")
    elif per_nb:
        outside = [n for n in per_nb if n not in names]
        if outside:
            out.append(f"notebook_parameters for notebooks not in the profile: {outside}")
        mappings += [(f"notebook_parameters.{nb}", ps) for nb, ps in per_nb.items()]
    for where, ps in mappings:
        if ps is None:
            continue
        if not isinstance(ps, dict):
            out.append(f"{where}: expected a mapping of name: value, got {_kind(ps)}")
            continue
        odd_keys = [k for k in ps if not isinstance(k, str)]
        if odd_keys:
            out.append(f"{where}: parameter names must be text, got {_kind(odd_keys[0])}")
        if RUN_DIR in ps:
            out.append(f"{where}: run_dir is set by the runner, not by a profile")
    sweeps = data.get("sweeps")
    if sweeps is not None:
        if not isinstance(sweeps, dict):
            out.append(f"sweeps: expected a mapping of parameter: values, got {_kind(sweeps)}")
        else:
            for key, raw in sweeps.items():
                if not isinstance(key, str):
                    out.append(f"sweeps: parameter names must be text, got {_kind(key)}")
                    continue
                if key == RUN_DIR:
                    out.append("sweeps: run_dir is set by the runner, not swept")
                    continue
                try:
                    sweep_values(key, raw)
                except ValueError as exc:
                    out.append(f"sweeps.{key}: {exc}")
    return out


# --------------------------------------------------------------------------- the check


def _normalise_session_paths(value: Any) -> Any:
    """Make one path a one-item list, and a relative path absolute against the folder the run was started from.

    Each notebook runs inside its run folder, where a relative path would point nowhere; ``~`` paths and
    anything that is not a path are left for the import and the checks to judge.
    """
    if isinstance(value, (str, Path)):
        value = [str(value)]
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        return [
            str(Path.cwd() / p)
            if isinstance(p, str) and p.strip() and not p.startswith("~") and not Path(p).is_absolute()
            else p
            for p in value
        ]
    return value


def _session_paths_problem(label: str, value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        return f"{label} = {echo(value)}: expected a path or a list of paths"
    if not any(p.strip() for p in value):
        return (
            f"{label} = {echo(value)}: an empty list would silently run synthetic chains instead of "
            "your sessions; list at least one file or folder (to run synthetic chains, leave session_paths out)"
        )
    return None


@dataclass(frozen=True)
class _Scope:
    """Where a value was given: chain-wide (``parameters``) or for one notebook."""

    notebook: str | None

    def label(self, key: str) -> str:
        return key if self.notebook is None else f"notebook_parameters.{self.notebook}.{key}"


def _given(profile: Any) -> list[tuple[_Scope, str, Any]]:
    out = [(_Scope(None), k, v) for k, v in profile.parameters.items()]
    for nb, ps in profile.notebook_parameters.items():
        out += [(_Scope(nb), k, v) for k, v in (ps or {}).items()]
    return out


def _effective(profile: Any, notebook: str, declared: Mapping[str, Declared]) -> dict[str, Any]:
    """Return what the notebook will run with: its literal defaults, then the profile's values."""
    eff = {k: d.default for k, d in declared.items() if d.has_default}
    eff.update({k: v for k, v in profile.parameters_for(notebook).items() if k in declared})
    return eff


def _strategies_run(eff: Mapping[str, Any], declared: Mapping[str, Declared]) -> list[str]:
    if "strategy_names" in declared:
        return list(eff.get("strategy_names") or known_strategies())
    if "strategy" in declared and isinstance(eff.get("strategy"), str):
        return [eff["strategy"]]
    return list(known_strategies())


def _notebook_problems(nb: str, eff: Mapping[str, Any], declared: Mapping[str, Declared], bad: set[str]) -> list[str]:
    """Weigh one notebook's parameters against each other; return the problems found."""
    out: list[str] = []

    def ok(*keys: str) -> bool:
        return all(k in eff and k not in bad for k in keys)

    if ok("window", "output_ceiling") and not bad & {"strategy_names", "strategy"}:
        out += window_problems(eff["window"], eff["output_ceiling"], _strategies_run(eff, declared))
    if ok("n_questions", "n_decoys") and eff["n_decoys"] > eff["n_questions"]:
        out.append(
            f"n_decoys = {eff['n_decoys']} exceeds n_questions = {eff['n_questions']} "
            "(decoys are counted among the questions)"
        )
    if ok("n_questions") or ok("probe_n_questions"):
        # Past a sane maximum the bank would build what the sessions allow and say so; refused here instead.
        from compaction_lab.exam.questions.bank import MAX_QUESTIONS_PER_CASE, questions_limit_problem

        if ok("n_questions", "n_cases") and eff["n_questions"] > MAX_QUESTIONS_PER_CASE * max(1, eff["n_cases"]):
            out.append(questions_limit_problem("n_questions", eff["n_questions"], eff["n_cases"]))
        if ok("probe_n_questions") and eff["probe_n_questions"] > MAX_QUESTIONS_PER_CASE:
            out.append(questions_limit_problem("probe_n_questions", eff["probe_n_questions"]))
    out += _figure_problems(eff, ok)
    if ok("turns", "simulated_turns", "turn_growth_tokens", "turn_output_tokens", "period"):
        from compaction_lab.cost.assumptions import CostAssumptions

        try:  # the cost model's own rule for carrying the per-turn cache pattern forward
            CostAssumptions(
                turns=eff["turns"],
                turn_growth_tokens=eff["turn_growth_tokens"],
                turn_output_tokens=eff["turn_output_tokens"],
                simulated_turns=eff["simulated_turns"],
                period=eff["period"],
            )
        except ValueError as exc:
            out.append(f"simulated_turns = {eff['simulated_turns']} with turns = {eff['turns']}: {exc}")
    if ok("fig8_windows", "fig8_output_ceilings") and min(eff["fig8_output_ceilings"]) >= max(eff["fig8_windows"]):
        out.append(
            f"fig8_output_ceilings = {list(eff['fig8_output_ceilings'])}: figure 8 draws only ceilings "
            f"below a window, and none is below fig8_windows = {list(eff['fig8_windows'])}"
        )
    if ok("draws", "reader") and eff["draws"] > 1 and eff["reader"] != "model":
        out.append(
            f"draws = {eff['draws']}: asking a question more than once needs reader = model; the "
            f"{eff['reader']!r} stand-in answers every draw alike"
        )
    out += _model_use_problems(eff, bad)
    return out


def _figure_problems(eff: Mapping[str, Any], ok: Callable[..., bool]) -> list[str]:
    """Check that figures 3, 5 and 6 would show rows: their table among those priced, priced under their rule."""
    from compaction_lab.cost.choice import AUTO

    table, sim = str(eff.get("figure_table")), str(eff.get("figure_simulator"))
    if ok("price_tables", "figure_table") and table != AUTO and table not in eff["price_tables"]:
        return [
            f"figure_table = {table!r}: not among price_tables {list(eff['price_tables'])}, "
            "so figures 3, 5 and 6 would be empty"
        ]
    if not ok("price_tables", "figure_table", "simulators", "figure_simulator") or sim == AUTO:
        return []
    if table == AUTO:  # the table is read off the sessions at run time: only `none` and listed rules are sure
        priced = list(eff["simulators"])
        if sim in (priced or ["none"]):
            return []
        return [
            f"figure_simulator = {sim!r} with figure_table = 'auto': the table the sessions pick is priced "
            f"under {priced or 'its own rule and none'} only, so figures 3, 5 and 6 would be empty unless "
            "its rule is this one; set figure_simulator: auto, or name figure_table, or list simulators"
        ]
    from compaction_lab.endpoints.prices import load_price_table

    priced = list(eff["simulators"]) or [load_price_table(table).cache_rule, "none"]
    if sim not in priced:
        return [
            f"figure_simulator = {sim!r}: figure_table {table!r} is "
            f"priced under {priced} only, so figures 3, 5 and 6 would be empty"
        ]
    return []


def _model_use_problems(eff: Mapping[str, Any], bad: set[str]) -> list[str]:
    """Check that a model asked for (summarizer or reader ``model``) has a model endpoint, a ledger and checkpoints."""
    users = [k for k in ("summarizer", "reader") if eff.get(k) == "model" and k not in bad]
    if not users or "model" in bad:
        return []
    model = eff.get("model") or {}
    if not model:
        return [
            f"{' and '.join(f'{u} = model' for u in users)} needs the `model` parameter "
            "(base_url, model, api_key_env, ...; see papermill_params/model.yaml)"
        ]
    from compaction_lab.endpoints.config import ModelConfig
    from compaction_lab.store.checkpoints import default_path as checkpoints_path

    cfg = ModelConfig.from_mapping(model)
    files = [("ledger", Path(cfg.ledger) if cfg.ledger else paths.ledger_path())]
    if "summarizer" in users:  # model-written summaries are checkpointed
        files.append(("checkpoint database", checkpoints_path()))
    out = []
    for what, path in files:
        try:
            paths.check_sqlite_file(path, what, create=True)
        except paths.StoragePathError as exc:
            out.append(str(exc))
    return out


def _chain_problems(profile: Any, effective: Mapping[str, Mapping[str, Any]], bad: set[str]) -> list[str]:
    """Weigh one notebook's parameters against another's; return the problems found."""
    from compaction_lab.exam.questions.bank import DEFAULT_CUT_FRACTIONS

    out: list[str] = []
    first = next((nb for nb in profile.notebooks if "n_chains" in effective[nb]), None)
    if first is not None and not effective[first].get("session_paths") and "n_chains" not in bad:
        n_chains = effective[first]["n_chains"]
        most = n_chains * len(DEFAULT_CUT_FRACTIONS)
        too_many: dict[int, list[str]] = {}
        for nb in profile.notebooks:
            n_cases = effective[nb].get("n_cases")
            if "n_cases" not in bad and isinstance(n_cases, int) and n_cases > most:
                too_many.setdefault(n_cases, []).append(nb)
        out += [
            f"n_cases = {n} ({', '.join(nbs)}): {n_chains} synthetic chains give at most {most} cases "
            f"({len(DEFAULT_CUT_FRACTIONS)} compaction points each); raise n_chains or lower n_cases"
            for n, nbs in too_many.items()
        ]
    priced = next((effective[nb]["price_tables"] for nb in profile.notebooks if "price_tables" in effective[nb]), None)
    unpriced: dict[str, list[str]] = {}  # one line per table, naming every notebook that reads it
    for nb in profile.notebooks:
        table = effective[nb].get("price_table")
        if (
            priced is not None
            and table
            and "price_table" not in bad
            and "price_tables" not in bad
            and table not in priced
        ):
            unpriced.setdefault(table, []).append(nb)
    out += [
        f"price_table = {table!r} for {', '.join(nbs)}: not among price_tables {list(priced or ())}, which the cost "
        "notebook prices"
        for table, nbs in unpriced.items()
    ]
    return out


def problems(profile: Any, *, allow_unknown: bool = False, results_folder: str | Path | None = None) -> list[str]:
    """Every problem with a profile's parameters (see the module docstring); empty when it can run.

    Parameters
    ----------
    profile : report.Profile
        With overrides already applied (`Profile.with_parameters`).
    allow_unknown : bool
        Let parameters no notebook declares through (``--allow-unknown``).
    results_folder : path, optional
        The folder that will receive the run folder: checked writable.
    """
    profile = normalised(profile)
    declared = {nb: declared_parameters(nb) for nb in profile.notebooks}
    out: list[str] = []
    bad: set[str] = set()

    def flag(key: str, problem: str | None) -> None:
        if problem:
            out.append(problem)
            bad.add(key)

    for scope, key, value in _given(profile):
        label = scope.label(key)
        if scope.notebook is not None and scope.notebook not in declared:
            flag(key, f"{label}: notebook {scope.notebook} is not in the profile")
            continue
        takers = [scope.notebook] if scope.notebook else [nb for nb in profile.notebooks if key in declared[nb]]
        if key == RUN_DIR:
            flag(key, f"{label}: run_dir is set by the runner, not by a profile or --set")
            continue
        if looks_secret(key):
            flag(key, secret_problem(key))
            continue
        types = {nb: declared[nb][key] for nb in takers if key in declared[nb]}
        if not types and key not in RUNNER_PARAMETERS:
            if allow_unknown:
                continue
            if scope.notebook is None:
                where = "no notebook of the profile declares it and the runner does not use it"
                known = {k for d in declared.values() for k in d} | set(RUNNER_PARAMETERS)
            else:
                others = [nb for nb in profile.notebooks if key in declared[nb]]
                where = f"{scope.notebook} does not declare it" + (
                    f" ({', '.join(others)} does: give it there or chain-wide)" if others else ""
                )
                known = set(declared[scope.notebook])
            near = difflib.get_close_matches(key, sorted(known - {RUN_DIR, key}), n=1)
            flag(
                key,
                f"unknown parameter {label} = {quoted(value)}: {where}"
                + (f" (did you mean {near[0]!r}?)" if near else "")
                + "; pass --allow-unknown to run anyway",
            )
            continue
        if key == "session_paths":
            flag(key, _session_paths_problem(label, value))
            continue
        if not types:  # a runner parameter of a profile without the notebook that declares it
            types = {"the runner": Declared(key, RUNNER_PARAMETERS[key], False)}
        wrong = next(
            ((nb, d) for nb, d in types.items() if not (value is None and d.nullable) and not _has_type(value, d.type)),
            None,
        )
        if wrong is not None:
            nb, d = wrong
            want = _TYPE_WORDS.get(d.type or "", d.type)
            flag(
                key,
                f"{label} = {quoted(value)}: expected {want}"
                + (" or null" if d.nullable else "")
                + f" ({nb} declares {key}: {d.type})",
            )
            continue
        if value is not None and key in RULES:
            flag(key, _rule_problem(label, value, RULES[key]))

    effective = {nb: _effective(profile, nb, declared[nb]) for nb in profile.notebooks}
    for nb in profile.notebooks:
        out += _notebook_problems(nb, effective[nb], declared[nb], bad)
    out += _chain_problems(profile, effective, bad)
    if results_folder is not None:
        try:
            paths.check_writable_folder(results_folder, "results folder")
        except paths.StoragePathError as exc:
            out.append(str(exc))
    return list(dict.fromkeys(out))  # the same problem found for two notebooks is said once


P = TypeVar("P", bound="Profile")


def normalised(profile: P) -> P:
    """Return the profile with ``session_paths`` given as one path made a one-item list (wherever it is given)."""
    params = dict(profile.parameters)
    if "session_paths" in params:
        params["session_paths"] = _normalise_session_paths(params["session_paths"])
    per_nb = {
        nb: (
            {**ps, "session_paths": _normalise_session_paths(ps["session_paths"])}
            if isinstance(ps, Mapping) and "session_paths" in ps
            else ps
        )
        for nb, ps in profile.notebook_parameters.items()
    }
    return dataclasses.replace(profile, parameters=params, notebook_parameters=per_nb)


#: Problems one error lists; beyond them it says how many more (a file of 100,000 unknown keys is one screen).
MAX_LISTED = 50


def error(where: str, found: Sequence[str]) -> ProfileError:
    """One `ProfileError` listing every problem found in `where` (a profile, a file), up to `MAX_LISTED`."""
    if len(found) == 1:
        return ProfileError(f"{where}: {found[0]}")
    listed = "\n".join(f"  - {p}" for p in found[:MAX_LISTED])
    more = f"\n  … and {len(found) - MAX_LISTED} more" if len(found) > MAX_LISTED else ""
    return ProfileError(f"{where}: {len(found)} problems:\n{listed}{more}")


def checked(profile: P, *, allow_unknown: bool = False, results_folder: str | Path | None = None) -> P:
    """Return the profile, normalised (`normalised`), when its parameters can make a meaningful run.

    Raises
    ------
    ProfileError
        Listing every problem (`problems`), each naming the parameter, the
        value and what is allowed.
    """
    found = problems(profile, allow_unknown=allow_unknown, results_folder=results_folder)
    if found:
        raise error(f"profile {getattr(profile, 'name', '?')!r}", found)
    return normalised(profile)


__all__ = [
    "Declared",
    "ProfileError",
    "checked",
    "declared_parameters",
    "error",
    "layout_problems",
    "looks_secret",
    "normalised",
    "problems",
    "secret_problem",
    "strategy_capacity",
    "sweep_values",
    "window_problems",
]
