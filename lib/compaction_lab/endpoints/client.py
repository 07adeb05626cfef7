"""A chat-completions client for any OpenAI-compatible endpoint, with every call in the ledger.

`ChatClient.complete` sends one chat-completions body (the client adds the
config's model and temperature) and returns a `Completion`; every call is
recorded in the ledger (`compaction_lab.store.ledger`), and with ``reuse``
on a request already ``done`` is answered from it. Retries are left to the
``openai`` package; its final exception is mapped to `AuthError`,
`ProviderTimeout`, `EndpointUnreachable`, `RateLimited`, `BadResponse` or
`ProviderError`. The API key is sent only in the Authorization header, and
answers are masked (`mask_stored`) before they are read.

Design (retries and Retry-After, the API key, URL credentials):
docs/architecture.md#the-chat-client
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai

from compaction_lab.core import bounded_json, paths
from compaction_lab.core.fingerprints import sha256_json  # the form SummaryRequest.fingerprint hashes
from compaction_lab.core.usage import Usage
from compaction_lab.endpoints import prices as prices_mod
from compaction_lab.endpoints import standin
from compaction_lab.endpoints.config import ModelConfig
from compaction_lab.privacy.credentials import url_credentials
from compaction_lab.privacy.secrets import install_log_masking, mask_message, mask_stored, mask_url, register_secret
from compaction_lab.store.ledger import open_ledger

if TYPE_CHECKING:
    from compaction_lab.store.ledger import Ledger

log = logging.getLogger("compaction_lab.endpoints")

#: Seconds between two looks at the ledger while another process sends the same request.
CLAIM_POLL_S = 0.2

#: Placeholder key sent to servers that need none (``api_key_env: ""``); the openai package insists on one.
NO_KEY = "none"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Completion:
    """One chat completion.

    Parameters
    ----------
    message : dict
        ``{"role": "assistant", "content": str | None}`` plus ``tool_calls``
        (``[{"id", "type": "function", "function": {"name", "arguments"}}]``,
        arguments as a JSON string) only when the model called tools. Ready to
        append to the next request's messages (provider extras such as
        DeepSeek's ``reasoning_content`` are left out on purpose: DeepSeek
        rejects them in input; the full response is in the ledger).
    finish_reason : str or None
    usage : Usage
    latency_s : float
        Wall time of the HTTP exchange, retries included; for a reused
        response, the latency recorded when it was first made.
    request_fingerprint : str
        `request_fingerprint` of the body as sent (model included).
    from_ledger : bool
        True: reused from the ledger, no request made.
    """

    message: dict[str, Any]
    finish_reason: str | None
    usage: Usage
    latency_s: float
    request_fingerprint: str
    from_ledger: bool

    @property
    def content(self) -> str:
        """The message text ('' when the model only called tools)."""
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The message's tool calls ([] when none)."""
        return list(self.message.get("tool_calls") or [])


# --------------------------------------------------------------------------- errors


class ProviderError(RuntimeError):
    """A model call failed; ``status_code`` is the HTTP status when there was one."""

    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class AuthError(ProviderError):
    """No key, or the endpoint refused it (401/403): not retried. Names the variable, never its value."""


class EndpointUnreachable(ProviderError):
    """Connection refused, DNS failure, or the connection dropped, on every attempt."""


class RateLimited(ProviderError):
    """HTTP 429 still answered after every retry."""


class ProviderTimeout(ProviderError):
    """No answer within ``timeout_s`` on any attempt."""


class BadResponse(ProviderError):
    """The endpoint answered 200 with something that is not a chat completion."""


# --------------------------------------------------------------------------- pure helpers


def request_fingerprint(body: Mapping[str, Any], draw: int = 0) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of a full request body, model included.

    A later `draw` of the same body (the request asked again on purpose: `ChatClient.complete`) is
    another request: its index is hashed with the body. Draw 0 is the body alone, as before draws existed,
    so calls recorded then are still found.
    """
    if draw < 0:
        raise ValueError(f"draw must be 0 or more, got {draw}")
    return sha256_json(dict(body)) if draw == 0 else sha256_json({"body": dict(body), "draw": int(draw)})


def full_body(config: ModelConfig, body: Mapping[str, Any]) -> dict[str, Any]:
    """Build the body as sent: `body` plus the config's model, and its temperature unless `body` sets one.

    Raises
    ------
    ValueError
        If `body` has no ``messages`` list, names another model, or asks to stream.
    """
    if not isinstance(body, Mapping):
        raise ValueError(f"body must be a mapping, got {type(body).__name__}")
    if not isinstance(body.get("messages"), (list, tuple)) or not body["messages"]:
        raise ValueError("body needs a non-empty 'messages' list")
    if "model" in body and body["model"] != config.model:
        raise ValueError(
            f"body names model {body['model']!r} but the client is for {config.model!r}; "
            "leave 'model' out of the body (the client adds it)"
        )
    if body.get("stream"):
        raise ValueError("streaming is not supported: the ledger records whole responses")
    out = {k: v for k, v in body.items() if k != "model"}
    out["messages"] = [dict(m) for m in body["messages"]]
    out["model"] = config.model
    out.setdefault("temperature", config.temperature)
    return out


def _int(v: Any) -> int:
    try:
        return max(0, int(v or 0))
    except (TypeError, ValueError):
        return 0


def parse_usage(usage: Any) -> Usage:
    """`Usage` from a response's ``usage`` object (missing or odd fields read as 0)."""
    if not isinstance(usage, Mapping):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        cached_tokens=_int(cached),
        completion_tokens=_int(usage.get("completion_tokens")),
    )


def _tool_call(tc: Any, i: int) -> dict[str, Any]:
    if not isinstance(tc, Mapping) or not isinstance(tc.get("function"), Mapping):
        raise BadResponse(f"tool call {i} is not an object with a 'function'")
    fn = tc["function"]
    args = fn.get("arguments")
    # Some local servers return arguments as an object; the OpenAI shape (and the next request) wants a string.
    if args is None:
        args = "{}"
    elif not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return {
        "id": str(tc.get("id") or f"call_{i}"),
        "type": "function",
        "function": {"name": str(fn.get("name") or ""), "arguments": args},
    }


def parse_choice(response: Any) -> tuple[dict[str, Any], str | None]:
    """Read the assistant message (normalised, see `Completion.message`) and finish reason of a response.

    Raises
    ------
    BadResponse
        If the response is not an object with a non-empty ``choices`` list
        whose first element holds a ``message`` object.
    """
    if not isinstance(response, Mapping):
        raise BadResponse(f"response is a JSON {type(response).__name__}, not an object")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        err = response.get("error")
        hint = f" (it holds an error: {str(err)[:200]})" if err else ""
        raise BadResponse(f"response has no choices{hint}")
    first = choices[0]
    msg = first.get("message") if isinstance(first, Mapping) else None
    if not isinstance(msg, Mapping):
        raise BadResponse("response's first choice has no message")
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        content = str(content)
    out: dict[str, Any] = {"role": "assistant", "content": content}
    tool_calls = msg.get("tool_calls")
    if tool_calls:
        if not isinstance(tool_calls, list):
            raise BadResponse("message's tool_calls is not a list")
        out["tool_calls"] = [_tool_call(tc, i) for i, tc in enumerate(tool_calls)]
    finish = first.get("finish_reason")
    return out, None if finish is None else str(finish)


def price_usage(table: prices_mod.PriceTable, usage: Usage) -> float:
    """Price a call in the table's currency at off-peak prices, billed as `cost.model.Bill.cost` bills."""
    return prices_mod.price(
        table,
        input_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        output_tokens=usage.completion_tokens,
        period="off_peak",
    )


# --------------------------------------------------------------------------- the client


class ChatClient:
    """Calls one model on one OpenAI-compatible endpoint; thread-safe; records every call.

    Parameters
    ----------
    config : ModelConfig
    ledger : Ledger, optional
        Where calls are recorded; default ``open_ledger(config.ledger)``
        (closed by `close`; a ledger passed in is left open).
    environ : mapping, optional
        Where the key variable is read (default ``os.environ``).

    Raises
    ------
    AuthError
        If ``config.api_key_env`` names a variable that is unset or empty.
    UnknownPriceTable, ValueError
        If ``config.price_table`` names no valid table.
    """

    def __init__(self, config: ModelConfig, ledger: Ledger | None = None, environ: Mapping[str, str] | None = None):
        self.config = config
        self._url = mask_url(config.base_url.strip())  # the base URL as messages show it
        # The URL's credentials in every form (the Basic header's base64 too): masked wherever they come back.
        self._credentials = sorted(url_credentials(config.base_url.strip()))
        for form in self._credentials:
            register_secret(form)
        env = os.environ if environ is None else environ
        # A dry run (compaction_lab.run.plan) answers from a stand-in transport: nothing is sent, no key is needed.
        self._dry_run = paths.dry_run_folder()
        if config.api_key_env and self._dry_run is None:
            key = env.get(config.api_key_env) or ""
            if not key.strip():
                raise AuthError(
                    f"no API key for {self._url}: environment variable {config.api_key_env} is "
                    "not set (set it, or set api_key_env: '' for a server that needs no key)"
                )
            # Whatever the variable is called, its value is now masked by every store and message of this process.
            register_secret(key)
        else:
            key = NO_KEY
        install_log_masking()  # httpx logs every request's URL, credentials included
        # Loaded now so a wrong table name fails before any money is spent.
        self._table = prices_mod.load_price_table(config.price_table) if config.price_table else None
        self._owns_ledger = ledger is None
        self.ledger = open_ledger(config.ledger) if ledger is None else ledger
        # A killed earlier run may have left rows 'started'; say what happened to them.
        self.ledger.mark_abandoned()
        self._http = openai.OpenAI(
            api_key=key.strip(),
            base_url=config.base_url.strip(),
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            http_client=None if self._dry_run is None else standin.stand_in_client(),
        )
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}

    def __repr__(self) -> str:
        """Show the client by model, URL and key variable name (never the key)."""
        c = self.config
        return f"ChatClient(model={c.model!r}, base_url={self._url!r}, api_key_env={c.api_key_env!r})"

    def __reduce__(self) -> Any:
        """Refuse to pickle: the client holds an API key (pass its `ModelConfig` instead)."""
        raise TypeError("a ChatClient holds an API key and is not picklable; pass its ModelConfig instead")

    def __enter__(self) -> ChatClient:
        """Use the client as a context manager."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the client."""
        self.close()

    # ------------------------------------------------------------------ public

    def complete(
        self, body: Mapping[str, Any], *, purpose: str, shape_fingerprint: str = "", draw: int = 0
    ) -> Completion:
        """Send one chat-completions body (without ``model``) or reuse its recorded response.

        Parameters
        ----------
        body : mapping
            An OpenAI chat-completions body: ``messages``, optionally
            ``tools``, ``max_tokens``, ``temperature`` ... The client adds
            ``model`` and, unless given, ``temperature``.
        purpose : str
            What the call is for (``summary``, ``exam``, ``open-book``), kept in the ledger.
        shape_fingerprint : str
            The call shape (system prompt + tools) fingerprint, kept in the ledger.
        draw : int
            Which asking of the same body this is (0, 1, ...): the draws of one body are distinct calls,
            each recorded (and reused by a rerun) on its own, never answered from another draw's record.

        Returns
        -------
        Completion

        Raises
        ------
        ValueError
            For a malformed body (see `full_body`).
        ProviderError
            `AuthError`, `EndpointUnreachable`, `RateLimited`,
            `ProviderTimeout`, `BadResponse`, or the base class for other
            HTTP errors. The ledger row is ``failed`` with the same text.
        """
        full = full_body(self.config, body)
        fp = request_fingerprint(full, draw)
        if not self.config.reuse:
            return self._send(full, fp, purpose, shape_fingerprint, draw=draw)
        # Identical bodies sent at once from several threads would all miss the ledger and all be paid for:
        # one sends, the others wait for it and then read its recorded answer. Across processes sharing
        # the ledger (a sweep's runs on several workers) the ledger's claim does the same.
        self._claim(fp)
        try:
            while True:
                state, call_id = self.ledger.claim(
                    fingerprint=fp,
                    shape_fingerprint=shape_fingerprint,
                    model=self.config.model,
                    base_url=self.config.base_url,
                    purpose=purpose,
                    request=full,
                    stale_after=self._stale_after(),
                    draw=draw,
                )
                if state == "mine":
                    return self._send(full, fp, purpose, shape_fingerprint, call_id, draw)
                if state == "done" and (rec := self.ledger.lookup(fp)) is not None:
                    return self._from_record(rec, fp, purpose)
                time.sleep(CLAIM_POLL_S)  # another process is sending this very request
        finally:
            self._release(fp)

    def _stale_after(self) -> float:
        """How long another host's ``started`` row is believed: the call's whole time budget, and a margin."""
        return float(self.config.timeout_s) * (int(self.config.max_retries) + 1) + 60.0

    def map(
        self, bodies: Sequence[Mapping[str, Any]], *, purpose: str, shape_fingerprint: str = "", progress: bool = False
    ) -> list[Completion]:
        """`complete` every body, ``config.concurrency`` at a time; results in the order of `bodies`.

        The first failure is raised once the calls already in flight have
        ended; calls not yet started are cancelled. Finished calls are in
        the ledger, so a rerun reuses them.
        """
        bodies = list(bodies)
        if not bodies:
            return []
        results: list[Completion | None] = [None] * len(bodies)
        with ThreadPoolExecutor(
            max_workers=min(self.config.concurrency, len(bodies)), thread_name_prefix="chat"
        ) as pool:
            futures = {
                pool.submit(self.complete, b, purpose=purpose, shape_fingerprint=shape_fingerprint): i
                for i, b in enumerate(bodies)
            }
            done: Any = as_completed(futures)
            if progress:
                from tqdm.auto import tqdm

                done = tqdm(done, total=len(bodies), desc=f"{purpose} ({self.config.model})", unit="call")
            try:
                for fut in done:
                    results[futures[fut]] = fut.result()
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
        return results  # type: ignore[return-value]  # every slot is filled once all futures are done

    def close(self) -> None:
        """Close the HTTP connections (and the ledger, when the client opened it)."""
        self._http.close()
        if self._owns_ledger:
            self.ledger.close()

    # ------------------------------------------------------------------ internals

    def _claim(self, fp: str) -> None:
        while True:
            with self._lock:
                ev = self._inflight.get(fp)
                if ev is None:
                    self._inflight[fp] = threading.Event()
                    return
            ev.wait()

    def _release(self, fp: str) -> None:
        with self._lock:
            ev = self._inflight.pop(fp, None)
        if ev is not None:
            ev.set()

    def _from_record(self, rec: Mapping[str, Any], fp: str, purpose: str) -> Completion:
        message, finish = parse_choice(rec["response"])
        usage = rec["usage"]
        if self._dry_run is not None:
            standin.note_reused(self._dry_run, fp)
        latency = float(rec.get("latency_s") or 0.0)
        self._log(purpose, usage, latency, from_ledger=True)
        return Completion(
            message=message,
            finish_reason=finish,
            usage=usage,
            latency_s=latency,
            request_fingerprint=fp,
            from_ledger=True,
        )

    def _send(
        self,
        full: dict[str, Any],
        fp: str,
        purpose: str,
        shape_fingerprint: str,
        call_id: int | None = None,
        draw: int = 0,
    ) -> Completion:
        c = self.config
        with self._slots:
            if call_id is None:  # not claimed (reuse off): recorded now
                call_id = self.ledger.start(
                    fingerprint=fp,
                    shape_fingerprint=shape_fingerprint,
                    model=c.model,
                    base_url=c.base_url,
                    purpose=purpose,
                    request=full,
                    draw=draw,
                )
            t0 = time.monotonic()
            try:
                extra = {k: v for k, v in full.items() if k not in ("model", "messages")}
                # Raw response: we parse the JSON ourselves, so the ledger keeps exactly what the
                # provider sent (DeepSeek's extra usage fields included) and a malformed body is caught.
                raw = self._http.chat.completions.with_raw_response.create(
                    model=full["model"], messages=full["messages"], extra_body=extra
                )
                text = raw.http_response.text
            except BaseException as exc:
                err = self._map_error(exc)
                self._failed(call_id, purpose, err, time.monotonic() - t0)
                if err is exc:
                    raise
                raise err from None  # the openai exception may quote server text; ours is scrubbed
            latency = time.monotonic() - t0
        try:
            try:
                # Masked before it is read: the Completion, the ledger and a later reuse hold the same text.
                response = mask_stored(bounded_json.loads(text), self._key())
            except ValueError as exc:  # not JSON, or nested past bounded_json.MAX_DEPTH
                where = f"{exc.msg} at position {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise BadResponse(
                    f"{self._url} answered 200 with a body that is not JSON ({where}; {len(text)} characters)",
                    status_code=200,
                ) from None
            message, finish = parse_choice(response)
            usage = parse_usage(response.get("usage"))
        except BadResponse as err:
            self._failed(call_id, purpose, err, latency)
            raise
        cost = self._cost(usage)
        self.ledger.finish(
            call_id,
            response=response,
            usage=usage,
            latency_s=latency,
            cost=cost,
            currency=None if self._table is None else self._table.currency,
        )
        self._log(purpose, usage, latency, from_ledger=False)
        return Completion(
            message=message,
            finish_reason=finish,
            usage=usage,
            latency_s=latency,
            request_fingerprint=fp,
            from_ledger=False,
        )

    def _cost(self, usage: Usage) -> float | None:
        if self._table is None:
            return None
        try:
            return price_usage(self._table, usage)
        except ValueError as exc:  # e.g. a provider reporting more cached than prompt tokens
            log.warning("cost not computed for a %s call: %s", self.config.model, exc)
            return None

    def _failed(self, call_id: int, purpose: str, err: BaseException, latency: float) -> None:
        text = f"{type(err).__name__}: {self._scrub(str(err))}"
        try:
            self.ledger.fail(call_id, text)
        except Exception:  # the call's own error matters more than recording it
            log.exception("could not record failed call %s in the ledger", call_id)
        log.warning(
            "call failed purpose=%s model=%s error=%s latency_s=%.3f",
            purpose,
            self.config.model,
            type(err).__name__,
            latency,
        )

    def _log(self, purpose: str, usage: Usage, latency: float, *, from_ledger: bool) -> None:
        log.info(
            "call purpose=%s model=%s prompt_tokens=%d cached_tokens=%d completion_tokens=%d latency_s=%.3f "
            "from_ledger=%s",
            purpose,
            self.config.model,
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens,
            latency,
            from_ledger,
        )

    def _key(self) -> list[str]:
        """Return the secrets this client sends, to mask: its key (not the ``none`` placeholder), its URL's credentials."""
        key = getattr(self._http, "api_key", None)
        return ([key] if isinstance(key, str) and key != NO_KEY else []) + self._credentials

    def _scrub(self, text: str) -> str:
        return mask_message(text, self._key())

    def _server_says(self, exc: openai.APIStatusError) -> str:
        body = getattr(exc, "body", None)
        msg = body.get("message") if isinstance(body, Mapping) else None
        if not msg and isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            msg = body["error"].get("message")
        msg = str(msg or getattr(exc, "message", "") or "")
        return self._scrub(msg)[:300]

    def _map_error(self, exc: BaseException) -> BaseException:
        """Our exception for an openai one (others are returned unchanged)."""
        c, url = self.config, self._url
        attempts = c.max_retries + 1
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            status: int = exc.status_code
            if c.api_key_env:
                what = f"refused the API key from environment variable {c.api_key_env}"
            else:
                what = "wants an API key, but api_key_env is '' (set it to the NAME of the variable holding the key)"
            return AuthError(f"{url} {what} (HTTP {status}): {self._server_says(exc)}", status_code=status)
        if isinstance(exc, openai.RateLimitError):
            return RateLimited(
                f"{url} still rate-limited (HTTP 429) after {attempts} attempt(s): {self._server_says(exc)}",
                status_code=429,
            )
        if isinstance(exc, openai.APITimeoutError):  # before APIConnectionError: it is a subclass
            return ProviderTimeout(f"{url} gave no answer within {c.timeout_s:g} s on any of {attempts} attempt(s)")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            why = f": {self._scrub(str(cause))[:200]}" if cause is not None and str(cause) else ""
            return EndpointUnreachable(f"cannot reach {url} ({attempts} attempt(s)){why}")
        if isinstance(exc, openai.APIResponseValidationError):
            return BadResponse(
                f"{url} answered with a response that is not a chat completion",
                status_code=getattr(exc, "status_code", None),
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retried = f" after {attempts} attempt(s)" if status >= 500 or status in (408, 409) else ""
            return ProviderError(f"{url} answered HTTP {status}{retried}: {self._server_says(exc)}", status_code=status)
        if isinstance(exc, openai.OpenAIError):
            return ProviderError(f"{url}: {type(exc).__name__}: {self._scrub(str(exc))[:300]}")
        return exc


__all__ = [
    "AuthError",
    "BadResponse",
    "ChatClient",
    "Completion",
    "EndpointUnreachable",
    "NO_KEY",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "Usage",
    "full_body",
    "parse_choice",
    "parse_usage",
    "price_usage",
    "request_fingerprint",
]
