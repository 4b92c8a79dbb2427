"""Known divergences of one target, so CI fails only on new or worse ones.

A baseline file lists, per finding at warning level or above, where it was found (scenario,
stream mode, step), what differs (kind and rule) and its severity. A finding of a later run
is *known* when the baseline holds its key with the same or a higher severity; known findings
stay in the report but no longer fail the run. Messages are not part of the key: they carry
ids that change from run to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...openai_contract.documents import read_json
from ..errors import HarnessError
from ..model.findings import Finding, Severity
from ..scenario.model import Mode
from ..wire.redaction import Redactor

BASELINE_FORMAT = 1
Key = tuple[str, str, str, str, str]
"""(scenario, mode, step, kind, rule)."""


def build(document: dict[str, Any]) -> dict[str, Any]:
    """The baseline of a run, from its `results.json` document: each divergence at warning
    level or above (known ones included, so an update keeps them), worst first."""
    worst: dict[Key, tuple[Severity, str]] = {}
    for result in document.get("results", []):
        for step in result.get("steps", []):
            for finding in step.get("findings", []):
                severity = Severity.named(finding["severity"])
                if severity < Severity.WARNING:
                    continue
                key = (result["scenario"], result["mode"], step["step"], finding["kind"], finding["rule"])
                if key not in worst or worst[key][0] < severity:
                    worst[key] = (severity, finding["message"])
    entries = [{"scenario": k[0], "mode": k[1], "step": k[2], "kind": k[3], "rule": k[4],
                "severity": str(severity), "example": message}
               for k, (severity, message) in sorted(worst.items(), key=lambda kv: (-kv[1][0], kv[0]))]
    return {"format": BASELINE_FORMAT, "target": document.get("target", {}).get("name"), "divergences": entries}


def write(path: Path, document: dict[str, Any]) -> None:
    """Write a baseline. It is built from a report whose secrets are already removed; what looks
    like one is removed again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Redactor().write_json(path, document)


def load(path: Path) -> Baseline:
    """The baseline in `path`; raises `HarnessError` naming the file and entry that is broken."""
    try:
        document = read_json(path)
    except (OSError, ValueError) as error:
        raise HarnessError(f"baseline {path}: cannot read it ({error})") from error
    known: dict[Key, Severity] = {}
    for index, entry in enumerate(document.get("divergences", []) if isinstance(document, dict) else [None]):
        try:
            key = (entry["scenario"], entry["mode"], entry["step"], entry["kind"], entry["rule"])
            known[key] = Severity.named(entry["severity"])
        except (KeyError, TypeError, AttributeError) as error:
            raise HarnessError(f"baseline {path}: divergences[{index}] needs scenario, mode, step, kind, rule and "
                               f"severity (note, warning or error): {error!r}") from error
    return Baseline(known)


@dataclass(frozen=True)
class Baseline:
    """The divergences a baseline knows, each at the severity it accepted."""

    known: dict[Key, Severity]

    def knows(self, scenario: str, mode: Mode, step: str, finding: Finding) -> bool:
        """Whether `finding` of that step is known: the baseline has it at its severity or worse."""
        accepted = self.known.get((scenario, mode, step, str(finding.kind), finding.rule))
        return accepted is not None and Severity.WARNING <= finding.severity <= accepted
