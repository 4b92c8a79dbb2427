"""Wait for a loop run, or stop it when the client goes away (a synchronous request that is
abandoned is cancelled: OpenAI's way to cancel one is to close the connection): the same on
both surfaces."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from .loop.sink import LoopResult


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def answer_when_done(request: Request, task: asyncio.Task[LoopResult],
                           answer: Callable[[dict[str, Any]], Response]) -> Response:
    """The run's response as `answer` sends it, once the run is done; its error is raised (for
    `app.py` to answer). A client that went away first gets a 499, and the run is cancelled."""
    result = await _done_or_gone(request, task)
    if result is None:
        return Response(status_code=499)
    if result.error is not None:
        raise result.error
    return answer(result.response)


async def _done_or_gone(request: Request, task: asyncio.Task[LoopResult]) -> LoopResult | None:
    """The task's result, or None after cancelling it because the client went away."""
    gone = asyncio.create_task(_disconnected(request.receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()
