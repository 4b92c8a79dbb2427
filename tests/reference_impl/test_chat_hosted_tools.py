"""The chat surface offers the hosted tools the gateway's configuration names
(`chat.hosted_tools`), as it offers configured MCP servers: the model calls them, the answer
carries no file marker, and a configuration the gateway cannot run is refused at start."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from responses_parity.fixtures.upstream.script import run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import ConfigError, GatewayConfig, build_gateway_app

from scripted_runs import scripted, upstream_requests


def serve(stack: Stack, **settings: Any) -> ServerThread:
    return ServerThread(build_gateway_app(reference_config(stack.upstream_url or "", **settings))).start()


@pytest.fixture(scope="module")
def store_with_paris(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A gateway store (its path) holding a vector store (its id) with one file (its id)."""
    path = str(tmp_path_factory.mktemp("chat-hosted") / "store.sqlite3")
    server = serve(stack, store_path=path)
    try:
        client = OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
        uploaded = client.files.create(file=("paris.txt", io.BytesIO(b"Paris is the capital of France.")),
                                       purpose="assistants")
        return path, client.vector_stores.create(file_ids=[uploaded.id]).id, uploaded.id
    finally:
        server.stop()


@pytest.fixture
def chat_gateway(stack: Stack, store_with_paris: tuple[str, str, str]) -> Iterator[str]:
    path, store_id, _ = store_with_paris
    server = serve(stack, store_path=path,
                   chat_hosted_tools=({"type": "file_search", "vector_store_ids": [store_id]},))
    try:
        yield server.url
    finally:
        server.stop()


def test_a_chat_completion_runs_the_configured_file_search(stack: Stack, chat_gateway: str,
                                                           store_with_paris: tuple[str, str, str]) -> None:
    file_id = store_with_paris[2]
    run = scripted(stack, [{"call": {"tool": "file_search", "arguments": {"queries": ["capital of France"]}}},
                           {"text": f"Paris<|{file_id}|>."}])
    client = OpenAI(base_url=f"{chat_gateway}/v1", api_key="k", max_retries=0)
    completion = client.chat.completions.create(model="m", messages=[
        {"role": "user", "content": f"Capital of France? {run_marker(run, 0)}"}])
    message = completion.choices[0].message
    assert message.content == "Paris." and message.annotations == []
    requests = upstream_requests(stack, run)
    assert requests[0]["offered_tools"] == ["file_search"]
    assert f"<|{file_id}|>" in requests[1]["tool_outputs"][0]


@pytest.mark.parametrize(("tools", "message"), [
    ([{"type": "code_interpreter"}], r"chat.hosted_tools\[0\].type: expected file_search or a web_search type"),
    ([{"type": "file_search"}], r"chat.hosted_tools\[0\].vector_store_ids: expected a list"),
    ([{"type": "file_search", "vector_store_ids": [], "size": 3}], r"chat.hosted_tools\[0\]: unknown field"),
])
def test_a_settings_file_names_the_hosted_tool_it_cannot_use(tools: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GatewayConfig.from_mapping({"upstream": {"url": "http://x/v1"}, "chat": {"hosted_tools": tools}})


@pytest.mark.parametrize(("tool", "message"), [
    ({"type": "web_search"}, r"chat.hosted_tools\[0\]: a web_search tool needs a web search provider"),
    ({"type": "file_search", "vector_store_ids": [], "max_num_results": 99},
     r"chat.hosted_tools\[0\].max_num_results: "),
])
def test_the_gateway_refuses_to_start_with_a_hosted_tool_it_cannot_run(tool: dict[str, Any],
                                                                        message: str) -> None:
    config = GatewayConfig(upstream_url="http://127.0.0.1:9/v1", chat_hosted_tools=(tool,))
    with pytest.raises(ConfigError, match=message):
        build_gateway_app(config)
