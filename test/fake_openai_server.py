"""A local OpenAI-compatible chat-completions server for tests, with scripted replies.

The real `openai` client talks to it over real HTTP on 127.0.0.1, so retries, timeouts,
headers and usage accounting are exercised exactly as against a paid endpoint. Replies come
from a queue (`push`), then from an optional `responder(request) -> Reply` callback (for
end-to-end runs that answer by role or content). Every request is recorded.

    with FakeOpenAIServer([Reply.status(429), Reply.text("...")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from refine_core.analyst import prompts

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply. `content` becomes the assistant message; `body` (dict or
    raw string) replaces the whole response body; `delay_s` waits before answering."""

    content: str | None = None
    status_code: int = 200
    delay_s: float = 0.0
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        return cls(content=content, **kw)

    @classmethod
    def status(cls, code: int, message: str = "scripted error", **kw: Any) -> Reply:
        return cls(status_code=code, body={"error": {"message": message, "type": "fake"}}, **kw)

    @classmethod
    def slow(cls, content: str, delay_s: float) -> Reply:
        return cls(content=content, delay_s=delay_s)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw_body: str
    json: Any
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict]:
        return (self.json or {}).get("messages", []) if isinstance(self.json, dict) else []

    @property
    def last_user_message(self) -> str:
        users = [m.get("content", "") for m in self.messages if m.get("role") == "user"]
        return users[-1] if users else ""

    @property
    def role(self) -> str:
        """Which analyst question this is (generate, regenerate, diagnose, revise), read from
        the latest user message that is not a correction: a continued conversation asks its
        new question in the message it appends. "unknown" otherwise."""
        users = [m.get("content", "") for m in self.messages if m.get("role") == "user"]
        asks = [u for u in users if not u.startswith(prompts.CORRECTION_INTRO)]
        latest = asks[-1] if asks else ""
        if any(f in latest for f in prompts.REVISION_FORMATS):
            return "revise"
        if prompts.DIAGNOSTICS_FORMAT in latest:
            return "diagnose"
        if prompts.PROGRAM_FORMAT in latest:
            return "regenerate" if prompts.REPAIR_INTRO in latest else "generate"
        return "unknown"

    @property
    def is_correction(self) -> bool:
        """True when this request sends a parse error back (a corrective retry)."""
        users = [m.get("content", "") for m in self.messages if m.get("role") == "user"]
        return bool(users) and users[-1].startswith(prompts.CORRECTION_INTRO)


def by_role(replies: dict[str, Iterable[Reply]]) -> Callable[[RecordedRequest], Reply]:
    """A responder serving a separate queue per question role, for end-to-end runs where
    the order of questions is known per role but not overall. Corrective retries take the
    next reply of the same role. A role with no reply left gets HTTP 400 (not retried)."""
    queues = {role: deque(items) for role, items in replies.items()}
    lock = threading.Lock()

    def respond(request: RecordedRequest) -> Reply:
        with lock:
            queue = queues.get(request.role)
            if queue:
                return queue.popleft()
        return Reply.status(400, f"fake server: no scripted reply left for {request.role}")

    return respond


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(text.split())


class FakeOpenAIServer:
    """Threaded HTTP server on 127.0.0.1 (free port) serving scripted chat completions."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Callable[[RecordedRequest], Reply] | None = None,
        model: str = "fake-model",
        api_key: str | None = None,
    ) -> None:
        """`api_key`, when given, is required as `Authorization: Bearer <key>` (else 401)."""
        self._queue: deque[Reply] = deque(replies)
        self._lock = threading.Lock()
        self.responder = responder
        self.model = model
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.usage_served: list[tuple[int, int]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            return self
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ----------------------------------------------------------------- script
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path in CHAT_PATHS]

    def _record(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        # A test that runs out of script has a bug; 400 is not retried, so it fails fast.
        return Reply.status(400, "fake server: no scripted reply left")

    def _completion_body(self, request: RecordedRequest, reply: Reply) -> dict:
        prompt = " ".join(str(m.get("content", "")) for m in request.messages)
        tokens_in = reply.prompt_tokens if reply.prompt_tokens is not None else count_tokens(prompt)
        content = reply.content or ""
        tokens_out = (
            reply.completion_tokens if reply.completion_tokens is not None
            else count_tokens(content)
        )
        with self._lock:
            self.usage_served.append((tokens_in, tokens_out))
        model = request.json.get("model", self.model) if isinstance(request.json, dict) else self.model
        return {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
            data = body if isinstance(body, str) else json.dumps(body)
            payload = data.encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to do

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": server.model,
                                                              "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            try:
                parsed = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                parsed = None
            request = RecordedRequest(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw, parsed
            )
            if self.path not in CHAT_PATHS:
                with server._lock:
                    server.requests.append(request)
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if server.api_key is not None and (
                request.headers.get("authorization") != f"Bearer {server.api_key}"
            ):
                with server._lock:
                    server.requests.append(request)
                self._send(401, {"error": {"message": "invalid api key", "type": "auth"}})
                return
            reply = server._record(request)
            if reply.delay_s > 0:
                time.sleep(reply.delay_s)
            if reply.body is not None:
                self._send(reply.status_code, reply.body, reply.headers)
            elif reply.status_code != 200:
                self._send(reply.status_code, {"error": {"message": "scripted error"}},
                           reply.headers)
            else:
                self._send(200, server._completion_body(request, reply), reply.headers)

    return Handler
