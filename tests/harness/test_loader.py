"""Scenario files: one-line errors naming file, scenario and field; broken files lose nothing."""

from __future__ import annotations

from pathlib import Path

from conftest import write_scenario

from responses_parity.harness.loader import builtin_scenarios_dir, load

GOOD = """
id: good
title: good
evidence: {recordings: [stream-text__openllmetry__1]}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "Hello"}]
    expect: {status: completed}
"""


def test_a_typo_in_a_field_name_is_one_line_naming_file_scenario_and_field(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace("expect:", "expct:"), "typo.yaml")
    catalogue = load([tmp_path])
    assert [str(e) for e in catalogue.errors] == [
        f"{tmp_path / 'typo.yaml'}: scenario 'good': steps[0].expct: unknown field (did you mean 'expect'?)"
    ]


def test_a_nested_typo_suggests_the_field_of_that_level(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace("{status: completed}", "{stauts: completed}"))
    assert catalogue_messages(tmp_path) == [
        "scenario 'good': steps[0].expect.stauts: unknown field (did you mean 'status'?)"]


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path) -> None:
    write_scenario(tmp_path, "id: broken\nsteps: [\n", "broken.yaml")
    write_scenario(tmp_path, GOOD, "good.yaml")
    catalogue = load([tmp_path])
    assert [s.scenario.id for s in catalogue.scenarios] == ["good"]
    assert len(catalogue.errors) == 1 and "not valid YAML" in catalogue.errors[0].message


def test_a_placeholder_must_name_an_earlier_step(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace('input: "Hi"', 'input: "{{later.response.id}}"'))
    assert catalogue_messages(tmp_path) == [
        "scenario 'good': steps[0]: placeholder 'later' is neither an earlier step nor one of chat_path, mcp, model, "
        "responses_path, run"]


def test_an_unknown_mcp_fixture_is_named(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD + "mcp: [nosuch]\n")
    assert catalogue_messages(tmp_path) == [
        "scenario 'good': unknown MCP fixture 'nosuch' (known: calc, shoddy, strings)"
    ]


def test_duplicate_ids_across_files_are_reported(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD, "a.yaml")
    write_scenario(tmp_path, GOOD, "b.yaml")
    catalogue = load([tmp_path])
    assert len(catalogue.scenarios) == 1
    assert "id already used by" in catalogue.errors[0].message


def test_yaml_keys_like_on_stay_strings(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace("{status: completed}", "{interrupt: {on: none}}"))
    catalogue = load([tmp_path])
    assert catalogue.errors == []
    assert catalogue.scenarios[0].scenario.steps[0].expect.interrupt.on == "none"


def test_every_built_in_scenario_loads() -> None:
    catalogue = load([builtin_scenarios_dir()])
    assert catalogue.errors == []
    assert len(catalogue.scenarios) >= 6


def test_selection_by_id_and_tag(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD, "a.yaml")
    write_scenario(tmp_path, GOOD.replace("id: good", "id: other") + "tags: [x]\n", "b.yaml")
    catalogue = load([tmp_path])
    assert [s.scenario.id for s in catalogue.select(ids=["good"])] == ["good"]
    assert [s.scenario.id for s in catalogue.select(tags=["x"])] == ["other"]
    assert len(catalogue.select()) == 2


def catalogue_messages(directory: Path) -> list[str]:
    return [error.message for error in load([directory]).errors]
