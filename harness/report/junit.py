"""A run as JUnit XML, shaped as pytest writes it (`parity run --junitxml`), and what each
scenario run's test case says: the same text and properties in pytest's own JUnit XML of the
plugin's tests, so CI shows a run alike whichever way it ran.

One `testsuite` in a `testsuites` root; one `testcase` per scenario and stream mode
(`classname` the scenario file's path with dots, `name` `<id>[<mode>]`, `time` in seconds),
holding its properties (outcome, whether it counts toward parity, known divergences) and: a
`failure` for a divergence, an `error` for a run that could not run, a `skipped` for one the
target does not support, with the reason. Written with the standard library's ElementTree, as
pytest writes its own: junitparser and junit-xml add nothing needed here, and neither replaces
the characters XML cannot hold (which a misbehaving gateway's answers may carry), which this
module does as pytest does."""

from __future__ import annotations

import platform
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from ..model.findings import Severity
from ..wire.redaction import Redactor
from .documents import Counted

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\u007e\u0080-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_PROPERTY = "parity_"


def _xml_text(text: str) -> str:
    """`text` with each character XML cannot hold written as `#xNN`, as pytest writes it."""
    return _NOT_XML.sub(lambda match: f"#x{ord(match.group()):02X}", text)


def describe(entry: dict[str, Any], target: str, redactor: Redactor) -> str:
    """What a scenario run that did not pass says (`entry` as a results document holds it,
    `documents.result_entry`): its outcome, then each step that could not run and each finding
    of warning severity or above, one line each, secrets removed."""
    lines = [f"scenario {entry['scenario']} [{entry['mode']}] on {target}: {entry['outcome'].replace('_', ' ')}"]
    for step in entry["steps"]:
        if step["error"]:
            lines.append(f"  {step['step']}: could not run: {step['error']}")
        lines += [f"  {'  caused by it: ' if f.get('consequence') else ''}{step['step']}: {f['severity']}"
                  f"{' (known)' if f['known'] else ''} {f['kind']} ({f['rule']}): {f['message']}"
                  for f in step["findings"] if Severity.named(f["severity"]) >= Severity.WARNING]
    return redactor.redact_text("\n".join(lines))


def properties(unit: Counted) -> list[tuple[str, str]]:
    """A test case's properties: what the tally takes of its scenario run."""
    return [(f"{_PROPERTY}outcome", unit.outcome),
            (f"{_PROPERTY}openai_counterpart", str(unit.openai_counterpart).lower()),
            (f"{_PROPERTY}known", str(unit.known))]


def counted(found: Iterable[tuple[str, object]]) -> Counted | None:
    """The tally's view of a test case from its `properties`, or None when it has none (a test
    that is not a scenario run)."""
    values = {name.removeprefix(_PROPERTY): str(value) for name, value in found if name.startswith(_PROPERTY)}
    if "outcome" not in values:
        return None
    return Counted(values["outcome"], values["openai_counterpart"] == "true", int(values["known"]))  # type: ignore[arg-type]


def _classname(path: str) -> str:
    """The scenario file as pytest names its module: relative to the current folder when it is
    inside it, with dots for slashes."""
    file = Path(path).resolve()
    relative = file.relative_to(Path.cwd()) if file.is_relative_to(Path.cwd()) else file
    return relative.as_posix().strip("/").replace("/", ".")


def _testcase(entry: dict[str, Any], target: str, redactor: Redactor) -> ET.Element:
    def text(value: str) -> str:
        return _xml_text(redactor.redact_text(value))

    case = ET.Element("testcase", classname=text(_classname(entry["path"])),
                      name=text(f"{entry['scenario']}[{entry['mode']}]"), time=f"{entry['duration_s']:.3f}")
    listed = ET.SubElement(case, "properties")
    for name, value in properties(Counted.of_entry(entry)):
        ET.SubElement(listed, "property", name=name, value=value)
    if entry["outcome"] == "unsupported":
        reason = f"unsupported by the target: {entry['unsupported']}"
        skipped = ET.SubElement(case, "skipped", type="unsupported", message=text(reason))
        skipped.text = text(f"{entry['path']}: {reason}")
    elif entry["outcome"] == "known":  # as pytest reports an expected failure
        described = describe(entry, target, redactor)
        ET.SubElement(case, "skipped", type="pytest.xfail", message=_xml_text(described.splitlines()[0])).text = \
            _xml_text(described)
    elif entry["outcome"] != "pass":
        described = describe(entry, target, redactor)
        ET.SubElement(case, "failure" if entry["outcome"] == "fail" else "error",
                      message=_xml_text(described.splitlines()[0])).text = _xml_text(described)
    return case


def junit_xml(document: dict[str, Any], redactor: Redactor, suite_name: str = "responses-parity") -> str:
    """A run's results document (`documents.results_document`) as one JUnit XML document.
    Secrets are removed from each text before it is put in the document (the marker that
    replaces them is escaped there like any text)."""
    cases = [_testcase(entry, document["target"]["name"], redactor) for entry in document["results"]]
    counts = {tag: sum(1 for case in cases if case.find(tag) is not None) for tag in ("error", "failure", "skipped")}
    started = datetime.fromisoformat(document["started_at"]).astimezone().isoformat()
    suite = ET.Element("testsuite", name=suite_name, errors=str(counts["error"]), failures=str(counts["failure"]),
                       skipped=str(counts["skipped"]), tests=str(len(cases)), time=f"{document['duration_s']:.3f}",
                       timestamp=started, hostname=_xml_text(platform.node()))
    suite.extend(cases)
    root = ET.Element("testsuites", name=suite_name)
    root.append(suite)
    return '<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root, encoding="unicode")


def write_junit(path: Path, document: dict[str, Any], redactor: Redactor) -> None:
    """Write `junit_xml` to `path`, making its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(document, redactor), encoding="utf-8")
