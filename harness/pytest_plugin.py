"""The pytest plugin: scenario YAML files become tests, one per scenario and stream mode.

It does nothing until asked: `--parity` collects scenario files under the paths given to
pytest, `--parity-builtin` adds the shipped scenarios, `--parity-target URL` runs against a
gateway instead of the embedded reference one (and implies `--parity`). Its other options are
`parity run`'s, named `--parity-NAME` (`--parity-against golden:NAME`, `--parity-baseline
FILE`, ...: `options.PYTEST_OPTIONS`). With `--parity` or `--parity-builtin` given, `--target`
is accepted for `--parity-target`, unless another plugin or an initial conftest already has a
`--target` of its own: that one keeps it. Outcomes map as the CLI counts them: a pass passes,
a divergence fails, a scenario the harness could not run is an error (in setup), one the
target does not support is skipped with the reason; the session ends with the same one-line
tally, counted from the tests' reports, so under pytest-xdist (`-n 2`, each worker with its
own servers) the controller tallies every worker's runs. A broken scenario file is one
failing test with the loader's message; the other files still run. The `parity_session`
fixture gives Python tests the same running target. What the plugin reports of a run
(failures, skip reasons, and so the JUnit XML) passes through the session's redactor.

This module is all a pytest run that does not use the plugin loads: its options and the
fixture (it imports the standard library's argparse, which pytest has loaded already, and the
options module). Enabled, it registers `pytest_scenarios`, which does the rest.
"""

from __future__ import annotations

import argparse
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from .options import PYTEST_OPTIONS, TARGET, Option

if TYPE_CHECKING:
    from .engine.session import Session

_GROUP = "responses-parity"


def _argparse_type(option: Option) -> Any:
    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except ValueError as problem:
            raise argparse.ArgumentTypeError(str(problem)) from problem

    return parse


def _attributes(option: Option) -> dict[str, Any]:
    """The option as pytest's `addoption` takes it. The target's default is None, so that
    giving it is what enables the plugin."""
    shown = option.described()
    attributes: dict[str, Any] = {"dest": option.pytest_dest, "metavar": option.metavar or option.name.upper()}
    if option.multiple:
        attributes |= {"action": "append", "default": []}
    else:
        attributes["default"] = None if option is TARGET else option.default
        if option.default is not None:
            shown += f" (default: {option.default})"
    if option.choices:
        attributes["metavar"] = "{" + ",".join(option.choices) + "}"
    if option.type is not str or option.choices:
        attributes["type"] = _argparse_type(option)
    return attributes | {"help": shown.replace("%", "%%")}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(_GROUP)
    group.addoption("--parity", action="store_true", help="Collect scenario YAML files under the given paths.")
    group.addoption("--parity-builtin", action="store_true", help="Also run the built-in scenarios.")
    for option in PYTEST_OPTIONS:
        group.addoption(option.pytest_flag, **_attributes(option))


def _asked(options: argparse.Namespace) -> bool:
    """Whether the parsed options ask for the plugin."""
    return bool(options.parity or options.parity_builtin or getattr(options, TARGET.pytest_dest))


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser) -> Generator[None, None, None]:
    """Once every plugin and initial conftest has added its options, accept `--target` for
    `--parity-target` if the plugin is asked for and nothing else has a `--target`."""
    yield
    if _asked(early_config.known_args_namespace) and not _has_target(parser):
        parser.getgroup(_GROUP).addoption("--target", **_attributes(TARGET) | {
            "help": f"The same as {TARGET.pytest_flag} (accepted with --parity or --parity-builtin)."})


def _has_target(parser: pytest.Parser) -> bool:
    """Whether another plugin or an initial conftest has a `--target` (then it keeps the name):
    pytest 9 would refuse a second one as it is added, pytest 8 only once it parses them all."""
    try:
        _, unknown = parser.parse_known_and_unknown_args(["--target=0"])
    except pytest.UsageError:  # their option refused the value: it is theirs
        return True
    return "--target=0" not in unknown


def pytest_configure(config: pytest.Config) -> None:
    if _asked(config.option):
        from . import pytest_scenarios

        config.pluginmanager.register(pytest_scenarios, "responses_parity.scenarios")


@pytest.fixture(scope="session")
def parity_session(pytestconfig: pytest.Config) -> Session:
    """The running target of this pytest session (needs --parity, --parity-builtin or --parity-target)."""
    if not _asked(pytestconfig.option):
        pytest.skip("responses-parity is not enabled: pass --parity, --parity-builtin or --parity-target")
    from .pytest_scenarios import session_of

    return session_of(pytestconfig)
