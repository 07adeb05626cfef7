"""The ``model`` summarizer: each strategy's own summary request, sent to a real endpoint.

Any OpenAI-compatible chat endpoint (`endpoints.ModelConfig`). The request is the strategy's
`SummaryRequest` exactly (`SummaryRequest.to_openai`), so what the model sees is the production call
shape; every call goes through the ledger, so a rerun pays nothing twice.

One adaptation: a ``tool``-role message without a structured call's ``tool_call_id``, which chat
endpoints reject, is sent as a ``user`` message opening with ``[tool output]`` -- the same text, in
the same place. `wire_body` is what is sent and what the ledger fingerprints.

Failures (endpoint down, auth, timeouts after retries) raise `SummaryUnavailable`, so each strategy
does what it documents for a failed summary. An answer that came back normally but holds no text is
*not* a failure: `answer_text` returns it (``""`` for no text, a blank answer unstripped) for each
arm to read as its agent does; only no text with ``finish_reason == "length"`` stays
`SummaryUnavailable`, the failure Codex sees.

Design: docs/strategies.md#4-summary-requests-and-summarizers ("Summarizers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction_lab.core.projection import SummaryRequest
from compaction_lab.summarize.base import SUMMARIZERS, Summarizer, SummaryResult, SummaryUnavailable

#: Prefix of a tool output sent as a user message (see the module docstring).
TOOL_OUTPUT_PREFIX = "[tool output]\n"


def answer_text(content: Any) -> str:
    """Read the text of an answer's ``content`` by the module docstring's rule.

    ``None`` is ``""``; a list of content parts gives its text parts joined
    (``""`` when it has none); a blank string is kept as it is; any other
    string is stripped.
    """
    if isinstance(content, list):
        content = "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", "output_text")
        )
    text = str(content or "")
    return text.strip() or text


def wire_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as an endpoint accepts them: tool messages without a call id become user messages."""
    out = []
    for m in messages:
        if m.get("role") == "tool" and not m.get("tool_call_id"):
            out.append({"role": "user", "content": TOOL_OUTPUT_PREFIX + str(m.get("content") or "")})
        else:
            out.append(dict(m))
    return out


def wire_body(request: SummaryRequest) -> dict[str, Any]:
    """Build the chat-completions body sent for `request` (without ``model``; the client adds it)."""
    body = request.to_openai()
    body["messages"] = wire_messages(body["messages"])
    return body


class ModelSummarizer:
    """Summaries written by a model (not a stand-in); the label names the model.

    Parameters
    ----------
    config : endpoints.ModelConfig
    client : endpoints.ChatClient, optional
        Shared client (its ledger and concurrency limit); made from `config` if None.
    """

    stand_in = False

    def __init__(self, config: Any, client: Any = None):
        from compaction_lab.endpoints.shared import config_of, get_client

        config = config_of(config)
        self.config = config
        self.model = config.model  # part of a checkpoint's key (checkpoints.checkpoint_params)
        self.name = f"model: {config.model}"
        self._client = client or get_client(config)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Send the request to the endpoint and return its text (`answer_text`) with the usage billed.

        Raises
        ------
        SummaryUnavailable
            On a provider error, or an answer with no text cut at the output
            limit (``finish_reason == "length"``; see the module docstring).
        """
        from compaction_lab.endpoints.client import ProviderError

        try:
            c = self._client.complete(
                wire_body(request), purpose=f"summary:{request.strategy}", shape_fingerprint=request.shape_fingerprint()
            )
        except ProviderError as exc:
            raise SummaryUnavailable(f"{self.name}: {exc}") from exc
        text = answer_text(c.message.get("content"))
        if not text and c.finish_reason == "length":
            raise SummaryUnavailable(f"{self.name}: no text before the output limit (finish_reason=length)")
        return SummaryResult(text, c.usage.prompt_tokens, c.usage.cached_tokens, c.usage.completion_tokens)


@SUMMARIZERS.register("model", rank=30)
def _model(model: Any = None) -> Summarizer:
    """Build the model-backed summarizer for the endpoint `model` (a ``ModelConfig`` or mapping)."""
    return ModelSummarizer(model)
