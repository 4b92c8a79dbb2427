"""From target options to running units: start the servers a target needs, build the
`Target` and the fixture client, run the engine. Shared by the CLI and the pytest plugin."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from .findings import HarnessError
from .fixture_client import FixtureClient
from .loader import LoadedScenario
from .runner import Engine, EngineEvent, ScenarioResult
from .scenario import Mode
from .stack import DEFAULT_UPSTREAM_PORT, LOOPBACK, Stack, upstream_is_running
from .targets import DEFAULT_MODEL, Target

REFERENCE = "reference"
DEFAULT_UPSTREAM_URL = f"http://{LOOPBACK}:{DEFAULT_UPSTREAM_PORT}"


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` -> (name, value); raises `ValueError` naming the problem."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"header {text!r} is not of the form 'Name: value'")
    return name.strip(), value.strip()


@dataclass(frozen=True)
class TargetOptions:
    target: str = REFERENCE
    """`reference` (the embedded reference gateway) or the base URL of a gateway."""
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    model: str = DEFAULT_MODEL
    responses_path: str = "/v1/responses"
    chat_path: str = "/v1/chat/completions"
    timeout_s: float = 60.0
    upstream: str = DEFAULT_UPSTREAM_URL
    """The scripted upstream a URL target talks to; started here when nothing answers there."""


@dataclass
class Session:
    target: Target
    stack: Stack

    def run(self, units: Sequence[tuple[LoadedScenario, Mode]], jobs: int = 1,
            on_event: Callable[[EngineEvent], None] | None = None) -> list[ScenarioResult]:
        return asyncio.run(self.run_async(units, jobs, on_event))

    async def run_async(self, units: Sequence[tuple[LoadedScenario, Mode]], jobs: int = 1,
                        on_event: Callable[[EngineEvent], None] | None = None) -> list[ScenarioResult]:
        assert self.stack.upstream_url is not None
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.target.timeout_s)) as http:
            fixtures = FixtureClient(http, self.stack.upstream_url, self.stack.mcp)
            engine = Engine(self.target, http, fixtures, on_event, self.stack.reference_gateways())
            return await engine.run_all(units, jobs)


def _stack_for(options: TargetOptions, mcp_names: Iterable[str]) -> Stack:
    if options.target == REFERENCE:
        return Stack(mcp_names=mcp_names, with_reference=True)
    if upstream_is_running(options.upstream):
        return Stack(mcp_names=mcp_names, with_reference=False, upstream_url=options.upstream)
    parts = urlsplit(options.upstream)
    if parts.hostname not in (LOOPBACK, "localhost") or parts.port is None:
        raise HarnessError(f"no scripted upstream answers at {options.upstream}, and one can only be started "
                           f"on a loopback address with a port")
    return Stack(mcp_names=mcp_names, with_reference=False, upstream_port=parts.port)


@contextmanager
def open_session(options: TargetOptions, mcp_names: Iterable[str]) -> Iterator[Session]:
    """Start what the target needs; stop it on exit."""
    with _stack_for(options, mcp_names) as stack:
        headers = dict(options.headers)
        if options.api_key:
            headers["Authorization"] = f"Bearer {options.api_key}"
        base_url = stack.reference_url if options.target == REFERENCE else options.target
        assert base_url is not None
        yield Session(Target(name=options.target, base_url=base_url, responses_path=options.responses_path,
                             chat_path=options.chat_path, model=options.model, headers=headers,
                             timeout_s=options.timeout_s), stack)
