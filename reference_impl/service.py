"""Creating a response end to end: validate, resolve history, run the loop, store the result.

Everything that can be refused is refused in `start` before a byte is streamed (so a
`stream: true` request still gets a JSON 4xx). After that the loop runs in its own task,
writing to an event log; the route only chooses how to read the log.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from .chain import Chain, history_from_input
from .client import CreateRequest
from .config import GatewayConfig
from .errors import InvalidRequest
from .event_log import EventLog
from .ids import new_id
from .loop.driver import LoopResult, drive, snapshot
from .loop.emitter import Emitter
from .loop.state import LoopContext, LoopState, ServerBinding
from .mcp_servers import McpConnector, McpServer
from .store import ResponseStore, StoredResponse
from .upstream.adapter import UpstreamAdapter
from .validation import validate_create


@dataclass
class Run:
    """A response being created: its context, its event log, and the task driving the loop."""

    ctx: LoopContext
    log: EventLog
    task: asyncio.Task[LoopResult]


def _with_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items as stored and listed: each with an id (messages get a `msg_` one)."""
    return [item if item.get("id") else {"id": new_id("msg" if item["type"] == "message" else "item"), **item}
            for item in items]


class ResponsesService:
    def __init__(self, config: GatewayConfig, store: ResponseStore, adapter: UpstreamAdapter,
                 connector: McpConnector) -> None:
        self.config = config
        self.store = store
        self.adapter = adapter
        self.connector = connector

    def _bindings(self, request: CreateRequest) -> tuple[ServerBinding, ...]:
        bindings = []
        for tool in request.mcp_tools:
            headers = dict(tool.headers)
            if tool.authorization:
                headers["Authorization"] = f"Bearer {tool.authorization}"
            server = McpServer(tool.server_label, tool.server_url, tool.transport, headers)
            bindings.append(ServerBinding(server, tool))
        labels = {b.server.label for b in bindings}
        for configured in self.config.mcp_servers:
            if configured.enabled and configured.label not in labels:
                server = McpServer(configured.label, configured.url, configured.transport, dict(configured.headers),
                                   visible=not configured.hidden)
                bindings.append(ServerBinding(server, None, configured.require_approval == "always"))
        return tuple(bindings)

    async def _previous_chain(self, request: CreateRequest) -> Chain | None:
        if request.previous_response_id is None:
            return None
        stored = await self.store.get(request.previous_response_id)
        if stored is None:
            raise InvalidRequest(f"Previous response with id '{request.previous_response_id}' not found.",
                                 param="previous_response_id", code="previous_response_not_found")
        return stored.chain

    async def prepare(self, body: Any) -> tuple[LoopContext, list[dict[str, Any]]]:
        """The loop's context and the input items with ids; raises what OpenAI would refuse."""
        request = validate_create(body)
        input_items = _with_ids(request.input_items)
        history = history_from_input(await self._previous_chain(request), input_items)
        bindings = self._bindings(request)
        labels = {b.server.label for b in bindings}
        for decision in history.decisions:
            if decision.approve and decision.pending.server_label not in labels:
                raise InvalidRequest(f"The approved call is for MCP server '{decision.pending.server_label}', "
                                     "which is not in this request's tools.", param="tools")
        budget = min(request.max_tool_calls or self.config.tool_call_cap, self.config.tool_call_cap)
        ctx = LoopContext(request, history, bindings, self.adapter, self.connector, budget,
                          response_id=new_id("resp"), created_at=int(time.time()))
        return ctx, input_items

    async def start(self, body: Any) -> Run:
        ctx, input_items = await self.prepare(body)
        log = EventLog()
        task = asyncio.create_task(self._run(ctx, input_items, log))
        return Run(ctx, log, task)

    async def _run(self, ctx: LoopContext, input_items: list[dict[str, Any]], log: EventLog) -> LoopResult:
        state = LoopState.start(ctx.history)
        emitter = Emitter(log)
        try:
            result = await drive(ctx, state, emitter)
        except asyncio.CancelledError:
            result = LoopResult(snapshot(ctx, "cancelled", emitter.finished_output(), usage=state.usage))
            await asyncio.shield(self._save(ctx, input_items, state, result))
            raise
        finally:
            log.close()
        await self._save(ctx, input_items, state, result)
        return result

    async def _save(self, ctx: LoopContext, input_items: list[dict[str, Any]], state: LoopState,
                    result: LoopResult) -> None:
        if not ctx.request.store:
            return
        output = result.response["output"]
        item_ids = ctx.history.chain.item_ids | {item["id"] for item in output}
        await self.store.save(StoredResponse(result.response, input_items, state.chain(item_ids)))
