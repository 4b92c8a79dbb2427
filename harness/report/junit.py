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
from pathlib import Path

from ..judge.results import ScenarioResult
from ..model.findings import Severity
from ..wire.redaction import Redactor
from .documents import Counted, RunInfo

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\u007e\u0080-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_PROPERTY = "parity_"


def _xml_text(text: str) -> str:
    """`text` with each character XML cannot hold written as `#xNN`, as pytest writes it."""
    return _NOT_XML.sub(lambda match: f"#x{ord(match.group()):02X}", text)


def describe(result: ScenarioResult, redactor: Redactor) -> str:
    """What a scenario run that did not pass says: its outcome, then each step that could not
    run and each finding of warning severity or above, one line each, secrets removed."""
    lines = [f"scenario {result.scenario.id} [{result.mode}] on {result.target}: {result.outcome.replace('_', ' ')}"]
    for step in result.steps:
        if step.error:
            lines.append(f"  {step.step_id}: could not run: {step.error}")
        lines += [f"  {'  caused by it: ' if f.consequence else ''}{step.step_id}: {f.severity}"
                  f"{' (known)' if f.known else ''} {f.kind} ({f.rule}): {f.message}"
                  for f in step.findings if f.severity >= Severity.WARNING]
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


def _testcase(result: ScenarioResult, redactor: Redactor) -> ET.Element:
    def text(value: str) -> str:
        return _xml_text(redactor.redact_text(value))

    case = ET.Element("testcase", classname=text(_classname(result.path)),
                      name=text(f"{result.scenario.id}[{result.mode}]"), time=f"{result.duration_s:.3f}")
    listed = ET.SubElement(case, "properties")
    for name, value in properties(Counted.of(result)):
        ET.SubElement(listed, "property", name=name, value=value)
    if result.outcome == "unsupported":
        reason = f"unsupported by the target: {result.unsupported}"
        ET.SubElement(case, "skipped", type="unsupported", message=text(reason)).text = text(f"{result.path}: {reason}")
    elif result.outcome == "known":  # as pytest reports an expected failure
        described = describe(result, redactor)
        ET.SubElement(case, "skipped", type="pytest.xfail", message=_xml_text(described.splitlines()[0])).text = \
            _xml_text(described)
    elif result.outcome != "pass":
        described = describe(result, redactor)
        ET.SubElement(case, "failure" if result.outcome == "fail" else "error",
                      message=_xml_text(described.splitlines()[0])).text = _xml_text(described)
    return case


def junit_xml(results: Iterable[ScenarioResult], info: RunInfo, suite_name: str = "responses-parity") -> str:
    """The run as one JUnit XML document. Secrets are removed from each text before it is put
    in the document (the marker that replaces them is escaped there like any text)."""
    cases = [_testcase(result, info.redactor) for result in results]
    counts = {tag: sum(1 for case in cases if case.find(tag) is not None) for tag in ("error", "failure", "skipped")}
    suite = ET.Element("testsuite", name=suite_name, errors=str(counts["error"]), failures=str(counts["failure"]),
                       skipped=str(counts["skipped"]), tests=str(len(cases)), time=f"{info.duration_s:.3f}",
                       timestamp=info.started_at.astimezone().isoformat(), hostname=_xml_text(platform.node()))
    suite.extend(cases)
    root = ET.Element("testsuites", name=suite_name)
    root.append(suite)
    return '<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root, encoding="unicode")


def write_junit(path: Path, results: Iterable[ScenarioResult], info: RunInfo) -> None:
    """Write `junit_xml` to `path`, making its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(results, info), encoding="utf-8")
