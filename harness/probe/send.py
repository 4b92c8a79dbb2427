"""Sending probes to a target, and what each answer is reduced to (its `Outcome`).

A target that crashes, hangs or answers something other than JSON gives an outcome that says
so (a finding of the comparison), never an error of the harness. Probes a target accepts
reach its model: the scripted upstream answers every one of them with one short text turn (a
run registered for the probes, its marker in the base input; the run claims the requests a
probe's defect left without a marker too, so a script loaded for such requests is left alone),
so they end at once; a field a gateway passes on that OpenAI refuses, the upstream refuses as
OpenAI would (the run is strict), so the probe tells what the gateway does with it then. The objects
probes name (a stored response, a vector store, ...) are created on the target first
(`objects.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx2

from ...fixtures.upstream.script import ModelTurn, RunScript, new_run_token, run_marker
from ..engine.fixture_client import FixtureClient
from ..engine.targets import Target, http_client, send
from ..wire.exchange import Exchange
from .generate import Probe, all_probes
from .objects import create_objects, fill, filled_body

BASE_INPUT = "Answer with one word."
PROBE_ANSWER = ModelTurn(text="ok")
"""What the scripted model answers a probe the target accepted."""
OnProgress = Callable[[str, int, int], None]
"""Told how far sending has come: what is sent (`probes to <target>`), how many answered, of how many."""


@dataclass(frozen=True)
class Outcome:
    """One answer at the error-contract level: its status class, whether its body is OpenAI's
    error envelope (`error` with a string `message` and `type`, and the keys `param` and
    `code`), and the envelope's `type`, `code` and `param`. `detail` says more for people (the
    error message, why no answer came) and is not compared."""

    status: int | None
    body: str
    """`envelope` (OpenAI's error envelope), `error` (an `error` not shaped as OpenAI's),
    `json` (JSON without an error), `not json`, `stream` (an event stream), `no answer`."""
    type: str | None = None
    code: str | None = None
    param: str | None = None
    detail: str = ""
    unsaid: frozenset[str] = frozenset()
    """For an expectation, the parts it does not say (`code`, `param`): any is met."""

    @property
    def status_class(self) -> str:
        return "no answer" if self.status is None else f"{self.status // 100}xx"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["unsaid"] = sorted(self.unsaid)
        return data if self.unsaid else {key: value for key, value in data.items() if key != "unsaid"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(**{key: data.get(key) for key in ("status", "body", "type", "code", "param")},
                   detail=data.get("detail") or "", unsaid=frozenset(data.get("unsaid") or ()))


def outcome(exchange: Exchange) -> Outcome:
    """The outcome of one exchange."""
    if exchange.transport_error is not None:
        return Outcome(exchange.status, "no answer", detail=exchange.transport_error)
    if exchange.sse is not None:
        return Outcome(exchange.status, "stream")
    body = exchange.body
    if not isinstance(body, dict | list) or any(d.rule in ("json", "encoding") for d in exchange.defects):
        return Outcome(exchange.status, "not json", detail=str(body)[:200])
    error = body.get("error") if isinstance(body, dict) else None
    if error is None:
        return Outcome(exchange.status, "json")
    if not isinstance(error, dict):
        return Outcome(exchange.status, "error", detail=str(error)[:200])
    shaped = isinstance(error.get("message"), str) and isinstance(error.get("type"), str) and \
        "param" in error and "code" in error
    values = [value if isinstance(value, str) or value is None else str(value)
              for value in (error.get("type"), error.get("code"), error.get("param"))]
    return Outcome(exchange.status, "envelope" if shaped else "error", *values, detail=str(error.get("message"))[:300])


def request_path(target: Target, probe: Probe, objects: dict[str, str]) -> str:
    """Where the probe goes on the target: its API's path beside the target's Responses
    endpoint (as on OpenAI; Chat Completions at the target's chat path), the objects it names
    filled in."""
    suffix = fill(probe.suffix, objects)
    if probe.endpoint == "responses":
        return target.responses_path + suffix
    if probe.endpoint == "chat":
        return target.chat_path + suffix
    return f"{target.responses_path.rsplit('/', 1)[0]}/{probe.endpoint}{suffix}"


def probes_for(target: Target, ids: Sequence[str], run: str) -> list[Probe]:
    """The probes `ids` names, made with the target's model and the run's marker."""
    made = {probe.id: probe for probe in all_probes(target.model, f"{BASE_INPUT} {run_marker(run, 0)}")}
    return [made[probe_id] for probe_id in ids]


async def send_probes(target: Target, ids: Sequence[str], *, upstream_url: str | None, jobs: int,
                      progress: OnProgress = lambda what, done, total: None) -> dict[str, Outcome]:
    """Each probe's outcome on the target, `jobs` at a time, `progress` told as each comes; with
    `upstream_url` (the scripted upstream the target's model is) the probes' run is registered
    there first and forgotten after."""
    run = new_run_token()
    probes = probes_for(target, ids, run)
    outcomes: dict[str, Outcome] = {}
    limit = asyncio.Semaphore(jobs)
    async with http_client(httpx2.Timeout(target.timeout_s)) as http:
        fixtures = FixtureClient(http, upstream_url, {}) if upstream_url else None
        if fixtures is not None:  # a probe whose defect took out the marker is the run's too
            await fixtures.register(run, RunScript(steps=[[PROBE_ANSWER] * len(probes)], unmarked=True, strict=True))
        objects = await create_objects(http, target, f"{BASE_INPUT} {run_marker(run, 0)}")

        async def one(probe: Probe) -> None:
            async with limit:
                exchange = await send(http, target, probe.method, request_path(target, probe, objects),
                                      filled_body(probe.body, objects))
            outcomes[probe.id] = outcome(exchange)
            progress(f"probes to {target.name}", len(outcomes), len(probes))

        try:
            await asyncio.gather(*(one(probe) for probe in probes))
        finally:
            if fixtures is not None:
                await fixtures.forget(run)
    return {probe_id: outcomes[probe_id] for probe_id in ids}
