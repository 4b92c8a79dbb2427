"""What a gateway sends the model is held to what the model's API takes: a gateway that adds a
parameter OpenAI does not know (as smg adds `top_k`) gets a finding on the step that names the
parameter and what OpenAI answers to it, though the scripted model answered and the rest of the
scenario was judged."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from faulty_gateways import RewritingRequests

from responses_parity.fixtures.upstream.app import build_upstream_app
from responses_parity.harness.cli import main
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.reference_impl import build_gateway_app


def with_top_k(body: dict[str, Any]) -> dict[str, Any]:
    return body | {"top_k": 20}


@pytest.fixture
def gateway_adding_top_k() -> Iterator[tuple[str, str]]:
    """The reference gateway whose requests to the model gain `top_k` on the way (the upstream
    sees them with it, as it would see smg's): its URL and the upstream's."""
    upstream = ServerThread(RewritingRequests(build_upstream_app(), with_top_k)).start()
    gateway = ServerThread(build_gateway_app(reference_config(upstream.url))).start()
    yield gateway.url, upstream.url
    gateway.stop()
    upstream.stop()


def test_a_gateway_that_adds_top_k_gets_a_finding_naming_openais_refusal(
        gateway_adding_top_k: tuple[str, str], tmp_path: Path) -> None:
    gateway, upstream = gateway_adding_top_k
    result = CliRunner().invoke(main, ["run", "--target", gateway, "--upstream", upstream, "-s", "text-basic",
                                       "--mode", "nonstream", "--report-dir", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "model request 1 carried `top_k`, which OpenAI refuses: HTTP 400 unknown_parameter, \"Unknown " \
           "parameter: 'top_k'. Did you mean 'top_p'?\"" in text
    assert "1 failed" in text
    [run] = json.loads((tmp_path / "results.json").read_text())["results"]
    errors = [finding for step in run["steps"] for finding in step["findings"] if finding["severity"] == "error"]
    assert len(errors) == 1 and "carried `top_k`" in errors[0]["message"]  # the rest of the step held


def with_file_search_taking(parameters: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The gateway's requests to the model with its `file_search` function declared otherwise."""
    def rewrite(body: dict[str, Any]) -> dict[str, Any]:
        tools = [tool | {"parameters": parameters} if tool.get("name") == "file_search" else tool
                 for tool in body.get("tools") or []]
        return body | ({"tools": tools} if tools else {})
    return rewrite


def test_a_script_the_offered_function_cannot_take_is_a_step_that_could_not_run_not_a_gateway_fault(
        tmp_path: Path) -> None:
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    upstream = ServerThread(RewritingRequests(build_upstream_app(), with_file_search_taking(parameters))).start()
    gateway = ServerThread(build_gateway_app(reference_config(upstream.url))).start()
    try:
        result = CliRunner().invoke(main, ["run", "--target", gateway.url, "--upstream", upstream.url, "-s",
                                           "file-search", "--mode", "nonstream", "--report-dir", str(tmp_path)],
                                    catch_exceptions=False)
    finally:
        gateway.stop()
        upstream.stop()
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "could not run: the script cannot be said in the gateway's terms: turn 0 calls file_search with " \
           "{queries} (as OpenAI's model would), but the gateway offered file_search(text: string): `queries` fits " \
           "none of its parameters; it requires `text`, which the script does not give" in text
    assert "0 failed, 1 could not run" in text
