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
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import httpx

from ..fixtures.upstream.script import RunScript, new_run_token, run_marker
from .capabilities import missing_capability
from .checks import no_reference_findings
from .compare import compare, compare_upstream, upstream_anomalies
from .contract import Contract, chat_completion, project, project_chat
from .exchange import Exchange
from .findings import Finding, HarnessError, Kind, Severity
from .fixture_client import FixtureClient, McpFixture, Observed
from .loader import LoadedScenario
from .placeholders import OutputView, render
from .scenario import Expect, GatewaySetup, Mode, Scenario, Step
from .targets import Target, send

Outcome = Literal["pass", "fail", "error", "unsupported"]
_CONTINUATION_ITEM_TYPES = {"function_call", "reasoning", "mcp_call", "mcp_list_tools", "mcp_approval_request",
                     "mcp_approval_response", "function_call_output"}


@dataclass
class StepResult:
    step_id: str
    exchange: Exchange | None = None
    contract: Contract | None = None
    findings: list[Finding] = field(default_factory=list)
    observed: Observed | None = None
    error: str | None = None
    """Why the harness could not run the step (not a fault of the target)."""
    reference_events: tuple[str, ...] | None = None
    """The event sequence the stream is held against (runs collapsed), for side-by-side views."""
    reference_label: str | None = None
    """Where `reference_events` come from: the scenario's expectation, or a golden set."""

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "error"
        return "fail" if any(finding.fails for finding in self.findings) else "pass"


@dataclass
class ScenarioResult:
    scenario: Scenario
    path: str
    mode: Mode
    target: str
    steps: list[StepResult] = field(default_factory=list)
    duration_s: float = 0.0
    unsupported: str | None = None
    """Why the target cannot run this scenario at all (not a failure)."""
    attempt: int = 1
    """Which try this result is (live models are retried when a run fails)."""

    @property
    def outcome(self) -> Outcome:
        """The first step that did not pass decides: a step that cannot run after a failed one
        lacks what that answer should have held, so the scenario failed rather than errored."""
        if self.unsupported is not None:
            return "unsupported"
        return next((step.outcome for step in self.steps if step.outcome != "pass"), "pass")

    @property
    def findings(self) -> list[tuple[str, Finding]]:
        return [(step.step_id, finding) for step in self.steps for finding in step.findings]


@dataclass(frozen=True)
class UnitStarted:
    scenario_id: str
    mode: Mode


@dataclass(frozen=True)
class UnitFinished:
    result: ScenarioResult
    done: int
    total: int


EngineEvent = UnitStarted | UnitFinished


def _rendered(expect: Expect, context: dict[str, Any], where: str) -> Expect:
    """The expectation with the placeholders in its values resolved."""
    update: dict[str, Any] = {name: render(getattr(expect, name), context, f"{where}.expect.{name}")
                              for name in ("response", "body") if getattr(expect, name) is not None}
    if expect.page is not None and expect.page.ids is not None:
        ids = render(expect.page.ids, context, f"{where}.expect.page.ids")
        update["page"] = expect.page.model_copy(update={"ids": ids})
    return expect.model_copy(update=update)


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

    def gateway(self, setup: GatewaySetup, run: str) -> AbstractAsyncContextManager[str]:
        """An async context giving the base URL of the configured gateway."""
        ...


@dataclass
class _Run:
    """One scenario run in one mode: its token, placeholder context, chains and what the
    fixtures had logged before the current step."""

    token: str
    scenario: Scenario
    mode: Mode
    context: dict[str, Any]
    chains: _Chains = field(default_factory=_Chains)
    seen: Observed = field(default_factory=Observed)


class Engine:
    def __init__(self, target: Target, http: httpx.AsyncClient, fixtures: FixtureClient | None,
                 on_event: Callable[[EngineEvent], None] | None = None, *,
                 gateways: GatewayProvider | None = None, mcp: Mapping[str, McpFixture] | None = None) -> None:
        """`fixtures` talks to the scripted upstream and the MCP fixtures (None for a live model);
        `mcp` says where each MCP fixture is reachable (default: where `fixtures` serves them)."""
        self.target = target
        self.http = http
        self.fixtures = fixtures
        self.on_event = on_event or (lambda event: None)
        self.gateways = gateways
        self.mcp = mcp if mcp is not None else (fixtures.mcp if fixtures else {})

    def _context(self, run: str, scenario: Scenario) -> dict[str, Any]:
        mcp = {name: self.mcp[name].for_run(run) for name in scenario.fixtures if name in self.mcp}
        return {"model": self.target.model, "responses_path": self.target.responses_path,
                "chat_path": self.target.chat_path, "run": {"token": run},
                "mcp": mcp}

    def _unsupported(self, scenario: Scenario) -> str | None:
        """Why this target cannot run the scenario at all, or None."""
        if not self.target.scripted and not scenario.openai_counterpart:
            return "a gateway-policy scenario: OpenAI has no such behaviour to run live"
        if scenario.gateway is not None and self.gateways is None:
            return ("the scenario configures the gateway (its `gateway:` section); the harness can do that only "
                    f"for gateways it starts itself, not for {self.target.name}")
        if reason := missing_capability(scenario, self.target.lacks):
            return reason
        if self.target.scripted:
            return None
        if scenario.live is None:
            return "the scenario scripts the model and has no `live:` section saying how to steer a live one"
        if scenario.live.skip:
            return scenario.live.skip
        if missing := [name for name in scenario.fixtures if name not in self.mcp]:
            return (f"MCP fixture {', '.join(missing)} has no public URL a live model can reach "
                    f"(--public-mcp {missing[0]}=URL)")
        return None

    async def run(self, loaded: LoadedScenario, mode: Mode) -> ScenarioResult:
        """One unit; against a live model a failed run is tried again up to `live.retries` times
        (the model is not deterministic), and the result names its attempt."""
        scenario = loaded.scenario
        attempts = 1 + (scenario.live.retries if scenario.live and not self.target.scripted else 0)
        for attempt in range(1, attempts + 1):
            result = await self._run_once(loaded, mode)
            result.attempt = attempt
            if result.outcome != "fail":
                break
        return result

    async def _run_once(self, loaded: LoadedScenario, mode: Mode) -> ScenarioResult:
        scenario = loaded.scenario
        started = time.monotonic()
        result = ScenarioResult(scenario, str(loaded.path), mode, self.target.name)
        result.unsupported = self._unsupported(scenario)
        if result.unsupported is not None:
            return result
        token = new_run_token()
        run = _Run(token, scenario, mode, self._context(token, scenario))
        try:
            async with self._target_for(scenario, token) as target:
                for index, step in enumerate(scenario.steps):
                    if step.modes is not None and mode not in step.modes:
                        run.chains.chain_of.append(index)
                        continue
                    step_result = await self._step(target, run, index, step)
                    result.steps.append(step_result)
                    if step_result.exchange is not None:
                        run.context[step.id] = _step_view(step_result.exchange)
        except HarnessError as error:
            result.steps.append(StepResult("(setup)", error=str(error)))
        finally:
            if self.fixtures is not None and self.target.scripted:
                await self.fixtures.forget(token)
        result.duration_s = time.monotonic() - started
        return result

    @asynccontextmanager
    async def _target_for(self, scenario: Scenario, run: str) -> AsyncIterator[Target]:
        """The target itself, or a gateway configured for this run as the scenario asks."""
        if scenario.gateway is None or self.gateways is None:
            yield self.target
            return
        async with self.gateways.gateway(scenario.gateway, run) as base_url:
            yield replace(self.target, base_url=base_url)

    async def _step(self, target: Target, run: _Run, index: int, step: Step) -> StepResult:
        where = f"steps[{index}] ({step.id})"
        try:
            surface_path = "{{chat_path}}" if run.scenario.surface == "chat" else "{{responses_path}}"
            path = render(step.path or surface_path, run.context, f"{where}.path")
            body = render(step.request, run.context, f"{where}.request")
            expect = _rendered(step.expectation(run.mode), run.context, where)
            live = run.scenario.live
            if not self.target.scripted and live is not None and step.id in live.steer and isinstance(body, dict):
                body = body | render(live.steer[step.id], run.context, f"live.steer.{step.id}")
            body = target.rewrites.apply(body, run.context["mcp"])
        except HarnessError as error:
            run.chains.chain_of.append(index)
            return StepResult(step.id, error=str(error))
        create_path = target.chat_path if run.scenario.surface == "chat" else target.responses_path
        creates = step.method == "POST" and path == create_path and isinstance(body, dict)
        stream = step.stream if step.stream is not None else (creates and run.mode == "stream")
        if creates and stream:
            body = body | {"stream": True}
        chain = run.chains.place(index, step, run.scenario.steps, body)
        scripted = self.fixtures is not None and self.target.scripted
        if not step.send:
            return await self._observe_only(run, step, expect, scripted)
        try:
            if scripted:
                if isinstance(body, dict):
                    body = mark_first_user_message(body, run_marker(run.token, chain))
                if target.rewrites.mcp_server_url is not None:
                    await self.fixtures.route_default_mcp(run.token, run.scenario.fixtures)
                await self.fixtures.register(run.token, RunScript(steps=[s.model for s in run.scenario.steps],
                                                                  chain_of=run.chains.chain_of))
            if step.wait:
                await asyncio.sleep(step.wait)
            exchange = await send(self.http, target, step.method, str(path), body, disconnect=step.disconnect,
                                  headers=step.headers)
            chat = run.scenario.surface == "chat"
            contract = project_chat(exchange) if chat else project(exchange)
            findings = self._check(expect, exchange, contract, chat)
            if not self.target.scripted and run.scenario.live is not None:
                findings = model_dependent_as_notes(findings, run.scenario.live.model_dependent)
            observed = None
            if scripted:
                observed, upstream_findings = await self._observe(run, expect)
                findings += upstream_findings
            elif expect.upstream is not None:
                findings.append(Finding(Kind.UPSTREAM_REQUEST, Severity.NOTE, "expect.upstream",
                                        "not checked: what reached the model is known only with the scripted one"))
        except HarnessError as error:
            return StepResult(step.id, error=str(error))
        response_id = (contract.response_fields or {}).get("id")
        if isinstance(response_id, str):
            run.chains.by_response[response_id] = chain
        reference = tuple(expect.events) if expect.events is not None and exchange.streamed else None
        return StepResult(step.id, exchange, contract, findings, observed, reference_events=reference,
                          reference_label="expected by the scenario" if reference else None)

    async def _observe(self, run: _Run, expect: Expect) -> tuple[Observed, list[Finding]]:
        """What reached the fixtures since the last step, and how it differs from `expect.upstream`."""
        assert self.fixtures is not None
        total = await self.fixtures.observed(run.token, run.scenario.fixtures)
        observed, run.seen = total.since(run.seen), total
        findings = upstream_anomalies(observed)
        if expect.upstream is not None:
            findings += compare_upstream(expect.upstream, observed)
        return observed, findings

    async def _observe_only(self, run: _Run, step: Step, expect: Expect, scripted: bool) -> StepResult:
        await asyncio.sleep(step.wait)
        if not scripted:
            return StepResult(step.id)
        try:
            observed, findings = await self._observe(run, expect)
        except HarnessError as error:
            return StepResult(step.id, error=str(error))
        return StepResult(step.id, findings=findings, observed=observed)

    @staticmethod
    def _check(expect: Expect, exchange: Exchange, contract: Contract, chat: bool) -> list[Finding]:
        findings: list[Finding] = []
        if exchange.transport_error:
            findings.append(Finding(Kind.TRANSPORT, Severity.ERROR, "transport", exchange.transport_error))
        findings += no_reference_findings(exchange, chat)
        findings += compare(expect, contract, exchange)
        return findings

    async def run_all(self, units: Sequence[tuple[LoadedScenario, Mode]], jobs: int = 1) -> list[ScenarioResult]:
        """Run every (scenario, mode) unit, at most `jobs` at a time; results in input order."""
        gate = asyncio.Semaphore(max(jobs, 1))
        done = 0

        async def one(unit: tuple[LoadedScenario, Mode]) -> ScenarioResult:
            nonlocal done
            async with gate:
                self.on_event(UnitStarted(unit[0].scenario.id, unit[1]))
                try:
                    result = await self.run(*unit)
                except Exception as error:  # a harness bug a target provoked: report it, run the rest
                    result = ScenarioResult(unit[0].scenario, str(unit[0].path), unit[1], self.target.name,
                                            [StepResult("(harness)", error=f"internal error: {error!r}")])
            done += 1
            self.on_event(UnitFinished(result, done, len(units)))
            return result

        return list(await asyncio.gather(*(one(unit) for unit in units)))


def model_dependent_as_notes(findings: list[Finding], fields: Sequence[str]) -> list[Finding]:
    """Findings of expectations a live model decides (`expect.output`, ...) turned into notes."""
    return [replace(f, severity=Severity.NOTE, message=f"{f.message} (model-dependent)")
            if f.rule.startswith("expect.") and f.rule.split(".")[1] in fields and f.severity > Severity.NOTE else f
            for f in findings]


def units_of(scenarios: Sequence[LoadedScenario], modes: Sequence[Mode]) -> list[tuple[LoadedScenario, Mode]]:
    """Each scenario in each requested mode it supports."""
    return [(s, mode) for s in scenarios for mode in s.scenario.modes if mode in modes]
