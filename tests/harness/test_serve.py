"""`parity serve`: the scripted upstream, the MCP fixtures and the search fixture together, the settings it prints,
and `parity run --target URL` using exactly those fixtures (its console saying why an MCP
listing failed when the gateway cannot reach them)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from click.testing import CliRunner
from conftest import RunScenario
from parity_process import PARITY, ParityProcess, running
from starlette.types import Receive, Scope, Send

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.fixtures.upstream.app import UpstreamState, build_upstream_app
from responses_parity.harness.cli import main
from responses_parity.harness.engine.session import TargetOptions, open_session
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack, running_upstream
from responses_parity.harness.scenario.loader import builtin_scenarios_dir
from responses_parity.reference_impl import GatewayConfig

LISTENING = r"reference gateway listening on (?P<url>http://\S+)"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`parity serve --port 0 --json` running as a child process: the settings it printed."""
    with running(tmp_path_factory.mktemp("serve")) as start:
        process = start([str(PARITY), "serve", "--port", "0", "--json"], "serve")
        yield json.loads(process.wait_for(r"^\{.*\}$").group(0))


def start_reference(start: Any, upstream: str, config: dict[str, Any] | None, folder: Path) -> str:
    """A reference gateway as a child process, with its default settings plus `config`."""
    if config is None:
        args = ["--upstream", f"{upstream}/v1", "--store", ":memory:"]
    else:
        (folder / "gateway.yaml").write_text(yaml.safe_dump(config))
        args = ["--config", str(folder / "gateway.yaml")]
    gateway: ParityProcess = start([str(PARITY), "serve", "reference", "--port", "0", *args],
                                   "gateway-allowing" if config else "gateway")
    return gateway.wait_for(LISTENING)["url"]


def test_serve_prints_the_settings_of_the_upstream_and_fixtures_it_serves(served: dict[str, Any]) -> None:
    upstream = served["upstream"]
    assert served["model_base_url"] == f"{upstream}/v1"
    health = httpx2.get(f"{upstream}/__parity/health").json()
    assert health["mcp"] == {name: urls["url"].removesuffix("/mcp") for name, urls in served["mcp"].items()}
    assert sorted(served["mcp"]) == sorted(FIXTURE_SERVERS)
    for urls in served["mcp"].values():
        assert httpx2.get(urls["url"].replace("/mcp", "/__parity/runs/x/calls")).json() == {"calls": []}
    search = served["search"]["url"]
    assert health["search"] == search and served["search"]["endpoint"] == f"{search}/search"
    assert httpx2.post(f"{search}/search", json={"query": "q", "max_results": 1}).json() == {"results": []}
    ports = sorted([*(int(urls["url"].rsplit(":", 1)[1].split("/")[0]) for urls in served["mcp"].values()),
                    int(search.rsplit(":", 1)[1])])
    assert served["outbound_allow"] == {"ranges": ["127.0.0.1/32"], "ports": ports}
    config = GatewayConfig.from_mapping(served["reference_config"])
    assert (config.upstream_url, config.outbound_allow) == (served["model_base_url"], ("127.0.0.1/32",))
    assert config.web_search is not None and (config.web_search.provider, config.web_search.url) == ("http", search)
    assert served["run"] == f"parity run --target GATEWAY_URL --upstream {upstream}"


def test_a_run_uses_the_served_fixtures_and_says_why_a_gateway_could_not_reach_them(
        served: dict[str, Any], tmp_path: Path) -> None:
    calc = served["mcp"]["calc"]["url"].removesuffix("/mcp")
    with running(tmp_path) as start:
        blocking = start_reference(start, served["upstream"], None, tmp_path)
        allowing = start_reference(start, served["upstream"], served["reference_config"], tmp_path)
        code, output = invoke("run", "--target", blocking, "--upstream", served["upstream"], "-s", "mcp-call",
                              "--mode", "nonstream", "--report-dir", str(tmp_path / "blocked"))
        assert code == 1, output
        cause = output.splitlines()[2].strip()
        assert cause.startswith("ask: the gateway answered HTTP 424 (external_connector_error) \"The gateway did "
                                "not connect to the MCP server: 127.0.0.1 resolves to 127.0.0.1, which the "
                                "gateway's outbound policy blocks"), output
        assert f"no listing or call reached the MCP fixture(s) calc at {calc}/r/" in cause
        port = calc.rsplit(":", 1)[1]
        assert cause.endswith(f"if it has an outbound guard, allow 127.0.0.1/32 (port {port}); for the reference "
                              "gateway that is `outbound: {allow: [127.0.0.1/32]}`")
        assert "`answer.error`): the gateway answered HTTP 424" in (tmp_path / "blocked" / "report.md").read_text()

        code, output = invoke("run", "--target", allowing, "--upstream", served["model_base_url"], "-s", "mcp-call",
                              "-s", "mcp-call-sse", "--report-dir", str(tmp_path / "allowed"))
        assert code == 0, output
        assert "4 passed, 0 failed" in output


def test_the_own_gateway_path_without_the_web_search_setting_says_the_gateways_reason_and_blames_no_guard(
        served: dict[str, Any], tmp_path: Path) -> None:
    """The own-gateway guide's set-up (docs/guides/own-gateway.md), with the `web_search` line left
    out: the failing step leads with what the gateway said, folds what it caused under it, and says nothing of an
    outbound guard (the guard allowed the fixtures: the gateway refused the tool)."""
    config = {key: value for key, value in served["reference_config"].items() if key != "web_search"}
    with running(tmp_path) as start:
        gateway = start_reference(start, served["upstream"], config, tmp_path)
        code, output = invoke("run", "--target", gateway, "--upstream", served["upstream"], "-s",
                              "hosted-tools-max-tool-calls", "--mode", "nonstream", "--report-dir", str(tmp_path / "r"))
    assert code == 1, output
    lines = [line.strip() for line in output.splitlines()]
    failing = lines.index(next(line for line in lines if line.startswith("[1/1] fail")))
    assert lines[failing + 1] == ('capped: the gateway answered HTTP 400 (invalid_request_error) "This gateway has no '
                                  'web search provider configured, so it cannot run tools of type \'web_search\'."')
    assert lines[failing + 2].startswith("and 4 finding(s) it caused (expect.response_object, ")
    assert "outbound" not in output


def test_a_wrong_responses_path_is_one_early_error_naming_the_option(served: dict[str, Any], tmp_path: Path) -> None:
    with running(tmp_path) as start:
        gateway = start_reference(start, served["upstream"], served["reference_config"], tmp_path)
        code, output = invoke("run", "--target", gateway, "--upstream", served["upstream"], "--responses-path",
                              "/responses", "--report-dir", str(tmp_path / "r"))
    assert code == 2
    assert f"POST {gateway}/responses with an empty body answered HTTP 404" in " ".join(output.split())
    assert "give the path of its Responses API with --responses-path" in " ".join(output.split())
    assert "[1/" not in output  # no scenario ran


def test_serve_options_go_after_the_part_they_belong_to() -> None:
    code, output = invoke("serve", "--port", "9", "--json", "upstream")
    assert code == 2
    assert "--port, --json before 'upstream' applies to `parity serve` alone" in output


def test_a_script_file_that_cannot_be_used_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("turns: [{txt: hi}]")
    for command in (("serve",), ("serve", "upstream")):
        code, output = invoke(*command, "--script", str(script))
        assert code == 2
        assert f"Invalid value for --script: {script}: turns[0].txt: Extra inputs are not permitted" in output


def free_port_run(length: int) -> int:
    """The first of `length` consecutive loopback ports that are free now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + length < 65536 and all(_free(port) for port in range(first, first + length)):
            return first
    raise AssertionError(f"found no {length} consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_run_with_nothing_at_its_upstream_serves_the_fixtures_where_parity_serve_would() -> None:
    port = free_port_run(2 + len(FIXTURE_SERVERS))
    options = TargetOptions(target="http://127.0.0.1:9", upstream=f"http://127.0.0.1:{port}")
    with open_session(options, ["calc", "strings"]) as session:
        assert session.stack is not None
        assert session.stack.upstream_url == f"http://127.0.0.1:{port}"
        assert {name: fixture.base_url for name, fixture in session.stack.mcp.items()} == {
            "calc": f"http://127.0.0.1:{port + 1}", "strings": f"http://127.0.0.1:{port + 3}"}
        assert session.stack.search_url == f"http://127.0.0.1:{port + len(FIXTURE_SERVERS) + 1}"


def test_the_fixtures_keep_nothing_of_a_finished_run(run_scenario: RunScenario, stack: Stack) -> None:
    """`parity serve` outlives many runs: each run's logs go when it ends."""
    result = run_scenario((builtin_scenarios_dir() / "mcp-call.yaml").read_text())
    step = result.steps[0]
    assert result.outcome == "pass" and step.observed is not None and step.observed.mcp_calls
    assert step.exchange is not None
    run = step.exchange.request_body["tools"][0]["server_url"].split("/r/")[1].split("/")[0]
    assert httpx2.get(f"{stack.mcp['calc'].base_url}/__parity/runs/{run}/calls").json() == {"calls": []}
    assert httpx2.get(f"{stack.upstream_url}/__parity/runs/{run}").status_code == 404


def test_a_served_upstream_slow_to_answer_is_still_the_one_a_run_uses() -> None:
    """On a loaded machine a served upstream takes seconds to answer its health check: it is
    still found, not taken for absent (the run would then start another on its port)."""
    upstream = build_upstream_app(UpstreamState())

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await asyncio.sleep(3)  # a loaded machine's delay, longer than the check used to wait
        await upstream(scope, receive, send)

    server = ServerThread(slow).start()
    try:
        assert running_upstream(server.url) is not None
    finally:
        server.stop()


def test_starting_a_server_never_lets_uvicorns_info_lines_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each new server used to re-apply uvicorn's logging config (its loggers at INFO) before
    setting them to WARNING: a server running meanwhile printed INFO lines now and then."""
    levels: list[tuple[str, int]] = []
    set_level = logging.Logger.setLevel

    def recorded(logger: logging.Logger, level: int | str) -> None:
        levels.append((logger.name, logging.getLevelName(level) if isinstance(level, str) else level))
        set_level(logger, level)

    monkeypatch.setattr(logging.Logger, "setLevel", recorded)
    ServerThread(build_upstream_app(UpstreamState())).start().stop()
    assert [(name, level) for name, level in levels if name.startswith("uvicorn") and level < logging.WARNING] == []
