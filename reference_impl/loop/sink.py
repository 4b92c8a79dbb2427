"""What a surface plugs into the loop: a sink for its events, and the one edge where an
ending becomes the surface's answer.

The driver says what happens (`events.py`); a sink turns each event into what its client
reads: Responses events and items (`responses_sink.py`), or the parts of a chat completion
(`chat/sink.py`). A sink decides nothing: which items are shown and how the run ends were
decided before it hears of them. `result` is where a surface maps the loop's ending (`Ending`)
to its own wire form, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import GatewayError
from .actions import Ending
from .events import LoopEvent


@dataclass(frozen=True)
class LoopResult:
    """What the client gets when the run ends, and the error when it failed."""

    response: dict[str, Any]
    error: GatewayError | None = None


class LoopSink(Protocol):
    def emit(self, event: LoopEvent) -> None: ...


class NoOpSink:
    """A sink that shows nothing: what a surface that renders only some events builds on."""

    def emit(self, event: LoopEvent) -> None:
        """Render nothing of `event`."""


class Surface(LoopSink, Protocol):
    """A surface's side of a run: its sink, and its answer for how the run ended."""

    def result(self, ending: Ending, usage: dict[str, Any] | None) -> LoopResult: ...
