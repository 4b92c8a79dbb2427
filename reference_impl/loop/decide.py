"""The loop's decisions: pure functions from state to the next action.

Rules they keep:
- a server whose tools cannot be listed fails the request before the model is asked;
- a warm-up (`generate: false`) lists the tools and ends there: no model turn, no call run;
- a request with approval answers runs the approved calls first (the model is not asked
  again before the approved call has run); a denial only adds to the transcript;
- a model turn's gateway calls run within the `max_tool_calls` budget; calls past it, or made
  when tools were withheld, are ignored; client function calls end the response; a call to a
  tool the request does not offer is refused: never run nor handed back, the model is told;
  past the gateway's own cap of refusals, the model is called once more without tools (a model
  that keeps calling a tool it was not offered would otherwise be asked again without end);
- one approval boundary at a time: the first gated call interrupts the response;
- a call to a destination the outbound policy blocks fails the request;
- once the budget is spent, the model is called once more without tools for a final answer;
- the gateway's own round budget, when it has one, ends the loop before a model call too many;
  its deadline, when it has one, ends the loop as soon as a step is cut short by it.

They also word what the model reads of a denied or refused call, and what a client reads of a
server that cannot be listed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ..chain import History
from ..errors import BlockedDestination, ExternalConnectorError, GatewayError
from ..mcp_servers import McpUnavailable
from ..upstream.items import ToolCall, ToolOutput, TranscriptItem
from .actions import (
    CallLlm, CallPlan, Completed, ExecuteTools, Exhausted, Failed, Finish, GatewayCall, InterruptForApproval,
    NextAction,
)
from .state import GatewayTool, LoopContext, LoopState, TurnResult


def remaining_budget(ctx: LoopContext, state: LoopState) -> int:
    return max(ctx.tool_budget - state.tool_calls_executed, 0)


def listing_failure(server_label: str, problem: BlockedDestination | McpUnavailable) -> GatewayError:
    """How a server that cannot be listed fails the request (OpenAI: HTTP 424, and
    `mcp_list_tools.failed` in a stream): a blocked destination as itself."""
    if isinstance(problem, BlockedDestination):
        return problem
    return ExternalConnectorError(f"Error retrieving tool list from MCP server: '{server_label}'. {problem}")


def denials(history: History) -> list[TranscriptItem]:
    """What the model reads of each call the client denied: the call, and an output saying so."""
    transcript: list[TranscriptItem] = []
    for decision in history.decisions:
        if not decision.approve:
            reason = f" Reason: {decision.reason}" if decision.reason else ""
            transcript += [decision.pending.call,
                           ToolOutput(decision.pending.call.call_id, f"The user denied this tool call.{reason}")]
    return transcript


def refusal(call: ToolCall) -> ToolOutput:
    """What the model reads of a call to a tool the request does not offer."""
    return ToolOutput(call.call_id, f"Tool '{call.name}' is not available in this request.")


def decide_start(history: History, budget: int, listing_failures: Sequence[GatewayError] = (),
                 generate: bool = True) -> NextAction:
    if listing_failures:
        return Finish(Failed(listing_failures[0]))
    if not generate:
        return Finish(Completed())
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
    if state.deadline_passed:
        return Finish(Exhausted("deadline"))
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
    if state.deadline_passed:
        return Finish(Exhausted("deadline"))
    if state.blocked is not None:
        return Finish(Failed(state.blocked))
    if plan.gated:
        return InterruptForApproval(plan.gated[0], plan.hand_back)
    if plan.hand_back or not (plan.run or plan.refused):
        return Finish(Completed(), plan.hand_back)
    if ctx.max_rounds is not None and state.model_calls >= ctx.max_rounds:
        return Finish(Exhausted("rounds"))
    return CallLlm(with_tools=remaining_budget(ctx, state) > 0 and state.tool_calls_refused < ctx.refusal_budget)
