"""`parity bench`: its client keeps connections and times what it claims, a misbehaving server
is an error and never a crash or a stuck run, the figures pair each batch with its own floor,
and the command measures the reference gateway end to end without an error (figures are
printed, never asserted: speed is not tested here)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile_target import HostileTarget
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from responses_parity.harness.bench.client import Client, ClientError
from responses_parity.harness.bench.report import chain_ratio, figures, markdown
from responses_parity.harness.bench.run import FLOOR, BenchOptions, BenchResult, BenchTarget, Measured, with_proxied
from responses_parity.harness.bench.workloads import Batch, Endpoint, RunTokens, Sizes, Workload, gateway_batch
from responses_parity.harness.cli import main
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.errors import HarnessError

SECRET = "Zq9benchKEY777"


def _peers_app(ports: list[int]) -> Starlette:
    async def plain(request: Request) -> JSONResponse:
        assert request.client is not None
        ports.append(request.client.port)
        return JSONResponse({"ok": True, "echo": await request.json()})

    async def stream(request: Request) -> StreamingResponse:
        async def events() -> Iterator[str]:  # type: ignore[misc]
            yield "event: one\ndata: {}\n\n"
            yield "event: two\ndata: {}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/plain", plain, methods=["POST"]),
                             Route("/v1/stream", stream, methods=["POST"])])


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileTarget]:
    with HostileTarget() as target:
        yield target


def test_the_client_keeps_one_connection_and_marks_the_first_event() -> None:
    ports: list[int] = []
    server = ServerThread(_peers_app(ports)).start()

    async def go() -> tuple[list[object], object]:
        client = Client(f"{server.url}/v1")
        try:
            plain = [await client.request("POST", "/plain", {"n": n}) for n in range(3)]
            streamed = await client.request("POST", "/stream", {})
        finally:
            await client.close()
        return plain, streamed

    try:
        plain, streamed = asyncio.run(go())
    finally:
        server.stop()
    assert [answer.json()["echo"] for answer in plain] == [{"n": 0}, {"n": 1}, {"n": 2}]  # type: ignore[attr-defined]
    assert len(set(ports)) == 1, ports
    assert all(answer.first_event_s is None for answer in plain)  # type: ignore[attr-defined]
    assert streamed.body.count(b"event: ") == 2  # type: ignore[attr-defined]
    assert streamed.first_event_s is not None and streamed.first_event_s <= streamed.total_s  # type: ignore[attr-defined]


def test_a_connection_the_server_closed_while_idle_is_not_an_error() -> None:
    """A server that keeps no connection after its answer, yet does not say so: the next request
    on that connection meets a closed one, and goes out again on a new connection."""
    connections: list[int] = []

    async def go() -> list[int]:
        async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(len(connections))
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer_once, "127.0.0.1", 0)
        client = Client(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        try:
            return [(await client.request("GET", "/")).status for _ in range(3)]
        finally:
            await client.close()
            server.close()

    assert asyncio.run(go()) == [200, 200, 200]
    assert len(connections) == 3


@pytest.mark.parametrize("behaviour", ["hang", "endless", "huge-json", "reset", "close-silently", "short-body",
                                       "bad-chunking", "not-http"])
def test_a_misbehaving_server_is_a_client_error(hostile: HostileTarget, behaviour: str) -> None:
    async def go() -> None:
        client = Client(hostile.url(behaviour), timeout_s=2, max_answer_bytes=2**20)
        try:
            await client.request("POST", "/v1/responses", {"model": "m", "input": "hi"})
        finally:
            await client.close()

    with pytest.raises(ClientError):
        asyncio.run(go())


@pytest.mark.parametrize("behaviour", ["deep-json", "event-stream-as-json", "invalid-utf8-json", "html-error-page",
                                       "redirect-loop", "hang"])
def test_an_answer_a_client_cannot_use_is_an_error_of_the_batch(hostile: HostileTarget, behaviour: str) -> None:
    async def go() -> Batch:
        endpoint = Endpoint("hostile", Client(hostile.url(behaviour), timeout_s=1))
        try:
            runs = RunTokens("0123456789", "0123456789", "http://127.0.0.1:9/mcp", "0123456789")
            return await gateway_batch("text", endpoint, runs, Sizes(sequential=2))
        finally:
            await endpoint.client.close()

    batch = asyncio.run(go())
    assert batch.requests == len(batch.errors) == 2 and not batch.totals, batch


def _batch(totals_ms: list[float], wall_s: float = 1.0, errors: tuple[str, ...] = ()) -> Batch:
    seconds = [value / 1000 for value in totals_ms]
    return Batch(requests=len(seconds) + len(errors), totals=seconds, firsts=list(seconds), wall_s=wall_s,
                 errors=list(errors))


def _result(measured: list[Measured], cannot: dict[str, str] | None = None,
            workloads: tuple[Workload, ...] = ("text", "throughput", "mcp")) -> BenchResult:
    target = BenchTarget("gw", "a gateway", Endpoint("gw", Client("http://127.0.0.1:9")), pid=1,
                         cannot=cannot or {})  # type: ignore[arg-type]
    options = BenchOptions(targets=("gw",), rounds=2, sizes=Sizes(3, 3, 1), workloads=workloads)
    return BenchResult(options, [target], measured, {"gw": "a gateway"}, {"cpus": 2, "python": "3", "system": "x"})


def test_added_figures_pair_each_batch_with_the_floor_measured_before_it() -> None:
    measured = [
        Measured(0, "text", FLOOR, "gw", _batch([1, 1, 1]), {"upstream": 0.003}),
        Measured(0, "text", "gw", None, _batch([3, 3, 9]), {"gw": 0.006, "upstream": 0.003}),
        Measured(1, "text", FLOOR, "gw", _batch([2, 2, 2]), {"upstream": 0.003}),
        Measured(1, "text", "gw", None, _batch([3, 3, 3], errors=("HTTP 500: boom",)), {"gw": 0.012}),
        Measured(0, "throughput", FLOOR, "gw", _batch([1] * 100, wall_s=0.1), {}),
        Measured(0, "throughput", "gw", None, _batch([1] * 100, wall_s=0.4), {}),
    ]
    result = _result(measured, {"mcp": "lacks request-level MCP tools"})
    text = figures(result, "gw", "text")
    assert text.added_p50 == pytest.approx(0.0015)  # rounds: 3-1 and 3-2 ms; their median
    assert text.added_p95 == pytest.approx(0.0045)  # rounds: 9-1 and 3-2 ms; their median
    assert text.p50 == pytest.approx(0.003)
    assert (text.requests, text.errors, text.first_error) == (7, 1, "HTTP 500: boom")
    assert text.cpu_per_request == pytest.approx(0.018 / 7)
    throughput = figures(result, "gw", "throughput")
    assert throughput.rps == pytest.approx(250) and throughput.share == pytest.approx(0.25)
    assert figures(result, FLOOR, "throughput").rps == pytest.approx(1000)
    assert figures(result, "gw", "mcp").not_run == "lacks request-level MCP tools"
    report = markdown(result, "parity bench")
    assert "| a gateway | +1.50 ms | — | 250 (0.25) | — | — | — |" in report
    assert "not run: lacks request-level MCP tools" in report
    assert "a gateway, W1 text: 1 of 7; the first: HTTP 500: boom" in report


def test_a_proxy_is_paired_with_its_gateway_alone_and_the_gateways_own_figures_stay_its_own() -> None:
    proxy = BenchTarget("proxy:gw", "parity proxy in front of gw", Endpoint("proxy:gw", Client("http://127.0.0.1:8")),
                        pid=2, baseline="gw")
    measured = [
        Measured(0, "text", FLOOR, "gw", _batch([1, 1, 1]), {}),
        Measured(0, "text", "gw", None, _batch([3, 3, 3]), {}),
        Measured(0, "text", "gw", "proxy:gw", _batch([4, 4, 4]), {}),  # the proxy's baseline batch
        Measured(0, "text", "proxy:gw", None, _batch([4.5, 4.5, 4.5]), {"proxy:gw": 0.003, "proxy:gw/checker": 0.012}),
    ]
    result = _result(measured, workloads=("text",))
    result.targets.append(proxy)
    assert figures(result, "gw", "text").added_p50 == pytest.approx(0.002)
    assert figures(result, "gw", "text").requests == 3
    proxied = figures(result, "proxy:gw", "text")
    assert proxied.added_p50 == pytest.approx(0.0005)  # over the gateway's batch just before, not the floor's
    assert proxied.cpu_per_request == pytest.approx(0.001)  # the relay's; its checker's apart
    assert proxied.checker_cpu_per_request == pytest.approx(0.004)
    assert "| +0.50 ms | +0.50 ms | 1.00 ms + checker 4.00 ms | 0 |" in markdown(result, "parity bench")


def test_a_proxied_target_is_measured_alone_right_before_its_first_proxy() -> None:
    assert with_proxied(("proxy:reference", "smg", "proxy:smg")) == ("reference", "proxy:reference", "smg",
                                                                       "proxy:smg")
    with pytest.raises(HarnessError, match="a proxy in front of a proxy"):
        with_proxied(("proxy:proxy:reference",))


def test_a_chain_on_a_socket_is_compared_with_the_same_chain_over_http_round_by_round() -> None:
    measured = [Measured(round_, workload, "gw", None, _batch(samples), {"gw": 0.01})
                for round_, workload, samples in [(0, "chain_socket", [40, 44]), (0, "chain_http", [80, 80]),
                                                  (1, "chain_socket", [30, 30]), (1, "chain_http", [50, 50])]]
    result = _result(measured, workloads=("chain_socket", "chain_http"))
    assert chain_ratio(result, "gw") == pytest.approx((42 / 80 + 30 / 50) / 2)  # each round's ratio; their median
    assert "| 36.00 ms / 65.00 ms (0.56) |" in markdown(result, "parity bench")


def test_parity_bench_measures_the_reference_gateway_and_a_failing_target_without_crashing(
        hostile: HostileTarget, tmp_path: Path) -> None:
    output = tmp_path / "bench.md"
    failing = hostile.url("html-error-page")
    result = CliRunner().invoke(main, ["bench", "--targets", f"proxy:reference,{failing}", "--rounds", "1",
                                       "--requests", "3", "--throughput-requests", "20", "--concurrency", "4",
                                       "--chains", "1", "--api-key", SECRET, "--output", str(output)])
    assert result.exit_code == 0, result.output
    data = json.loads(output.with_suffix(".json").read_text())
    by = {(f["target"], f["workload"]): f for f in data["figures"]}
    for workload in ("text", "stream", "throughput", "mcp", "socket", "chain_socket", "chain_http"):
        reference = by[("reference", workload)]
        assert reference["errors"] == 0 and reference["requests"] > 0, reference
        assert (reference["rps"] if workload == "throughput" else reference["added_p50"]) is not None
        assert by[(failing, workload)]["errors"] == by[(failing, workload)]["requests"] > 0
    assert by[(failing, "text")]["first_error"].startswith("HTTP 502")
    proxied = by[("proxy:reference", "text")]
    assert proxied["errors"] == 0 and proxied["added_p50"] is not None  # paired with the reference alone
    assert proxied["cpu_per_request"] is not None and proxied["checker_cpu_per_request"] is not None  # read apart
    assert {batch["target"] for batch in data["batches"]} == {"floor", "reference", "proxy:reference", failing}
    written = output.read_text() + output.with_suffix(".json").read_text() + result.output
    assert SECRET not in written
    assert "## W4 MCP round trip" in written


def test_a_profiled_gateways_header_values_never_reach_the_report_nor_its_json(tmp_path: Path) -> None:
    """With --json the JSON written beside the report is the only thing on standard output."""
    profile = Path(__file__).parent / "profiles" / "echoes-its-headers.yaml"
    output = tmp_path / "bench.md"
    result = CliRunner().invoke(main, ["bench", "--targets", str(profile), "-w", "text", "--rounds", "1",
                                       "--requests", "2", "--output", str(output), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads(output.with_suffix(".json").read_text())
    assert document["options"]["workloads"] == ["text"] and document["options"]["rounds"] == 1
    assert [target["name"] for target in document["targets"]] == ["echoes-its-headers"]
    assert {(batch["target"], batch["workload"]) for batch in document["batches"]} == {
        ("floor", "text"), ("echoes-its-headers", "text")}
    assert "## Overview" in result.stderr
    written = output.read_text() + result.stdout + result.stderr
    assert "HTTP 403" in written and "tenant <redacted> is unknown" in written
    assert "tenant-secret-4242" not in written
