"""A scenario drafted from captured exchanges (`parity scenario from-capture`), for its author
to review: its steps send the captured requests, and each expects the captured answer's
contract (`expectations.expectation_of`).

What a capture cannot say is marked for the author, in the comments at the top of the file:
the scripted model's turns are guessed from the output items each answer carries (a tool
call the model made, then the text it wrote), and each MCP server is played by a fixture
(the one its label names, else one that offers every tool the capture shows it having).
Ids of earlier answers become placeholders (`{{step1.response.id}}`), the model `{{model}}`.
Nothing else the capture holds becomes one: a `{{` or `{%` in a copied value (a gateway may
answer anything) is written as a literal (`placeholders.escaped`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import yaml

from ...fixtures.mcp import FIXTURE_SERVERS
from ...openai_contract.documents import DocumentError
from ..defaults import DEFAULT_CHAT_PATH, DEFAULT_RESPONSES_PATH
from ..model.contract import project_answer
from ..scenario.expectations import expectation_of
from ..scenario.fixture_names import fixture_tools
from ..scenario.loader import parse_yaml, scenario_from
from ..scenario.placeholders import escaped
from ..wire.capture import Captured, answer_ids, replace_ids, replace_ids_in_path
from ..wire.exchange import Exchange
from ..wire.websocket import TRANSPORT

CALLS = ("function_call", "mcp_call", "mcp_approval_request", "custom_tool_call")
SURFACE_PATHS = {DEFAULT_RESPONSES_PATH: "{{responses_path}}", DEFAULT_CHAT_PATH: "{{chat_path}}",
                 "/v1/conversations": "{{conversations_path}}"}


def _arguments(item: dict[str, Any]) -> dict[str, Any]:
    try:
        arguments = json.loads(item.get("arguments") or "{}")
    except ValueError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


def model_turns(answer: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The model turns an answer's output suggests: the calls the model made, then its text.
    Calls in a row of one kind are one turn (parallel calls); a call the gateway ran (an
    `mcp_call`) followed by one the client runs means the gateway asked the model again in
    between. A call the gateway ran after an approval was made by the model in an earlier
    answer, so it is no turn here."""
    turns: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    ran_by_gateway: bool | None = None

    def close_turn() -> None:
        if calls:
            turns.append({"calls": list(calls)} if len(calls) > 1 else {"call": calls[0]})
            calls.clear()

    for item in (answer or {}).get("output") or []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in CALLS and not item.get("approval_request_id"):
            if ran_by_gateway is not None and ran_by_gateway != (kind == "mcp_call"):
                close_turn()
            ran_by_gateway = kind == "mcp_call"
            calls.append({"tool": item.get("name") or "tool", "arguments": _arguments(item)})
        elif kind == "message":
            close_turn()
            text = "".join(part.get("text", "") for part in item.get("content") or [] if isinstance(part, dict))
            turns.append({"text": text})
    close_turn()
    return turns


def _fixtures_for(captures: list[Captured]) -> dict[str, str]:
    """MCP server URL -> the fixture that stands in for it: the fixture its label names, else
    the first that offers every tool the captured answers show it having; `ValueError` names
    a server no fixture can stand in for."""
    used: dict[str, set[str]] = {}
    servers: dict[str, str] = {}
    for captured in captures:
        body = captured.exchange.request_body if isinstance(captured.exchange.request_body, dict) else {}
        for tool in body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("type") == "mcp" and isinstance(tool.get("server_url"), str):
                servers[tool["server_url"]] = str(tool.get("server_label"))
        for item in (captured.exchange.response_object() or {}).get("output") or []:
            if isinstance(item, dict) and isinstance(item.get("server_label"), str):
                names = [tool.get("name") for tool in item.get("tools") or []] + [item.get("name")]
                used.setdefault(item["server_label"], set()).update(n for n in names if isinstance(n, str))
    chosen = {}
    for url, label in servers.items():
        wanted = used.get(label, set())
        fixture = label if label in FIXTURE_SERVERS else next(
            (name for name in sorted(FIXTURE_SERVERS) if wanted <= set(fixture_tools(name))), None)
        if fixture is None:
            raise ValueError(f"the MCP server {label!r} ({url}, tools {', '.join(sorted(wanted)) or 'none seen'}) is "
                             f"like none of the fixtures ({', '.join(sorted(FIXTURE_SERVERS))}): a scenario can only "
                             "run against a fixture")
        chosen[url] = fixture
    return chosen


def _templated_path(path: str, placeholders: dict[str, str]) -> str:
    """`path` with the surface's prefix and the ids of earlier answers as placeholders."""
    for prefix, placeholder in SURFACE_PATHS.items():
        if path.partition("?")[0] == prefix or path.startswith((prefix + "/", prefix + "?")):
            path = placeholder + path[len(prefix):]
            break
    return replace_ids_in_path(path, placeholders)


def _streamed(exchange: Exchange) -> bool:
    """Whether the client asked for a stream (`stream: true`) or got one (an error refusing it is JSON)."""
    body = exchange.request_body
    return exchange.streamed or (isinstance(body, dict) and body.get("stream") is True)


def _step(number: int, captured: Captured, placeholders: dict[str, str], chat: bool) -> dict[str, Any]:
    exchange = captured.exchange
    step: dict[str, Any] = {"id": f"step{number}", "title": f"captured as {captured.path.name}"}
    if exchange.method != "POST":
        step["method"] = exchange.method
    default_path = DEFAULT_CHAT_PATH if chat else DEFAULT_RESPONSES_PATH
    if captured.request_path != default_path:
        step["path"] = _templated_path(escaped(captured.request_path), placeholders)
    if isinstance(exchange.request_body, dict):
        body = replace_ids(escaped(exchange.request_body), placeholders)
        body.pop("stream", None)
        step["request"] = body | ({"model": "{{model}}"} if "model" in body else {})
    step["stream"] = _streamed(exchange)
    turns = model_turns(exchange.response_object())
    if turns:
        step["model"] = escaped(turns)
    expect = expectation_of(project_answer(exchange))
    step["expect"] = escaped(expect.model_dump(mode="json", exclude_defaults=True))
    return step


def scenario_text(captures: list[Captured], scenario_id: str) -> str:
    """The scenario, as YAML with its review notes on top; it loads with the project's loader
    (`ValueError` naming the problem otherwise)."""
    chat = all("chat/completions" in c.request_path for c in captures)
    fixtures = _fixtures_for(captures)
    placeholders: dict[str, str] = {escaped(url): f"{{{{mcp.{fixture}.url}}}}" for url, fixture in fixtures.items()}
    steps = []
    for number, captured in enumerate(captures, 1):
        steps.append(_step(number, captured, placeholders, chat))
        placeholders |= {escaped(old): f"{{{{step{number}.{place}}}}}"
                         for old, place in answer_ids(captured.exchange).items()}
    first = captures[0].exchange.meta
    upstream = first.get("upstream") or captures[0].exchange.url
    date = str(first.get("captured_at") or datetime.now(UTC).isoformat(timespec="seconds"))[:10]
    socket = all(c.exchange.meta.get("transport") == TRANSPORT for c in captures)  # one connection's creates
    mode = "websocket" if socket else "stream" if any(_streamed(c.exchange) for c in captures) else "nonstream"
    document = {"id": scenario_id, "title": f"Captured traffic: {len(captures)} exchange(s)", "tags": ["captured"],
                "evidence": {"recordings": list(dict.fromkeys(c.path.name for c in captures)),
                             "note": f"captured from {upstream} on {date}; review before committing"},
                **({"surface": "chat"} if chat else {}), "modes": [mode],
                **({"mcp": sorted(set(fixtures.values()))} if fixtures else {}), "steps": steps}
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=110)
    try:  # the text as the loader reads it, within its bounds: a hostile gateway's answers may not fit them
        problems = scenario_from(parse_yaml(text))
    except DocumentError as error:
        problems = [str(error)]
    if isinstance(problems, list):
        raise ValueError("the drafted scenario does not load: " + "; ".join(problems))
    return _review_notes(fixtures) + text


def _review_notes(fixtures: dict[str, str]) -> str:
    lines = [
        "# Drafted by `parity scenario from-capture`: review before committing.",
        "# - `model:` of each step is guessed from the output items of the captured answer (the calls",
        "#   the model made, then its text); the scripted model plays these turns. Calls in a row of",
        "#   one kind are taken for one turn (parallel calls): split them where the model made them",
        "#   one at a time.",
        "# - Each step runs once, streamed or not as captured (`stream:`); drop `stream` and `modes`",
        "#   to run every step both ways, and move `events`/`terminal` to `per_mode: {stream: ...}`.",
    ]
    lines += [f"# - The MCP server {json.dumps(url)} is played by the fixture {fixture!r}: check it offers what the "
              "server did." for url, fixture in fixtures.items()]
    return "\n".join(lines) + "\n"
