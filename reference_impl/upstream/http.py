"""The gateway's HTTP client to the model: one aiohttp session per gateway, and the posts the
adapters make with it (a JSON answer, or the JSON payloads of an SSE stream).

A model request is built and encoded (`request_content`) on the event loop when its transcript
is short, and in a worker thread when it is long, there encoded a member of each top-level
container at a time, each in one call into C, so that the loop has its turn between them
(building and encoding 100,000 items takes about a second, and one call into C for the whole
body would hold the loop, thread or not).

Why aiohttp when the rest of the project speaks httpx2: a plain model call cost the gateway about
1.3 ms of CPU through httpx (most of it in httpcore's pool bookkeeping; httpx2 is its fork) and
0.17 ms through aiohttp, whose HTTP parser is compiled (tests/benchmarks/http_stack.py shows the
gateway's share). Streams are still parsed by httpx2's public `EventSource` over an
`httpx2.Response` that reads the aiohttp body; an event's size is not bounded there, as the
model URL is trusted configuration.

The model URL is trusted configuration: the outbound policy, which guards where MCP servers may
point, does not apply to it. Proxy variables of the environment are not read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx2

from ..errors import GatewayError, UpstreamError
from ..json_text import compact_json, rewritable_json

CONNECT_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 4.0
"""Shorter than the 5 s most servers keep an idle connection (uvicorn's default), so a request
is not sent on a connection the model server is closing."""
UPSTREAM_FAILURES = (aiohttp.ClientError, TimeoutError)
"""What a failed exchange with the model raises (a timeout is a `TimeoutError`)."""
BUILD_ON_THE_LOOP_ITEMS = 64
"""A model request for a transcript of up to this many items is built and encoded on the loop
(well under a millisecond); a longer one in a worker thread."""


class UpstreamClient:
    """The session to the model, opened by the first call in the event loop that serves the
    gateway (an aiohttp session belongs to one loop), closed by `close`. Each read of the answer
    may wait `timeout_s`, as may waiting for a free connection; connecting `CONNECT_TIMEOUT_S`."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_connect=CONNECT_TIMEOUT_S,
                                              sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout,
                                                  connector=aiohttp.TCPConnector(keepalive_timeout=KEEP_ALIVE_S))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _failure_text(error: BaseException) -> str:
    """What went wrong, for an error message (a timeout's own text is empty)."""
    return str(error) or type(error).__name__


def _utf8(text: str) -> bytes:
    """JSON text as UTF-8, a character no UTF-8 can hold (half a surrogate pair a model's earlier
    output held, replayed) written as its JSON escape: such a character is only ever inside a
    JSON string, where the escape reads back as itself."""
    return text.encode("utf-8", "backslashreplace")


def json_bytes(body: Any) -> bytes:
    """A request body as httpx2's `json=` sends it: compact, UTF-8, no NaN; text no UTF-8 can
    hold escaped (`_utf8`), where httpx2 would fail."""
    return _utf8(compact_json(body))


def json_bytes_stepwise(body: dict[str, Any]) -> bytes:
    """`json_bytes(body)`, byte for byte, encoded a member of the body's containers at a time."""
    def members(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ",".join(f"{compact_json(str(key))}:{compact_json(member)}"
                                  for key, member in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ",".join(compact_json(member) for member in value) + "]"
        return compact_json(value)

    return _utf8("{" + ",".join(f"{compact_json(str(key))}:{members(value)}" for key, value in body.items()) + "}")


async def request_content(build: Callable[[], dict[str, Any]], items: int) -> bytes:
    """The encoded body `build()` makes for a transcript of `items` items: built and encoded on
    the loop up to `BUILD_ON_THE_LOOP_ITEMS`, beyond in a worker thread, a member at a time."""
    if items <= BUILD_ON_THE_LOOP_ITEMS:
        return json_bytes(build())
    return await asyncio.to_thread(lambda: json_bytes_stepwise(build()))


def upstream_error_from(status: int, body: bytes) -> UpstreamError:
    """An `UpstreamError` carrying what the upstream said, in OpenAI's fields."""
    try:
        error = rewritable_json(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = error.get("message") if isinstance(error, dict) else None
    return UpstreamError(
        status,
        message or f"The upstream model returned HTTP {status}.",
        type=(error.get("type") if isinstance(error, dict) else None) or "server_error",
        code=error.get("code") if isinstance(error, dict) else None,
    )


MAX_ERROR_BYTES = 64 * 2**10
"""How much of an error answer is read: an error body is a sentence, not a document."""


def openai_error_from(status: int, body: bytes) -> GatewayError:
    """An upstream's error answer in OpenAI's envelope, for a client that talks to the upstream
    through the gateway (the chat passthrough): its `message`, `type`, `param` and `code` where it
    has them; a body that is no OpenAI error at all (a page, plain text) is named by its status."""
    try:
        error = rewritable_json(body).get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return upstream_error_from(status, body)
    def text(key: str) -> str | None:
        return value if isinstance(value := error.get(key), str) else None

    return GatewayError(status, error["message"], type=text("type") or "server_error", param=text("param"),
                        code=text("code"))


class HttpUpstream:
    """One model endpoint: post a body, hand back JSON or SSE events. A model that cannot be
    reached, times out or breaks the protocol is a 502 `UpstreamError`; an HTTP error status is
    the upstream's own error (`upstream_error_from`)."""

    def __init__(self, client: UpstreamClient, url: str, api_key: str | None,
                 extra_headers: dict[str, str] | None = None) -> None:
        self._client = client
        self._url = url
        self._headers = ({"content-type": "application/json"} | ({"authorization": f"Bearer {api_key}"}
                                                                  if api_key else {}) | (extra_headers or {}))

    async def send(self, content: bytes) -> aiohttp.ClientResponse:
        """Post `content`; the answer, its body not read yet (the caller releases it)."""
        try:
            return await self._client.session().post(self._url, data=content, headers=self._headers)
        except UPSTREAM_FAILURES as error:
            raise _unreachable(error) from error

    async def error_body(self, answer: aiohttp.ClientResponse) -> bytes:
        """At most `MAX_ERROR_BYTES` of an error answer's body; the answer is released."""
        data = bytearray()
        try:
            async for chunk in answer.content.iter_any():
                data += chunk
                if len(data) >= MAX_ERROR_BYTES:
                    break
        except UPSTREAM_FAILURES as error:
            raise _unreachable(error) from error
        finally:
            answer.release()
        return bytes(data[:MAX_ERROR_BYTES])

    async def post_json(self, content: bytes) -> dict[str, Any]:
        """Post `content` (a JSON body); the JSON answer."""
        answer = await self.send(content)
        try:
            raw = await answer.read()
        except UPSTREAM_FAILURES as error:
            raise _unreachable(error) from error
        finally:
            answer.release()
        if answer.status >= 400:
            raise upstream_error_from(answer.status, raw)
        try:
            return rewritable_json(raw)
        except ValueError as error:
            raise UpstreamError(502, "The upstream model returned a body that is not JSON.") from error

    async def post_stream(self, content: bytes) -> AsyncIterator[dict[str, Any]]:
        """Post `content` (a JSON body); the JSON payloads of the stream's events, up to `[DONE]`
        or the end of the stream."""
        answer = await self.send(content)
        try:
            if answer.status >= 400:
                raise upstream_error_from(answer.status, await answer.read())
            async for sse in httpx2.EventSource(_as_httpx2_response(answer), max_event_size=None):
                if sse.data == "[DONE]":
                    return
                yield _payload(sse)
        except (*UPSTREAM_FAILURES, httpx2.HTTPError) as error:  # its `SSEError` is an httpx2 error
            raise UpstreamError(502, f"The upstream model stream failed: {_failure_text(error)}") from error
        finally:
            answer.release()


def _unreachable(error: BaseException) -> UpstreamError:
    return UpstreamError(502, f"The upstream model could not be reached: {_failure_text(error)}")


class _AiohttpBody(httpx2.AsyncByteStream):
    """An aiohttp answer's body, chunk by chunk as it arrives (already decompressed)."""

    def __init__(self, answer: aiohttp.ClientResponse) -> None:
        self._answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._answer.content.iter_any():
            yield chunk


_MODEL_REQUEST = httpx2.Request("POST", "http://model.invalid/")
"""The request `EventSource` names in its errors (it needs one); the post was aiohttp's, so this
one is never sent."""


def _as_httpx2_response(answer: aiohttp.ClientResponse) -> httpx2.Response:
    """What `EventSource` reads: the content type (with its charset) and the body; no content
    encoding, since aiohttp has decoded the body already."""
    return httpx2.Response(answer.status, headers={"content-type": answer.headers.get("content-type", "")},
                           stream=_AiohttpBody(answer), request=_MODEL_REQUEST)


def _payload(sse: httpx2.ServerSentEvent) -> dict[str, Any]:
    try:
        payload = rewritable_json(sse.data)
    except ValueError as error:
        raise UpstreamError(502, "The upstream model sent an event that is not JSON.") from error
    if not isinstance(payload, dict):
        raise UpstreamError(502, "The upstream model sent an event that is not a JSON object.")
    return payload
