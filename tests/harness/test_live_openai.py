"""The live `openai` target, with OpenAI's replies played by httpx2's `MockTransport` (no test
reaches the internet): retries on 429, 5xx and timeouts, steering, scenarios that cannot run
live, and no API key in anything recorded."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest

from responses_parity.harness.engine import session as session_module
from responses_parity.harness.engine.session import TargetOptions, open_session
from responses_parity.harness.engine.targets import retry_after_s
from responses_parity.harness.judge import goldens
from responses_parity.harness.judge.results import ScenarioResult
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.model import Mode
from responses_parity.harness.wire.redaction import Redactor
from responses_parity.harness.wire.sse import parse_sse

EXCHANGES = Path(__file__).parent / "exchanges"
RESPONSES_URL = "https://api.openai.com/v1/responses"
API_KEY = "sk-test-live-key-0123456789abcdef"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((EXCHANGES / f"{name}.json").read_text())["response"]


STREAM = recorded("stream-text-obfuscation")
COMPLETED = next(e.payload["response"] for e in parse_sse(STREAM["sse"])
                 if e.payload and e.payload["type"] == "response.completed")
QUOTA = recorded("error-429-insufficient-quota")


def text_answer(request: httpx2.Request) -> httpx2.Response:
    if json.loads(request.content).get("stream"):
        return httpx2.Response(200, headers=STREAM["headers"], text=STREAM["sse"])
    return httpx2.Response(200, json=COMPLETED, headers={"openai-organization": "org-AbCdEf0123456789xyz"})


def rate_limited(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(429, json=QUOTA["body"], headers={"retry-after": "0"})


@pytest.fixture(autouse=True)
def openai_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("PARITY_OPENAI_MODEL", "gpt-4.1-2025-04-14")
    # The run's reachability probe opens a TCP connection, which no mock transport answers.
    monkeypatch.setattr(session_module, "unreachable", _reachable)
    yield


async def _reachable(target: Any) -> None:
    return None


Reply = Callable[[httpx2.Request], httpx2.Response] | httpx2.TransportError


@dataclass
class OpenAI:
    """OpenAI's API as every httpx2 client of the test sees it: each `POST RESPONSES_URL` gets
    the next of `replies` (a function of the request, or a transport error raised), the last one
    again once they run out; each request is kept. Anything else fails the test."""

    replies: list[Reply]
    requests: list[httpx2.Request] = field(default_factory=list)

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        assert (request.method, str(request.url)) == ("POST", RESPONSES_URL), f"{request.method} {request.url}"
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, httpx2.TransportError):
            raise reply
        return reply(request)


@pytest.fixture
def openai(monkeypatch: pytest.MonkeyPatch) -> Callable[..., OpenAI]:
    """`openai(*replies)`: the `OpenAI` that answers in place of every httpx2 transport that
    would connect, until the test ends."""
    def playing(*replies: Reply) -> OpenAI:
        service = OpenAI(list(replies))
        mock = httpx2.MockTransport(service.answer)
        monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request",
                            lambda self, request: mock.handle_async_request(request))
        return service

    return playing


def run_live(ids: list[str], modes: tuple[Mode, ...] = ("nonstream",), **options: Any) -> list[ScenarioResult]:
    catalogue = load([builtin_scenarios_dir()])
    units = [(loaded, mode) for loaded in catalogue.select(ids) for mode in modes]
    with open_session(TargetOptions(target="openai", **options), ()) as session:
        return session.run(units)


def test_a_429_is_retried_after_retry_after_and_the_run_passes(openai: Callable[..., OpenAI]) -> None:
    service = openai(rate_limited, text_answer)
    [result] = run_live(["text-basic"])
    assert result.outcome == "pass", result.findings
    assert len(service.requests) == 2
    assert result.steps[0].exchange.meta["attempts"] == 2
    sent = service.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert json.loads(sent.content)["model"] == "gpt-4.1-2025-04-14"


def test_a_stream_from_openai_passes_every_check(openai: Callable[..., OpenAI]) -> None:
    openai(text_answer)
    [result] = run_live(["text-basic"], modes=("stream",))
    assert result.outcome == "pass", result.findings
    # The capture predates `cache_write_tokens`; replayed as an answer given now, its absence warns.
    assert [(f.rule, f.message.split(": `")[1].split("`")[0]) for _, f in result.findings if f.severity > 0] == \
        [("schema.missing", "cache_write_tokens")]


def test_5xx_until_the_retries_run_out_is_a_finding_not_a_crash(openai: Callable[..., OpenAI]) -> None:
    service = openai(lambda request: httpx2.Response(
        503, json={"error": {"message": "The server is overloaded.", "type": "server_error", "param": None,
                             "code": None}}, headers={"retry-after": "0"}))
    [result] = run_live(["text-basic"], retries=1)
    # text-basic retries a failed live run once: 2 runs x 2 attempts each.
    assert len(service.requests) == 4
    assert result.outcome == "fail" and result.attempt == 2
    assert any(f.rule == "expect.http_status" and f.actual == 503 for _, f in result.findings)


def test_a_timeout_is_retried(openai: Callable[..., OpenAI]) -> None:
    service = openai(httpx2.ReadTimeout("slow"), text_answer)
    [result] = run_live(["text-basic"])
    assert result.outcome == "pass" and len(service.requests) == 2


@pytest.mark.parametrize(("value", "wait_s"), [
    ("7", 7.0), ("Thu, 01 Jan 2026 12:00:05 GMT", 5.0),
    ("Thursday, 01-Jan-26 12:00:05 GMT", 5.0), ("Thu Jan  1 12:00:05 2026", 5.0),  # the obsolete forms
    ("Thu, 01 Jan 2026 11:59:00 GMT", 0.0),  # a date passed: at once
    ("soon", None), ("-1", None), ("nan", None), ("", None)])
def test_retry_after_is_delay_seconds_or_an_http_date(value: str, wait_s: float | None) -> None:
    assert retry_after_s(value, datetime(2026, 1, 1, 12, tzinfo=UTC)) == wait_s


def test_steering_is_merged_into_the_live_request(openai: Callable[..., OpenAI]) -> None:
    service = openai(text_answer)
    run_live(["function-call"])
    assert json.loads(service.requests[0].content)["tool_choice"] == {"type": "function", "name": "get_weather"}


def test_what_cannot_run_live_is_unsupported_with_its_reason() -> None:
    results = {r.scenario.id: r for r in run_live(["upstream-failure", "client-disconnect", "mcp-call",
                                                   "chat-mcp-loop"])}
    assert all(r.outcome == "unsupported" for r in results.values())
    assert results["upstream-failure"].unsupported == "a live model cannot be made to fail on request"
    assert "which only the scripted model shows" in (results["client-disconnect"].unsupported or "")
    assert "--public-mcp calc=URL" in (results["mcp-call"].unsupported or "")
    assert "gateway-policy" in (results["chat-mcp-loop"].unsupported or "")


def test_a_scenario_without_a_live_section_is_unsupported_live(tmp_path: Path) -> None:
    text = (builtin_scenarios_dir() / "text-basic.yaml").read_text()
    (tmp_path / "text-basic.yaml").write_text(re.sub(r"^live:\n(?:  .*\n)*", "", text, flags=re.MULTILINE))
    [loaded] = load([tmp_path]).scenarios
    with open_session(TargetOptions(target="openai"), ()) as session:
        [result] = session.run([(loaded, "nonstream")])
    assert result.scenario.live is None
    assert "no `live:` section" in (result.unsupported or "")


def test_a_public_mcp_url_is_what_the_live_request_names(openai: Callable[..., OpenAI]) -> None:
    service = openai(text_answer)
    run_live(["mcp-call"], public_mcp=(("calc", "https://mcp.example.org/"),))
    tool = json.loads(service.requests[0].content)["tools"][0]
    assert tool["server_url"].startswith("https://mcp.example.org/r/") and tool["server_url"].endswith("/mcp")


def test_without_a_key_the_live_target_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        run_live(["text-basic"])


def test_a_live_recording_keeps_no_secret(openai: Callable[..., OpenAI], tmp_path: Path) -> None:
    """OpenAI echoes a bad key in its 401 message and names the organization in a header;
    neither reaches a golden file."""
    openai(lambda request: httpx2.Response(
        401, headers={"openai-organization": "org-AbCdEf0123456789xyz", "x-request-id": "req_1"},
        json={"error": {"message": f"Incorrect API key provided: {API_KEY}.", "type": "invalid_request_error",
                        "param": None, "code": "invalid_api_key"}}))
    results = run_live(["text-basic", "error-missing-model"], modes=("nonstream", "stream"))
    folder = goldens.record(tmp_path, "openai", results, target_name="openai", model="gpt-4.1-2025-04-14",
                            scripted=False, recorded_at=datetime.now(UTC), redactor=Redactor())
    written = "".join(path.read_text() for path in folder.rglob("*.json"))
    assert "invalid_api_key" in written
    for secret in (API_KEY, "sk-test", "org-AbCdEf", "Bearer"):
        assert secret not in written


def test_upstream_expectations_are_noted_as_unchecked_live(openai: Callable[..., OpenAI]) -> None:
    openai(text_answer)
    [result] = run_live(["text-basic"])
    assert [(f.severity, f.message) for _, f in result.findings if f.rule == "expect.upstream"] == [
        (0, "not checked: what reached the model is known only with the scripted one")]
