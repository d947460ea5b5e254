"""An OpenAI-compatible endpoint answered by a person (or any model you drive by hand).

Why: refinement needs a language model, and not every user has API access. `refine
serve-inbox` listens on localhost like any OpenAI-compatible server, writes each chat request
as a readable Markdown file into an inbox folder, and answers it when a file with the reply
appears beside it. Paste the request into any chat window, save the answer, and the run goes
on: `refine run --analyst openai --base-url http://127.0.0.1:PORT/v1` talks to it through the
real `openai` client, exactly as to a hosted model, and records every exchange the same way.

Files, numbered in arrival order: `0001-generate.request.md` (the messages, roles as
headings) -> you write `0001-generate.answer.md`. A request left unanswered for `timeout_s`
gets HTTP 504, which the client reports as a failed call.

Every answer names who wrote it: the `model` of each response is the inbox's `model` (say,
the name of the model you paste requests into), whatever the client asked for, so the run
records which model answered. Its `system_fingerprint` is `FINGERPRINT`, because the token
counts are estimates (there is no tokenizer here) and the run's summary says so.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FINGERPRINT = "refine-serve-inbox (token counts estimated: 4 characters a token)"

_ROLE_HINTS = (("Write a first version", "generate"), ("could not be used", "regenerate"),
               ("DECISION", "revise"), ("diagnostic", "diagnose"))


def request_markdown(messages: list[dict[str, Any]]) -> str:
    """The chat messages as one readable document (roles as headings)."""
    parts = []
    for message in messages:
        parts.append(f"# {str(message.get('role', 'user')).upper()}\n\n{message.get('content', '')}\n")
    return "\n".join(parts)


def guess_role(messages: list[dict[str, Any]]) -> str:
    """A short label for the file name, from the last user message (for people, not logic)."""
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    for hint, role in _ROLE_HINTS:
        if hint in str(last):
            return role
    return "question"


class Inbox:
    """The folder requests go to and answers come from."""

    def __init__(self, folder: Path, timeout_s: float = 3600.0, poll_s: float = 0.5) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self._lock = threading.Lock()
        numbers = [int(m.group(1)) for p in self.folder.glob("*.request.md")
                   if (m := re.match(r"(\d+)-", p.name))]
        self._next = max(numbers, default=0)

    def ask(self, messages: list[dict[str, Any]]) -> str | None:
        """Write the request; wait for its answer file; None after the timeout."""
        with self._lock:
            self._next += 1
            stem = f"{self._next:04d}-{guess_role(messages)}"
        (self.folder / f"{stem}.request.md").write_text(request_markdown(messages), encoding="utf-8")
        answer = self.folder / f"{stem}.answer.md"
        print(f"[inbox] waiting for {answer}", flush=True)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if answer.exists():
                time.sleep(self.poll_s)  # the writer may still be saving it
                return answer.read_text(encoding="utf-8")
            time.sleep(self.poll_s)
        return None


def _handler(inbox: Inbox, model: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:  # the inbox prints what matters
            pass

        def _send(self, status: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                messages = list(request["messages"])
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": {"message": f"not a chat request: {exc}"}})
                return
            text = inbox.ask(messages)
            if text is None:
                self._send(504, {"error": {"message": f"no answer within {inbox.timeout_s:g} s"}})
                return
            prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
            self._send(200, {
                "id": f"inbox-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "system_fingerprint": FINGERPRINT,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                # no tokenizer here: about four characters a token, marked as an estimate by the model name
                "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4,
                          "total_tokens": (prompt_chars + len(text)) // 4},
            })

    return Handler


def serve(folder: Path, *, host: str = "127.0.0.1", port: int = 8765, timeout_s: float = 3600.0,
          model: str = "inbox") -> ThreadingHTTPServer:
    """A started server (daemon thread); `shutdown()` stops it."""
    server = ThreadingHTTPServer((host, port), _handler(Inbox(folder, timeout_s), model))
    threading.Thread(target=server.serve_forever, name="inbox-server", daemon=True).start()
    return server
