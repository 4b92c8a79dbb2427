"""No secret a run knows reaches an artifact or the console, even from a gateway that echoes
it: the API key, a header value, an MCP tool's authorization and header values (as written and
as rendered), none of which looks like a secret. And the rules of the redactor itself."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner
from conftest import write_scenario
from faulty_gateways import EchoingGateway

from responses_parity.harness.cli import main
from responses_parity.harness.commands import console
from responses_parity.harness.engine.session import TargetOptions, open_session
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.scenario.model import Scenario
from responses_parity.harness.wire import redaction
from responses_parity.harness.wire.redaction import REDACTED, Redactor, tool_secrets
from responses_parity.reference_impl import build_gateway_app

pytest_plugins = ["pytester"]

API_KEY = "Zq9plainKEY777"
TENANT_TOKEN = "tenantsecret888"
MCP_AUTHORIZATION = "mcpplainAUTH555"
MCP_HEADER = "parity-model-hdr444"
"""What the scenario's `{{model}}-hdr444` renders to: known only from the request sent."""
SECRETS = (API_KEY, TENANT_TOKEN, MCP_AUTHORIZATION, MCP_HEADER)
ECHOED = "ECHO(auth=<redacted>;tenant=<redacted>;mcp=<redacted>;mcp-headers=<redacted>)"
"""What is left of the echo once the secrets are removed: proof that the gateway echoed them."""

MCP_TOOL = """
        - type: mcp
          server_label: calc
          server_url: "{{mcp.calc.url}}"
          authorization: "mcpplainAUTH555"
          headers: {X-Calc-Key: "{{model}}-hdr444"}
          require_approval: never
"""
SCENARIO = """
id: echoed-secrets
title: a gateway shows back what it was sent, in its answer and in its error
evidence: {recordings: [stream-text__openllmetry__1]}
mcp: [calc]
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "Hi"
      tools:""" + MCP_TOOL + """
    model: [{text: "Hello"}]
    expect: {status: completed, response: {output: [{type: mcp_list_tools}, {content: [{text: "Hello"}]}]}}
  - id: refused
    request:
      model: "{{model}}"
      input: "Hi"
      temperature: 7
      tools:""" + MCP_TOOL + """
    expect: {http_status: 400, error: {message_contains: "never says this"}}
"""


@pytest.fixture
def echoing_gateway(stack: Stack) -> Iterator[str]:
    assert stack.upstream_url is not None
    server = ServerThread(EchoingGateway(build_gateway_app(reference_config(stack.upstream_url)))).start()
    try:
        yield server.url
    finally:
        server.stop()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def leaks(folder: Path) -> list[str]:
    """Each file under `folder` that holds a secret, with the secret."""
    return [f"{path}: {secret}" for path in folder.rglob("*") if path.is_file()
            for secret in SECRETS if secret.encode() in path.read_bytes()]


def echoes(folder: Path) -> list[Path]:
    """The files under `folder` that show the echo, secrets removed."""
    return [path for path in folder.rglob("*") if path.is_file() and ECHOED.encode() in path.read_bytes()]


def test_secrets_a_gateway_echoes_reach_no_report_golden_baseline_or_console(
        tmp_path: Path, stack: Stack, echoing_gateway: str) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    write_scenario(scenarios, SCENARIO)
    reports, recorded, goldens, baselines = (tmp_path / name
                                             for name in ("reports", "recorded", "goldens", "baselines"))
    target = ("--target", echoing_gateway, "--upstream", str(stack.upstream_url), "--api-key", API_KEY,
              "--header", f"X-Tenant-Token: {TENANT_TOKEN}")
    code, run_output = invoke("run", str(scenarios), "--report-dir", str(reports), *target, "--json", "--verbose",
                              "--junitxml", str(reports / "junit.xml"))
    assert code == 1, run_output
    code, record_output = invoke("record", str(scenarios), "--name", "echoing", "--golden-dir", str(goldens),
                                 "--report-dir", str(recorded), *target)
    assert code == 1, record_output
    code, baseline_output = invoke("baseline", "update", "--results", str(reports / "results.json"),
                                   "--output", str(baselines / "echoing.json"))
    assert code == 0, baseline_output
    for folder in (reports, recorded, goldens, baselines):
        assert not leaks(folder)
    assert {path.name for path in echoes(reports)} >= {"results.json", "results.jsonl", "report.md",
                                                       "echoed-secrets__stream__ask.json",
                                                       "echoed-secrets__nonstream__refused.json"}
    assert echoes(goldens) and echoes(baselines)
    assert any(ECHOED in (failure.text or "") for failure in ElementTree.parse(reports / "junit.xml").iter("failure"))
    console = run_output + record_output + baseline_output
    assert [secret for secret in SECRETS if secret in console] == []
    assert ECHOED in run_output and ECHOED in record_output
    sent = json.loads((reports / "exchanges" / "echoed-secrets__nonstream__ask.json").read_text())["request"]["body"]
    assert sent["tools"][0]["authorization"] == REDACTED and sent["tools"][0]["headers"] == {"X-Calc-Key": REDACTED}


def test_the_pytest_plugin_and_its_junit_xml_show_no_secret_a_gateway_echoes(
        pytester: pytest.Pytester, stack: Stack, echoing_gateway: str) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makefile(".yaml", echoed=SCENARIO)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest("--parity-target", echoing_gateway, "--parity-upstream", str(stack.upstream_url),
                                "--parity-api-key", API_KEY, "--parity-header", f"X-Tenant-Token: {TENANT_TOKEN}",
                                "--parity-mode", "nonstream", f"--junitxml={junit}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    shown = result.stdout.str() + result.stderr.str() + junit.read_text()
    assert [secret for secret in SECRETS if secret in shown] == []
    failure = ElementTree.parse(junit).find(".//failure")
    assert failure is not None and ECHOED in (failure.text or "") and ECHOED in result.stdout.str()


def test_a_known_secret_is_removed_as_it_is_json_escaped_and_percent_encoded() -> None:
    redactor = Redactor()
    secret = 'tok"en/ü42'
    redactor.add(secret)
    echoed = f"plain {secret}, json {json.dumps(secret)}, url ?t=tok%22en%2F%C3%BC42"
    assert redactor.redact_text(echoed) == f'plain {REDACTED}, json "{REDACTED}", url ?t={REDACTED}'


def test_the_token_of_a_credential_and_the_parts_of_a_basic_one_are_secrets_too() -> None:
    redactor = Redactor()
    redactor.add("Bearer plainToken42", "Basic " + base64.b64encode(b"alice:hunter2pass").decode())
    assert redactor.redact_text("token plainToken42 user alice:hunter2pass password hunter2pass") == \
        f"token {REDACTED} user {REDACTED} password {REDACTED}"


@pytest.mark.parametrize("looks_secret", ["sk-live0123456789", "Bearer abcdefgh.1234", "org-AbCdEf0123456789",
                                          "proj_AbCdEf0123456789"])
def test_what_looks_like_a_key_token_or_openai_id_is_removed_unknown_and_anywhere_in_a_text(looks_secret: str) -> None:
    def stream(key: str) -> str:
        return f'data: {{"type":"error","message":"denied for {key}, try again"}}\n\n'

    assert Redactor().redact_text(stream(looks_secret)) == stream(REDACTED)


def test_values_too_short_to_be_secrets_are_kept() -> None:
    redactor = Redactor()
    redactor.add("a", "yes", "12345", None)
    assert redactor.redact_text("a yes 12345") == "a yes 12345"


def test_mcp_authorization_and_header_values_are_learned_and_removed_from_requests() -> None:
    request = {"tools": [{"type": "mcp", "authorization": "oauthPlain99", "headers": {"X-Key": "hdrPlain99"}},
                         {"type": "function", "name": "headers"}]}
    redactor = Redactor()
    redactor.add(*tool_secrets(request))
    assert redactor.redact(request)["tools"] == [
        {"type": "mcp", "authorization": REDACTED, "headers": {"X-Key": REDACTED}},
        {"type": "function", "name": "headers"}]
    assert redactor.redact_text("got oauthPlain99 and hdrPlain99") == f"got {REDACTED} and {REDACTED}"


def test_the_admin_key_of_the_reference_gateways_a_session_starts_is_a_secret() -> None:
    with open_session(TargetOptions(), ()) as session:
        assert session.stack is not None
        assert session.redactor.redact_text(f"key {session.stack.admin_key}") == f"key {REDACTED}"


def test_log_lines_written_during_a_run_pass_through_the_redactor(capsys: pytest.CaptureFixture[str]) -> None:
    with console.redacted_consoles() as redactor:
        redactor.add("tenantsecret888")
        handler = logging.StreamHandler()  # as uvicorn's: bound to the standard error of the moment
        logger = logging.getLogger("tests.redaction")
        logger.addHandler(handler)
        try:
            logger.warning("the upstream said tenantsecret888")
        finally:
            logger.removeHandler(handler)
    assert capsys.readouterr().err == f"the upstream said {REDACTED}\n"


def test_a_profiled_gateway_log_holds_no_secret_once_its_session_ends() -> None:
    options = TargetOptions(target=str(Path(__file__).parent / "profiles" / "reference-process.yaml"),
                            api_key="Zq9plainKEY777")
    with open_session(options, set()) as session:
        assert session.gateway is not None
        log = session.gateway.log
        with log.open("a") as sink:  # what a gateway that logs its requests' headers would write
            sink.write(f"\nheaders: {session.target.headers}\n")
    text = log.read_text()
    assert "Zq9plainKEY777" not in text and "sk-parity-" not in text
    assert f"'Authorization': '{REDACTED}'" in text


def test_an_exchanges_own_secrets_are_removed_within_it_and_nowhere_else() -> None:
    run = Redactor()
    run.add("runSecret123")
    exchange = run.within("mcpLocal456")
    run.add("laterSecret789")  # the run's secrets learnt afterwards count within the exchange too
    assert exchange.redact_text("runSecret123 mcpLocal456 laterSecret789") == f"{REDACTED} {REDACTED} {REDACTED}"
    assert run.redact_text("mcpLocal456 runSecret123") == f"mcpLocal456 {REDACTED}"
    assert not run.knows("mcpLocal456") and run.knows("runSecret123")


def test_secrets_that_overlap_in_a_text_are_removed_as_one() -> None:
    redactor = Redactor()
    redactor.add("abcdef12", "ef12gh34")
    assert redactor.redact_text("x abcdef12gh34 y abcdef12ef12gh34") == f"x {REDACTED} y {REDACTED}{REDACTED}"


def test_the_secrets_a_request_body_holds_are_its_mcp_tools_authorization_and_header_values() -> None:
    body = {"metadata": {"api_key": "completed"}, "input": [{"type": "message", "content": "authorization"}],
            "tools": [{"type": "mcp", "authorization": "oauth1", "headers": {"X-Key": "hdr1"}},
                      {"type": "function", "name": "f", "authorization": "not-a-tool-secret"}],
            "prompt": {"variables": {"tool": {"type": "mcp", "authorization": "oauth2"}}}}
    assert sorted(tool_secrets(body)) == ["hdr1", "oauth1", "oauth2"]


def test_a_scenarios_secrets_are_the_values_it_puts_where_secrets_go_and_no_others() -> None:
    upstream = {"mcp_authorization": "expectedAuth1"}
    scenario = Scenario.model_validate({
        "id": "placed", "title": "t", "evidence": {"recordings": ["stream-text__openllmetry__1"]}, "mcp": ["calc"],
        "steps": [{"id": "ask", "headers": {"Authorization": "Bearer stepToken1", "X-Trace": "traceValue1"},
                   "wait": {"until": {"upstream": {"mcp_authorization": "waitedAuth1"}}},
                   "request": {"metadata": {"api_key": "completed"}, "authorization": "bodyValue1",
                               "tools": [{"type": "mcp", "authorization": "toolAuth1", "headers": {"X-K": "hdr1"}}]},
                   "expect": {"upstream": upstream, "variants": [{"name": "v", "expect": {"upstream": {
                       "mcp_authorization": "variantAuth1"}}}]}}]})
    assert sorted(scenario.secrets()) == sorted(["Bearer stepToken1", "toolAuth1", "hdr1", "expectedAuth1",
                                                 "variantAuth1", "waitedAuth1"])


def test_a_body_value_under_a_secret_looking_key_is_blanked_where_it_sits_and_nowhere_else(tmp_path: Path) -> None:
    """`metadata: {api_key: completed}` in a scenario does not make `completed` a secret of the
    run: every later `"status": "completed"` stays in the report."""
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    write_scenario(scenarios, """
        id: metadata-key
        title: a metadata value under a key named like a credential
        evidence: {recordings: [stream-text__openllmetry__1]}
        modes: [nonstream]
        steps:
          - id: ask
            request: {model: "{{model}}", input: "Hi", metadata: {api_key: "completed"}}
            model: [{text: "Hello"}]
            expect: {absent_text: ["Hello"]}  # fails, so that the exchange is written
    """)
    code, output = invoke("run", str(scenarios), "--report-dir", str(tmp_path / "reports"))
    assert code == 1, output
    exchange = json.loads((tmp_path / "reports" / "exchanges" / "metadata-key__nonstream__ask.json").read_text())
    assert exchange["request"]["body"]["metadata"] == {"api_key": REDACTED}
    assert exchange["response"]["body"]["status"] == "completed"


def test_a_gateways_log_is_rewritten_a_line_at_a_time_without_its_secrets(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A gateway writes its log as it likes: each line is redacted, and a line too long to read
    whole is left out, named by its size, rather than read whole or written unredacted."""
    monkeypatch.setattr(redaction, "MAX_LOG_LINE_BYTES", 64)
    log = tmp_path / "gateway.log"
    secret = "tenant-key-0123456789"
    log.write_bytes(f"started with key {secret}\n".encode() + b"x" * 100 + secret.encode() + b"\n"
                    + f"Bearer {secret} refused\n".encode() + b"\xff no newline at the end")
    redactor = Redactor()
    redactor.add(secret)
    redactor.rewrite_log(log)
    assert log.read_text().splitlines() == [
        f"started with key {REDACTED}",
        f"[a line of {100 + len(secret) + 1} bytes, longer than the 64 a log line is redacted up to, left out]",
        f"Bearer {REDACTED} refused",
        "\ufffd no newline at the end"]
    assert [path.name for path in tmp_path.iterdir()] == ["gateway.log"]
