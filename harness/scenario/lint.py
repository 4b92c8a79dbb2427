"""What a scenario must mean beyond its shape, checked before anything runs: every name it
uses exists, and every expectation it states can be judged. A typo would otherwise be an
expectation that silently holds (`tool_runs: {ad: 0}`, `never_sent: [mcp_list_tool]`).

- Tools: a name in a scripted call or an expectation is one an MCP fixture of the scenario
  offers, a function or custom tool one of its requests declares, or a hosted tool's kind.
- Item and event types, statuses, incomplete and finish reasons, Response fields and the
  fields an item expectation names are OpenAI's, as the installed `openai` SDK knows them.
- Placeholders name an earlier step that runs in every mode this one does, an attribute its
  answer can have, or one of the built-in names; and they appear only in fields that are
  rendered (a step's `path`, `request`, `upload`, `headers`, scripted `model` turns,
  expectations and `poll.until`, and `live.steer`).
- Expectations can be judged: stream-only ones on steps that stream, `per_mode` for modes the
  step runs in, no `upstream` inside `variants` or `poll.until` (those judge answers only).

Each problem is a `Problem`: the field's path and what is wrong, with a did-you-mean.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import did_you_mean
from . import vocabulary
from .capabilities import hosted_tool
from .expectations import STREAMS_ONLY, Stated, lint_expect, lint_upstream
from .fixture_names import fixture_tools
from .fixtures import FAILING_STATUSES, MCP_URLS, MCP_URLS_SHOWN
from .model import Mode, Scenario, Step
from .placeholders import BUILTIN_NAMES, PlaceholderError, Reference, has_placeholders, parse, quoted

RENDERED_STEP_FIELDS = ("path", "request", "upload", "headers", "model", "expect", "per_mode", "poll")
"""A step's fields whose strings are rendered (of `poll`, only `until` is a string holder)."""
STEP_VIEW = {"response": "the Response object", "output": "its output items", "status": "the HTTP status",
             "body": "the JSON body", "completion": "the chat completion"}


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class Outline:
    """What the checks need of a scenario. Built from a valid scenario, or from the parts of an
    invalid one that did validate, so one pass reports every problem."""

    steps: Sequence[tuple[int, Step]]
    step_ids: Sequence[str]
    fixtures: Collection[str]
    modes: Sequence[Mode]
    surface: str = "responses"

    @classmethod
    def of(cls, scenario: Scenario) -> Outline:
        return cls(list(enumerate(scenario.steps)), [s.id for s in scenario.steps], scenario.fixtures,
                   scenario.modes, scenario.surface)

    def step_modes(self, step: Step) -> list[Mode]:
        return [mode for mode in self.modes if step.modes is None or mode in step.modes]

    @cached_property
    def tools(self) -> frozenset[str]:
        """Every tool name the scenario may use: its fixtures' tools, the function or custom
        tools its requests declare, and the hosted tools they offer, by the tool's kind
        (`web_search`, `file_search`: the function a gateway's model calls to run one)."""
        names = {tool for fixture in self.fixtures for tool in fixture_tools(fixture)}
        for _, step in self.steps:
            for tool in (step.request or {}).get("tools") or []:
                if not isinstance(tool, dict):
                    continue
                if tool.get("type") in ("function", "custom"):
                    name = tool.get("name") or (tool.get("function") or {}).get("name")
                    if isinstance(name, str):
                        names.add(name)
                elif (hosted := hosted_tool(tool)) is not None:
                    names.add(hosted)
        return frozenset(names)


@dataclass
class _Checker:
    outline: Outline
    problems: list[Problem] = field(default_factory=list)

    @property
    def fixtures(self) -> Collection[str]:
        return self.outline.fixtures

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def known(self, path: str, value: str, universe: Collection[str], what: str) -> None:
        if value not in universe:
            self.add(path, f"{value!r} is not {what}{did_you_mean(value, universe)}")

    def tool(self, path: str, name: str) -> None:
        tools = self.outline.tools
        if name not in tools:
            offered = ", ".join(sorted(tools)) or "none"
            self.add(path, f"no MCP fixture of the scenario offers a tool {name!r}, and no request declares one"
                           f"{did_you_mean(name, tools)} (known: {offered})")

    # -- steps -----------------------------------------------------------------------------

    def step(self, index: int, step: Step) -> None:
        where = f"steps[{index}]"
        modes = self.outline.step_modes(step)
        if not modes:
            self.add(f"{where}.modes", f"the step runs in {step.modes}, the scenario only in "
                                       f"{list(self.outline.modes)}: it would never run")
        for turn_index, turn in enumerate(step.model):
            for call_index, call in enumerate(turn.tool_calls):
                suffix = "call" if turn.call else f"calls[{call_index}]"
                self.tool(f"{where}.model[{turn_index}].{suffix}.tool", call.tool)
        streams = [mode for mode in modes if self.streams(step, mode)]
        self.expectations(where, step, modes, streams)
        if step.disconnect is not None:
            if step.disconnect.after_event is not None:
                self.known(f"{where}.disconnect.after_event", step.disconnect.after_event, vocabulary.event_types(),
                           "a stream event type the openai SDK knows")
                if not streams:
                    self.add(f"{where}.disconnect.after_event", "the step never streams, so no event comes")
            if step.disconnect.when is not None and step.disconnect.when.upstream is not None:
                lint_upstream(step.disconnect.when.upstream, f"{where}.disconnect.when.upstream", self)
        if step.new_connection and "websocket" not in streams:
            self.add(f"{where}.new_connection", "the step never creates over a WebSocket, so it opens no connection")
        if not isinstance(step.wait, (int, float)) and step.wait.until.upstream is not None:
            lint_upstream(step.wait.until.upstream, f"{where}.wait.until.upstream", self)

    def expectations(self, where: str, step: Step, modes: Sequence[Mode], streams: Sequence[Mode]) -> None:
        """The step's `expect`, `per_mode` and `poll.until`, each where it is judged: a stream-only
        field of `expect` on the modes that stream and do not replace it in `per_mode`."""
        replaced = {mode: step.per_mode[mode].model_fields_set for mode in step.per_mode}
        lint_expect(step.expect, f"{where}.expect", Stated(self, [
            mode for mode in streams if not STREAMS_ONLY & replaced.get(mode, set())]))
        for mode, override in step.per_mode.items():
            if mode not in modes:
                self.add(f"{where}.per_mode.{mode}", f"the step does not run in {mode} mode: never judged")
            else:
                lint_expect(override, f"{where}.per_mode.{mode}", Stated(self, [mode] if mode in streams else []))
        if step.poll is not None:
            lint_expect(step.poll.until, f"{where}.poll.until", Stated(self, streams, judged_on_answers=True))

    def streams(self, step: Step, mode: Mode) -> bool:
        """Whether the step's answer is a stream in this mode (as the engine decides)."""
        if step.stream is not None:
            return step.stream
        surface_path = "{{chat_path}}" if self.outline.surface == "chat" else "{{responses_path}}"
        creates = step.method == "POST" and step.path in (None, surface_path) and isinstance(step.request, dict)
        return creates and mode != "nonstream"


# -- placeholders ----------------------------------------------------------------------------

def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _placeholder_problems(outline: Outline, raw_steps: Sequence[Any]) -> list[Problem]:
    problems: list[Problem] = []
    step_modes = {step.id: set(outline.step_modes(step)) for _, step in outline.steps}
    for index, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            continue
        step = dict(outline.steps).get(index)
        earlier = set(outline.step_ids[:index])
        modes = set(outline.step_modes(step)) if step else set(outline.modes)
        rendered = {name: raw[name] for name in RENDERED_STEP_FIELDS if name in raw}
        if isinstance(rendered.get("poll"), dict):
            rendered["poll"] = {"until": rendered["poll"].get("until")}
        elif "poll" in rendered:
            rendered.pop("poll")
        for path, text in _strings(rendered, f"steps[{index}]"):
            if not has_placeholders(text):
                continue
            try:
                template = parse(text)
            except PlaceholderError as error:
                problems.append(Problem(path, f"{quoted(text)}: {error}"))
                continue
            for reference in template.references:
                message = _reference_problem(outline, reference, _Scope(earlier, modes, step_modes))
                if message:
                    problems.append(Problem(path, f"{quoted(text)}: {message}"))
    return problems


@dataclass(frozen=True)
class _Scope:
    """What a step's placeholders may use: the earlier steps, and the modes of each."""

    earlier: set[str]
    modes: set[Mode]
    """The modes the step itself runs in."""
    step_modes: Mapping[str, set[Mode]]


def _reference_problem(outline: Outline, reference: Reference, scope: _Scope) -> str | None:
    name, attributes = reference.name, reference.selectors
    earlier, modes, step_modes = scope.earlier, scope.modes, scope.step_modes
    if name in BUILTIN_NAMES:
        return _builtin_problem(outline, reference)
    if name not in earlier:
        known = sorted(earlier | BUILTIN_NAMES)
        if name in outline.step_ids:
            return f"step {name!r} comes later; a placeholder can only use earlier steps"
        return f"{name!r} is neither an earlier step nor a built-in name{did_you_mean(name, known)} (known: " \
               f"{', '.join(known)})"
    if name in step_modes and (missing := sorted(modes - step_modes[name])):
        return f"step {name!r} does not run in {', '.join(missing)} mode, where this step does"
    if not attributes:
        return f"`{name}` is a step: name what of its answer ({', '.join(f'{name}.{view}' for view in STEP_VIEW)})"
    view, rest = attributes[0], attributes[1:]
    if view not in STEP_VIEW:
        return f"{name}.{view}: a step gives {', '.join(STEP_VIEW)}{did_you_mean(str(view), STEP_VIEW)}"
    if view == "response" and rest and isinstance(rest[0], str) and rest[0] not in vocabulary.response_fields():
        return f"{name}.response.{rest[0]}: not a Response field{did_you_mean(rest[0], vocabulary.response_fields())}"
    if view == "output" and rest:
        return _output_problem(name, rest)
    if view == "status" and rest:
        return f"{name}.status is the HTTP status, a number: it has no {rest[0]!r}"
    return None


def _output_problem(name: str, rest: tuple[str | int, ...]) -> str | None:
    selector, fields = rest[0], rest[1:]
    if isinstance(selector, int):
        known: Collection[str] = frozenset().union(*(vocabulary.item_fields(t) for t in vocabulary.output_item_types()))
    elif selector not in vocabulary.output_item_types():
        return (f"{name}.output.{selector}: not an output item type"
                f"{did_you_mean(selector, vocabulary.output_item_types())}")
    else:
        known = vocabulary.item_fields(selector)
    if fields and isinstance(fields[0], str) and fields[0] not in known:
        return f"{name}.output.{selector}.{fields[0]}: no such item field{did_you_mean(fields[0], known)}"
    return None


def _builtin_problem(outline: Outline, reference: Reference) -> str | None:
    """Built-in names give text (`run.*`, `mcp.<fixture>.<url>` too): nothing to select further
    in, and no offset to apply."""
    name, attributes = reference.name, reference.selectors
    if name == "run":
        if attributes not in ((), ("token",), ("admin_key",)):
            return "`run` gives `run.token` and `run.admin_key`"
    elif name == "mcp":
        if (problem := _mcp_problem(outline, attributes)) is not None:
            return problem
    elif attributes:
        return f"`{name}` is text: it has no {attributes[0]!r}"
    if reference.offset is not None:
        return f"{reference.path()} is text: an offset (`+ N`, `- N`) applies to an integer"
    return None


def _mcp_problem(outline: Outline, attributes: tuple[str | int, ...]) -> str | None:
    if not attributes:
        return f"`mcp` holds the MCP fixtures: name one's URL (mcp.<fixture>.url; {MCP_URLS_SHOWN})"
    fixture = str(attributes[0])
    if fixture not in outline.fixtures:
        return (f"mcp.{fixture}: not an MCP fixture of the scenario (add it to `mcp`)"
                f"{did_you_mean(fixture, outline.fixtures)}")
    if len(attributes) == 1:
        return f"mcp.{fixture}: name one of its URLs ({MCP_URLS_SHOWN})"
    if attributes[1] not in MCP_URLS:
        return f"mcp.{fixture}.{attributes[1]}: a fixture gives {MCP_URLS_SHOWN}" \
               f"{did_you_mean(str(attributes[1]), MCP_URLS)}"
    url, rest = attributes[1], attributes[2:]
    if url == "failing_url":
        if not rest or not isinstance(rest[0], int) or rest[0] not in FAILING_STATUSES:
            return f"mcp.{fixture}.failing_url is selected by the HTTP status it answers with: " \
                   f"mcp.{fixture}.failing_url[401] (100 to 599)"
        rest = rest[1:]
    if rest:
        return f"mcp.{fixture}.{url} is text: it has no {rest[0]!r}"
    return None


def _unrendered_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """Placeholders in fields that are sent or compared as written."""
    problems = []
    for key, value in raw.items():
        if key == "steps" and isinstance(value, list):
            for index, step in enumerate(value):
                if not isinstance(step, dict):
                    continue
                kept = {name: item for name, item in step.items() if name not in RENDERED_STEP_FIELDS}
                if isinstance(step.get("poll"), dict):
                    kept["poll"] = {k: v for k, v in step["poll"].items() if k != "until"}
                problems += _literal_placeholders(kept, f"steps[{index}]")
        elif key == "live" and isinstance(value, dict):
            problems += _literal_placeholders({k: v for k, v in value.items() if k != "steer"}, "live")
        else:
            problems += _literal_placeholders({key: value}, "")
    return problems


def _literal_placeholders(value: Any, path: str) -> list[Problem]:
    return [Problem(where, f"{quoted(text)}: this field is used as written, placeholders are not rendered here "
                           "(they are in a step's path, request, upload, headers, model turns, expectations and "
                           "poll.until)")
            for where, text in _strings(value, path) if has_placeholders(text)]


def problems(outline: Outline, raw: Mapping[str, Any]) -> list[Problem]:
    """Every problem of meaning in a scenario (`raw` is the file's mapping, `outline` what of it
    validated), in file order."""
    checker = _Checker(outline)
    for index, step in outline.steps:
        checker.step(index, step)
    raw_steps = raw.get("steps") if isinstance(raw.get("steps"), list) else []
    found = checker.problems + _placeholder_problems(outline, raw_steps) + _unrendered_problems(raw)
    return sorted(found, key=lambda problem: _order(problem.path))


def _order(path: str) -> tuple[Any, ...]:
    """File order: by step number, then by path."""
    if path.startswith("steps["):
        number = path[6:path.index("]")]
        return (1, int(number) if number.isdigit() else 0, path)
    return (0, 0, path)


__all__ = ["Outline", "Problem", "problems"]
