"""The pytest plugin: scenario YAML files become tests, one per scenario and stream mode.

It does nothing until asked: `--parity` collects scenario files under the paths given to
pytest, `--parity-builtin` adds the shipped scenarios, `--target URL` runs against a gateway
instead of the embedded reference one (and implies `--parity`); `--parity-against
golden:NAME` and `--parity-baseline FILE` judge as `parity run` does. Outcomes map as the CLI
counts them: a pass passes, a divergence fails, a scenario the harness could not run is an
error (in setup), one the target does not support is skipped with the reason; the session
ends with the same one-line tally. A broken scenario file is one failing test with the
loader's message; the other files still run. The `parity_session` fixture gives Python tests
the same running target. What the plugin reports of a run (failures, skip reasons, and so the
JUnit XML) passes through the session's redactor.

This module is all a pytest run that does not use the plugin loads: its options and the
fixture. Enabled, it registers `pytest_scenarios`, which does the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .defaults import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_UPSTREAM_URL, MODES

if TYPE_CHECKING:
    from .session import Session


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("responses-parity")
    group.addoption("--parity", action="store_true", help="Collect scenario YAML files under the given paths.")
    group.addoption("--parity-builtin", action="store_true", help="Also run the built-in scenarios.")
    group.addoption("--target", dest="parity_target", default=None,
                    help="Base URL of the gateway to test, or a target profile (smg, litellm, ... or a file) to "
                         "install and start (default: the embedded reference gateway).")
    group.addoption("--parity-api-key", default=None, help="Bearer token sent to the target.")
    group.addoption("--parity-header", action="append", default=[], help="Extra header 'Name: value'.")
    group.addoption("--parity-model", default="parity-model", help="Model name sent in requests.")
    group.addoption("--parity-responses-path", default="/v1/responses", help="The target's Responses path.")
    group.addoption("--parity-chat-path", default="/v1/chat/completions", help="The target's Chat Completions path.")
    group.addoption("--parity-mode", choices=["both", *MODES], default="both", help="Stream modes to run.")
    group.addoption("--parity-upstream", default=DEFAULT_UPSTREAM_URL, help="Scripted upstream for a URL target.")
    group.addoption("--parity-timeout", type=float, default=60.0,
                    help="Seconds one request may take, from sending it to the last byte of its answer.")
    group.addoption("--parity-max-answer-mb", type=float, default=DEFAULT_MAX_ANSWER_BYTES / 2**20,
                    help="How much of one answer is read; a larger one is cut there (a finding).")
    group.addoption("--parity-against", default=None, metavar="golden:NAME",
                    help="Also compare every step's contract with a recorded golden set.")
    group.addoption("--parity-golden-dir", default=None, help="Where golden sets are (default: fixtures/goldens).")
    group.addoption("--parity-baseline", default=None, metavar="FILE",
                    help="Known divergences of this target (`parity baseline update`): they fail nothing.")


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("parity") or config.getoption("parity_builtin") or config.getoption("parity_target"))


def pytest_configure(config: pytest.Config) -> None:
    if _enabled(config):
        from . import pytest_scenarios

        config.pluginmanager.register(pytest_scenarios, "responses_parity.scenarios")


@pytest.fixture(scope="session")
def parity_session(pytestconfig: pytest.Config) -> Session:
    """The running target of this pytest session (needs --parity, --parity-builtin or --target)."""
    if not _enabled(pytestconfig):
        pytest.skip("responses-parity is not enabled: pass --parity, --parity-builtin or --target")
    from .pytest_scenarios import session_of

    return session_of(pytestconfig)
