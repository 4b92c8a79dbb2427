"""The CLI and the pytest plugin read one declaration of the run options: the plugin's options
are `parity run`'s with `--parity-` before them, both give the same target options when
nothing is given (the engine's own defaults) and the same given the same values, and a wrong
value is an error naming the option as its user wrote it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from responses_parity.harness.cli import main
from responses_parity.harness.commands.running import run
from responses_parity.harness.options import PYTEST_OPTIONS, TargetOptions, target_options
from responses_parity.harness.pytest_plugin import dest

pytest_plugins = ["pytester"]

GIVEN = {"target": "http://127.0.0.1:9", "api-key": "key-0123456789", "header": "X-Tenant: a", "model": "m",
         "responses-path": "/responses", "chat-path": "/chat", "timeout": "7.5", "max-answer-mb": "0.5",
         "upstream": "http://127.0.0.1:8", "public-mcp": "calc=https://mcp.example.org", "retries": "3",
         "profile-dir": "profiles"}


@pytest.fixture(autouse=True)
def _quiet_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _cli_values(args: list[str]) -> dict[str, object]:
    context = run.make_context("run", args)
    return dict(context.params)


def _pytest_values(pytester: pytest.Pytester, args: list[str]) -> dict[str, object]:
    config = pytester.parseconfig("--parity", *args)
    return {option.dest: config.getoption(dest(option)) for option in PYTEST_OPTIONS}


def test_the_plugins_options_are_the_clis_with_a_prefix() -> None:
    cli_names = {name for param in run.params for name in param.opts}
    assert [f"--{option.name}" for option in PYTEST_OPTIONS if f"--{option.name}" not in cli_names] == []


def test_nothing_given_is_the_same_target_everywhere(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARITY_API_KEY", raising=False)
    assert target_options(_cli_values([])) == target_options(_pytest_values(pytester, [])) == TargetOptions()


def test_the_same_values_give_the_same_target(pytester: pytest.Pytester) -> None:
    cli = target_options(_cli_values([f"--{name}={value}" for name, value in GIVEN.items()]))
    plugin = target_options(_pytest_values(pytester, [f"--parity-{name}={value}" for name, value in GIVEN.items()]))
    assert cli == plugin
    assert (cli.headers, cli.api_key, cli.max_answer_bytes, cli.public_mcp, cli.retries) == (
        (("X-Tenant", "a"),), "key-0123456789", 2**19, (("calc", "https://mcp.example.org"),), 3)


def test_the_api_key_falls_back_on_its_environment_variable_in_both(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_API_KEY", "from-the-environment")
    assert target_options(_cli_values([])).api_key == target_options(_pytest_values(pytester, [])).api_key \
        == "from-the-environment"


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("header", "no-colon", "header 'no-colon' is not of the form 'Name: value'"),
    ("public-mcp", "calc", "'calc': write NAME=URL, e.g. calc=https://mcp.example.org"),
])
def test_a_wrong_value_is_a_usage_error_naming_the_option(pytester: pytest.Pytester, name: str, value: str,
                                                          problem: str) -> None:
    result = CliRunner().invoke(main, ["run", f"--{name}", value])
    assert result.exit_code == 2
    assert f"Error: --{name}: {problem}" in result.output
    outcome = pytester.runpytest("--parity", f"--parity-{name}", value)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([f"ERROR: --parity-{name}: {problem}"])


def test_a_value_out_of_bounds_is_refused_by_both(pytester: pytest.Pytester) -> None:
    result = CliRunner().invoke(main, ["run", "--timeout", "0"])
    assert result.exit_code == 2 and "--timeout" in result.output
    outcome = pytester.runpytest("--parity", "--parity-timeout", "0")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*argument --parity-timeout: 0 is not above 0*"])
