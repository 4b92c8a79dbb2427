"""The engine: run a scenario's steps in one stream mode against one target, check each
exchange, and report results as events. The CLI, the pytest plugin and the reports only
consume what it produces; it imports none of them.

Per scenario run the engine picks a fresh run token, registers the scripted model turns
with the upstream, and marks every request's first user message with the run and the step
that started its conversation, so the upstream answers the right turn even when runs go in
parallel or the gateway rewrites the request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol, TypeVar

import httpx2
from pydantic import ValidationError

from ...fixtures.upstream.script import ModelTurn, RunScript, new_run_token, run_marker
from ..errors import HarnessError
from ..judge.against import Against
from ..judge.cause import gateway_error
from ..judge.judgement import Case, judge
from ..judge.results import ScenarioResult, StepResult, UnitFinished
from ..judge.step_conditions import over_before_disconnect, polled_in_vain, upstream_not_checked, waited_in_vain
from ..model.attribution import Sent, attribute
from ..model.contract import chat_completion
from ..model.findings import Finding
from ..model.observed import Observed
from ..scenario.capabilities import missing_capability
from ..scenario.expectations import Expect
from ..scenario.fixtures import McpFixture
from ..scenario.loader import LoadedScenario
from ..scenario.model import GatewaySetup, Mode, Scenario, Step, Upload, Wait
from ..scenario.placeholders import OutputView, Unresolvable, render
from ..wire.exchange import Exchange
from .conditions import wait_until
from .socket import Socket
from .fixture_client import FixtureClient
from .targets import Form, Target, send

_CONTINUATION_ITEM_TYPES = {"function_call", "reasoning", "mcp_call", "mcp_list_tools", "mcp_approval_request",
                            "mcp_approval_response", "function_call_output", "compaction"}


_Part = TypeVar("_Part", Expect, ModelTurn)


def _rendered(spec: _Part, context: dict[str, Any], where: str) -> _Part:
    """An expectation or a scripted model turn with the placeholders in its strings resolved
    (fields left out stay left out, so they are still not compared); raises `HarnessError`
    when a placeholder gives a value of the wrong type."""
    try:
        return type(spec).model_validate(render(spec.model_dump(mode="json", exclude_unset=True), context, where))
    except ValidationError as error:
        problem = error.errors()[0]
        field = ".".join(str(part) for part in problem["loc"])
        raise HarnessError(f"{where}.{field}: a placeholder gave {problem['input']!r}: {problem['msg']}") from error


def _form(upload: Upload, context: dict[str, Any], where: str) -> Form:
    """The multipart form an `upload` describes, placeholders resolved."""
    rendered = render(upload.model_dump(exclude_none=True), context, where)
    fields = {name: str(value) for name, value in rendered.get("fields", {}).items()}
    if "purpose" in rendered:
        fields["purpose"] = str(rendered["purpose"])
    file = rendered.get("file")
    files = {"file": (str(file["name"]), str(file["content"]).encode())} if file else {}
    return Form(fields, files)


def mark_first_user_message(body: dict[str, Any], marker: str) -> dict[str, Any]:
    """The body with `marker` appended to its first user message (of `input`, or of a chat
    request's `messages`); unchanged if it has none."""
    key = "messages" if "messages" in body else "input"
    content = body.get(key)
    if isinstance(content, str):
        return body | {key: f"{content} {marker}"}
    if not isinstance(content, list):
        return body
    items = list(content)
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            text = item.get("content")
            part_type = "text" if key == "messages" else "input_text"
            if isinstance(text, str):
                items[index] = item | {"content": f"{text} {marker}"}
            elif isinstance(text, list):
                items[index] = item | {"content": [*text, {"type": part_type, "text": marker}]}
            return body | {key: items}
    return body


def _why_not_sent(error: HarnessError, run: _Run) -> str:
    """Why a step could not be prepared: when it needs what an earlier step's answer lacks and
    that answer was an error, that error first, since it is why (the step's own failure is
    reported there)."""
    needed = error.step if isinstance(error, Unresolvable) else None
    earlier = next((step for step in run.steps if step.step_id == needed), None)
    if earlier is None or earlier.exchange is None or (answered := gateway_error(earlier.exchange)) is None:
        return str(error)
    return f"it needs what step `{needed}` answered, which was {answered[0]} ({error})"


def _step_view(exchange: Exchange) -> dict[str, Any]:
    response = exchange.latest_response() or {}
    return {"response": response, "output": OutputView(response.get("output") or []), "status": exchange.status,
            "body": exchange.body, "completion": chat_completion(exchange)}


@dataclass
class _Chains:
    """Which step started the conversation each step belongs to."""

    chain_of: list[int] = field(default_factory=list)
    by_response: dict[str, int] = field(default_factory=dict)
    by_conversation: dict[str, int] = field(default_factory=dict)
    last: int | None = None

    def place(self, index: int, step: Step, steps: Sequence[Step], body: Any) -> int:
        body = body if isinstance(body, dict) else {}
        conversation = body.get("conversation")
        conversation = conversation.get("id") if isinstance(conversation, dict) else conversation
        items = body.get("input") if isinstance(body.get("input"), list) else body.get("messages") or []
        replays = any(isinstance(i, dict) and (i.get("type") in _CONTINUATION_ITEM_TYPES
                                               or i.get("role") == "assistant") for i in items)
        if step.continues is not None:
            chain = self.chain_of[[s.id for s in steps].index(step.continues)]
        elif body.get("previous_response_id") in self.by_response:
            chain = self.by_response[body["previous_response_id"]]
        elif conversation in self.by_conversation:
            chain = self.by_conversation[conversation]
        elif replays and self.last is not None:
            chain = self.last
        else:
            chain = index
        if isinstance(conversation, str):
            self.by_conversation.setdefault(conversation, chain)
        self.chain_of.append(chain)
        self.last = chain
        return chain


class GatewayProvider(Protocol):
    """Starts a gateway configured as a scenario's `gateway:` setup asks, for one run."""

    @property
    def admin_key(self) -> str:
        """The key of the admin routes of the gateways it starts: `{{run.admin_key}}`."""
        ...

    def gateway(self, setup: GatewaySetup, run: str) -> AbstractAsyncContextManager[str]:
        """An async context giving the base URL of the configured gateway."""
        ...


@dataclass
class _Prepared:
    """A step's request and expectations, placeholders resolved."""

    path: str
    body: Any
    headers: dict[str, str]
    expect: Expect
    poll_until: Expect | None
    turns: list[ModelTurn]
    chat: bool
    """Whether the request goes to the Chat Completions endpoint (its answer is judged as one)."""


@dataclass(frozen=True)
class _Unjudged:
    """A step that ran, to be judged once the run is over (when what its request caused at the
    fixtures is known)."""

    index: int
    step_id: str
    exchange: Exchange | None
    """None: the step sent nothing, since what it waited for never held."""
    expect: Expect
    chat: bool
    found: list[Finding]
    """What the engine found while running it (`poll.until`, `disconnect.when`, ...)."""


@dataclass
class _Run:
    """One scenario run in one mode: its token, placeholder context, chains, the create
    requests sent so far and each step, answered or not, in order."""

    token: str
    scenario: Scenario
    mode: Mode
    context: dict[str, Any]
    chains: _Chains = field(default_factory=_Chains)
    sent: list[Sent] = field(default_factory=list)
    steps: list[StepResult | _Unjudged] = field(default_factory=list)
    turns: list[list[ModelTurn]] = field(init=False)
    """Each step's scripted model turns: as written, placeholders resolved once the step is prepared."""
    socket: Socket | None = None
    """In `websocket` mode, the run's connection, which its streamed creates go over."""

    def __post_init__(self) -> None:
        self.turns = [list(step.model) for step in self.scenario.steps]


class Engine:
    def __init__(self, target: Target, http: httpx2.AsyncClient, fixtures: FixtureClient | None,
                 on_event: Callable[[UnitFinished], None] | None = None, *,
                 gateways: GatewayProvider | None = None, mcp: Mapping[str, McpFixture] | None = None,
                 against: Against | None = None) -> None:
        """`fixtures` talks to the scripted upstream and the MCP fixtures (None for a live model);
        `mcp` says where each MCP fixture is reachable (default: where `fixtures` serves them);
        `against`: what each answer is held against beyond its step's expectation."""
        self.target = target
        self.http = http
        self.fixtures = fixtures
        self.on_event = on_event or (lambda event: None)
        self.gateways = gateways
        self.mcp = mcp if mcp is not None else (fixtures.mcp if fixtures else {})
        self.against = against or Against()
        self._search_queries: dict[str, asyncio.Lock] = {}
        """A lock per search query some run states (see `_alone_with_its_searches`)."""

    @property
    def scripted(self) -> bool:
        """Whether the harness scripts the model behind the target and reads the fixtures' logs:
        always with `fixtures`. A target that is not `scripted` itself (a live model) is run
        live (its `live:` sections steer, retry and mark what the model decides) whether or not
        the harness scripts what stands behind it."""
        return self.fixtures is not None

    def _context(self, run: str, scenario: Scenario) -> dict[str, Any]:
        mcp = {name: self.mcp[name].for_run(run) for name in scenario.fixtures if name in self.mcp}
        return {"model": self.target.model, "responses_path": self.target.responses_path,
                "chat_path": self.target.chat_path, "conversations_path": self.target.conversations_path,
                "files_path": self.target.files_path, "vector_stores_path": self.target.vector_stores_path,
                "run": self._run_context(run), "mcp": mcp}

    def _run_context(self, run: str) -> dict[str, str]:
        """`run.token`, and `run.admin_key` when the engine starts the gateways itself."""
        return {"token": run} | ({"admin_key": self.gateways.admin_key} if self.gateways is not None else {})

    def _unsupported(self, scenario: Scenario, mode: Mode) -> str | None:
        """Why this target cannot run the scenario in `mode` at all, or None."""
        if not self.target.scripted and (why := scenario.why_not_live(self.mcp)) is not None:
            return why
        if scenario.gateway is not None and self.gateways is None:
            return ("the scenario configures the gateway (its `gateway:` section); the harness can do that only "
                    f"for gateways it starts itself, not for {self.target.name}")
        return missing_capability(scenario, self.target.lacks, mode)

    async def run(self, loaded: LoadedScenario, mode: Mode) -> ScenarioResult:
        """One unit; against a live model a failed run is tried again up to `live.retries` times
        (the model is not deterministic), and the result names its attempt."""
        scenario = loaded.scenario
        attempts = 1 + (scenario.live.retries if scenario.live and not self.target.scripted else 0)
        for attempt in range(1, attempts + 1):
            async with self._alone_with_its_searches(scenario):
                result = await self._run_once(loaded, mode)
            result.attempt = attempt
            if result.outcome != "fail":
                break
        return result

    @asynccontextmanager
    async def _alone_with_its_searches(self, scenario: Scenario) -> AsyncIterator[None]:
        """Held while a run of `scenario` runs: no other run stating one of its search queries
        (the same scenario in the other mode) runs meanwhile, since a search carries no run
        token and the search fixture logs it for every live run that stated its query."""
        async with AsyncExitStack() as held:
            if self.scripted:
                for query in sorted({entry.query for entry in scenario.search}):  # one order: no deadlock
                    await held.enter_async_context(self._search_queries.setdefault(query, asyncio.Lock()))
            yield

    async def _run_once(self, loaded: LoadedScenario, mode: Mode) -> ScenarioResult:
        scenario = loaded.scenario
        started = time.monotonic()
        result = ScenarioResult(scenario, str(loaded.path), mode, self.target.name)
        result.unsupported = self._unsupported(scenario, mode)
        if result.unsupported is not None:
            return result
        token = new_run_token()
        run = _Run(token, scenario, mode, self._context(token, scenario))
        caused: dict[int, Observed] | None = None
        setup_error = None
        forgotten = False
        try:
            if self.scripted:
                assert self.fixtures is not None
                await self.fixtures.register_searches(token, scenario.search_catalogue())
            async with self._target_for(scenario, token) as target:
                run.socket = Socket(target) if mode == "websocket" else None
                try:
                    for index, step in enumerate(scenario.steps):
                        if step.modes is not None and mode not in step.modes:
                            run.chains.chain_of.append(index)
                            continue
                        run.steps.append(await self._step(target, run, index, step))
                finally:
                    if run.socket is not None:
                        await run.socket.close()
                if self.scripted:
                    assert self.fixtures is not None
                    caused = attribute(await self.fixtures.taken(token, scenario.fixtures), run.sent)
                    forgotten = True
        except HarnessError as error:
            setup_error = str(error)
        finally:
            if self.scripted and not forgotten:
                assert self.fixtures is not None
                await self.fixtures.forget(token, scenario.fixtures)
        result.steps = [await self._judged(run, step, caused) for step in run.steps]
        if setup_error is not None:
            result.steps.append(StepResult("(setup)", error=setup_error))
        result.duration_s = time.monotonic() - started
        return result

    async def _judged(self, run: _Run, step: StepResult | _Unjudged, caused: dict[int, Observed] | None) -> StepResult:
        """A step's result, judged once the run is over: on its answer, what the engine found
        running it, and what its request caused (`caused`, by step index: what reached the
        fixtures, so work a background or abandoned request did later counts); a step the harness
        could not run, or that chose to send nothing, as it is."""
        if isinstance(step, StepResult):
            return step
        scenario = run.scenario
        live = scenario.live
        observed = caused.get(step.index, Observed()) if caused is not None else None
        golden = self.against.golden
        case = Case(step.exchange, step.chat, step.expect, found=step.found, observed=observed,
                    model_dependent=live.model_dependent if live is not None and not self.target.scripted else (),
                    mcp=run.context["mcp"],
                    reference=golden.reference(scenario, run.mode, step.step_id) if golden is not None else None,
                    known=self._known(run, step.step_id))
        judgement = await asyncio.to_thread(judge, case)
        unfit = "; ".join(observed.unfit) if observed is not None else ""
        return StepResult(step.step_id, step.exchange, judgement.contract, judgement.findings, observed,
                          error=f"the script cannot be said in the gateway's terms: {unfit}" if unfit else None,
                          reference=judgement.reference, expect=step.expect, chat=step.chat)

    def _known(self, run: _Run, step_id: str) -> Callable[[Finding], bool] | None:
        """Whether the run's baseline knows a finding of this step."""
        baseline = self.against.baseline
        return None if baseline is None else partial(baseline.knows, run.scenario.id, run.mode, step_id)

    @asynccontextmanager
    async def _target_for(self, scenario: Scenario, run: str) -> AsyncIterator[Target]:
        """The target itself, or a gateway configured for this run as the scenario asks."""
        if scenario.gateway is None or self.gateways is None:
            yield self.target
            return
        async with self.gateways.gateway(scenario.gateway, run) as base_url:
            yield replace(self.target, base_url=base_url)

    def _prepare(self, target: Target, run: _Run, index: int, step: Step) -> _Prepared:
        """The step's request and expectations with every placeholder resolved; raises
        `HarnessError` naming the field that cannot be."""
        where = f"steps[{index}] ({step.id})"
        chat = run.scenario.surface == "chat"
        default_path = "{{files_path}}" if step.upload else "{{chat_path}}" if chat else "{{responses_path}}"
        path = render(step.path or default_path, run.context, f"{where}.path")
        body = _form(step.upload, run.context, f"{where}.upload") if step.upload is not None \
            else render(step.request, run.context, f"{where}.request")
        live = run.scenario.live
        if not self.target.scripted and live is not None and step.id in live.steer and isinstance(body, dict):
            body = body | render(live.steer[step.id], run.context, f"live.steer.{step.id}")
        body = target.rewrites.apply(body, run.context["mcp"])
        creates = step.method == "POST" and path == (target.chat_path if chat else target.responses_path) \
            and isinstance(body, dict)
        if creates and (step.stream if step.stream is not None else run.mode != "nonstream"):
            body = body | {"stream": True}
        return _Prepared(str(path), body, render(step.headers, run.context, f"{where}.headers"),
                         _rendered(step.expectation(run.mode), run.context, f"{where}.expect"),
                         _rendered(step.poll.until, run.context, f"{where}.poll.until") if step.poll else None,
                         [_rendered(turn, run.context, f"{where}.model[{n}]") for n, turn in enumerate(step.model)],
                         chat=path == target.chat_path)

    async def _step(self, target: Target, run: _Run, index: int, step: Step) -> StepResult | _Unjudged:
        """Run one step: its answer to be judged, or the result of a step that sent nothing or
        that the harness could not run."""
        try:
            prepared = self._prepare(target, run, index, step)
        except HarnessError as error:
            run.chains.chain_of.append(index)
            return StepResult(step.id, error=_why_not_sent(error, run))
        chain = run.chains.place(index, step, run.scenario.steps, prepared.body)
        expect = prepared.expect
        try:
            if self.scripted:
                assert self.fixtures is not None
                if isinstance(prepared.body, dict):
                    prepared.body = mark_first_user_message(prepared.body, run_marker(run.token, chain))
                if target.rewrites.mcp_server_url is not None:
                    await self.fixtures.route_default_mcp(run.token, run.scenario.fixtures)
                run.turns[index] = prepared.turns
                await self.fixtures.register(run.token, RunScript(steps=run.turns, chain_of=run.chains.chain_of))
            if (waited := await self._wait(run, step)) is not None:
                return _Unjudged(index, step.id, None, expect, prepared.chat, [waited])
            if not step.send:
                return StepResult(step.id)
            exchange, found = await self._send(target, run, index, step, prepared)
            if step.disconnect is not None and step.disconnect.when is not None and not exchange.disconnected:
                found.append(over_before_disconnect())
            if not self.scripted and expect.upstream is not None:
                found.append(upstream_not_checked())
        except HarnessError as error:
            return StepResult(step.id, error=str(error))
        response_id = (exchange.response_object() or {}).get("id") if not prepared.chat else None
        if isinstance(response_id, str):
            run.chains.by_response[response_id] = chain
        run.context[step.id] = _step_view(exchange)
        return _Unjudged(index, step.id, exchange, expect, prepared.chat, found)

    async def _wait(self, run: _Run, step: Step) -> Finding | None:
        """Wait as the step asks before sending; a finding when the awaited condition never held."""
        if not isinstance(step.wait, Wait):
            await asyncio.sleep(step.wait)
            return None
        assert self.fixtures is not None
        missing = await wait_until(self.fixtures, run.token, run.scenario.fixtures, step.wait.until,
                                   step.wait.timeout)
        if missing is None:
            return None
        return waited_in_vain(step.wait.timeout, missing)

    async def _send(self, target: Target, run: _Run, index: int, step: Step,
                    prepared: _Prepared) -> tuple[Exchange, list[Finding]]:
        """Send the step's request (again and again while polling), noting each create request
        for attribution; with `poll`, a finding when the answer never matched `poll.until`."""
        trigger = None
        if step.disconnect is not None and step.disconnect.when is not None:
            until, fixtures = step.disconnect.when, self.fixtures
            assert fixtures is not None

            async def trigger() -> bool:
                return await wait_until(fixtures, run.token, run.scenario.fixtures, until, target.timeout_s) is None

        path, body = prepared.path, prepared.body
        if step.new_connection and run.socket is not None:
            await run.socket.close()
        deadline = time.monotonic() + (step.poll.timeout if step.poll else 0)
        while True:
            sent_at = time.time()
            if run.socket is not None and step.method == "POST" and path == target.responses_path and \
                    isinstance(body, dict) and body.get("stream") is True:
                exchange = await run.socket.create(body, disconnect=step.disconnect, disconnect_when=trigger)
            else:
                exchange = await send(self.http, target, step.method, path, body, disconnect=step.disconnect,
                                      disconnect_when=trigger, headers=prepared.headers)
            if step.method == "POST" and path in (target.responses_path, target.chat_path):
                settled = not (exchange.disconnected or exchange.transport_error or
                               (isinstance(body, dict) and body.get("background") is True))
                run.sent.append(Sent(index, sent_at, time.time() if settled else None))
            if step.poll is None or prepared.poll_until is None:
                return exchange, []
            polled = await asyncio.to_thread(judge, Case(exchange, prepared.chat, prepared.poll_until, checks=False))
            misses = [finding for finding in polled.findings if finding.fails]
            if not misses:
                return exchange, []
            if time.monotonic() >= deadline:
                return exchange, [polled_in_vain(step.poll.timeout, misses[0])]
            await asyncio.sleep(step.poll.interval)

    async def run_all(self, units: Sequence[tuple[LoadedScenario, Mode]], jobs: int = 1,
                      stop_after: Callable[[ScenarioResult], bool] | None = None) -> list[ScenarioResult]:
        """Run every (scenario, mode) unit, at most `jobs` at a time; results in input order.
        Once a result satisfies `stop_after`, no further unit starts (those running finish),
        and the units never started have no result."""
        gate = asyncio.Semaphore(max(jobs, 1))
        done = 0
        stopped = False

        async def one(unit: tuple[LoadedScenario, Mode]) -> ScenarioResult | None:
            nonlocal done, stopped
            async with gate:
                if stopped:
                    return None
                try:
                    result = await self.run(*unit)
                except Exception as error:  # a harness bug a target provoked: report it, run the rest
                    result = ScenarioResult(unit[0].scenario, str(unit[0].path), unit[1], self.target.name,
                                            [StepResult("(harness)", error=f"internal error: {error!r}")])
                stopped = stopped or (stop_after is not None and stop_after(result))
            done += 1
            self.on_event(UnitFinished(result, done, len(units)))
            return result

        return [result for result in await asyncio.gather(*(one(unit) for unit in units)) if result is not None]
