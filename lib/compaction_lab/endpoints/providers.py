"""Providers: a named endpoint, model, key variable, price table and cache rule.

A provider is one YAML file in ``data/providers/`` (`paths.providers_dir`)::

    description: DeepSeek API (OpenAI format), deepseek-flash, ...
    model:                  # a `ModelConfig` mapping
      base_url: https://api.deepseek.com
      model: deepseek-flash
      api_key_env: DEEPSEEK_API_KEY   # the NAME of the variable; the key is never written
      price_table: deepseek-flash
    cache_rule: deepseek    # a name from `compaction_lab.cost.cache.SIMULATORS`
    source: where the base URL and model name were read

A run selects one with ``--set model=deepseek`` (the ``model`` parameter given
as a provider's name, `resolve_profile`) or ``--provider deepseek``
(`provider_overrides`: the model plus the figures' cache rule and price table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from compaction_lab.core import paths, user_yaml
from compaction_lab.core.errors import ProfileError
from compaction_lab.core.profile import Profile
from compaction_lab.endpoints.config import base_url_problem

#: The parameter that names the model endpoint (a mapping, or a provider's name before resolution).
MODEL_PARAM = "model"

_KEYS = frozenset({"description", "model", "cache_rule", "source"})


@dataclass(frozen=True)
class Provider:
    """One provider (``data/providers/<name>.yaml``).

    Attributes
    ----------
    name : str
        The file's stem (``deepseek``).
    description : str
    model : Mapping
        A `ModelConfig` mapping (base_url, model, api_key_env, price_table, ...).
    cache_rule : str or None
        The cache simulator that fits the endpoint (`cost.cache.SIMULATORS`).
    path : Path
        The YAML file.
    """

    name: str
    description: str
    model: Mapping[str, Any]
    cache_rule: str | None
    path: Path

    @property
    def price_table(self) -> str | None:
        """The price table the model mapping names (None: a local, free endpoint)."""
        table = self.model.get("price_table")
        return str(table) if table else None


def list_providers() -> list[str]:
    """Names of the providers in `paths.providers_dir`, sorted."""
    return sorted(p.stem for p in paths.providers_dir().glob("*.yaml"))


def load_provider(name: str) -> Provider:
    """Load the provider called `name`.

    Raises
    ------
    ProfileError
        (a `ValueError`) for an unknown name, listing the known providers; for a
        malformed file (not YAML, not a mapping, unknown keys, ``model`` not a
        mapping, a malformed ``base_url`` (`config.base_url_problem`),
        ``cache_rule`` not text), naming the file.
    """
    path = paths.providers_dir() / f"{name}.yaml"
    if not isinstance(name, str) or not name or "/" in name or not path.is_file():
        raise ProfileError(
            f"no provider {name!r} in {paths.providers_dir()}; known providers: {', '.join(list_providers()) or 'none'}"
        )
    try:
        data = user_yaml.load(path, "provider")
    except user_yaml.UserYamlError as exc:
        raise ProfileError(str(exc)) from None
    if not isinstance(data, dict):
        raise ProfileError(f"provider {path}: expected a mapping at top level")
    unknown = sorted(str(k) for k in data if k not in _KEYS)
    if unknown:
        raise ProfileError(f"provider {path}: unknown keys {unknown}; expected some of {sorted(_KEYS)}")
    model = data.get("model")
    if not isinstance(model, dict) or not model:
        raise ProfileError(f"provider {path}: `model` must be a mapping (base_url, model, api_key_env, ...)")
    url_problem = base_url_problem(model.get("base_url"))
    if url_problem:
        raise ProfileError(f"provider {path}: model.base_url {url_problem}")
    rule = data.get("cache_rule")
    if rule is not None and not isinstance(rule, str):
        raise ProfileError(f"provider {path}: `cache_rule` must be a cache rule's name or null")
    return Provider(
        name=path.stem,
        description=str(data.get("description") or "").strip(),
        model=dict(model),
        cache_rule=rule,
        path=path,
    )


def resolve_model_parameter(value: Any) -> Any:
    """Return the ``model`` parameter with a provider's name replaced by the provider's mapping.

    Parameters
    ----------
    value : Any
        A mapping (returned as is), a provider's name (``"deepseek"``), or
        anything else (returned as is, for the parameter check to judge).

    Returns
    -------
    dict or Any
        A fresh copy of the provider's ``model`` mapping for a name.

    Raises
    ------
    ProfileError
        For an unknown provider name, listing the known providers.
    """
    if isinstance(value, str) and value.strip():
        return dict(load_provider(value.strip()).model)
    return value


P = TypeVar("P", bound="Profile")


def resolve_profile(profile: P) -> P:
    """Return the profile with every ``model`` given as a provider's name (chain-wide or per notebook) resolved.

    Applied by the runner before the parameters are checked, so ``--set
    model=deepseek`` (or ``model: deepseek`` in a profile, or a swept
    ``model=deepseek,openai``) reaches the check, ``run.json`` and the
    notebooks as the provider's mapping.

    Raises
    ------
    ProfileError
        For an unknown provider name, listing the known providers.
    """
    params = dict(profile.parameters)
    if MODEL_PARAM in params:
        params[MODEL_PARAM] = resolve_model_parameter(params[MODEL_PARAM])
    per_nb = {
        nb: (
            {**ps, MODEL_PARAM: resolve_model_parameter(ps[MODEL_PARAM])}
            if isinstance(ps, Mapping) and MODEL_PARAM in ps
            else ps
        )
        for nb, ps in profile.notebook_parameters.items()
    }
    return dataclasses.replace(profile, parameters=params, notebook_parameters=per_nb)


def provider_overrides(name: str, declared: Collection[str] | None = None) -> dict[str, Any]:
    """Return the chain-wide overrides ``--provider NAME`` stands for.

    Parameters
    ----------
    name : str
        A provider's name.
    declared : collection of str, optional
        Parameters some notebook of the profile declares: ``figure_simulator``
        and ``figure_table`` are passed on only when declared (a profile
        without the cost notebook would reject them as unknown). None: both
        are passed on.

    Returns
    -------
    dict
        ``{"model": <the provider's mapping>}``, plus ``figure_simulator`` (the
        provider's cache rule) and ``figure_table`` (its price table) when the
        provider has them.

    Raises
    ------
    ProfileError
        For an unknown provider name, listing the known providers.
    """
    provider = load_provider(name)
    out: dict[str, Any] = {MODEL_PARAM: dict(provider.model)}
    extra = {"figure_simulator": provider.cache_rule, "figure_table": provider.price_table}
    for key, value in extra.items():
        if value and (declared is None or key in declared):
            out[key] = value
    return out


__all__ = [
    "MODEL_PARAM",
    "Provider",
    "list_providers",
    "load_provider",
    "provider_overrides",
    "resolve_model_parameter",
    "resolve_profile",
]
