"""The reference gateway keeps every contract whichever upstream adapter it is configured with:
Responses replaying the transcript (the default, run by the scenario tests), Responses chained
upstream with previous_response_id, and Chat Completions."""

from __future__ import annotations

from typing import Any

import pytest

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.harness.loader import builtin_scenarios_dir, load
from responses_parity.harness.runner import units_of
from responses_parity.harness.scenario import MODES
from responses_parity.harness.session import Session
from responses_parity.harness.stack import Stack
from responses_parity.harness.targets import Target

CHAT_CANNOT_CARRY = {"reasoning-summary": "Chat Completions has no standard way to carry a reasoning summary"}


@pytest.mark.parametrize(("config", "excluded"), [
    ({"upstream_chaining": "previous_response_id"}, {}),
    ({"upstream_wire": "chat"}, CHAT_CANNOT_CARRY),
], ids=["responses-chained", "chat"])
def test_every_built_in_scenario_passes(config: dict[str, Any], excluded: dict[str, str]) -> None:
    scenarios = [s for s in load([builtin_scenarios_dir()]).scenarios if s.scenario.id not in excluded]
    with Stack(mcp_names=FIXTURE_SERVERS, gateway_config=config) as stack:
        assert stack.reference_url is not None
        results = Session(Target("reference", stack.reference_url), stack).run(units_of(scenarios, MODES), jobs=6)
    failures = [f"{r.scenario.id} [{r.mode}] {step}: {finding.message}"
                for r in results if r.outcome != "pass" for step, finding in r.findings]
    assert not failures, "\n".join(failures)
    assert len(results) >= 2 * len(scenarios) - 2
