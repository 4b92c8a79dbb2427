"""The JSON Schema shipped for editors is generated from the scenario model and accepts every
built-in scenario (so an editor and the loader agree)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from responses_parity.harness.commands.catalogue import SCHEMA_FILE
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, parse_yaml, scenario_files
from responses_parity.harness.scenario.model import scenario_json_schema


def shipped() -> dict:
    return json.loads((builtin_scenarios_dir() / SCHEMA_FILE).read_text())


def test_the_shipped_schema_is_up_to_date() -> None:
    assert shipped() == scenario_json_schema(), "run `parity schema` to regenerate scenarios/scenario.schema.json"


@pytest.mark.parametrize("path", scenario_files([builtin_scenarios_dir()]), ids=lambda p: p.name)
def test_each_built_in_scenario_is_valid_for_editors(path) -> None:
    jsonschema.validate(parse_yaml(path.read_text()), shipped())


def test_the_schema_rejects_unknown_fields() -> None:
    scenario = {"id": "x", "title": "x", "evidence": {"contract": "1"}, "steps": [{"id": "a", "expct": {}}]}
    with pytest.raises(jsonschema.ValidationError, match="expct"):
        jsonschema.validate(scenario, shipped())


def test_each_scenario_file_names_the_schema_for_editors() -> None:
    for path in scenario_files([builtin_scenarios_dir()]):
        assert path.read_text().startswith(f"# yaml-language-server: $schema={SCHEMA_FILE}"), path.name
