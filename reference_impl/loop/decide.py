"""The loop's decisions: pure functions from state to the next action.

Rules they keep:
- a request with approval answers runs the approved calls first (the model is not asked
  again before the approved call has run); a denial only adds to the transcript;
- a model turn's gateway calls run within the `max_tool_calls` budget; calls past it, or made
  when tools were withheld, are ignored; client function calls end the response; a call to a
  tool the request does not offer is refused: never run nor handed back, the model is told;
- one approval boundary at a time: the first gated call interrupts the response;
- once the budget is spent, the model is called once more without tools for a final answer;
- the gateway's own round budget, when it has one, ends the loop before a model call too many.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..chain import History
from ..upstream.items import ToolCall
from .actions import (
    CallLlm, CallPlan, Completed, ExecuteTools, Exhausted, Failed, Finish, GatewayCall, InterruptForApproval,
    NextAction,
)
from .state import GatewayTool, LoopContext, LoopState, TurnResult


def remaining_budget(ctx: LoopContext, state: LoopState) -> int:
    return max(ctx.tool_budget - state.tool_calls_executed, 0)


def decide_start(history: History, budget: int) -> NextAction:
    approved = [GatewayCall(d.pending.call, d.pending.server_label, d.pending.approval_request_id)
                for d in history.decisions if d.approve]
    if not approved:
        return CallLlm()
    return ExecuteTools(CallPlan(run=tuple(approved[:budget]), ignored=tuple(g.call for g in approved[budget:])))


def partition_calls(turn: TurnResult, tools: Mapping[str, GatewayTool], budget: int,
                    client_tools: Collection[str] = (), hosted: Collection[str] = ()) -> CallPlan:
    """Sort the turn's calls: run, gate, hand back (the client's own functions), refuse, or
    ignore. Order within each group is the model's order. Hosted tools (`hosted`, by name) are
    never gated and share the budget with MCP tools."""
    if not turn.tools_offered:
        return CallPlan(ignored=tuple(turn.calls))
    run: list[GatewayCall] = []
    gated: list[GatewayCall] = []
    hand_back: list[ToolCall] = []
    ignored: list[ToolCall] = []
    refused: list[ToolCall] = []
    for call in turn.calls:
        tool = tools.get(call.name)
        if tool is None and call.name not in hosted:
            (hand_back if call.name in client_tools else refused).append(call)
            continue
        gateway_call = GatewayCall(call, tool.binding.server.label if tool else None)
        if tool is not None and tool.binding.requires_approval(call.name):
            gated.append(gateway_call)
        elif len(run) < budget:
            run.append(gateway_call)
        else:
            ignored.append(call)
    return CallPlan(tuple(run), tuple(gated), tuple(hand_back), tuple(ignored), tuple(refused))


def decide_after_call_llm(ctx: LoopContext, state: LoopState) -> NextAction:
    turn = state.latest_turn
    assert turn is not None, "decide_after_call_llm runs after a model call"
    if turn.error is not None:
        return Finish(Failed(turn.error))
    if turn.incomplete_reason is not None:
        return Finish(Completed(turn.incomplete_reason))
    client_tools = {tool.name for tool in ctx.request.function_tools}
    plan = partition_calls(turn, state.gateway_tools, remaining_budget(ctx, state), client_tools, ctx.hosted)
    if plan.run or plan.refused:
        return ExecuteTools(plan)
    return decide_after_execute_tools(ctx, state, plan)


def decide_after_execute_tools(ctx: LoopContext, state: LoopState, plan: CallPlan) -> NextAction:
    if plan.gated:
        return InterruptForApproval(plan.gated[0], plan.hand_back)
    if plan.hand_back or not (plan.run or plan.refused):
        return Finish(Completed(), plan.hand_back)
    if ctx.max_rounds is not None and state.model_calls >= ctx.max_rounds:
        return Finish(Exhausted("rounds"))
    return CallLlm(with_tools=remaining_budget(ctx, state) > 0)
