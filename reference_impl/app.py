"""The reference gateway's HTTP surface. `GatewayError` becomes OpenAI's error JSON here, and
only here; an unknown route or method gets OpenAI's `Invalid URL` 404."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive

from .config import GatewayConfig
from .errors import GatewayError, InvalidRequest, NotFound
from .event_log import sse_frame
from .loop.driver import LoopResult
from .mcp_servers import McpConnector
from .service import ResponsesService, Run
from .store import ResponseStore, SqliteStore
from .upstream import make_adapter


def error_response(error: GatewayError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


async def _read_json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as error:
        raise InvalidRequest("We could not parse the JSON body of your request. The OpenAI API expects a "
                             "JSON payload.") from error


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _until_done_or_gone(request: Request, run: Run) -> LoopResult | None:
    """The loop's result, or None after cancelling it because the client went away."""
    gone = asyncio.create_task(_disconnected(request.receive))
    try:
        await asyncio.wait({run.task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not run.task.done():
        run.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run.task
        return None
    return run.task.result()


async def _stream(run: Run) -> AsyncIterator[bytes]:
    """SSE frames as the loop emits them; a client that disconnects cancels the loop."""
    try:
        async for event in run.log.follow():
            yield sse_frame(event)
    finally:
        if not run.task.done():
            run.task.cancel()


def build_gateway_app(config: GatewayConfig, *, store: ResponseStore | None = None,
                      connector: McpConnector | None = None) -> Starlette:
    """The ASGI app. The store defaults to SQLite at `config.store_path`."""
    store = store or SqliteStore(config.store_path)
    connector = connector or McpConnector(config.mcp_timeout_s)
    http = httpx.AsyncClient(timeout=httpx.Timeout(config.upstream_timeout_s, connect=10.0))
    service = ResponsesService(config, store, make_adapter(config, http), connector)

    async def create_response(request: Request) -> Response:
        run = await service.start(await _read_json(request))
        if run.ctx.request.stream:
            return StreamingResponse(_stream(run), media_type="text/event-stream")
        result = await _until_done_or_gone(request, run)
        if result is None:
            return Response(status_code=499)
        if result.error is not None:
            return error_response(result.error)
        return JSONResponse(result.response)

    async def get_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        stored = await store.get(response_id)
        if stored is None:
            raise NotFound(f"Response with id '{response_id}' not found.")
        return JSONResponse(stored.response)

    async def delete_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not await store.delete(response_id):
            raise NotFound(f"Response with id '{response_id}' not found.")
        return JSONResponse({"id": response_id, "object": "response", "deleted": True})

    async def on_gateway_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, GatewayError)
        return error_response(error)

    async def on_http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if error.status_code in (404, 405):
            return error_response(NotFound(f"Invalid URL ({request.method} {request.url.path})"))
        return JSONResponse({"error": {"message": error.detail, "type": "invalid_request_error", "param": None,
                                       "code": None}}, status_code=error.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await http.aclose()
            store.close()

    return Starlette(
        routes=[
            Route("/v1/responses", create_response, methods=["POST"]),
            Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
            Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        ],
        exception_handlers={GatewayError: on_gateway_error, HTTPException: on_http_error},
        lifespan=lifespan,
    )
