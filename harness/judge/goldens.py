"""Goldens: what one target did, saved so any other target can be compared with it offline.

A golden set is a folder `<golden-dir>/<name>/`: `manifest.json` (target, the gateway and its
version when a profile started it, date, model, SDK versions, whether the model was scripted,
the units the target could not run and why, the command that records it again) and one file
per scenario and stream mode, `<scenario>/<mode>.json`, holding each step's exchange (in the
exchange file format), for readers its contract, and the rules of the scenario's own checks it
broke (`diverges`: how it stood against OpenAI's contract when recorded). Everything is written
through the run's `Redactor`.

A golden step is compared as an expectation: its exchange is projected to a contract, which
states every field it holds (`expectation_of`), and the one comparer (`compare.compare`)
judges the other target's answer against it. Where two answers differ in a way most clients
survive (an HTTP status of the same class, `error.param`, whether `usage` is present) it is a
warning; parts a live model decides (the scenario's `live.model_dependent`) differ as notes
when the golden comes from a live model. `GoldenJudge` does this inside the engine.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ...openai_contract.documents import read_json
from ..model.results import StreamReference
from .compare import compare
from ..model.contract import Contract, project_answer, streamed_sequence
from ..defaults import DEFAULT_GOLDEN_DIR
from ..wire.exchange import Exchange
from ..errors import HarnessError
from ..model.findings import Finding, Kind, Severity
from ..wire.redaction import Redactor
from ..model.versions import versions
from ..model.results import ScenarioResult
from .judgement import model_dependent_as_notes
from ..scenario.model import FORMAT_VERSION, Expect, Mode

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class GoldenUnit:
    scenario: str
    mode: Mode
    steps: dict[str, Exchange]
    """Step id -> its exchange."""
    diverges: dict[str, frozenset[str]]
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


def _rules(value: Any) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(rule, str) for rule in value):
        raise TypeError(f"diverges is {value!r}, not a list of rule names")
    return frozenset(value)


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
    raise HarnessError(f"no golden set {name!r} in {', '.join(str(f.parent) for f in searched)}")


def expectation_of(contract: Contract) -> Expect:
    """What a recorded answer states, as an expectation: its HTTP status, error envelope,
    Response status, incomplete reason, usage, output items, interrupt, events and terminal
    event (streams), or its chat completion's shape."""
    data: dict[str, Any] = {"http_status": contract.http_status} if contract.http_status is not None else {}
    if contract.error is not None:
        data["error"] = {"type": contract.error.type, "code": contract.error.code, "param": contract.error.param}
    if contract.response_fields is not None and contract.chat is None:
        data |= {"status": contract.status, "incomplete_reason": contract.incomplete_reason,
                 "usage": contract.has_usage,
                 "output": [{k: v for k, v in vars(item).items() if v is not None} for item in contract.output],
                 "interrupt": {k: v for k, v in vars(contract.interrupt).items() if v is not None}}
    if contract.stream is not None:
        data["events"] = list(contract.stream.events)
        if contract.stream.terminal is not None:
            data["terminal"] = contract.stream.terminal
    if contract.chat is not None:
        chat = contract.chat
        data["chat"] = {"finish_reason": chat.finish_reason, "role": chat.role, "tool_calls": list(chat.tool_calls)}
        if contract.stream is not None or chat.chunks:
            data["chat"]["chunks"] = list(chat.chunks)
        data["usage"] = contract.has_usage
    return Expect.model_validate({k: v for k, v in data.items() if v is not None or k in ("incomplete_reason",)})


_SAME_CLASS_IS_A_WARNING = "golden.http_status"
_WARNINGS = frozenset({"golden.error.param", "golden.usage"})
"""Differences most clients survive."""


def compare_with(golden: Exchange, actual: Contract, exchange: Exchange, label: str,
                 model_dependent: Sequence[str] = ()) -> list[Finding]:
    """How an answer differs from a golden one, each finding named `golden.<field>`."""
    wanted = project_answer(golden)
    findings = model_dependent_as_notes(compare(expectation_of(wanted), actual, exchange), model_dependent)
    if (wanted.stream is None) != (actual.stream is None):
        findings.append(Finding(Kind.EVENT_SEQUENCE, Severity.ERROR, "expect.events", "the answer "
                                + ("streams" if actual.stream is not None else "does not stream"),
                                expected=wanted.stream is not None, actual=actual.stream is not None))
    judged = []
    for finding in findings:
        rule = "golden." + finding.rule.removeprefix("expect.")
        severity = finding.severity
        if severity > Severity.WARNING and (rule in _WARNINGS or (
                rule == _SAME_CLASS_IS_A_WARNING and _status_class(wanted.http_status) ==
                _status_class(actual.http_status))):
            severity = Severity.WARNING
        judged.append(replace(finding, rule=rule, severity=severity, message=f"{finding.message} ({label})"))
    return judged


def _status_class(status: int | None) -> str:
    return f"{status // 100}xx" if isinstance(status, int) else "none"


@dataclass(frozen=True)
class GoldenJudge:
    """Adds to each step how its contract differs from the golden set's (in place). A unit or
    step the golden set lacks is a note: there is nothing to compare it with."""

    golden: GoldenSet

    def __call__(self, result: ScenarioResult) -> None:
        if result.unsupported is not None:
            return
        label = f"golden {self.golden.name}"
        unit = self.golden.units.get((result.scenario.id, result.mode))
        live = result.scenario.live
        model_dependent = live.model_dependent if live and not self.golden.scripted else []
        for step in result.steps:
            if step.contract is None or step.exchange is None:
                continue
            golden = unit.steps.get(step.step_id) if unit else None
            if golden is None:
                step.findings.append(Finding(Kind.VARIANT, Severity.NOTE, "golden.missing",
                                             f"{label} has no record of this step"))
                continue
            step.findings += compare_with(golden, step.contract, step.exchange, label, model_dependent)
            step.findings += self._fields_it_lacks(golden, step.exchange, label)
            if step.exchange.streamed and (sequence := streamed_sequence(project_answer(golden))) is not None:
                step.reference = StreamReference(sequence, label)


    def _fields_it_lacks(self, golden: Exchange, actual: Exchange, label: str) -> list[Finding]:
        """A warning naming the fields the golden Response has and the answer's lacks: what the
        golden's target sent when it was recorded, a client may rely on."""
        wanted, got = golden.response_object(), actual.response_object()
        if wanted is None or got is None or not (missing := missing_fields(wanted, got)):
            return []
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        return [Finding(Kind.RESPONSE_FIELD, Severity.WARNING, "golden.fields",
                        f"the Response lacks {shown}, which {label} (recorded "
                        f"{self.golden.manifest.get('recorded_at', 'at an unknown date')}) has",
                        expected=missing, actual=None, key=f"the Response lacks fields {label} has")]


def missing_fields(golden: Any, actual: Any, path: str = "") -> list[str]:
    """The fields (dotted paths) `golden` has and `actual` lacks: the keys of objects, in depth;
    in lists, items paired by place where both are objects of the same `type`."""
    if isinstance(golden, dict) and isinstance(actual, dict):
        return [found for key, value in golden.items()
                for found in ([f"{path}.{key}" if path else key] if key not in actual
                              else missing_fields(value, actual[key], f"{path}.{key}" if path else key))]
    if isinstance(golden, list) and isinstance(actual, list):
        return [found for index, (want, got) in enumerate(zip(golden, actual, strict=False))
                if isinstance(want, dict) and isinstance(got, dict) and want.get("type") == got.get("type")
                for found in missing_fields(want, got, f"{path}[{index}]")]
    return []
