"""Find, parse and validate scenario files; select scenarios by id or tag.

A broken file never stops the others: it becomes a `ScenarioFileError`, one line naming the
file, the scenario (when its id could be read) and the field, e.g.
`scenarios/text.yaml: scenario 'text-basic': steps[0].expct: unknown field (did you mean 'expect'?)`.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import yaml
from pydantic import BaseModel, ValidationError

from .placeholders import BUILTIN_NAMES, referenced_names
from .scenario import Scenario

SCENARIO_SUFFIXES = (".yaml", ".yml")
_BOOL = "tag:yaml.org,2002:bool"


class _Yaml12Loader(yaml.SafeLoader):
    """YAML with 1.2 booleans: only true/false, so keys like `on` and `no` stay strings."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    path: Path


@dataclass(frozen=True)
class ScenarioFileError:
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{_shown(self.path)}: {self.message}"


@dataclass
class Catalogue:
    scenarios: list[LoadedScenario] = field(default_factory=list)
    errors: list[ScenarioFileError] = field(default_factory=list)

    def select(self, ids: Sequence[str] = (), tags: Sequence[str] = ()) -> list[LoadedScenario]:
        """Scenarios whose id is in `ids` or that carry one of `tags` (all when both are empty)."""
        if not ids and not tags:
            return list(self.scenarios)
        return [s for s in self.scenarios if s.scenario.id in ids or set(tags) & set(s.scenario.tags)]


def builtin_scenarios_dir() -> Path:
    """The scenarios shipped with the package (the repository's `scenarios/` when editable)."""
    return Path(str(resources.files("responses_parity.scenarios")))


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def scenario_files(paths: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in SCENARIO_SUFFIXES and p.is_file())
        else:
            files.append(path)
    return files


def parse_yaml(text: str) -> Any:
    """YAML as scenario files are read (YAML 1.2 booleans, like editors' YAML language servers)."""
    return yaml.load(text, Loader=_Yaml12Loader)


def _loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class whose fields apply at `loc` (for 'did you mean' suggestions)."""
    model: type[BaseModel] | None = Scenario
    for part in loc:
        if model is None or isinstance(part, int):
            continue
        info = model.model_fields.get(str(part))
        if info is None:
            return model
        model = _inner_model(info.annotation)
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _inner_model(arg)) is not None:
            return found
    return None


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        message = f"{_loc(loc)}: unknown field"
        if model is not None and (close := difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)):
            message += f" (did you mean '{close[0]}'?)"
        return message
    message = error["msg"].removeprefix("Value error, ")
    return f"{_loc(loc)}: {message}" if loc else message


def _placeholder_errors(scenario: Scenario) -> list[str]:
    errors: list[str] = []
    earlier: set[str] = set()
    for index, step in enumerate(scenario.steps):
        try:
            names = referenced_names([step.path, step.request, step.expect.response, step.expect.body,
                                      step.expect.page.ids if step.expect.page else None])
        except jinja2.TemplateSyntaxError as error:
            errors.append(f"steps[{index}]: placeholder syntax: {error.message}")
            continue
        for name in sorted(names - BUILTIN_NAMES - earlier):
            errors.append(f"steps[{index}]: placeholder '{name}' is neither an earlier step nor one of "
                          f"{', '.join(sorted(BUILTIN_NAMES))}")
        earlier.add(step.id)
    return errors


def load_file(path: Path) -> Scenario | list[str]:
    """The scenario in the file, or one message per problem."""
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8"))
    except OSError as error:
        return [f"cannot read: {error.strerror}"]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        return [f"{where}not valid YAML: {getattr(error, 'problem', error)}"]
    if not isinstance(raw, dict):
        return ["a scenario file holds one mapping (id, title, evidence, steps ...)"]
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as error:
        prefix = f"scenario '{raw['id']}': " if isinstance(raw.get("id"), str) else ""
        return [prefix + _describe(e) for e in error.errors()]
    if problems := _placeholder_errors(scenario):
        return [f"scenario '{scenario.id}': {p}" for p in problems]
    return scenario


def load(paths: Iterable[Path]) -> Catalogue:
    catalogue = Catalogue()
    seen: dict[str, Path] = {}
    for path in scenario_files(paths):
        loaded = load_file(path)
        if isinstance(loaded, list):
            catalogue.errors += [ScenarioFileError(path, message) for message in loaded]
        elif loaded.id in seen:
            catalogue.errors.append(ScenarioFileError(
                path, f"scenario '{loaded.id}': id already used by {_shown(seen[loaded.id])}"))
        else:
            seen[loaded.id] = path
            catalogue.scenarios.append(LoadedScenario(loaded, path))
    return catalogue
