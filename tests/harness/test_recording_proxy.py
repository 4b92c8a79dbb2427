"""`parity proxy` as a user runs it (a child process on loopback) between the official SDKs and
the reference gateway (scripted upstream, the calc MCP fixture), and in front of misbehaving
targets; `parity replay` and `parity scenario from-capture` on what it captured."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from hostile_target import HostileTarget
from openai import OpenAI
from parity_process import DEADLINE_S, PARITY, ParityProcess, running
from proxy_process import LISTENING, captured_files, start_proxy
from sdk_flows import AGENT_TURNS, API_KEY, FLOW_TURNS, MCP_TOKEN, Transport, agent_run, sdk_flow, stable, stack_with

from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.traffic.from_capture import model_turns

@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ParityProcess]]:
    with running(tmp_path) as starting:
        yield starting


def check_exchange(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return child_process.run([str(PARITY), "check-exchange", "--current", *map(str, files)], capture_output=True,
                             text=True, timeout=120, check=False)


@pytest.mark.parametrize("transport", ["json", "stream", "websocket"])
def test_the_openai_sdk_gets_the_same_answers_through_the_proxy(transport: Transport,
                                                                start: Callable[..., ParityProcess],
                                                                tmp_path: Path) -> None:
    with stack_with(FLOW_TURNS * 2) as stack:
        gateway, mcp_url = f"{stack.reference_url}", stack.mcp["calc"].base_url + "/mcp"
        direct = sdk_flow(OpenAI(base_url=f"{gateway}/v1", api_key=API_KEY), mcp_url, transport)
        proxy, url = start_proxy(start, gateway, tmp_path / "captures")
        proxied = sdk_flow(OpenAI(base_url=f"{url}/v1", api_key=API_KEY), mcp_url, transport)
    assert [type(answer) for answer in proxied] == [type(answer) for answer in direct]
    assert stable(proxied) == stable(direct)
    socket = transport == "websocket"  # one connection, its five creates in one file
    files = captured_files(tmp_path / "captures", 1 if socket else 5)
    assert len(files) == (1 if socket else 5)
    checked = check_exchange(files)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for file in files:
        text = file.read_text()
        assert API_KEY not in text and MCP_TOKEN not in text, file
        recorded = json.loads(text)
        if socket:
            sent = [m["data"]["type"] for m in recorded["messages"] if m["direction"] == "sent"]
            assert sent == ["response.create"] * 5 and recorded["close"]["initiator"] == "client", file
        else:
            assert recorded["response"]["sse" if transport == "stream" else "body"], file
    assert "<redacted>" in files[0].read_text()  # the MCP tool's authorization, removed by value
    assert API_KEY not in proxy.output()
    proxy.wait_for(r"^0001-ws-v1-responses\.json: GET /v1/responses -> 101; 5 create\(s\), closed by the client"
                   if socket else r"^0005-post-v1-responses\.json: POST /v1/responses -> 200")
    assert not re.search(r"^\S+\.json: (error|warning) ", proxy.output(), re.MULTILINE), proxy.output()


@pytest.mark.parametrize("transport", ["json", "stream", "websocket"])
def test_the_agents_sdk_gets_the_same_run_through_the_proxy(transport: Transport, start: Callable[..., ParityProcess],
                                                            tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the openai-agents SDK comes with the test extra: .[test]")
    with stack_with(AGENT_TURNS * 2) as stack:
        direct = agent_run(f"{stack.reference_url}/v1", stack.mcp["calc"].base_url + "/mcp", transport)
        _, url = start_proxy(start, f"{stack.reference_url}", tmp_path / "captures")
        proxied = agent_run(f"{url}/v1", stack.mcp["calc"].base_url + "/mcp", transport)
        assert direct[0] == "42, and 18 °C."
        assert stable(proxied) == stable(direct)
        files = captured_files(tmp_path / "captures", 1 if transport == "websocket" else 2)
        checked = check_exchange(files)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert not any(API_KEY in file.read_text() for file in files)
        # Replayed against a reference gateway of its own, whose model plays the captured turns: the same contracts.
        replayed = child_process.run([str(PARITY), "replay", str(tmp_path / "captures"), "--target", "reference"],
                                     capture_output=True, text=True, timeout=120, check=False)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr


@contextmanager
def streaming(url: str) -> Iterator[httpx2.Response]:
    """A streamed request to `url`, its answer open until the block ends."""
    with httpx2.Client(timeout=DEADLINE_S) as client, \
            client.stream("POST", url, json={"model": "m", "input": "hi", "stream": True}) as answer:
        yield answer


def test_findings_of_a_misbehaving_stream_are_printed_while_it_flows(start: Callable[..., ParityProcess],
                                                                      tmp_path: Path) -> None:
    # `endless` numbers its events 0, 2, 2, ... and never ends: the finding must come mid-stream.
    with HostileTarget() as hostile:
        proxy, url = start_proxy(start, hostile.url("endless"), tmp_path / "captures")
        with streaming(f"{url}/v1/responses") as answer:
            chunks = answer.iter_bytes()
            received = next(chunks)
            while b"response.output_text.delta" not in received:
                received += next(chunks)
            found = proxy.wait_for(r"^0001-post-v1-responses\.json: error grammar\.sequence_numbers: .*$")
            assert next(chunks)  # the stream is still open: the finding came before its end
            assert not answer.is_closed
        assert "event 1 (response.output_text.delta) has sequence_number 2, expected 1" in found.group(0)


def test_json_findings_name_the_capture_and_the_rule(start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with HostileTarget() as hostile:
        proxy, url = start_proxy(start, hostile.url("invalid-utf8-json"), tmp_path / "captures", "--json")
        assert httpx2.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"}).status_code == 200
        line = json.loads(proxy.wait_for(r'^\{"capture": "0001-post-v1-responses.json".*$').group(0))
    assert line["rule"] == "wire.encoding" and line["severity"] == "error"


def test_with_json_standard_output_is_json_lines_from_the_first(start: Callable[..., ParityProcess],
                                                                tmp_path: Path) -> None:
    stdout = tmp_path / "proxy.stdout"
    proxy = start([str(PARITY), "proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--captures",
                   str(tmp_path / "captures"), "--json"], "proxy", stdout=stdout)
    url = proxy.wait_for(LISTENING)["url"]  # on standard error
    assert httpx2.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"}).status_code == 502
    proxy.stop()
    lines = [json.loads(line) for line in stdout.read_text().splitlines()]
    assert [(line["capture"], line["rule"]) for line in lines] == [("0001-post-v1-responses.json", "proxy.upstream")]


def test_the_stream_is_relayed_before_the_target_sends_its_end(start: Callable[..., ParityProcess],
                                                                tmp_path: Path) -> None:
    # `drip` sends response.created, then one byte at a time, without end: a buffering proxy
    # would never hand the client its first event.
    with HostileTarget() as hostile:
        _, url = start_proxy(start, hostile.url("drip"), tmp_path / "captures")
        with streaming(f"{url}/v1/responses") as answer:
            first = next(answer.iter_lines())
    assert first == "event: response.created"


@pytest.mark.parametrize("behaviour", ["close-silently", "not-http", "refused"])
def test_an_upstream_that_fails_is_a_502_in_openais_envelope_and_a_finding(
        behaviour: str, start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with HostileTarget() as hostile:
        upstream = "http://127.0.0.1:9" if behaviour == "refused" else hostile.url(behaviour)
        proxy, url = start_proxy(start, upstream, tmp_path / "captures")
        first = httpx2.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"}, timeout=DEADLINE_S)
        again = httpx2.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"}, timeout=DEADLINE_S)
        proxy.wait_for(r"^0002-post-v1-responses\.json: error proxy\.upstream: the upstream .* gave no answer")
    for answer in (first, again):  # the proxy keeps serving after a failure
        assert answer.status_code == 502
        error = answer.json()["error"]
        assert error["type"] == "server_error" and error["code"] == "upstream_unreachable" and error["message"]
    assert "proxy.upstream" in proxy.output()


def test_an_answer_the_upstream_breaks_off_is_cut_for_the_client_too_and_a_finding(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with HostileTarget() as hostile:
        proxy, url = start_proxy(start, hostile.url("reset"), tmp_path / "captures")
        for _ in range(2):  # the proxy keeps serving after the first
            with pytest.raises(httpx2.RemoteProtocolError):
                httpx2.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"}, timeout=DEADLINE_S)
        proxy.wait_for(r"^0002-post-v1-responses\.json: error proxy\.upstream: the upstream .* broke off its answer")
        capture = json.loads(captured_files(tmp_path / "captures", 2)[0].read_text())
    assert "broke off" in capture["transport_error"]


def capture_flow(start: Callable[..., ParityProcess], stack: Stack, captures: Path,
                 transport: Transport = "json") -> list[Path]:
    _, url = start_proxy(start, f"{stack.reference_url}", captures)
    sdk_flow(OpenAI(base_url=f"{url}/v1", api_key=API_KEY), stack.mcp["calc"].base_url + "/mcp", transport)
    return captured_files(captures, 1 if transport == "websocket" else 5)  # a connection is one file


def test_replay_maps_ids_and_finds_no_difference_against_the_same_behaviour(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with stack_with(FLOW_TURNS * 2) as stack:
        capture_flow(start, stack, tmp_path / "captures")
        same = child_process.run([str(PARITY), "replay", str(tmp_path / "captures"), "--target",
                                  f"{stack.reference_url}", "--json"], capture_output=True, text=True, timeout=120)
    assert same.returncode == 0, same.stdout + same.stderr
    lines = [json.loads(line) for line in same.stdout.splitlines()]
    assert [line["status"] for line in lines] == [200] * 5
    assert not any(line["differs"] for line in lines)


def test_replay_against_the_reference_gateway_plays_the_captured_model_turns(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with stack_with(FLOW_TURNS) as stack:
        capture_flow(start, stack, tmp_path / "captures", "stream")
        same = child_process.run([str(PARITY), "replay", str(tmp_path / "captures"), "--target", "reference"],
                                 capture_output=True, text=True, timeout=120, check=False)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.count(": same contract (status 200)") == 5


def test_replay_reports_each_exchange_whose_contract_differs(start: Callable[..., ParityProcess],
                                                             tmp_path: Path) -> None:
    with stack_with(FLOW_TURNS) as stack:
        capture_flow(start, stack, tmp_path / "captures")
    with stack_with([{"text": "No tools today."}] * 5) as other:
        differs = child_process.run([str(PARITY), "replay", str(tmp_path / "captures"), "--target",
                                     f"{other.reference_url}"], capture_output=True, text=True, timeout=120)
    assert differs.returncode == 1, differs.stdout + differs.stderr
    assert "0001-post-v1-responses.json: differs" in differs.stdout
    assert "golden.output" in differs.stdout


def test_a_capture_becomes_a_scenario_that_loads_and_passes(start: Callable[..., ParityProcess],
                                                            tmp_path: Path) -> None:
    with stack_with(FLOW_TURNS) as stack:
        files = capture_flow(start, stack, tmp_path / "captures")
        out = tmp_path / "captured.yaml"
        drafted = child_process.run([str(PARITY), "scenario", "from-capture", *map(str, files[1:3]), "-o", str(out)],
                                    capture_output=True, text=True, timeout=120, check=False)
        assert drafted.returncode == 0, drafted.stderr
        validated = child_process.run([str(PARITY), "validate", str(out)], capture_output=True, text=True, timeout=120,
                                      check=False)
        assert validated.returncode == 0, validated.stdout + validated.stderr
        text = out.read_text()
        scenario = yaml.safe_load(text)
        assert text.startswith("# Drafted by `parity scenario from-capture`: review before committing.")
        assert scenario["evidence"]["note"].startswith(f"captured from {stack.reference_url} on ")
        approve = scenario["steps"][1]
        assert approve["request"]["previous_response_id"] == "{{step1.response.id}}"
        assert approve["request"]["input"][0]["approval_request_id"].startswith("{{step1.output[")
        assert [item["type"] for item in scenario["steps"][0]["expect"]["output"]] == \
            ["mcp_list_tools", "mcp_approval_request"]
        assert scenario["steps"][0]["model"] == [{"call": {"tool": "add", "arguments": {"a": 4, "b": 5}}}]
        assert approve["model"] == [{"text": "4 + 5 = 9."}]  # the approved call was the model's in step 1
        assert scenario["mcp"] == ["calc"]
        assert scenario["steps"][0]["request"]["tools"][0]["server_url"] == "{{mcp.calc.url}}"
        assert MCP_TOKEN not in text
        ran = child_process.run([str(PARITY), "run", str(out), "--report-dir", str(tmp_path / "report")],
                                capture_output=True, text=True, timeout=300, check=False)
        assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.parametrize("transport", ["stream", "websocket"])
def test_a_streamed_conversation_becomes_a_scenario_that_passes(transport: Transport,
                                                                start: Callable[..., ParityProcess],
                                                                tmp_path: Path) -> None:
    with stack_with(FLOW_TURNS) as stack:
        capture_flow(start, stack, tmp_path / "captures", transport)
        out = tmp_path / "captured.yaml"
        drafted = child_process.run([str(PARITY), "scenario", "from-capture", str(tmp_path / "captures"), "-o",
                                     str(out), "--id", "streamed-flow"], capture_output=True, text=True, timeout=120)
        assert drafted.returncode == 0, drafted.stderr
        scenario = yaml.safe_load(out.read_text())
        assert scenario["modes"] == [transport]
        assert [step["stream"] for step in scenario["steps"]] == [True] * 5
        assert scenario["steps"][0]["expect"]["terminal"] == "response.completed"
        assert scenario["steps"][4]["request"]["input"][0]["call_id"] == "{{step4.output[0].call_id}}"
        ran = child_process.run([str(PARITY), "run", str(out), "--report-dir", str(tmp_path / "report"),
                                 "--mode", "all"], capture_output=True, text=True, timeout=300, check=False)
        assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.parametrize("command", [["replay", "--target", "http://127.0.0.1:9"], ["scenario", "from-capture"]])
def test_a_file_that_is_no_capture_is_a_usage_error_naming_it(command: list[str], tmp_path: Path) -> None:
    broken = tmp_path / "0001-post-v1-responses.json"
    broken.write_text('{"request": {"method": "POST"}}')
    ran = child_process.run([str(PARITY), command[0], *command[1:], str(broken)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert ran.returncode == 2
    assert f"{broken}: not a captured exchange" in ran.stderr


def _call(kind: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "name": name, "arguments": '{"a": 1}', **extra}


@pytest.mark.parametrize(("output", "turns"), [
    ([{"type": "mcp_list_tools"}, _call("mcp_call", "add"), _call("function_call", "get_weather")],
     [{"call": {"tool": "add", "arguments": {"a": 1}}}, {"call": {"tool": "get_weather", "arguments": {"a": 1}}}]),
    ([_call("function_call", "f"), _call("function_call", "g")],
     [{"calls": [{"tool": "f", "arguments": {"a": 1}}, {"tool": "g", "arguments": {"a": 1}}]}]),
    ([_call("mcp_call", "add", approval_request_id="mcpr_1"),
      {"type": "message", "content": [{"type": "output_text", "text": "5"}]}], [{"text": "5"}]),
], ids=["a-gateway-run-call-then-a-client-call-is-two-turns", "client-calls-in-a-row-are-one-turn",
        "an-approved-call-is-no-turn-of-its-own"])
def test_model_turns_follow_who_ran_each_call(output: list[dict[str, Any]], turns: list[dict[str, Any]]) -> None:
    assert model_turns({"output": output}) == turns
