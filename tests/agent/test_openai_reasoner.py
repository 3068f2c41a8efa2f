"""`--mode openai` against a fake OpenAI-compatible server on 127.0.0.1: play, replay offline, bad answers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.openai import OpenAIReasoner
from eval import runlog
from eval.compare import main
from tests.agent.test_claude_reasoner import EVIDENCE, PROBLEM
from tests.builders import T0, untried_candidates

# A mark, not importorskip: the SDK is imported when a test runs, not when each worker collects.
pytestmark = pytest.mark.extra("openai")


class FakeServer:
    """Chat Completions with function calling: picks the first untried candidate; `script` overrides answers.

    `script` maps a 1-based request number to what to send instead: ``"busy"`` (HTTP 429),
    ``"not-json"`` (arguments that do not parse) or ``"off-list"`` (a root cause not offered).
    """

    def __init__(self, script=None, *, off_list_from=None):
        self.script = dict(script or {})
        self.off_list_from = off_list_from
        self.bodies = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append(body)
                status, payload, headers = fake.answer(body, len(fake.bodies))
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, body, n):
        action = self.script.get(n) or ("off-list" if self.off_list_from and n >= self.off_list_from else None)
        if action == "busy":
            return 429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after-ms": "1"}
        choice = untried_candidates(body["messages"][1]["content"])[0]
        arguments = json.dumps(
            {
                "root_cause": "dns_outage" if action == "off-list" else choice,
                "confidence": 0.7,
                "rationale": "first untried",
                "relied_on": [],
            }
        )
        if action == "not-json":
            arguments = '{"root_cause": "' + choice
        return (
            200,
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": f"call_{n}",
                                    "type": "function",
                                    "function": {"name": "record_decision", "arguments": arguments},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 800, "completion_tokens": 30, "total_tokens": 830},
            },
            {},
        )


@pytest.fixture
def fake():
    servers = []

    def start(*args, **kwargs):
        servers.append(FakeServer(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _compare(tmp_path, url, cache, name):
    path = tmp_path / f"{name}.json"
    args = [
        "--mode",
        "openai",
        "--model",
        "local-model",
        "--seeds",
        "1",
        "--agents",
        "episodic",
        "no_memory",
        "--cache",
        str(cache),
        "--json",
        str(path),
        "--quiet",
        "--jobs",
        "1",
    ]  # requests in serial order
    code = main(args + (["--base-url", url] if url else []), now=lambda: T0)
    return code, runlog.read(path)


def test_plays_pool_vs_deploy_then_replays_from_the_cache_with_the_server_stopped(tmp_path, fake, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake({2: "busy"})  # one rate limit: retried by the SDK with backoff
    cache = tmp_path / "cache"
    code, log = _compare(tmp_path, server.url, cache, "live")
    assert code == 0 and log["status"] == "success" and log["mode"] == "openai"
    assert log["config"]["base_url"] == server.url and log["config"]["model"] == "local-model"
    body = server.bodies[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "record_decision"}}
    assert body["temperature"] == 0 and body["model"] == "local-model"
    assert body["tools"][0]["function"]["parameters"]["properties"]["root_cause"]["enum"]
    rounds = {name: log["agents"][name]["rounds"] for name in ("episodic", "no_memory")}
    assert len(rounds["episodic"]) == len(rounds["no_memory"]) == 9
    assert log["agents"]["episodic"]["summary"]["input_tokens"] == 800 * sum(r["attempts"] for r in rounds["episodic"])
    requests = len(server.bodies)
    server.stop()
    code, replay = _compare(tmp_path, server.url, cache, "replay")  # same URL, nothing listening
    assert code == 0 and len(server.bodies) == requests
    for name, played in rounds.items():
        assert [r["decisions"] for r in replay["agents"][name]["rounds"]] == [r["decisions"] for r in played]
    code, offline = _compare(tmp_path, None, cache, "offline")  # no --base-url, no key: the cache alone
    assert code == 0
    assert [r["decisions"] for r in offline["agents"]["episodic"]["rounds"]] == [
        r["decisions"] for r in rounds["episodic"]
    ]


def test_bad_answers_are_repaired_then_flagged_and_the_run_goes_on(tmp_path, fake, capsys):
    server = fake({3: "not-json"}, off_list_from=12)
    code, log = _compare(tmp_path, server.url, tmp_path / "cache", "bad")
    assert code == 0 and log["status"] == "success"
    rounds = log["agents"]["episodic"]["rounds"] + log["agents"]["no_memory"]["rounds"]
    assert len(rounds) == 18  # every round played
    flagged = [r for r in rounds if r["invalid"]]
    assert flagged and all("'dns_outage' is not a candidate" in r["invalid"][0] for r in flagged)
    assert all(not r["first_correct"] for r in flagged if r["invalid"][0].startswith("attempt 1:"))
    repaired = server.bodies[3]  # the request after the unparseable one: a repair through the tool's result
    assert repaired["messages"][-1]["role"] == "tool" and "not JSON" in repaired["messages"][-1]["content"]
    assert repaired["messages"][-2]["tool_calls"][0]["id"] == repaired["messages"][-1]["tool_call_id"]


def test_reasoner_usage_and_relied_on_filtering(fake):
    server = fake()
    reasoner = OpenAIReasoner("local-model", base_url=server.url)
    decision = reasoner.decide(PROBLEM, EVIDENCE, "[ep1] pool fixed it")
    assert decision.choice == "pool" and decision.usage["input_tokens"] == 800
    assert reasoner.usage["requests"] == 1 and reasoner.usage["cost_usd"] == 0.0
    assert server.bodies[0]["parallel_tool_calls"] is False
    assert server.bodies[0]["tools"][0]["function"]["strict"] is True
    off_list = fake(off_list_from=1)
    invalid = OpenAIReasoner("local-model", base_url=off_list.url).decide(PROBLEM, [], "")
    assert invalid.choice == "" and "not a candidate" in invalid.invalid
    assert len(off_list.bodies) == 2  # the answer, then one repair
