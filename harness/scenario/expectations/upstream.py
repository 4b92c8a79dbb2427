"""Expectations of what the gateway sent during a step: the requests that reached the scripted
model, the calls that reached the MCP fixtures and the queries that reached the search fixture.
`UpstreamExpect`, the model of `expect.upstream` (and of `wait.until.upstream`), is made of the
specs below, in the order their findings come."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from ....fixtures.recording import fingerprint
from ...errors import did_you_mean
from ...model.findings import Finding
from ...model.observed import Observed
from .. import vocabulary
from ..fixture_names import fixture_tools
from ..strict import Strict
from .spec import Checks, Stated, UpstreamExpectation, WhenWritten, list_diff, subset_mismatches


def _last_tool_outputs(observed: Observed) -> list[str]:
    requests = observed.model_requests
    return requests[-1]["tool_outputs"] if requests else []


def _last_types(observed: Observed) -> list[str]:
    requests = observed.model_requests
    return requests[-1]["item_types"] if requests else []


def _choice_tools(choice: Any) -> list[str]:
    """Tool names inside a Responses-shaped tool_choice."""
    if not isinstance(choice, dict):
        return []
    names = [choice["name"]] if isinstance(choice.get("name"), str) else []
    return names + [tool["name"] for tool in choice.get("tools") or []
                    if isinstance(tool, dict) and isinstance(tool.get("name"), str)]


class _ItemTypes(UpstreamExpectation):
    """A list of input item types, each one OpenAI's."""

    def lint(self, value: list[str], where: str, at: Stated) -> None:
        for index, item_type in enumerate(value):
            at.checks.known(f"{where}[{index}]", item_type, vocabulary.input_item_types(), "an item type")


class ModelCalls(UpstreamExpectation):
    name = "model_calls"
    annotation = int | None
    declared = Field(default=None, ge=0, description="Number of model requests.")

    def compare(self, wanted: int, observed: Observed) -> list[Finding]:
        calls = len(observed.model_requests)
        return [] if calls == wanted else [self.mismatch(f"the gateway called the model {calls} time(s), expected "
                                                         f"{wanted}", wanted, calls)]


class NeverSent(_ItemTypes):
    name = "never_sent"
    annotation = list[str]
    declared = Field(default_factory=list, description="Item types that must not appear in any model request.")

    def stated(self, value: list[str], written: bool) -> bool:
        return bool(value)

    def compare(self, wanted: list[str], observed: Observed) -> list[Finding]:
        return [self.mismatch(f"model request {number} carried {', '.join(sorted(set(sent)))}, which must never "
                              "reach the model", [], sent)
                for number, request in enumerate(observed.model_requests, 1)
                if (sent := [t for t in request["item_types"] if t in wanted])]


class Instructions(WhenWritten, UpstreamExpectation):
    name = "instructions"
    annotation = str | None
    declared = Field(default=None, description="The instructions every model request carries.")

    def compare(self, wanted: str | None, observed: Observed) -> list[Finding]:
        return [self.mismatch(f"model request {number} carried instructions {got!r}", wanted, got)
                for number, request in enumerate(observed.model_requests, 1)
                if (got := request.get("instructions")) != wanted]


class LastInput(_ItemTypes):
    name = "last_input"
    annotation = list[str] | None
    declared = Field(default=None, description="Item types of the last model request's input, in order.")

    def compare(self, wanted: list[str], observed: Observed) -> list[Finding]:
        got = _last_types(observed)
        return [] if got == wanted else [self.mismatch(f"the last model request's input differs: "
                                                       f"{list_diff(wanted, got)}", wanted, got)]


class LastInputCounts(UpstreamExpectation):
    name = "last_input_counts"
    annotation = dict[str, int] | None
    declared = Field(default=None, description="How many items of each type the last model request's input holds, "
                                               "in any order (types not named are not counted).")

    def lint(self, value: dict[str, int], where: str, at: Stated) -> None:
        for item_type in value:
            at.checks.known(f"{where}.{item_type}", item_type, vocabulary.input_item_types(), "an item type")

    def compare(self, wanted: dict[str, int], observed: Observed) -> list[Finding]:
        types = _last_types(observed)
        counts = {item_type: types.count(item_type) for item_type in wanted}
        return [] if counts == wanted else [self.mismatch(f"the last model request's input holds {counts}, "
                                                          f"expected {wanted}", wanted, counts)]


class ToolChoices(UpstreamExpectation):
    name = "tool_choices"
    annotation = list[Any] | None
    declared = Field(default=None, description="The tool_choice of each model request, in order, written the "
                                               "Responses way: auto, none, required, {type: function, name}, "
                                               "{type: allowed_tools, ...}; null where the request had no tools.")

    def lint(self, value: list[Any], where: str, at: Stated) -> None:
        for index, choice in enumerate(value):
            for name in _choice_tools(choice):
                at.checks.tool(f"{where}[{index}]", name)

    def compare(self, wanted: list[Any], observed: Observed) -> list[Finding]:
        choices = [request.get("tool_choice") for request in observed.model_requests]
        return [] if choices == wanted else [self.mismatch(f"the model requests carried tool_choice {choices}, "
                                                           f"expected {wanted}", wanted, choices)]


class LastToolOutputContains(UpstreamExpectation):
    name = "last_tool_output_contains"
    annotation = str | None
    declared = Field(default=None, description="Text that one of the tool outputs in the last model request "
                                               "contains.")

    def compare(self, wanted: str, observed: Observed) -> list[Finding]:
        outputs = _last_tool_outputs(observed)
        if any(wanted in output for output in outputs):
            return []
        return [self.mismatch(f"no tool output in the last model request contains {wanted!r} (outputs: {outputs})",
                              wanted, outputs)]


class LastToolOutputLacks(UpstreamExpectation):
    name = "last_tool_output_lacks"
    annotation = str | None
    declared = Field(default=None, description="Text that none of the tool outputs in the last model request "
                                               "contains (e.g. what a filter keeps from the model).")

    def compare(self, wanted: str, observed: Observed) -> list[Finding]:
        outputs = _last_tool_outputs(observed)
        if not any(wanted in output for output in outputs):
            return []
        return [self.mismatch(f"a tool output in the last model request contains {wanted!r} (outputs: {outputs})",
                              wanted, outputs)]


class McpAuthorization(UpstreamExpectation):
    name = "mcp_authorization"
    annotation = str | None
    declared = Field(default=None, description="Every MCP request carried `Authorization: Bearer <this>` (compared "
                                               "by fingerprint; the value never reaches a report).")

    def compare(self, wanted: str, observed: Observed) -> list[Finding]:
        held = fingerprint(f"Bearer {wanted}")
        without = [call["method"] for call in observed.mcp_calls if call["headers"].get("authorization") != held]
        if observed.mcp_calls and not without:
            return []
        return [self.mismatch(f"{len(without)} of {len(observed.mcp_calls)} MCP request(s) did not carry the "
                              "request's `authorization` as a bearer token", "all", len(without))]


class OfferedTools(UpstreamExpectation):
    name = "offered_tools"
    annotation = list[str] | None
    declared = Field(default=None, description="The tool names the first model request offered, in any order.")

    def lint(self, value: list[str], where: str, at: Stated) -> None:
        for index, name in enumerate(value):
            at.checks.tool(f"{where}[{index}]", name)

    def compare(self, wanted: list[str], observed: Observed) -> list[Finding]:
        requests = observed.model_requests
        offered = sorted(requests[0].get("offered_tools") or []) if requests else []
        if offered == sorted(wanted):
            return []
        return [self.mismatch(f"the first model request offered {offered}, expected {sorted(wanted)}", sorted(wanted),
                              offered)]


class ModelPaths(UpstreamExpectation):
    name = "model_paths"
    annotation = list[str] | None
    declared = Field(default=None, description="The path of each model request, in order (which wire format the "
                                               "gateway used).")

    def compare(self, wanted: list[str], observed: Observed) -> list[Finding]:
        paths = [request.get("path") for request in observed.model_requests]
        return [] if paths == wanted else [self.mismatch(f"the model requests went to {paths}, expected {wanted}",
                                                         wanted, paths)]


class Searches(UpstreamExpectation):
    name = "searches"
    annotation = list[str] | None
    declared = Field(default=None, description="The queries the gateway sent to the search fixture (its web_search "
                                               "backend) during the step, in order; [] for none.")

    def compare(self, wanted: list[str], observed: Observed) -> list[Finding]:
        queries = [search["query"] for search in observed.searches]
        return [] if queries == wanted else [self.mismatch(f"the gateway searched for {queries}, expected {wanted}",
                                                           wanted, queries)]


class Request(UpstreamExpectation):
    name = "request"
    annotation = dict[str, Any] | None
    declared = Field(default=None, description="A part of the JSON body every model request carried, as the gateway "
                                               "sent it (in its wire format): every key given must be there with a "
                                               "matching value; lists match item by item.")

    def compare(self, wanted: dict[str, Any], observed: Observed) -> list[Finding]:
        return [self.mismatch(f"model request {number} differs at {where}", wanted, request.get("body"))
                for number, request in enumerate(observed.model_requests, 1)
                for where in subset_mismatches(wanted, request.get("body"))]


class ToolRuns(UpstreamExpectation):
    name = "tool_runs"
    annotation = dict[str, int] | Literal["none"] | None
    declared = Field(default=None, description="MCP tool executions by tool name, or by fixture.tool (tools not "
                                               "named are not counted); `none`: no tool of any fixture ran.")

    def lint(self, value: dict[str, int] | Literal["none"], where: str, at: Stated) -> None:
        fixtures = at.checks.fixtures
        for key in value if isinstance(value, dict) else {}:
            fixture, dot, tool = key.rpartition(".")
            if not dot:
                at.checks.tool(f"{where}.{key}", tool)
            elif fixture not in fixtures:
                at.checks.known(f"{where}.{key}", fixture, fixtures, "an MCP fixture of the scenario")
            elif tool not in (tools := fixture_tools(fixture)):
                at.checks.add(f"{where}.{key}", f"the MCP fixture {fixture!r} has no tool {tool!r}"
                                                f"{did_you_mean(tool, tools)}")

    def compare(self, wanted: dict[str, int] | Literal["none"], observed: Observed) -> list[Finding]:
        runs = observed.tool_runs()
        if wanted == "none":
            if not (ran := {name: count for name, count in sorted(runs.items()) if "." in name}):
                return []
            return [self.mismatch("MCP tools ran (" + ", ".join(f"{name}: {count}" for name, count in ran.items())
                                  + "), expected none", "none", ran)]
        return [self.mismatch(f"the MCP tool {tool!r} ran {runs.get(tool, 0)} time(s), expected {count}", count,
                              runs.get(tool, 0))
                for tool, count in wanted.items() if runs.get(tool, 0) != count]


SPECS: tuple[UpstreamExpectation, ...] = (
    ModelCalls(), NeverSent(), Instructions(), LastInput(), LastInputCounts(), ToolChoices(),
    LastToolOutputContains(), LastToolOutputLacks(), McpAuthorization(), OfferedTools(), ModelPaths(), Searches(),
    Request(), ToolRuns())
"""Every field of `expect.upstream`, in the order their findings come."""

UpstreamExpect: type[BaseModel] = create_model(
    "UpstreamExpect", __base__=Strict, __module__=__name__,
    __doc__="What the gateway sent to the scripted model and to the MCP fixtures during the step.",
    **{spec.name: (spec.annotation, spec.declared) for spec in SPECS})


def compare_upstream(expect: BaseModel, observed: Observed) -> list[Finding]:
    """Every way what the fixtures observed differs from what `expect` (an `UpstreamExpect`) states."""
    return [finding for spec in SPECS
            if spec.stated(value := getattr(expect, spec.name), spec.name in expect.model_fields_set)
            for finding in spec.compare(value, observed)]


def lint_upstream(expect: BaseModel, where: str, checks: Checks) -> None:
    """Report what is wrong with the names an `UpstreamExpect` states."""
    at = Stated(checks, stream_modes=())
    for spec in SPECS:
        if spec.stated(value := getattr(expect, spec.name), spec.name in expect.model_fields_set):
            spec.lint(value, f"{where}.{spec.name}", at)
