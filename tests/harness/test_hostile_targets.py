"""Every way a target can misbehave on the wire is a finding that says what was wrong, found
within the timeout and the capture limit: never a crash, a stuck run or a swollen one.
(`tests/benchmarks/hostile_targets.py` measures the time and memory each behaviour costs.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import write_scenario
from hostile_target import BEHAVIOURS, SCENARIO, HostileTarget

from responses_parity.harness.cli import main
from responses_parity.harness.engine.stack import Stack
from responses_parity.openai_contract.strict_json import MAX_DEPTH

LATE = "no complete answer within 2s"
TOO_LARGE = "the answer is larger than the capture limit of 4 MiB: the harness stopped reading it there"

EXPECTED: dict[str, tuple[str, str, str]] = {
    # behaviour: (mode, rule, the start of the finding's message)
    "hang": ("nonstream", "transport", LATE),
    "hang-after-headers": ("stream", "transport", LATE),
    "drip": ("stream", "transport", LATE),
    "endless": ("stream", "transport", TOO_LARGE),
    "huge-json": ("nonstream", "transport", TOO_LARGE),
    "huge-event": ("stream", "transport", TOO_LARGE),
    "gzip-bomb": ("nonstream", "transport", TOO_LARGE),
    "deep-json": ("nonstream", "wire.depth", f"the body nests deeper than {MAX_DEPTH} levels"),
    "deep-event": ("stream", "grammar.framing", f"event 1 nests deeper than {MAX_DEPTH} levels"),
    "invalid-utf8-json": ("nonstream", "wire.encoding", "the body is not UTF-8: byte 0xff at offset "),
    "invalid-utf8-stream": ("stream", "wire.encoding", "the stream is not UTF-8: byte 0xff at offset "),
    "nan": ("nonstream", "wire.number", "the body has the number NaN, which JSON does not allow"),
    "lone-surrogate": ("nonstream", "wire.encoding", "the body has a string with a lone UTF-16 surrogate, which is "
                                                     "not text"),
    "huge-integer": ("nonstream", "wire.number", "the body has an integer of more than 4,300 digits"),
    "overflowing-float": ("nonstream", "wire.number", "the body has the number 1e400, too large for a double"),
    "json-as-event-stream": ("stream", "wire.content_type", "the body is labelled text/event-stream but holds no "
                                                            "event; it begins '{\"id\": \"resp_1\""),
    "event-stream-as-json": ("nonstream", "wire.json", "the body is not JSON (Expecting value at line 1 column 1); "
                                                       "it begins 'event: response.created"),
    "json-without-content-type": ("nonstream", "wire.content_type", "the body is JSON, but it has no content-type"),
    "unended-event": ("stream", "wire.framing", "the stream ends inside an event: its last line is not followed by "
                                                "a blank line"),
    "html-error-page": ("nonstream", "schema.error_envelope", "body: an error answer without the "),
    "redirect-loop": ("nonstream", "expect.response_object", "the answer (HTTP 307) carries no Response object"),
    "reset": ("nonstream", "transport", "ReadError: [Errno 104] Connection reset by peer"),
    "close-silently": ("stream", "transport", "RemoteProtocolError: Server disconnected without sending a response"),
    "short-body": ("nonstream", "transport", "RemoteProtocolError: peer closed connection without sending complete "
                                             "message body"),
    "bad-chunking": ("nonstream", "transport", "RemoteProtocolError: illegal chunk header"),
    "not-http": ("nonstream", "transport", "RemoteProtocolError: Server disconnected without sending a response"),
    "huge-headers": ("nonstream", "transport", "RemoteProtocolError: Receive buffer too long"),
}
WIRE_ONLY = {"deep-json", "invalid-utf8-json", "nan", "lone-surrogate", "huge-integer", "overflowing-float",
             "json-as-event-stream", "event-stream-as-json", "json-without-content-type"}


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileTarget]:
    with HostileTarget() as server:
        yield server


def test_every_behaviour_has_an_expected_finding() -> None:
    assert set(EXPECTED) == set(BEHAVIOURS)


@pytest.mark.parametrize("behaviour", sorted(EXPECTED))
def test_a_misbehaving_target_is_a_finding_that_says_what_was_wrong(hostile: HostileTarget, run_scenario: Any,
                                                                    behaviour: str) -> None:
    mode, rule, message = EXPECTED[behaviour]
    # Only a target that never finishes meets the timeout; the others are judged long before it,
    # on a loaded machine too.
    timeout_s = 2 if message == LATE else 60
    result = run_scenario(SCENARIO, mode=mode, target_url=hostile.url(behaviour), timeout_s=timeout_s)
    assert [step.error for step in result.steps if step.error] == []
    assert result.outcome == "fail"
    findings = [finding for _, finding in result.findings]
    assert any(f.rule == rule and f.message.startswith(message) for f in findings), \
        [(f.rule, f.message) for f in findings]
    if behaviour in WIRE_ONLY:  # an answer that cannot be read is judged on nothing else
        assert [f.rule for f in findings] == [rule]


def test_a_saved_answer_cut_at_the_capture_limit_says_so(hostile: HostileTarget, stack: Stack, tmp_path: Path) -> None:
    write_scenario(tmp_path, SCENARIO)
    reports = tmp_path / "reports"
    result = CliRunner().invoke(main, ["run", str(tmp_path), "--target", hostile.url("huge-json"), "--upstream",
                                       stack.upstream_url or "", "--mode", "nonstream", "--max-answer-mb", "0.5",
                                       "--report-dir", str(reports)])
    assert result.exit_code == 1, result.output
    saved = json.loads((reports / "exchanges" / "hostile__nonstream__ask.json").read_text())
    assert saved["truncated_after_bytes"] == 2**19
    assert len(saved["response"]["body"].encode()) == 2**19
    assert saved["transport_error"].startswith("the answer is larger than the capture limit of 0.5 MiB")
