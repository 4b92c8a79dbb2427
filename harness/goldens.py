"""Goldens: what one target did, saved so any other target can be compared with it offline.

A golden set is a folder `<golden-dir>/<name>/`: `manifest.json` (target, date, model, SDK
versions, whether the model was scripted) and one file per scenario and stream mode,
`<scenario>/<mode>.json`, holding each step's exchange (in the exchange file format) and its
contract. Everything is redacted before it is written.

Comparing with a golden is done at the contract level (`compare_contracts`): status class,
error envelope, Response status, output items, interrupt boundary, event sequence, chat
completion shape. Parts a live model decides (the scenario's `live.model_dependent`) differ
as notes when the golden comes from a live model.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .compare import list_diff
from .findings import Finding, HarnessError, Kind, Severity
from .redaction import redact
from .report import versions
from .runner import ScenarioResult
from .scenario import FORMAT_VERSION, Mode

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class GoldenUnit:
    scenario: str
    mode: Mode
    steps: dict[str, dict[str, Any]]
    """Step id -> its contract (as `Contract.to_dict`)."""


@dataclass(frozen=True)
class GoldenSet:
    name: str
    manifest: dict[str, Any]
    units: dict[tuple[str, str], GoldenUnit]

    @property
    def scripted(self) -> bool:
        return bool(self.manifest.get("scripted", True))


def record(directory: Path, name: str, results: Iterable[ScenarioResult], *, target_name: str, model: str,
           scripted: bool, recorded_at: datetime) -> Path:
    """Write the golden set `name` under `directory` (replacing an older one); returns its folder.
    Steps the harness could not run are left out; unsupported units are not written."""
    folder = directory / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    count = 0
    for result in results:
        steps = [step for step in result.steps if step.exchange is not None and step.contract is not None]
        if result.unsupported is not None or not steps:
            continue
        document = {"scenario": result.scenario.id, "mode": result.mode, "steps": [
            {"step": step.step_id, "contract": step.contract.to_dict() if step.contract else None,
             "exchange": step.exchange.to_file() if step.exchange else None} for step in steps]}
        path = folder / result.scenario.id / f"{result.mode}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(redact(document), indent=2) + "\n")
        count += 1
    manifest = {"name": name, "target": target_name, "model": model, "scripted": scripted,
                "recorded_at": recorded_at.isoformat(timespec="seconds"), "scenario_format": FORMAT_VERSION,
                "units": count, "versions": versions()}
    (folder / MANIFEST).write_text(json.dumps(redact(manifest), indent=2) + "\n")
    return folder


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
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
            unit = GoldenUnit(data["scenario"], data["mode"], {s["step"]: s["contract"] for s in data["steps"]})
        except (KeyError, TypeError) as error:
            raise HarnessError(f"{path}: not a golden unit (needs scenario, mode and steps[].step/contract; "
                               f"{type(error).__name__}: {error})") from error
        units[(unit.scenario, unit.mode)] = unit
    return GoldenSet(folder.name, manifest, units)


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


def _status_class(status: int | None) -> str:
    return f"{status // 100}xx" if isinstance(status, int) else "none"


def _items(contract: dict[str, Any]) -> list[str]:
    return [_item_label(item) for item in contract.get("output") or []]


def _item_label(item: dict[str, Any]) -> str:
    details = [str(item[k]) for k in ("name", "status", "error_type") if item.get(k)]
    return f"{item['type']}({', '.join(details)})" if details else item["type"]


@dataclass
class _Differences:
    label: str
    model_dependent: frozenset[str]
    found: list[Finding]

    def add(self, kind: Kind, severity: Severity, field: str, message: str, values: tuple[Any, Any]) -> None:
        """One difference; `values` are the golden's and the actual one."""
        expected, actual = values
        if field.split(".", maxsplit=1)[0] in self.model_dependent:
            severity, message = Severity.NOTE, message + " (model-dependent)"
        self.found.append(Finding(kind, severity, f"golden.{field}", f"{message}; {self.label} has "
                                  f"{_shown(expected)}", expected=expected, actual=actual))


def compare_contracts(golden: dict[str, Any], actual: dict[str, Any], label: str,
                      model_dependent: frozenset[str] = frozenset()) -> list[Finding]:
    """How `actual` differs from the `golden` contract (both as `Contract.to_dict`). Fields in
    `model_dependent` (`output`, `interrupt`, `events`, `chat`, `usage`, `status`) differ as notes."""
    diff = _Differences(label, model_dependent, [])
    want, got = golden.get("http_status"), actual.get("http_status")
    if want != got:
        same_class = _status_class(want) == _status_class(got)
        diff.add(Kind.STATUS, Severity.WARNING if same_class else Severity.ERROR, "http_status",
                 f"HTTP status {got}", (want, got))
    want_error, got_error = golden.get("error"), actual.get("error")
    if (want_error is None) != (got_error is None):
        diff.add(Kind.ERROR_ENVELOPE, Severity.ERROR, "error", "an error envelope is " +
                 ("missing" if got_error is None else "present"), (want_error is not None, got_error is not None))
    elif want_error and got_error:
        for name, severity in (("type", Severity.ERROR), ("code", Severity.ERROR), ("param", Severity.WARNING)):
            if want_error.get(name) != got_error.get(name):
                diff.add(Kind.ERROR_ENVELOPE, severity, f"error.{name}", f"error.{name} is {got_error.get(name)!r}",
                         (want_error.get(name), got_error.get(name)))
    for name in ("status", "incomplete_reason"):
        if golden.get(name) != actual.get(name):
            diff.add(Kind.STATUS, Severity.ERROR, name, f"{name} is {actual.get(name)!r}",
                     (golden.get(name), actual.get(name)))
    if golden.get("has_usage") != actual.get("has_usage"):
        diff.add(Kind.RESPONSE_FIELD, Severity.WARNING, "usage", "usage is " +
                 ("present" if actual.get("has_usage") else "absent"),
                 (golden.get("has_usage"), actual.get("has_usage")))
    want_items, got_items = _items(golden), _items(actual)
    if want_items != got_items:
        diff.add(Kind.ITEMS, Severity.ERROR, "output", f"output items differ: {list_diff(want_items, got_items)}",
                 (want_items, got_items))
    if golden.get("interrupt") != actual.get("interrupt"):
        diff.add(Kind.INTERRUPT, Severity.ERROR, "interrupt", f"the response stops on {actual.get('interrupt')}",
                 (golden.get("interrupt"), actual.get("interrupt")))
    _compare_streams(golden.get("stream"), actual.get("stream"), diff)
    want_chat, got_chat = golden.get("chat") or {}, actual.get("chat") or {}
    for name in ("finish_reason", "role", "tool_calls", "chunks"):
        if want_chat.get(name) != got_chat.get(name):
            diff.add(Kind.EVENT_SEQUENCE if name == "chunks" else Kind.RESPONSE_FIELD, Severity.ERROR,
                     f"chat.{name}", f"the completion's {name} is {got_chat.get(name)!r}",
                     (want_chat.get(name), got_chat.get(name)))
    return diff.found


def _compare_streams(golden: dict[str, Any] | None, actual: dict[str, Any] | None, diff: _Differences) -> None:
    if golden is None or actual is None:
        if (golden is None) != (actual is None):
            diff.add(Kind.EVENT_SEQUENCE, Severity.ERROR, "events", "the answer " +
                     ("streams" if actual is not None else "does not stream"), (golden is not None, actual is not None))
        return
    want, got = list(golden.get("events") or []), list(actual.get("events") or [])
    if want != got:
        diff.add(Kind.EVENT_SEQUENCE, Severity.ERROR, "events", f"event sequence differs: {list_diff(want, got)}",
                 (want, got))
    if golden.get("done_sentinel") != actual.get("done_sentinel"):
        diff.add(Kind.EVENT_SEQUENCE, Severity.WARNING, "events.done_sentinel", "the stream " +
                 ("ends with" if actual.get("done_sentinel") else "lacks") + " data: [DONE]",
                 (golden.get("done_sentinel"), actual.get("done_sentinel")))


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 120 else text[:117] + "..."


def compare_with_golden(results: Iterable[ScenarioResult], golden: GoldenSet) -> None:
    """Add to each step's findings how it differs from the golden set (in place). A unit or
    step the golden set lacks is a note: there is nothing to compare it with."""
    label = f"golden {golden.name}"
    for result in results:
        if result.unsupported is not None:
            continue
        unit = golden.units.get((result.scenario.id, result.mode))
        live = result.scenario.live
        model_dependent = frozenset(live.model_dependent) if live and not golden.scripted else frozenset()
        for step in result.steps:
            if step.contract is None:
                continue
            wanted = unit.steps.get(step.step_id) if unit else None
            if wanted is None:
                step.findings.append(Finding(Kind.VARIANT, Severity.NOTE, "golden.missing",
                                             f"{label} has no record of this step"))
                continue
            step.findings += compare_contracts(wanted, step.contract.to_dict(), label, model_dependent)
            if wanted.get("stream") is not None:
                step.reference_events, step.reference_label = tuple(wanted["stream"]["events"]), label


@dataclass(frozen=True)
class GoldenChange:
    scenario: str
    mode: str
    step: str | None
    finding: Finding


def diff_sets(old: GoldenSet, new: GoldenSet) -> list[GoldenChange]:
    """What changed from one golden set to another (OpenAI drifts): units and steps that
    appeared or went away, and every contract-level difference, as `new` compared with `old`."""
    changes = []
    for key in sorted(set(old.units) | set(new.units)):
        before, after = old.units.get(key), new.units.get(key)
        if before is None or after is None:
            where = new.name if before is None else old.name
            changes.append(GoldenChange(*key, None, Finding(Kind.VARIANT, Severity.WARNING, "golden.unit",
                                                            f"only {where} has this scenario run")))
            continue
        for step in [*before.steps, *(s for s in after.steps if s not in before.steps)]:
            if step not in before.steps or step not in after.steps:
                changes.append(GoldenChange(*key, step, Finding(Kind.VARIANT, Severity.WARNING, "golden.step",
                                                                f"only {new.name if step in after.steps else old.name}"
                                                                " has this step")))
                continue
            changes += [GoldenChange(*key, step, finding) for finding in
                        compare_contracts(before.steps[step], after.steps[step], f"golden {old.name}")]
    return changes
