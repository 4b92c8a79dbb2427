"""Nothing acknowledged is lost: a gateway killed with SIGKILL while requests are in flight
keeps every response a client was shown completed, and its restart finishes the background
responses it left unfinished.

The gateway runs as a child process (`parity serve reference`) on a SQLite file, against the
session's scripted upstream. Fifteen clients keep fast requests going (streamed, JSON, background
polled, background streamed, in turn); five more send one slow request each, which the upstream
holds, so they are mid-flight when the child is killed. A streamed response is also fetched as
soon as its client sees it completed, which must find it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from responses_parity.fixtures.upstream.script import new_run_token, run_marker
from responses_parity.harness.engine.child_process import ChildProcess
from responses_parity.harness.engine.stack import Stack

KINDS = ("stream", "json", "background", "background_stream")
FAST_CLIENTS = 15
SLOW_KINDS = ("stream", "json", "background", "background_stream", "background_stream")
SLOW_S = 60.0
"""The upstream holds a slow request this long: it is in flight at the kill."""
KILL_AFTER = 30
"""Responses seen completed before the kill."""
FINAL = ("completed", "failed", "incomplete", "cancelled")
DEADLINE_S = 60.0
LISTENING = re.compile(r"reference gateway listening on (?P<url>http://\S+)")
StartGateway = Callable[[Path], tuple[ChildProcess, str]]


@dataclass
class Seen:
    """What the clients were shown before the gateway died."""

    completed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Response id -> the output it had when a client saw it completed."""
    kinds: Counter[str] = field(default_factory=Counter)
    background: set[str] = field(default_factory=set)
    last_event: dict[str, int] = field(default_factory=dict)
    """Background stream id -> the last sequence number its client saw."""
    errors: list[str] = field(default_factory=list)
    """Failures before the kill (none are expected)."""
    kill: Callable[[], None] | None = None
    """Once set, the next completion a stream shows kills the gateway at once (a crash just
    after a client was shown an end loses it if the end was shown before it was stored)."""
    killed: asyncio.Event = field(default_factory=asyncio.Event)

    def saw_completed(self, kind: str, response: dict[str, Any], streamed: bool = False) -> None:
        if response["status"] != "completed":
            return
        self.completed[response["id"]] = response["output"]
        self.kinds[kind] += 1
        if streamed and self.kill is not None and not self.killed.is_set():
            self.killed.set()
            self.kill()


@pytest.fixture
def gateways(stack: Stack, tmp_path: Path) -> Iterator[StartGateway]:
    """Starts reference gateways as child processes on one SQLite file, each on a port it picks
    itself (named in its log); stops (by PID) any still running at the end."""
    started: list[ChildProcess] = []

    def start(database: Path) -> tuple[ChildProcess, str]:
        log = tmp_path / f"gateway-{len(started)}.log"
        with log.open("wb") as sink:
            process = ChildProcess(
                [sys.executable, "-m", "responses_parity.harness", "serve", "reference", "--upstream",
                 f"{stack.upstream_url}/v1", "--store", str(database), "--port", "0"],
                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started.append(process)
        deadline = time.monotonic() + DEADLINE_S
        while not (listening := LISTENING.search(log.read_text())):
            assert process.poll() is None, f"the gateway exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the gateway did not start within {DEADLINE_S}s:\n{log.read_text()}"
            time.sleep(0.05)  # poll interval while waiting for the gateway to say where it listens
        return process, listening["url"]

    yield start
    for process in started:
        process.stop()


async def register(upstream: httpx2.AsyncClient, text: str, delay: float = 0.0) -> str:
    run = new_run_token()
    answer = await upstream.put(f"/__parity/runs/{run}", json={"steps": [[{"text": text, "delay": delay}]]})
    answer.raise_for_status()
    return run


async def create(client: httpx2.AsyncClient, kind: str, run: str, key: str, seen: Seen) -> None:
    """One request of `kind`, noting what its client is shown."""
    body: dict[str, Any] = {"model": "m", "input": f"crash {run_marker(run, 0)}",
                            "stream": kind in ("stream", "background_stream"),
                            "background": kind in ("background", "background_stream")}
    headers = {"authorization": f"Bearer {key}"}
    if body["stream"]:
        response_id = None
        async with client.stream("POST", "/v1/responses", json=body, headers=headers) as answer:
            assert answer.status_code == 200, await answer.aread()
            async for line in answer.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                response_id = response_id or event["response"]["id"]
                if kind == "background_stream":
                    seen.background.add(response_id)
                    seen.last_event[response_id] = event["sequence_number"]
                if event["type"] == "response.completed":
                    seen.saw_completed(kind, event["response"], streamed=True)
                    retrieved = await client.get(f"/v1/responses/{response_id}")
                    assert retrieved.status_code == 200, f"{response_id} was streamed completed, then: {retrieved.text}"
        return
    answer = await client.post("/v1/responses", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    response = answer.json()
    if kind == "background":
        seen.background.add(response["id"])
    while response["status"] not in FINAL:
        response = (await client.get(f"/v1/responses/{response['id']}")).json()
    seen.saw_completed(kind, response)


async def until_killed(work: Awaitable[None], seen: Seen) -> None:
    """Run `work`; a failure is expected only once the gateway was killed."""
    try:
        await work
    except (httpx2.HTTPError, AssertionError, KeyError, ValueError) as error:
        if not seen.killed.is_set():
            seen.errors.append(f"{type(error).__name__}: {error}")


async def load_then_kill(url: str, upstream_url: str, process: ChildProcess) -> Seen:
    """Drive the load; once enough was completed and every slow request has reached the
    upstream, kill the gateway as the next completion is seen; let the clients read what was
    sent before it died."""
    seen = Seen()
    limits = httpx2.Limits(max_connections=64)
    async with httpx2.AsyncClient(base_url=url, timeout=DEADLINE_S, limits=limits) as client, \
            httpx2.AsyncClient(base_url=upstream_url, timeout=DEADLINE_S) as upstream:
        slow_runs = [await register(upstream, f"slow {index}", SLOW_S) for index in range(len(SLOW_KINDS))]

        async def fast(worker: int) -> None:
            number = worker
            while not seen.killed.is_set():
                run = await register(upstream, f"answer {number}")
                await create(client, KINDS[number % len(KINDS)], run, f"fast-{worker % 4}", seen)
                number += FAST_CLIENTS

        tasks = [asyncio.create_task(until_killed(fast(worker), seen)) for worker in range(FAST_CLIENTS)]
        tasks += [asyncio.create_task(until_killed(create(client, kind, run, "slow", seen), seen))
                  for kind, run in zip(SLOW_KINDS, slow_runs, strict=True)]

        async def reached_upstream(run: str) -> bool:
            return bool((await upstream.get(f"/__parity/runs/{run}")).json()["requests"])

        deadline = time.monotonic() + DEADLINE_S
        while len(seen.completed) < KILL_AFTER or not all([await reached_upstream(run) for run in slow_runs]):
            assert not seen.errors, seen.errors
            assert time.monotonic() < deadline, f"only {len(seen.completed)} completed within {DEADLINE_S}s"
            await asyncio.sleep(0.02)  # poll interval while waiting for the load to get there
        seen.kill = lambda: os.kill(process.pid, signal.SIGKILL)
        await asyncio.wait_for(seen.killed.wait(), DEADLINE_S)
        await asyncio.to_thread(process.wait, DEADLINE_S)
        await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    return seen


async def stored_after_restart(url: str, seen: Seen) -> tuple[dict[str, httpx2.Response], dict[str, list[dict]]]:
    """Each response the clients saw, as the restarted gateway returns it; and the events of
    each background stream resumed after the last event its client saw."""
    async with httpx2.AsyncClient(base_url=url, timeout=DEADLINE_S) as client:
        ids = sorted(set(seen.completed) | seen.background)
        answers = dict(zip(ids, await asyncio.gather(*(client.get(f"/v1/responses/{i}") for i in ids)), strict=True))

        async def resume(response_id: str, last: int) -> list[dict]:
            async with client.stream("GET", f"/v1/responses/{response_id}",
                                     params={"stream": "true", "starting_after": last}) as resumed:
                return [json.loads(line.removeprefix("data: ")) async for line in resumed.aiter_lines()
                        if line.startswith("data: ")]

        streams = list(seen.last_event.items())
        resumed = await asyncio.gather(*(resume(response_id, last) for response_id, last in streams))
    return answers, dict(zip([response_id for response_id, _ in streams], resumed, strict=True))


def test_a_killed_gateway_keeps_what_clients_saw_and_finishes_the_rest(gateways: StartGateway, stack: Stack,
                                                                        tmp_path: Path) -> None:
    database = tmp_path / "gateway.sqlite3"
    process, url = gateways(database)
    seen = asyncio.run(load_then_kill(url, stack.upstream_url or "", process))
    assert not seen.errors, seen.errors
    assert all(seen.kinds[kind] for kind in KINDS), seen.kinds

    _, url = gateways(database)
    answers, resumed = asyncio.run(stored_after_restart(url, seen))
    lost = {i for i in seen.completed if answers[i].status_code != 200}
    assert not lost, f"{len(lost)} of {len(seen.completed)} responses seen completed are gone"
    changed = {i for i, output in seen.completed.items()
               if answers[i].json()["status"] != "completed" or answers[i].json()["output"] != output}
    assert not changed, f"{len(changed)} of {len(seen.completed)} responses seen completed are stored otherwise"

    background = {i: answers[i].json() for i in seen.background}
    unfinished = {i for i, response in background.items() if response["status"] not in FINAL}
    assert not unfinished, f"{len(unfinished)} of {len(background)} background responses are left unfinished"
    interrupted = {i: response for i, response in background.items() if response["status"] == "failed"}
    assert interrupted, "no background response was in flight at the kill"
    assert all(response["error"]["code"] == "server_error" for response in interrupted.values()), interrupted

    for response_id, events in resumed.items():
        last = seen.last_event[response_id]
        assert all(event["sequence_number"] > last for event in events), (last, events)
        if response_id in interrupted:
            assert events and events[-1]["type"] == "response.failed", (response_id, last, events)

    with contextlib.closing(sqlite3.connect(database)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
