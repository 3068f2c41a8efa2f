"""A fake Anthropic Messages API on 127.0.0.1, answering and counting like the real one.

Every ``POST /v1/messages`` gets one ``record_decision`` tool call: the first candidate of
the user message that is not listed as already tried, citing every bracketed id of the
memory block. Usage is reported the way the real API reports it:

* tokens are counted at 4 characters a token over the tools, the system blocks and the
  messages (the real tokenizer differs; the accounting does not);
* a request whose system prompt carries a ``cache_control`` marker caches the prefix up to
  and including the marked block (tools, then system) when that prefix reaches the model's
  minimum cacheable length (`MINIMUM`; a model not listed needs the largest): the first
  request with a prefix reports it as ``cache_creation_input_tokens``, every later request
  with the same prefix as ``cache_read_input_tokens``; a shorter prefix is not cached and
  both counters stay 0;
* ``input_tokens`` counts only the tokens that were neither written to nor read from the
  cache.

Each request's usage is kept in `FakeMessagesAPI.log` (and appended to ``--log FILE`` as JSON
lines when run as a program), so a run's cache behaviour can be checked from outside:

    python -m tests.fake_messages_api --port 8765 --log runs/fake-requests.jsonl
    ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=fake python -m eval.compare --mode claude ...
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.builders import untried_candidates

CHARS_PER_TOKEN = 4
# Published minimum cacheable lengths in tokens (the largest where sources disagree).
MINIMUM = {
    "claude-opus-5": 2048,
    "claude-fable-5": 2048,
    "claude-mythos-5": 2048,
    "claude-sonnet-5": 1024,
    "claude-opus-4-8": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4-6": 2048,
    "claude-opus-4-7": 2048,
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
}


def _tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN


def _text(content: Any) -> str:
    """The characters of a message's or a block list's content."""
    if isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True)


class FakeMessagesAPI:
    """The fake's state: the prompt cache (prefixes seen) and the usage of every request."""

    def __init__(self) -> None:
        self.cached: set[str] = set()
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self.log_path: Path | None = None

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Token counts for a request, updating the prompt cache as the real API does."""
        tools = json.dumps(body.get("tools", []), sort_keys=True)
        system = body.get("system") or []
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        marked = max((i for i, b in enumerate(blocks) if "cache_control" in b), default=-1)
        prefix = tools + "".join(b.get("text", "") for b in blocks[: marked + 1])
        rest = "".join(b.get("text", "") for b in blocks[marked + 1 :])
        rest += "".join(_text(m.get("content")) for m in body.get("messages", []))
        minimum = MINIMUM.get(re.sub(r"-\d{8}$", "", body.get("model", "")), max(MINIMUM.values()))
        written = read = 0
        if marked >= 0 and _tokens(prefix) >= minimum:
            key = json.dumps([body.get("model"), prefix])
            with self._lock:
                hit = key in self.cached
                self.cached.add(key)
            read, written = (_tokens(prefix), 0) if hit else (0, _tokens(prefix))
            return {
                "input_tokens": _tokens(rest),
                "output_tokens": 40,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
            }
        return {
            "input_tokens": _tokens(prefix + rest),
            "output_tokens": 40,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The message the fake returns for a request body."""
        prompt = body["messages"][0]["content"]
        memory = prompt.split("\nMemory:\n", 1)[1] if "\nMemory:\n" in prompt else ""
        ids = sorted(set(re.findall(r"\[([A-Z]\d+)\]", memory)))
        usage = self.usage(body)
        with self._lock:
            self.log.append(
                {
                    "request": len(self.log) + 1,
                    "model": body.get("model"),
                    "attempt_1": "\nAttempt: 1\n" in prompt,
                    "shown_ids": len(ids),
                    **usage,
                }
            )
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(self.log[-1]) + "\n")
        return {
            "id": f"msg_{len(self.log)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": usage,
            "content": [
                {
                    "type": "tool_use",
                    "id": f"toolu_{len(self.log)}",
                    "name": "record_decision",
                    "input": {
                        "root_cause": untried_candidates(prompt)[0],
                        "confidence": 0.5,
                        "rationale": "first untried candidate",
                        "relied_on": ids,
                    },
                }
            ],
        }

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on a background thread; returns the base URL (for ``ANTHROPIC_BASE_URL``)."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps(fake.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return f"http://{host}:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=("example: python -m tests.fake_messages_api --port 8765 --log runs/fake-requests.jsonl"),
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--log", help="append each request's usage to this file as JSON lines")
    args = parser.parse_args(argv)
    fake = FakeMessagesAPI()
    fake.log_path = Path(args.log) if args.log else None
    if fake.log_path is not None:
        fake.log_path.parent.mkdir(parents=True, exist_ok=True)
    url = fake.start(port=args.port)
    print(f"fake Messages API at {url} (Ctrl-C stops it)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        fake.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
