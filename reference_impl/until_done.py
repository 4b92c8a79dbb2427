"""Wait for a loop run, or stop it when the client goes away (a synchronous request that is
abandoned is cancelled: OpenAI's way to cancel one is to close the connection)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeVar

from starlette.requests import Request
from starlette.types import Receive

T = TypeVar("T")


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def run_until_done_or_gone(request: Request, task: asyncio.Task[T]) -> T | None:
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
