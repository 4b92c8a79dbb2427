"""The harness fails a gateway that gets the contract wrong, and says what differs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from faulty_gateways import (TEXT_SCENARIO, RewritingGateway, message_as_wrong_type_body, message_as_wrong_type_events,
                             numbered_from_one, without_message_done)

from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app


@pytest.fixture
def faulty(stack: Stack) -> Iterator[Any]:
    started: list[ServerThread] = []

    def start(**rewrites: Any) -> str:
        app = build_gateway_app(reference_config(stack.upstream_url or ""))
        server = ServerThread(RewritingGateway(app, **rewrites)).start()
        started.append(server)
        return server.url

    yield start
    for server in started:
        server.stop()


def messages(result: Any) -> list[str]:
    return [finding.message for _, finding in result.findings]


def test_a_missing_output_item_done_fails_the_stream(faulty: Any, run_scenario: Any) -> None:
    result = run_scenario(TEXT_SCENARIO, mode="stream", target_url=faulty(events=without_message_done))
    assert result.outcome == "fail"
    assert any("message at output_index 0 is added but never closed with response.output_item.done" in m
               for m in messages(result)), messages(result)


def test_wrongly_numbered_events_fail_the_stream(faulty: Any, run_scenario: Any) -> None:
    result = run_scenario(TEXT_SCENARIO, mode="stream", target_url=faulty(events=numbered_from_one))
    assert result.outcome == "fail"
    assert any("event 0 (response.created) has sequence_number 1, expected 0" in m for m in messages(result))


@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_a_wrong_item_type_fails_in_both_modes(faulty: Any, run_scenario: Any, mode: str) -> None:
    url = faulty(events=message_as_wrong_type_events, body=message_as_wrong_type_body)
    result = run_scenario(TEXT_SCENARIO, mode=mode, target_url=url)
    assert result.outcome == "fail"
    assert "output item types differ: output_message instead of message at 0" in messages(result)


def test_the_unmodified_gateway_passes(faulty: Any, run_scenario: Any) -> None:
    for mode in ("nonstream", "stream"):
        assert run_scenario(TEXT_SCENARIO, mode=mode, target_url=faulty()).outcome == "pass"
