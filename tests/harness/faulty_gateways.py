"""Gateways that get one thing wrong: the reference gateway behind a middleware that rewrites
its `/v1/responses` answers. Used to prove the harness catches each fault."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from responses_parity.harness.wire.sse import parse_sse

Events = list[dict[str, Any]]

TEXT_SCENARIO = """
id: faulty-text
title: text
evidence: {recordings: [stream-text__openllmetry__1]}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hello"}
    model: [{text: "Hi there, friend."}]
    expect:
      status: completed
      output: [message]
"""
"""A text scenario stating its status and output items (not usage, not its events), for the
gateways below to get wrong."""


class RewritingGateway:
    """Rewrites the events of streamed answers, the body of JSON ones answered 200 and, with
    `errors`, the body of JSON ones answered otherwise."""

    def __init__(self, app: ASGIApp, events: Callable[[Events], Events] | None = None,
                 body: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 errors: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.app = app
        self.rewrite_events = events or (lambda e: e)
        self.rewrite_body = body or (lambda b: b)
        self.rewrite_errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/responses":
            await self.app(scope, receive, send)
            return
        start: Message = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            headers = dict(start["headers"])
            if b"text/event-stream" in headers.get(b"content-type", b""):
                events = self.rewrite_events([e.payload for e in parse_sse(body.decode()) if e.payload])
                body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
            elif start["status"] == 200:
                body = json.dumps(self.rewrite_body(json.loads(body))).encode()
            elif self.rewrite_errors is not None:
                body = json.dumps(self.rewrite_errors(json.loads(body))).encode()
            headers[b"content-length"] = str(len(body)).encode()
            await send(start | {"headers": list(headers.items())})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)


def renumber(events: Events) -> Events:
    return [event | {"sequence_number": index} for index, event in enumerate(events)]


def without_message_done(events: Events) -> Events:
    """Drops the message's output_item.done (numbering kept consistent)."""
    return renumber([e for e in events
                     if not (e["type"] == "response.output_item.done" and e["item"]["type"] == "message")])


def numbered_from_one(events: Events) -> Events:
    return [event | {"sequence_number": index + 1} for index, event in enumerate(events)]


def _retype(item: dict[str, Any]) -> dict[str, Any]:
    return item | {"type": "output_message"} if item.get("type") == "message" else item


def _retype_response(response: dict[str, Any]) -> dict[str, Any]:
    return response | {"output": [_retype(item) for item in response.get("output", [])]}


def message_as_wrong_type_events(events: Events) -> Events:
    rewritten = []
    for event in events:
        if "item" in event:
            event = event | {"item": _retype(event["item"])}
        if "response" in event:
            event = event | {"response": _retype_response(event["response"])}
        rewritten.append(event)
    return rewritten


def message_as_wrong_type_body(body: dict[str, Any]) -> dict[str, Any]:
    return _retype_response(body)


class RewritingRequests:
    """Rewrites the JSON body of requests before the wrapped app (a gateway, or an upstream
    proxy) sees them."""

    def __init__(self, app: ASGIApp, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.app = app
        self.rewrite = rewrite

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = json.dumps(self.rewrite(json.loads(await read_body(receive)))).encode()
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        scope = scope | {"headers": [*headers, (b"content-length", str(len(body)).encode())]}
        await self.app(scope, replaying(body, receive), send)


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` (already read) first, then what `receive` gives."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class EchoingGateway:
    """A gateway that shows back the secrets it was sent: the bearer token, the X-Tenant-Token
    header, and each MCP tool's authorization and header values, appended as `ECHO(...)` to
    every text and message in its `/v1/responses` answers, streamed or not, errors too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/v1/responses":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        tools = [tool for tool in json.loads(body).get("tools") or [] if tool.get("type") == "mcp"]
        echo = (f" ECHO(auth={headers.get('authorization', '').removeprefix('Bearer ')};"
                f"tenant={headers.get('x-tenant-token', '')};"
                f"mcp={','.join(tool.get('authorization', '') for tool in tools)};"
                f"mcp-headers={','.join(v for tool in tools for v in (tool.get('headers') or {}).values())})")

        def echoed(value: Any) -> Any:
            if isinstance(value, dict):
                return {key: item + echo if key in ("text", "message") and isinstance(item, str) else echoed(item)
                        for key, item in value.items()}
            return [echoed(item) for item in value] if isinstance(value, list) else value

        rewriting = RewritingGateway(self.app, events=echoed, body=echoed, errors=echoed)
        await rewriting(scope, replaying(body, receive), send)


def reexecute_replayed_calls(body: dict[str, Any]) -> dict[str, Any]:
    """A gateway that runs replayed mcp_call items again (as if each were an approved request)."""
    items = []
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "mcp_call":
            request_id = "mcpr_" + item["id"].removeprefix("mcp_")
            items += [{"type": "mcp_approval_request", "id": request_id, "server_label": item["server_label"],
                       "name": item["name"], "arguments": item["arguments"]},
                      {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": True}]
        else:
            items.append(item)
    return body | {"input": items} if isinstance(body.get("input"), list) else body


def forget_replayed_lists(body: dict[str, Any]) -> dict[str, Any]:
    """A gateway that ignores replayed mcp_list_tools items (so it lists again)."""
    if not isinstance(body.get("input"), list):
        return body
    kept = [i for i in body["input"] if not (isinstance(i, dict) and i.get("type") == "mcp_list_tools")]
    return body | {"input": kept}


def leak_list_tools_upstream(body: dict[str, Any]) -> dict[str, Any]:
    """What reaches the model from a gateway that sends its mcp_list_tools items upstream."""
    leaked = {"type": "mcp_list_tools", "id": "mcpl_leaked", "server_label": "calc", "tools": []}
    return body | {"input": [leaked, *body.get("input", [])]}
