"""The one agent loop behind `/v1/responses`: CallLlm, ExecuteTools, InterruptForApproval, Finish.

Every request runs through `drive`, streamed or not; the event log behind it is what differs
(an SSE sink, or the JSON body built from the terminal event). The driver only executes the
action the decision functions chose; it never decides on its own.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from ..chain import PendingApproval, denial_transcript
from ..client import response_object
from ..errors import ExternalConnectorError, GatewayError, UpstreamError
from ..mcp_servers import CallResult, McpUnavailable
from ..upstream.items import (
    ItemDone, ItemStarted, Message, Reasoning, SummaryDelta, SummaryPartDone, SummaryPartStarted, TextDelta,
    ToolCall, ToolOutput, TurnDone,
)
from .actions import (
    CallLlm, CallPlan, Completed, ExecuteTools, Failed, Finish, InterruptForApproval, NextAction, Outcome,
)
from .decide import decide_after_call_llm, decide_after_execute_tools, decide_start, remaining_budget
from .emitter import Emitter
from .state import LoopContext, LoopState, TurnResult
from .tooling import expose_tools, turn_request


@dataclass(frozen=True)
class LoopResult:
    """The terminal Response object, and the error when the loop failed."""

    response: dict[str, Any]
    error: GatewayError | None = None


def snapshot(ctx: LoopContext, status: str, output: list[dict[str, Any]] | None = None,
             **extra: Any) -> dict[str, Any]:
    return response_object(ctx.request, response_id=ctx.response_id, created_at=ctx.created_at, status=status,
                           output=output or [], **extra)


async def drive(ctx: LoopContext, state: LoopState, emitter: Emitter) -> LoopResult:
    if ctx.request.background:
        queued = snapshot(ctx, "queued")
        emitter.lifecycle("response.created", queued)
        emitter.lifecycle("response.queued", queued)
    else:
        emitter.lifecycle("response.created", snapshot(ctx, "in_progress"))
    emitter.lifecycle("response.in_progress", snapshot(ctx, "in_progress"))
    failure = await _list_tools(ctx, state, emitter)
    for decision in ctx.history.decisions:
        if not decision.approve:
            state.transcript += denial_transcript(decision)
    state.set_next_action(failure or decide_start(ctx.history, remaining_budget(ctx, state)))
    while True:
        action = state.take_next_action()
        match action:
            case CallLlm(with_tools=with_tools):
                await _call_llm(ctx, state, emitter, with_tools)
                state.set_next_action(decide_after_call_llm(ctx, state))
            case ExecuteTools(plan=plan):
                await _execute_tools(ctx, state, emitter, plan)
                state.set_next_action(decide_after_execute_tools(ctx, state, plan))
            case InterruptForApproval(call=call, hand_back=hand_back):
                _hand_back(state, emitter, hand_back)
                item = emitter.approval_request(call.server_label, call.call.name, call.call.arguments)
                state.pending[item["id"]] = PendingApproval(item["id"], call.server_label, call.call)
                return _finish(ctx, state, emitter, Completed())
            case Finish(outcome=outcome, hand_back=hand_back):
                _hand_back(state, emitter, hand_back)
                return _finish(ctx, state, emitter, outcome)


async def _list_tools(ctx: LoopContext, state: LoopState, emitter: Emitter) -> NextAction | None:
    """List every bound server not listed earlier in the chain; a server that cannot be
    listed fails the response (OpenAI: HTTP 424, `mcp_list_tools.failed` in a stream)."""
    bindings = [b for b in ctx.bindings if b.server.label not in state.listed]
    started = {b.server.label: emitter.list_tools_started(b.server.label) for b in bindings if b.server.visible}
    results = await asyncio.gather(*(ctx.connector.list_tools(b.server) for b in bindings), return_exceptions=True)
    failure: NextAction | None = None
    for binding, result in zip(bindings, results, strict=True):
        label = binding.server.label
        if isinstance(result, BaseException) and not isinstance(result, McpUnavailable):
            raise result
        error = f"Error retrieving tool list from MCP server: '{label}'. {result}" if isinstance(
            result, McpUnavailable) else None
        tools = () if error else tuple(tool for tool in result if binding.offers(tool))
        if label in started:
            index, item_id = started[label]
            emitter.list_tools_done(index, item_id, label, [t.as_item_tool() for t in tools], error)
        if error:
            failure = failure or Finish(Failed(ExternalConnectorError(error)))
        else:
            state.listed[label] = tools
    reserved = frozenset(t.name for t in ctx.request.function_tools)
    state.gateway_tools = expose_tools(ctx.bindings, state.listed, reserved)
    return failure


async def _call_llm(ctx: LoopContext, state: LoopState, emitter: Emitter, with_tools: bool) -> None:
    request = turn_request(ctx, state, with_tools)
    turn = TurnResult(tools_offered=bool(request.tools))
    message: tuple[int, str] | None = None
    reasoning: tuple[int, str] | None = None
    try:
        async for event in ctx.adapter.stream_turn(request):
            match event:
                case ItemStarted(kind="message"):
                    message = emitter.message_started()
                case ItemStarted(kind="reasoning"):
                    reasoning = emitter.reasoning_started()
                case TextDelta(delta=delta):
                    message = message or emitter.message_started()
                    emitter.text_delta(*message, delta)
                case SummaryPartStarted(index=i) if reasoning:
                    emitter.summary_part_started(*reasoning, i)
                case SummaryDelta(index=i, delta=delta) if reasoning:
                    emitter.summary_delta(*reasoning, i, delta)
                case SummaryPartDone(index=i, text=text) if reasoning:
                    emitter.summary_part_done(*reasoning, i, text)
                case ItemDone(item=Message() as item, incomplete=incomplete):
                    message = message or emitter.message_started()
                    emitter.message_done(*message, str(item.content), incomplete)
                    state.transcript.append(item)
                    message = None
                case ItemDone(item=Reasoning() as item):
                    reasoning = reasoning or emitter.reasoning_started()
                    emitter.reasoning_done(*reasoning, item.summary)
                    state.transcript.append(item)
                    reasoning = None
                case ItemDone(item=ToolCall() as item):
                    turn.calls.append(item)
                case TurnDone(incomplete_reason=reason, usage=usage, response_id=response_id):
                    state.add_usage(usage)
                    state.upstream_response_id = response_id or state.upstream_response_id
                    turn.incomplete_reason = reason
    except UpstreamError as error:
        turn.error = error
    state.model_calls += 1
    state.sent_upto = len(state.transcript)
    state.latest_turn = turn


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None


async def _run_call(ctx: LoopContext, state: LoopState, call: ToolCall) -> CallResult:
    arguments = _arguments(call)
    if arguments is None:
        message = f"The arguments of the call to '{call.name}' are not a JSON object."
        return CallResult(None, {"type": "mcp_protocol_error", "code": -32602, "message": message}, message)
    return await ctx.connector.call_tool(state.gateway_tools[call.name].binding.server, call.name, arguments)


async def _execute_tools(ctx: LoopContext, state: LoopState, emitter: Emitter, plan: CallPlan) -> None:
    """Run the plan's calls concurrently; report them in the model's order. Leaving the task
    group on cancellation cancels every call still running."""
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_run_call(ctx, state, gc.call)) for gc in plan.run]
        for gateway_call, task in zip(plan.run, tasks, strict=True):
            call = gateway_call.call
            visible = state.gateway_tools[call.name].binding.server.visible
            started = emitter.mcp_call_started(gateway_call.server_label, call.name, call.arguments,
                                               gateway_call.approval_request_id) if visible else None
            result = await task
            if started is not None:
                emitter.mcp_call_done(*started, result.output, result.error)
            state.transcript += [call, ToolOutput(call.call_id, result.model_text)]
            state.tool_calls_executed += 1


def _hand_back(state: LoopState, emitter: Emitter, calls: tuple[ToolCall, ...]) -> None:
    for call in calls:
        emitter.function_call(call.call_id, call.name, call.arguments)
        state.transcript.append(call)


def _finish(ctx: LoopContext, state: LoopState, emitter: Emitter, outcome: Outcome) -> LoopResult:
    match outcome:
        case Completed(incomplete_reason=None):
            response = snapshot(ctx, "completed", emitter.finished_output(), usage=state.usage)
            emitter.lifecycle("response.completed", response)
            return LoopResult(response)
        case Completed(incomplete_reason=reason):
            response = snapshot(ctx, "incomplete", emitter.finished_output(), usage=state.usage,
                                incomplete_reason=reason)
            emitter.lifecycle("response.incomplete", response)
            return LoopResult(response)
        case Failed(error=error):
            emitter.error(error.type, error.code, error.message, error.param)
            response = snapshot(ctx, "failed", emitter.finished_output(), usage=state.usage,
                                error=error.response_error())
            emitter.lifecycle("response.failed", response)
            return LoopResult(response, error)
