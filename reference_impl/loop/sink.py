"""What the driver tells a surface: the `LoopSink` protocol.

The driver says what happens ("a message starts", "an MCP call finished", "the run ended
thus"); a sink turns that into what its client reads: Responses events and a Response object
(`responses_sink.py`), or a chat completion (`chat/sink.py`). A sink makes no decisions. The
handles it returns are its own; the driver only passes them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import GatewayError
from ..hosted_items import HostedKind
from ..hosted_tools import HostedOutcome
from .actions import Outcome


@dataclass(frozen=True)
class LoopResult:
    """What the client gets when the run ends, and the error when it failed."""

    response: dict[str, Any]
    error: GatewayError | None = None


class LoopSink(Protocol):
    def started(self) -> None: ...

    def list_tools_started(self, server_label: str) -> Any: ...

    def list_tools_done(self, handle: Any, server_label: str, tools: list[dict[str, Any]], error: str | None) -> None:
        ...

    def message_started(self) -> Any: ...

    def text_delta(self, handle: Any, delta: str) -> None: ...

    def message_done(self, handle: Any, text: str, incomplete: bool) -> None: ...

    def reasoning_started(self) -> Any: ...

    def summary_part_started(self, handle: Any, summary_index: int) -> None: ...

    def summary_delta(self, handle: Any, summary_index: int, delta: str) -> None: ...

    def summary_part_done(self, handle: Any, summary_index: int, text: str) -> None: ...

    def reasoning_done(self, handle: Any, summary: tuple[str, ...]) -> None: ...

    def mcp_call_started(self, server_label: str, name: str, arguments: str,
                         approval_request_id: str | None) -> Any: ...

    def mcp_call_done(self, handle: Any, output: str | None, error: dict[str, Any] | None) -> None: ...

    def hosted_call_started(self, kind: HostedKind) -> Any:
        """A hosted search (web_search, file_search) starts."""
        ...

    def hosted_call_done(self, handle: Any, kind: HostedKind, outcome: HostedOutcome) -> None:
        """It ended; what it found is citable in the messages that follow."""
        ...

    def function_call(self, call_id: str, name: str, arguments: str) -> None: ...

    def approval_request(self, server_label: str, name: str, arguments: str) -> str:
        """Show an approval request; returns its id."""
        ...

    def finished(self, outcome: Outcome, usage: dict[str, Any] | None) -> LoopResult: ...
