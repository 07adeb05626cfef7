"""One client per model configuration in a process, so every caller shares its ledger and concurrency limit."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_LOCK = threading.Lock()
_CLIENTS: dict[Any, Any] = {}


def config_of(model: Any) -> Any:
    """Make a `ModelConfig` from a config or a mapping (a notebook's ``model`` parameter)."""
    from compaction_lab.endpoints.config import ModelConfig

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, Mapping) and model:
        return ModelConfig.from_mapping(model)
    raise ValueError(
        "a model-backed provider or reader needs a model configuration: set the `model` parameter "
        "(base_url, model, api_key_env, ...; see papermill_params/model.yaml)"
    )


def get_client(model: Any) -> Any:
    """Return the process's `ChatClient` for this configuration (made once, with its ledger)."""
    from compaction_lab.endpoints.client import ChatClient
    from compaction_lab.store.ledger import open_ledger

    cfg = config_of(model)
    with _LOCK:
        client = _CLIENTS.get(cfg)
        if client is None:
            client = _CLIENTS[cfg] = ChatClient(cfg, open_ledger(cfg.ledger))
        return client


def forget() -> None:
    """Close and forget this process's clients (a kernel that moves to another run: `run.kernel.adopt_code`).

    A client keeps what it was made with (its ledger, ``COMPACTION_LAB_LEDGER`` when the configuration names
    none): the next run makes its own from its environment, as in a kernel of its own.
    """
    with _LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        client.close()
