"""Which step of a run caused what the fixtures saw, told by cause rather than by when the
harness happened to look, so a step's `expect.upstream` covers everything its request led to,
however late (a background response, a loop that went on after its client had gone).

- A model request belongs to the step whose scripted turn it asked for: the scripted upstream
  knows the turn from the transcript and records the step (past the end of the script, the
  chain's latest step).
- An MCP request belongs to a create request that was in flight when it arrived (sent, and its
  answer not yet over; a background or abandoned request stays in flight). When several were,
  it goes to the one active most recently before it (its request sent, or a model request of
  it answered): a listing follows the request that needs it, a tool call the model turn that
  asked for it, an approved call the request that approved it. Only two creates of one run in
  flight at once, both using MCP tools, can make this depend on timing.
- A search (the gateway's web_search backend) belongs to a step the same way as an MCP request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .observed import Observed


@dataclass(frozen=True)
class Sent:
    """A create request of a step (`POST` to the Responses or Chat Completions path)."""

    step: int
    at: float
    """When the request was sent (Unix time, the fixtures' clock)."""
    over_at: float | None
    """When its answer was over; None when the gateway may still be working on it."""

    def in_flight(self, at: float) -> bool:
        return self.at <= at and (self.over_at is None or at <= self.over_at)


def attribute(observed: Observed, sent: Sequence[Sent]) -> dict[int, Observed]:
    """What each step caused, by step index; steps that caused nothing are left out."""
    by_step: dict[int, Observed] = {}
    for request in observed.model_requests:
        if isinstance(request.get("step"), int):
            by_step.setdefault(request["step"], Observed()).model_requests.append(request)
    for call in observed.mcp_calls:
        step = _cause_of_tool_request(call["at"], observed, sent)
        if step is not None:
            by_step.setdefault(step, Observed()).mcp_calls.append(call)
    for search in observed.searches:
        step = _cause_of_tool_request(search["at"], observed, sent)
        if step is not None:
            by_step.setdefault(step, Observed()).searches.append(search)
    return by_step


def _cause_of_tool_request(at: float, observed: Observed, sent: Sequence[Sent]) -> int | None:
    """The step whose create request caused a tool's request (MCP, search) arriving `at`."""
    candidates = [s for s in sent if s.in_flight(at)] or [s for s in sent if s.at <= at] or list(sent[:1])
    if not candidates:
        return None

    def last_active(candidate: Sent) -> float:
        answered = [r["at"] for r in observed.model_requests if r.get("step") == candidate.step and r["at"] <= at]
        return max([candidate.at, *answered])

    return max(candidates, key=last_active).step
