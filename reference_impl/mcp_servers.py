"""Reaching MCP servers with the `mcp` SDK: list their tools, call one.

Sessions (streamable HTTP or SSE) are opened once per server URL, transport and headers and
reused by every listing and call, across requests (`McpConnector`, `mcp_sessions`). Every HTTP
client comes from one factory, which is where the outbound address policy plugs in. Failures
come back as values in OpenAI's `mcp_call.error` shapes: `mcp_tool_execution_error` (the tool
said `isError`), `mcp_protocol_error` (a JSON-RPC error), `http_error` (the server could not be
reached or answered with an HTTP error); a destination the policy blocks is
`BlockedDestination`, never a tool result.

Listings are read leniently: a tool whose `inputSchema` is missing, null or not an object is
dropped and logged (the SDK would reject the whole listing), and a server left with no valid
tool is logged as a warning.

The `mcp` SDK is imported when a session is first opened, not with this module: a gateway
whose requests name no MCP server, and the harness starting one, do not pay for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import httpx2
import jsonschema

if TYPE_CHECKING:
    from mcp import Client, types
    from mcp.client.session import ClientSession

from .errors import BlockedDestination
from .mcp_sessions import SessionPool, session_key
from .outbound import DestinationBlocked

logger = logging.getLogger("responses_parity.reference_impl.mcp")
_MAX_PAGES = 100
_MAX_ERAS = 256
T = TypeVar("T")


@dataclass(frozen=True)
class McpServer:
    """An MCP server the loop may use, from the request (`type: mcp`) or from configuration."""

    label: str
    url: str
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    visible: bool = True


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str | None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None

    @property
    def read_only(self) -> bool | None:
        return (self.annotations or {}).get("read_only")

    def as_item_tool(self) -> dict[str, Any]:
        """The tool as an `mcp_list_tools` item lists it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema,
                "annotations": self.annotations}


@dataclass(frozen=True)
class CallResult:
    """`output` for the client when the call worked; `error` (OpenAI's shape) when not;
    `model_text` is what the model reads either way. `blocked` is set instead when the
    destination is refused: then the whole request is aborted."""

    output: str | None
    error: dict[str, Any] | None
    model_text: str
    blocked: BlockedDestination | None = None


def validate_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why the arguments do not fit the tool's `inputSchema`, or None when they do."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def listed_tool(server: str, raw: dict[str, Any]) -> ListedTool | None:
    """A tool from a raw `tools/list` entry, or None (logged) when it cannot be offered."""
    name, schema = raw.get("name"), raw.get("inputSchema")
    if not isinstance(name, str) or not isinstance(schema, dict):
        logger.info("MCP server %r: dropping tool %r, its inputSchema is %s", server, name,
                    "missing" if "inputSchema" not in raw else f"not an object ({type(schema).__name__})")
        return None
    annotations = raw.get("annotations") if isinstance(raw.get("annotations"), dict) else None
    read_only = annotations.get("readOnlyHint") if annotations else None
    return ListedTool(name, raw.get("description"), schema, {"read_only": read_only} if annotations else None)


class McpUnavailable(Exception):
    """The server could not be listed; the message says why, for the client."""


HttpClientFactory = Callable[..., httpx2.AsyncClient]


def _content_text(content: list[Any]) -> str:
    parts = []
    for block in content:
        is_text = getattr(block, "type", None) == "text"
        parts.append(block.text if is_text else json.dumps(block.model_dump(mode="json")))
    return "\n".join(parts)


@dataclass
class _Exchange:
    """What one operation's HTTP traffic showed: the requests it sent and the error statuses it got.
    The SDK sends each message from a task that copies the sender's context, so the HTTP client's
    hooks find the operation's exchange in `_EXCHANGE`, however many operations share a session."""

    sent: int = 0
    failures: list[int] = field(default_factory=list)


_EXCHANGE: ContextVar[_Exchange | None] = ContextVar("mcp_exchange", default=None)


async def _note_request(request: httpx2.Request) -> None:
    if (exchange := _EXCHANGE.get()) is not None:
        exchange.sent += 1


async def _note_response(response: httpx2.Response) -> None:
    if response.status_code >= 400 and (exchange := _EXCHANGE.get()) is not None:
        exchange.failures.append(response.status_code)


class _NotOpened(Exception):
    """The session could not be opened; `http_failures` are the error statuses its handshake got."""

    def __init__(self, http_failures: list[int]) -> None:
        super().__init__("the MCP session could not be opened")
        self.http_failures = http_failures


@dataclass(frozen=True)
class _Era:
    """How a server negotiated its protocol last time: the `Client` mode to open it with again
    (`legacy`, or the modern version with the server's discover result), so no probe is needed."""

    mode: str
    discovered: types.DiscoverResult | None = None


class McpConnector:
    """Lists and calls tools over MCP sessions it keeps open (see `mcp_sessions`): one per server
    URL, transport and headers, reused by every listing and call. Every operation has its own
    timeout. A session that is lost (connection closed, transport failure, HTTP 404: the server
    no longer knows it) is dropped; the operation runs once more on a new session when that is
    safe: a listing always, a call only when its request never reached the server. HTTP clients
    come from one factory, where the outbound-address guard plugs in. `aclose` closes every session."""

    def __init__(self, timeout_s: float, http_client_factory: HttpClientFactory | None = None,
                 pool: SessionPool[Client] | None = None) -> None:
        """`http_client_factory`: where HTTP clients come from (default: the SDK's own)."""
        self._timeout_s = timeout_s
        self._factory = http_client_factory
        self._pool: SessionPool[Client] = pool if pool is not None else SessionPool()
        self._eras: OrderedDict[str, _Era] = OrderedDict()

    async def __aenter__(self) -> McpConnector:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._pool.aclose()

    def _http_client(self, **kwargs: Any) -> httpx2.AsyncClient:
        if self._factory is None:
            from mcp.shared._httpx_utils import create_mcp_http_client
            self._factory = create_mcp_http_client
        client = self._factory(**kwargs)
        client.event_hooks = {"request": [_note_request], "response": [_note_response]}
        return client

    @asynccontextmanager
    async def _session(self, server: McpServer, key: str) -> AsyncIterator[Client]:
        """A connected client for the session `key` (entered and left in the pool's owner task). It
        opens in the mode the server negotiated with the key's last session, when there was one, so
        without a discovery probe."""
        from mcp import Client
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        opening = _Exchange()
        _EXCHANGE.set(opening)
        era = self._eras.get(key, _Era("auto"))
        async with AsyncExitStack() as stack:
            try:
                if server.transport == "sse":
                    transport = sse_client(server.url, headers=server.headers, timeout=self._timeout_s,
                                           httpx_client_factory=self._http_client)
                else:
                    http = await stack.enter_async_context(
                        self._http_client(headers=server.headers, timeout=httpx2.Timeout(self._timeout_s)))
                    transport = streamable_http_client(server.url, http_client=http)
                client = await stack.enter_async_context(
                    Client(transport, read_timeout_seconds=self._timeout_s, cache=None, mode=era.mode,
                           prior_discover=era.discovered))
            except Exception as error:
                self._eras.pop(key, None)
                raise _NotOpened(opening.failures) from error
            self._remember_era(key, client.session)
            yield client

    def _remember_era(self, key: str, session: ClientSession) -> None:
        discovered = session.discover_result
        era = _Era("legacy") if discovered is None else _Era(session.protocol_version or "auto", discovered)
        self._eras[key] = era
        self._eras.move_to_end(key)
        while len(self._eras) > _MAX_ERAS:
            self._eras.popitem(last=False)

    async def _operate(self, server: McpServer, operation: Callable[[Client], Awaitable[T]], exchange: _Exchange,
                       idempotent: bool) -> T:
        """`operation` on the server's session, within the timeout; on a lost session, once more on
        a new one when `idempotent` or when the first request never reached the server."""
        key = session_key(server.url, server.transport, server.headers)
        token = _EXCHANGE.set(exchange)
        try:
            with anyio.fail_after(self._timeout_s):
                for attempt in range(2):
                    async with self._pool.lease(key, lambda: self._session(server, key)) as session:
                        try:
                            return await operation(session.value)
                        except Exception as error:
                            _raise_if_cancelling()
                            if not (session.ended.is_set() or _lost(error, exchange)):
                                raise
                            failure = error
                    self._pool.discard(session)
                    if session.leases == 0:  # it closes now: wait, to see what broke it
                        await session.ended.wait()
                    if session.failure is not None:
                        failure.__cause__ = session.failure
                    unsent = exchange.sent == 0 or 404 in exchange.failures
                    if attempt or _blocked(failure) is not None or not (idempotent or unsent):
                        raise failure
                    exchange.sent, exchange.failures = 0, []
            raise AssertionError("unreachable: the second attempt returns or raises")
        finally:
            _EXCHANGE.reset(token)

    async def list_tools(self, server: McpServer) -> list[ListedTool]:
        """The server's valid tools; raises `BlockedDestination` or `McpUnavailable`."""
        exchange = _Exchange()

        async def listing(client: Client) -> list[dict[str, Any]]:
            raw: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                page = await _raw_listing(client, cursor)
                raw += [tool for tool in page.get("tools") or [] if isinstance(tool, dict)]
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            return raw

        try:
            raw_tools = await self._operate(server, listing, exchange, idempotent=True)
        except Exception as error:  # every failure means "cannot be listed"
            _raise_if_cancelling()
            raise _blocked(error) or McpUnavailable(_describe(error, _statuses(error, exchange))) from error
        tools = [tool for raw in raw_tools if (tool := listed_tool(server.label, raw)) is not None]
        if not tools:
            logger.warning("MCP server %r offers no valid tool (%d listed)", server.label, len(raw_tools))
        return tools

    async def call_tool(self, server: McpServer, name: str, arguments: dict[str, Any]) -> CallResult:
        exchange = _Exchange()

        async def calling(client: Client) -> CallResult:
            result = await client.call_tool(name, arguments)
            text = _content_text(result.content)
            if result.is_error:
                content = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
                return CallResult(None, {"type": "mcp_tool_execution_error", "content": content}, text)
            return CallResult(text, None, text)

        try:
            return await self._operate(server, calling, exchange, idempotent=False)
        except Exception as error:  # a failed connection is a failed call, not a crash
            _raise_if_cancelling()
            if (blocked := _blocked(error)) is not None:
                return CallResult(None, None, "", blocked)
            http_failures = _statuses(error, exchange)
            message = _describe(error, http_failures)
            from mcp import MCPError
            protocol = next((leaf for leaf in _leaves(error) if isinstance(leaf, MCPError)), None)
            if protocol is not None and not http_failures:
                return CallResult(None, {"type": "mcp_protocol_error", "code": protocol.code,
                                         "message": protocol.message}, protocol.message)
            status = http_failures[-1] if http_failures else 502
            return CallResult(None, {"type": "http_error", "code": status, "message": message}, message)


def _raise_if_cancelling() -> None:
    """Raise `CancelledError` when the current task is being cancelled. The SDK's task groups
    can turn a cancellation that arrives mid-call into an ordinary exception (a broken stream,
    a group of them); taken for a failed call, it would let the loop go on after its client
    has gone."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _raw_listing(client: Client, cursor: str | None) -> dict[str, Any]:
    """One `tools/list` page as the server sent it. The SDK validates a listing as a whole and
    rejects all of it for one malformed tool, so this does what `ClientSession.send_request`
    does (stamp the protocol envelope, send) without the validation. It uses two names the SDK
    keeps private (`_stamp`, `_dispatcher`; its own subscriptions module uses `_stamp` the same
    way); the `mcp>=2.3,<3` pin holds them still, and the MCP host tests fail if they move."""
    from mcp import types

    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
    data = types.ListToolsRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
    options: dict[str, Any] = {}
    session = client.session
    session._stamp(data, options)
    raw = await session._dispatcher.send_raw_request("tools/list", data.get("params"), options)
    if not isinstance(raw, dict):
        raise ValueError(f"its tools/list result is {type(raw).__name__}, not an object")
    return raw


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside groups, and what caused each."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    causes = [cause for cause in (error.__cause__, error.__context__) if cause is not None]
    return [error, *(leaf for cause in causes for leaf in _leaves(cause))]


def _lost(error: BaseException, exchange: _Exchange) -> bool:
    """Whether the failure means the session is gone: its connection closed, the transport failed,
    or the server answered HTTP 404 (it does not know the session)."""
    from mcp import MCPError, types
    return 404 in exchange.failures or any(
        isinstance(leaf, httpx2.TransportError) or (isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED)
        for leaf in _leaves(error))


def _statuses(error: BaseException, exchange: _Exchange) -> list[int]:
    """The HTTP error statuses behind a failure: the operation's own, else its session's opening."""
    opening = next((leaf.http_failures for leaf in _leaves(error) if isinstance(leaf, _NotOpened)), [])
    return exchange.failures or opening


def _blocked(error: BaseException) -> BlockedDestination | None:
    found = next((leaf for leaf in _leaves(error) if isinstance(leaf, DestinationBlocked)), None)
    return BlockedDestination(f"The gateway did not connect to the MCP server: {found}") if found else None


def _describe(error: BaseException, http_failures: list[int]) -> str:
    """OpenAI's wording for an HTTP failure (`Http status code: 401 (Unauthorized)`), else the cause."""
    if http_failures:
        status = http_failures[-1]
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
        return f"Http status code: {status} ({phrase})"
    leaf = next(leaf for leaf in _leaves(error) if not isinstance(leaf, _NotOpened))
    if isinstance(leaf, TimeoutError):
        return "the MCP server did not answer in time"
    return str(leaf) or type(leaf).__name__
