"""WebSocket mode as the third way to run a scenario: every built-in scenario that can run over a
socket passes on the reference gateway in that mode too, each of its streamed creates a
`response.create` frame on one connection per run, judged as an SSE stream is; and what a target
sends that is not OpenAI's WebSocket mode is a finding."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from responses_parity.harness.engine.session import TargetOptions, open_session
from responses_parity.harness.engine.socket import Socket
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.judge.judgement import Case, judge
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load, units_of
from responses_parity.harness.wire.exchange import Exchange


def test_every_built_in_scenario_that_can_run_over_a_socket_passes_on_the_reference_in_websocket_mode() -> None:
    catalogue = load([builtin_scenarios_dir()])
    units = units_of(catalogue.scenarios, ("websocket",))
    with open_session(TargetOptions(), {name for loaded, _ in units for name in loaded.scenario.fixtures}) as session:
        results = session.run(units, jobs=2)
    failed = {f"{r.scenario.id}: {r.findings or [s.error for s in r.steps]}" for r in results if r.outcome != "pass"}
    assert failed == set()
    over_a_socket = [step for result in results for step in result.steps
                     if step.exchange is not None and step.exchange.meta.get("transport") == "websocket"]
    assert len(results) >= 40 and len(over_a_socket) >= len(results)  # the creates went over sockets
    assert not {loaded.scenario.surface for loaded, _ in units} - {"responses"}  # no chat scenario claims it


def test_an_answer_that_is_not_websocket_mode_is_a_finding_not_a_crash(stack: Stack) -> None:
    """A target that answers a create with SSE text in a frame, then closes: a framing defect
    and a transport error, judged as any broken answer is."""
    async def not_openai(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive_text()
        await websocket.send_text('event: response.created\ndata: {"type": "response.created"}\n\n')
        await websocket.close()

    server = ServerThread(Starlette(routes=[WebSocketRoute("/v1/responses", not_openai)])).start()
    try:
        exchange = asyncio.run(Socket(Target("odd", server.url, timeout_s=10)).create(
            {"model": "m", "input": "hi", "stream": True}))
    finally:
        server.stop()
    assert [defect.rule for defect in exchange.defects] == ["framing"]
    assert "frame 0 is a text frame that is not a JSON object" in exchange.defects[0].message
    rules = {finding.rule for finding in judge(Case(exchange)).findings}
    assert "wire.framing" in rules


def test_a_create_refused_with_an_error_frame_is_an_error_answer_as_over_http(stack: Stack) -> None:
    socket = Socket(Target("reference", stack.reference_url or "", timeout_s=10))

    async def refused() -> Exchange:
        try:
            return await socket.create({"model": "m", "input": "x", "top_k": 3, "stream": True})
        finally:
            await socket.close()

    exchange = asyncio.run(refused())
    assert (exchange.status, exchange.body["error"]["code"], exchange.body["error"]["param"]) == (
        400, "unknown_parameter", "top_k")
    assert exchange.meta["error_frame"]["type"] == "error" and not exchange.streamed
    assert json.loads(json.dumps(exchange.to_file()))["meta"]["transport"] == "websocket"


def _scripted_socket(answers: list[list[dict]]) -> ServerThread:
    """A WebSocket-mode target that answers its n-th create with the n-th list of frames."""
    async def answer(websocket: WebSocket) -> None:
        await websocket.accept()
        for frames in answers:
            await websocket.receive_text()
            for frame in frames:
                await websocket.send_text(json.dumps(frame))
        await websocket.receive_text()

    return ServerThread(Starlette(routes=[WebSocketRoute("/v1/responses", answer)])).start()


def _creates(server: ServerThread, count: int) -> list[Exchange]:
    async def run() -> list[Exchange]:
        socket = Socket(Target("scripted", server.url, timeout_s=10))
        try:
            return [await socket.create({"model": "m", "input": "hi", "stream": True}) for _ in range(count)]
        finally:
            await socket.close()
    return asyncio.run(run())


def test_numbering_that_runs_on_across_responses_on_one_socket_is_a_finding() -> None:
    """OpenAI numbers each response's frames from 0; a gateway counting per connection is wrong
    from its second response."""
    def response(first: int) -> list[dict]:
        created = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
        return [{"type": "response.created", "sequence_number": first, "response": created},
                {"type": "response.completed", "sequence_number": first + 1, "response": created | {
                    "status": "completed"}}]

    server = _scripted_socket([response(0), response(2)])
    try:
        first, second = _creates(server, 2)
    finally:
        server.stop()
    assert "grammar.sequence_numbers" not in {finding.rule for finding in judge(Case(first)).findings}
    numbering = [f for f in judge(Case(second)).findings if f.rule == "grammar.sequence_numbers"]
    assert numbering and "sequence_number 2, expected 0" in numbering[0].message


def test_an_error_frame_refusing_a_create_without_a_status_is_a_framing_defect() -> None:
    server = _scripted_socket([[{"type": "error", "error": {"type": "invalid_request_error", "code": "x",
                                                            "message": "no", "param": None}}]])
    try:
        [exchange] = _creates(server, 1)
    finally:
        server.stop()
    assert exchange.body["error"]["code"] == "x" and exchange.status is None
    assert [defect.rule for defect in exchange.defects] == ["framing"] and "`status`" in exchange.defects[0].message
