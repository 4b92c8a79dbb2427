"""Find, parse and validate scenario files; select scenarios by id or tag.

A broken file never stops the others: it becomes a `ScenarioFileError`, one line naming the
file, the scenario (when its id could be read) and the field, e.g.
`scenarios/text.yaml: scenario 'text-basic': steps[0].expct: unknown field (did you mean 'expect'?)`.
"""

from __future__ import annotations

import copy
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ...fixtures.mcp import FIXTURE_SERVERS
from ...openai_contract import documents
from ..errors import did_you_mean
from . import lint
from .lint import Outline
from .model import MODES, Mode, Scenario, Step, default_modes

SCENARIO_SUFFIXES = (".yaml", ".yml")
_BOOL = "tag:yaml.org,2002:bool"


class _Yaml12Loader(documents.SAFE_LOADER):  # type: ignore[misc, valid-type]
    """YAML with 1.2 booleans: only true/false, so keys like `on` and `no` stay strings."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _BOOL]
    for first, resolvers in documents.SAFE_LOADER.yaml_implicit_resolvers.items()
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


def units_of(scenarios: Sequence[LoadedScenario], modes: Sequence[Mode]) -> list[tuple[LoadedScenario, Mode]]:
    """Each scenario in each requested mode it supports."""
    return [(s, mode) for s in scenarios for mode in s.scenario.modes if mode in modes]


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
    """YAML as scenario files are read (YAML 1.2 booleans, like editors' YAML language servers),
    bounded: `documents.DocumentError` says what is wrong."""
    return documents.parse_yaml(text, _Yaml12Loader)


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
        return f"{_loc(loc)}: unknown field{did_you_mean(str(loc[-1]), model.model_fields if model else ())}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"].endswith("_type") and not isinstance(error.get("input"), (dict, list)):
        message += f" (got {error['input']!r})"
    return f"{_loc(loc)}: {message}" if loc else message


def _partial_outline(raw: dict[str, Any]) -> Outline:
    """The outline of a scenario that did not validate: the steps that did, and the rest of what
    the checks of meaning need, read as far as it can be."""
    raw_steps = raw.get("steps") if isinstance(raw.get("steps"), list) else []
    steps = [(index, step) for index, raw_step in enumerate(raw_steps)
             if (step := _without_broken_fields(raw_step)) is not None]
    ids = [step.get("id") if isinstance(step, dict) and isinstance(step.get("id"), str) else "" for step in raw_steps]
    gateway = raw.get("gateway") if isinstance(raw.get("gateway"), dict) else {}
    servers = gateway.get("mcp_servers") if isinstance(gateway.get("mcp_servers"), list) else []
    named = [*(raw.get("mcp") if isinstance(raw.get("mcp"), list) else []),
             *(server.get("fixture") for server in servers if isinstance(server, dict))]
    modes = raw.get("modes") if isinstance(raw.get("modes"), list) and set(raw["modes"]) <= set(MODES) else \
        default_modes(raw)
    surface = raw.get("surface") if raw.get("surface") in ("responses", "chat") else "responses"
    return Outline(steps, ids, sorted({n for n in named if n in FIXTURE_SERVERS}), modes, surface)


def _without_broken_fields(raw_step: Any, attempts: int = 5) -> Step | None:
    """The step with the fields that fail validation set aside (their errors are reported
    already), so what remains can still be checked for meaning; None if nothing sensible is left."""
    candidate = copy.deepcopy(raw_step)
    for _ in range(attempts):
        try:
            return Step.model_validate(candidate)
        except ValidationError as error:
            for loc in sorted({tuple(e["loc"]) for e in error.errors()}, key=len, reverse=True):
                if not loc or not _drop(candidate, loc):
                    return None
    return None


def _drop(data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the value at `loc` (a dict key or list index); False when it is not there."""
    for part in loc[:-1]:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    try:
        del data[loc[-1]]
    except (KeyError, IndexError, TypeError):
        return False
    return True


def load_file(path: Path) -> Scenario | list[str]:
    """The scenario in the file, or one message per problem."""
    try:
        raw = documents.read_yaml(path, _Yaml12Loader)
    except OSError as error:
        return [f"cannot read: {error.strerror}"]
    except documents.DocumentError as error:
        return [str(error)]
    return scenario_from(raw)


def scenario_from(raw: Any) -> Scenario | list[str]:
    """The scenario a parsed file holds, or one message per problem: of shape and of meaning,
    all in one pass."""
    if not isinstance(raw, dict):
        return ["a scenario file holds one mapping (id, title, evidence, steps ...)"]
    prefix = f"scenario '{raw['id']}': " if isinstance(raw.get("id"), str) else ""
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as error:
        shape = [prefix + _describe(e) for e in error.errors()]
        return shape + [prefix + str(problem) for problem in lint.problems(_partial_outline(raw), raw)]
    if found := lint.problems(Outline.of(scenario), raw):
        return [prefix + str(problem) for problem in found]
    return scenario


def load(paths: Iterable[Path]) -> Catalogue:
    """The scenarios of the files under `paths`, and one error per problem: in a file, an id
    used twice, or a search query two scenarios state with different results (the search
    fixture could not tell their runs apart)."""
    catalogue = Catalogue()
    seen: dict[str, Path] = {}
    searches: dict[str, tuple[list[dict[str, str]], Path]] = {}
    for path in scenario_files(paths):
        loaded = load_file(path)
        if isinstance(loaded, list):
            catalogue.errors += [ScenarioFileError(path, message) for message in loaded]
        elif loaded.id in seen:
            catalogue.errors.append(ScenarioFileError(
                path, f"scenario '{loaded.id}': id already used by {_shown(seen[loaded.id])}"))
        elif clashes := _search_clashes(loaded, path, searches):
            catalogue.errors += [ScenarioFileError(path, message) for message in clashes]
        else:
            seen[loaded.id] = path
            catalogue.scenarios.append(LoadedScenario(loaded, path))
    return catalogue


def _search_clashes(scenario: Scenario, path: Path, stated: dict[str, tuple[list[dict[str, str]], Path]]) -> list[str]:
    """Why the scenario's `search` cannot join those already `stated` (query -> results and
    file); when it can, its queries join them."""
    catalogue = scenario.search_catalogue()
    clashes = [f"scenario '{scenario.id}': search: the query {query!r} finds other results than in "
               f"{_shown(stated[query][1])}, and the search fixture answers a query the same for every run "
               f"(give it a query of its own, or the same results)"
               for query, results in catalogue.items() if query in stated and stated[query][0] != results]
    if not clashes:
        stated.update({query: (results, path) for query, results in catalogue.items() if query not in stated})
    return clashes
