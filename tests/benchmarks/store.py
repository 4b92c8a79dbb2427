"""Benchmark: what the reference gateway's SQLite store costs per response, and how big it grows.

The store as of a git revision (`--before`, default the merge-base with `main`) and the store
as it is now (retention on, default settings unless `--keep N`) run side by side in one
process, in interleaved rounds, and print:

- per response, through the store directly (`save_end` of a completed text response, as the
  gateway stores it): the median cost in microseconds in `:memory:` and on a WAL file with
  `synchronous=FULL`, the paired ratio now/before round by round, and commits per response;
- the size of a `:memory:` store (page_count x page_size) after each of `--sizes` responses;
- through a reference gateway served on loopback in this process (the scripted upstream in a
  thread too), one per store: the median time of a JSON request, the paired ratio, commits per
  response, and each store's size after the run (`--gateway-keep` finished responses kept).

    python tests/benchmarks/store.py [--rounds N] [--before REV] [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference_impl"))

from sql_trace import SqlTrace

from responses_parity.fixtures.upstream.app import build_upstream_app
from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.reference_impl import build_gateway_app, runtime
from responses_parity.reference_impl.chain import Chain
from responses_parity.reference_impl.retention import AS_OPENAI, Retention
from responses_parity.reference_impl.store import SqliteStore, StoredResponse
from responses_parity.reference_impl.upstream.items import Message

REPO = Path(__file__).resolve().parents[2]
Store = Any
"""A `SqliteStore` of either version."""
MakeStore = Callable[[str, Retention], Store]
"""Opens a store at a path with a retention (which the one before ignores: it had none)."""


def store_before(revision: str) -> MakeStore:
    """The `SqliteStore` of `reference_impl/store.py` at `revision`, loaded next to today's
    modules (its relative imports resolve to them)."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:reference_impl/store.py"],
                            check=True, capture_output=True, text=True).stdout
    name = "responses_parity.reference_impl._store_before"
    module = types.ModuleType(name)
    module.__package__ = "responses_parity.reference_impl"
    sys.modules[name] = module  # its dataclasses look their module up
    exec(compile(source, f"{revision}:reference_impl/store.py", "exec"), module.__dict__)
    return lambda path, retention: module.SqliteStore(path)


def completed(n: int) -> tuple[StoredResponse, list[dict[str, Any]]]:
    """A completed one-message response, with its input item, chain and audit, as a plain
    request leaves them."""
    response_id = f"resp_{n:08d}"
    text = "The capital of Italy is Rome, a city of some 2.8 million people on the Tiber. " * 3
    message = {"id": f"msg_{n:08d}", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}
    user = {"id": f"msg_in_{n:08d}", "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "What is the capital of Italy?"}]}
    response = {"id": response_id, "object": "response", "created_at": int(time.time()), "status": "completed",
                "model": "gpt-4.1-mini", "output": [message], "usage": {"input_tokens": 12, "output_tokens": 60,
                                                                      "total_tokens": 72}, "store": True,
                "background": False, "error": None, "incomplete_details": None, "instructions": None,
                "metadata": {}, "parallel_tool_calls": True, "temperature": 1.0, "tool_choice": "auto",
                "tools": [], "top_p": 1.0, "previous_response_id": None, "text": {"format": {"type": "text"}}}
    chain = Chain(transcript=(Message("user", user["content"], user["id"]), Message("assistant", text, message["id"])),
                  item_ids=frozenset({user["id"], message["id"]}))
    audit = [{"kind": "model_round", "round": 1, "status": "ok", "tool_calls": 0, "latency_ms": 2}]
    return StoredResponse(response, [user], chain), audit


async def save(store: Store, n: int) -> None:
    record, audit = completed(n)
    await store.save_end(record.id, audit, response=record, events=[], conversation_items=None)


async def per_response_us(store: Store, start: int, count: int) -> float:
    began = time.perf_counter()
    for n in range(start, start + count):
        await save(store, n)
    return (time.perf_counter() - began) / count * 1e6


def size_mb(store: Store) -> float:
    db = store._db  # the benchmark's only look inside
    return db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0] / 1e6


def paired(name: str, times: dict[str, list[float]], unit: str) -> None:
    before, now = times["before"], times["now"]
    ratios = [n / b for n, b in zip(now, before, strict=True)]
    print(f"  {name:34} before {statistics.median(before):8.1f} {unit}   now {statistics.median(now):8.1f} {unit}"
          f"   now/before median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


async def direct(stores: dict[str, MakeStore], retention: Retention, rounds: int, sizes: list[int]) -> None:
    print(f"through the store directly, {rounds} interleaved rounds:")
    with tempfile.TemporaryDirectory() as folder:
        for label, path, batch in ((":memory:", ":memory:", 1000), ("WAL file, synchronous=FULL", None, 100)):
            opened = {name: make(path or f"{folder}/{name}.sqlite3", retention) for name, make in stores.items()}
            times: dict[str, list[float]] = {name: [] for name in stores}
            for store in opened.values():  # warm up, uncounted
                await per_response_us(store, -batch, batch)
            for round_ in range(rounds):
                order = list(opened) if round_ % 2 == 0 else list(reversed(opened))
                for name in order:
                    times[name].append(await per_response_us(opened[name], round_ * batch, batch))
            paired(f"{label}, per response", times, "us")
            for store in opened.values():
                store.close()
    for name, make in stores.items():
        with SqlTrace().connections() as trace:
            store = make(":memory:", retention)
        trace.run.clear()
        await per_response_us(store, 0, 100)
        print(f"  commits per response, {name}: {trace.commits() / 100:.2f}")
        store.close()
    print(f"size of a :memory: store after N responses (now keeps {retention.max_count:,}):")
    for name, make in stores.items():
        store, done, figures = make(":memory:", retention), 0, []
        for target in sizes:
            await per_response_us(store, done, target - done)
            done = target
            figures.append(f"{target:,}: {size_mb(store):7.1f} MB")
        print(f"  {name:7} " + "   ".join(figures))
        store.close()


def through_gateway(stores: dict[str, MakeStore], rounds: int, per_round: int, keep: int) -> None:
    upstream = ServerThread(build_upstream_app()).start()
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Rome."}]]})
    httpx2.put(f"{upstream.url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    body = {"model": "m", "input": f"Capital of Italy? {run_marker(run, 0)}"}
    built, gateways, traces = runtime.SqliteStore, {}, {}
    try:
        for name, make in stores.items():
            trace, held = SqlTrace(), []
            runtime.SqliteStore = lambda path, retention, make=make, held=held: held.append(
                make(path, retention)) or held[-1]
            with trace.connections():
                app = build_gateway_app(reference_config(upstream.url, response_retention_max=keep))
            gateways[name] = (ServerThread(app).start(), held)
            traces[name] = trace
    finally:
        runtime.SqliteStore = built
    times: dict[str, list[float]] = {name: [] for name in stores}
    try:
        with httpx2.Client(timeout=30) as client:
            for name, (server, _) in gateways.items():  # warm up, uncounted
                for _ in range(per_round // 4):
                    client.post(f"{server.url}/v1/responses", json=body).raise_for_status()
                traces[name].run.clear()
            for round_ in range(rounds):
                order = list(gateways) if round_ % 2 == 0 else list(reversed(gateways))
                for name in order:
                    url = gateways[name][0].url
                    began = time.perf_counter()
                    for _ in range(per_round):
                        client.post(f"{url}/v1/responses", json=body).raise_for_status()
                    times[name].append((time.perf_counter() - began) / per_round * 1e3)
        requests = rounds * per_round
        print(f"through a reference gateway (:memory:, keeps {keep:,}), {rounds} interleaved rounds of {per_round} "
              f"JSON requests after {per_round // 4} to warm up:")
        paired("per request", times, "ms")
        for name, (_, held) in gateways.items():
            commits = traces[name].commits()
            print(f"  {name:7} commits per response {commits / requests:.2f}, size after "
                  f"{requests + per_round // 4:,} requests {size_mb(held[0]):.1f} MB")
    finally:
        for server, _ in gateways.values():
            server.stop()
        upstream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", default=None, help="git revision of the store before (default: merge-base "
                                                       "with main)")
    parser.add_argument("--keep", type=int, default=AS_OPENAI.max_count, help="now: finished responses kept")
    parser.add_argument("--sizes", default="10000,100000", help="responses after which to print the size")
    parser.add_argument("--gateway-per-round", type=int, default=200)
    parser.add_argument("--gateway-keep", type=int, default=1000)
    args = parser.parse_args()
    before = args.before or subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], check=True,
                                           capture_output=True, text=True).stdout.strip()
    retention = Retention(AS_OPENAI.max_age_s, args.keep)
    stores: dict[str, MakeStore] = {"before": store_before(before), "now": SqliteStore}
    print(f"before: reference_impl/store.py at {before[:10]}; now: the working tree")
    asyncio.run(direct(stores, retention, args.rounds, sorted(int(size) for size in args.sizes.split(","))))
    through_gateway(stores, args.rounds, args.gateway_per_round, args.gateway_keep)


if __name__ == "__main__":
    main()
