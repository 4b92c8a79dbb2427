"""Every claim the scenario catalogue (scenarios/README.md) makes is backed by a check that fails
when the claim is broken: the reference gateway's passing answer (or what it sent upstream) is
changed the way a wrong gateway would change it, judged again, and the check named for the claim
reports it. A row of the catalogue without claims here fails the test."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from responses_parity.harness.engine.session import Session
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.judge.compare import upstream_findings
from responses_parity.harness.judge.judgement import Case, judge
from responses_parity.harness.judge.results import ScenarioResult, StepResult
from responses_parity.harness.model.findings import Finding, Severity
from responses_parity.harness.model.observed import Observed
from responses_parity.harness.scenario.expectations import compare_upstream
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.model import Mode
from responses_parity.harness.wire.exchange import TERMINAL_EVENTS, Exchange

Mutation = Callable[[Exchange, Observed], tuple[Exchange, Observed]]


# -- how a wrong gateway changes a passing answer ------------------------------------------------

def _with(exchange: Exchange, **changes: Any) -> Exchange:
    return replace(exchange, **changes)


def _events(exchange: Exchange) -> list[dict[str, Any]]:
    return [e.payload for e in exchange.events if e.payload is not None]


def _sse(events: list[dict[str, Any]], done: bool = False) -> str:
    return "".join(f"event: {e.get('type')}\ndata: {json.dumps(e)}\n\n" for e in events) + \
        ("data: [DONE]\n\n" if done else "")


def on_answer(change: Callable[[dict[str, Any]], None]) -> Mutation:
    """Change the Response: the JSON body, or in a stream the terminal event's Response."""
    def mutate(exchange: Exchange, observed: Observed) -> tuple[Exchange, Observed]:
        if not exchange.streamed:
            body = copy.deepcopy(exchange.body)
            change(body)
            return _with(exchange, body=body), observed
        events = copy.deepcopy(_events(exchange))
        change(next(e["response"] for e in reversed(events) if e.get("type") in TERMINAL_EVENTS))
        return _with(exchange, sse=_sse(events)), observed
    return mutate


def on_events(change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]], renumber: bool = True) -> Mutation:
    """Change a stream's events (numbered again from where they started, unless told not to)."""
    def mutate(exchange: Exchange, observed: Observed) -> tuple[Exchange, Observed]:
        events = _events(exchange)
        first = events[0].get("sequence_number", 0) if events else 0
        changed = change(copy.deepcopy(events))
        if renumber:
            changed = [e | {"sequence_number": first + i} for i, e in enumerate(changed)]
        return _with(exchange, sse=_sse(changed)), observed
    return mutate


def drop_events(event_type: str) -> Mutation:
    return on_events(lambda events: [e for e in events if e.get("type") != event_type])


def with_status(status: int) -> Mutation:
    return lambda exchange, observed: (_with(exchange, status=status), observed)


def with_header(name: str, value: str | None) -> Mutation:
    def mutate(exchange: Exchange, observed: Observed) -> tuple[Exchange, Observed]:
        headers = {k: v for k, v in (exchange.headers or {}).items() if k != name} | ({name: value} if value else {})
        return _with(exchange, headers=headers), observed
    return mutate


def as_a_stream(exchange: Exchange, observed: Observed) -> tuple[Exchange, Observed]:
    return _with(exchange, body=None, sse=_sse([{"type": "response.created", "sequence_number": 0}])), observed


def with_done_sentinel(exchange: Exchange, observed: Observed) -> tuple[Exchange, Observed]:
    return _with(exchange, sse=(exchange.sse or "") + "data: [DONE]\n\n"), observed


def on_upstream(change: Callable[[Observed], None]) -> Mutation:
    def mutate(exchange: Exchange, observed: Observed) -> tuple[Exchange, Observed]:
        changed = copy.deepcopy(observed)
        change(changed)
        return exchange, changed
    return mutate


def one_more_model_call(observed: Observed) -> None:
    observed.model_requests.append(copy.deepcopy(observed.model_requests[-1]) if observed.model_requests
                                   else {"item_types": ["message"], "body": {}, "anomalies": []})


def one_model_call_fewer(observed: Observed) -> None:
    observed.model_requests.pop()


def tool_ran(tool: str, fixture: str = "calc") -> Callable[[Observed], None]:
    return lambda observed: observed.mcp_calls.append({"method": "tools/call", "tool": tool, "fixture": fixture,
                                                       "headers": {}, "at": 0, "ended_at": 0})


def no_tool_ran(observed: Observed) -> None:
    observed.mcp_calls[:] = [call for call in observed.mcp_calls if call["method"] != "tools/call"]


def last_request(change: Callable[[dict[str, Any]], None]) -> Callable[[Observed], None]:
    return lambda observed: change(observed.model_requests[-1])


def first_request(change: Callable[[dict[str, Any]], None]) -> Callable[[Observed], None]:
    return lambda observed: change(observed.model_requests[0])


def sent_type(item_type: str) -> Callable[[Observed], None]:
    return last_request(lambda request: request["item_types"].append(item_type))


def dropped_last_input(request: dict[str, Any]) -> None:
    request["item_types"].pop()


def searched(query: str) -> Callable[[Observed], None]:
    return lambda observed: observed.searches.append({"query": query})


def without_input(item_type: str) -> Callable[[Observed], None]:
    return last_request(lambda request: request["item_types"].remove(item_type))


# -- the claims -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    scenario: str
    step: str
    mode: Mode
    claim: str
    mutate: Mutation
    rule: str
    """The check that must report the broken claim (a rule, or the start of one)."""
    severity: Severity = Severity.ERROR


def items(**replacements: Any) -> Callable[[dict[str, Any]], None]:
    """Replace output items by index (`i1={"type": ...}`) or drop them (`i1=None`)."""
    def change(response: dict[str, Any]) -> None:
        for name, value in sorted(replacements.items(), reverse=True):
            index = int(name[1:])
            if value is None:
                del response["output"][index]
            else:
                response["output"][index] = response["output"][index] | value
    return change


def set_(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set a dotted path (`text.format.description`); the value `...` deletes it."""
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for part in parents:
            document = document[int(part)] if part.isdigit() else document[part]
        if value is ...:
            del document[last]
        else:
            document[int(last) if last.isdigit() else last] = value
    return change


MESSAGE = {"type": "message", "role": "assistant", "status": "completed", "id": "msg_x", "content": []}
N, S, W = "nonstream", "stream", "websocket"

CLAIMS = [
    Claim("text-basic", "ask", N, "one completed message", on_answer(items(i0={"status": "incomplete"})),
          "expect.output"),
    Claim("text-basic", "ask", N, "usage", on_answer(set_("usage", None)), "expect.usage"),
    Claim("text-basic", "ask", S, "OpenAI's event order", drop_events("response.in_progress"), "expect.events"),
    Claim("text-basic", "ask", S, "no [DONE]", with_done_sentinel, "grammar.done_sentinel", Severity.WARNING),
    Claim("text-instructions", "ask", N, "instructions are echoed", on_answer(set_("instructions", "other")),
          "expect.response"),
    Claim("text-instructions", "ask", N, "and reach the model",
          on_upstream(last_request(set_("instructions", None))), "expect.upstream.instructions"),
    Claim("error-missing-model", "ask", N, "a 400", with_status(500), "expect.http_status"),
    Claim("error-missing-model", "ask", N, "envelope", on_answer(set_("error.code", "other")), "expect.error.code"),
    Claim("error-missing-model", "ask", S, "JSON even when streaming was asked", as_a_stream, "expect.error"),
    Claim("incomplete-max-output-tokens", "ask", N, "incomplete", on_answer(set_("status", "completed")),
          "expect.status"),
    Claim("incomplete-max-output-tokens", "ask", N, "reason max_output_tokens",
          on_answer(set_("incomplete_details", {"reason": "content_filter"})), "expect.incomplete_reason"),
    Claim("incomplete-max-output-tokens", "ask", S, "stream ends with response.incomplete",
          on_events(lambda events: [*events[:-1], events[-1] | {"type": "response.completed"}]), "expect.events"),
    Claim("reasoning-summary", "ask", N, "reasoning items", on_answer(items(i0=None)), "expect.output"),
    Claim("reasoning-summary", "ask", S, "their summary events", drop_events("response.reasoning_summary_text.delta"),
          "expect.events"),
    Claim("reasoning-summary", "reasoning_without_its_answer", N, "sent back without the item that followed it",
          with_status(200), "expect.http_status"),
    Claim("reasoning-encrypted-content", "ask", N, "`encrypted_content` on reasoning",
          on_answer(set_("output.0.encrypted_content", ...)), "expect.output"),
    Claim("reasoning-encrypted-content", "ask_without_include", N, "only when `include` asks",
          on_answer(items(i0={"encrypted_content": "gAAAAAB"})), "expect.output"),
    Claim("reasoning-encrypted-content", "replay", N, "accepted without the item that followed it",
          with_status(400), "answer.error"),
    Claim("reasoning-encrypted-content", "foreign_token", N, "a 400 `invalid_encrypted_content`",
          on_answer(set_("error.code", None)), "expect.error.code"),
    Claim("structured-output", "ask", N, "reaches the model",
          on_upstream(first_request(set_("body.text.format.strict", False))), "expect.upstream.request"),
    Claim("structured-output", "ask", N, "echoed with description null",
          on_answer(set_("text.format.description", ...)), "expect.response"),
    Claim("structured-output", "ask", S, "and verbosity", on_answer(set_("text.verbosity", ...)), "expect.response"),
    Claim("upstream-failure", "ask", N, "a 5xx envelope", with_status(400), "expect.http_status"),
    Claim("upstream-failure", "ask", S, "an error event then response.failed", drop_events("error"), "expect.events"),
    Claim("function-call", "ask", N, "ends the response on the function_call", on_answer(items(i0=MESSAGE)),
          "expect.interrupt"),
    Claim("function-call-output-prev-id", "reply", N, "via previous_response_id",
          on_answer(set_("previous_response_id", None)), "expect.response"),
    Claim("function-call-output-prev-id", "reply", N, "the output reaches the model",
          on_upstream(last_request(dropped_last_input)), "expect.upstream.last_input"),
    Claim("function-call-output-stateless", "reply", N, "the same follow-up as a stateless replay",
          on_upstream(last_request(dropped_last_input)), "expect.upstream.last_input"),
    Claim("mcp-call", "ask", N, "mcp_list_tools, mcp_call, answer", on_answer(items(i1=None)), "expect.output"),
    Claim("mcp-call", "ask", S, "event order (two recorded variants)", drop_events("response.mcp_call.completed"),
          "expect.variants"),
    Claim("mcp-call", "ask", N, "reaches the model as function_call + function_call_output",
          on_upstream(last_request(dropped_last_input)), "expect.upstream.last_input"),
    Claim("mcp-call", "ask", N, "control items never", on_upstream(sent_type("mcp_list_tools")),
          "expect.upstream.never_sent"),
    Claim("mcp-call-sse", "ask", N, "the SSE transport", on_upstream(no_tool_ran), "expect.upstream.tool_runs"),
    Claim("mcp-call-failed", "ask", N, "mcp_call failed", on_answer(items(i1={"status": "completed"})),
          "expect.output"),
    Claim("mcp-call-failed", "ask", N, "the error text reaches the model",
          on_upstream(last_request(set_("tool_outputs", ["fine"]))), "expect.upstream.last_tool_output_contains"),
    Claim("mcp-call-failed", "ask", N, "the response completes", on_answer(set_("status", "failed")), "expect.status"),
    Claim("mcp-call-failed", "ask", S, "mcp_call.failed",
          on_events(lambda events: [e | {"type": "response.mcp_call.completed"}
                                    if e["type"] == "response.mcp_call.failed" else e for e in events]),
          "expect.events"),
    Claim("mcp-list-tools-once-per-chain", "second", N, "none on a previous_response_id continuation",
          on_answer(lambda r: r["output"].insert(0, {"type": "mcp_list_tools", "id": "mcpl_x", "server_label": "calc",
                                                     "tools": []})), "expect.output"),
    Claim("mcp-replay-stateless", "followup", N, "not listed again",
          on_answer(lambda r: r["output"].insert(0, {"type": "mcp_list_tools", "id": "mcpl_x", "server_label": "calc",
                                                     "tools": []})), "expect.output"),
    Claim("mcp-replay-stateless", "followup", N, "not run again", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("mcp-list-tools-failure", "ask", N, "424", with_status(500), "expect.http_status"),
    Claim("mcp-list-tools-failure", "ask", N, "external_connector_error", on_answer(set_("error.type", "server_error")),
          "expect.error.type"),
    Claim("mcp-list-tools-failure", "ask", S, "or mcp_list_tools.failed in a stream",
          drop_events("response.mcp_list_tools.failed"), "expect.variants"),
    Claim("mcp-several-servers", "ask", N, "several servers", on_answer(items(i0=None)), "expect.output"),
    Claim("mcp-several-servers", "ask", N, "allowed_tools as a list",
          on_answer(lambda r: r["output"][0]["tools"].append({"name": "echo"})), "expect.body"),
    Claim("mcp-several-servers", "ask", N, "and as a filter",
          on_upstream(first_request(lambda r: r["offered_tools"].append("sleep"))), "expect.upstream.offered_tools"),
    Claim("mcp-with-function-tool", "ask", N, "the MCP call runs", on_upstream(no_tool_ran),
          "expect.upstream.tool_runs"),
    Claim("mcp-with-function-tool", "ask", N, "the response ends on the function call",
          on_answer(lambda r: r["output"].pop()), "expect.interrupt"),
    Claim("mcp-parallel-calls", "ask", N, "each run once", on_upstream(tool_ran("add")), "expect.upstream.tool_runs"),
    Claim("mcp-parallel-calls", "ask", N, "reported in the model's order",
          on_answer(lambda r: r["output"].insert(2, r["output"].pop(3))), "expect.output"),
    Claim("mcp-unoffered-call", "ask", N, "neither run", on_upstream(tool_ran("echo")), "expect.upstream.tool_runs"),
    Claim("mcp-unoffered-call", "ask", N, "nor handed back",
          on_answer(lambda r: r["output"].append({"type": "function_call", "id": "fc_x", "call_id": "c", "name": "echo",
                                                  "arguments": "{}", "status": "completed"})), "expect.interrupt"),
    Claim("mcp-unoffered-call", "ask", N, "the model is told",
          on_upstream(last_request(lambda r: r.__setitem__("item_types", ["message"]))),
          "expect.upstream.last_input_counts"),
    Claim("mcp-authorization", "ask", N, "authorization reaches the server",
          on_upstream(lambda o: o.mcp_calls[0]["headers"].update(authorization="sha256:0000000000000000")),
          "expect.upstream.mcp_authorization"),
    Claim("mcp-authorization", "ask", N, "and is never shown back",
          on_answer(lambda r: r["tools"][0].update(authorization=AUTHORIZATION)), "expect.absent_text"),
    Claim("mcp-gateway-server", "ask", N, "gateway-configured servers, visible", on_answer(items(i0=None)),
          "expect.output"),
    Claim("mcp-gateway-hidden-server", "ask", N, "used by the loop", on_upstream(no_tool_ran),
          "expect.upstream.tool_runs"),
    Claim("mcp-gateway-hidden-server", "ask", N, "never shown",
          on_answer(lambda r: r["output"].insert(0, {"type": "mcp_list_tools", "id": "mcpl_x",
                                                     "server_label": "calc", "tools": []})), "expect.output"),
    Claim("mcp-approval-request", "ask", N, "one mcp_approval_request", on_answer(lambda r: r["output"].pop()),
          "expect.output"),
    Claim("mcp-approval-request", "ask", N, "response completed", on_answer(set_("status", "incomplete")),
          "expect.status"),
    Claim("mcp-approval-request", "ask", N, "nothing run", on_upstream(tool_ran("add")), "expect.upstream.tool_runs"),
    Claim("mcp-approval-approve-prev-id", "approve", N, "the call runs once", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("mcp-approval-approve-prev-id", "approve", N, "before the model is asked",
          on_upstream(last_request(dropped_last_input)), "expect.upstream.last_input"),
    Claim("mcp-approval-approve-prev-id", "approve", N, "approval_request_id set",
          on_answer(items(i0={"approval_request_id": None})), "expect.output"),
    Claim("mcp-approval-approve-stateless", "approve", N, "approve in a stateless replay",
          on_answer(items(i0={"approval_request_id": None})), "expect.output"),
    Claim("mcp-approval-deny", "deny", N, "deny: nothing runs", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("mcp-approval-deny", "deny", N, "the model answers", on_answer(lambda r: r["output"].clear()),
          "expect.output"),
    Claim("mcp-approval-errors", "orphan", N, "an approval with no matching request: 400", with_status(200),
          "expect.http_status"),
    Claim("mcp-approval-errors", "duplicate", N, "previous_response_id plus an item_reference: 400",
          on_answer(set_("error.param", "previous_response_id")), "expect.error.param"),
    Claim("mcp-approval-filter", "unnamed", N, "a tool the always filter does not name still needs approval",
          on_answer(items(i1={"type": "mcp_call"})), "expect.output"),
    Claim("mcp-approval-filter", "exempt", N, "never exempts", on_upstream(no_tool_ran), "expect.upstream.tool_runs"),
    Claim("max-tool-calls-validation", "ask", N, "max_tool_calls below 1 is a 400", with_status(200),
          "expect.http_status"),
    Claim("max-tool-calls-cap", "capped", N, "caps gateway-run calls per response", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("max-tool-calls-cap", "capped", N, "end state: known variants", on_answer(set_("status", "cancelled")),
          "expect.variants"),
    Claim("max-tool-calls-cap", "functions_do_not_count", N, "function calls do not count",
          on_answer(lambda r: r["output"].pop()), "expect.output"),
    Claim("tool-choice", "required", N, "tool_choice reaches the model, relaxed after the first turn",
          on_upstream(last_request(set_("tool_choice", "required"))), "expect.upstream.tool_choices"),
    Claim("tool-choice", "allowed_tools", N, "allowed_tools reaches the model",
          on_upstream(first_request(set_("tool_choice", "auto"))), "expect.upstream.tool_choices"),
    Claim("client-disconnect", "plain", N, "a client that disconnects stops the loop",
          on_upstream(one_more_model_call), "expect.upstream.model_calls"),
    Claim("client-disconnect", "streamed", S, "nothing runs afterwards", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("client-disconnect", "afterwards", S, "the stored response is not completed",
          on_answer(set_("status", "completed")), "expect.variants"),
    Claim("response-chain-lifecycle", "continue", N, "instructions not inherited",
          on_upstream(last_request(set_("instructions", "Answer in French."))), "expect.upstream.instructions"),
    Claim("response-chain-lifecycle", "continue", N, "the model sees the chain",
          on_upstream(last_request(lambda r: r["item_types"].pop(0))), "expect.upstream.last_input"),
    Claim("response-chain-lifecycle", "retrieve", N, "retrieve", with_status(404), "expect.http_status"),
    Claim("response-chain-lifecycle", "delete", N, "delete (response.deleted)", on_answer(set_("object", "response")),
          "expect.body"),
    Claim("response-chain-lifecycle", "retrieve_deleted", N, "the recorded 404 after it",
          on_answer(set_("error.param", "response_id")), "expect.error.param"),
    Claim("response-chain-lifecycle", "continue_from_deleted", N, "continue from the deleted one",
          on_answer(set_("error.code", "not_found")), "expect.error.code"),
    Claim("response-store-false", "retrieve", N, "nothing kept", with_status(200), "expect.http_status"),
    Claim("response-store-false", "retrieve", N, "the same 404 as a deleted response",
          on_answer(set_("error.code", "not_found")), "expect.error.code"),
    Claim("response-store-false", "continue", N, "not continuable", with_status(200), "expect.http_status"),
    Claim("websocket-connection", "second", W, "each numbered from 0",
          on_events(lambda events: [e | {"sequence_number": e["sequence_number"] + 9} for e in events],
                    renumber=False), "grammar.sequence_numbers"),
    Claim("websocket-connection", "first", W, "no [DONE]", with_done_sentinel, "grammar.done_sentinel",
          Severity.WARNING),
    Claim("websocket-connection", "continue", W, "continued on the socket", with_status(400), "expect.http_status"),
    Claim("websocket-connection", "from_new_connection", W, "stored, from a new connection", with_status(400),
          "expect.http_status"),
    Claim("websocket-connection", "unknown_previous", W, "an error frame (400)",
          on_answer(set_("error.code", "not_found")), "expect.error.code"),
    Claim("websocket-connection", "after_error", W, "the socket still answers", with_status(500),
          "expect.http_status"),
    Claim("websocket-connection", "evicted", W, "a failed turn evicts", with_status(200), "expect.http_status"),
    Claim("compact", "compact", N, "every user message, then one compaction item",
          on_answer(lambda b: b["output"].pop(0)), "expect.body"),
    Claim("compact", "compact", N, "input_text, new ids",
          on_answer(set_("output.0.content.0.type", "output_text")), "expect.body"),
    Claim("compact", "resume", N, "that window sent back as input is answered", with_status(400),
          "expect.http_status"),
    Claim("compact-previous-response", "compact", N, "walks the whole chain",
          on_answer(lambda b: b["output"].pop(0)), "expect.body"),
    Claim("compact-previous-response", "resume", N, "starts a chain",
          on_answer(set_("previous_response_id", "resp_other")), "expect.response"),
    Claim("compact-previous-response", "compact_again", N, "only the newer message and a new compaction item",
          on_answer(lambda b: b["output"].insert(0, b["output"][0])), "expect.body"),
    Claim("compaction-context-management", "ask", N, "the message, then a compaction item",
          on_answer(items(i1=None)), "expect.output"),
    Claim("compaction-context-management", "ask", S, "streamed as output_item.added/done only",
          on_events(lambda events: [*events[:-1], {"type": "response.compaction.compacting"}, *events[-1:]]),
          "expect.events"),
    Claim("compaction-context-management", "replay", N, "no new compaction",
          on_answer(lambda b: b["output"].append({"type": "compaction", "id": "cmp_x", "encrypted_content": "x"})),
          "expect.output"),
    Claim("input-tokens", "plain", N, "{object: response.input_tokens, input_tokens}",
          on_answer(set_("object", "response")), "expect.body"),
    Claim("input-tokens", "with_tools", N, "no model asked", on_upstream(one_more_model_call),
          "expect.upstream.model_calls"),
    Claim("previous-response-not-found", "ask", N, "400 previous_response_not_found",
          on_answer(set_("error.code", "not_found")), "expect.error.code"),
    Claim("response-input-items", "newest_two", N, "newest first by default",
          on_answer(lambda b: b["data"].reverse()), "expect.page.ids"),
    Claim("response-input-items", "all", N, "items normalized", on_answer(set_("data.0.status", ...)),
          "expect.body"),
    Claim("response-input-items", "newest_two", N, "limit, has_more", on_answer(set_("has_more", False)),
          "expect.page.has_more"),
    Claim("response-input-items", "oldest_after_cursor", N, "after cursor, order",
          on_answer(set_("data.0.id", "msg_other")), "expect.page.ids"),
    Claim("response-input-items", "all", N, "first_id / last_id", on_answer(set_("first_id", "msg_other")),
          "page.first_id"),
    Claim("response-input-items", "limit_zero", N, "a bad limit", with_status(200), "expect.http_status"),
    Claim("conversations-crud", "create", N, "create (metadata)", on_answer(set_("metadata", {})), "expect.body"),
    Claim("conversations-crud", "too_many_items", N, "at most 20 items", with_status(200), "expect.http_status"),
    Claim("conversations-crud", "read", N, "read", on_answer(set_("object", "thread")), "expect.body"),
    Claim("conversations-crud", "update", N, "update", on_answer(set_("metadata", {"topic": "demo"})),
          "expect.body"),
    Claim("conversations-crud", "delete", N, "delete", on_answer(set_("deleted", False)), "expect.body"),
    Claim("conversations-crud", "listed", N, "items: list", on_answer(lambda b: b["data"].reverse()),
          "expect.page.ids"),
    Claim("conversations-crud", "add", N, "add", on_answer(lambda b: b["data"].pop()), "expect.page.count"),
    Claim("conversations-crud", "one_item", N, "read", on_answer(set_("role", "assistant")), "expect.body"),
    Claim("conversations-crud", "delete_item", N, "delete", on_answer(set_("object", "conversation.item")),
          "expect.body"),
    Claim("files-crud", "upload", N, "upload", on_answer(set_("purpose", "assistants")), "expect.body"),
    Claim("files-crud", "listed", N, "list by purpose", on_answer(lambda b: b["data"].clear()), "expect.page.count"),
    Claim("files-crud", "read", N, "(`expires_after`)", on_answer(set_("expires_at", None)), "expect.body"),
    Claim("files-crud", "content", N, "download", with_status(404), "expect.http_status"),
    Claim("files-crud", "delete", N, "delete", on_answer(set_("deleted", False)), "expect.body"),
    Claim("files-crud", "read_deleted", N, "the 404 after", with_status(200), "expect.http_status"),
    Claim("files-errors", "read_unknown", N, "an unknown id is a 404 `No such File object` (param `id`)",
          on_answer(set_("error.param", None)), "expect.error.param"),
    Claim("files-errors", "no_file", N, "no file", with_status(200), "expect.http_status"),
    Claim("files-errors", "no_purpose", N, "no purpose", on_answer(set_("error.param", "file")),
          "expect.error.param"),
    Claim("files-errors", "bad_purpose", N, "a bad purpose", with_status(200), "expect.http_status"),
    Claim("vector-stores-crud", "create", N, "create with `file_ids`", on_answer(set_("file_counts.total", 0)),
          "expect.body"),
    Claim("vector-stores-crud", "attach", N, "attach with `attributes`", on_answer(set_("attributes", None)),
          "expect.body"),
    Claim("vector-stores-crud", "files", N, "list and read files", on_answer(lambda b: b["data"].reverse()),
          "expect.page.ids"),
    Claim("vector-stores-crud", "search_one", N, "search with `max_num_results`",
          on_answer(lambda b: b["data"].append(b["data"][0])), "expect.body"),
    Claim("vector-stores-crud", "search_filtered", N, "compound `filters` and `ranking_options`",
          on_answer(lambda b: b["data"].insert(0, b["data"][0] | {"attributes": None})), "expect.body"),
    Claim("vector-stores-crud", "update", N, "update a store", on_answer(set_("name", "parity-docs")), "expect.body"),
    Claim("vector-stores-crud", "search_old_attributes", N, "and a file's attributes",
          on_answer(lambda b: b["data"].append({"file_id": "file-x"})), "expect.body"),
    Claim("vector-stores-crud", "content", N, "a file's content", on_answer(set_("object", "list")), "expect.body"),
    Claim("vector-stores-crud", "detach", N, "detach", on_answer(set_("deleted", False)), "expect.body"),
    Claim("vector-stores-crud", "search_after_delete", N, "a file deleted through the Files API is found in no store",
          on_answer(lambda b: b["data"].append({"file_id": "file-x"})), "expect.body"),
    Claim("vector-stores-crud", "read_deleted", N, "delete", with_status(200), "expect.http_status"),
    Claim("vector-stores-errors", "unknown_store", N, "unknown store", with_status(400), "expect.http_status"),
    Claim("vector-stores-errors", "attach_unknown_file", N, "or file (404)", with_status(200), "expect.http_status"),
    Claim("vector-stores-errors", "unsupported_type", N, "a type file search does not read (400 `unsupported_file`)",
          on_answer(set_("error.code", "invalid_value")), "expect.error.code"),
    Claim("vector-stores-errors", "bad_filter", N, "a bad filter", on_answer(set_("error.param", "filters")),
          "expect.error.param"),
    Claim("vector-stores-errors", "bad_chunking", N, "chunking", with_status(200), "expect.http_status"),
    Claim("vector-stores-errors", "bad_rewrite_query", N, "`rewrite_query`", with_status(200), "expect.http_status"),
    Claim("vector-stores-errors", "bad_score_threshold", N, "or `score_threshold` (400 naming the field)",
          on_answer(set_("error.param", "ranking_options")), "expect.error.param"),
    Claim("vector-stores-errors", "rewrite_query", N, "`rewrite_query: true`", with_status(500), "expect.variants"),
    Claim("vector-store-file-batches", "shared_files", N, "`file_ids` with shared attributes",
          on_answer(set_("data.0.attributes", None)), "expect.body"),
    Claim("vector-store-file-batches", "own_files", N, "`files` with their own",
          on_answer(set_("data.0.attributes", {"kind": "log"})), "expect.body"),
    Claim("vector-store-file-batches", "shared_done", N, "retrieve", on_answer(set_("status", "in_progress")),
          "expect.body"),
    Claim("vector-store-file-batches", "shared_failed", N, "list files by status",
          on_answer(lambda b: b["data"].append({"id": "file-x"})), "expect.page.count"),
    Claim("vector-store-file-batches", "cancel", N, "cancel", on_answer(set_("object", "vector_store.file")),
          "expect.body"),
    Claim("vector-store-file-batches", "nothing_refused_attached", N, "a refused batch attaches nothing",
          on_answer(set_("file_counts.total", 4)), "expect.body"),
    Claim("conversation-responses", "first", N, "its items are history",
          on_upstream(last_request(lambda r: r["item_types"].pop(0))), "expect.upstream.last_input"),
    Claim("conversation-responses", "all_items", N, "input and output are added", on_answer(lambda b: b["data"].pop()),
          "expect.page.count"),
    Claim("conversation-responses", "with_previous_response", N, "with previous_response_id a 400", with_status(200),
          "expect.http_status"),
    Claim("conversation-responses", "unknown_conversation", N, "unknown a 404", with_status(400),
          "expect.http_status"),
    Claim("conversation-mcp-replay", "second", N, "a stored mcp_call is not run again", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("conversation-mcp-replay", "second", N, "a stored mcp_list_tools not repeated",
          on_answer(lambda r: r["output"].insert(0, {"type": "mcp_list_tools", "id": "mcpl_x", "server_label": "calc",
                                                     "tools": []})), "expect.output"),
    Claim("background-poll", "start", N, "queued at once", on_answer(set_("status", "completed")), "expect.variants"),
    Claim("background-poll", "start", N, "no output, no usage", on_answer(set_("usage", {"input_tokens": 1})),
          "expect.usage"),
    Claim("background-poll", "poll", N, "polled to completion", on_answer(set_("status", "in_progress")),
          "expect.status"),
    Claim("background-poll", "start", S, "streamed: created, response.queued, in_progress",
          drop_events("response.queued"), "expect.events"),
    Claim("background-requires-store", "start", N, "background mode needs store", with_status(200),
          "expect.http_status"),
    Claim("background-cancel", "cancel", N, "cancel a background response", on_answer(set_("status", "queued")),
          "expect.status"),
    Claim("background-cancel", "cancel_again", N, "twice: the same response", on_answer(set_("id", "resp_other")),
          "expect.response"),
    Claim("background-cancel", "cancel_synchronous", N, "a synchronous one cannot be", with_status(200),
          "expect.http_status"),
    Claim("background-stream-resume", "after_created", S, "with the same numbering",
          on_events(lambda events: [e | {"sequence_number": i} for i, e in enumerate(events)], renumber=False),
          "grammar.sequence_numbers"),
    Claim("background-stream-resume", "mid_text", S, "streams again from any event",
          drop_events("response.output_text.delta"), "expect.events"),
    Claim("web-search-citations", "ask", N, "`web_search_call` with its `search` action",
          on_answer(items(i0={"action": {"type": "search", "query": "zephyr"}})), "expect.response"),
    Claim("web-search-citations", "ask", N, "the query searched", on_upstream(lambda o: o.searches.clear()),
          "expect.upstream.searches"),
    Claim("web-search-citations", "ask", N, "an answer citing a result (`url_citation`)",
          on_answer(set_("output.1.content.0.annotations", [])), "expect.response"),
    Claim("web-search-citations", "ask", N, "the parentheses around the link included",
          on_answer(lambda b: b["output"][1]["content"][0]["annotations"][0].update(start_index=13)),
          "expect.response"),
    Claim("web-search-citations", "ask", S, "OpenAI's event order with `annotation.added` between the text deltas",
          drop_events("response.output_text.annotation.added"), "expect.events"),
    Claim("web-search-citations", "ask", N, "only with `include`",
          on_answer(lambda r: r["output"][0]["action"].update(sources=[{"type": "url", "url": "https://x.example"}])),
          "expect.absent_text"),
    Claim("web-search-citations", "with_sources", N, "the action's `sources`",
          on_answer(lambda r: r["output"][0]["action"].pop("sources")), "expect.response"),
    Claim("web-search-citations", "ask", N, "the search reaches the model as a function call and its output",
          on_upstream(without_input("function_call_output")), "expect.upstream.last_input"),
    Claim("file-search", "ask", N, "`file_search_call` with its `queries`", on_answer(items(i0={"queries": []})),
          "expect.response"),
    Claim("file-search", "ask", N, "`results` null without `include`",
          on_answer(items(i0={"results": [{"file_id": "file-x"}]})), "expect.response"),
    Claim("file-search", "with_results", N, "and filled with it (file, score, text, store)",
          on_answer(lambda r: r["output"][0]["results"][0].pop("vector_store_id")), "expect.response"),
    Claim("file-search", "ask", N, "a `file_citation`", on_answer(set_("output.1.content.0.annotations.0.index", 0)),
          "expect.response"),
    Claim("file-search", "ask", N, "the tool echo (`max_num_results: 20`, `ranking_options`, `filters: null`)",
          on_answer(set_("tools.0.ranking_options", None)), "expect.body"),
    Claim("file-search", "with_results", S, "the event order", drop_events("response.file_search_call.searching"),
          "expect.events"),
    Claim("file-search-filters", "compound", N, "a compound: the other file is kept out of the results",
          on_answer(lambda r: r["output"][0]["results"].append(r["output"][0]["results"][0] | {"file_id": "file-x"})),
          "expect.body"),
    Claim("file-search-filters", "comparison", N, "and a comparison", on_answer(items(i0={"results": []})),
          "expect.body"),
    Claim("file-search-filters", "compound", N, "and out of what the model reads",
          on_upstream(last_request(lambda r: r["tool_outputs"].append("The zephyr valve was last serviced in the "
                                                                      "spring."))),
          "expect.upstream.last_tool_output_lacks"),
    Claim("hosted-tools-max-tool-calls", "capped", N, "the call past the budget is not run",
          on_upstream(searched("parity zephyr valve shipping cost")), "expect.upstream.searches"),
    Claim("hosted-tools-max-tool-calls", "capped", N, "counts web searches and MCP calls together",
          on_upstream(no_tool_ran), "expect.upstream.tool_runs"),
    Claim("hosted-tools-max-tool-calls", "capped", N, "end state: known variants",
          on_answer(set_("status", "cancelled")), "expect.variants"),
    Claim("hosted-tools-replay", "follow_up", N, "through `previous_response_id`: never searched again",
          on_upstream(searched("parity zephyr valve torque")), "expect.upstream.searches"),
    Claim("hosted-tools-replay", "follow_up", N, "the model reads the same pages",
          on_upstream(last_request(set_("tool_outputs", ["The text of these web results was not kept."]))),
          "expect.upstream.last_tool_output_contains"),
    Claim("hosted-tools-replay", "next_in_conversation", N, "(which keeps the pages)",
          on_upstream(last_request(set_("tool_outputs", ["The text of these web results was not kept."]))),
          "expect.upstream.last_tool_output_contains"),
    Claim("hosted-tools-replay", "next_in_conversation", N,
          "or a conversation: read again as a function call and output", on_upstream(without_input("function_call")),
          "expect.upstream.last_input"),
    Claim("hosted-tools-replay", "next_in_conversation", N, "never searched again",
          on_upstream(searched("parity zephyr valve torque")), "expect.upstream.searches"),
    Claim("chat-passthrough", "ask", N, "the request passes through unchanged",
          on_upstream(last_request(set_("path", "/v1/responses"))), "expect.upstream.model_paths"),
    Claim("chat-mcp-loop", "ask", N, "the loop runs the tools", on_upstream(no_tool_ran), "expect.upstream.tool_runs"),
    Claim("chat-mcp-loop", "ask", N, "and returns the final answer",
          on_answer(set_("choices.0.finish_reason", "tool_calls")), "expect.chat.finish_reason"),
    Claim("chat-opt-out", "ask", N, "a truthy opt-out header (any case) skips the loop", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("chat-client-tools", "ask", N, "client-declared tools merged with the gateway's",
          on_upstream(first_request(lambda r: r["offered_tools"].pop())), "expect.upstream.offered_tools"),
    Claim("chat-client-tools", "ask", N, "their calls handed back",
          on_answer(set_("choices.0.finish_reason", "stop")), "expect.chat.finish_reason"),
    Claim("chat-tool-discovery", "ask", N, "every server listed, malformed tools dropped",
          on_upstream(first_request(lambda r: r["offered_tools"].append("no_schema"))),
          "expect.upstream.offered_tools"),
    Claim("chat-tool-discovery", "ask", N, "first server wins a name",
          on_upstream(last_request(set_("tool_outputs", ["calc: hi"]))), "expect.upstream.last_tool_output_contains"),
    Claim("chat-argument-validation", "ask", N, "validated before dispatch", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("chat-argument-validation", "ask", N, "a violation goes back to the model",
          on_upstream(one_model_call_fewer), "expect.upstream.model_calls"),
    Claim("chat-budgets", "ask", N, "the round budget ends the loop with finish_reason length",
          on_answer(set_("choices.0.finish_reason", "stop")), "expect.chat.finish_reason"),
    Claim("chat-deadline", "ask", N, "a deadline that a slow tool cannot overrun", on_upstream(one_more_model_call),
          "expect.upstream.model_calls"),
    Claim("chat-concurrency-limit", "refused", N, "one more is a 429", with_status(200), "expect.http_status"),
    Claim("chat-concurrency-limit", "refused", N, "with Retry-After", with_header("retry-after", None),
          "expect.headers"),
    Claim("chat-stream-disabled", "ask", S, "answers JSON even when streaming was asked",
          with_header("content-type", "text/event-stream"), "expect.headers"),
    Claim("chat-tool-cache", "ask", N, "the cache reuses identical calls", on_upstream(tool_ran("add")),
          "expect.upstream.tool_runs"),
    Claim("chat-tool-cache", "audit", N, "within its TTL (cached in the audit)",
          on_answer(lambda b: [r.update(status="ok") for r in b["records"]]), "expect.body"),
    Claim("chat-audit", "audit", N, "one record per model round and per tool dispatch",
          on_answer(lambda b: b["records"].pop()), "expect.body"),
    Claim("chat-anthropic-provider", "ask", N, "an Anthropic Messages upstream",
          on_upstream(last_request(set_("path", "/v1/chat/completions"))), "expect.upstream.model_paths"),
    Claim("chat-anthropic-provider", "ask", N, "translated to OpenAI's shapes",
          on_answer(set_("choices.0.finish_reason", "end_turn")), "expect.chat.finish_reason"),
    Claim("ssrf-guard", "responses", N, "blocks private addresses (424)", with_status(200), "expect.http_status"),
    Claim("ssrf-guard", "chat", N, "on both surfaces (403)", with_status(200), "expect.http_status"),
    Claim("ssrf-guard", "chat", N, "nothing reaches the model", on_upstream(one_more_model_call),
          "expect.upstream.model_calls"),
]

AUTHORIZATION = re.search(r'authorization: "([^"]+)"',
                          (builtin_scenarios_dir() / "mcp-authorization.yaml").read_text())[1]


# -- running ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def passing(stack: Stack) -> dict[tuple[str, Mode], ScenarioResult]:
    """Each claimed scenario, run once on the reference gateway in each mode a claim uses."""
    wanted = {(claim.scenario, claim.mode) for claim in CLAIMS}
    catalogue = load([builtin_scenarios_dir()])
    units = [(loaded, mode) for loaded in catalogue.scenarios for mode in loaded.scenario.modes
             if (loaded.scenario.id, mode) in wanted]
    assert stack.reference_url is not None
    results = Session(Target("reference", stack.reference_url), stack).run(units, jobs=6)
    return {(r.scenario.id, r.mode): r for r in results}


def judged(step: StepResult, exchange: Exchange, observed: Observed) -> list[Finding]:
    assert step.expect is not None
    findings = judge(Case(exchange, step.chat, step.expect)).findings + upstream_findings(observed)
    if step.expect.upstream is not None:
        findings += compare_upstream(step.expect.upstream, observed)
    return findings


def test_every_row_of_the_catalogue_has_claims() -> None:
    rows = re.findall(r"^\|.*\[([a-z0-9-]+)\]\([a-z0-9-]+\.yaml\) \|$", (Path(builtin_scenarios_dir())
                                                                          / "README.md").read_text(), re.M)
    assert rows and sorted(set(rows) - {claim.scenario for claim in CLAIMS}) == []


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.scenario}:{c.step}[{c.mode}] {c.claim}")
def test_a_broken_claim_is_reported(claim: Claim, passing: dict[tuple[str, Mode], ScenarioResult]) -> None:
    result = passing[(claim.scenario, claim.mode)]
    assert result.outcome == "pass", [f.message for _, f in result.findings if f.fails]
    step = next(s for s in result.steps if s.step_id == claim.step)
    assert step.exchange is not None
    assert not [f for f in judged(step, step.exchange, step.observed or Observed()) if f.severity >= claim.severity], \
        "the passing answer must pass when judged again"
    exchange, observed = claim.mutate(step.exchange, step.observed or Observed())
    reported = [f for f in judged(step, exchange, observed) if f.rule.startswith(claim.rule)]
    assert any(f.severity >= claim.severity for f in reported), \
        f"{claim.rule} did not report: {[(f.rule, f.message) for f in judged(step, exchange, observed)]}"
