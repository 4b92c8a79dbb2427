"""Benchmark: what one large request costs the reference gateway's other clients, and its memory.

For each checkout given (this one, and `--base` for another with its own `.venv`, e.g. main),
a reference gateway is served on loopback in a child process (`parity serve reference`, a WAL
store file in a temporary folder; no model is called) and this prints:

- memory: the gateway's resident set (psutil) before, at its peak during, and settled after
  `--uploads` concurrent uploads of `--upload-mib` MiB each (`POST /v1/files`), with the HTTP
  statuses they got (goal: at most +200 MiB at the peak, back within 20 MiB after);
- stalls: while each large request below is sent, a small unrelated request (`GET
  /v1/conversations/{id}`, which reads the store) is sent again every `--probe-ms` ms on a
  connection of its own; the longest and the 99th percentile of its latency over `--rounds`
  rounds (median of the rounds), with the large request's status and duration (goal: under
  50 ms). The large requests: a conversation created with 100,000 items, 100,000 items added
  to one, a vector-store search with a 100,000-word query, a vector store created with one file
  id 10,000 times, and paging through a 10,000-item conversation 100 items at a time (the time
  of all 100 pages). Also: a file batch with one file id 2,000 times (the most a batch takes),
  and a response with 100,000 input items (it fails at the model, which is not served: what is
  measured is reading and checking the request and building the model request). The same probe
  with nothing else sent is the floor.

    python tests/benchmarks/bounded_gateway.py [--base /work/main] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psutil

from responses_parity.harness.engine.child_process import ChildProcess

HERE = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
SLOW_S = 600.0
"""How long one large request may take before the benchmark gives up on it."""
MIB = 2**20
LARGE = 100_000


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(checkout: Path, folder: str) -> Iterator[tuple[str, int]]:
    """A reference gateway of `checkout` until the block ends; yields its URL and pid once it listens."""
    port = _free_port()
    command = [str(checkout / ".venv" / "bin" / "python"), "-m", "responses_parity.harness", "serve", "reference",
               "--port", str(port), "--upstream", "http://127.0.0.1:9/v1", "--store", f"{folder}/store.sqlite3"]
    with tempfile.TemporaryFile() as log:  # not a pipe: a full one would block the server
        process = ChildProcess(command, cwd=checkout, stdout=log, stderr=log, grace_s=10)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"the gateway exited: {log.read().decode(errors='replace')}")
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing listens on port {port}")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}", process.pid
        finally:
            process.stop()


@dataclass
class Figures:
    label: str
    memory: dict[str, float] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    stalls: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)
    """Per large request: (longest probe ms, p99 probe ms, "status in seconds") of each round."""


class Sampler:
    """The resident set of a process, read every few milliseconds in a thread: its peak and last."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.peak = self.last = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.last = self._process.memory_info().rss
            self.peak = max(self.peak, self.last)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def memory(url: str, pid: int, args: argparse.Namespace, figures: Figures) -> None:
    content = (b"The quick brown fox jumps over the lazy dog. " * (args.upload_mib * MIB // 45 + 1))[
        :args.upload_mib * MIB]
    with httpx2.Client(base_url=url, timeout=SLOW_S) as client:  # warm up: the multipart code, the store's pages
        for _ in range(2):
            client.post("/v1/files", files={"file": ("warm.txt", content[:MIB])},
                        data={"purpose": "assistants"}).raise_for_status()
    time.sleep(1)
    before = psutil.Process(pid).memory_info().rss

    async def upload(client: httpx2.AsyncClient) -> int:
        answer = await client.post("/v1/files", files={"file": ("big.txt", content)}, data={"purpose": "assistants"})
        return answer.status_code

    async def all_uploads() -> list[int]:
        limits = httpx2.Limits(max_connections=args.uploads, max_keepalive_connections=args.uploads)
        async with httpx2.AsyncClient(base_url=url, timeout=SLOW_S, limits=limits) as client:
            return await asyncio.gather(*(upload(client) for _ in range(args.uploads)))

    with Sampler(pid) as sampler:
        statuses = asyncio.run(all_uploads())
        time.sleep(args.settle_s)
    figures.memory = {"before": before / MIB, "peak": sampler.peak / MIB, "settled": sampler.last / MIB}
    for status in statuses:
        figures.statuses[status] = figures.statuses.get(status, 0) + 1


class Probe:
    """A small request sent again and again on a connection of its own; the latencies of those
    that overlapped a window."""

    def __init__(self, url: str, path: str, every_s: float) -> None:
        self._client = httpx2.Client(base_url=url, timeout=SLOW_S)
        self._path, self._every_s = path, every_s
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            self._client.get(self._path).raise_for_status()
            self._samples.append((started, time.perf_counter()))
            time.sleep(self._every_s)

    def during(self, began: float, ended: float) -> list[float]:
        """Latencies in ms of the probes that were under way at some moment of [began, ended]."""
        return [(end - start) * 1000 for start, end in list(self._samples) if end >= began and start <= ended]

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._client.close()


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) >= 2 else values[0]


def stalls(url: str, args: argparse.Namespace, figures: Figures) -> None:
    with httpx2.Client(base_url=url, timeout=SLOW_S) as client:
        conversation = client.post("/v1/conversations", json={}).json()["id"]
        words = " ".join(f"word{n}" for n in range(2000))
        file_id = client.post("/v1/files", files={"file": ("words.txt", words.encode())},
                              data={"purpose": "assistants"}).json()["id"]
        store = client.post("/v1/vector_stores", json={"file_ids": [file_id]}).json()["id"]
        paged = client.post("/v1/conversations", json={}).json()["id"]
        for start in range(0, 10_000, 20):
            client.post(f"/v1/conversations/{paged}/items",
                        json={"items": [{"role": "user", "content": f"item {n}"} for n in range(start, start + 20)]}
                        ).raise_for_status()
        items = [{"type": "message", "role": "user", "content": "hello"} for _ in range(LARGE)]
        query = " ".join(f"word{n}" for n in range(LARGE))

        def send(method: str, path: str, body: object) -> Callable[[], int]:
            payload = json.dumps(body).encode()
            return lambda: client.request(method, path, content=payload,
                                          headers={"content-type": "application/json"}).status_code

        def pages() -> int:
            after, status = None, 200
            for _ in range(100):
                answer = client.get(f"/v1/conversations/{paged}/items",
                                    params={"limit": 100, "order": "asc", **({"after": after} if after else {})})
                status = answer.status_code
                after = answer.json().get("last_id")
            return status

        large = {
            "nothing (the floor)": lambda: time.sleep(1) or 200,
            "conversation with 100,000 items": send("POST", "/v1/conversations", {"items": items}),
            "100,000 items added": send("POST", f"/v1/conversations/{conversation}/items", {"items": items}),
            "search, 100,000-word query": send("POST", f"/v1/vector_stores/{store}/search", {"query": query}),
            "store with one file id x10,000": send("POST", "/v1/vector_stores", {"file_ids": [file_id] * 10_000}),
            "file batch with one file id x2,000": send("POST", f"/v1/vector_stores/{store}/file_batches",
                                                       {"file_ids": [file_id] * 2000}),
            "response with 100,000 input items": send("POST", "/v1/responses", {"model": "m", "input": items}),
            "100 pages of 100 items": pages,
        }
        with Probe(url, f"/v1/conversations/{conversation}", args.probe_ms / 1000) as probe:
            time.sleep(0.5)
            for round_ in range(args.rounds):
                for name, sent in large.items():
                    began = time.perf_counter()
                    status = sent()
                    ended = time.perf_counter()
                    time.sleep(0.2)  # let the probe under way at the end finish
                    latencies = probe.during(began, ended)
                    figures.stalls.setdefault(name, []).append(
                        (max(latencies), _p99(latencies), f"{status} in {ended - began:.2f} s"))
                print(f"{figures.label}: round {round_ + 1}/{args.rounds} done", file=sys.stderr)


def measure(label: str, checkout: Path, args: argparse.Namespace) -> Figures:
    figures = Figures(label)
    with tempfile.TemporaryDirectory() as folder, serving(checkout, folder) as (url, pid):
        memory(url, pid, args, figures)
        print(f"{label}: memory measured", file=sys.stderr)
    with tempfile.TemporaryDirectory() as folder, serving(checkout, folder) as (url, _):
        stalls(url, args, figures)
    return figures


def report(all_figures: list[Figures], args: argparse.Namespace) -> None:
    print(f"\n{args.uploads} concurrent uploads of {args.upload_mib} MiB, the gateway's RSS "
          f"(settled: {args.settle_s} s after the last answer):")
    for figures in all_figures:
        m = figures.memory
        print(f"  {figures.label:10} before {m['before']:7.1f} MiB   peak {m['peak']:7.1f} MiB "
              f"({m['peak'] - m['before']:+7.1f})   settled {m['settled']:7.1f} MiB "
              f"({m['settled'] - m['before']:+7.1f})   statuses {dict(sorted(figures.statuses.items()))}")
    print(f"\nan unrelated GET every {args.probe_ms} ms while a large request is sent; its latency in ms, "
          f"the median over {args.rounds} rounds of each round's longest and p99:")
    for name in all_figures[0].stalls:
        for figures in all_figures:
            rounds = figures.stalls[name]
            longest = statistics.median(r[0] for r in rounds)
            p99 = statistics.median(r[1] for r in rounds)
            print(f"  {name:34} {figures.label:10} longest {longest:9.1f}   p99 {p99:9.1f}   "
                  f"(the large request: {', '.join(r[2] for r in rounds)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="another checkout (with its own .venv) to measure too")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--uploads", type=int, default=50)
    parser.add_argument("--upload-mib", type=int, default=8)
    parser.add_argument("--settle-s", type=float, default=5.0)
    parser.add_argument("--probe-ms", type=float, default=2.0)
    args = parser.parse_args()
    checkouts = [("this", HERE)] + ([("base", args.base.resolve())] if args.base else [])
    report([measure(label, checkout, args) for label, checkout in checkouts], args)


if __name__ == "__main__":
    main()
