"""The dry run's stand-in endpoint: what a model client answers with when a run is only being planned.

`compaction_lab.run.plan` runs a profile's notebooks with `core.paths.DRY_RUN_ENV` set to a
folder. In that state every `ChatClient` (`compaction_lab.endpoints.client`)
talks to `stand_in_client` instead of its endpoint -- the HTTP library's own
``MockTransport``, so nothing leaves the machine and no key is needed -- and
every ledger opened is the folder's copy (`compaction_lab.store.ledger.open_ledger`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Reply length when a request sets no ``max_tokens``.
DEFAULT_REPLY_TOKENS = 256

#: Tokens each chat message adds to a prompt beyond its text (role and separators; OpenAI's rule of thumb).
MESSAGE_OVERHEAD_TOKENS = 4

#: One token of stand-in text in cl100k_base (" x" is a single token).
_STAND_IN_TOKEN = " x"

#: Fingerprints of requests a dry run found answered in the ledger, one per line, in the dry run's folder.
REUSED_FILE = "reused.txt"


def note_reused(folder: Path, fingerprint: str) -> None:
    """Record, in a dry run, a request answered from the ledger (kernels are processes: a file collects them)."""
    # One short line per write in append mode: lines from several processes never interleave.
    with open(folder / REUSED_FILE, "a", encoding="ascii") as fh:
        fh.write(fingerprint + "\n")


def reused_fingerprints(folder: Path) -> set[str]:
    """Request fingerprints a dry run found answered in the ledger (earlier in the dry run, or before it)."""
    path = folder / REUSED_FILE
    return set(path.read_text(encoding="ascii").split()) if path.exists() else set()


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    from compaction_lab.core.tokens import count_tokens

    total = 0
    for message in body.get("messages") or []:
        content = message.get("content") or ""
        text = content if isinstance(content, str) else json.dumps(content)
        if message.get("tool_calls"):
            text += json.dumps(message["tool_calls"])
        total += count_tokens(text) + MESSAGE_OVERHEAD_TOKENS
    if body.get("tools"):
        total += count_tokens(json.dumps(body["tools"]))
    return total


def stand_in_reply(body: Mapping[str, Any]) -> dict[str, Any]:
    """Answer one request body as the stand-in endpoint does (a chat completion).

    A reply of exactly the request's ``max_tokens`` tokens with no tool call,
    and usage as a provider would report it (prompt tokens counted with the
    report tokenizer, no cache hits).
    """
    n = int(body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_REPLY_TOKENS)
    prompt = _prompt_tokens(body)
    return {
        "id": "dry-run",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "")),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ("(dry run)" + _STAND_IN_TOKEN * n).strip()},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n},
    }


def _http_library() -> Any:
    """Import the HTTP library the installed ``openai`` client uses (``httpx2`` from openai 3, ``httpx`` before)."""
    import importlib

    import openai

    base = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client" and c is not object)
    return importlib.import_module(base.__module__.split(".")[0])


def stand_in_client() -> Any:
    """Make an HTTP client for ``openai.OpenAI(http_client=...)`` whose transport answers with `stand_in_reply`.

    The transport is the HTTP library's own ``MockTransport``: a chat completion
    gets a stand-in reply, anything else a 404 naming the path (a dry run asks
    nothing else; an unexpected request is a bug, said loudly).
    """
    import openai

    http = _http_library()

    def handle(request: Any) -> Any:
        if request.method == "POST" and request.url.path.endswith("/chat/completions"):
            return http.Response(200, json=stand_in_reply(json.loads(request.content or b"{}")))
        return http.Response(404, json={"error": {"message": f"dry run: no stand-in for {request.url.path}"}})

    return openai.DefaultHttpxClient(transport=http.MockTransport(handle))


__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "REUSED_FILE",
    "note_reused",
    "reused_fingerprints",
    "stand_in_client",
    "stand_in_reply",
]
