"""Pieces of the chat surface: final_only chunking, settings, and lenient tool listings."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl.chat.sink import final_only_chunks, pieces
from responses_parity.reference_impl.config import ConfigError, GatewayConfig
from responses_parity.reference_impl.mcp_servers import McpConnector, McpServer

TEXT = "naïve café — 🌍🌍🌍 " * 12 + "done"


def test_pieces_stay_within_64_bytes_and_never_split_a_character() -> None:
    parts = list(pieces(TEXT))
    assert "".join(parts) == TEXT
    assert all(len(part.encode()) <= 64 for part in parts)
    assert all(len(part.encode()) > 60 for part in parts[:-1])


def test_a_final_only_stream_is_an_openai_chunk_stream() -> None:
    completion = {"id": "chatcmpl-1", "created": 1, "model": "m", "service_tier": "default",
                  "system_fingerprint": None, "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
                  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": TEXT}}]}
    frames = b"".join(final_only_chunks(completion, include_usage=True)).decode().split("\n\n")
    datas = [frame.removeprefix("data: ") for frame in frames if frame]
    assert datas[-1] == "[DONE]"
    chunks = [json.loads(data) for data in datas[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1] if c["choices"]) == TEXT
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]["total_tokens"] == 3


@pytest.mark.parametrize(("settings", "message"), [
    ({"chat_max_rounds": 51}, "chat.max_rounds: must be 1..50"),
    ({"chat_max_rounds": 0}, "chat.max_rounds: must be 1..50"),
    ({"tool_cache_ttl_s": 10}, "needs a secret"),
    ({"outbound_allow": ("not-a-range",)}, "outbound.allow"),
])
def test_settings_are_checked(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GatewayConfig(upstream_url="http://127.0.0.1:1/v1", **settings)


def test_a_settings_file_names_an_unknown_field() -> None:
    with pytest.raises(ConfigError, match=r"chat: unknown field\(s\) \['max_round'\]"):
        GatewayConfig.from_mapping({"upstream": {"url": "http://x/v1"}, "chat": {"max_round": 3}})


def test_malformed_tools_are_dropped_and_an_empty_server_is_a_warning(stack: Stack,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="responses_parity.reference_impl")
    shoddy = McpServer("shoddy", stack.mcp["shoddy"].for_run("listing").url)
    assert asyncio.run(McpConnector(10).list_tools(shoddy)) == []
    messages = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("responses_parity")]
    assert messages == [
        ("INFO", "MCP server 'shoddy': dropping tool 'no_schema', its inputSchema is missing"),
        ("INFO", "MCP server 'shoddy': dropping tool 'null_schema', its inputSchema is not an object (NoneType)"),
        ("INFO", "MCP server 'shoddy': dropping tool 'array_schema', its inputSchema is not an object (list)"),
        ("WARNING", "MCP server 'shoddy' offers no valid tool (3 listed)"),
    ]
