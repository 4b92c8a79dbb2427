"""The CLI and the pytest plugin read one declaration of the run options: the plugin's options
are `parity run`'s with `--parity-` before them, both give the same target options when
nothing is given (the engine's own defaults) and the same given the same values, and a wrong
value is an error naming the option as its user wrote it. No `parity` command declares by
hand an option of a declared name, and `--json` is declared once."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from responses_parity import harness
from responses_parity.harness import options
from responses_parity.harness.cli import main
from responses_parity.harness.commands.click_options import click_options, json_option
from responses_parity.harness.commands.running import run
from responses_parity.harness.options import PYTEST_OPTIONS, Option, TargetOptions, target_options

pytest_plugins = ["pytester"]

GIVEN = {"target": "http://127.0.0.1:9", "api-key": "key-0123456789", "header": "X-Tenant: a", "model": "m",
         "responses-path": "/responses", "chat-path": "/chat", "timeout": "7.5", "max-answer-mb": "0.5",
         "upstream": "http://127.0.0.1:8", "public-mcp": "calc=https://mcp.example.org", "retries": "3",
         "profile-dir": "profiles"}


@pytest.fixture(autouse=True)
def _quiet_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _cli_values(args: list[str]) -> dict[str, object]:
    # under the group's context, as `parity run` parses them: click keeps a command's help
    # option once made, and one made without the group's `-h` broke `parity run -h` for the
    # tests after this one in the same process
    with main.make_context("parity", ["run"]) as parent:
        return dict(run.make_context("run", args, parent=parent).params)


def _pytest_values(pytester: pytest.Pytester, args: list[str]) -> dict[str, object]:
    config = pytester.parseconfig("--parity", *args)
    return {option.dest: config.getoption(option.pytest_dest) for option in PYTEST_OPTIONS}


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


def _commands(command: click.Command = main, path: str = "parity") -> Iterator[tuple[str, click.Command]]:
    """Every `parity` command and group, by its command line."""
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            subcommand = command.get_command(context, name)
            assert subcommand is not None
            yield from _commands(subcommand, f"{path} {name}")


def _options(path: str, command: click.Command, flag: str) -> list[tuple[str, click.Parameter]]:
    return [(f"{path} {flag}", param) for param in command.params if flag in param.opts]


def _described(param: click.Parameter) -> dict[str, Any]:
    """Everything click knows of an option, how its help shows it too."""
    return param.to_info_dict() | {"metavar": param.metavar, "show_default": getattr(param, "show_default", None)}


def _built(decorator: Any) -> dict[str, Any]:
    """The option `decorator` adds to a command, described."""
    return _described(decorator(click.Command("built")).params[0])


def test_no_command_declares_by_hand_an_option_of_a_declared_name() -> None:
    """An option named as one in `options.py` is one of that name's declarations as
    `click_options` builds it: one declared by hand differs, or will once the declaration changes."""
    declared: dict[str, list[dict[str, Any]]] = {}
    for declaration in vars(options).values():
        if isinstance(declaration, Option):
            declared.setdefault(f"--{declaration.name}", []).append(_built(click_options(declaration)))
    by_hand = [where for path, command in _commands() for flag in declared
               for where, param in _options(path, command, flag) if _described(param) not in declared[flag]]
    assert by_hand == []


def test_json_is_declared_once() -> None:
    """`--json` is spelled once in the harness, and every command's is that declaration (only its
    help, what it prints, differs)."""
    spelled = [path.name for path in Path(harness.__file__).parent.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Constant) and node.value == "--json"]
    assert spelled == ["click_options.py"]
    flags = [(where, _described(param) | {"help": None}) for path, command in _commands()
             for where, param in _options(path, command, "--json")]
    assert flags
    assert [where for where, flag in flags if flag != _built(json_option("")) | {"help": None}] == []
