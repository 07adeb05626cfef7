"""A scripted OpenAI-compatible chat server on 127.0.0.1, for the provider tests.

`FakeOpenAIServer` serves ``POST .../chat/completions`` from a thread. Its
behaviour is a queue of `Scripted` responses (status, headers, body, delay),
consumed one per request; once the queue is empty every request gets a 200
chat completion that echoes the last user message (``echo: <text>``),
deterministically, after ``default_delay`` seconds. Every request is recorded
(path, headers without Authorization, parsed JSON body, the body's
fingerprint); with ``log_file`` a line per request is also appended to a file.
The Authorization header is kept apart (`authorizations`) so a test can check
which key was sent without the key landing in the request records. An endpoint
that repeats it (a test of credential masking) is made with
``echo_authorization=True`` (every default answer ends with it) or by scripting a
body holding `AUTHORIZATION` (replaced by the request's header).

Run as a script (``python tests/fake_openai_server.py --delay 0.2 --log F``)
it serves until killed and prints its base URL on the first line of stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: A scripted body's text holding this gets the request's Authorization header in its place.
AUTHORIZATION = "<authorization>"


def fingerprint(body: Any) -> str:
    """sha256 of the canonical JSON of a body: the same rule as `providers.client.request_fingerprint`."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Scripted:
    """One scripted answer. ``body``: dict (sent as JSON), str/bytes (sent as is) or None (a default completion)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0


def completion(
    content: str | None = "ok",
    *,
    tool_calls: list | None = None,
    usage: dict | None = None,
    finish_reason: str = "stop",
    model: str = "fake-model",
) -> dict[str, Any]:
    """A chat-completion response body."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish_reason}],
        "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def _echo(body: Any, authorization: str | None = None) -> dict[str, Any]:
    last = ""
    for m in (body or {}).get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            last = str(m.get("content"))
    n = len(json.dumps(body, sort_keys=True))
    said = f" (authorization: {authorization})" if authorization is not None else ""
    return completion(
        f"echo: {last}{said}",
        usage={"prompt_tokens": n // 4, "completion_tokens": 3, "total_tokens": n // 4 + 3},
        model=str((body or {}).get("model", "fake-model")),
    )


class FakeOpenAIServer:
    """The server; use as a context manager (or `start` / `stop`).

    Parameters
    ----------
    default_delay : float
        Seconds to wait before each default (unscripted) answer.
    log_file : path, optional
        Append ``<time> <fingerprint> <model>`` per request to this file.
    echo_authorization : bool
        End every default answer with the request's Authorization header, as a
        careless endpoint repeats what it was sent.
    """

    def __init__(
        self, default_delay: float = 0.0, log_file: str | Path | None = None, echo_authorization: bool = False
    ):
        self.default_delay = default_delay
        self.echo_authorization = echo_authorization
        self.log_file = Path(log_file) if log_file else None
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ control

    def script(self, *responses: Scripted) -> FakeOpenAIServer:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._queue.extend(responses)
        return self

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def fingerprints(self) -> list[str]:
        with self._lock:
            return [r["fingerprint"] for r in self.requests]

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                server._handle(self)

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A client that timed out closes the socket while we still sleep; that's expected here.
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]  # silence dropped-connection noise
        # A short poll interval: shutdown() waits up to one interval, and every test stops a server.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ serving

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        if len(raw) < length:
            # The client died while sending (a test kills it mid-run): no request arrived, none is recorded —
            # a truncated body would otherwise count as one more, unknown request.
            h.close_connection = True
            return
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in h.headers.items() if k.lower() != "authorization"}
        fp = fingerprint(body)
        with self._lock:
            self.requests.append(
                {"path": h.path, "headers": headers, "body": body, "fingerprint": fp, "time": time.monotonic()}
            )
            self.authorizations.append(h.headers.get("Authorization"))
            scripted = self._queue.popleft() if self._queue else None
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.log_file is not None:
            with open(self.log_file, "a", encoding="utf-8") as f:
                f.write(f"{time.time():.6f} {fp} {(body or {}).get('model')}\n")
        try:
            auth = h.headers.get("Authorization")
            echoed = str(auth) if self.echo_authorization else None
            if scripted is None:
                scripted = Scripted(body=_echo(body, echoed), delay=self.default_delay)
            elif scripted.body is None and scripted.status == 200:
                scripted = Scripted(
                    status=200, headers=scripted.headers, body=_echo(body, echoed), delay=scripted.delay
                )
            if scripted.delay:
                time.sleep(scripted.delay)
            payload = scripted.body
            if isinstance(payload, (dict, list)):
                data = json.dumps(payload).replace(AUTHORIZATION, json.dumps(str(auth))[1:-1]).encode("utf-8")
            elif isinstance(payload, str):
                data = payload.replace(AUTHORIZATION, str(auth)).encode("utf-8")
            else:
                data = payload or b""
            h.send_response(scripted.status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in scripted.headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timed out) first
        finally:
            with self._lock:
                self.in_flight -= 1


def error_body(message: str, type_: str = "error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type_, "code": code}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--log", default=None, help="append a line per request to this file")
    args = ap.parse_args(argv)
    server = FakeOpenAIServer(default_delay=args.delay, log_file=args.log).start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
