"""Compare what a target did with what a step expects, field by field, with readable diffs.

Only what the expectation states is compared. Every mismatch is an error-level finding: a
scenario's expectation states OpenAI's behaviour.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import replace
import json
from typing import Any


from ...fixtures.recording import fingerprint
from ..model.contract import Contract, ItemShape
from ..model.findings import Finding, Kind, Severity
from ..model.observed import Observed
from ..model.results import StreamReference
from ..scenario.model import ChatExpect, Expect, ItemExpect, PageExpect, UpstreamExpect, Variant
from ..wire.exchange import Exchange


def _mismatch(kind: Kind, rule: str, message: str, expected: Any, actual: Any) -> Finding:
    return Finding(kind, Severity.ERROR, rule, message, expected=expected, actual=actual)


def _item_matches(expected: ItemExpect, actual: ItemShape) -> bool:
    return all(getattr(actual, name) == getattr(expected, name) for name in expected.model_fields_set)


def _expected_label(expected: ItemExpect) -> str:
    details = [str(getattr(expected, name)) for name in ("name", "status") if name in expected.model_fields_set]
    return f"{expected.type}({', '.join(details)})" if details else expected.type


def list_diff(expected: list[str], actual: list[str]) -> str:
    """A one-line description of how two sequences differ."""
    parts = []
    matcher = difflib.SequenceMatcher(a=expected, b=actual, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "delete":
            parts.append(f"missing {', '.join(expected[a1:a2])} at {a1}")
        elif op == "insert":
            parts.append(f"unexpected {', '.join(actual[b1:b2])} at {b1}")
        elif op == "replace":
            parts.append(f"{', '.join(actual[b1:b2])} instead of {', '.join(expected[a1:a2])} at {a1}")
    return "; ".join(parts)


def compare_output(expected: list[ItemExpect], actual: tuple[ItemShape, ...]) -> list[Finding]:
    if len(expected) == len(actual) and all(_item_matches(e, a) for e, a in zip(expected, actual, strict=True)):
        return []
    expected_labels = [_expected_label(e) for e in expected]
    actual_labels = [a.label() for a in actual]
    types_expected, types_actual = [e.type for e in expected], [a.type for a in actual]
    if types_expected == types_actual:
        details = [f"output[{i}]: expected {el}, got {al}" for i, (e, a, el, al)
                   in enumerate(zip(expected, actual, expected_labels, actual_labels, strict=True))
                   if not _item_matches(e, a)]
        message = "; ".join(details)
    else:
        message = f"output item types differ: {list_diff(types_expected, types_actual)}"
    return [_mismatch(Kind.ITEMS, "expect.output", message, expected_labels, actual_labels)]


_RESPONSE_LEVEL = ("status", "incomplete_reason", "usage", "output", "interrupt", "response")


def model_dependent_as_notes(findings: list[Finding], fields: Sequence[str]) -> list[Finding]:
    """Findings of expectations a live model decides (`expect.output`, ...) turned into notes."""
    return [replace(f, severity=Severity.NOTE, message=f"{f.message} (model-dependent)")
            if f.rule.startswith("expect.") and f.rule.split(".")[1] in fields and f.severity > Severity.NOTE else f
            for f in findings]


def compare(expect: Expect, contract: Contract, exchange: Exchange) -> list[Finding]:
    """Findings for every stated field that differs (variants included)."""
    findings = _compare_fields(expect, contract, exchange)
    if expect.variants:
        findings += compare_variants(expect.variants, contract, exchange)
    return findings


def subset_mismatch(expected: Any, actual: Any, where: str = "$") -> str | None:
    """Where `actual` fails to hold `expected` (dict keys given must match, recursively; lists
    match item by item and in length; an empty object means an empty one), or None when it
    holds it."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where} (expected an object)"
        if not expected and actual:
            return f"{where} (expected an empty object, got keys {', '.join(sorted(actual))})"
        for key, value in expected.items():
            if key not in actual:
                return f"{where}.{key} (missing)"
            if (found := subset_mismatch(value, actual[key], f"{where}.{key}")) is not None:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where} (expected {len(expected)} items)"
        return next((found for index, (e, a) in enumerate(zip(expected, actual, strict=True))
                     if (found := subset_mismatch(e, a, f"{where}[{index}]")) is not None), None)
    return None if expected == actual else f"{where} ({actual!r}, expected {expected!r})"


def _media_type(value: str) -> tuple[str, dict[str, str]]:
    """`type/subtype` in lower case, and the parameters (names and charset values lower case)."""
    kind, *parameters = value.split(";")
    parsed = {}
    for parameter in parameters:
        name, _, argument = parameter.strip().partition("=")
        argument = argument.strip().strip('"')
        parsed[name.strip().lower()] = argument.lower() if name.strip().lower() == "charset" else argument
    return kind.strip().lower(), parsed


def header_matches(name: str, wanted: str, actual: str | None) -> bool:
    """Whether a header value is the one wanted: `content-type` as a media type (the
    parameters the expectation gives must be there too), any other exactly."""
    if actual is None:
        return False
    if name.lower() != "content-type":
        return actual == wanted
    (want_type, want_parameters), (got_type, got_parameters) = _media_type(wanted), _media_type(actual)
    return want_type == got_type and all(got_parameters.get(k) == v for k, v in want_parameters.items())


def compare_headers(expected: dict[str, str], headers: dict[str, str]) -> list[Finding]:
    """Header names are compared in any case."""
    received = {name.lower(): value for name, value in headers.items()}
    return [_mismatch(Kind.RESPONSE_FIELD, "expect.headers", f"header {name} is {received.get(name.lower())!r}, "
                      f"expected {wanted!r}", wanted, received.get(name.lower()))
            for name, wanted in expected.items() if not header_matches(name, wanted, received.get(name.lower()))]


def compare_page(expect: PageExpect, body: Any) -> list[Finding]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or body.get("object") != "list":
        return [_mismatch(Kind.RESPONSE_FIELD, "expect.page", "the body is not a list page "
                          "({object: list, data, first_id, last_id, has_more})", "a list", None)]
    findings = []
    ids = [item.get("id") for item in data]
    edges = {"first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None}
    for name, wanted in edges.items():
        if body.get(name) != wanted:
            findings.append(_mismatch(Kind.RESPONSE_FIELD, f"page.{name}", f"{name} is {body.get(name)!r} but the "
                                      f"page's {'first' if name == 'first_id' else 'last'} item is {wanted!r}",
                                      wanted, body.get(name)))
    actual = {"count": len(data), "has_more": body.get("has_more"), "types": [item.get("type") for item in data],
              "ids": ids}
    for name in sorted(expect.model_fields_set):
        if getattr(expect, name) != actual[name]:
            findings.append(_mismatch(Kind.ITEMS, f"expect.page.{name}", f"the page's {name} is {actual[name]!r}, "
                                      f"expected {getattr(expect, name)!r}", getattr(expect, name), actual[name]))
    return findings


def compare_chat(expect: ChatExpect, contract: Contract) -> list[Finding]:
    chat = contract.chat
    if chat is None:
        return [_mismatch(Kind.RESPONSE_FIELD, "expect.chat", "the answer carries no chat completion", "a completion",
                          None)]
    actual = {"finish_reason": chat.finish_reason, "role": chat.role, "content": chat.has_content,
              "tool_calls": list(chat.tool_calls), "chunks": list(chat.chunks)}
    findings = []
    for name in sorted(expect.model_fields_set):
        wanted = getattr(expect, name)
        if name == "chunks" and not contract.stream and not chat.chunks:
            continue
        if wanted != actual[name]:
            kind = Kind.EVENT_SEQUENCE if name == "chunks" else Kind.RESPONSE_FIELD
            message = (f"chunk sequence differs: {list_diff(wanted, actual[name])}" if name == "chunks"
                       else f"the completion's {name} is {actual[name]!r}, expected {wanted!r}")
            findings.append(_mismatch(kind, f"expect.chat.{name}", message, wanted, actual[name]))
    return findings


def compare_variants(variants: list[Variant], contract: Contract, exchange: Exchange) -> list[Finding]:
    """A note naming the first known variant the answer matches, or an error listing how it
    differs from each."""
    misses = []
    for variant in variants:
        differences = [f for f in compare(variant.expect, contract, exchange) if f.severity >= Severity.ERROR]
        if not differences:
            if variant.severity == "warning":
                return [Finding(Kind.VARIANT, Severity.WARNING, "expect.variants", f"shows the known deviation from "
                                f"what OpenAI documents: {variant.name}", actual=variant.name)]
            return [Finding(Kind.VARIANT, Severity.NOTE, "expect.variants", f"shows the known variant: {variant.name}",
                            actual=variant.name)]
        misses.append(f"{variant.name}: {differences[0].message}")
    return [_mismatch(Kind.VARIANT, "expect.variants", "matches none of the known variants (" + "; ".join(misses)
                      + ")", [v.name for v in variants], None)]


def stream_reference(expect: Expect, findings: list[Finding], actual: tuple[str, ...], chat: bool) -> StreamReference:
    """The sequence the step states for its stream (`events`, or `chat.chunks` for a chat
    completion), else that of the variant the answer matched (`findings` name it) or, when it
    matched none, of the variant closest to `actual`; else none, saying why."""
    def stated(part: Expect) -> list[str] | None:
        return (part.chat.chunks if part.chat else None) if chat else part.events

    field = "`expect.chat.chunks`" if chat else "`expect.events`"
    if (own := stated(expect)) is not None:
        return StreamReference(tuple(own), "expected by the scenario")
    sequences = {variant.name: tuple(sequence) for variant in expect.variants or []
                 if (sequence := stated(variant.expect)) is not None}
    matched = next((f.actual for f in findings if f.rule == "expect.variants" and isinstance(f.actual, str)), None)
    if matched in sequences:
        return StreamReference(sequences[matched], f"expected by the scenario: the variant it matched, “{matched}”")
    if sequences and matched is None:
        name = max(sequences, key=lambda n: difflib.SequenceMatcher(a=sequences[n], b=actual, autojunk=False).ratio())
        return StreamReference(sequences[name], f"expected by the scenario: the closest variant, “{name}” "
                                                "(the answer matches none)")
    stated_fields = sorted(expect.model_fields_set - {"events", "variants"})
    judged = (f"what the step does state ({', '.join(stated_fields)}), " if stated_fields else "") + \
        "the stream grammar and the SDK's schemas"
    if matched is not None:
        return StreamReference(None, f"the answer matched the variant “{matched}”, which states no sequence "
                                     f"({field}); the stream is judged by that variant, {judged}")
    nor = ", nor does any of its variants" if expect.variants else ""
    return StreamReference(None, f"the step states no sequence ({field}{nor}); the stream is judged by {judged}")


def _compare_fields(expect: Expect, contract: Contract, exchange: Exchange) -> list[Finding]:
    streamed = exchange.streamed
    findings: list[Finding] = []
    if contract.response_fields is None and any(getattr(expect, name) is not None for name in _RESPONSE_LEVEL):
        where = "no terminal event carries one" if streamed else (
            "the body is an error envelope" if contract.error else "the body is not one")
        if not exchange.answered_create_without_object:  # the schema check reports that one
            findings.append(_mismatch(Kind.RESPONSE_FIELD, "expect.response_object",
                                      f"the answer (HTTP {contract.http_status}) carries no Response object: {where}",
                                      "a Response object", None))
        expect = expect.model_copy(update=dict.fromkeys(_RESPONSE_LEVEL))
    if expect.http_status is not None and contract.http_status != expect.http_status:
        findings.append(_mismatch(Kind.STATUS, "expect.http_status",
                                  f"HTTP status {contract.http_status}, expected {expect.http_status}",
                                  expect.http_status, contract.http_status))
    if expect.error is not None:
        if contract.error is None:
            findings.append(_mismatch(Kind.ERROR_ENVELOPE, "expect.error", "no error envelope "
                                      '({"error": {message, type, param, code}}) in the answer',
                                      expect.error.model_dump(), None))
        else:
            for name in sorted(expect.error.model_fields_set - {"message_contains"}):
                wanted, got = getattr(expect.error, name), getattr(contract.error, name)
                if wanted != got:
                    findings.append(_mismatch(Kind.ERROR_ENVELOPE, f"expect.error.{name}",
                                              f"error.{name} is {got!r}, expected {wanted!r}", wanted, got))
            if not contract.error.has_message:
                findings.append(_mismatch(Kind.ERROR_ENVELOPE, "expect.error.message", "error.message is empty",
                                          "non-empty", ""))
            wanted_text = expect.error.message_contains
            if wanted_text is not None and wanted_text not in (contract.error.message or ""):
                findings.append(_mismatch(Kind.ERROR_ENVELOPE, "expect.error.message_contains",
                                          f"error.message {contract.error.message!r} does not contain "
                                          f"{wanted_text!r}", wanted_text, contract.error.message))
    for name, kind in (("status", Kind.STATUS), ("incomplete_reason", Kind.STATUS)):
        if name in expect.model_fields_set and getattr(contract, name) != getattr(expect, name):
            findings.append(_mismatch(kind, f"expect.{name}", f"{name} is {getattr(contract, name)!r}, expected "
                                      f"{getattr(expect, name)!r}", getattr(expect, name), getattr(contract, name)))
    if expect.usage is not None and contract.has_usage != expect.usage:
        findings.append(_mismatch(Kind.RESPONSE_FIELD, "expect.usage",
                                  f"usage is {'present' if contract.has_usage else 'absent'}, expected "
                                  f"{'present' if expect.usage else 'absent'}", expect.usage, contract.has_usage))
    if expect.output is not None:
        findings += compare_output(expect.output, contract.output)
    if expect.interrupt is not None:
        wanted = expect.interrupt
        got = contract.interrupt
        if got.on != wanted.on or ("tool" in wanted.model_fields_set and got.tool != wanted.tool):
            findings.append(_mismatch(Kind.INTERRUPT, "expect.interrupt",
                                      f"the response stops on {got.on}{f' ({got.tool})' if got.tool else ''}, "
                                      f"expected {wanted.on}{f' ({wanted.tool})' if wanted.tool else ''}",
                                      wanted.model_dump(), {"on": got.on, "tool": got.tool}))
    if expect.response is not None and (where := subset_mismatch(expect.response, contract.response_fields or {})):
        findings.append(_mismatch(Kind.RESPONSE_FIELD, "expect.response", f"the Response differs at {where}",
                                  expect.response, {key: (contract.response_fields or {}).get(key)
                                                    for key in expect.response}))
    body = exchange.response_object() if streamed else exchange.body
    if expect.body is not None and (where := subset_mismatch(expect.body, body)):
        findings.append(_mismatch(Kind.RESPONSE_FIELD, "expect.body", f"the body differs at {where}",
                                  expect.body, body))
    if expect.headers is not None:
        findings += compare_headers(expect.headers, exchange.headers or {})
    if expect.terminal is not None and streamed:
        terminal = contract.stream.terminal if contract.stream else None
        if terminal != expect.terminal:
            findings.append(_mismatch(Kind.EVENT_SEQUENCE, "expect.terminal", f"the stream ends with {terminal}, "
                                      f"expected {expect.terminal}", expect.terminal, terminal))
    if expect.page is not None:
        findings += compare_page(expect.page, exchange.body)
    if expect.chat is not None:
        findings += compare_chat(expect.chat, contract)
    raw = exchange.sse if streamed else json.dumps(exchange.body)
    for text in expect.absent_text:
        if text in (raw or ""):
            findings.append(Finding(Kind.SECRET, Severity.ERROR, "expect.absent_text",
                                    "the answer contains a value it must never show (a secret given in the "
                                    "request)"))
    if expect.events is not None and streamed:
        actual_events = list(contract.stream.events) if contract.stream else []
        if actual_events != expect.events:
            findings.append(_mismatch(Kind.EVENT_SEQUENCE, "expect.events",
                                      f"event sequence differs: {list_diff(expect.events, actual_events)}",
                                      expect.events, actual_events))
    return findings


def compare_upstream(expect: UpstreamExpect, observed: Observed) -> list[Finding]:
    findings: list[Finding] = []
    requests = observed.model_requests
    last_types: list[str] = requests[-1]["item_types"] if requests else []
    if expect.model_calls is not None and len(requests) != expect.model_calls:
        findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.model_calls",
                                  f"the gateway called the model {len(requests)} time(s), expected "
                                  f"{expect.model_calls}", expect.model_calls, len(requests)))
    for number, request in enumerate(requests, 1):
        sent = [t for t in request["item_types"] if t in expect.never_sent]
        if sent:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.never_sent",
                                      f"model request {number} carried {', '.join(sorted(set(sent)))}, which must "
                                      "never reach the model", [], sent))
        if "instructions" in expect.model_fields_set:
            instructions = request.get("instructions")
            if instructions != expect.instructions:
                findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.instructions",
                                          f"model request {number} carried instructions {instructions!r}",
                                          expect.instructions, instructions))
    if expect.last_input is not None and last_types != expect.last_input:
        findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.last_input",
                                  f"the last model request's input differs: {list_diff(expect.last_input, last_types)}",
                                  expect.last_input, last_types))
    if expect.last_input_counts is not None:
        counts = {item_type: last_types.count(item_type) for item_type in expect.last_input_counts}
        if counts != expect.last_input_counts:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.last_input_counts",
                                      f"the last model request's input holds {counts}, expected "
                                      f"{expect.last_input_counts}", expect.last_input_counts, counts))
    if expect.tool_choices is not None:
        choices = [request.get("tool_choice") for request in requests]
        if choices != expect.tool_choices:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.tool_choices",
                                      f"the model requests carried tool_choice {choices}, expected "
                                      f"{expect.tool_choices}", expect.tool_choices, choices))
    if expect.last_tool_output_contains is not None:
        outputs = requests[-1]["tool_outputs"] if requests else []
        if not any(expect.last_tool_output_contains in output for output in outputs):
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.last_tool_output_contains",
                                      f"no tool output in the last model request contains "
                                      f"{expect.last_tool_output_contains!r} (outputs: {outputs})",
                                      expect.last_tool_output_contains, outputs))
    if expect.last_tool_output_lacks is not None:
        outputs = requests[-1]["tool_outputs"] if requests else []
        if any(expect.last_tool_output_lacks in output for output in outputs):
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.last_tool_output_lacks",
                                      f"a tool output in the last model request contains "
                                      f"{expect.last_tool_output_lacks!r} (outputs: {outputs})",
                                      expect.last_tool_output_lacks, outputs))
    if expect.mcp_authorization is not None:
        wanted = fingerprint(f"Bearer {expect.mcp_authorization}")
        without = [call["method"] for call in observed.mcp_calls if call["headers"].get("authorization") != wanted]
        if without or not observed.mcp_calls:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.mcp_authorization",
                                      f"{len(without)} of {len(observed.mcp_calls)} MCP request(s) did not carry the "
                                      "request's `authorization` as a bearer token", "all", len(without)))
    if expect.offered_tools is not None:
        offered = sorted(requests[0].get("offered_tools") or []) if requests else []
        if offered != sorted(expect.offered_tools):
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.offered_tools",
                                      f"the first model request offered {offered}, expected "
                                      f"{sorted(expect.offered_tools)}", sorted(expect.offered_tools), offered))
    if expect.model_paths is not None:
        paths = [request.get("path") for request in requests]
        if paths != expect.model_paths:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.model_paths",
                                      f"the model requests went to {paths}, expected {expect.model_paths}",
                                      expect.model_paths, paths))
    if expect.searches is not None:
        queries = [search["query"] for search in observed.searches]
        if queries != expect.searches:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.searches",
                                      f"the gateway searched for {queries}, expected {expect.searches}",
                                      expect.searches, queries))
    if expect.request is not None:
        for number, request in enumerate(requests, 1):
            if where := subset_mismatch(expect.request, request.get("body")):
                findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.request",
                                          f"model request {number} differs at {where}", expect.request,
                                          request.get("body")))
    if expect.tool_runs == "none":
        if ran := {name: count for name, count in sorted(observed.tool_runs().items()) if "." in name}:
            findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.tool_runs", "MCP tools ran ("
                                      + ", ".join(f"{name}: {count}" for name, count in ran.items())
                                      + "), expected none", "none", ran))
    elif expect.tool_runs is not None:
        runs = observed.tool_runs()
        for tool, count in expect.tool_runs.items():
            if runs.get(tool, 0) != count:
                findings.append(_mismatch(Kind.UPSTREAM_REQUEST, "expect.upstream.tool_runs",
                                          f"the MCP tool {tool!r} ran {runs.get(tool, 0)} time(s), expected {count}",
                                          count, runs.get(tool, 0)))
    return findings


def upstream_anomalies(observed: Observed) -> list[Finding]:
    """What the scripted upstream could not answer as scripted, e.g. a call to a tool the
    gateway did not offer, or more model calls than the script has."""
    return [Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, "upstream.anomaly", anomaly)
            for anomaly in observed.anomalies]
