"""Why a step failed, said first.

A step that fails while its answer is an error its expectation did not ask for (an HTTP error,
a failed Response, a stream's `error` event, an `mcp_list_tools` item with an error) gets one
more finding, first among its findings, that quotes the gateway's own message (the console and
the reports redact it like every other). The step's other findings about what it expected are
what that error caused: they are marked `consequence`, and the console and reports fold them
under it, so one cause reads as one finding.

When the request named MCP fixtures, the finding also says whether any listing or call of the
step reached them. It names the outbound guard only where the evidence points there: nothing
reached the fixtures, and what the gateway said is about its MCP servers or about connecting,
not about something else (a web search provider it lacks, say). Only a step that fails anyway
gets the finding, so it explains failures and never makes one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..model.findings import Finding, Kind, Rule, Severity
from ..model.guard_allowance import GuardAllowance
from ..model.observed import Observed
from ..scenario.expectations import Expect
from ..scenario.fixtures import McpFixture
from ..wire.exchange import Exchange

RULE = Rule("answer", ("error",))
QUOTED_CHARS = 300
CONSEQUENCES = frozenset({"expect", "golden"})
"""The families of findings an unexpected error answer causes: what the step expected of a
good answer. A malformed error envelope or stream is a fault of its own."""
_ABOUT_REACHING = re.compile(r"mcp|connect|reach|refused|resolv|dns|network|outbound|ssrf|blocked|unreachable|"
                             r"timed? ?out|forbidden|not allowed|denied|server_url|tools/list|list tools", re.I)
"""Words of a gateway's message that speak of reaching its MCP servers."""


def _quoted(text: Any) -> str:
    """The gateway's text in double quotes, cut after `QUOTED_CHARS`."""
    text = str(text)
    return json.dumps(text if len(text) <= QUOTED_CHARS else f"{text[:QUOTED_CHARS]}...", ensure_ascii=False)


def named_fixtures(request_body: Any, fixtures: Mapping[str, McpFixture]) -> dict[str, str]:
    """The MCP fixtures the request's MCP tools name by their run's URLs: name -> URL."""
    tools = request_body.get("tools") if isinstance(request_body, dict) else None
    urls = {tool.get("server_url") for tool in tools or [] if isinstance(tool, dict) and tool.get("type") == "mcp"}
    return {name: url for name, fixture in fixtures.items() for url in (fixture.url, fixture.sse_url) if url in urls}


def gateway_error(exchange: Exchange) -> tuple[str, str] | None:
    """What the gateway answered, in a few words, and its own message, when the answer is an
    error (or shows a failed MCP listing); None when it is not."""
    response = exchange.latest_response() or {}
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "mcp_list_tools" and item.get("error"):
            return (f"an mcp_list_tools item for {item.get('server_label')!r} with the error "
                    f"{_quoted(item['error'])}", f"mcp {item['error']}")
    envelope = exchange.body.get("error") if isinstance(exchange.body, dict) else None
    if exchange.status is not None and exchange.status >= 400:
        if isinstance(envelope, dict):
            message = envelope.get("message")
            return f"HTTP {exchange.status} ({envelope.get('type')}) {_quoted(message)}", str(message)
        return f"HTTP {exchange.status}", ""
    if response.get("status") == "failed":
        error = response.get("error") if isinstance(response.get("error"), dict) else {}
        return f"a failed Response ({error.get('code')}) {_quoted(error.get('message'))}", str(error.get("message"))
    event = next((e.payload for e in exchange.events if (e.payload or {}).get("type") == "error"), None)
    if event is not None:
        fields = event["error"] if isinstance(event.get("error"), dict) else event  # nested, as OpenAI's are
        return f"an error event ({fields.get('code')}) {_quoted(fields.get('message'))}", str(fields.get("message"))
    return None


def expects_an_error(expect: Expect | None) -> bool:
    """Whether the step asks for an error answer (an error envelope, an HTTP error status)."""
    return expect is not None and (expect.error is not None or (expect.http_status or 0) >= 400)


def explained(findings: list[Finding], exchange: Exchange, expect: Expect | None, observed: Observed | None,
              fixtures: Mapping[str, McpFixture]) -> list[Finding]:
    """`findings` led by the unexpected error that caused them, if the step failed on one (see
    the module's docstring); unchanged otherwise."""
    if expects_an_error(expect) or not any(finding.fails for finding in findings):
        return findings
    if (cause := _cause(exchange, observed, fixtures)) is None:
        return findings
    return [cause, *(replace(f, consequence=True) if f.rule.family in CONSEQUENCES else f for f in findings)]


def _cause(exchange: Exchange, observed: Observed | None, fixtures: Mapping[str, McpFixture]) -> Finding | None:
    if (error := gateway_error(exchange)) is None:
        return None
    answered, message = error
    named = named_fixtures(exchange.request_body, fixtures) if observed is not None else {}
    reached = sorted({call["fixture"] for call in observed.mcp_calls} & set(named)) if observed else []
    unreached = {name: url for name, url in named.items() if name not in reached}
    text, key = f"the gateway answered {answered}", None
    if reached:
        text, key = f"{text}; its requests reached the MCP fixture(s) {', '.join(reached)}", f"{RULE} reached"
    elif unreached and _ABOUT_REACHING.search(message):
        where = ", ".join(f"{name} at {url}" for name, url in unreached.items())
        text = (f"{text}; no listing or call reached the MCP fixture(s) {where}: the gateway most likely could not "
                f"reach them; {GuardAllowance.for_urls(unreached.values()).advice()}")
        key = f"{RULE} unreached {', '.join(unreached)}"
    return Finding(Kind.STATUS, Severity.ERROR, RULE, text, key=key)
