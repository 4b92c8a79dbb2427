"""Benchmark: `parity proxy` stays bounded: its memory over many endless streams and under a
huge request body, and the CPU its redaction adds per request as the credentials it has seen
grow.

For each checkout given (this one, and `--base` for another with its own `.venv`, e.g. the main
checkout), starts `parity proxy` as a process of its own in front of a counting upstream on
loopback (`tests/harness/counting_upstream.py`), drives it with raw HTTP/1.1 clients and reads
its resident memory and CPU time from /proc (psutil):

- M1: RSS before, at most and after `--streams` endless streams (`--base-streams` for the
  base), opened `--wave` at a time, each read for `--read-kb` and then dropped (the proxy
  records at most `--max-answer-mb` of each); "after" (and after each wave) is taken once
  every capture is written;
- M2: one request whose body declares `--body-mb` (sent in 1 MiB pieces until the proxy answers
  or takes it all): its status, the bytes the proxy took, RSS before, at most and after, the
  size of the capture folder, and the longest wait of small requests sent meanwhile;
- C1: the proxy's CPU per echo request carrying one credential, on a proxy that has seen no
  other credential and on one that has first seen `--credentials` distinct ones (each in a
  request of its own: the flood, with its own CPU per request; stopped after `--flood-s`
  seconds if slower; the other proxy gets as many requests, all with the one credential), in
  `--rounds` interleaved rounds of `--requests`; medians;
- R1: with each checkout's `Redactor` (in its own interpreter), the time to redact one typical
  capture with none and with `--credentials` distinct credentials known (medians of 5; where the
  known secrets sit in automatons, also once they are merged into one, as a run that stopped
  learning has them), and the time learning one took on average (stopped after `--flood-s`
  seconds if slower).

    python tests/benchmarks/bounded_proxy.py [--base /work/main] [--streams 1000] [--credentials 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from responses_parity.harness.engine.child_process import ChildProcess

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "tests" / "harness"))

from counting_upstream import CountingUpstream  # noqa: E402

LISTENING = re.compile(r"parity proxy listening on http://127\.0\.0\.1:(\d+) ")
START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 600.0
MIB = 2**20


@dataclass
class Proxy:
    """One `parity proxy` process."""

    process: ChildProcess
    port: int
    captures: Path

    @property
    def rss_mib(self) -> float:
        return psutil.Process(self.process.pid).memory_info().rss / MIB

    @property
    def cpu_s(self) -> float:
        times = psutil.Process(self.process.pid).cpu_times()
        return times.user + times.system

    def captured(self) -> int:
        return sum(1 for _ in self.captures.glob("*.json"))


@contextlib.contextmanager
def proxy(checkout: Path, upstream: str, folder: Path, *extra: str) -> Iterator[Proxy]:
    folder.mkdir(parents=True)
    log = folder / "proxy.log"
    with log.open("wb") as sink:
        process = ChildProcess([str(checkout / ".venv" / "bin" / "parity"), "proxy", "--upstream", upstream,
                                "--port", "0", "--captures", str(folder / "captures"), *extra],
                               stdout=sink, stderr=subprocess.STDOUT, grace_s=10)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (found := LISTENING.search(log.read_text(errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the proxy of {checkout} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield Proxy(process, int(found.group(1)), folder / "captures")
    finally:
        process.stop()


def _head(port: int, path: str, length: int, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "content-type: application/json",
             f"content-length: {length}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _post(port: int, path: str, body: dict, *headers: str) -> bytes:
    payload = json.dumps(body).encode()
    return _head(port, path, len(payload), *headers) + payload


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The status and body of one answer with a content-length (the echo's, the proxy's errors)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), None)
    if length is not None:
        return status, await reader.readexactly(length)
    return status, await reader.read()  # chunked or close-delimited: until the end


async def _stream_and_drop(port: int, read_bytes: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post(port, "/endless/v1/responses", {"model": "m", "input": "hi", "stream": True}))
    received = 0
    while received < read_bytes:
        chunk = await reader.read(2**16)
        if not chunk:
            break
        received += len(chunk)
    writer.transport.abort()


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {SETTLE_TIMEOUT_S} s")
        time.sleep(0.1)


def endless_streams(running: Proxy, streams: int, args: argparse.Namespace) -> str:
    before, peak, done, settled = running.rss_mib, 0.0, 0, []
    began = time.monotonic()
    while done < streams:
        wave = min(args.wave, streams - done)

        async def one_wave(count: int = wave) -> None:
            await asyncio.gather(*(_stream_and_drop(running.port, args.read_kb * 1024) for _ in range(count)))

        sampler = _Sampler(running)
        with sampler:
            asyncio.run(one_wave())
            done += wave
            _wait(lambda total=done: running.captured() >= total, f"{done} captures written")
        peak = max(peak, sampler.peak)
        settled.append(running.rss_mib)
    after = running.rss_mib
    waves = " ".join(f"{rss:.0f}" for rss in settled)
    return (f"M1 {streams} endless streams ({args.wave} at a time, {args.read_kb} KiB read each) in "
            f"{time.monotonic() - began:.0f} s: RSS before {before:.0f} MiB, at most {peak:.0f} MiB, "
            f"after {after:.0f} MiB (+{after - before:.0f} MiB); after each wave: {waves}")


class _Sampler:
    """The proxy's RSS, sampled every 50 ms in a thread while the block runs; `peak` the highest."""

    def __init__(self, running: Proxy) -> None:
        self._running = running
        self._stop = threading.Event()
        self.peak = running.rss_mib
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self._running.rss_mib)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def _huge_body(port: int, size: int) -> tuple[str, int]:
    """Send a body declared `size` bytes in 1 MiB pieces until the proxy answers; its status
    (or what ended the exchange) and the bytes it took."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_head(port, "/echo/v1/responses", size))
    answer = asyncio.ensure_future(_read_answer(reader))
    sent, piece = 0, b" " * MIB
    try:
        while sent < size and not answer.done():
            writer.write(piece)
            await writer.drain()
            sent += len(piece)
        status, _ = await asyncio.wait_for(answer, SETTLE_TIMEOUT_S)
        return str(status), sent
    except (ConnectionError, asyncio.IncompleteReadError) as error:
        if answer.done() and not answer.exception():
            return str(answer.result()[0]), sent
        return type(error).__name__, sent
    finally:
        writer.transport.abort()


async def _small_requests(port: int, stop: asyncio.Event) -> float:
    """The longest wait for an echo answer while `stop` is not set, in seconds."""
    longest = 0.0
    while not stop.is_set():
        began = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_post(port, "/echo/v1/responses", {"model": "m", "input": "hi"}))
        await _read_answer(reader)
        writer.transport.abort()
        longest = max(longest, time.monotonic() - began)
        await asyncio.sleep(0.05)
    return longest


def huge_body(running: Proxy, args: argparse.Namespace) -> str:
    before = running.rss_mib

    async def go() -> tuple[tuple[str, int], float]:
        stop = asyncio.Event()
        small = asyncio.ensure_future(_small_requests(running.port, stop))
        outcome = await _huge_body(running.port, args.body_mb * MIB)
        await asyncio.sleep(1)  # what the proxy does after the answer: record it
        stop.set()
        return outcome, await small

    with _Sampler(running) as sampler:
        (status, sent), stall = asyncio.run(go())
        time.sleep(1)
    captured = sum(path.stat().st_size for path in running.captures.glob("*.json")) / MIB
    after = running.rss_mib
    return (f"M2 a {args.body_mb} MB request body: answered {status} after {sent / MIB:.0f} MiB sent; RSS before "
            f"{before:.0f} MiB, at most {sampler.peak:.0f} MiB, after {after:.0f} MiB; captures {captured:.1f} MiB; "
            f"longest wait of a small request meanwhile {stall * 1000:.0f} ms")


async def _requests(port: int, count: int, credential: str | None, distinct: bool = False,
                    until: float | None = None) -> int:
    """`count` echo requests on one keep-alive connection, each with the credential (a new one
    each when `distinct`); stops at `until` (monotonic). The number sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    try:
        for n in range(count):
            if until is not None and time.monotonic() > until:
                break
            key = f"sk-bench-{secrets.token_hex(16)}" if distinct else credential
            headers = (f"authorization: Bearer {key}",) if key else ()
            writer.write(_post(port, "/echo/v1/responses", {"model": "m", "input": f"request {n}"}, *headers))
            status, _ = await _read_answer(reader)
            assert status == 200, status
            sent += 1
    finally:
        writer.transport.abort()
    return sent


def _cpu_per_request_ms(running: Proxy, count: int, credential: str | None, distinct: bool = False,
                        until: float | None = None) -> tuple[float, int]:
    """The proxy's CPU time per request over `count` requests, their captures written; and how
    many were sent."""
    captured, began = running.captured(), running.cpu_s
    sent = asyncio.run(_requests(running.port, count, credential, distinct, until))
    _wait(lambda: running.captured() >= captured + sent, f"{captured + sent} captures written")
    return (running.cpu_s - began) / max(sent, 1) * 1000, sent


def credentials(checkout: Path, upstream: CountingUpstream, folder: Path, args: argparse.Namespace) -> list[str]:
    credential = f"sk-bench-{secrets.token_hex(16)}"
    with proxy(checkout, upstream.url("echo").rsplit("/", 1)[0], folder / "none") as fresh, \
            proxy(checkout, upstream.url("echo").rsplit("/", 1)[0], folder / "seen") as seen:
        _cpu_per_request_ms(fresh, 50, credential)  # warm up: imports, schema caches
        _cpu_per_request_ms(seen, 50, credential)
        flood_ms, flooded = _cpu_per_request_ms(seen, args.credentials, None, distinct=True,
                                                until=time.monotonic() + args.flood_s)
        same_ms, _ = _cpu_per_request_ms(fresh, flooded, credential)  # as many requests, one credential
        none: list[float] = []
        known: list[float] = []
        for round_ in range(args.rounds):
            for target, figures in ((fresh, none), (seen, known))[:: 1 if round_ % 2 == 0 else -1]:
                figures.append(_cpu_per_request_ms(target, args.requests, credential)[0])
        rss = f"RSS {fresh.rss_mib:.0f} MiB vs {seen.rss_mib:.0f} MiB"
    added = [k - n for k, n in zip(known, none, strict=True)]
    return [f"C1 flood: {flooded:,} requests each with a new credential: {flood_ms:.2f} ms CPU per request"
            + ("" if flooded == args.credentials else f" (stopped after {args.flood_s:.0f} s)")
            + f"; as many with one credential: {same_ms:.2f} ms",
            f"C1 CPU per request, {args.rounds} rounds of {args.requests}: none seen {statistics.median(none):.3f} ms, "
            f"{flooded:,} seen {statistics.median(known):.3f} ms, added {statistics.median(added):+.3f} ms "
            f"(rounds {min(added):+.3f} to {max(added):+.3f}); {rss}"]


REDACTION = r"""
import json, secrets, statistics, sys, time
from responses_parity.harness.wire.redaction import Redactor
count, budget, rounds = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
capture = json.loads(sys.argv[4])
def per_capture_us(redactor, n=300):
    began = time.perf_counter()
    for _ in range(n):
        json.dumps(redactor.redact(capture))
    return (time.perf_counter() - began) / n * 1e6
def interleaved(none, known):
    times = {"none": [], "known": []}
    for round_ in range(rounds):
        for name in (("none", "known") if round_ % 2 == 0 else ("known", "none")):
            times[name].append(per_capture_us(none if name == "none" else known))
    added = [k - n for k, n in zip(times["known"], times["none"])]
    return statistics.median(times["none"]), statistics.median(times["known"]), statistics.median(added)
none, redactor = Redactor(), Redactor()
began, learned = time.perf_counter(), 0
while learned < count and time.perf_counter() - began < budget:
    redactor.add(f"Bearer sk-bench-{secrets.token_hex(16)}")
    learned += 1
learn_us = (time.perf_counter() - began) / max(learned, 1) * 1e6
figures = {"learned": learned, "learn_us": learn_us, "levels": interleaved(none, redactor), "merged": None}
if hasattr(redactor, "_known") and hasattr(redactor._known, "compact"):  # the benchmark's only look inside
    redactor._known.compact()
    figures["merged"] = interleaved(none, redactor)
print(json.dumps(figures))
"""


def _typical_capture() -> str:
    message = {"id": "msg_68a9f0c2b4e48191", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "The capital of Italy is Rome, on the Tiber. " * 4,
                            "annotations": [], "logprobs": []}]}
    response = {"id": "resp_68a9f0c2b4e48191", "object": "response", "created_at": 1, "status": "completed",
                "model": "gpt-4.1-mini", "output": [message], "usage": {"input_tokens": 12, "output_tokens": 60},
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "metadata": {},
                "text": {"format": {"type": "text"}}, "instructions": "You are a helpful assistant."}
    return json.dumps({"request": {"method": "POST", "url": "http://127.0.0.1:8080/v1/responses",
                                   "body": {"model": "gpt-4.1-mini", "input": "What is the capital of Italy?"}},
                       "response": {"status": 200, "headers": {"content-type": "application/json",
                                                               "x-request-id": "req_0123456789abcdef"},
                                    "body": response, "sse": None},
                       "meta": {"path": "/v1/responses", "upstream": "http://127.0.0.1:8080",
                                "captured_at": "2026-01-01T00:00:00+00:00"}})


def redaction(checkout: Path, args: argparse.Namespace) -> str:
    ran = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", REDACTION, str(args.credentials),
                          str(args.flood_s), str(args.rounds * 2 + 1), _typical_capture()], capture_output=True,
                         text=True, check=True, timeout=args.flood_s + 900)
    figures = json.loads(ran.stdout)
    none, known, added = figures["levels"]
    merged = "" if figures["merged"] is None else \
        f"; once merged into one automaton {figures['merged'][1]:.0f} us ({figures['merged'][2]:+.0f} us)"
    return (f"R1 redacting one capture (medians of {args.rounds * 2 + 1} interleaved rounds): {none:.0f} us with no "
            f"secret known, {known:.0f} us with {figures['learned']:,} credentials known ({added:+.0f} us){merged}; "
            f"learning one took {figures['learn_us']:.0f} us on average")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="another checkout (with its own .venv) to compare against")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--base-streams", type=int, help="endless streams for --base (default: --streams; an "
                                                          "unbounded proxy may take minutes per hundred)")
    parser.add_argument("--wave", type=int, default=50)
    parser.add_argument("--read-kb", type=int, default=1536)
    parser.add_argument("--max-answer-mb", type=float, default=1.0)
    parser.add_argument("--body-mb", type=int, default=200)
    parser.add_argument("--credentials", type=int, default=10_000)
    parser.add_argument("--flood-s", type=float, default=180.0, help="the longest a flood of credentials may take")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="M1,M2,C1,R1", help="which measurements, comma-separated")
    args = parser.parse_args()
    checkouts = {"this": HERE, **({"base": args.base.resolve()} if args.base else {})}
    only = set(args.only.split(","))
    print(f"load average {' '.join(f'{load:.1f}' for load in psutil.getloadavg())}, {psutil.cpu_count()} cores")
    with CountingUpstream() as upstream, tempfile.TemporaryDirectory() as folder:
        base_url = upstream.url("echo").rsplit("/", 1)[0]
        for name, checkout in checkouts.items():
            print(f"{name}: {checkout}", flush=True)
            work = Path(folder) / name
            if "M1" in only:
                with proxy(checkout, base_url, work / "streams", "--max-answer-mb", str(args.max_answer_mb)) as running:
                    streams = args.base_streams if name == "base" and args.base_streams else args.streams
                    print("  " + endless_streams(running, streams, args), flush=True)
            if "M2" in only:
                with proxy(checkout, base_url, work / "body") as running:
                    print("  " + huge_body(running, args), flush=True)
            if "C1" in only:
                for line in credentials(checkout, upstream, work / "credentials", args):
                    print("  " + line, flush=True)
            if "R1" in only:
                print("  " + redaction(checkout, args), flush=True)


if __name__ == "__main__":
    main()
