"""A loop run from its start to its stored end, the same on both surfaces.

The run starts from its context's history, is driven to its end and answered as its surface
answers; then `end` stores how it ended, its audit with it, and shows that end. A run that is
cancelled (its client went away, or a background response was cancelled) is stored too: `end`
gets no result. Storing runs to its end even if the run is cancelled meanwhile, so what a
client was shown is stored, or it was shown nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from .driver import drive
from .sink import LoopResult, Surface
from .state import LoopContext, LoopState

RunEnd = Callable[[LoopState, LoopResult | None], Awaitable[None]]
"""Store a run's end (its result; None: it was cancelled) with its audit, then show it."""


async def run_loop(ctx: LoopContext, surface: Surface, end: RunEnd) -> LoopResult:
    """The run's result, stored (`end`) before it is returned."""
    state = LoopState.start(ctx.history)
    try:
        ending = await drive(ctx, state, surface)
    except asyncio.CancelledError:
        await _to_the_end(end(state, None))
        raise
    result = surface.result(ending, state.usage)
    await _to_the_end(end(state, result))
    return result


async def _to_the_end(work: Awaitable[None]) -> None:
    """Await `work` to its end even if this task is cancelled meanwhile; the cancellation is
    raised after it."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    task.result()
    if cancelled:
        raise asyncio.CancelledError
