"""The reference gateway's settings, from code or from a YAML file.

```yaml
upstream:
  url: http://127.0.0.1:8642/v1       # base URL of the model server
  wire: responses                      # responses | chat | anthropic
  chaining: replay                     # replay | previous_response_id (responses wire only)
  api_key_env: UPSTREAM_API_KEY        # read the key from this variable, never from the file
store_path: reference.sqlite3          # ":memory:" keeps nothing across restarts
response_retention_s: 2592000          # a stored response is kept this long (OpenAI: 30 days); null: forever
response_retention_max: 10000          # and only the newest this many finished ones; null: no limit
admin_key_env: GATEWAY_ADMIN_KEY       # the admin routes' key ("Authorization: Bearer <key>"), read from
                                       # this variable, never from the file; unset: no admin routes
tool_call_cap: 32                      # the gateway's own cap on tool calls per response (and on calls it refuses)
max_concurrent_runs: 16                # loop runs at once per API key; more get a 429
max_concurrent_uploads: 8              # file uploads read at once; one more waits for a slot up to
upload_wait_s: 30                      # this many seconds, then gets a 429
websocket_max_s: 3600                  # how long a WebSocket connection lasts (OpenAI's: 60 minutes)
tool_listing_ttl_s: 600                # how long listings of the servers below are reused
mcp_servers:                           # gateway-configured MCP servers
  - {label: calc, url: "http://127.0.0.1:8643/mcp", transport: streamable_http,
     require_approval: never, hidden: false, enabled: true}
outbound:                              # where the loop may connect (MCP servers, web search): by default
                                       # only globally routable addresses (see outbound.py)
  block: [93.184.216.0/24]             # blocked as well
  allow: []                            # overrides the rest, e.g. [127.0.0.0/8] (::ffff:127.0.0.1 too)
tool_cache: {ttl_s: 0, secret_env: TOOL_CACHE_SECRET}   # 0: off
web_search:                            # the web_search tool's backend; left out: no web search
  provider: http                       # http: web_search.py's JSON protocol (the search fixture) | brave
  url: http://127.0.0.1:8646           # http: the backend's base URL (POST <url>/search), required;
                                       # brave: default https://api.search.brave.com/res/v1/web/search
  api_key_env: SEARCH_API_KEY          # read the key from this variable, never from the file (brave: required)
  timeout_s: 10                        # per search
  max_results: 5                       # results a search asks for when the request does not say (1..20)
chat:                                  # /v1/chat/completions with the agent loop
  max_rounds: 10                       # 1..50
  deadline_s: 120
  stream_mode: final_only              # final_only | disabled
  opt_out_header: x-mcp-opt-out        # a truthy value (true/1/yes) skips the loop
  hosted_tools:                        # built-in tools every looped chat completion offers, as in a
    - {type: web_search}               # Responses request (web_search needs a web search provider)
    - {type: file_search, vector_store_ids: [vs_abc], max_num_results: 5}
```
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from ..openai_contract.documents import DocumentError, read_yaml
from .retention import DEFAULT_MAX_RESPONSES, OPENAI_RETENTION_S, Retention

UpstreamWire = Literal["responses", "chat", "anthropic"]
UpstreamChaining = Literal["replay", "previous_response_id"]
McpTransport = Literal["streamable_http", "sse"]
WebSearchBackend = Literal["http", "brave"]
MAX_WEB_RESULTS = 20
ChatStreamMode = Literal["final_only", "disabled"]
MAX_CHAT_ROUNDS = 50
T = TypeVar("T")


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
class WebSearchConfig:
    """The `web_search` tool's backend: `provider` `http` (the JSON protocol of `web_search.py`,
    which the search fixture speaks) at `url`, or `brave` (Brave's Web Search API, `url` its
    endpoint). The API key comes from the environment, never from the file."""

    provider: WebSearchBackend
    url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0
    max_results: int = 5
    """How many results a search asks for when the request does not say."""

    def __post_init__(self) -> None:
        if self.provider not in ("http", "brave"):
            raise ConfigError(f"web_search.provider: expected http or brave, got {self.provider!r}")
        if self.provider == "http" and not self.url:
            raise ConfigError("web_search.url: required for the http provider")
        if self.url is not None and not (isinstance(self.url, str) and self.url.startswith(("http://", "https://"))):
            raise ConfigError(f"web_search.url: expected an http:// or https:// URL, got {self.url!r}")
        if self.provider == "brave" and not self.api_key:
            raise ConfigError("web_search.api_key_env: the brave provider needs an API key, from a variable "
                              "that is set")
        if self.timeout_s <= 0:
            raise ConfigError(f"web_search.timeout_s: must be > 0, got {self.timeout_s}")
        if not 1 <= self.max_results <= MAX_WEB_RESULTS:
            raise ConfigError(f"web_search.max_results: must be 1..{MAX_WEB_RESULTS}, got {self.max_results}")


@dataclass(frozen=True)
class GatewayConfig:
    upstream_url: str
    upstream_wire: UpstreamWire = "responses"
    upstream_chaining: UpstreamChaining = "replay"
    upstream_api_key: str | None = field(default=None, repr=False)
    admin_key: str | None = field(default=None, repr=False)
    """The key of `GET /admin/audit/{run_id}`; None (or empty) disables the admin routes."""
    upstream_timeout_s: float = 120.0
    mcp_timeout_s: float = 30.0
    tool_call_cap: int = 32
    max_concurrent_runs: int = 16
    max_concurrent_uploads: int = 8
    upload_wait_s: float = 30.0
    websocket_max_s: float = 3600.0
    """How long a WebSocket connection to `/v1/responses` lasts, as OpenAI's does (60 minutes)."""
    store_path: str = ":memory:"
    response_retention_s: float | None = OPENAI_RETENTION_S
    """How long a stored response (its events, input items and audit too) is kept; None: forever."""
    response_retention_max: int | None = DEFAULT_MAX_RESPONSES
    """How many finished stored responses are kept, the newest; None: no limit."""
    mcp_servers: tuple[McpServerConfig, ...] = ()
    tool_listing_ttl_s: float = 600.0
    outbound_block: tuple[str, ...] = ()
    outbound_allow: tuple[str, ...] = ()
    tool_cache_ttl_s: float = 0.0
    tool_cache_secret: str | None = field(default=None, repr=False)
    chat_max_rounds: int = 10
    chat_deadline_s: float = 120.0
    chat_stream_mode: ChatStreamMode = "final_only"
    chat_opt_out_header: str = "x-mcp-opt-out"
    chat_hosted_tools: tuple[dict[str, Any], ...] = ()
    """Built-in tools (web_search, file_search) the chat surface's loop offers the model, as a
    Responses request writes them (the chat routes check them as a request's, at start)."""
    web_search: WebSearchConfig | None = None
    """The `web_search` tool's backend; None: the gateway offers no web search."""

    def __post_init__(self) -> None:
        if self.upstream_wire not in ("responses", "chat", "anthropic"):
            raise ConfigError(f"upstream.wire: expected responses, chat or anthropic, got {self.upstream_wire!r}")
        if self.upstream_chaining not in ("replay", "previous_response_id"):
            raise ConfigError(f"upstream.chaining: expected 'replay' or 'previous_response_id', "
                              f"got {self.upstream_chaining!r}")
        if self.upstream_chaining == "previous_response_id" and self.upstream_wire != "responses":
            raise ConfigError("upstream.chaining: previous_response_id needs the responses wire")
        if self.tool_call_cap < 1:
            raise ConfigError(f"tool_call_cap: must be >= 1, got {self.tool_call_cap}")
        if self.max_concurrent_runs < 1:
            raise ConfigError(f"max_concurrent_runs: must be >= 1, got {self.max_concurrent_runs}")
        if self.max_concurrent_uploads < 1:
            raise ConfigError(f"max_concurrent_uploads: must be >= 1, got {self.max_concurrent_uploads}")
        if self.upload_wait_s < 0:
            raise ConfigError(f"upload_wait_s: must be >= 0, got {self.upload_wait_s}")
        if self.websocket_max_s <= 0:
            raise ConfigError(f"websocket_max_s: must be > 0, got {self.websocket_max_s}")
        if not 1 <= self.chat_max_rounds <= MAX_CHAT_ROUNDS:
            raise ConfigError(f"chat.max_rounds: must be 1..{MAX_CHAT_ROUNDS}, got {self.chat_max_rounds}")
        if self.chat_deadline_s <= 0:
            raise ConfigError(f"chat.deadline_s: must be > 0, got {self.chat_deadline_s}")
        if self.chat_stream_mode not in ("final_only", "disabled"):
            raise ConfigError(f"chat.stream_mode: expected final_only or disabled, got {self.chat_stream_mode!r}")
        if self.response_retention_s is not None and self.response_retention_s <= 0:
            raise ConfigError(f"response_retention_s: must be > 0 (or null: forever), got {self.response_retention_s}")
        if self.response_retention_max is not None and self.response_retention_max < 1:
            raise ConfigError(f"response_retention_max: must be >= 1 (or null: no limit), "
                              f"got {self.response_retention_max}")
        if self.tool_cache_ttl_s > 0 and not self.tool_cache_secret:
            raise ConfigError("tool_cache: a ttl_s above 0 needs a secret (secret_env)")
        for name, cidrs in (("outbound.block", self.outbound_block), ("outbound.allow", self.outbound_allow)):
            for cidr in cidrs:
                try:
                    ipaddress.ip_network(cidr, strict=False)
                except ValueError as error:
                    raise ConfigError(f"{name}: {cidr!r} is not an address range ({error})") from error

    @property
    def retention(self) -> Retention:
        return Retention(self.response_retention_s, self.response_retention_max)

    @property
    def loop_on_chat(self) -> bool:
        """Whether chat completions run through the agent loop (some MCP server is enabled, or
        some hosted tool is offered)."""
        return any(server.enabled for server in self.mcp_servers) or bool(self.chat_hosted_tools)

    @classmethod
    def from_file(cls, path: str | Path) -> GatewayConfig:
        try:
            raw = read_yaml(Path(path)) or {}
        except (OSError, DocumentError) as error:
            raise ConfigError(f"{path}: {error}") from error
        try:
            return cls.from_mapping(raw)
        except (ConfigError, TypeError, ValueError) as error:
            raise ConfigError(f"{path}: {error}") from error

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> GatewayConfig:
        _known("", raw, {"upstream", "store_path", "response_retention_s", "response_retention_max", "admin_key_env",
                         "tool_call_cap", "mcp_timeout_s", "mcp_servers", "max_concurrent_runs", "tool_listing_ttl_s",
                         "outbound", "tool_cache", "chat", "web_search", "max_concurrent_uploads",
                         "upload_wait_s", "websocket_max_s"})
        upstream = _section(raw, "upstream", {"url", "wire", "chaining", "api_key_env", "timeout_s"})
        if "url" not in upstream:
            raise ConfigError("upstream.url: required")
        outbound = _section(raw, "outbound", {"block", "allow"})
        cache = _section(raw, "tool_cache", {"ttl_s", "secret_env"})
        chat = _section(raw, "chat", {"max_rounds", "deadline_s", "stream_mode", "opt_out_header", "hosted_tools"})
        servers = []
        server_fields = {f.name for f in fields(McpServerConfig)}
        for index, entry in enumerate(raw.get("mcp_servers") or []):
            if not isinstance(entry, dict) or not {"label", "url"} <= set(entry):
                raise ConfigError(f"mcp_servers[{index}]: needs 'label' and 'url'")
            _known(f"mcp_servers[{index}]", entry, server_fields)
            servers.append(McpServerConfig(**entry))
        return cls(
            upstream_url=upstream["url"],
            upstream_wire=upstream.get("wire", "responses"),
            upstream_chaining=upstream.get("chaining", "replay"),
            upstream_api_key=_env(upstream.get("api_key_env")),
            upstream_timeout_s=float(upstream.get("timeout_s", 120.0)),
            admin_key=_env(raw.get("admin_key_env")),
            mcp_timeout_s=float(raw.get("mcp_timeout_s", 30.0)),
            tool_call_cap=int(raw.get("tool_call_cap", 32)),
            max_concurrent_runs=int(raw.get("max_concurrent_runs", 16)),
            max_concurrent_uploads=int(raw.get("max_concurrent_uploads", 8)),
            upload_wait_s=float(raw.get("upload_wait_s", 30.0)),
            websocket_max_s=float(raw.get("websocket_max_s", 3600.0)),
            store_path=str(raw.get("store_path", ":memory:")),
            response_retention_s=_optional(float, raw.get("response_retention_s", OPENAI_RETENTION_S)),
            response_retention_max=_optional(int, raw.get("response_retention_max", DEFAULT_MAX_RESPONSES)),
            mcp_servers=tuple(servers),
            tool_listing_ttl_s=float(raw.get("tool_listing_ttl_s", 600.0)),
            outbound_block=tuple(outbound.get("block") or ()),
            outbound_allow=tuple(outbound.get("allow") or ()),
            tool_cache_ttl_s=float(cache.get("ttl_s", 0.0)),
            tool_cache_secret=_env(cache.get("secret_env")),
            chat_max_rounds=int(chat.get("max_rounds", 10)),
            chat_deadline_s=float(chat.get("deadline_s", 120.0)),
            chat_stream_mode=chat.get("stream_mode", "final_only"),
            chat_opt_out_header=str(chat.get("opt_out_header", "x-mcp-opt-out")),
            chat_hosted_tools=_hosted_tools(chat.get("hosted_tools") or []),
            web_search=_web_search(raw),
        )


_HOSTED_TOOL_FIELDS = {"file_search": {"type", "vector_store_ids", "max_num_results", "filters", "ranking_options"},
                       "web_search": {"type", "search_context_size", "user_location", "filters"}}


def _hosted_tools(entries: Any) -> tuple[dict[str, Any], ...]:
    """`chat.hosted_tools`: their shape (types, fields, vector store ids); their values are
    checked as a request's when the chat routes start."""
    if not isinstance(entries, list):
        raise ConfigError("chat.hosted_tools: expected a list of tools")
    for index, entry in enumerate(entries):
        where = f"chat.hosted_tools[{index}]"
        kind = entry.get("type") if isinstance(entry, dict) else None
        family = "web_search" if isinstance(kind, str) and kind.startswith("web_search") else kind
        if family not in _HOSTED_TOOL_FIELDS:
            raise ConfigError(f"{where}.type: expected file_search or a web_search type, got {kind!r}")
        _known(where, entry, _HOSTED_TOOL_FIELDS[family])
        stores = entry.get("vector_store_ids")
        if family == "file_search" and (not isinstance(stores, list) or not all(isinstance(s, str) for s in stores)):
            raise ConfigError(f"{where}.vector_store_ids: expected a list of vector store ids")
    return tuple(entries)


def _web_search(raw: dict[str, Any]) -> WebSearchConfig | None:
    if raw.get("web_search") is None:
        return None
    section = _section(raw, "web_search", {"provider", "url", "api_key_env", "timeout_s", "max_results"})
    if "provider" not in section:
        raise ConfigError("web_search.provider: required (http or brave)")
    key_env = section.get("api_key_env")
    if key_env is not None and not os.environ.get(str(key_env)):
        raise ConfigError(f"web_search.api_key_env: the variable {key_env} is not set")
    for name, kind in (("timeout_s", float), ("max_results", int)):
        if name in section and (isinstance(section[name], bool) or not isinstance(section[name], kind | int)):
            raise ConfigError(f"web_search.{name}: expected a number, got {section[name]!r}")
    return WebSearchConfig(provider=section["provider"], url=section.get("url"), api_key=_env(key_env),
                           timeout_s=float(section.get("timeout_s", 10.0)),
                           max_results=int(section.get("max_results", 5)))


def _known(where: str, raw: dict[str, Any], known: set[str]) -> None:
    if unknown := set(raw) - known:
        raise ConfigError(f"{where + ': ' if where else ''}unknown field(s) {sorted(unknown)}")


def _section(raw: dict[str, Any], name: str, known: set[str]) -> dict[str, Any]:
    section = raw.get(name) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{name}: expected a mapping")
    _known(name, section, known)
    return section


def _optional(kind: Callable[[Any], T], value: Any) -> T | None:
    """`value` as `kind`, or None when the file says null."""
    return None if value is None else kind(value)


def _env(name: str | None) -> str | None:
    return os.environ.get(name) if name else None
