"""No expectation of a built-in scenario passes vacuously: each one, made slightly wrong
(another item type, another count, another status, another error code, another tool, another
event sequence), is either rejected by validation or fails on the reference gateway, which
passes every scenario as written.

The wrong values are chosen from the scenario alone, never from what the gateway did: an item
type and a tool no script of the scenario produces, a count one higher, a status or code that
differs from the stated one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from responses_parity.fixtures.mcp import fixture_tools
from responses_parity.harness.engine.session import Session
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.judge.results import ScenarioResult
from responses_parity.harness.scenario.loader import LoadedScenario, builtin_scenarios_dir, parse_yaml, scenario_from
from responses_parity.harness.scenario.model import Mode, Scenario

UNPRODUCED_ITEM_TYPE = "image_generation_call"
"""An output item type no fixture and no script can make the reference gateway produce."""
WRONG = "parity_mutant"


@dataclass(frozen=True)
class Mutant:
    scenario: str
    where: str
    change: str
    raw: dict[str, Any]
    mode: Mode

    def __str__(self) -> str:
        return f"{self.scenario} [{self.mode}] {self.where}: {self.change}"


def _unscripted_tool(raw: dict[str, Any], scenario: Scenario) -> str | None:
    """A tool of the scenario's fixtures that no script calls and no expectation names."""
    text = repr(raw["steps"])
    return next((tool for fixture in scenario.fixtures for tool in sorted(fixture_tools(fixture))
                 if f"'{tool}'" not in text), None)


def _item_type(item: Any) -> str:
    return item if isinstance(item, str) else item["type"]


def _other_status(status: str) -> str:
    return "incomplete" if status == "completed" else "completed"


Mutation = tuple[str, str, Callable[[dict[str, Any]], None]]
"""(the expectation field, what changes, how)."""


def _mutations(expect: dict[str, Any], tool: str | None) -> Iterator[Mutation]:
    """Each way to make one of the expectation's fields wrong."""
    if isinstance(expect.get("http_status"), int):
        other = 400 if expect["http_status"] < 400 else 200
        yield "http_status", f"http_status {other}", lambda e: e.update(http_status=other)
    if isinstance(expect.get("status"), str):
        yield "status", "another status", lambda e: e.update(status=_other_status(e["status"]))
    if isinstance(expect.get("usage"), bool):
        yield "usage", "usage flipped", lambda e: e.update(usage=not e["usage"])
    if isinstance(expect.get("error"), dict) and "code" in expect["error"]:
        yield "error", "another error code", lambda e: e["error"].update(code=WRONG)
    if isinstance(expect.get("error"), dict) and "type" in expect["error"]:
        yield "error", "another error type", lambda e: e["error"].update(type=WRONG)
    output = expect.get("output")
    if isinstance(output, list) and output:
        yield "output", "another item type", lambda e: e["output"].__setitem__(0, UNPRODUCED_ITEM_TYPE)
        yield "output", "a misspelt item type", lambda e: e["output"].__setitem__(0, _item_type(e["output"][0])[:-1])
        yield "output", "one item fewer", lambda e: e["output"].pop()
        named = [i for i, item in enumerate(output) if isinstance(item, dict) and "name" in item]
        if named and tool:
            yield "output", "another tool in output", lambda e: e["output"][named[0]].update(name=tool)
        with_status = [i for i, item in enumerate(output) if isinstance(item, dict) and "status" in item]
        if with_status:
            yield "output", "another item status", lambda e: e["output"][with_status[0]].update(
                status=_other_status(e["output"][with_status[0]]["status"]))
    interrupt = expect.get("interrupt")
    if interrupt is not None:
        on = interrupt if isinstance(interrupt, str) else interrupt.get("on")
        other_on = "function_call" if on == "none" else "none"
        yield "interrupt", f"interrupt on {other_on}", lambda e: e.update(interrupt=other_on)
        if isinstance(interrupt, dict) and "tool" in interrupt and tool:
            yield "interrupt", "interrupt on another tool", lambda e: e["interrupt"].update(tool=tool)
    events = expect.get("events")
    if isinstance(events, list) and len(events) > 2:
        yield "events", "an event fewer", lambda e: e["events"].pop(len(e["events"]) // 2)
    upstream = expect.get("upstream")
    if isinstance(upstream, dict):
        yield from _upstream_mutations(upstream, tool)
    page = expect.get("page")
    if isinstance(page, dict) and isinstance(page.get("count"), int):
        yield "page", "another page count", lambda e: e["page"].update(count=e["page"]["count"] + 1)
    chat = expect.get("chat")
    if isinstance(chat, dict) and "finish_reason" in chat:
        yield "chat", "another finish_reason", lambda e: e["chat"].update(
            finish_reason="length" if e["chat"]["finish_reason"] != "length" else "stop")


def _upstream_mutations(upstream: dict[str, Any], tool: str | None) -> Iterator[Mutation]:
    if isinstance(upstream.get("model_calls"), int):
        yield "upstream", "one model call more", lambda e: e["upstream"].update(
            model_calls=e["upstream"]["model_calls"] + 1)
    yield "upstream", "never sent: a misspelt item type", lambda e: e["upstream"].update(
        never_sent=[*e["upstream"].get("never_sent", []), "mcp_list_tool"])
    runs = upstream.get("tool_runs")
    if isinstance(runs, dict) and runs:
        yield "upstream", "a misspelt tool that ran 0 times", lambda e: e["upstream"]["tool_runs"].update(
            {next(iter(runs))[:-1]: 0})
        first = next(iter(runs))
        yield "upstream", f"tool {first} ran once more", lambda e: e["upstream"]["tool_runs"].update(
            {first: runs[first] + 1})
        if runs[first] > 0 and tool:
            yield "upstream", f"another tool instead of {first}", lambda e: e["upstream"].update(
                tool_runs={tool: runs[first]})
    counts = upstream.get("last_input_counts")
    if isinstance(counts, dict) and counts:
        first = next(iter(counts))
        yield "upstream", f"one {first} more in the last input", \
            lambda e: e["upstream"]["last_input_counts"].update({first: counts[first] + 1})
    if isinstance(upstream.get("last_input"), list) and upstream["last_input"]:
        yield "upstream", "an input item fewer", lambda e: e["upstream"]["last_input"].pop()
    if isinstance(upstream.get("searches"), list):
        yield "upstream", "one search more", lambda e: e["upstream"]["searches"].append(WRONG)


def _modes(raw_step: dict[str, Any], scenario: Scenario) -> list[Mode]:
    return [m for m in scenario.modes if raw_step.get("modes") is None or m in raw_step["modes"]]


def mutants(raw: dict[str, Any], scenario: Scenario) -> Iterator[Mutant]:
    tool = _unscripted_tool(raw, scenario)
    for index, step in enumerate(raw["steps"]):
        modes = _modes(step, scenario)
        targets = [("expect", step.get("expect"), None)] + [
            (f"per_mode.{mode}", override, mode) for mode, override in (step.get("per_mode") or {}).items()]
        for where, expect, only in targets:
            if not isinstance(expect, dict):
                continue
            for field, change, mutate in _mutations(expect, tool):
                mode = only or _mode_for(field, modes, step)
                if mode is None:
                    continue
                mutated = copy.deepcopy(raw)
                mutate(mutated["steps"][index]["expect"] if only is None else
                       mutated["steps"][index]["per_mode"][only])
                yield Mutant(scenario.id, f"steps[{index}].{where}", change, mutated, mode)


def _mode_for(field: str, modes: list[Mode], step: dict[str, Any]) -> Mode | None:
    """A mode where the step's own `expect` decides this field (no `per_mode` replaces it), and
    where it is judged at all (`events` only in streams)."""
    overridden = {mode for mode, override in (step.get("per_mode") or {}).items()
                  if isinstance(override, dict) and field in override}
    judged = [mode for mode in modes if mode == "stream"] if field == "events" else modes
    return next((mode for mode in judged if mode not in overridden), None)


@pytest.fixture(scope="module")
def builtin() -> list[tuple[Path, dict[str, Any], Scenario]]:
    found = []
    for path in sorted(builtin_scenarios_dir().glob("*.yaml")):
        raw = parse_yaml(path.read_text())
        scenario = scenario_from(raw)
        assert isinstance(scenario, Scenario), scenario
        found.append((path, raw, scenario))
    return found


def test_every_wrong_expectation_fails(stack: Stack, builtin: list[tuple[Path, dict[str, Any], Scenario]],
                                       record_figure: Callable[[str], None]) -> None:
    generated = [(path, mutant) for path, raw, scenario in builtin for mutant in mutants(raw, scenario)]
    accepted: list[tuple[LoadedScenario, Mutant]] = []
    rejected = 0
    for path, mutant in generated:
        loaded = scenario_from(mutant.raw)
        if isinstance(loaded, list):
            rejected += 1
        else:
            accepted.append((LoadedScenario(loaded, path), mutant))
    assert stack.reference_url is not None
    session = Session(Target("reference", stack.reference_url), stack)
    results: list[ScenarioResult] = session.run([(loaded, mutant.mode) for loaded, mutant in accepted], jobs=8)
    passed = [str(mutant) for (_, mutant), result in zip(accepted, results, strict=True) if result.outcome != "fail"]
    record_figure(f"expectation mutants: {len(generated)} generated from {len(builtin)} scenarios, "
                  f"{rejected} rejected by validation, {len(accepted) - len(passed)} of {len(accepted)} run failed "
                  "on the reference gateway")
    assert not passed, "wrong expectations that did not fail:\n" + "\n".join(passed)
    assert len(generated) > 3 * len(builtin)
