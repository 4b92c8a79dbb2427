"""Benchmark: one MCP tool round trip through the reference gateway (issue 14's W4).

Starts the scripted upstream and the `calc` MCP fixture in this process, and one reference
gateway per source tree in a process of its own (this checkout by default; `--tree NAME=DIR`
adds another checkout to compare, e.g. `git archive <commit> | tar -x -C DIR`). Each
request offers `calc` as a request-level MCP tool (`require_approval: never`); the scripted model
calls `add`, reads its result and answers, so every request makes two model calls and one MCP
call. Gateways take turns, a batch of requests each per round, and the figures are paired round
by round.

Prints, per gateway: the median and p95 wall time of a request, the HTTP requests the MCP
server saw per round trip (by method), the gateway's CPU time per round trip, and the median
of the paired ratios against the first gateway. It asserts nothing.

    python tests/benchmarks/mcp_round_trip.py [--rounds R] [--batch N] [--tree old=/path/to/checkout]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from starlette.types import ASGIApp, Receive, Scope, Send

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.fixtures.upstream.app import build_upstream_app
from responses_parity.fixtures.upstream.script import ModelTurn, RunScript, ToolCallSpec, new_run_token, run_marker
from responses_parity.harness.engine.server_thread import ServerThread

THIS_TREE = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "fixtures", "reference_impl", "scenarios")
_RUN = re.compile(r"^/r/(?P<run>[^/]+)/")
_GATEWAY = """
import sys, time
try:
    from responses_parity.harness.engine.reference_gateway import reference_config
    from responses_parity.harness.engine.server_thread import ServerThread
except ImportError:  # a checkout from before they had these homes
    from responses_parity.harness.engine.stack import ServerThread, reference_config
from responses_parity.reference_impl import build_gateway_app
import responses_parity.reference_impl as gateway
server = ServerThread(build_gateway_app(reference_config(sys.argv[1], store_path=":memory:"))).start()
print(server.url, gateway.__file__, flush=True)
sys.stdin.read()
server.stop()
"""
"""A reference gateway on a free loopback port: prints its URL and the code it runs, serves until stdin closes."""


class CountingHost:
    """The MCP fixture with a count of the HTTP requests each run's endpoints receive, by method."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self.requests: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (match := _RUN.match(scope["path"])):
            self.requests[match["run"]][scope["method"]] += 1
        await self._app(scope, receive, send)


@dataclass
class Gateway:
    """One gateway process and what was measured of it."""

    name: str
    process: subprocess.Popen[str]
    url: str
    run: str = field(default_factory=new_run_token)
    walls: list[float] = field(default_factory=list)
    batch_medians: list[float] = field(default_factory=list)
    cpu_s: float = 0.0

    def cpu_time(self) -> float:
        """User plus system CPU seconds the gateway process has used so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_gateway(name: str, tree: Path, upstream_url: str, links: Path) -> Gateway:
    """A gateway running `tree`'s code: its packages are linked under `links/<name>/responses_parity`,
    which comes first on the child's path."""
    package = links / name / "responses_parity"
    package.mkdir(parents=True)
    for part in PACKAGES:
        (package / part).symlink_to(tree / part)
    env = os.environ | {"PYTHONPATH": str(links / name)}
    process = subprocess.Popen([sys.executable, "-c", _GATEWAY, upstream_url], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    url, code = process.stdout.readline().split()
    if not Path(code).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"gateway {name!r} runs {code}, not the code under {tree}")
    return Gateway(name, process, url)


def request_body(gateway: Gateway, mcp_url: str) -> dict:
    return {"model": "gpt-4.1", "input": f"Add 1 and 2. {run_marker(gateway.run, 0)}",
            "tools": [{"type": "mcp", "server_label": "calc", "server_url": f"{mcp_url}/r/{gateway.run}/mcp",
                       "require_approval": "never"}]}


def round_trip(http: httpx2.Client, gateway: Gateway, body: dict) -> float:
    started = time.perf_counter()
    response = http.post(f"{gateway.url}/v1/responses", json=body)
    wall = time.perf_counter() - started
    output = response.json().get("output", []) if response.status_code == 200 else []
    if [item["type"] for item in output] != ["mcp_list_tools", "mcp_call", "message"]:
        raise SystemExit(f"gateway {gateway.name!r} answered {response.status_code}: {response.text[:500]}")
    return wall


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=10, help="requests per gateway per round")
    parser.add_argument("--warmup", type=int, default=3, help="requests per gateway before measuring")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                        help="another checkout to run a gateway from (repeatable); this checkout is 'this'")
    args = parser.parse_args()
    trees = {"this": THIS_TREE} | {name: Path(path) for name, path in (tree.split("=", 1) for tree in args.tree)}

    mcp_host = CountingHost(FIXTURE_SERVERS["calc"]())
    servers = [ServerThread(build_upstream_app()).start(), ServerThread(mcp_host).start()]
    upstream_url, mcp_url = servers[0].url, servers[1].url
    script = RunScript(steps=[[ModelTurn(call=ToolCallSpec(tool="add", arguments={"a": 1, "b": 2})),
                               ModelTurn(text="3")]])
    gateways: list[Gateway] = []
    with tempfile.TemporaryDirectory() as links, httpx2.Client(timeout=60) as http:
        try:
            for name, tree in trees.items():
                gateways.append(start_gateway(name, tree, upstream_url, Path(links)))
            for gateway in gateways:
                http.put(f"{upstream_url}/__parity/runs/{gateway.run}",
                         json=script.model_dump(mode="json")).raise_for_status()
                for _ in range(args.warmup):
                    round_trip(http, gateway, request_body(gateway, mcp_url))
                mcp_host.requests[gateway.run].clear()
            for _ in range(args.rounds):
                for gateway in gateways:
                    body = request_body(gateway, mcp_url)
                    cpu_before = gateway.cpu_time()
                    walls = [round_trip(http, gateway, body) for _ in range(args.batch)]
                    gateway.cpu_s += gateway.cpu_time() - cpu_before
                    gateway.walls += walls
                    gateway.batch_medians.append(statistics.median(walls))
        finally:
            for gateway in gateways:
                gateway.process.communicate("")
            for server in servers:
                server.stop()

    measured = args.rounds * args.batch
    print(f"one MCP round trip through the reference gateway: {args.rounds} interleaved rounds of "
          f"{args.batch} requests per gateway ({measured} each, after {args.warmup} warm-up requests)")
    first = gateways[0]
    for gateway in gateways:
        seen = mcp_host.requests[gateway.run]
        per_trip = ", ".join(f"{method} {count / measured:.1f}" for method, count in sorted(seen.items()))
        ratios = [mine / theirs for mine, theirs in zip(gateway.batch_medians, first.batch_medians, strict=True)]
        cpu_ms = gateway.cpu_s / measured * 1000
        print(f"  {gateway.name:8} wall median {statistics.median(gateway.walls) * 1000:7.1f} ms, "
              f"p95 {percentile(gateway.walls, 0.95) * 1000:7.1f} ms; gateway CPU {cpu_ms:6.1f} ms per trip; "
              f"MCP HTTP requests per trip {sum(seen.values()) / measured:.1f} ({per_trip}); "
              f"paired ratio to {first.name!r} (median of round medians) {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
