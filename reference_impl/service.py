"""Creating a response end to end: validate, resolve history, run the loop, store the result.

Everything that can be refused is refused in `start` before a byte is streamed (so a
`stream: true` request still gets a JSON 4xx). After that the loop runs in its own task,
writing to an event log; the route only chooses how to read the log.

A background response is stored as `queued` at once and its task outlives the request: it is
kept in `running` while it runs (so it can be polled, streamed again from any event, or
cancelled), and its events are published only once stored (so a stream can be resumed from
any event it showed, even after a restart).

Save, then publish: a run stores its end (`_end`, one transaction) before it closes its log, and
only closing the log shows that end to anyone (the terminal event of a stream, the state a poll
reads, the JSON answer, which waits for the task). Once the loop is over a cancellation waits
for this, so what a client was shown is stored, or it was shown nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .chain import Chain, History, history_from_input
from .client import CreateRequest, with_ids
from .compaction import compacted, compaction_item, context_management, summarise
from .errors import InvalidRequest, NotFound
from .event_log import EventLog
from .ids import new_id
from .json_body import JsonBody
from .loop.lifecycle import run_loop
from .loop.sink import LoopResult
from .loop.state import LoopContext, LoopRequest, LoopState, ServerBinding
from .mcp_servers import McpServer
from .responses_sink import ResponsesSink
from .runtime import Runtime
from .store import StoredResponse
from .tokens import count
from .upstream.adapter import responses_usage
from .upstream.items import ToolSpec
from .validation import validate_compact, validate_count, validate_create

_KEPT_IN_CONVERSATIONS = ("completed", "incomplete")


@dataclass
class Run:
    """A response being created: its request, context, input items, sink and event log, and
    (once started) the task driving the loop."""

    request: CreateRequest
    ctx: LoopContext
    input_items: list[dict[str, Any]]
    sink: ResponsesSink
    log: EventLog
    task: asyncio.Task[LoopResult] | None = None
    ended: StoredResponse | None = None
    """How it ended, as a continuation reads it (stored only with `store`): set once it has."""

    @property
    def response_id(self) -> str:
        return self.sink.response_id

    def live_response(self) -> dict[str, Any]:
        """The response as readers may see it: the newest published snapshot, with the items
        published done so far."""
        events = self.log.events
        latest = next(e["response"] for e in reversed(events) if "response" in e)
        done = {e["output_index"]: e["item"] for e in events if e["type"] == "response.output_item.done"}
        return latest | {"output": [done[index] for index in sorted(done)]}


def loop_request(request: CreateRequest) -> LoopRequest:
    return LoopRequest(request.model, request.instructions, request.function_tools, request.tool_choice,
                       request.parallel_tool_calls, request.stream, request.sampling())


class ResponsesService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.running: dict[str, Run] = {}

    def _bindings(self, request: CreateRequest) -> tuple[ServerBinding, ...]:
        bindings = []
        for tool in request.mcp_tools:
            headers = dict(tool.headers)
            if tool.authorization:
                headers["Authorization"] = f"Bearer {tool.authorization}"
            server = McpServer(tool.server_label, tool.server_url, tool.transport, headers)
            bindings.append(ServerBinding(server, tool))
        taken = {b.server.label for b in bindings}
        return tuple(bindings + self.runtime.configured_bindings(taken, approvals=True))

    async def _history_before(self, request: CreateRequest, recent: StoredResponse | None) -> Chain | None:
        """The chain the request continues: its conversation's items, or its previous response
        (`recent`, a WebSocket connection's latest response, when it is that one: even with
        `store: false`)."""
        if request.conversation_id is not None:
            if await self.store.get_conversation(request.conversation_id) is None:
                raise NotFound(f"Conversation with id '{request.conversation_id}' not found.")
            return history_from_input(None, await self.store.items(request.conversation_id), self.runtime.sealer).chain
        if request.previous_response_id is None:
            return None
        if recent is not None and recent.response["id"] == request.previous_response_id:
            return recent.chain
        stored = await self.store.get(request.previous_response_id)
        if stored is None:
            raise InvalidRequest(f"Previous response with id '{request.previous_response_id}' not found.",
                                 param="previous_response_id", code="previous_response_not_found")
        return stored.chain

    async def prepare(self, body: JsonBody, api_key: str, recent: StoredResponse | None = None,
                      generate: bool = True) -> tuple[CreateRequest, LoopContext, list[dict[str, Any]]]:
        """The request, the loop's context and the input items with ids; raises what OpenAI
        would refuse (`recent`: see `_history_before`; `generate`: see `LoopRequest`)."""
        request, input_items = await body.checked(_validated(validate_create))
        history = await self._history(body, request, input_items, recent)
        bindings = self._bindings(request)
        labels = {b.server.label for b in bindings}
        for decision in history.decisions:
            if decision.approve and decision.pending.server_label not in labels:
                raise InvalidRequest(f"The approved call is for MCP server '{decision.pending.server_label}', "
                                     "which is not in this request's tools.", param="tools")
        await self.runtime.check_hosted_tools(request.tools)
        cap = self.runtime.config.tool_call_cap
        ctx = self.runtime.context(replace(loop_request(request), generate=generate), api_key, request.hosted_tools,
                                   history=history, bindings=bindings,
                                   tool_budget=min(request.max_tool_calls or cap, cap), refusal_budget=cap,
                                   context_management=context_management(request.raw.get("context_management"),
                                                                          self.runtime.sealer))
        return request, ctx, input_items

    async def start(self, body: JsonBody, api_key: str, recent: StoredResponse | None = None,
                    generate: bool = True) -> Run:
        request, ctx, input_items = await self.prepare(body, api_key, recent, generate)
        log = EventLog(publish_at_once=not request.background)
        read_as_events = request.stream or request.background
        sink = ResponsesSink(log if read_as_events else None, request, new_id("resp"), int(time.time()),
                             self.runtime.sealer)
        run = Run(request, ctx, input_items, sink, log)

        async def store_queued() -> None:
            await self.store.save(StoredResponse(run.sink.snapshot("queued"), input_items, ctx.history.chain,
                                                 request.stream))

        task = run.task = await self.runtime.launch(api_key, lambda: self._run(run),
                                                    first=store_queued if request.background else None)
        if request.background:
            self.running[run.response_id] = run
            task.add_done_callback(lambda _: self.running.pop(run.response_id, None))
        return run

    async def _run(self, run: Run) -> LoopResult:
        keeper = asyncio.create_task(self._keep_events(run)) if run.request.background else None
        try:
            return await run_loop(run.ctx, run.sink, lambda state, result: self._end(run, state, result))
        finally:
            run.log.close(publish=False)  # a no-op unless the end could not be stored: then none is shown
            if keeper is not None:
                keeper.cancel()

    async def _keep_events(self, run: Run) -> None:
        """Store a background response's events as they come, then publish them (its ending
        waits for `_end`)."""
        kept = 0
        while events := await run.log.publishable(kept):
            await self.store.save_events(run.response_id, events)
            kept += len(events)
            run.log.publish(kept)

    async def _end(self, run: Run, state: LoopState, result: LoopResult | None) -> None:
        """Store how the run ended (cancelled, when there is no result), then show it: the one
        place a response's end becomes visible."""
        if result is None:
            result = LoopResult(run.sink.snapshot("cancelled", run.sink.finished_output(), usage=state.usage))
        request = run.request
        output = result.response["output"]
        kept = request.conversation_id is not None and result.response["status"] in _KEPT_IN_CONVERSATIONS
        item_ids = run.ctx.history.chain.item_ids | {item["id"] for item in output}
        ended = StoredResponse(result.response, run.input_items, state.chain(item_ids), request.stream)
        await self.store.save_end(
            run.response_id, state.audit, response=ended if request.store else None,
            events=run.log.appended if request.background else [],
            conversation_items=(request.conversation_id, run.input_items + run.sink.kept_output(output))
            if kept else None)
        run.ended = ended
        run.log.close()

    async def _history(self, body: JsonBody, request: CreateRequest, input_items: list[dict[str, Any]],
                       recent: StoredResponse | None = None) -> History:
        """The request's history: what it continues (`recent`: see `_history_before`), with its
        input items added."""
        before = await self._history_before(request, recent)
        return await body.checked(lambda _: history_from_input(before, input_items, self.runtime.sealer))

    async def compact(self, body: JsonBody, api_key: str) -> dict[str, Any]:
        """`POST /v1/responses/compact`: the compacted window of the request's history (see
        `compaction.py`), as OpenAI answers it; nothing is stored."""
        request, input_items = await body.checked(_validated(validate_compact))
        history = await self._history(body, request, input_items)
        task = await self.runtime.launch(api_key, lambda: summarise(
            self.runtime.adapter, request.model, history.chain.transcript, request.instructions))
        summary, usage = await task
        output, _ = compacted(history.chain.transcript, compaction_item(self.runtime.sealer, summary), summary)
        return {"id": new_id("resp"), "object": "response.compaction", "created_at": int(time.time()),
                "output": output, "usage": usage or responses_usage(0, 0)}

    async def count_input_tokens(self, body: JsonBody) -> dict[str, Any]:
        """`POST /v1/responses/input_tokens`: the tokens the model would read of the request
        (`tokens.py`): its instructions, its history with its input, its function tools."""
        request, input_items = await body.checked(_validated(validate_count))
        history = await self._history(body, request, input_items)
        tools = [ToolSpec(t.name, t.description, t.parameters, t.strict) for t in request.function_tools]
        counted = await asyncio.to_thread(count, request.instructions, history.chain.transcript, tools)
        return {"object": "response.input_tokens", "input_tokens": counted}

    async def cancel(self, response_id: str) -> dict[str, Any]:
        """Cancel a background response (again: the same final response). A run cancelled
        before its task began never stored its end, so it is stored as cancelled here."""
        run = self.running.get(response_id)
        if run is not None and run.task is not None:
            run.task.cancel()
            await asyncio.gather(run.task, return_exceptions=True)
        stored = await self.store.get(response_id)
        if stored is None:
            raise NotFound(f"Response with id '{response_id}' not found.")
        if not stored.response.get("background"):
            raise InvalidRequest("Cannot cancel a synchronous response.")
        if run is not None and stored.response["status"] in ("queued", "in_progress"):
            stored = replace(stored, response=run.sink.snapshot("cancelled"))
            await self.store.save(stored)
            run.log.close()
        return stored.response

    async def shutdown(self) -> None:
        """Cancel background responses still running (they are stored as cancelled)."""
        tasks = [run.task for run in self.running.values() if run.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _validated(validate: Callable[[Any], CreateRequest]) -> Callable[[Any], tuple[CreateRequest, list[dict[str, Any]]]]:
    """A body's check: the request `validate` makes of it, and its input items with ids (work
    that grows with the body)."""
    def check(body: Any) -> tuple[CreateRequest, list[dict[str, Any]]]:
        request = validate(body)
        return request, with_ids(request.input_items)
    return check
