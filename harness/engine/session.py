"""From target options to running units: start the servers a target needs, build the
`Target` and the fixture client, run the engine. Shared by the CLI and the pytest plugin."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2

from ...fixtures.upstream.script import AdHocScript
from ..defaults import DEFAULT_MODEL, LOOPBACK, REFERENCE
from ..errors import HarnessError
from ..judge.against import Against
from ..judge.results import ScenarioResult, UnitFinished
from ..options import TargetOptions
from ..scenario.fixtures import McpFixture
from ..scenario.loader import LoadedScenario
from ..scenario.model import Mode
from ..wire.redaction import Redactor, tool_secrets
from .fixture_client import FixtureClient
from .profile import Profile, ProfileError, find_profile, unknown_target
from .runner import Engine
from .stack_process import StackProcess, reference_settings
from .targets import Target, TargetRefuses, http_client, refused_at_once, unreachable

if TYPE_CHECKING:
    from .gateway_process import RunningGateway
    from .stack import Stack

OPENAI = "openai"
OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_DEFAULT_MODEL = "gpt-4.1-mini"


@dataclass
class Session:
    target: Target
    stack: Stack | StackProcess | None
    """The local servers; None for a live model, which needs none."""
    mcp: dict[str, McpFixture] = field(default_factory=dict)
    gateway: RunningGateway | None = None
    """The gateway process the session started (profiled targets)."""
    redactor: Redactor = field(default_factory=Redactor)
    """The run's secrets: the target's headers (`open_session` adds them), and the secrets of the
    scenarios run, as written and as sent (their MCP `authorization` and headers)."""
    refusal: dict[bool, str | None] = field(default_factory=dict)
    """Whether the target refuses every request of runs without (False) and with (True) chat
    scenarios, and why (None: it does not): asked once per session, however many runs it makes."""

    def run(self, units: Sequence[tuple[LoadedScenario, Mode]], jobs: int = 1,
            on_event: Callable[[UnitFinished], None] | None = None, against: Against | None = None,
            stop_after: Callable[[ScenarioResult], bool] | None = None) -> list[ScenarioResult]:
        return asyncio.run(self.run_async(units, jobs, on_event, against, stop_after))

    async def run_async(self, units: Sequence[tuple[LoadedScenario, Mode]], jobs: int = 1,
                        on_event: Callable[[UnitFinished], None] | None = None, against: Against | None = None,
                        stop_after: Callable[[ScenarioResult], bool] | None = None) -> list[ScenarioResult]:
        """Run the units, `jobs` at a time; one at a time when the gateway reaches the MCP
        fixtures by its own names, since their calls are then told apart only by order. No
        unit starts once a result satisfies `stop_after` (see `Engine.run_all`).
        `HarnessError` when the target cannot be reached at all; `TargetRefuses` when it would
        refuse every request alike."""
        if self.target.rewrites.mcp_server_url is not None:
            jobs = 1
        self.redactor.add(*(secret for loaded, _ in units for secret in loaded.scenario.secrets()))
        on_event = self._learning(on_event)
        if (why := await unreachable(self.target)) is not None:
            raise HarnessError(f"the target {self.target.name} at {self.target.base_url} is unreachable: {why}")
        async with http_client(httpx2.Timeout(self.target.timeout_s)) as http:
            chat = any(loaded.scenario.surface == "chat" for loaded, _ in units)
            if units and self.target.scripted and chat not in self.refusal:  # OpenAI's paths are OpenAI's
                self.refusal[chat] = await refused_at_once(self.target, http, chat)
            if (why := self.refusal.get(chat)) is not None:
                raise TargetRefuses(self.redactor.redact_text(why))
            if self.stack is None:
                return await Engine(self.target, http, None, on_event, mcp=self.mcp,
                                    against=against).run_all(units, jobs, stop_after)
            assert self.stack.upstream_url is not None
            # The fixtures on a pool of their own: a pool checks each of its idle connections
            # before every request it sends, so one shared pool checks both kinds on each.
            async with http_client(httpx2.Timeout(self.target.timeout_s)) as fixtures_http:
                fixtures = FixtureClient(fixtures_http, self.stack.upstream_url, self.stack.mcp, self.stack.search_url)
                return await Engine(self.target, http, fixtures, on_event, gateways=self.stack.reference_gateways(),
                                    against=against).run_all(units, jobs, stop_after)

    def _learning(self, on_event: Callable[[UnitFinished], None] | None) -> Callable[[UnitFinished], None]:
        """`on_event`, told of a finished unit once the redactor knows the secrets its requests
        carried (placeholders rendered), so no one hears of them before it does."""
        def learn_then_tell(event: UnitFinished) -> None:
            if isinstance(event, UnitFinished):
                self.redactor.add(*(secret for step in event.result.steps if step.exchange
                                    for secret in tool_secrets(step.exchange.request_body)))
            if on_event is not None:
                on_event(event)

        return learn_then_tell


def _stack_for(options: TargetOptions, mcp_names: Iterable[str], script: AdHocScript | None,
               gateway: Mapping[str, Any] | None = None, *, apart: bool | StackProcess = False
               ) -> Stack | StackProcess:
    if options.target != REFERENCE:
        return _upstream_stack(options, mcp_names, script)
    settings = reference_settings(mcp_names, script, gateway)
    if isinstance(apart, StackProcess):
        return apart.tell(**settings)
    if apart:
        return StackProcess(**settings)  # this process imports none of the servers
    from .stack import Stack

    return Stack(**settings)


def _upstream_stack(options: TargetOptions, mcp_names: Iterable[str], script: AdHocScript | None) -> Stack:
    """The fixtures of a URL target: those beside the scripted upstream `--upstream` names, or
    started there."""
    from .stack import Stack, fixture_ports, running_upstream, search_port

    upstream = options.upstream.rstrip("/").removesuffix("/v1")  # its model base URL names it too
    if (announced := running_upstream(upstream)) is not None:
        return Stack(mcp_names=mcp_names, with_reference=False, upstream_url=upstream, mcp_running=announced.mcp,
                     search_running=announced.search)
    parts = urlsplit(upstream)
    if parts.hostname not in (LOOPBACK, "localhost") or parts.port is None:
        raise HarnessError(f"no scripted upstream answers at {upstream}, and one can only be started "
                           f"on a loopback address with a port")
    return Stack(mcp_names=mcp_names, with_reference=False, upstream_port=parts.port,
                 mcp_ports=fixture_ports(parts.port), search_port=search_port(parts.port), adhoc_script=script)


def _openai_session(options: TargetOptions) -> Session:
    """The live OpenAI API as a target: nothing runs locally, the model is not scripted."""
    api_key = options.api_key or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        raise HarnessError("--target openai needs an API key: set OPENAI_API_KEY (or --api-key)")
    model = options.model if options.model != DEFAULT_MODEL else os.environ.get("PARITY_OPENAI_MODEL",
                                                                                 OPENAI_DEFAULT_MODEL)
    headers = dict(options.headers) | {"Authorization": f"Bearer {api_key}"}
    target = Target(name=OPENAI, base_url=os.environ.get("OPENAI_BASE_URL", OPENAI_BASE_URL),
                    responses_path="/responses", chat_path="/chat/completions", model=model, headers=headers,
                    timeout_s=options.timeout_s, max_answer_bytes=options.max_answer_bytes, scripted=False,
                    retries=2 if options.retries is None else options.retries)
    return Session(target, None, {name: McpFixture(name, url.rstrip("/")) for name, url in options.public_mcp})


def _extra_headers(options: TargetOptions) -> dict[str, str]:
    headers = dict(options.headers)
    if options.api_key:
        headers["Authorization"] = f"Bearer {options.api_key}"
    return headers


@contextmanager
def _profiled_session(profile: Profile, options: TargetOptions, mcp_names: Iterable[str],
                      say: Callable[[str], None], script: AdHocScript | None) -> Iterator[Session]:
    """A gateway from its profile: installed on first use, started against a fresh scripted
    upstream and the MCP fixtures, stopped on exit."""
    from .gateway_process import install, start  # installing and running gateway processes: profiled targets only
    from .stack import Stack

    installation = install(profile, say)
    with Stack(mcp_names=mcp_names, with_reference=False, adhoc_script=script) as stack:
        assert stack.upstream_url is not None
        say(f"starting {profile.title} ...")
        gateway = start(profile, installation, upstream=stack.upstream_url, mcp=stack.mcp, model=options.model)
        try:
            target = Target(name=profile.name, base_url=gateway.base_url,
                            responses_path=profile.target.responses_path, chat_path=profile.target.chat_path,
                            model=gateway.model, headers=gateway.headers | _extra_headers(options),
                            timeout_s=options.timeout_s, max_answer_bytes=options.max_answer_bytes,
                            retries=options.retries or 0, lacks=profile.lacks,
                            rewrites=profile.rewrite, gateway=profile.identity())
            yield Session(target, stack, gateway=gateway)
        finally:
            gateway.stop()


@contextmanager
def open_session(options: TargetOptions, mcp_names: Iterable[str], say: Callable[[str], None] = lambda line: None,
                 redactor: Redactor | None = None, script: AdHocScript | None = None, *,
                 gateway: Mapping[str, Any] | None = None, apart: bool | StackProcess = False) -> Iterator[Session]:
    """Start what the target needs; stop it on exit. `say` hears progress worth a line
    (installing a gateway takes minutes). A scripted upstream the session starts answers
    requests without a run marker from `script` (replayed traffic). The session's redactor is
    `redactor` (default: a new one), told before any run the target's header values (API key,
    extra and profile headers) and the admin key of the reference gateways the session starts;
    a gateway's log is rewritten through it once the gateway has stopped. A reference gateway
    the session starts takes the settings `gateway` gives; with `apart`, it and the servers
    beside it run in a child process (`stack_process.py`: worth its start-up for many units,
    or when it was begun ahead of the session, as `apart` itself: `StackProcess.begin`)."""
    started: Session | None = None
    try:
        with _started(options, mcp_names, say, script, gateway, apart=apart) as started:
            if redactor is not None:
                started.redactor = redactor
            started.redactor.add(*started.target.headers.values(), started.stack.admin_key if started.stack else None)
            yield started
    finally:
        if started is not None and started.gateway is not None and started.gateway.log.exists():  # stopped now
            started.redactor.rewrite_log(started.gateway.log)


@contextmanager
def _started(options: TargetOptions, mcp_names: Iterable[str], say: Callable[[str], None],
             script: AdHocScript | None, gateway: Mapping[str, Any] | None, *,
             apart: bool | StackProcess) -> Iterator[Session]:
    if options.target == OPENAI:
        yield _openai_session(options)
        return
    try:
        profile = find_profile(options.target, options.profile_dirs)
    except ProfileError as error:
        raise HarnessError(str(error)) from error
    if profile is not None:
        with _profiled_session(profile, options, mcp_names, say, script) as session:
            yield session
        return
    if not options.target.startswith(("http://", "https://")) and options.target != REFERENCE:
        raise HarnessError(unknown_target(options.target, (REFERENCE, OPENAI), options.profile_dirs))
    with _stack_for(options, mcp_names, script, gateway, apart=apart) as stack:
        base_url = stack.reference_url if options.target == REFERENCE else options.target
        assert base_url is not None
        yield Session(Target(name=options.target, base_url=base_url, responses_path=options.responses_path,
                             chat_path=options.chat_path, model=options.model, headers=_extra_headers(options),
                             timeout_s=options.timeout_s, max_answer_bytes=options.max_answer_bytes,
                             retries=options.retries or 0), stack)
