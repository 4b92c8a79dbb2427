"""A run's servers in a child process of their own: there a `Stack` serves them, each in its
thread, as it would in the harness's process. The harness and the servers then run on two
cores instead of taking turns at one interpreter lock: a run of many units against the
embedded reference gateway spends about as much CPU in the servers as in the harness.

The child is started with multiprocessing's `spawn` (a fresh interpreter: forking a process
that may already run threads is unsafe). It may start before its settings are known (`begin`):
it imports the servers' code meanwhile (most of a second), while the parent reads its scenario
files. Told its settings (`tell`, as soon as the parent knows them; entering waits for the
servers), it starts the servers, tells the parent where they listen, then starts and stops the
configured reference gateways that scenarios ask for, as many at once as the parent asks for
(each request names its answer). It ignores Ctrl-C (the parent decides when it ends): the
parent ends it by its PID, and it ends by itself when the parent goes away (its requests end).
A child that dies is a `HarnessError` naming its exit code. (`spawn` also starts
multiprocessing's resource tracker, which ends by itself once the parent has.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager, asynccontextmanager
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from ...fixtures.mcp import import_fixture_servers
from ..errors import HarnessError
from ..scenario.fixtures import McpFixture
from .collector import settle

if TYPE_CHECKING:
    from ...fixtures.upstream.script import AdHocScript
    from ..scenario.model import GatewaySetup
    from .server_thread import ServerThread
    from .stack import Stack

# From how many scenario runs, or probes, the embedded reference gateway and its fixtures are
# served apart by a child begun only once they are known: its start-up (about 0.7 s on 2 cores)
# then pays for itself only over many. Measured paired on 2 cores: 30 runs took 1.19x the time
# of the same run in one process, the 134-run catalogue 0.76x, all 7,568 probes 0.66x. (`parity
# run` and `record` begin the child before they read their scenarios: `begin`.)
APART_FROM_UNITS = 60
APART_FROM_PROBES = 1000
READY_TIMEOUT_S = 120.0
"""How long a child may take to import and start its servers (seconds on a loaded machine)."""


def reference_settings(mcp_names: Iterable[str], script: AdHocScript | None = None,
                       gateway: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the stack of a run on the embedded reference gateway is made with: the MCP fixtures
    `mcp_names`, the gateway with the settings `gateway`, and an upstream answering requests
    without a run marker from `script`; the same whoever asks first (see `StackProcess.tell`)."""
    return {"mcp_names": tuple(sorted(mcp_names)), "with_reference": True, "adhoc_script": script,
            "gateway_config": dict(gateway or {})}


class StackProcess(AbstractContextManager["StackProcess"]):
    """The servers `Stack(**settings)` starts, served by a child process; the attributes the
    session reads of a `Stack`, once entered. This process imports neither the stack nor the
    gateway and fixtures it serves (a fifth of a second, the MCP SDK half a second more)."""

    def __init__(self, **settings: Any) -> None:
        self._settings = settings
        """What the child's `Stack` is made with (see `tell`)."""
        self.admin_key: str | None = None
        self.upstream_url: str | None = None
        self.search_url: str | None = None
        self.reference_url: str | None = None
        self.mcp: dict[str, McpFixture] = {}
        self._process: Any = None
        self._pipe: Connection | None = None
        self._sending = threading.Lock()
        self._numbers = itertools.count(1)
        self._waiting: dict[int, Future[Any]] = {}
        """Answers to come, by request number (under `_sending`, as is `_gone`)."""
        self._gone: HarnessError | None = None
        """How the child ended, once the listener has read its end."""
        self._listener: threading.Thread | None = None
        self._serving: Future[Any] | None = None
        """Where the servers listen, to come, once the child is told its settings."""

    def begin(self) -> StackProcess:
        """Start the child now, before its settings are known: it imports the servers' code while
        this process goes on. Close it, or enter it (which closes it on exit)."""
        if self._process is not None:
            return self
        context = multiprocessing.get_context("spawn")
        self._pipe, child_end = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_end,), name="parity-servers", daemon=True)
        self._process.start()
        child_end.close()
        self._listener = threading.Thread(target=self._listen, name="parity-servers-answers", daemon=True)
        self._listener.start()
        return self

    def tell(self, **settings: Any) -> StackProcess:
        """Send the child its settings now, begun if it was not, without waiting for its servers:
        they start while this process goes on, and entering waits for them. Told once; telling
        the same settings again changes nothing."""
        if self._serving is not None:
            assert settings == self._settings, "a child serves the settings it was told first"
            return self
        self._settings = settings
        self.begin()
        self._serving = self.ask("serve", settings)
        return self

    def __enter__(self) -> StackProcess:
        if self._serving is None:
            self.tell(**self._settings)
        try:
            served = self._serving.result(READY_TIMEOUT_S)
        except TimeoutError:
            self.close()
            raise HarnessError(f"the run's servers did not start within {READY_TIMEOUT_S:g} s") from None
        except BaseException:
            self.close()
            raise
        self.admin_key, self.upstream_url, self.search_url, self.reference_url = (
            served["admin_key"], served["upstream"], served["search"], served["reference"])
        self.mcp = {name: McpFixture(name, url) for name, url in served["mcp"].items()}
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The child's, once started (None once closed)."""
        return None if self._process is None else self._process.pid

    def reference_gateways(self) -> _ChildGateways | None:
        """Configured reference gateways, started by the child, when it serves the reference target."""
        return _ChildGateways(self) if self.reference_url is not None else None

    def ask(self, what: str, payload: Any) -> Future[Any]:
        """The child's answer to come: its result, or the `HarnessError` it answered or died with."""
        answer: Future[Any] = Future()
        number = next(self._numbers)
        assert self._pipe is not None
        with self._sending:
            if self._gone is not None:
                answer.set_exception(self._gone)
                return answer
            self._waiting[number] = answer
            with contextlib.suppress(OSError):  # the child is gone: the listener fails this answer too
                self._pipe.send((number, what, payload))
        return answer

    def _listen(self) -> None:
        """Hand each answer to whoever waits for it; once the child is gone, fail what still waits."""
        assert self._pipe is not None
        try:
            while True:
                number, failed, payload = self._pipe.recv()
                waiting = self._waiting.pop(number, None)
                if waiting is not None:
                    waiting.set_exception(HarnessError(payload)) if failed else waiting.set_result(payload)
        except (EOFError, OSError):
            pass
        self._process.join()
        with self._sending:
            self._gone = self._died()
            for waiting in self._waiting.values():
                waiting.set_exception(self._gone)
            self._waiting.clear()

    def _died(self) -> HarnessError:
        return HarnessError(f"the run's servers stopped (their process exited with code {self._process.exitcode})")

    def close(self) -> None:
        """End the child at once, by its PID: it holds nothing that outlives the run (its stores
        are in memory, it writes no file), and stopping each server in turn would take its
        ticks (half a second)."""
        if self._process is None:
            return
        self._process.kill()
        self._process.join()
        if self._listener is not None:
            self._listener.join()  # the child's end closed with it: the listener has read the end
        assert self._pipe is not None
        self._pipe.close()
        self._process = None


class _ChildGateways:
    """`GatewayProvider` for a `StackProcess`: each configured gateway runs in the child."""

    def __init__(self, stack: StackProcess) -> None:
        assert stack.admin_key is not None, "a stack's gateways are asked for once it serves"
        self._stack = stack
        self.admin_key = stack.admin_key

    @asynccontextmanager
    async def gateway(self, setup: GatewaySetup, run: str) -> AsyncIterator[str]:
        url = await asyncio.wrap_future(self._stack.ask("start", (setup, run)))
        try:
            yield url
        finally:
            await asyncio.wrap_future(self._stack.ask("stop", url))


def _serve(pipe: Connection) -> None:
    """The child (see the module): its first request is to serve, with the stack's settings."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .stack import Stack, import_servers

    import_servers()
    if not pipe.poll():  # not told yet: half the scenarios name an MCP fixture
        import_fixture_servers()
    try:
        number, _, settings = pipe.recv()
    except (EOFError, OSError):
        return  # the parent went away before it knew what to serve
    stack = Stack(**settings)
    try:
        stack.__enter__()
    except Exception as error:  # the parent reports it; the child's traceback says nothing more
        pipe.send((number, True, f"the run's servers could not start: {error}"))
        return
    settle()
    child = _Child(pipe, stack)
    pipe.send((number, False, child.served()))
    child.serve()


class _Child:
    """The child's side, once its stack serves: it answers each request in a thread of its
    own until the parent goes away (its process ending ends the servers, daemon threads)."""

    def __init__(self, pipe: Connection, stack: Stack) -> None:
        self._pipe = pipe
        self._stack = stack
        self._gateways = stack.reference_gateways()
        self._sending = threading.Lock()
        self._started: dict[str, ServerThread] = {}
        self._work: dict[str, Callable[[Any], Any]] = {"start": self._start, "stop": self._stop}

    def serve(self) -> None:
        while True:
            try:
                number, what, payload = self._pipe.recv()
            except (EOFError, OSError):
                return  # the parent went away
            threading.Thread(target=self._answer, args=(number, self._work[what], payload), daemon=True).start()

    def _answer(self, number: int, work: Callable[[Any], Any], payload: Any) -> None:
        try:
            reply = (number, False, work(payload))
        except Exception as error:  # a gateway the scenario's settings do not make, or a bug: said
            reply = (number, True, str(error) if isinstance(error, HarnessError) else
                     f"the run's servers failed: {type(error).__name__}: {error}")
        with self._sending:
            self._pipe.send(reply)

    def served(self) -> dict[str, Any]:
        """Where the stack's servers listen, and its admin key."""
        stack = self._stack
        return {"admin_key": stack.admin_key, "upstream": stack.upstream_url, "search": stack.search_url,
                "reference": stack.reference_url,
                "mcp": {name: fixture.base_url for name, fixture in stack.mcp.items()}}

    def _start(self, asked: tuple[GatewaySetup, str]) -> str:
        assert self._gateways is not None, "the parent asks for gateways only of a stack that serves them"
        server = self._gateways.serve(*asked)
        self._started[server.url] = server
        return server.url

    def _stop(self, url: str) -> None:
        """Answered at once, the gateway stopping meanwhile: the unit that used it need not wait
        for its connections to close and its lifespan to end."""
        threading.Thread(target=self._started.pop(url).stop, daemon=True).start()
