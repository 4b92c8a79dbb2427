"""What the recording proxy's two relays (HTTP, `proxy.py`; WebSocket, `socket_proxy.py`) share:
its bounds, where a request carries credentials, the headers it does not forward, and the
events it reports through `on_event` (it prints nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from urllib.parse import unquote_plus

from ...openai_contract.request_body import MAX_BODY_BYTES
from ..defaults import DEFAULT_MAX_ANSWER_BYTES
from ..model.findings import Finding
from ..wire.exchange import Exchange
from ..wire.redaction import REDACTED, SECRET_KEYS, Redactor

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "accept-encoding"})
"""Request and answer headers not forwarded as they are (`Host` and `Accept-Encoding`
are the proxy's own on the way up)."""
UPSTREAM_FAILED = "proxy.upstream"
DEFAULT_READ_TIMEOUT_S = 600.0
"""As long as the openai SDK waits for an answer by default; a stream that keeps sending may
run longer."""
CREDENTIAL_PARAMS = frozenset({"api_key", "api-key", "apikey", "x-api-key", "key", "token", "access_token",
                               "refresh_token", "id_token", "auth", "authorization", "client_secret", "secret",
                               "password", "sig", "signature"})
"""Query parameters whose values are credentials (API keys in a URL, OAuth tokens, Azure's
shared access signature), matched without regard to case."""

@dataclass(frozen=True)
class ProxyLimits:
    max_request_bytes: int = MAX_BODY_BYTES
    """A larger request body is refused (413); the reference gateway's limit."""
    max_recorded_request_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    """Recorded of one answer (the client gets all of it)."""
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    """How long the upstream may send nothing."""


@dataclass(frozen=True)
class Credentials:
    """Where a request carries credentials: the headers and query parameters so named (in
    lower case)."""

    headers: frozenset[str] = SECRET_KEYS
    params: frozenset[str] = CREDENTIAL_PARAMS

    @classmethod
    def naming(cls, headers: Iterable[str] = (), params: Iterable[str] = ()) -> Credentials:
        """The usual ones, and these headers and query parameters too."""
        return cls(SECRET_KEYS | {name.lower() for name in headers},
                   CREDENTIAL_PARAMS | {name.lower() for name in params})

    def values(self, headers: Iterable[tuple[str, str]], query: str = "") -> list[str]:
        """The credentials in these headers and this query: each header's value (and each of
        its cookies'), each parameter's value as sent and decoded."""
        found = []
        for name, value in headers:
            if name.lower() in self.headers:
                found += [value, *_cookie_values(name.lower(), value)]
        for name, value in _params(query):
            if name in self.params and value:
                found += [value, unquote_plus(value)]
        return found

    def hidden(self, path: str) -> str:
        """`path` with each credential parameter's value in its query replaced by `<redacted>`."""
        bare, mark, query = path.partition("?")
        if not query:
            return path
        parts = [f"{part.partition('=')[0]}={REDACTED}" if name in self.params and "=" in part else part
                 for part, (name, _) in zip(query.split("&"), _params(query), strict=True)]
        return bare + mark + "&".join(parts)


def _params(query: str) -> Iterator[tuple[str, str]]:
    """Each `name=value` of a query: the name decoded and in lower case, the value as sent."""
    for part in query.split("&") if query else ():
        name, _, value = part.partition("=")
        yield unquote_plus(name).lower(), value


def _cookie_values(header: str, value: str) -> list[str]:
    """The values of the cookies a `Cookie` header sends, or of the one a `Set-Cookie` sets."""
    pairs = value.split(";") if header == "cookie" else value.split(";")[:1] if header == "set-cookie" else []
    return [pair.partition("=")[2].strip() for pair in pairs if "=" in pair]


@dataclass(frozen=True)
class Found:
    """A finding on the exchange recorded as `capture` (the file name; written once it ends)."""

    capture: str
    finding: Finding

    @classmethod
    def redacted(cls, capture: str, finding: Finding, redactor: Redactor) -> Found:
        """`finding` on `capture`, its message without the secrets `redactor` knows."""
        return cls(capture, replace(finding, message=redactor.redact_text(finding.message)))


@dataclass(frozen=True)
class Recorded:
    """An exchange ended and was written as `capture`."""

    capture: str
    exchange: Exchange


@dataclass(frozen=True)
class NotForwarded:
    """A request that never reached the upstream (`path` with its credentials hidden), and why."""

    method: str
    path: str
    reason: str


@dataclass(frozen=True)
class Dropped:
    """An exchange that ended but was neither checked nor written (`checker.py`), and why."""

    capture: str
    reason: str


ProxyEvent = Found | Recorded | NotForwarded | Dropped
