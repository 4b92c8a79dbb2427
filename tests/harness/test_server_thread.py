"""A stack's server (`engine/server_thread.py`) is started once it serves, and one whose
app cannot start is an error at once; it stops as uvicorn's does, gracefully: an answer under
way when the stop is asked is sent whole, and the app's lifespan shutdown runs. (That it stops
sooner than uvicorn's own, which paused 0.1 s at least, is measured, never asserted on a clock:
a loaded machine may take longer.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from responses_parity.harness.engine.server_thread import START_TIMEOUT_S, ServerThread
from responses_parity.harness.errors import HarnessError


class _App:
    """An app whose `/slow` answers once `release` is set, and which notes its lifespan's end."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = threading.Event()
        self.shut_down = threading.Event()

    def build(self) -> Starlette:
        async def slow(request: Request) -> Response:
            self.asked.set()
            await asyncio.to_thread(self.release.wait, 10)
            return PlainTextResponse("whole answer")

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            self.shut_down.set()

        return Starlette(routes=[Route("/slow", slow), Route("/", lambda request: PlainTextResponse("hi"))],
                         lifespan=lifespan)


# uvicorn ends a server whose app cannot start with SystemExit, in its thread
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_started_server_answers_and_one_whose_app_cannot_start_is_an_error_at_once() -> None:
    server = ServerThread(_App().build()).start()
    assert httpx2.get(f"{server.url}/").text == "hi"
    server.stop()

    @contextlib.asynccontextmanager
    async def failing(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("this app cannot start")
        yield

    began = time.monotonic()
    with pytest.raises(HarnessError, match="did not start"):
        ServerThread(Starlette(lifespan=failing)).start()
    assert time.monotonic() - began < START_TIMEOUT_S / 3


def test_an_answer_under_way_is_sent_whole_and_the_lifespan_ends() -> None:
    app = _App()
    server = ServerThread(app.build()).start()
    answers: list[httpx2.Response] = []
    client = threading.Thread(target=lambda: answers.append(httpx2.get(f"{server.url}/slow", timeout=10)))
    client.start()
    assert app.asked.wait(10)
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    stopping.join(0.3)
    assert stopping.is_alive() and not app.shut_down.is_set()  # it waits for the answer under way
    app.release.set()
    stopping.join(10)
    client.join(10)
    assert not stopping.is_alive() and app.shut_down.is_set()
    assert [(answer.status_code, answer.text) for answer in answers] == [(200, "whole answer")]

