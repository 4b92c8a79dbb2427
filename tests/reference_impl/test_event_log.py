"""Save, then publish: readers of an event log never see a response's end before the run has
stored it, and a background log publishes only what was stored."""

from __future__ import annotations

import asyncio
from typing import Any

from responses_parity.reference_impl.event_log import EventLog


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


async def test_the_terminal_event_reaches_a_follower_only_when_the_log_closes() -> None:
    log = EventLog()
    followed: list[dict[str, Any]] = []

    async def follow() -> None:
        async for event in log.follow():
            followed.append(event)

    follower = asyncio.create_task(follow())
    log.append("response.created", {})
    log.append("response.output_text.delta", {"delta": "hi"})
    log.append("response.completed", {})
    for _ in range(5):
        await asyncio.sleep(0)  # let the follower take everything it may
    assert types(followed) == ["response.created", "response.output_text.delta"]
    assert types(log.events) == types(followed)
    log.close()
    await follower
    assert types(followed)[-1] == "response.completed"
    assert [event["sequence_number"] for event in followed] == [0, 1, 2]


def test_an_error_event_is_held_with_the_failure_after_it() -> None:
    log = EventLog()
    for event_type in ("response.created", "error", "response.failed"):
        log.append(event_type, {})
    assert types(log.events) == ["response.created"]
    log.close()
    assert types(log.events) == ["response.created", "error", "response.failed"]


def test_a_log_closed_without_its_end_stored_never_shows_it() -> None:
    log = EventLog()
    log.append("response.created", {})
    log.append("response.incomplete", {})
    log.close(publish=False)
    assert types(log.events) == ["response.created"]


async def test_a_background_log_shows_only_what_its_keeper_stored_and_never_the_ending() -> None:
    log = EventLog(publish_at_once=False)
    for event_type in ("response.created", "response.queued", "response.in_progress"):
        log.append(event_type, {})
    assert log.events == []
    assert types(await log.publishable(0)) == ["response.created", "response.queued", "response.in_progress"]
    log.publish(2)
    assert types(log.events) == ["response.created", "response.queued"]
    log.append("response.completed", {})
    assert types(await log.publishable(2)) == ["response.in_progress"]
    assert await log.publishable(3) == []
    log.publish(4)
    assert len(log.events) == 3
    log.close()
    assert types(log.events)[-1] == "response.completed"


def test_a_log_goes_on_from_stored_events_with_their_numbering() -> None:
    log = EventLog.stored([{"type": "response.created", "sequence_number": 0},
                           {"type": "response.in_progress", "sequence_number": 1}])
    log.append("response.failed", {})
    assert [event["sequence_number"] for event in log.appended] == [0, 1, 2]
