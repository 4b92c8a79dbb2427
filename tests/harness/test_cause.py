"""A step that failed on an error answer says what the gateway answered first among its
findings, with what it caused folded under it, and names the outbound guard only where the
evidence points there; a step that passes, or that asked for the error, gets nothing more."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import RunScenario

from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.judge.cause import RULE, explained
from responses_parity.harness.model.findings import Finding, Kind, Severity
from responses_parity.harness.model.observed import Observed
from responses_parity.harness.scenario.expectations import Expect
from responses_parity.harness.scenario.fixtures import McpFixture
from responses_parity.harness.wire.exchange import Exchange
from responses_parity.reference_impl import GatewayConfig, build_gateway_app

CALC = McpFixture("calc", "http://127.0.0.1:8643", "0123456789")
REQUEST = {"model": "m", "input": "2+3?", "tools": [{"type": "mcp", "server_label": "calc", "server_url": CALC.url}]}
REFUSED = {"error": {"message": "cannot connect to 127.0.0.1", "type": "external_connector_error", "code": None,
                     "param": "tools"}}
LISTED = {"method": "tools/list", "tool": None, "fixture": "calc"}
FAILED = Finding(Kind.STATUS, Severity.ERROR, "expect.http_status", "HTTP status 424, expected 200")


def mcp_failure(exchange: Exchange, observed: Observed) -> Finding | None:
    """The finding that leads a failed step's findings, if any."""
    findings = explained([FAILED], exchange, None, observed, {"calc": CALC})
    return findings[0] if findings[0].rule == RULE else None


def failed_listing_stream(error: str) -> str:
    item = {"id": "mcpl_1", "type": "mcp_list_tools", "server_label": "calc", "tools": [], "error": error}
    response = {"id": "resp_1", "object": "response", "status": "failed", "output": [item],
                "error": {"code": "http_error", "message": error}}
    return f'event: response.failed\ndata: {{"type": "response.failed", "response": {json.dumps(response)}}}\n\n'


def test_an_error_answer_with_no_request_at_the_fixture_says_the_gateway_could_not_reach_it() -> None:
    exchange = Exchange("POST", "http://gw/v1/responses", REQUEST, status=424, body=REFUSED)
    finding = mcp_failure(exchange, Observed())
    assert finding is not None
    assert (finding.kind, finding.severity, finding.rule) == (Kind.STATUS, Severity.ERROR, RULE)
    assert finding.message == (
        'the gateway answered HTTP 424 (external_connector_error) "cannot connect to 127.0.0.1"; no listing or call '
        f"reached the MCP fixture(s) calc at {CALC.url}: the gateway most likely could not reach them; if it has an "
        "outbound guard, allow 127.0.0.1/32 (port 8643); for the reference gateway that is "
        "`outbound: {allow: [127.0.0.1/32]}`")
    assert finding.key == f"{RULE} unreached calc"


def test_a_stream_quotes_the_failed_listing_and_a_long_message_is_cut() -> None:
    exchange = Exchange("POST", "http://gw/v1/responses", REQUEST | {"stream": True}, status=200,
                        sse=failed_listing_stream("x" * 400))
    finding = mcp_failure(exchange, Observed())
    assert finding is not None
    assert finding.message.startswith(f'the gateway answered an mcp_list_tools item for \'calc\' with the error '
                                      f'"{"x" * 300}..."; no listing or call reached')


def test_a_fixture_the_gateway_reached_is_named_instead_of_a_cause() -> None:
    exchange = Exchange("POST", "http://gw/v1/responses", REQUEST, status=500, body=REFUSED)
    finding = mcp_failure(exchange, Observed(mcp_calls=[LISTED]))
    assert finding is not None
    assert finding.message == ('the gateway answered HTTP 500 (external_connector_error) "cannot connect to '
                               '127.0.0.1"; its requests reached the MCP fixture(s) calc')


def test_an_error_that_names_another_cause_is_quoted_without_blaming_the_outbound_guard() -> None:
    """The gateway says why (it has no web search provider): its MCP fixture was not reached
    because the request was refused, not because a guard stopped it."""
    refused = {"error": {"message": "This gateway has no web search provider configured, so it cannot run tools of "
                                    "type 'web_search'.", "type": "invalid_request_error", "code": None,
                         "param": "tools"}}
    exchange = Exchange("POST", "http://gw/v1/responses", REQUEST, status=400, body=refused)
    finding = mcp_failure(exchange, Observed())
    assert finding is not None
    assert finding.message == ('the gateway answered HTTP 400 (invalid_request_error) "This gateway has no web search '
                               'provider configured, so it cannot run tools of type \'web_search\'."')


def test_the_findings_an_error_answer_caused_are_folded_under_it_and_its_own_faults_are_not() -> None:
    exchange = Exchange("POST", "http://gw/v1/responses", {"model": "m", "input": "hi"}, status=500, body=REFUSED)
    caused = Finding(Kind.RESPONSE_FIELD, Severity.ERROR, "expect.response_object", "no Response object")
    own = Finding(Kind.SCHEMA, Severity.ERROR, "schema.error", "the envelope lacks `code`")
    lead, *rest = explained([caused, own], exchange, None, Observed(), {"calc": CALC})
    assert lead.rule == RULE and lead.message.startswith("the gateway answered HTTP 500 (external_connector_error)")
    assert [(f.rule, f.consequence) for f in rest] == [("expect.response_object", True), ("schema.error", False)]


@pytest.mark.parametrize(("exchange", "expect"), [
    (Exchange("POST", "http://gw/v1/responses", REQUEST, status=200,
              body={"object": "response", "status": "completed", "output": []}), None),
    (Exchange("POST", "http://gw/v1/responses", REQUEST, status=424, body=REFUSED),
     Expect.model_validate({"http_status": 424})),
    (Exchange("POST", "http://gw/v1/responses", REQUEST, status=424, body=REFUSED),
     Expect.model_validate({"error": {"type": "invalid_request_error"}})),
], ids=["no error in the answer", "the step asks for the status", "the step asks for an error"])
def test_nothing_is_said_of_an_answer_without_an_error_or_of_an_error_the_step_asked_for(
        exchange: Exchange, expect: Expect | None) -> None:
    assert explained([FAILED], exchange, expect, Observed(), {"calc": CALC}) == [FAILED]


SCENARIO = """
id: mcp-blocked
title: an MCP call the gateway cannot make
evidence: {recordings: [stream-text__openllmetry__1]}
mcp: [calc]
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "2+3?"
      tools: [{type: mcp, server_label: calc, server_url: "{{mcp.calc.url}}", require_approval: never}]
    model: [{call: {tool: add, arguments: {a: 2, b: 3}}}, {text: "5"}]
    expect: EXPECT
"""


@pytest.fixture(scope="module")
def guarded_gateway(stack: Stack) -> Iterator[str]:
    """The reference gateway with its default outbound guard, which blocks loopback."""
    server = ServerThread(build_gateway_app(GatewayConfig(upstream_url=f"{stack.upstream_url}/v1"))).start()
    yield server.url
    server.stop()


@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_the_cause_comes_first_among_a_failed_steps_findings(run_scenario: RunScenario, guarded_gateway: str,
                                                              mode: str) -> None:
    result = run_scenario(SCENARIO.replace("EXPECT", "{status: completed, output: [mcp_list_tools, mcp_call, "
                                                     "message]}"), mode=mode, target_url=guarded_gateway)
    assert result.outcome == "fail"
    first = result.steps[0].findings[0]
    assert first.rule == RULE and "the gateway most likely could not reach them" in first.message
    assert [finding.rule for finding in result.steps[0].findings].count(RULE) == 1


def test_a_step_that_expects_the_failure_gets_no_cause(run_scenario: RunScenario, guarded_gateway: str) -> None:
    result = run_scenario(SCENARIO.replace("EXPECT", "{http_status: 424}").replace(
        "model: [{call: {tool: add, arguments: {a: 2, b: 3}}}, {text: \"5\"}]", "model: []"),
        target_url=guarded_gateway)
    assert result.outcome == "pass", result.findings
    assert all(finding.rule != RULE for _, finding in result.findings)
