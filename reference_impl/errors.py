"""Errors the client sees, in OpenAI's envelope `{"error": {message, type, param, code}}`.

    GatewayError                 any error with an HTTP status and OpenAI's four fields
     ├── InvalidRequest          400 invalid_request_error (validation, state lookups)
     ├── Unauthorized            401 invalid_request_error (a missing or wrong admin key)
     ├── Forbidden               403 invalid_request_error (Chat Completions: a blocked MCP server)
     ├── NotFound                404 invalid_request_error, code and param null
     ├── ExternalConnectorError  424 external_connector_error (an MCP server failed)
     │    └── BlockedDestination  an MCP server's address is outside the outbound policy
     ├── RateLimited             429 rate_limit_exceeded, with a retry hint
     └── UpstreamError           5xx (or the upstream's 4xx/429) when the model call failed

A body over the gateway's limit is refused by the reader both the gateway and the harness use
(`openai_contract.request_body.RequestTooLarge`, 413), answered at the same edge.

Code anywhere in the gateway raises these (a loop run's error is raised again by the route
that waited for it); `app.py` turns them into HTTP at one edge, and the loop turns them into a
`response.failed` when the stream has already started.
"""

from __future__ import annotations

from typing import Any

from ..openai_contract.violations import Violation


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

    @classmethod
    def of(cls, violation: Violation) -> InvalidRequest:
        """The 400 that answers a violation of OpenAI's request description."""
        return cls(violation.message, param=violation.param, code=violation.code)


class Unauthorized(GatewayError):
    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(401, message, type="invalid_request_error", code=code)


class Forbidden(GatewayError):
    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(403, message, type="invalid_request_error", code=code)


class NotFound(GatewayError):
    def __init__(self, message: str) -> None:
        super().__init__(404, message, type="invalid_request_error")


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
