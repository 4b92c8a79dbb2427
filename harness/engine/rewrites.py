"""Request rewrites a target profile may ask for, where its gateway offers an equivalent of
what a scenario sends: they are applied to every request after its placeholders are filled,
and reports list them, since a rewrite hides a difference from OpenAI on purpose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..scenario.fixtures import McpFixture
from ..scenario.placeholders import render


class Rewrites(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mcp_server_url: str | None = Field(
        default=None, description="Replaces the `server_url` of request-level MCP tools that point at a fixture, "
                                  "for a gateway that reaches MCP servers only by names of its own; may use "
                                  "`fixture` and `server_label`.")
    input_as_messages: bool = Field(default=False, description="Send a string `input` as one user message.")

    def describe(self) -> list[str]:
        """One line per rewrite in force, for reports."""
        lines = []
        if self.input_as_messages:
            lines.append("a string `input` is sent as a list with one user message")
        if self.mcp_server_url is not None:
            lines.append(f"request-level MCP tools' `server_url` is sent as `{self.mcp_server_url}`")
        return lines

    def apply(self, body: Any, fixtures: Mapping[str, McpFixture]) -> Any:
        """`body` rewritten; `fixtures` are the run's MCP fixtures (to recognise their URLs)."""
        if not isinstance(body, dict):
            return body
        if self.input_as_messages and isinstance(body.get("input"), str):
            body = body | {"input": [{"type": "message", "role": "user", "content": body["input"]}]}
        if self.mcp_server_url is not None and isinstance(body.get("tools"), list):
            body = body | {"tools": [self._mcp_tool(tool, fixtures) for tool in body["tools"]]}
        return body

    def _mcp_tool(self, tool: Any, fixtures: Mapping[str, McpFixture]) -> Any:
        if not isinstance(tool, dict) or tool.get("type") != "mcp":
            return tool
        by_url = {url: name for name, fixture in fixtures.items() for url in (fixture.url, fixture.sse_url)}
        if tool.get("server_url") not in by_url:
            return tool
        context = {"fixture": by_url[tool["server_url"]], "server_label": tool.get("server_label")}
        return tool | {"server_url": render(self.mcp_server_url, context, "the profile's rewrite.mcp_server_url")}
