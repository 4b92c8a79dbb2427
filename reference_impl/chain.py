"""The stored chain behind `previous_response_id`, and how client input items become history.

A `Chain` is what the gateway keeps to continue a conversation: the model's transcript so
far, the tools each MCP server listed (so a continuation does not list again), the approval
requests still waiting for an answer, and the ids of the items the client has seen.
`history_from_input` converts client items into that representation; it is the only place
where `mcp_*` items are interpreted, and none of them becomes a transcript item except an
executed `mcp_call` (as a `ToolCall` plus its `ToolOutput`). A `compaction` item becomes the
summary it seals (`compaction.summary_message`), which stands for every item before it but the
user messages, as in the window `/responses/compact` answers (recorded: a replayed history of
three questions and three long answers, then a compaction item, was counted as a few hundred
tokens; OpenAI's guide lets a client drop what precedes the latest compaction item). A
`web_search_call` or
`file_search_call` becomes the function call and output the model reads of it
(`hosted_items.replayed`): never searched again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, is_dataclass, replace
from typing import Any

from .compaction import summary_message
from .errors import InvalidRequest
from .hosted_items import ITEM_TYPES as HOSTED_ITEM_TYPES, replayed as replayed_hosted_item
from .mcp_servers import ListedTool
from .reasoning_items import replayed_reasoning
from .sealing import Sealer
from .upstream.items import Message, Reasoning, ToolCall, ToolOutput, TranscriptItem


@dataclass(frozen=True)
class PendingApproval:
    """An MCP call the model made that waits for the client's `mcp_approval_response`."""

    approval_request_id: str
    server_label: str
    call: ToolCall


@dataclass(frozen=True)
class ApprovalDecision:
    pending: PendingApproval
    approve: bool
    reason: str | None = None


@dataclass(frozen=True)
class Chain:
    transcript: tuple[TranscriptItem, ...] = ()
    listed: dict[str, tuple[ListedTool, ...]] = field(default_factory=dict)
    pending: dict[str, PendingApproval] = field(default_factory=dict)
    item_ids: frozenset[str] = frozenset()
    upstream_response_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The chain as JSON values (for storing; it shares containers with the chain, so it is
        to be serialized, not changed)."""
        return {
            "transcript": [{"kind": type(item).__name__, **_fields(item)} for item in self.transcript],
            "listed": {label: [_fields(tool) for tool in tools] for label, tools in self.listed.items()},
            "pending": {key: _fields(p) for key, p in self.pending.items()},
            "item_ids": sorted(self.item_ids),
            "upstream_response_id": self.upstream_response_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Chain:
        kinds = {k.__name__: k for k in (Message, ToolCall, ToolOutput, Reasoning)}
        transcript = []
        for raw in data["transcript"]:
            fields_ = {k: v for k, v in raw.items() if k != "kind"}
            if raw["kind"] == "Reasoning":
                fields_["summary"] = tuple(fields_["summary"])
            transcript.append(kinds[raw["kind"]](**fields_))
        return cls(
            transcript=tuple(transcript),
            listed={label: tuple(ListedTool(**t) for t in tools) for label, tools in data["listed"].items()},
            pending={key: PendingApproval(p["approval_request_id"], p["server_label"], ToolCall(**p["call"]))
                     for key, p in data["pending"].items()},
            item_ids=frozenset(data["item_ids"]),
            upstream_response_id=data.get("upstream_response_id"),
        )


def _fields(item: Any) -> dict[str, Any]:
    """A dataclass's fields by name, dataclasses in them likewise; `asdict` without its deep
    copies (about a third of what storing a response cost, profiled)."""
    return {name: _fields(value) if is_dataclass(value) else value for name, value in vars(item).items()}


@dataclass(frozen=True)
class History:
    """A request's history resolved: the chain it continues with its own input added, the
    approval answers it carries, and where this request's new transcript items start."""

    chain: Chain
    decisions: tuple[ApprovalDecision, ...]
    new_from: int


def call_id_for(item_id: str) -> str:
    """The transcript call id of an `mcp_call` or approval request replayed by the client."""
    return f"call_{item_id.split('_', 1)[-1]}"


def _output_text(item: dict[str, Any]) -> str:
    if item.get("output") is not None:
        return str(item["output"])
    error = item.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error.get("content") or error)
    return str(error or "")


def history_from_input(previous: Chain | None, items: list[dict[str, Any]], sealer: Sealer) -> History:
    """Append the client's input items (each with its id: `client.with_ids`) to the chain they
    continue (empty when stateless); compaction and reasoning items are opened with `sealer`."""
    chain = previous or Chain()
    transcript = list(chain.transcript)
    listed = dict(chain.listed)
    pending = dict(chain.pending)
    item_ids = set(chain.item_ids)
    answers: list[tuple[int, dict[str, Any]]] = []
    replaced_by_summary = False
    called = {entry.call_id for entry in transcript if isinstance(entry, ToolCall)}
    for index, item in enumerate(items):
        item_id = item.get("id")
        if item_id and previous is not None and item_id in previous.item_ids:
            raise InvalidRequest(f"Duplicate item found with id {item_id}. Remove duplicate items from your "
                                 "input and try again.", param="input")
        kind = item["type"]
        if kind == "item_reference":
            raise InvalidRequest(f"Item with id '{item_id}' not found.", param=f"input[{index}].id")
        if item_id:
            item_ids.add(item_id)
        if kind == "message":
            transcript.append(Message(item["role"], item["content"], id=item_id))
        elif kind == "compaction":
            transcript = [*(kept for kept in transcript if isinstance(kept, Message) and kept.role == "user"),
                          summary_message(item["id"], str(sealer.open(item["encrypted_content"], "compaction")))]
            replaced_by_summary = True
        elif kind == "function_call":
            transcript.append(ToolCall(item["call_id"], item["name"], item["arguments"]))
            called.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in called:
                raise InvalidRequest(f"No tool call found for function call output with call_id {item['call_id']}.",
                                     param="input")  # as OpenAI words it for a shell call output (recorded)
            transcript.append(ToolOutput(item["call_id"], item["output"]))
        elif kind == "reasoning":
            transcript.append(replayed_reasoning(item, sealer))
        elif kind == "mcp_list_tools":
            listed[item["server_label"]] = tuple(
                ListedTool(t["name"], t.get("description"), t.get("input_schema") or {}, t.get("annotations"))
                for t in item.get("tools") or [])
        elif kind == "mcp_call":
            call_id = call_id_for(item["id"])
            transcript += [ToolCall(call_id, item["name"], item["arguments"]), ToolOutput(call_id, _output_text(item))]
        elif kind == "mcp_approval_request":
            call = ToolCall(call_id_for(item["id"]), item["name"], item["arguments"])
            pending[item["id"]] = PendingApproval(item["id"], item["server_label"], call)
        elif kind == "mcp_approval_response":
            answers.append((index, item))
        elif kind in HOSTED_ITEM_TYPES:
            transcript += replayed_hosted_item(item, call_id_for(item["id"]))
        else:
            raise InvalidRequest(f"The reference gateway does not accept input items of type '{kind}'.",
                                 param=f"input[{index}].type", code="unsupported_value")
    decisions = []
    for index, answer in answers:
        request_id = answer["approval_request_id"]
        if request_id not in pending:
            raise InvalidRequest(f"No approval request found with id '{request_id}'.",
                                 param=f"input[{index}].approval_request_id")
        decisions.append(ApprovalDecision(pending.pop(request_id), bool(answer["approve"]), answer.get("reason")))
    resolved = replace(chain, transcript=tuple(transcript), listed=listed, pending=pending,
                       item_ids=frozenset(item_ids))
    if replaced_by_summary:  # a model-side chain holds what the summary replaced: the model is sent it all
        return History(replace(resolved, upstream_response_id=None), tuple(decisions), new_from=0)
    return History(resolved, tuple(decisions), new_from=len(chain.transcript))
