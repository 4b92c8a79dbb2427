"""Errors the client sees, in OpenAI's envelope `{"error": {message, type, param, code}}`.

    GatewayError                 any error with an HTTP status and OpenAI's four fields
     ├── InvalidRequest          400 invalid_request_error (validation, state lookups)
     ├── Unauthorized            401 invalid_request_error (a missing or wrong admin key)
     ├── Forbidden               403 invalid_request_error (Chat Completions: a blocked MCP server)
     ├── NotFound                404 invalid_request_error, code and param null
     ├── RequestTooLarge         413 invalid_request_error (a body over the gateway's limit)
     ├── ExternalConnectorError  424 external_connector_error (an MCP server failed)
     │    └── BlockedDestination  an MCP server's address is outside the outbound policy
     ├── RateLimited             429 rate_limit_exceeded, with a retry hint
     └── UpstreamError           5xx (or the upstream's 4xx/429) when the model call failed

Code anywhere in the gateway raises these (a loop run's error is raised again by the route
that waited for it); `app.py` turns them into HTTP at one edge, and the loop turns them into a
`response.failed` when the stream has already started.
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    def __init__(self, status: int, message: str, *, type: str, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response_error(self) -> dict[str, Any]:
        """The `error` of a failed Response object: `{code, message}` only."""
        return {"code": self.code or "server_error", "message": self.message}


class InvalidRequest(GatewayError):
    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(400, message, type="invalid_request_error", param=param, code=code)


class Unauthorized(GatewayError):
    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(401, message, type="invalid_request_error", code=code)


class Forbidden(GatewayError):
    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(403, message, type="invalid_request_error", code=code)


class NotFound(GatewayError):
    def __init__(self, message: str) -> None:
        super().__init__(404, message, type="invalid_request_error")


class RequestTooLarge(GatewayError):
    def __init__(self, size: int, limit: int, *, at_least: bool = False) -> None:
        super().__init__(413, f"The request body is {'more than ' if at_least else ''}{size:,} bytes; this gateway "
                              f"accepts at most {limit:,}.", type="invalid_request_error", code="request_too_large")


class ExternalConnectorError(GatewayError):
    def __init__(self, message: str) -> None:
        super().__init__(424, message, type="external_connector_error", param="tools", code="http_error")


class BlockedDestination(ExternalConnectorError):
    """The gateway refused to connect: the destination resolves to an address its outbound
    policy blocks. The request is aborted; nothing of it reaches the model."""


class RateLimited(GatewayError):
    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(429, message, type="requests", code="rate_limit_exceeded")
        self.retry_after_s = retry_after_s


class UpstreamError(GatewayError):
    """The model call failed; carries the upstream's status (a 5xx unless it said otherwise)."""

    def __init__(self, status: int, message: str, *, type: str = "server_error", code: str | None = None) -> None:
        super().__init__(status, message, type=type, code=code)
