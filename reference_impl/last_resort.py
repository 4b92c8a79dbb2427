"""The last resort for a bug: an exception no handler turned into an answer is answered by the
app's own error shape, logged with its traceback, and goes no further.

Starlette's own last resort answers too (a plain-text 500 unless told otherwise), but raises the
exception again, and uvicorn then closes the connection, resetting the requests a client has
already sent on it. An exception once an answer has started (a stream) is raised on: that answer
cannot be completed, so its connection has to end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Answer = Callable[[Scope, Exception], Response]
"""The answer to a bug in the request `scope`."""


class AnswerBugs:
    """ASGI middleware: a bug is `answer(scope, error)`, on a connection that stays open."""

    def __init__(self, app: ASGIApp, answer: Answer, log: logging.Logger) -> None:
        self.app = app
        self.answer = answer
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as error:
            if started:
                raise
            self.log.exception("a bug, answered with a 500: %s %s", scope["method"], scope["path"])
            await self.answer(scope, error)(scope, receive, send)
