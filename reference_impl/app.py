"""The reference gateway's HTTP surface. `GatewayError` (and the body reader's 413,
`RequestTooLarge`) becomes OpenAI's error JSON here, and only here; an unknown route or method
gets OpenAI's `Invalid URL` 404, and a bug OpenAI's 500 (`last_resort.py`), on a connection that
stays open for the requests after it.

Routes: `POST /v1/responses`, and `GET /v1/responses` upgraded to a WebSocket (`websocket.py`);
`POST /v1/responses/compact` (`compaction.py`) and `/v1/responses/input_tokens` (`tokens.py`);
`GET`, `DELETE /v1/responses/{id}` (`GET ?stream=true
&starting_after=N` streams a background response again); `POST /v1/responses/{id}/cancel`;
`GET /v1/responses/{id}/input_items`; the Conversations API (`conversations.py`); the Files
API (`files.py`); `POST /v1/chat/completions` (`chat/routes.py`); and
`GET /admin/audit/{run_id}`, the audit records of one loop run (a response id, or a chat
completion id), for the holder of the admin key (`Authorization: Bearer <key>`, else a 401).
Without an admin key in the settings the admin route does not exist (404, like any unknown
route).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..openai_contract.request_body import RequestTooLarge
from .chat.routes import chat_routes
from .config import GatewayConfig
from .conversations import conversation_routes
from .errors import GatewayError, InvalidRequest, NotFound, RateLimited, Unauthorized
from .event_log import sse_frame
from .files import UploadSlots, file_routes
from .json_body import read_json
from .json_text import JsonAnswer, JsonText
from .last_resort import AnswerBugs
from .outbound import Resolver, system_resolver
from .pagination import list_query, page_object
from .query import boolean, included, integer
from .runtime import Runtime, key_fingerprint
from .service import ResponsesService, Run
from .store import StoredResponse
from .until_done import answer_when_done
from .vector_store_batches import file_batch_routes
from .vector_stores import vector_store_routes
from .websocket import serve_responses_socket

_log = logging.getLogger(__name__)
_BUG = GatewayError(500, "The server had an error while processing your request. Sorry about that!",
                    type="server_error")
"""OpenAI's 500, in its envelope and words (contract notes §4.2)."""


def error_response(error: GatewayError) -> JsonAnswer:
    headers = {"retry-after": str(error.retry_after_s)} if isinstance(error, RateLimited) else None
    return JsonAnswer(error.body(), status_code=error.status, headers=headers)


async def _stream(run: Run, after: int = -1) -> AsyncIterator[bytes]:
    """SSE frames as the loop emits them. A client that goes away cancels a synchronous loop;
    a background one keeps running."""
    try:
        async for event in run.log.follow(after):
            yield sse_frame(event)
    finally:
        if run.task is not None and not run.task.done() and not run.request.background:
            run.task.cancel()


async def _replay(events: list[dict[str, Any]], after: int) -> AsyncIterator[bytes]:
    for event in events:
        if event["sequence_number"] > after:
            yield sse_frame(event)


def _no_response(response_id: str) -> NotFound:
    return NotFound(f"Response with id '{response_id}' not found.")


def _invalid_url(request: Request) -> NotFound:
    return NotFound(f"Invalid URL ({request.method} {request.url.path})")


def _check_admin_key(request: Request, admin_key: str) -> None:
    """Raises `Unauthorized` unless the request carries `Authorization: Bearer <admin_key>`."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("The admin routes need the gateway's admin key, sent as 'Authorization: Bearer <key>'.")
    if not hmac.compare_digest(token.encode(), admin_key.encode()):
        raise Unauthorized("Incorrect admin key provided.", code="invalid_api_key")


def build_gateway_app(config: GatewayConfig, resolver: Resolver = system_resolver) -> Starlette:
    """The ASGI app, with its SQLite store at `config.store_path`; `resolver` resolves the
    host names the outbound policy checks."""
    runtime = Runtime.build(config, resolver)
    store = runtime.store
    service = ResponsesService(runtime)

    async def stored(response_id: str) -> StoredResponse:
        found = await store.get(response_id)
        if found is None:
            raise _no_response(response_id)
        return found

    async def stored_json(response_id: str) -> JsonText:
        """The stored response, answered as the store keeps it."""
        text = await store.response_json(response_id)
        if text is None:
            raise _no_response(response_id)
        return JsonText(text)

    async def create_response(request: Request) -> Response:
        run = await service.start(await read_json(request), key_fingerprint(request.headers.get("authorization")))
        assert run.task is not None
        if run.request.stream:
            return StreamingResponse(_stream(run), media_type="text/event-stream")
        if run.request.background:
            return JsonAnswer(run.live_response()) if run.log.events else await stored_json(run.response_id)

        def answer(response: dict[str, Any]) -> Response:
            """The response as the run's end encoded it: once, for the store and for this answer."""
            assert run.ended is not None and run.ended.response is response
            return JsonText(run.ended.encoded)

        return await answer_when_done(request, run.task, answer)

    async def compact_response(request: Request) -> Response:
        key = key_fingerprint(request.headers.get("authorization"))
        return JsonAnswer(await service.compact(await read_json(request), key))

    async def count_input_tokens(request: Request) -> Response:
        return JsonAnswer(await service.count_input_tokens(await read_json(request)))

    async def responses_socket(websocket: WebSocket) -> None:
        await serve_responses_socket(websocket, service, config.websocket_max_s)

    async def get_response(request: Request) -> Response:
        response_id, query = request.path_params["response_id"], request.query_params
        included(query)
        boolean(query, "include_obfuscation")
        after = integer(query, "starting_after")
        if not boolean(query, "stream"):
            answer = await stored_json(response_id)
            running = service.running.get(response_id)
            return JsonAnswer(running.live_response()) if running and running.log.events else answer
        found = await stored(response_id)
        running = service.running.get(response_id)
        if not found.response.get("background") or not found.streamed:
            raise InvalidRequest("You can only start a new stream from a background response if you created it "
                                 "with stream=true.", param="stream")
        after = -1 if after is None else after
        frames = _stream(running, after) if running else _replay(await store.events(response_id), after)
        return StreamingResponse(frames, media_type="text/event-stream")

    async def delete_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not await store.delete(response_id):
            raise _no_response(response_id)
        return JsonAnswer({"id": response_id, "object": "response.deleted", "deleted": True})

    async def cancel_response(request: Request) -> Response:
        return JsonAnswer(await service.cancel(request.path_params["response_id"]))

    async def input_items(request: Request) -> Response:
        included(request.query_params)
        response_id = request.path_params["response_id"]
        if not await store.has_response(response_id):
            raise _no_response(response_id)
        return JsonAnswer(page_object(*await store.input_items_page(response_id, list_query(request.query_params))))

    async def audit(request: Request) -> Response:
        if not config.admin_key:
            raise _invalid_url(request)
        _check_admin_key(request, config.admin_key)
        run_id = request.path_params["run_id"]
        records = await store.audit(run_id)
        if not records:
            raise NotFound(f"No audit records for run '{run_id}'.")
        return JsonAnswer({"run_id": run_id, "records": records})

    async def on_gateway_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, GatewayError)
        return error_response(error)

    async def on_too_large(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestTooLarge)
        return JsonAnswer(error.body(), status_code=error.status)

    async def on_http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if error.status_code in (404, 405):
            return error_response(_invalid_url(request))
        return error_response(GatewayError(error.status_code, error.detail, type="invalid_request_error"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await service.shutdown()
            await runtime.close()

    return Starlette(
        routes=[
            Route("/v1/responses", create_response, methods=["POST"]),
            WebSocketRoute("/v1/responses", responses_socket),
            Route("/v1/responses/compact", compact_response, methods=["POST"]),
            Route("/v1/responses/input_tokens", count_input_tokens, methods=["POST"]),
            Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
            Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
            Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
            Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
            *conversation_routes(store),
            *file_routes(store, UploadSlots(config.max_concurrent_uploads, config.upload_wait_s)),
            *vector_store_routes(store, store),
            *file_batch_routes(store, store),
            *chat_routes(runtime),
            Route("/admin/audit/{run_id}", audit, methods=["GET"]),
        ],
        middleware=[Middleware(AnswerBugs, answer=lambda scope, error: error_response(_BUG), log=_log)],
        exception_handlers={GatewayError: on_gateway_error, RequestTooLarge: on_too_large,
                            HTTPException: on_http_error},
        lifespan=lifespan,
    )
