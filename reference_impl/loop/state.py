"""One frozen context per request, one mutable state per loop run.

`LoopContext` holds what does not change while the loop runs (the request, the servers, the
budget, the collaborators). `LoopState` holds everything that does: the transcript, the
tools the model may call, the latest model turn, counters. Taking the next action leaves
`Finish` behind, so a step that forgets to set one ends the run instead of spinning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..chain import Chain, History, PendingApproval
from ..client import FunctionTool, McpTool
from ..compaction import ContextManagement
from ..errors import BlockedDestination, GatewayError
from ..hosted_tools import HostedRunner
from ..mcp_servers import ListedTool, McpConnector, McpServer
from ..tool_cache import ToolResultCache
from ..tool_catalog import ToolCatalog
from ..upstream.adapter import UpstreamAdapter, responses_usage
from ..upstream.items import ToolCall, TranscriptItem
from .actions import CallLlm, Completed, Finish, NextAction


@dataclass(frozen=True)
class ServerBinding:
    """An MCP server the loop may use, with the request's policy for it (None for a server
    from the gateway's configuration, whose policy is `approval_required`)."""

    server: McpServer
    policy: McpTool | None
    approval_required: bool = False

    def offers(self, tool: ListedTool) -> bool:
        return self.policy is None or self.policy.allows(tool.name, tool.read_only)

    def requires_approval(self, tool_name: str) -> bool:
        return self.policy.approval.requires_approval(tool_name) if self.policy else self.approval_required


@dataclass(frozen=True)
class GatewayTool:
    binding: ServerBinding
    listed: ListedTool


@dataclass(frozen=True)
class LoopRequest:
    """What the loop needs of a client request, whichever surface it came from."""

    model: str
    instructions: str | None = None
    function_tools: tuple[FunctionTool, ...] = ()
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    stream: bool = False
    """Whether to stream the upstream call."""
    sampling: dict[str, Any] = field(default_factory=dict)
    generate: bool = True
    """False: a warm-up (WebSocket mode's `generate: false`): the tools are listed, the model is
    not asked, the response ends with no answer and can be continued."""


@dataclass(frozen=True)
class LoopContext:
    request: LoopRequest
    history: History
    bindings: tuple[ServerBinding, ...]
    adapter: UpstreamAdapter
    connector: McpConnector
    catalog: ToolCatalog
    tool_budget: int
    refusal_budget: int
    """Calls to tools the request does not offer that the loop refuses (the gateway's own
    `tool_call_cap`); past them the model is asked once more, without tools."""
    tool_cache: ToolResultCache | None = None
    hosted: Mapping[str, HostedRunner] = field(default_factory=dict)
    """The gateway's hosted tools (web_search, file_search) by the name the model calls them."""
    max_rounds: int | None = None
    """Model calls the loop may make (None: no limit of its own)."""
    deadline: float | None = None
    """`time.monotonic()` value by which the loop must end (None: no limit of its own)."""
    context_management: ContextManagement | None = None
    """Compact the context once it is this long, at the end of a completed response."""


@dataclass
class TurnResult:
    """What the latest model call produced."""

    calls: list[ToolCall] = field(default_factory=list)
    tools_offered: bool = True
    incomplete_reason: str | None = None
    error: GatewayError | None = None


@dataclass
class LoopState:
    transcript: list[TranscriptItem]
    listed: dict[str, tuple[ListedTool, ...]]
    pending: dict[str, PendingApproval]
    upstream_response_id: str | None = None
    gateway_tools: dict[str, GatewayTool] = field(default_factory=dict)
    latest_turn: TurnResult | None = None
    model_calls: int = 0
    tool_calls_executed: int = 0
    tool_calls_refused: int = 0
    sent_upto: int = 0
    usage: dict[str, Any] | None = None
    audit: list[dict[str, Any]] = field(default_factory=list)
    """One record per model round and per tool dispatch, in order."""
    blocked: BlockedDestination | None = None
    """The destination a gateway call was refused: the step that ran it stopped there."""
    deadline_passed: bool = False
    """The context's deadline cut the latest step short."""
    _next: NextAction = field(default_factory=CallLlm)

    @classmethod
    def start(cls, history: History) -> LoopState:
        chain = history.chain
        return cls(list(chain.transcript), dict(chain.listed), dict(chain.pending),
                   chain.upstream_response_id, sent_upto=history.new_from)

    def take_next_action(self) -> NextAction:
        action, self._next = self._next, Finish(Completed())
        return action

    def set_next_action(self, action: NextAction) -> None:
        self._next = action

    def add_usage(self, usage: dict[str, Any] | None) -> None:
        """Add one model call's usage to the response's (each count and each detail summed)."""
        if not usage:
            return
        if self.usage is None:
            self.usage = responses_usage(0, 0)
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            self.usage[key] += usage.get(key) or 0
        for details in ("input_tokens_details", "output_tokens_details"):
            for key in self.usage[details]:
                self.usage[details][key] += (usage.get(details) or {}).get(key) or 0

    def chain(self, item_ids: frozenset[str]) -> Chain:
        """The chain a continuation of this response starts from."""
        return Chain(tuple(self.transcript), dict(self.listed), dict(self.pending), item_ids,
                     self.upstream_response_id)
