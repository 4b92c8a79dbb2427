"""`parity golden diff` as a changelog between golden sets recorded from real targets: the
reference gateway, the same gateway behind a middleware that breaks parts of its contract, and
the reference gateway started from a versioned profile that lacks chat completions. Every kind
of change is reported where it happened and classified against the scenarios' contract."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from faulty_gateways import TEXT_SCENARIO, RewritingGateway, message_as_wrong_type_body, without_message_done

from responses_parity.harness.cli import main
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.model.findings import Kind
from responses_parity.reference_impl import build_gateway_app

OUTPUT_ITEMS, SCHEMAS, RESPONSE_FIELDS = Kind.ITEMS.aspect, Kind.SCHEMA.aspect, Kind.RESPONSE_FIELD.aspect
STREAM_EVENTS, ERROR_ENVELOPES = Kind.EVENT_SEQUENCE.aspect, Kind.ERROR_ENVELOPE.aspect
"""A changelog names aspects as every report does: by the kind of finding a change is of."""
TEST_PROFILES = Path(__file__).parent / "profiles"

SCENARIOS = {
    "faulty-text.yaml": TEXT_SCENARIO,
    "cl-error.yaml": """
        id: cl-error
        title: a request without a model, stating the error's type but not its code
        evidence: {recordings: [stream-text__openllmetry__1]}
        steps:
          - id: ask
            request: {input: "Hello?"}
            expect:
              http_status: 400
              error: {type: invalid_request_error}
        """,
    "cl-chat.yaml": """
        id: cl-chat
        title: a chat completion
        surface: chat
        modes: [nonstream]
        evidence: {recordings: [stream-text__openllmetry__1]}
        steps:
          - id: ask
            request: {model: "{{model}}", messages: [{role: user, content: "Say hello."}]}
            model: [{text: "Hello there."}]
            expect: {http_status: 200, chat: {finish_reason: stop}}
        """,
}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def without_usage(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message_as_wrong_type_body(body).items() if key != "usage"}


def with_another_code(error: dict[str, Any]) -> dict[str, Any]:
    return error | {"error": error["error"] | {"code": "model_is_missing"}}


@pytest.fixture(scope="module")
def recorded(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Three golden sets of the same scenarios: `good` (the reference gateway), `faulty` (items
    retyped and usage dropped in JSON answers, the message never closed in streams, another
    error code) and the versioned profile's (no chat completions)."""
    root = tmp_path_factory.mktemp("changelog")
    scenarios = root / "scenarios"
    scenarios.mkdir()
    for name, text in SCENARIOS.items():
        (scenarios / name).write_text(yaml.safe_dump(yaml.safe_load(text)))
    profile = yaml.safe_load((TEST_PROFILES / "reference-process.yaml").read_text())
    profile |= {"name": "versioned", "version": "2.0", "title": "reference gateway {{ version }}",
                "lacks": {"chat_completions": "this test profile says so, to show a unit becoming unsupported"}}
    (root / "versioned.yaml").write_text(yaml.safe_dump(profile))
    app = build_gateway_app(reference_config(stack.upstream_url or ""))
    faulty = ServerThread(RewritingGateway(app, events=without_message_done, body=without_usage,
                                           errors=with_another_code)).start()
    golden_dir = root / "goldens"
    try:
        for name, target, fails in (("good", stack.reference_url or "", False), ("faulty", faulty.url, True)):
            code, output = invoke("record", str(scenarios), "--target", target, "--upstream", stack.upstream_url or "",
                                  "--name", name, "--golden-dir", str(golden_dir), "--report-dir", str(root / name))
            assert code == (1 if fails else 0), output
        code, output = invoke("record", str(scenarios), "--target", f"{root / 'versioned.yaml'}@2.1",
                              "--golden-dir", str(golden_dir), "--report-dir", str(root / "versioned"))
        assert code == 0, output
    finally:
        faulty.stop()
    yield {"good": golden_dir / "good", "faulty": golden_dir / "faulty", "versioned": golden_dir / "versioned-2.1",
           "root": root}


def diff(old: Path, new: Path, *extra: str) -> tuple[int, str]:
    return invoke("golden", "diff", str(old), str(new), *extra)


def changes(old: Path, new: Path) -> set[tuple[str, str, str | None, str, str]]:
    code, output = diff(old, new, "--json")
    document = json.loads(output)
    assert code == (1 if document["changes"] else 0)
    return {(c["scenario"], c["mode"], c["step"], c["aspect"], c["verdict"]) for c in document["changes"]}


def test_a_set_diffed_with_itself_has_no_change(recorded: dict[str, Path]) -> None:
    code, output = diff(recorded["good"], recorded["good"])
    assert code == 0 and "0 change(s) from good" in output and "0 fixed, 0 broke, 0 changed" in output


def test_what_a_faulty_version_breaks_and_changes_is_classified(recorded: dict[str, Path]) -> None:
    assert changes(recorded["good"], recorded["faulty"]) == {
        ("faulty-text", "nonstream", "ask", OUTPUT_ITEMS, "broke"),     # the scenario states the items
        ("faulty-text", "nonstream", "ask", SCHEMAS, "broke"),          # no such item type in the SDK's schema
        ("faulty-text", "nonstream", "ask", RESPONSE_FIELDS, "changed"),  # ... and not usage
        ("faulty-text", "stream", "ask", STREAM_EVENTS, "broke"),       # the stream grammar is broken
        ("cl-error", "nonstream", "ask", ERROR_ENVELOPES, "changed"),   # the scenario states no code
        ("cl-error", "stream", "ask", ERROR_ENVELOPES, "changed"),
    }


def test_the_upgrade_back_fixes_what_broke(recorded: dict[str, Path]) -> None:
    assert changes(recorded["faulty"], recorded["good"]) == {
        ("faulty-text", "nonstream", "ask", OUTPUT_ITEMS, "fixed"),
        ("faulty-text", "nonstream", "ask", SCHEMAS, "fixed"),
        ("faulty-text", "nonstream", "ask", RESPONSE_FIELDS, "changed"),
        ("faulty-text", "stream", "ask", STREAM_EVENTS, "fixed"),
        ("cl-error", "nonstream", "ask", ERROR_ENVELOPES, "changed"),
        ("cl-error", "stream", "ask", ERROR_ENVELOPES, "changed"),
    }


def test_a_unit_that_became_unsupported_broke_and_one_that_runs_again_is_fixed(recorded: dict[str, Path]) -> None:
    assert changes(recorded["good"], recorded["versioned"]) == {("cl-chat", "nonstream", None, "units run", "broke")}
    assert changes(recorded["versioned"], recorded["good"]) == {("cl-chat", "nonstream", None, "units run", "fixed")}
    _, output = diff(recorded["good"], recorded["versioned"])
    assert "broke: cl-chat [nonstream]: units run: ran, now unsupported: the scenario" in output


def test_the_changes_say_what_was_added_and_removed_and_which_check_fails(recorded: dict[str, Path]) -> None:
    _, output = diff(recorded["good"], recorded["faulty"], "--json")
    messages = {(c["scenario"], c["mode"], c["aspect"]): c["message"] for c in json.loads(output)["changes"]}
    assert messages[("cl-error", "stream", ERROR_ENVELOPES)] == "error.code: 'missing_required_parameter' → " \
                                                                 "'model_is_missing'"
    assert re.fullmatch(r"the scenario's check schema\.\w+ fails now", messages[("faulty-text", "nonstream", SCHEMAS)])
    assert messages[("faulty-text", "stream", STREAM_EVENTS)].startswith("removed: response.output_item.done (")
    assert messages[("faulty-text", "nonstream", OUTPUT_ITEMS)].startswith(
        "added: output_message(completed); removed: message(completed) (")


def test_the_markdown_changelog_heads_with_both_sets_and_sums_up_each_verdict(recorded: dict[str, Path]) -> None:
    output = recorded["root"] / "changelog.md"
    code, printed = diff(recorded["good"], recorded["faulty"], "--output", str(output))
    assert code == 1 and f"changelog: {output}" in printed
    text = output.read_text()
    assert text.startswith("# Contract changelog: good → faulty\n")
    regenerate = text.split("```sh\n")[1].split("```")[0].splitlines()
    recording = f"parity record {recorded['root']}/scenarios"
    assert [line.split(" --target")[0] for line in regenerate[:2]] == [recording, recording]
    assert regenerate[2] == f"parity golden diff {recorded['good']} {recorded['faulty']} --output {output}"
    assert "--name faulty --golden-dir" in regenerate[1]
    assert "| target | " + (json.loads((recorded["good"] / "manifest.json").read_text())["target"]) in text
    for line in ("- **fixed** (now matches OpenAI's contract): 0",
                 "- **broke** (now diverges from OpenAI's contract): 3",
                 "- **changed** (neither closer to nor further from OpenAI's contract): 3",
                 f"| {OUTPUT_ITEMS} | 0 | 1 | 0 |", f"| {RESPONSE_FIELDS} | 0 | 0 | 1 |",
                 f"| {ERROR_ENVELOPES} | 0 | 0 | 2 |"):
        assert line in text
    text_section = text.split("### faulty-text\n")[1].split("###")[0]
    assert (f"- [nonstream] step `ask`\n  - **changed** · {RESPONSE_FIELDS}: usage: present → absent\n"
            f"  - **broke** · {OUTPUT_ITEMS}: added: output_message") in text_section
    assert f"- [stream] step `ask`\n  - **broke** · {STREAM_EVENTS}: removed: response.output_item.done" in text_section


def test_a_profiled_set_names_the_gateway_and_version_and_keeps_no_secret(recorded: dict[str, Path]) -> None:
    manifest = json.loads((recorded["versioned"] / "manifest.json").read_text())
    assert manifest["target"] == "versioned"
    assert manifest["gateway"] == {"profile": "versioned", "title": "reference gateway 2.1", "version": "2.1",
                                   "packages": []}
    assert manifest["unsupported"] == [{"scenario": "cl-chat", "mode": "nonstream", "reason": manifest[
        "unsupported"][0]["reason"]}] and "lacks that" in manifest["unsupported"][0]["reason"]
    diff(recorded["good"], recorded["versioned"], "--output", str(recorded["root"] / "v.md"))
    assert "| version | — | 2.1 |" in (recorded["root"] / "v.md").read_text()


def test_a_profile_header_the_gateway_echoes_never_reaches_the_set(tmp_path: Path) -> None:
    code, output = invoke("record", "-s", "text-basic", "--target", str(TEST_PROFILES / "echoes-its-headers.yaml"),
                          "--golden-dir", str(tmp_path), "--report-dir", str(tmp_path / "report"))
    assert code == 1, output  # it refuses every request, quoting the header
    written = "".join(path.read_text() for path in (tmp_path / "echoes-its-headers").rglob("*.json"))
    assert "tenant <redacted> is unknown" in written and "tenant-secret-4242" not in written


def test_a_broken_golden_set_is_named(tmp_path: Path, recorded: dict[str, Path]) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text(json.dumps({"unsupported": [{"scenario": "x"}]}))
    code, output = diff(recorded["good"], broken)
    assert code == 2 and "manifest.json: unsupported must list {scenario, mode, reason} objects" in output
    unit = tmp_path / "broken" / "faulty-text" / "stream.json"
    unit.parent.mkdir()
    unit.write_text(json.dumps({"scenario": "faulty-text", "mode": "stream", "steps": [
        {"step": "ask", "diverges": "expect.output", "exchange": {"method": "POST", "url": "u"}}]}))
    code, output = diff(recorded["good"], broken)
    assert code == 2 and "stream.json: not a golden unit" in output and "not a list of rule names" in output
