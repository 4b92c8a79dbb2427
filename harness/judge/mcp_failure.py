"""Why a step that gave the gateway MCP fixtures failed: what the gateway answered, and the
likely cause.

A step whose answer shows a failed MCP listing (an HTTP error, a failed Response, an
`mcp_list_tools` item with an error) while its request named MCP fixtures gets one more
finding, first among its findings, that quotes the gateway's own message (the console and the
reports redact it like every other) and says whether any listing or call of the step reached
the fixtures. None did: the gateway could not reach them, and the finding says what an
outbound guard must allow. Only a step that fails anyway gets it, so it explains failures and
never makes one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..model.findings import Finding, Kind, Severity
from ..model.guard_allowance import GuardAllowance
from ..model.observed import Observed
from ..scenario.fixtures import McpFixture
from ..wire.exchange import Exchange

RULE = "mcp.failure"
QUOTED_CHARS = 300


def _quoted(text: Any) -> str:
    """The gateway's text in double quotes, cut after `QUOTED_CHARS`."""
    text = str(text)
    return json.dumps(text if len(text) <= QUOTED_CHARS else f"{text[:QUOTED_CHARS]}...", ensure_ascii=False)


def named_fixtures(request_body: Any, fixtures: Mapping[str, McpFixture]) -> dict[str, str]:
    """The MCP fixtures the request's MCP tools name by their run's URLs: name -> URL."""
    tools = request_body.get("tools") if isinstance(request_body, dict) else None
    urls = {tool.get("server_url") for tool in tools or [] if isinstance(tool, dict) and tool.get("type") == "mcp"}
    return {name: url for name, fixture in fixtures.items() for url in (fixture.url, fixture.sse_url) if url in urls}


def gateway_answer(exchange: Exchange) -> str | None:
    """What the gateway answered, in a few words, when the answer shows a failed MCP listing or
    a failed request; None when it shows neither."""
    response = exchange.latest_response() or {}
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "mcp_list_tools" and item.get("error"):
            return f"an mcp_list_tools item for {item.get('server_label')!r} with the error {_quoted(item['error'])}"
    envelope = exchange.body.get("error") if isinstance(exchange.body, dict) else None
    if exchange.status is not None and exchange.status >= 400:
        if isinstance(envelope, dict):
            return f"HTTP {exchange.status} ({envelope.get('type')}) {_quoted(envelope.get('message'))}"
        return f"HTTP {exchange.status}"
    if response.get("status") == "failed":
        error = response.get("error") if isinstance(response.get("error"), dict) else {}
        return f"a failed Response ({error.get('code')}) {_quoted(error.get('message'))}"
    return None


def mcp_failure(exchange: Exchange, observed: Observed, fixtures: Mapping[str, McpFixture]) -> Finding | None:
    """The finding that explains a failed step whose request named MCP fixtures, or None."""
    named = named_fixtures(exchange.request_body, fixtures)
    answered = gateway_answer(exchange) if named else None
    if answered is None:
        return None
    reached = sorted({call["fixture"] for call in observed.mcp_calls} & set(named))
    unreached = {name: url for name, url in named.items() if name not in reached}
    if not unreached:
        return Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, RULE, f"the gateway answered {answered}; its requests "
                       f"reached the MCP fixture(s) {', '.join(reached)}", key=f"{RULE} reached")
    where = ", ".join(f"{name} at {url}" for name, url in unreached.items())
    advice = GuardAllowance.for_urls(unreached.values()).advice()
    return Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, RULE,
                   f"the gateway answered {answered}; no listing or call reached the MCP fixture(s) {where}: "
                   f"the gateway most likely could not reach them; {advice}",
                   key=f"{RULE} unreached {', '.join(unreached)}")
