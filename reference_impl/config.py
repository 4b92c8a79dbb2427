"""The reference gateway's settings, from code or from a YAML file.

```yaml
upstream:
  url: http://127.0.0.1:8642/v1       # base URL of an OpenAI-compatible model server
  wire: responses                      # responses | chat
  chaining: replay                     # replay | previous_response_id (responses wire only)
  api_key_env: UPSTREAM_API_KEY        # read the key from this variable, never from the file
store_path: reference.sqlite3          # ":memory:" keeps nothing across restarts
tool_call_cap: 32                      # the gateway's own cap on tool calls per response
mcp_servers:                           # gateway-configured MCP servers
  - {label: calc, url: "http://127.0.0.1:8643/mcp", transport: streamable_http,
     require_approval: never, hidden: false}
```
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import yaml

UpstreamWire = Literal["responses", "chat"]
UpstreamChaining = Literal["replay", "previous_response_id"]
McpTransport = Literal["streamable_http", "sse"]


class ConfigError(ValueError):
    """A settings file or value the gateway cannot use; the message names the field."""


@dataclass(frozen=True)
class McpServerConfig:
    """An MCP server the gateway itself knows. A hidden one never shows up in the client's
    output, yet the loop offers its tools to the model and runs them."""

    label: str
    url: str
    transport: McpTransport = "streamable_http"
    headers: dict[str, str] = field(default_factory=dict)
    require_approval: Literal["always", "never"] = "never"
    hidden: bool = False
    enabled: bool = True


@dataclass(frozen=True)
class GatewayConfig:
    upstream_url: str
    upstream_wire: UpstreamWire = "responses"
    upstream_chaining: UpstreamChaining = "replay"
    upstream_api_key: str | None = None
    upstream_timeout_s: float = 120.0
    mcp_timeout_s: float = 30.0
    tool_call_cap: int = 32
    store_path: str = ":memory:"
    mcp_servers: tuple[McpServerConfig, ...] = ()

    def __post_init__(self) -> None:
        if self.upstream_wire not in ("responses", "chat"):
            raise ConfigError(f"upstream.wire: expected 'responses' or 'chat', got {self.upstream_wire!r}")
        if self.upstream_chaining not in ("replay", "previous_response_id"):
            raise ConfigError(f"upstream.chaining: expected 'replay' or 'previous_response_id', "
                              f"got {self.upstream_chaining!r}")
        if self.upstream_chaining == "previous_response_id" and self.upstream_wire != "responses":
            raise ConfigError("upstream.chaining: previous_response_id needs the responses wire")
        if self.tool_call_cap < 1:
            raise ConfigError(f"tool_call_cap: must be >= 1, got {self.tool_call_cap}")

    @classmethod
    def from_file(cls, path: str | Path) -> GatewayConfig:
        try:
            raw = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"{path}: {error}") from error
        try:
            return cls.from_mapping(raw)
        except ConfigError as error:
            raise ConfigError(f"{path}: {error}") from error

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> GatewayConfig:
        upstream = dict(raw.get("upstream") or {})
        if "url" not in upstream:
            raise ConfigError("upstream.url: required")
        known_upstream = {"url", "wire", "chaining", "api_key_env", "timeout_s"}
        if unknown := set(upstream) - known_upstream:
            raise ConfigError(f"upstream: unknown field(s) {sorted(unknown)}")
        known_top = {"upstream", "store_path", "tool_call_cap", "mcp_timeout_s", "mcp_servers"}
        if unknown := set(raw) - known_top:
            raise ConfigError(f"unknown field(s) {sorted(unknown)}")
        servers = []
        server_fields = {f.name for f in fields(McpServerConfig)}
        for index, entry in enumerate(raw.get("mcp_servers") or []):
            if not isinstance(entry, dict) or not {"label", "url"} <= set(entry):
                raise ConfigError(f"mcp_servers[{index}]: needs 'label' and 'url'")
            if unknown := set(entry) - server_fields:
                raise ConfigError(f"mcp_servers[{index}]: unknown field(s) {sorted(unknown)}")
            servers.append(McpServerConfig(**entry))
        key_env = upstream.get("api_key_env")
        return cls(
            upstream_url=upstream["url"],
            upstream_wire=upstream.get("wire", "responses"),
            upstream_chaining=upstream.get("chaining", "replay"),
            upstream_api_key=os.environ.get(key_env) if key_env else None,
            upstream_timeout_s=float(upstream.get("timeout_s", 120.0)),
            mcp_timeout_s=float(raw.get("mcp_timeout_s", 30.0)),
            tool_call_cap=int(raw.get("tool_call_cap", 32)),
            store_path=str(raw.get("store_path", ":memory:")),
            mcp_servers=tuple(servers),
        )
