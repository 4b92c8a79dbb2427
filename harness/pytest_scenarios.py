"""What the pytest plugin does once enabled (`pytest_plugin` registers this module then):
scenario files become tests, run on the session's target, and the run ends with the tally."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..fixtures.mcp import FIXTURE_SERVERS
from ..openai_contract.documents import MAX_YAML_BYTES
from .defaults import Mode
from .engine.session import Session, open_session
from .engine.shards import shard_part
from .engine.targets import TargetRefuses
from .errors import HarnessError
from .judge.against import Against, load_against
from .judge.results import ScenarioResult
from .options import PYTEST_OPTIONS, OptionError, TargetOptions, modes, target_options
from .report.documents import Counted, result_entry, tally_of, tally_line
from .report.junit import counted, describe, properties
from .scenario.loader import SCENARIO_SUFFIXES, LoadedScenario, builtin_scenarios_dir, load_file
from .wire.redaction import Redactor

_SCHEMA_MODELINE = "scenario.schema.json"
_TOP_LEVEL_KEY = re.compile(r"""^["']?(id|steps)["']?[ \t]*:""", re.MULTILINE)


@dataclass(eq=False)
class _Run:
    """This pytest run's target, selection and what its answers are held against, its session
    (started on first use), and the tally, counted from every test's report (here, or sent by a
    pytest-xdist worker). A plugin of its own, registered for the run."""

    options: TargetOptions
    modes: tuple[Mode, ...]
    against: Against = field(default_factory=Against)
    shard: str | None = None
    """`--parity-shard I/N`: only that part of the collected scenario runs runs (`engine.shards`)."""
    shard_durations: Path | None = None
    counted: list[Counted] = field(default_factory=list)
    _session: Session | None = None
    _context: Any = field(default=None, repr=False)

    def session(self) -> Session:
        """The session of this pytest process, started on first use with every MCP fixture."""
        if self._session is None:
            self._context = open_session(self.options, FIXTURE_SERVERS)
            self._session = self._context.__enter__()
        return self._session

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Deselect the scenario runs of the other shards (the split `parity run --shard` makes)."""
        scenarios = [item for item in items if isinstance(item, ScenarioItem)]
        part = shard_part([(item.loaded, item.mode) for item in scenarios], self.shard, self.shard_durations)
        if part is None:
            return
        mine = {(loaded.scenario.id, mode) for loaded, mode in part[1]}
        others = [item for item in scenarios if (item.loaded.scenario.id, item.mode) not in mine]
        if others:
            config.hook.pytest_deselected(items=others)
            dropped = set(others)
            items[:] = [item for item in items if item not in dropped]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and (unit := counted(report.user_properties)) is not None:
            self.counted.append(unit)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.counted:
            terminalreporter.section("responses-parity")
            terminalreporter.write_line(tally_line(tally_of(self.counted)))

    def pytest_unconfigure(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = self._session = None


_RUN = pytest.StashKey[_Run]()


def pytest_configure(config: pytest.Config) -> None:
    """Read the plugin's options into this run's state (the plugin registers this module only
    when it is enabled); a wrong value is a usage error naming the option."""
    values = {option.dest: config.getoption(option.pytest_dest) for option in PYTEST_OPTIONS}
    try:
        options = target_options(values)
        shard_part([], values["shard"], values["shard_durations"])  # a wrong one is a usage error now
        chosen = load_against(values["against"], values["golden_dir"], values["baseline_file"])
    except OptionError as problem:
        raise pytest.UsageError(f"{problem.option.pytest_flag}: {problem.problem}") from problem
    except HarnessError as problem:
        raise pytest.UsageError(str(problem)) from problem
    run = config.stash[_RUN] = _Run(options, modes(values["mode"]), chosen, values["shard"],
                                    values["shard_durations"])
    config.pluginmanager.register(run, "responses_parity.run")
    if config.getoption("parity_builtin"):
        config.args.append(str(builtin_scenarios_dir()))


def _is_scenario_file(path: Path) -> bool:
    """Whether the file names the scenario schema on its first line or has `id` and `steps` keys
    at its top level. Told from (at most a scenario's worth of) its text, not by parsing it: the
    file is parsed once, bounded, when it is collected, and a broken or hostile scenario file is
    reported there, not passed over."""
    with path.open("rb") as file:
        text = file.read(MAX_YAML_BYTES).decode("utf-8", errors="replace")
    return _SCHEMA_MODELINE in text.split("\n", 1)[0] or \
        {key.group(1) for key in _TOP_LEVEL_KEY.finditer(text)} == {"id", "steps"}


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if _RUN in parent.config.stash and file_path.suffix in SCENARIO_SUFFIXES and _is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        loaded = load_file(self.path)
        if isinstance(loaded, list):
            yield BrokenScenario.from_parent(self, name=self.path.stem, problems=loaded)
            return
        wanted = self.config.stash[_RUN].modes
        for mode in loaded.modes:
            if mode in wanted:
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
        return self.config.stash[_RUN].session().redactor

    def setup(self) -> None:
        """Runs the scenario; one the harness could not run is an error, not a failure. The
        test's properties carry what the tally takes of it."""
        run = self.config.stash[_RUN]
        try:
            self.result = run.session().run([(self.loaded, self.mode)], against=run.against)[0]
        except TargetRefuses as refused:  # every test would fail alike: one error, and stop
            pytest.exit(str(refused), returncode=pytest.ExitCode.USAGE_ERROR)
        self.user_properties.extend(properties(Counted.of(self.result)))
        if self.result.outcome == "could_not_run":
            pytest.fail(self._described(self.result), pytrace=False)

    def runtest(self) -> None:
        assert self.result is not None
        if self.result.unsupported is not None:
            pytest.skip(self.redactor.redact_text(f"unsupported by the target: {self.result.unsupported}"))
        if self.result.outcome == "fail":
            raise ScenarioFailed(self.result)
        if self.result.outcome == "known":
            pytest.xfail(self._described(self.result))

    def _described(self, result: ScenarioResult) -> str:
        return describe(result_entry(result), result.target, self.redactor)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if not isinstance(excinfo.value, ScenarioFailed):
            return str(super().repr_failure(excinfo))
        return self._described(excinfo.value.result)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.loaded.scenario.id} [{self.mode}]"


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
    return config.stash[_RUN].session()
