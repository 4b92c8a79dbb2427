"""What the pytest plugin does once enabled (`pytest_plugin` registers this module then):
scenario files become tests, run on the session's target, and the run ends with the tally."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..fixtures.mcp import FIXTURE_SERVERS
from .defaults import MODES, Mode
from .findings import HarnessError, Severity
from .judges import judges
from .loader import SCENARIO_SUFFIXES, LoadedScenario, builtin_scenarios_dir, load_file
from .redaction import Redactor
from .report import tally, tally_line
from .runner import Judge, ScenarioResult
from .session import REFERENCE, Session, TargetOptions, open_session, parse_header

_SCHEMA_MODELINE = "scenario.schema.json"


@dataclass
class _State:
    options: TargetOptions
    modes: tuple[Mode, ...]
    judges: tuple[Judge, ...] = ()
    results: list[ScenarioResult] = field(default_factory=list)
    _session: Session | None = None
    _context: Any = field(default=None, repr=False)

    def session(self) -> Session:
        """The session of this pytest run, started on first use with every MCP fixture."""
        if self._session is None:
            self._context = open_session(self.options, FIXTURE_SERVERS)
            self._session = self._context.__enter__()
        return self._session

    def close(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = self._session = None


_STATE = pytest.StashKey[_State]()


def pytest_configure(config: pytest.Config) -> None:
    """Read the plugin's options into this run's state (the plugin registers this module only
    when it is enabled)."""
    try:
        headers = tuple(parse_header(h) for h in config.getoption("parity_header"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from error
    mode = config.getoption("parity_mode")
    golden_dir, baseline_file = config.getoption("parity_golden_dir"), config.getoption("parity_baseline")
    try:
        chosen = judges(config.getoption("parity_against"), Path(golden_dir) if golden_dir else None,
                        Path(baseline_file) if baseline_file else None)
    except HarnessError as error:
        raise pytest.UsageError(str(error)) from error
    options = TargetOptions(
        target=config.getoption("parity_target") or REFERENCE,
        api_key=config.getoption("parity_api_key"),
        headers=headers,
        model=config.getoption("parity_model"),
        responses_path=config.getoption("parity_responses_path"),
        chat_path=config.getoption("parity_chat_path"),
        timeout_s=config.getoption("parity_timeout"),
        max_answer_bytes=int(config.getoption("parity_max_answer_mb") * 2**20),
        upstream=config.getoption("parity_upstream"),
    )
    config.stash[_STATE] = _State(options, MODES if mode == "both" else (mode,), chosen)
    if config.getoption("parity_builtin"):
        config.args.append(str(builtin_scenarios_dir()))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STATE in config.stash:
        config.stash[_STATE].close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.results:
        terminalreporter.section("responses-parity")
        terminalreporter.write_line(tally_line(tally(state.results)))


def _is_scenario_file(path: Path) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace")
    if _SCHEMA_MODELINE in text.split("\n", 1)[0]:
        return True
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(raw, dict) and "steps" in raw and "id" in raw


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if _STATE in parent.config.stash and file_path.suffix in SCENARIO_SUFFIXES and _is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        loaded = load_file(self.path)
        if isinstance(loaded, list):
            yield BrokenScenario.from_parent(self, name=self.path.stem, problems=loaded)
            return
        modes = self.config.stash[_STATE].modes
        for mode in loaded.modes:
            if mode in modes:
                yield ScenarioItem.from_parent(self, name=f"{loaded.id}[{mode}]",
                                               loaded=LoadedScenario(loaded, self.path), mode=mode)


class ScenarioFailed(Exception):
    def __init__(self, result: ScenarioResult) -> None:
        super().__init__(result.scenario.id)
        self.result = result


class ScenarioItem(pytest.Item):
    def __init__(self, *, loaded: LoadedScenario, mode: Mode, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loaded = loaded
        self.mode = mode
        self.result: ScenarioResult | None = None

    @property
    def redactor(self) -> Redactor:
        """The session's: what this item reports passes through it."""
        return self.config.stash[_STATE].session().redactor

    def setup(self) -> None:
        """Runs the scenario; one the harness could not run is an error, not a failure."""
        state = self.config.stash[_STATE]
        self.result = state.session().run([(self.loaded, self.mode)], judges=state.judges)[0]
        state.results.append(self.result)
        if self.result.outcome == "could_not_run":
            pytest.fail(_describe(self.result, self.redactor), pytrace=False)

    def runtest(self) -> None:
        assert self.result is not None
        if self.result.unsupported is not None:
            pytest.skip(self.redactor.redact_text(f"unsupported by the target: {self.result.unsupported}"))
        if self.result.outcome == "fail":
            raise ScenarioFailed(self.result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if not isinstance(excinfo.value, ScenarioFailed):
            return str(super().repr_failure(excinfo))
        return _describe(excinfo.value.result, self.redactor)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.loaded.scenario.id} [{self.mode}]"


def _describe(result: ScenarioResult, redactor: Redactor) -> str:
    lines = [f"scenario {result.scenario.id} [{result.mode}] on {result.target}: {result.outcome.replace('_', ' ')}"]
    for step in result.steps:
        if step.error:
            lines.append(f"  {step.step_id}: could not run: {step.error}")
        lines += [f"  {step.step_id}: {f.severity}{' (known)' if f.known else ''} {f.kind} ({f.rule}): {f.message}"
                  for f in step.findings if f.severity >= Severity.WARNING]
    return redactor.redact_text("\n".join(lines))


class BrokenScenario(pytest.Item):
    def __init__(self, *, problems: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problems = problems

    def runtest(self) -> None:
        raise pytest.fail("\n".join(f"{self.path}: {problem}" for problem in self.problems), pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario file {self.path.name}"


def session_of(config: pytest.Config) -> Session:
    """The session of this pytest run (started on first use)."""
    return config.stash[_STATE].session()
