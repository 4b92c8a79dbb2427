"""Benchmark: what the reference gateway's HTTP stack adds over the scripted upstream alone.

Starts, for each checkout given (this one, and `--base` for another, e.g. an older commit with
its own `.venv`), a scripted upstream and a reference gateway pointed at it (`:memory:` store),
each a process of its own (`parity serve`), and drives them with a raw HTTP/1.1 client over
keep-alive connections, in interleaved rounds:

- W1: sequential non-streamed text requests, the upstream directly (the floor) and through the
  gateway; the round's median of each, and the gateway's added latency, paired round by round;
- W2: the same streamed: time to the first event, and to the end of the stream;
- W3: throughput at `--concurrency` connections for `--seconds`, and each process's CPU time
  per request (from /proc);
- long: one streamed answer of `--long-words` words, a delta each, with a line break every 40:
  its whole time, and the CPU time of the process that answered it (the gateway, or the
  upstream alone); what grows faster than the answer shows here.

With `--base`, the added latencies and req/s of this checkout are also given as paired ratios
over the base's, round by round.

    python tests/benchmarks/http_stack.py [--base /path/to/checkout] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from responses_parity.harness.engine.child_process import ChildProcess

HERE = Path(__file__).resolve().parents[2]
RUN = "0123456789"
LONG_RUN = "9876543210"
TEXT = "The quick brown fox jumps over the lazy dog."
START_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _request(port: int, method: str, path: str, body: dict | None = None) -> bytes:
    payload = json.dumps(body).encode() if body is not None else b""
    return (f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\n\r\n").encode() + payload


def _responses_request(port: int, path: str, stream: bool, run: str = RUN) -> bytes:
    return _request(port, "POST", path, {"model": "parity-model", "input": f"Say it. [parity-run {run}/0]",
                                         "stream": stream})


class RawConnection:
    """One keep-alive HTTP/1.1 connection: send prepared bytes, read the answer (Content-Length
    or chunked), and note when the first SSE event's end arrives."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def exchange(self, request: bytes) -> tuple[bytes, float | None]:
        """The body, and the perf_counter time at which the first `\\n\\n` of it arrived."""
        self._writer.write(request)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(b":") for line in head.split(b"\r\n")[1:] if line)}
        first: float | None = None
        if b"content-length" in headers:
            body = await self._reader.readexactly(int(headers[b"content-length"]))
        else:
            chunks = []
            while size := int((await self._reader.readuntil(b"\r\n")).strip(), 16):
                chunks.append(await self._reader.readexactly(size + 2))
                if first is None and b"\n\n" in chunks[-1]:
                    first = time.perf_counter()
            await self._reader.readuntil(b"\r\n")
            body = b"".join(chunk[:-2] for chunk in chunks)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
        return body, first

    def close(self) -> None:
        self._writer.close()


@dataclass
class Target:
    """One thing to measure: a port and the path of its model endpoint."""

    name: str
    port: int
    path: str
    pids: list[int]
    w1: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    whole: list[float] = field(default_factory=list)
    rps: list[float] = field(default_factory=list)
    cpu_ms: dict[int, list[float]] = field(default_factory=dict)
    long_ms: list[float] = field(default_factory=list)
    long_cpu_ms: list[float] = field(default_factory=list)


@contextmanager
def _serving(command: list[str], cwd: Path, port: int) -> Iterator[int]:
    """Runs a `parity serve` command until the block ends; yields its pid once it listens."""
    # A file, not a pipe: a server that logs much would block on a full one.
    with tempfile.TemporaryFile() as log, ChildProcess([*command, "--port", str(port)], cwd=cwd, stdout=log,
                                                       stderr=log, grace_s=10) as process:
        _wait_listening(port, process, log)
        yield process.pid


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"a server exited: {log.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def _cpu_s(pid: int) -> float:
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


async def _sequential(target: Target, requests: int, stream: bool) -> None:
    connection = await RawConnection.open(target.port)
    request = _responses_request(target.port, target.path, stream)
    await connection.exchange(request)  # warm the connection
    walls, firsts = [], []
    for _ in range(requests):
        started = time.perf_counter()
        _, first = await connection.exchange(request)
        walls.append(time.perf_counter() - started)
        if first is not None:
            firsts.append(first - started)
    connection.close()
    if stream:
        target.first.append(statistics.median(firsts) * 1000)
        target.whole.append(statistics.median(walls) * 1000)
    else:
        target.w1.append(statistics.median(walls) * 1000)


async def _throughput(target: Target, concurrency: int, seconds: float) -> None:
    request = _responses_request(target.port, target.path, False)
    connections = [await RawConnection.open(target.port) for _ in range(concurrency)]
    done = 0
    cpu_before = {pid: _cpu_s(pid) for pid in target.pids}
    deadline = time.perf_counter() + seconds

    async def worker(connection: RawConnection) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await connection.exchange(request)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    wall = time.perf_counter() - started
    for pid in target.pids:
        target.cpu_ms.setdefault(pid, []).append((_cpu_s(pid) - cpu_before[pid]) * 1000 / done)
    for connection in connections:
        connection.close()
    target.rps.append(done / wall)


async def _long_stream(target: Target) -> None:
    connection = await RawConnection.open(target.port)
    cpu_before, started = _cpu_s(target.pids[0]), time.perf_counter()
    await connection.exchange(_responses_request(target.port, target.path, True, LONG_RUN))
    target.long_ms.append((time.perf_counter() - started) * 1000)
    target.long_cpu_ms.append((_cpu_s(target.pids[0]) - cpu_before) * 1000)
    connection.close()


def _long_text(words: int) -> str:
    return " ".join(f"word{n}" + ("\n" if n % 40 == 39 else "") for n in range(words))


def _stack(checkout: Path, label: str, stack: contextlib.ExitStack, long_words: int) -> tuple[Target, Target]:
    """The scripted upstream and a reference gateway of `checkout`, the run scripts registered."""
    serve = [str(checkout / ".venv" / "bin" / "python"), "-m", "responses_parity.harness", "serve"]
    upstream_port, gateway_port = _free_port(), _free_port()
    upstream = stack.enter_context(_serving([*serve, "upstream"], checkout, upstream_port))
    gateway = stack.enter_context(_serving([*serve, "reference", "--upstream", f"http://127.0.0.1:{upstream_port}/v1",
                                            "--store", ":memory:"], checkout, gateway_port))
    for run, text in ((RUN, TEXT), (LONG_RUN, _long_text(long_words))):
        script = {"steps": [[{"text": text}]]}
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{upstream_port}/__parity/runs/{run}",
                                                      json.dumps(script).encode(), method="PUT"), timeout=10).close()
    return (Target(f"{label}: upstream alone", upstream_port, "/v1/responses", [upstream]),
            Target(f"{label}: reference gateway", gateway_port, "/v1/responses", [gateway, upstream]))


def _paired(after: list[float], before: list[float]) -> str:
    ratios = [a / b for a, b in zip(after, before, strict=True) if b]
    return f"{statistics.median(ratios):.2f}" if ratios else "n/a"


def _report(pairs: list[tuple[Target, Target]], args: argparse.Namespace) -> None:
    print(f"\n{args.rounds} interleaved rounds; W1/W2: median of {args.requests} sequential requests per round; "
          f"W3: {args.concurrency} connections for {args.seconds} s. Figures: median over rounds.")
    print(f"{'target':36} {'W1 ms':>7} {'W2 first':>9} {'W2 whole':>9} {'W3 req/s':>9}")
    for pair in pairs:
        for target in pair:
            print(f"{target.name:36} {statistics.median(target.w1):7.2f} {statistics.median(target.first):9.2f} "
                  f"{statistics.median(target.whole):9.2f} {statistics.median(target.rps):9.0f}")
    added: dict[str, dict[str, list[float]]] = {}
    for floor, gateway in pairs:
        label = gateway.name.split(":")[0]
        added[label] = {metric: [g - f for g, f in zip(getattr(gateway, metric), getattr(floor, metric), strict=True)]
                        for metric in ("w1", "first", "whole")}
        print(f"{label}: gateway adds (paired per round) W1 {statistics.median(added[label]['w1']):+.2f} ms, "
              f"W2 first event {statistics.median(added[label]['first']):+.2f} ms, "
              f"whole stream {statistics.median(added[label]['whole']):+.2f} ms; "
              f"W3 share of the floor {_paired(gateway.rps, floor.rps)}")
        for pid, cpu in gateway.cpu_ms.items():
            role = "gateway" if pid == gateway.pids[0] else "upstream"
            print(f"  W3 CPU per request, {role} process: {statistics.median(cpu):.2f} ms")
        print(f"  a stream of {args.long_words} words: {statistics.median(gateway.long_ms):.0f} ms whole, "
              f"{statistics.median(gateway.long_cpu_ms):.0f} ms of the gateway's CPU (the upstream alone: "
              f"{statistics.median(floor.long_ms):.0f} ms whole, {statistics.median(floor.long_cpu_ms):.0f} ms CPU)")
    if len(pairs) == 2:
        (_, this), (_, base) = pairs
        this_label, base_label = this.name.split(":")[0], base.name.split(":")[0]
        print(f"{this_label} over {base_label}, paired ratios of the medians per round: "
              f"W1 added {_paired(added[this_label]['w1'], added[base_label]['w1'])}, "
              f"W2 first added {_paired(added[this_label]['first'], added[base_label]['first'])}, "
              f"gateway W3 req/s {_paired(this.rps, base.rps)}, "
              f"upstream W3 req/s {_paired(pairs[0][0].rps, pairs[1][0].rps)}")


async def _rounds(pairs: list[tuple[Target, Target]], args: argparse.Namespace) -> None:
    targets = [target for pair in pairs for target in pair]
    for number in range(args.rounds):
        order = targets[number % len(targets):] + targets[:number % len(targets)]
        for target in order:
            await _sequential(target, args.requests, stream=False)
        for target in order:
            await _sequential(target, args.requests, stream=True)
        for target in order:
            await _throughput(target, args.concurrency, args.seconds)
        for target in order:
            await _long_stream(target)
        print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="another checkout (with its own .venv) to compare against")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--long-words", type=int, default=4000)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        pairs = [_stack(HERE, "this", stack, args.long_words)]
        if args.base:
            pairs.append(_stack(args.base.resolve(), "base", stack, args.long_words))
        asyncio.run(_rounds(pairs, args))
    _report(pairs, args)


if __name__ == "__main__":
    main()
