"""Creating a response end to end: validate, resolve history, run the loop, store the result.

Everything that can be refused is refused in `start` before a byte is streamed (so a
`stream: true` request still gets a JSON 4xx). After that the loop runs in its own task,
writing to an event log; the route only chooses how to read the log.

A background response is stored as `queued` at once and its task outlives the request: it is
kept in `running` while it runs (so it can be polled, streamed again from any event, or
cancelled), and its events are stored when it ends (so a stream can be resumed later).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from .chain import Chain, history_from_input
from .client import CreateRequest, with_ids
from .config import GatewayConfig
from .errors import InvalidRequest, NotFound
from .event_log import EventLog
from .ids import new_id
from .loop.driver import LoopResult, drive, snapshot
from .loop.emitter import Emitter
from .loop.state import LoopContext, LoopState, ServerBinding
from .mcp_servers import McpConnector, McpServer
from .store import ConversationStore, ResponseStore, StoredResponse
from .upstream.adapter import UpstreamAdapter
from .validation import validate_create

_KEPT_IN_CONVERSATIONS = ("completed", "incomplete")


@dataclass
class Run:
    """A response being created: its context, its event log, and the task driving the loop."""

    ctx: LoopContext
    log: EventLog
    task: asyncio.Task[LoopResult]

    def live_response(self) -> dict[str, Any]:
        """The response as it stands: the newest snapshot, with the items done so far."""
        latest = next(e["response"] for e in reversed(self.log.events) if "response" in e)
        done = [e["item"] for e in self.log.events if e["type"] == "response.output_item.done"]
        return latest | {"output": done}


class ResponsesService:
    def __init__(self, config: GatewayConfig, store: ResponseStore, conversations: ConversationStore,
                 adapter: UpstreamAdapter, connector: McpConnector) -> None:
        self.config = config
        self.store = store
        self.conversations = conversations
        self.adapter = adapter
        self.connector = connector
        self.running: dict[str, Run] = {}

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

    async def _history_before(self, request: CreateRequest) -> Chain | None:
        """The chain the request continues: its conversation's items, or its previous response."""
        if request.conversation_id is not None:
            if await self.conversations.get_conversation(request.conversation_id) is None:
                raise NotFound(f"Conversation with id '{request.conversation_id}' not found.")
            return history_from_input(None, await self.conversations.items(request.conversation_id)).chain
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
        input_items = with_ids(request.input_items)
        history = history_from_input(await self._history_before(request), input_items)
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
        if ctx.request.background:
            queued = snapshot(ctx, "queued")
            await self.store.save(StoredResponse(queued, input_items, ctx.history.chain, ctx.request.stream))
        run = Run(ctx, log, asyncio.create_task(self._run(ctx, input_items, log)))
        if ctx.request.background:
            self.running[ctx.response_id] = run
            run.task.add_done_callback(lambda _: self.running.pop(ctx.response_id, None))
        return run

    async def _run(self, ctx: LoopContext, input_items: list[dict[str, Any]], log: EventLog) -> LoopResult:
        state = LoopState.start(ctx.history)
        emitter = Emitter(log)
        try:
            result = await drive(ctx, state, emitter)
            await self._save(ctx, input_items, state, result, log)
            return result
        except asyncio.CancelledError:
            result = LoopResult(snapshot(ctx, "cancelled", emitter.finished_output(), usage=state.usage))
            await asyncio.shield(self._save(ctx, input_items, state, result, log))
            raise
        finally:
            log.close()  # only now does a stream end: what it showed is already stored

    async def _save(self, ctx: LoopContext, input_items: list[dict[str, Any]], state: LoopState,
                    result: LoopResult, log: EventLog) -> None:
        request = ctx.request
        output = result.response["output"]
        if request.conversation_id is not None and result.response["status"] in _KEPT_IN_CONVERSATIONS:
            await self.conversations.add_items(request.conversation_id, input_items + output)
        if not request.store:
            return
        item_ids = ctx.history.chain.item_ids | {item["id"] for item in output}
        await self.store.save(StoredResponse(result.response, input_items, state.chain(item_ids), request.stream))
        if request.background:
            await self.store.save_events(ctx.response_id, log.events)

    async def cancel(self, response_id: str) -> dict[str, Any]:
        """Cancel a background response (again: the same final response)."""
        run = self.running.get(response_id)
        if run is not None:
            run.task.cancel()
            await asyncio.gather(run.task, return_exceptions=True)
        stored = await self.store.get(response_id)
        if stored is None:
            raise NotFound(f"Response with id '{response_id}' not found.")
        if not stored.response.get("background"):
            raise InvalidRequest("Cannot cancel a synchronous response.")
        return stored.response

    async def shutdown(self) -> None:
        """Cancel background responses still running (they are stored as cancelled)."""
        runs = list(self.running.values())
        for run in runs:
            run.task.cancel()
        await asyncio.gather(*(run.task for run in runs), return_exceptions=True)
