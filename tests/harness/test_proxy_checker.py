"""The proxy's checker process (`traffic/checker.py`): what it takes in is checked and written
with the run's secrets removed (WebSocket connections too); what does not fit in its bound is dropped and said, never
queued. The relay's use of it runs in test_recording_proxy.py and test_bounded_proxy.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from responses_parity.harness.traffic.checker import MESSAGE_COST, Checker, RecordedRequest
from responses_parity.harness.traffic.forwarding import Dropped, Found, ProxyEvent, Recorded
from responses_parity.harness.traffic.socket_recording import SocketOpened, SocketRecording
from responses_parity.harness.wire.exchange import Exchange
from responses_parity.harness.wire.redaction import Redactor

SECRET = "sk-checker-secret-0123456789"
DEADLINE_S = 60.0


def _exchange() -> Exchange:
    return Exchange(method="POST", url="http://127.0.0.1:9/v1/responses", status=200,
                    headers={"content-type": "application/json"}, meta={"path": "/v1/responses"})


def _answer() -> list[bytes]:
    return [b'{"id": "resp_1", "object": "response", ', b'"status": "completed", "output": []}']


async def test_what_fits_is_checked_and_written_and_what_does_not_is_dropped_and_said(tmp_path: Path) -> None:
    events: list[ProxyEvent] = []
    checker = Checker(tmp_path, events.append, Redactor(), max_pending_bytes=3 * MESSAGE_COST + 10)
    checker.learn([SECRET])  # secrets always get through: a capture must not hold them
    body = json.dumps({"model": "m", "input": f"my key is {SECRET}"}).encode()
    request = RecordedRequest(False, body, len(body))
    assert checker.begin("0001-kept.json", request)  # a stream, checked as it passes
    assert checker.chunk("0001-kept.json", b"data: {}\n\n")
    assert not checker.chunk("0001-kept.json", b"x")  # no room: its live checks stop there
    checker.end("0002-dropped.json", _exchange(), _answer(), request)  # no room: nothing taken in yet
    assert events == [Dropped("0002-dropped.json", events[0].reason)] and "still waiting" in events[0].reason
    await checker.start()
    deadline = time.monotonic() + DEADLINE_S
    while checker.pending:
        assert time.monotonic() < deadline, "the checker took nothing in"
        await asyncio.sleep(0.01)  # poll interval while the process takes the messages in
    checker.end("0001-kept.json", _exchange(), _answer(), None)
    await checker.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["0001-kept.json"]
    written = (tmp_path / "0001-kept.json").read_text()
    assert SECRET not in written and "<redacted>" in written
    assert json.loads(written)["response"]["body"]["status"] == "completed"
    assert isinstance(events[-1], Recorded) and events[-1].capture == "0001-kept.json"
    assert not [event for event in events if isinstance(event, Dropped) and event.capture == "0001-kept.json"]


async def test_an_exchange_the_checker_cannot_write_is_dropped_and_said_and_the_next_is_written(
        tmp_path: Path) -> None:
    events: list[ProxyEvent] = []
    checker = Checker(tmp_path, events.append, Redactor())
    await checker.start()
    unwritable = _exchange()
    unwritable.meta["not json"] = {1, 2}  # a set: writing the capture fails
    body = b'{"model": "m", "input": "hi"}'
    checker.end("0001-unwritable.json", unwritable, _answer(), RecordedRequest(False, body, len(body)))
    checker.end("0002-fine.json", _exchange(), _answer(), RecordedRequest(False, body, len(body)))
    await checker.close()
    dropped = [event for event in events if isinstance(event, Dropped)]
    assert [event.capture for event in dropped] == ["0001-unwritable.json"]
    assert "the checker failed on it: TypeError" in dropped[0].reason
    assert sorted(path.name for path in tmp_path.iterdir()) == ["0002-fine.json"]


async def test_a_checker_process_that_was_killed_is_said_and_closing_does_not_hang(tmp_path: Path) -> None:
    events: list[ProxyEvent] = []
    checker = Checker(tmp_path, events.append, Redactor(), max_pending_bytes=MESSAGE_COST)
    await checker.start()
    assert checker.pid is not None
    os.kill(checker.pid, signal.SIGKILL)  # as an out-of-memory killer would
    deadline = time.monotonic() + DEADLINE_S
    while psutil.pid_exists(checker.pid) and psutil.Process(checker.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the checker process outlived SIGKILL"
        await asyncio.sleep(0.01)  # poll interval while the kernel ends it
    body = b"{}"
    checker.end("0001-a.json", _exchange(), _answer(), RecordedRequest(False, body, len(body)))  # fits the bound
    checker.end("0002-b.json", _exchange(), _answer(), RecordedRequest(False, body, len(body)))  # nothing taken in
    await checker.close()  # returns: the process's end of the pipe closed though it could not say so
    assert [(type(event), event.capture) for event in events] == [(Dropped, "0002-b.json")]
    assert "the checker process ended (exit code -9)" in events[0].reason


async def test_a_socket_connection_is_kept_judged_and_written_and_frames_without_room_are_said(
        tmp_path: Path) -> None:
    events: list[ProxyEvent] = []
    checker = Checker(tmp_path, events.append, Redactor(), max_pending_bytes=4 * MESSAGE_COST + 10)
    name, url = "0001-ws-v1-responses.json", "ws://127.0.0.1:9/v1/responses"
    tool = {"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:9/mcp", "authorization": SECRET}
    create = json.dumps({"type": "response.create", "model": "m", "input": "hi", "tools": [tool]})
    checker.socket_opened(name, SocketOpened(url, "/v1/responses", limit=2**20))
    assert checker.frame(name, "sent", create)
    assert checker.frame(name, "received", "not JSON")  # a finding once the create's answer ends
    assert checker.frame(name, "received", json.dumps({"type": "response.completed", "sequence_number": 1,
                                                       "response": {"id": "resp_1", "object": "response",
                                                                    "status": "completed", "output": []}}))
    assert not checker.frame(name, "sent", create)  # no room: the relay sends none of the rest
    checker.socket_closed(name, {"code": 1000, "reason": "", "initiator": "client"}, unsent=3)
    await checker.start()
    await checker.close()
    written = (tmp_path / name).read_text()
    assert SECRET not in written
    document = json.loads(written)
    assert [m["direction"] for m in document["messages"]] == ["sent", "received", "received"]
    assert "the last 3 frame(s) were forwarded and not recorded: the checks were behind" in document["meta"]["note"]
    found = [event.finding.message for event in events if isinstance(event, Found)]
    assert any("frame 0 is a text frame that is not a JSON object" in message for message in found), found
    assert not any("closed before the answer" in message for message in found)  # its frames were not sent here
    assert isinstance(events[-1], Recorded) and events[-1].exchange.meta["ended"] == \
        "1 create(s), closed by the client (1000)"


def test_a_connection_past_its_recording_bounds_keeps_nothing_more_not_even_an_answer_to_judge(
        tmp_path: Path) -> None:
    recording = SocketRecording("0001-ws-v1-responses.json", SocketOpened("ws://127.0.0.1:9/v1/responses",
                                                                           "/v1/responses", limit=200), Redactor())
    assert recording.take("sent", json.dumps({"type": "response.create", "model": "m", "input": "hi"})) == []
    for number in range(1000):  # an answer that never ends, each frame within the frame limit
        assert recording.take("received", json.dumps({"type": "response.output_text.delta",
                                                      "sequence_number": number, "delta": "x"})) == []
    assert len(recording.messages) < 5 and len(recording.frames) < 5 and recording.open_create is None
    events = recording.finish(tmp_path, None, unsent=0)
    assert [type(event) for event in events] == [Recorded]  # no finding for a cut answer
    assert "were forwarded and not recorded" in json.loads((tmp_path / recording.name).read_text())["meta"]["note"]


def _event(payload: dict[str, object]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


@pytest.mark.parametrize("live_chunks", [2, 1], ids=["checked-live-to-the-end", "live-checks-stopped-after-one"])
async def test_each_event_of_a_stream_is_schema_checked_once_live_or_at_its_end(tmp_path: Path,
                                                                                live_chunks: int) -> None:
    response = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": "m",
                "output": []}
    chunks = [_event({"type": "response.created", "sequence_number": 0, "response": response}),
              _event({"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1",
                      "output_index": 0, "content_index": 0, "delta": 5, "logprobs": []})]  # not a string
    events: list[ProxyEvent] = []
    checker = Checker(tmp_path, events.append, Redactor())
    await checker.start()
    body = b'{"model": "m", "input": "hi", "stream": true}'
    assert checker.begin("0001-stream.json", RecordedRequest(False, body, len(body)))
    for chunk in chunks[:live_chunks]:  # the rest passed while the checker had no room
        assert checker.chunk("0001-stream.json", chunk)
    exchange = Exchange(method="POST", url="http://127.0.0.1:9/v1/responses", status=200,
                        headers={"content-type": "text/event-stream"}, meta={"path": "/v1/responses"})
    checker.end("0001-stream.json", exchange, chunks, None)
    await checker.close()
    about_the_delta = [event.finding.message for event in events
                       if isinstance(event, Found) and "event 1 (response.output_text.delta)" in event.finding.message]
    assert len(about_the_delta) == 1, about_the_delta
    assert isinstance(events[-1], Recorded)


async def test_a_streams_chunks_sent_together_are_checked_as_one_piece_and_free_all_their_room(tmp_path: Path) -> None:
    delta = _event({"type": "response.output_text.delta", "sequence_number": 0, "item_id": "msg_1",
                    "output_index": 0, "content_index": 0, "delta": 5, "logprobs": []})  # not a string
    pieces = [delta[at:at + 7] for at in range(0, len(delta), 7)]  # the event split over many chunks
    events: list[ProxyEvent] = []
    checker = Checker(tmp_path, events.append, Redactor())
    await checker.start()
    body = b'{"model": "m", "input": "hi", "stream": true}'
    assert checker.begin("0001-stream.json", RecordedRequest(False, body, len(body)))
    assert all(checker.chunk("0001-stream.json", piece) for piece in pieces)
    assert checker.pending == (1 + len(pieces)) * MESSAGE_COST  # each chunk counts until taken in
    deadline = time.monotonic() + DEADLINE_S
    while checker.pending or not events:
        assert time.monotonic() < deadline, f"pending {checker.pending}, heard {events}"
        await asyncio.sleep(0.01)  # poll interval while the process takes the chunks in and checks them
    assert [type(event) for event in events] == [Found]  # found live, the stream not ended yet
    assert "event 0 (response.output_text.delta)" in events[0].finding.message
    await checker.close()
