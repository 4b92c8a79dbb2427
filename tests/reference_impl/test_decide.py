"""The loop's decisions, one rule per test (pure functions: no I/O, no loop)."""

from __future__ import annotations

from responses_parity.reference_impl.chain import ApprovalDecision, Chain, History, PendingApproval
from responses_parity.reference_impl.client import ApprovalPolicy, FunctionTool, McpTool
from responses_parity.reference_impl.errors import BlockedDestination, UpstreamError
from responses_parity.reference_impl.loop.actions import (CallLlm, Completed, ExecuteTools, Exhausted, Failed, Finish,
                                                          InterruptForApproval)
from responses_parity.reference_impl.loop.decide import (decide_after_call_llm, decide_after_execute_tools,
                                                         decide_start, denials, listing_failure, partition_calls,
                                                         refusal)
from responses_parity.reference_impl.loop.state import (GatewayTool, LoopContext, LoopRequest, LoopState, ServerBinding,
                                                        TurnResult)
from responses_parity.reference_impl.mcp_servers import ListedTool, McpServer, McpUnavailable
from responses_parity.reference_impl.upstream.items import ToolCall, ToolOutput


def tool(name: str, approval: str = "never") -> GatewayTool:
    policy = McpTool("calc", "http://x/mcp", approval=ApprovalPolicy(approval))  # type: ignore[arg-type]
    return GatewayTool(ServerBinding(McpServer("calc", "http://x/mcp"), policy), ListedTool(name, None, {}, None))


TOOLS = {"add": tool("add"), "echo": tool("echo"), "gated": tool("gated", "always")}


def call(name: str, k: int = 0) -> ToolCall:
    return ToolCall(f"call_{name}{k}", name, "{}")


def context(budget: int = 10, rounds: int | None = None, functions: tuple[str, ...] = (),
            refusals: int = 32) -> LoopContext:
    request = LoopRequest("m", function_tools=tuple(FunctionTool(name) for name in functions))
    return LoopContext(request, History(Chain(), (), 0), (), adapter=None, connector=None,  # type: ignore[arg-type]
                       catalog=None, tool_budget=budget, refusal_budget=refusals,  # type: ignore[arg-type]
                       max_rounds=rounds)


def state(*calls: ToolCall, executed: int = 0, offered: bool = True) -> LoopState:
    loop_state = LoopState([], {}, {}, gateway_tools=dict(TOOLS), tool_calls_executed=executed)
    loop_state.latest_turn = TurnResult(list(calls), tools_offered=offered)
    return loop_state


def test_no_tool_calls_finishes() -> None:
    assert decide_after_call_llm(context(), state()) == Finish(Completed())


def test_gateway_calls_run_before_anything_else() -> None:
    action = decide_after_call_llm(context(functions=("get_weather",)), state(call("add"), call("get_weather")))
    assert isinstance(action, ExecuteTools)
    assert [g.call.name for g in action.plan.run] == ["add"]
    assert [c.name for c in action.plan.hand_back] == ["get_weather"]


def test_after_running_tools_with_client_calls_pending_the_response_ends_with_them() -> None:
    plan = partition_calls(TurnResult([call("add"), call("get_weather")]), TOOLS, 10, {"get_weather"})
    assert decide_after_execute_tools(context(), state(), plan) == Finish(Completed(), plan.hand_back)


def test_after_running_tools_the_model_is_called_again() -> None:
    plan = partition_calls(TurnResult([call("add")]), TOOLS, 10)
    assert decide_after_execute_tools(context(), state(executed=1), plan) == CallLlm(with_tools=True)


def test_once_the_budget_is_spent_the_model_answers_without_tools() -> None:
    plan = partition_calls(TurnResult([call("add")]), TOOLS, 1)
    assert decide_after_execute_tools(context(budget=1), state(executed=1), plan) == CallLlm(with_tools=False)


def test_calls_past_the_budget_are_ignored() -> None:
    plan = partition_calls(TurnResult([call("add", 0), call("add", 1), call("echo")]), TOOLS, 2)
    assert [g.call.call_id for g in plan.run] == ["call_add0", "call_add1"]
    assert [c.name for c in plan.ignored] == ["echo"]


def test_a_call_to_a_tool_the_request_does_not_offer_is_refused_not_handed_back() -> None:
    plan = partition_calls(TurnResult([call("upper"), call("get_weather")]), TOOLS, 10, {"get_weather"})
    assert [c.name for c in plan.refused] == ["upper"] and [c.name for c in plan.hand_back] == ["get_weather"]
    only_refused = partition_calls(TurnResult([call("upper")]), TOOLS, 10)
    assert decide_after_call_llm(context(), state(call("upper"))) == ExecuteTools(only_refused)
    assert decide_after_execute_tools(context(), state(), only_refused) == CallLlm(with_tools=True)


def test_past_the_gateways_cap_of_refusals_the_model_answers_without_tools() -> None:
    """A model that keeps calling a tool it was not offered is not asked again without end."""
    only_refused = partition_calls(TurnResult([call("upper")]), TOOLS, 10)
    refusing = state()
    refusing.tool_calls_refused = 2
    assert decide_after_execute_tools(context(refusals=3), refusing, only_refused) == CallLlm(with_tools=True)
    refusing.tool_calls_refused = 3
    assert decide_after_execute_tools(context(refusals=3), refusing, only_refused) == CallLlm(with_tools=False)


def test_calls_made_when_no_tools_were_offered_are_ignored() -> None:
    assert decide_after_call_llm(context(), state(call("add"), offered=False)) == Finish(Completed())


def test_one_approval_boundary_at_a_time() -> None:
    action = decide_after_call_llm(context(), state(call("gated", 0), call("gated", 1)))
    assert isinstance(action, InterruptForApproval) and action.call.call.call_id == "call_gated0"


def test_immediate_calls_run_before_the_approval_interrupt() -> None:
    action = decide_after_call_llm(context(), state(call("add"), call("gated")))
    assert isinstance(action, ExecuteTools) and [g.call.name for g in action.plan.gated] == ["gated"]
    assert isinstance(decide_after_execute_tools(context(), state(executed=1), action.plan), InterruptForApproval)


def test_an_approved_call_runs_before_the_model_is_asked() -> None:
    pending = PendingApproval("mcpr_1", "calc", call("gated"))
    history = History(Chain(), (ApprovalDecision(pending, approve=True),), 0)
    action = decide_start(history, budget=5)
    assert isinstance(action, ExecuteTools) and action.plan.run[0].approval_request_id == "mcpr_1"


def test_a_denied_call_asks_the_model() -> None:
    pending = PendingApproval("mcpr_1", "calc", call("gated"))
    assert decide_start(History(Chain(), (ApprovalDecision(pending, approve=False),), 0), budget=5) == CallLlm()


def test_a_failed_model_call_fails_the_response() -> None:
    failed = state()
    error = UpstreamError(503, "overloaded")
    failed.latest_turn = TurnResult(error=error)
    assert decide_after_call_llm(context(), failed) == Finish(Failed(error))


def test_a_turn_cut_at_max_output_tokens_is_incomplete() -> None:
    cut = state()
    cut.latest_turn = TurnResult(incomplete_reason="max_output_tokens")
    assert decide_after_call_llm(context(), cut) == Finish(Completed("max_output_tokens"))


def test_taking_the_next_action_leaves_finish_behind() -> None:
    loop_state = state()
    loop_state.set_next_action(CallLlm())
    assert loop_state.take_next_action() == CallLlm()
    assert loop_state.take_next_action() == Finish(Completed())


def test_the_round_budget_ends_the_loop_before_one_model_call_too_many() -> None:
    plan = partition_calls(TurnResult([call("add")]), TOOLS, 10)
    loop_state = state(executed=1)
    loop_state.model_calls = 3
    assert decide_after_execute_tools(context(rounds=3), loop_state, plan) == Finish(Exhausted("rounds"))
    assert decide_after_execute_tools(context(rounds=4), loop_state, plan) == CallLlm(with_tools=True)


def test_hosted_calls_run_ungated_and_share_the_budget_with_mcp_calls() -> None:
    turn = TurnResult([call("file_search", 0), call("gated"), call("add"), call("file_search", 1)])
    plan = partition_calls(turn, TOOLS, 2, hosted={"file_search"})
    assert [(g.call.call_id, g.server_label) for g in plan.run] == [("call_file_search0", None), ("call_add0", "calc")]
    assert [g.call.name for g in plan.gated] == ["gated"]
    assert [c.call_id for c in plan.ignored] == ["call_file_search1"] and plan.refused == ()


def test_a_server_that_cannot_be_listed_fails_the_response_before_the_model_is_asked() -> None:
    unreachable = listing_failure("calc", McpUnavailable("connection refused"))
    assert (unreachable.status, unreachable.message) == (
        424, "Error retrieving tool list from MCP server: 'calc'. connection refused")
    blocked = BlockedDestination("blocked")
    assert listing_failure("calc", blocked) is blocked
    approved = (ApprovalDecision(PendingApproval("mcpr_1", "calc", call("gated")), approve=True),)
    assert decide_start(History(Chain(), approved, 0), 5, [blocked, unreachable]) == Finish(Failed(blocked))


def test_a_blocked_destination_fails_the_response() -> None:
    blocked = state()
    blocked.blocked = BlockedDestination("blocked")
    plan = partition_calls(TurnResult([call("add")]), TOOLS, 10)
    assert decide_after_execute_tools(context(), blocked, plan) == Finish(Failed(blocked.blocked))


def test_the_deadline_ends_the_loop_after_the_step_it_cut_short() -> None:
    late = state(call("add"))
    late.deadline_passed = True
    assert decide_after_call_llm(context(), late) == Finish(Exhausted("deadline"))
    plan = partition_calls(TurnResult([call("add")]), TOOLS, 10)
    assert decide_after_execute_tools(context(), late, plan) == Finish(Exhausted("deadline"))


def test_the_model_reads_a_denied_call_as_denied_and_a_refused_one_as_unavailable() -> None:
    denied = ApprovalDecision(PendingApproval("mcpr_1", "calc", call("gated")), approve=False, reason="no")
    assert denials(History(Chain(), (denied,), 0)) == [
        call("gated"), ToolOutput("call_gated0", "The user denied this tool call. Reason: no")]
    assert refusal(call("upper")) == ToolOutput("call_upper0", "Tool 'upper' is not available in this request.")
