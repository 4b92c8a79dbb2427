"""The scenario catalogue (scenarios/README.md) names every scenario, and only scenarios that exist."""

from __future__ import annotations

import re

from responses_parity.harness.scenario.loader import builtin_scenarios_dir, scenario_files


def test_the_catalogue_and_the_folder_agree() -> None:
    folder = builtin_scenarios_dir()
    linked = set(re.findall(r"\]\(([a-z0-9-]+\.yaml)\)", (folder / "README.md").read_text()))
    present = {path.name for path in scenario_files([folder])}
    assert linked - present == set(), "the catalogue links scenarios that do not exist"
    assert present - linked == set(), "scenarios missing from scenarios/README.md"
