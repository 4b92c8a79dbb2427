"""Goldens: what one target did, saved so any other target can be compared with it offline.

A golden set is a folder `<golden-dir>/<name>/`: `manifest.json` (target, the gateway and its
version when a profile started it, date, model, SDK versions, whether the model was scripted,
the units the target could not run and why, the command that records it again) and one file
per scenario and stream mode, `<scenario>/<mode>.json`, holding each step's exchange (in the
exchange file format), for readers its contract, and the rules of the scenario's own checks it
broke (`diverges`: how it stood against OpenAI's contract when recorded). Everything is written
through the run's `Redactor`.

`GoldenSet.reference` gives the set's record of a step, which the judge holds an answer
against (`reference.py`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ...openai_contract.documents import read_json
from ..defaults import DEFAULT_GOLDEN_DIR
from ..errors import HarnessError
from ..model.findings import Rule
from ..model.versions import versions
from ..scenario.model import FORMAT_VERSION, Mode, Scenario
from ..wire.exchange import Exchange
from ..wire.redaction import Redactor
from .reference import Reference
from .results import ScenarioResult

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class GoldenUnit:
    scenario: str
    mode: Mode
    steps: dict[str, Exchange]
    """Step id -> its exchange."""
    diverges: dict[str, frozenset[Rule]]
    """Step id -> the rules of the scenario's checks its answer broke (steps of a set recorded
    before this was kept are absent: not judged)."""


@dataclass(frozen=True)
class GoldenSet:
    name: str
    manifest: dict[str, Any]
    units: dict[tuple[str, str], GoldenUnit]
    unsupported: dict[tuple[str, str], str] = field(default_factory=dict)
    """(scenario, mode) -> why the target could not run it, for the units it did not."""

    @property
    def scripted(self) -> bool:
        return bool(self.manifest.get("scripted", True))

    def reference(self, scenario: Scenario, mode: Mode, step: str) -> Reference:
        """The set's record of one step to hold an answer against (none: a note says so)."""
        unit = self.units.get((scenario.id, mode))
        live = scenario.live
        return Reference(unit.steps.get(step) if unit else None, f"golden {self.name}",
                         recorded=self.manifest.get("recorded_at", "at an unknown date"),
                         model_dependent=live.model_dependent if live and not self.scripted else ())


def record(directory: Path, name: str, results: Iterable[ScenarioResult], *, target_name: str, model: str,
           scripted: bool, recorded_at: datetime, redactor: Redactor,
           gateway: Mapping[str, Any] | None = None, command: str | None = None) -> Path:
    """Write the golden set `name` under `directory` (replacing an older one); returns its folder.
    Steps the harness could not run are left out; unsupported units are listed in the manifest
    with their reason. `gateway`: which gateway (and version) a profile started, if one did;
    `command`: the command line that records the set again."""
    folder = directory / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    count, unsupported = 0, []
    for result in results:
        if result.unsupported is not None:
            unsupported.append({"scenario": result.scenario.id, "mode": result.mode, "reason": result.unsupported})
            continue
        steps = [step for step in result.steps if step.exchange is not None and step.contract is not None]
        if not steps:
            continue
        document = {"scenario": result.scenario.id, "mode": result.mode, "steps": [
            {"step": step.step_id, "contract": step.contract.to_dict() if step.contract else None,
             "diverges": sorted({finding.rule for finding in step.findings if finding.fails}),
             "exchange": step.exchange.to_file() if step.exchange else None} for step in steps]}
        path = folder / result.scenario.id / f"{result.mode}.json"
        path.parent.mkdir(exist_ok=True)
        redactor.write_json(path, document)
        count += 1
    manifest = {"name": name, "target": target_name, "gateway": dict(gateway) if gateway is not None else None,
                "model": model, "scripted": scripted, "recorded_at": recorded_at.isoformat(timespec="seconds"),
                "scenario_format": FORMAT_VERSION, "units": count, "unsupported": unsupported,
                "versions": versions(), "command": command}
    redactor.write_json(folder / MANIFEST, manifest)
    return folder


def _read(path: Path) -> Any:
    try:
        return read_json(path)
    except (OSError, ValueError) as error:
        raise HarnessError(f"{path}: not a readable golden file ({error})") from error


def load(folder: Path) -> GoldenSet:
    """Read a golden set; raises `HarnessError` naming the file that is missing or broken."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise HarnessError(f"{folder} is not a golden set (no {MANIFEST}; record one with `parity record`)")
    manifest = _read(manifest_path)
    units: dict[tuple[str, str], GoldenUnit] = {}
    for path in sorted(folder.glob("*/*.json")):
        data = _read(path)
        try:
            unit = GoldenUnit(data["scenario"], data["mode"],
                              {s["step"]: Exchange.from_file(s["exchange"]) for s in data["steps"]},
                              {s["step"]: _rules(s["diverges"]) for s in data["steps"] if "diverges" in s})
        except (KeyError, TypeError, AttributeError) as error:
            raise HarnessError(f"{path}: not a golden unit (needs scenario, mode and steps[].step/exchange, "
                               "steps[].diverges a list of rules if present; "
                               f"{type(error).__name__}: {error})") from error
        units[(unit.scenario, unit.mode)] = unit
    try:
        unsupported = {(unit["scenario"], unit["mode"]): unit["reason"] for unit in manifest.get("unsupported", [])}
    except (KeyError, TypeError, AttributeError) as error:
        raise HarnessError(f"{manifest_path}: unsupported must list {{scenario, mode, reason}} objects "
                           f"({type(error).__name__}: {error})") from error
    return GoldenSet(folder.name, manifest, units, unsupported)


def _rules(value: Any) -> frozenset[Rule]:
    if not isinstance(value, list) or not all(isinstance(rule, str) for rule in value):
        raise TypeError(f"diverges is {value!r}, not a list of rule names")
    return frozenset(map(Rule.named, value))


def search_path(golden_dir: Path | None = None) -> list[Path]:
    """Where `golden:<name>` is looked up: the given folder (default ./fixtures/goldens), then
    the goldens shipped with the project."""
    return [golden_dir or DEFAULT_GOLDEN_DIR, Path(__file__).resolve().parents[2] / "fixtures" / "goldens"]


def resolve(spec: str, golden_dirs: Iterable[Path]) -> Path:
    """The folder of `golden:<name>`, looked up in each directory in turn."""
    kind, _, name = spec.partition(":")
    if kind != "golden" or not name:
        raise HarnessError(f"--against {spec!r}: write golden:<name>, e.g. golden:openai")
    searched = [directory / name for directory in golden_dirs]
    for folder in searched:
        if (folder / MANIFEST).is_file():
            return folder
    record = "parity record --target openai" if name == "openai" else f"parity record --target TARGET --name {name}"
    elsewhere = f" --golden-dir {searched[0].parent}" if searched and searched[0].parent != DEFAULT_GOLDEN_DIR else ""
    raise HarnessError(f"no golden set {name!r} in {', '.join(str(f.parent) for f in searched)}; "
                       f"record one with `{record}{elsewhere}`")
