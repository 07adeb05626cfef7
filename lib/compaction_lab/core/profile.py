"""A run profile and a notebook's outcome: the types every stage may name (the runner makes them).

A profile is ``papermill_params/<name>.yaml`` read by `compaction_lab.run.runner.load_profile`; see
docs/running.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compaction_lab.core.errors import ProfileError

#: The profile parameter that switches redaction on (notebook 01 masks the sessions it imports).
REDACT_PARAM = "redact"


@dataclass(frozen=True)
class Profile:
    """A named set of notebooks and parameters for one run of the chain."""

    name: str
    description: str
    notebooks: tuple[str, ...]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notebook_parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    path: Path | None = None
    #: Parameters a ``run`` of this profile sweeps (the profile's ``sweeps:`` block), each with its values.
    sweeps: Mapping[str, list[Any]] = field(default_factory=dict)

    def parameters_for(self, notebook: str) -> dict[str, Any]:
        """Chain-wide parameters with this notebook's overrides applied."""
        return {**self.parameters, **(self.notebook_parameters.get(notebook) or {})}

    def with_parameters(self, overrides: Mapping[str, Any]) -> Profile:
        """Return the profile with chain-wide parameters overridden (``--set``); per-notebook ones lose to them."""
        if not overrides:
            return self
        if "run_dir" in overrides:
            raise ProfileError("run_dir is set by the runner, not by --set")
        per_nb = {
            nb: {k: v for k, v in (ps or {}).items() if k not in overrides}
            for nb, ps in self.notebook_parameters.items()
        }
        return replace(self, parameters={**self.parameters, **overrides}, notebook_parameters=per_nb)

    @property
    def redact(self) -> bool:
        """Whether this profile's runs are redacted for sharing (its ``redact`` parameter)."""
        return bool(self.parameters.get(REDACT_PARAM, False))


@dataclass(frozen=True)
class NotebookRun:
    """Outcome of one notebook in a run."""

    notebook: str
    output: Path
    html: Path | None
    seconds: float
    parameters: Mapping[str, Any]
    status: str  # ok | failed | interrupted
    html_seconds: float | None = None  # rendering its HTML (None: not rendered)
