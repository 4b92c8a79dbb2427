"""The built-in scenarios' `live:` sections, run the way a live run runs them (steering merged
into the steps it names, what the model decides demoted to notes, failed runs tried again)
against a stand-in for OpenAI: the reference gateway, which keeps OpenAI's recorded contract,
with the scripted model behind it and the MCP fixtures on loopback in place of public URLs.

No test reaches OpenAI. These show that every live section is valid, that its steering reaches
the step it names and no other, and that the steered requests still get the answers the
scenario states from a gateway that answers as OpenAI does. What OpenAI's own model chooses is
shown only by a real live run. The statements of what live mode covers (docs/guides/live-openai.md and
scenarios/README.md) are kept to the catalogue."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import httpx2
import pytest

from responses_parity.harness.defaults import HTTP_MODES
from responses_parity.harness.engine.fixture_client import FixtureClient
from responses_parity.harness.engine.runner import Engine
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.judge.results import ScenarioResult
from responses_parity.harness.scenario.loader import LoadedScenario, builtin_scenarios_dir, load

REPOSITORY = Path(__file__).resolve().parents[2]
CATALOGUE = load([builtin_scenarios_dir()]).scenarios
MARKER = re.compile(r" \[parity-run [0-9a-f]{10}/\d+\]$")


def live(reachable_mcp: Collection[str]) -> list[LoadedScenario]:
    """The built-in scenarios a live run runs when these MCP fixtures have public URLs."""
    return [loaded for loaded in CATALOGUE if loaded.scenario.why_not_live(reachable_mcp) is None]


def unmarked(value: Any) -> Any:
    """A steered value as the scenario wrote it: an `input` text without the run marker the
    engine adds for the stand-in's scripted model (a live run adds none)."""
    return MARKER.sub("", value) if isinstance(value, str) else value


def units(scenarios: list[LoadedScenario]) -> int:
    """The units `parity run` runs of them (the HTTP modes: a run takes the WebSocket when asked)."""
    return sum(mode in HTTP_MODES for loaded in scenarios for mode in loaded.scenario.modes)


@pytest.fixture(scope="module")
def stand_in_results(stack: Stack) -> list[ScenarioResult]:
    """Every live-capable scenario, in each of its modes, run live against the stand-in."""
    assert stack.reference_url is not None and stack.upstream_url is not None
    target = Target("openai", stack.reference_url, scripted=False, timeout_s=30)
    selected = live(stack.mcp)
    assert selected, "no built-in scenario runs live"

    async def go() -> list[ScenarioResult]:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(target.timeout_s)) as http:
            engine = Engine(target, http, FixtureClient(http, stack.upstream_url or "", stack.mcp, stack.search_url))
            return await engine.run_all([(loaded, mode) for loaded in selected for mode in loaded.scenario.modes],
                                        jobs=4)

    return asyncio.run(go())


def test_every_live_section_passes_against_a_gateway_that_answers_as_openai_does(
        stand_in_results: list[ScenarioResult]) -> None:
    failed = {(r.scenario.id, r.mode): [f"{step}: {f.rule} {f.message}" for step, f in r.findings if f.severity > 0]
              or [s.error for s in r.steps if s.error] for r in stand_in_results if r.outcome != "pass"}
    assert failed == {}
    assert {r.attempt for r in stand_in_results} == {1}, "a deterministic stand-in passes at the first attempt"


def test_steering_reaches_the_step_it_names_and_no_other(stand_in_results: list[ScenarioResult]) -> None:
    steered = 0
    for result in stand_in_results:
        scenario = result.scenario
        assert scenario.live is not None
        requests = {step.step_id: step.exchange.request_body for step in result.steps if step.exchange is not None}
        for step in scenario.steps:
            if not isinstance(step.request, dict) or step.id not in requests:
                continue
            sent: dict[str, Any] = requests[step.id]
            steer = scenario.live.steer.get(step.id, {})
            assert {key: unmarked(sent.get(key)) for key in steer} == steer, (scenario.id, step.id)
            assert set(sent) - {"stream"} == set(step.request) | set(steer), (scenario.id, step.id)
            steered += bool(steer)
    assert steered >= 20


def test_every_scenario_with_an_openai_counterpart_says_how_it_runs_live() -> None:
    """A `live:` section steers the model, or says in `skip` why it cannot run live; only
    gateway policy and gateway configuration, which OpenAI has none of, go without."""
    undecided = [loaded.scenario.id for loaded in CATALOGUE
                 if loaded.scenario.openai_counterpart and loaded.scenario.gateway is None
                 and loaded.scenario.live is None]
    assert undecided == []


def mcp_fixtures_named(text: str) -> set[str]:
    return set(re.findall(r"--public-mcp (\w+)=URL", text))


def coverage() -> dict[str, Any]:
    every_fixture = {name for loaded in CATALOGUE for name in loaded.scenario.fixtures}
    with_mcp = live(every_fixture)
    without_mcp = live(())
    needing_mcp = [loaded for loaded in with_mcp if loaded not in without_mcp]
    return {"scenarios": len(CATALOGUE), "units": units(CATALOGUE), "live": len(with_mcp),
            "live_units": units(with_mcp), "mcp": len(needing_mcp), "mcp_units": units(needing_mcp),
            "offline": len(without_mcp), "offline_units": units(without_mcp),
            "fixtures": {name for loaded in needing_mcp for name in loaded.scenario.fixtures},
            "not_live": sorted(loaded.scenario.id for loaded in CATALOGUE
                               if loaded.scenario.openai_counterpart and loaded.scenario.gateway is None
                               and loaded not in with_mcp)}


def test_the_live_guide_says_what_live_mode_covers_today() -> None:
    text = (REPOSITORY / "docs" / "guides" / "live-openai.md").read_text()
    said = re.search(
        r"Today (?P<live>\d+) of the (?P<scenarios>\d+) built-in scenarios run live \((?P<live_units>\d+) of their "
        r"(?P<units>\d+) units\), (?P<mcp>\d+) of them \((?P<mcp_units>\d+) units\) only with (?P<public>.*?); "
        r"without it, (?P<offline>\d+) scenarios \((?P<offline_units>\d+) units\)\.", " ".join(text.split()))
    assert said is not None, "docs/guides/live-openai.md no longer says what live mode covers"
    facts = coverage()
    assert {key: int(value) for key, value in said.groupdict().items() if key != "public"} == \
        {key: value for key, value in facts.items() if key in said.groupdict() and key != "public"}
    assert mcp_fixtures_named(said["public"]) == facts["fixtures"]


def test_the_catalogue_says_which_scenarios_do_not_run_live() -> None:
    text = " ".join((REPOSITORY / "scenarios" / "README.md").read_text().split())
    said = re.search(r"today (?P<live>\d+) of the (?P<scenarios>\d+) scenarios, (?P<mcp>\d+) of them only with "
                     r"(?P<public>`--public-mcp \w+=URL`(?:, `--public-mcp \w+=URL`)*)\. Of the scenarios with an "
                     r"OpenAI counterpart, only (?P<not_live>.*?) do not:", text)
    assert said is not None, "scenarios/README.md no longer says what live mode covers"
    facts = coverage()
    assert (int(said["live"]), int(said["scenarios"]), int(said["mcp"])) == \
        (facts["live"], facts["scenarios"], facts["mcp"])
    assert mcp_fixtures_named(said["public"]) == facts["fixtures"]
    assert sorted(re.findall(r"\[([a-z0-9-]+)\]\(", said["not_live"])) == facts["not_live"]


def test_the_own_gateway_guide_says_how_many_runs_each_mode_choice_makes() -> None:
    said = re.search(r"(?P<all>\d+) runs pass on the reference gateway with `--mode all`, (?P<http>\d+) without",
                     " ".join((REPOSITORY / "docs" / "guides" / "own-gateway.md").read_text().split()))
    assert said is not None, "docs/guides/own-gateway.md no longer says how many runs --mode all makes"
    every_mode = sum(len(loaded.scenario.modes) for loaded in CATALOGUE)
    assert (int(said["all"]), int(said["http"])) == (every_mode, units(CATALOGUE))
