"""Canonical forms and their digests: the one way the suite serialises and hashes what it compares.

`canonical_json` is the byte form every fingerprint hashes (summary requests, model calls in the
ledger, checkpoint keys, manifests); `tools_text` is the form tool definitions take when a model
sees them (the strategies' estimates and the cost simulator count the same text); `shape_fingerprint`
names a call shape by its system prompt and tools.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def canonical_json(obj: Any, default: Callable[[Any], Any] | None = None) -> str:
    """Compact JSON with sorted keys and unescaped Unicode.

    Parameters
    ----------
    obj : any JSON-serialisable value
    default : callable, optional
        ``json.dumps``'s hook for values JSON does not know (checkpoint keys turn sets into sorted lists).

    Returns
    -------
    str
        The same text for equal values, whatever the order their keys were built in.
    """
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=default)


def sha256_text(text: str) -> str:
    """sha256 hex digest of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(obj: Any) -> str:
    """sha256 of an object's `canonical_json`."""
    return sha256_text(canonical_json(obj))


def tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """Tool definitions as the model sees them: indented canonical JSON, or ``""`` when there are none.

    The strategies size the ``tools`` segment of a projection with it and the cost simulator tokenizes
    it, so both count the same text.
    """
    # Not `canonical_json`: the one-space indent is the text every ``tools`` token count in the tables, and
    # every strategy's size decision, was made on; the compact form would change both.
    return json.dumps([dict(t) for t in tools], sort_keys=True, ensure_ascii=False, indent=1) if tools else ""


def shape_fingerprint(system_prompt: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """Return the sha256 of a call shape: its system prompt and tool definitions.

    `SummaryRequest.shape_fingerprint`, `capture` and checkpoint keys all name a shape by it.
    """
    return sha256_json({"system": system_prompt, "tools": [dict(t) for t in tools]})


__all__ = ["canonical_json", "sha256_json", "sha256_text", "shape_fingerprint", "tools_text"]
