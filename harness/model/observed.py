"""What reached the fixtures during a run, as the harness reads it back from their logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Observed:
    """What reached the fixtures: the model requests the scripted upstream logged (in order of
    arrival), the MCP tool listings and calls the fixture servers logged, and the searches the
    search fixture logged."""

    model_requests: list[dict[str, Any]] = field(default_factory=list)
    mcp_calls: list[dict[str, Any]] = field(default_factory=list)
    searches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def refusals(self) -> list[tuple[int, dict[str, Any]]]:
        """What the model's API would have refused in each model request (its number from 1, and
        the refusal: `api`, `param`, `code`, `message`), as the scripted upstream judged it."""
        return [(number, refusal) for number, request in enumerate(self.model_requests, 1)
                for refusal in request.get("refusals", [])]

    @property
    def unfit(self) -> list[str]:
        """The scripted calls the gateway's offered functions could not take as the script words
        them (the script's shortcoming: the step could not be run as written)."""
        return [message for request in self.model_requests for message in request.get("unfit", [])]

    @property
    def anomalies(self) -> list[str]:
        """What the scripted upstream could not answer as scripted, request by request."""
        return [anomaly for request in self.model_requests for anomaly in request.get("anomalies", [])]

    def tool_runs(self) -> dict[str, int]:
        """Executions by tool name, and by `fixture.tool`."""
        runs: dict[str, int] = {}
        for call in self.mcp_calls:
            if call["method"] == "tools/call":
                for key in (call["tool"], f"{call['fixture']}.{call['tool']}"):
                    runs[key] = runs.get(key, 0) + 1
        return runs

    @property
    def in_flight(self) -> bool:
        """Whether a model request or an MCP request is still being answered."""
        return any(not request.get("finished") for request in self.model_requests) or \
            any(call.get("ended_at") is None for call in self.mcp_calls)

    @property
    def progress(self) -> tuple[int, int, int, int]:
        """Changes whenever anything new reaches the fixtures or a request to them ends."""
        return (len(self.model_requests), len(self.mcp_calls), len(self.searches),
                sum(bool(request.get("finished")) for request in self.model_requests),
                sum(call.get("ended_at") is not None for call in self.mcp_calls))

    def to_dict(self) -> dict[str, Any]:
        return {"model_requests": self.model_requests, "anomalies": self.anomalies, "mcp_calls": self.mcp_calls,
                "searches": self.searches}
