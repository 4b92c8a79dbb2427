"""The one agent loop behind `/v1/responses` and `/v1/chat/completions`: CallLlm,
ExecuteTools, InterruptForApproval, Finish.

Every request of both surfaces runs through `drive`; what differs is the sink (Responses
events and objects, or a chat completion) and the context's budgets. The driver only carries
out the action the decision functions chose, records what it observed for them (the model's
turn, a blocked destination, the deadline), emits what happens as `LoopEvent` values, and
keeps an audit record of each model round and each tool dispatch. It returns the `Ending`;
the surface answers it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from typing import Any, assert_never

from ..chain import PendingApproval
from ..compaction import ContextManagement, compacted, compaction_item, summarise
from ..errors import BlockedDestination, GatewayError, UpstreamError
from ..hosted_tools import HostedOutcome, HostedRunner
from ..ids import new_id
from ..mcp_servers import CallResult, McpUnavailable, validate_arguments
from ..tokens import count
from ..upstream.adapter import model_events
from ..upstream.items import (
    ItemDone, ItemStarted, Message, Reasoning, SummaryDelta, SummaryPartDone, SummaryPartStarted, TextDelta,
    ToolCall, ToolOutput, TurnDone,
)
from .actions import CallLlm, CallPlan, Completed, Ending, ExecuteTools, Failed, Finish, InterruptForApproval
from .decide import (
    decide_after_call_llm, decide_after_execute_tools, decide_start, denials, listing_failure, refusal,
    remaining_budget,
)
from .events import (
    ApprovalRequested, Compacted, FunctionCallHandedBack, HostedCallDone, HostedCallStarted, ListingDone,
    ListingStarted, McpCallDone, McpCallStarted, MessageDone, MessageStarted, ReasoningDone, ReasoningStarted,
    RunStarted,
)
from .sink import LoopSink
from .state import LoopContext, LoopState, TurnResult
from .tooling import expose_tools, turn_request


async def _until_deadline(ctx: LoopContext, state: LoopState, step: Coroutine[Any, Any, None]) -> None:
    """Run one step; at the context's deadline, if it has one, the step is cut short and the
    state says so."""
    if ctx.deadline is None:
        await step
        return
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(loop.time() + (ctx.deadline - time.monotonic())):
            await step
    except TimeoutError:
        state.deadline_passed = True


def _milliseconds(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


async def drive(ctx: LoopContext, state: LoopState, sink: LoopSink) -> Ending:
    """Run the loop to its end, telling `sink` what happens; returns how it ended."""
    sink.emit(RunStarted())
    listing_failures = await _list_tools(ctx, state, sink)
    state.transcript += denials(ctx.history)
    state.set_next_action(decide_start(ctx.history, remaining_budget(ctx, state), listing_failures,
                                       ctx.request.generate))
    while True:
        action = state.take_next_action()
        match action:
            case CallLlm(with_tools=with_tools):
                await _until_deadline(ctx, state, _call_llm(ctx, state, sink, with_tools))
                state.set_next_action(decide_after_call_llm(ctx, state))
            case ExecuteTools(plan=plan):
                await _until_deadline(ctx, state, _execute_tools(ctx, state, sink, plan))
                state.set_next_action(decide_after_execute_tools(ctx, state, plan))
            case InterruptForApproval(call=call, hand_back=hand_back):
                _hand_back(state, sink, hand_back)
                request_id = new_id("mcpr")
                assert call.server_label is not None, "only MCP calls are gated"
                sink.emit(ApprovalRequested(request_id, call.server_label, call.call.name, call.call.arguments))
                state.pending[request_id] = PendingApproval(request_id, call.server_label, call.call)
                return Completed()
            case Finish(ending=ending, hand_back=hand_back):
                _hand_back(state, sink, hand_back)
                if ending == Completed() and ctx.context_management is not None:
                    failure = await _compact_when_due(ctx, state, sink, ctx.context_management)
                    return Failed(failure) if failure is not None else ending
                return ending
            case _:
                assert_never(action)


async def _list_tools(ctx: LoopContext, state: LoopState, sink: LoopSink) -> list[GatewayError]:
    """List every bound server not listed earlier in the chain; returns how each server that
    could not be listed fails the request, in binding order."""
    bindings = [b for b in ctx.bindings if b.server.label not in state.listed]
    for binding in bindings:
        if binding.server.visible:
            sink.emit(ListingStarted(binding.server.label))
    results = await asyncio.gather(*(ctx.catalog.list_tools(b.server, cached=b.policy is None) for b in bindings),
                                   return_exceptions=True)
    failures: list[GatewayError] = []
    for binding, result in zip(bindings, results, strict=True):
        label = binding.server.label
        error: GatewayError | None = None
        if isinstance(result, BlockedDestination | McpUnavailable):
            error = listing_failure(label, result)
        elif isinstance(result, BaseException):
            raise result
        tools = () if error else tuple(tool for tool in result if binding.offers(tool))
        if binding.server.visible:
            sink.emit(ListingDone(label, tuple(t.as_item_tool() for t in tools), error.message if error else None))
        if error:
            failures.append(error)
        else:
            state.listed[label] = tools
    reserved = frozenset(t.name for t in ctx.request.function_tools) | frozenset(ctx.hosted)
    state.gateway_tools = expose_tools(ctx.bindings, state.listed, reserved)
    return failures


async def _call_llm(ctx: LoopContext, state: LoopState, sink: LoopSink, with_tools: bool) -> None:
    request = turn_request(ctx, state, with_tools)
    turn = TurnResult(tools_offered=bool(request.tools))
    message_open = reasoning_open = False
    started = time.monotonic()
    state.model_calls += 1
    try:
        async for event in model_events(ctx.adapter, request):
            match event:
                case ItemStarted(kind="message"):
                    sink.emit(MessageStarted())
                    message_open = True
                case ItemStarted(kind="reasoning"):
                    sink.emit(ReasoningStarted())
                    reasoning_open = True
                case TextDelta():
                    if not message_open:
                        sink.emit(MessageStarted())
                        message_open = True
                    sink.emit(event)
                case SummaryPartStarted() | SummaryDelta() | SummaryPartDone() if reasoning_open:
                    sink.emit(event)
                case ItemDone(item=Message() as item, incomplete=incomplete):
                    if not message_open:
                        sink.emit(MessageStarted())
                    sink.emit(MessageDone(str(item.content), incomplete))
                    state.transcript.append(item)
                    message_open = False
                case ItemDone(item=Reasoning() as item):
                    if not reasoning_open:
                        sink.emit(ReasoningStarted())
                    sink.emit(ReasoningDone(item))
                    state.transcript.append(item)
                    reasoning_open = False
                case ItemDone(item=ToolCall() as item):
                    turn.calls.append(item)
                case TurnDone(incomplete_reason=reason, usage=usage, response_id=response_id):
                    state.add_usage(usage)
                    state.upstream_response_id = response_id or state.upstream_response_id
                    turn.incomplete_reason = reason
    except UpstreamError as error:
        turn.error = error
    finally:
        status = "error" if turn.error else "incomplete" if turn.incomplete_reason else "ok"
        state.audit.append({"kind": "model_round", "round": state.model_calls, "status": status,
                            "tool_calls": len(turn.calls), "latency_ms": _milliseconds(started)})
    state.sent_upto = len(state.transcript)
    state.latest_turn = turn


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None


async def _run_call(ctx: LoopContext, state: LoopState, call: ToolCall) -> tuple[CallResult, str]:
    """The call's result, and how it went for the audit: ok, error, invalid_arguments,
    cached, blocked."""
    tool = state.gateway_tools[call.name]
    arguments = _arguments(call)
    problem = "the arguments are not a JSON object" if arguments is None else validate_arguments(
        tool.listed.input_schema, arguments)
    if problem is not None:
        message = f"Invalid arguments for tool '{call.name}': {problem}"
        return CallResult(None, {"type": "mcp_protocol_error", "code": -32602, "message": message}, message), \
            "invalid_arguments"
    assert arguments is not None
    if ctx.tool_cache is not None and (hit := await ctx.tool_cache.get(tool.binding.server, call.name, arguments)):
        return hit, "cached"
    result = await ctx.connector.call_tool(tool.binding.server, call.name, arguments)
    if result.blocked is not None:
        return result, "blocked"
    if ctx.tool_cache is not None and result.error is None:
        await ctx.tool_cache.put(tool.binding.server, call.name, arguments, result)
    return result, "ok" if result.error is None else "error"


async def _execute_tools(ctx: LoopContext, state: LoopState, sink: LoopSink, plan: CallPlan) -> None:
    """Run the plan's calls concurrently; report them in the model's order. A call to a blocked
    destination stops the step (`state.blocked`): it never becomes a tool output. A refused
    call (a tool the request does not offer) only tells the model so.

    A cancelled loop (its client went away) leaves the task group, which cancels every call
    still running and then raises the cancellation. Each call is awaited through
    `asyncio.wait`, never directly: awaiting a task hands the awaiter's cancellation to that
    task, and a call that swallowed it would return a result and let the loop go on."""
    async with asyncio.TaskGroup() as group:
        tasks = [(gc, group.create_task(_timed(_run_call(ctx, state, gc.call) if gc.server_label is not None
                                               else ctx.hosted[gc.call.name].run(gc.call.arguments))))
                 for gc in plan.run]
        for index, (gateway_call, task) in enumerate(tasks):
            call = gateway_call.call
            if gateway_call.server_label is None:
                await _report_hosted(state, sink, ctx.hosted[call.name], call, task, index=index)
                continue
            tool = state.gateway_tools[call.name]
            visible = tool.binding.server.visible
            if visible:
                sink.emit(McpCallStarted(call.call_id, gateway_call.server_label, call.name, call.arguments,
                                         gateway_call.approval_request_id))
            await asyncio.wait([task])
            (result, status), latency = task.result()
            state.audit.append({"kind": "tool_dispatch", "round": state.model_calls, "index": index,
                                "server": tool.binding.server.label, "tool": call.name, "status": status,
                                "latency_ms": latency})
            if result.blocked is not None:
                for _, pending in tasks:
                    pending.cancel()
                state.blocked = result.blocked
                return
            if visible:
                sink.emit(McpCallDone(call.call_id, result.output, result.error))
            state.transcript += [call, ToolOutput(call.call_id, result.model_text)]
            state.tool_calls_executed += 1
    for call in plan.refused:
        state.audit.append({"kind": "tool_dispatch", "round": state.model_calls, "index": len(plan.run),
                            "server": None, "tool": call.name, "status": "unavailable", "latency_ms": 0})
        state.transcript += [call, refusal(call)]
        state.tool_calls_refused += 1


async def _report_hosted(state: LoopState, sink: LoopSink, runner: HostedRunner, call: ToolCall,
                         task: asyncio.Task[tuple[HostedOutcome, int]], *, index: int) -> None:
    """Show a hosted search as it runs (its item added and searching, then done) and give the
    model its output."""
    sink.emit(HostedCallStarted(call.call_id, runner.kind))
    await asyncio.wait([task])
    outcome, latency = task.result()
    state.audit.append({"kind": "tool_dispatch", "round": state.model_calls, "index": index, "server": None,
                        "tool": runner.kind, "status": "error" if outcome.error else "ok", "latency_ms": latency})
    sink.emit(HostedCallDone(call.call_id, runner.kind, outcome))
    state.transcript += [call, ToolOutput(call.call_id, outcome.model_text)]
    state.tool_calls_executed += 1


async def _timed(work: Any) -> tuple[Any, int]:
    started = time.monotonic()
    return await work, _milliseconds(started)


async def _compact_when_due(ctx: LoopContext, state: LoopState, sink: LoopSink,
                            managed: ContextManagement) -> UpstreamError | None:
    """Once the context has reached the request's threshold: the summary turn, the compaction
    item, and the compacted window as the chain a continuation starts from; the summary turn's
    failure, if it fails."""
    tokens = await asyncio.to_thread(count, ctx.request.instructions, tuple(state.transcript))
    if tokens < managed.threshold:
        return None
    started = time.monotonic()
    state.model_calls += 1
    try:
        summary, usage = await summarise(ctx.adapter, ctx.request.model, tuple(state.transcript),
                                         ctx.request.instructions)
    except UpstreamError as error:
        state.audit.append({"kind": "summary_round", "round": state.model_calls, "status": "error",
                            "latency_ms": _milliseconds(started)})
        return error
    state.audit.append({"kind": "summary_round", "round": state.model_calls, "status": "ok",
                        "latency_ms": _milliseconds(started)})
    state.add_usage(usage)
    item = compaction_item(managed.sealer, summary)
    sink.emit(Compacted(item))
    _, state.transcript = compacted(state.transcript, item, summary)
    state.upstream_response_id, state.sent_upto = None, 0
    return None


def _hand_back(state: LoopState, sink: LoopSink, calls: tuple[ToolCall, ...]) -> None:
    for call in calls:
        sink.emit(FunctionCallHandedBack(call.call_id, call.name, call.arguments))
        state.transcript.append(call)
