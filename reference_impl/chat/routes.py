"""`POST /v1/chat/completions`.

With at least one enabled MCP server, or a hosted tool (`chat.hosted_tools`: web_search,
file_search), in the gateway's configuration every chat completion runs through the agent
loop, unless the request opts out with the configured header (true, 1 or
yes, any case). Otherwise it passes through to the upstream unchanged, streams included (an
Anthropic upstream cannot take a chat request as it is, so there the loop translates it, with
no gateway tool).
A destination the outbound policy blocks is a 403; nothing of it reaches the model. Errors are
raised, for `app.py` to answer; a model's error answer passes through in OpenAI's envelope.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..client import HostedTool, WebSearchTool
from ..config import ConfigError
from ..errors import BlockedDestination, Forbidden, InvalidRequest
from ...openai_contract.request_body import read_bytes
from ..json_body import JsonBody, read_json
from ..json_text import JsonAnswer
from ..loop.lifecycle import run_loop
from ..loop.sink import LoopResult
from ..loop.state import LoopState
from ..runtime import Runtime, key_fingerprint
from ..until_done import answer_when_done
from ..upstream.http import HttpUpstream, openai_error_from
from ..validation import hosted_tool
from .request import validate_chat
from .sink import ChatSink, final_only_chunks

TRUTHY = ("true", "1", "yes")


def _forbidden(error: BlockedDestination) -> Forbidden:
    return Forbidden(error.message, code="destination_blocked")


def configured_hosted_tools(runtime: Runtime) -> tuple[HostedTool, ...]:
    """`chat.hosted_tools` checked as a Responses request's tools; a `ConfigError` naming the
    entry when one cannot be run (a web search needs a provider)."""
    tools = []
    for index, entry in enumerate(runtime.config.chat_hosted_tools):
        where = f"chat.hosted_tools[{index}]"
        try:
            tool = hosted_tool(where, entry)
        except InvalidRequest as error:
            raise ConfigError(f"{error.param}: {error.message}") from error
        if tool is None:
            raise ConfigError(f"{where}.type: {entry['type']!r} is not a hosted tool this gateway runs")
        if isinstance(tool, WebSearchTool) and runtime.web_search is None:
            raise ConfigError(f"{where}: a web_search tool needs a web search provider (the web_search section)")
        tools.append(tool)
    return tuple(tools)


def chat_routes(runtime: Runtime) -> list[Route]:
    config = runtime.config
    hosted_tools = configured_hosted_tools(runtime)

    upstream = HttpUpstream(runtime.http, config.upstream_url.rstrip("/") + "/chat/completions",
                            config.upstream_api_key)

    async def passthrough(request: Request, body: bytes) -> Response:
        """The model's answer as it is, but for an error: that is OpenAI's envelope, whatever the
        model sent (a plain-text 500 too)."""
        answer = await upstream.send(body)
        if answer.status >= 400:
            raise openai_error_from(answer.status, await upstream.error_body(answer))

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.content.iter_any():
                    yield chunk
            finally:
                answer.release()

        return StreamingResponse(relay(), status_code=answer.status,
                                 media_type=answer.headers.get("content-type", "application/json"))

    async def loop(request: Request, body: JsonBody, with_gateway_tools: bool) -> Response:
        chat = await body.checked(validate_chat)
        api_key = key_fingerprint(request.headers.get("authorization"))
        completion_id = f"chatcmpl-{secrets.token_hex(12)}"
        hosted = hosted_tools if with_gateway_tools else ()
        await runtime.check_hosted_tools(hosted, where="chat.hosted_tools")
        ctx = runtime.context(chat.loop_request(), api_key, hosted, history=chat.history(),
                              bindings=tuple(runtime.configured_bindings(set(), approvals=False)
                                             if with_gateway_tools else ()),
                              tool_budget=config.tool_call_cap, refusal_budget=config.tool_call_cap,
                              max_rounds=config.chat_max_rounds,
                              deadline=time.monotonic() + config.chat_deadline_s)
        sink = ChatSink(chat.model, completion_id, int(time.time()))

        async def end(state: LoopState, _: LoopResult | None) -> None:
            """A completion stores only its audit (a run stopped because its client went away too)."""
            await runtime.store.save_end(completion_id, state.audit)

        def answer(completion: dict[str, Any]) -> Response:
            if chat.stream and config.chat_stream_mode == "final_only":
                return StreamingResponse(final_only_chunks(completion, chat.include_usage),
                                         media_type="text/event-stream")
            return JsonAnswer(completion)

        # a blocked destination is raised as itself, for `chat_completions` to answer as a 403
        return await answer_when_done(request, await runtime.launch(api_key, lambda: run_loop(ctx, sink, end)),
                                      answer)

    async def chat_completions(request: Request) -> Response:
        opted_out = request.headers.get(config.chat_opt_out_header, "").strip().lower() in TRUTHY
        with_gateway_tools = config.loop_on_chat and not opted_out
        if config.upstream_wire != "anthropic" and not with_gateway_tools:
            return await passthrough(request, await read_bytes(request))
        try:
            return await loop(request, await read_json(request), with_gateway_tools)
        except BlockedDestination as error:
            raise _forbidden(error) from error

    return [Route("/v1/chat/completions", chat_completions, methods=["POST"])]
