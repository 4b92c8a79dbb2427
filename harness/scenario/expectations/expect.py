"""A step's `expect`, assembled from the specs: the model a scenario file is validated with,
and the three things done with a whole expectation (lint it, compare an answer with it, make
one from a recorded answer), each a walk over the specs in `EXPECTATIONS`. Known variants
(`variants`) are expectations themselves, judged here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from ...model.contract import Contract
from ...model.findings import Finding, Kind, Rule, Severity
from ...wire.exchange import Exchange
from ..strict import Strict
from . import body, chat, envelope, page, response, secrets, stream
from .spec import NOT_STATED, STREAM_ONLY, Answer, Expectation, Stated
from .upstream import UpstreamExpect, lint_upstream

EXPECTATIONS: tuple[Expectation, ...] = (*envelope.SPECS, *response.SPECS, *body.SPECS, *page.SPECS, *chat.SPECS,
                                         *secrets.SPECS, *stream.SPECS)
"""Every field of `expect` but `upstream` and `variants`, in the order their findings come."""

STREAMS_ONLY = frozenset(spec.name for spec in EXPECTATIONS if spec.streams_only)
"""The expectations judged on streamed answers only."""
MODEL_DEPENDENT = tuple(spec.name for spec in EXPECTATIONS if spec.live_model_decides)
"""The expectations a scenario may say a live model decides (`live.model_dependent`)."""
ModelDependent = Literal[MODEL_DEPENDENT]  # type: ignore[valid-type]


class Variant(Strict):
    """One known way a target may behave where OpenAI's behaviour is not recorded. A variant
    that OpenAI's documentation contradicts is a `warning`: the step still passes, and the
    report names the deviation; such a variant may name values OpenAI never sends."""

    name: str
    expect: Expect
    note: str | None = None
    severity: Literal["note", "warning"] = Field(
        default="note", description="note: a known way OpenAI may behave; warning: a deviation from what "
                                    "OpenAI documents, tolerated but reported.")


Expect: type[BaseModel] = create_model(
    "Expect", __base__=Strict, __module__=__name__,
    __doc__="The step's expected contract. It holds for both stream modes; `events` applies to streams only. "
            "Anything left out is not compared.",
    **{spec.name: (spec.annotation, spec.declared) for spec in EXPECTATIONS},
    upstream=(UpstreamExpect | None, Field(default=None)),
    variants=(list[Variant] | None, Field(
        default=None, description="Known end states where OpenAI's is not recorded: the step passes when one "
                                  "matches, and the report names which.")))
Variant.model_rebuild(_types_namespace={"Expect": Expect})


def kind_of(field: str | None) -> Kind | None:
    """The kind of finding the expectation `field` makes (None for no such field)."""
    kinds = {spec.name: spec.kind for spec in EXPECTATIONS} | {
        "upstream": Kind.UPSTREAM_REQUEST, "response_object": Kind.RESPONSE_FIELD, "variants": Kind.VARIANT}
    return kinds.get(field or "")


def _stated(expect: BaseModel) -> list[tuple[Expectation, Any]]:
    return [(spec, value) for spec in EXPECTATIONS
            if spec.stated(value := getattr(expect, spec.name), spec.name in expect.model_fields_set)]


def lint_expect(expect: BaseModel, where: str, at: Stated) -> None:
    """Report through `at.checks` what an `Expect` states that cannot hold or be judged."""
    for spec in EXPECTATIONS:
        if spec.streams_only and not at.stream_modes and spec.name in expect.model_fields_set:
            at.checks.add(f"{where}.{spec.name}", f"{STREAM_ONLY}, and this step never streams")
    for spec, value in _stated(expect):
        spec.lint(value, f"{where}.{spec.name}", at)
    if expect.upstream is not None:
        _lint_upstream_part(expect.upstream, f"{where}.upstream", at)
    for index, variant in enumerate(expect.variants or []):
        lint_expect(variant.expect, f"{where}.variants[{index}].expect",
                    Stated(at.checks, at.stream_modes, in_variant=True, judged_on_answers=True,
                           deviation=variant.severity == "warning"))


def _lint_upstream_part(upstream: BaseModel, where: str, at: Stated) -> None:
    """`expect.upstream` judges what the gateway sent: not an answer's end state (a variant), nor
    an answer polled for."""
    if at.in_variant:
        at.checks.add(where, "a variant names an end state of the answer; what the gateway sent is judged in the "
                             "step's own `expect.upstream`")
    elif at.judged_on_answers:
        at.checks.add(where, "judges what the gateway sent, not an answer: it has no meaning here")
    lint_upstream(upstream, where, at.checks)


def compare(expect: BaseModel, contract: Contract, exchange: Exchange) -> list[Finding]:
    """Every way the answer differs from what `expect` states (its variants included; its
    `upstream` is judged on what the fixtures observed, `compare_upstream`). An answer with no
    Response object fails every field read from one in a single finding."""
    answer, stated, findings = Answer(contract, exchange), _stated(expect), []
    if not answer.has_response and any(spec.of_response and value is not None for spec, value in stated):
        findings += _no_response_object(answer)
        stated = [(spec, value) for spec, value in stated if not spec.of_response]
    for spec, value in stated:
        if answer.streamed or not spec.streams_only:
            findings += spec.compare(value, answer)
    if expect.variants:
        findings += compare_variants(expect.variants, contract, exchange)
    return findings


def _no_response_object(answer: Answer) -> list[Finding]:
    if answer.exchange.answered_create_without_object:  # the schema check reports that one
        return []
    contract = answer.contract
    where = "no terminal event carries one" if answer.streamed else (
        "the body is an error envelope" if contract.error else "the body is not one")
    return [Finding(Kind.RESPONSE_FIELD, Severity.ERROR, Rule("expect", ("response_object",)),
                    f"the answer (HTTP {contract.http_status}) carries no Response object: {where}",
                    expected="a Response object")]


VARIANT_RULE = Rule("expect", ("variants",))


def compare_variants(variants: list[Variant], contract: Contract, exchange: Exchange) -> list[Finding]:
    """A note naming the first known variant the answer matches, or an error listing how it
    differs from each."""
    misses = []
    for variant in variants:
        differences = [f for f in compare(variant.expect, contract, exchange) if f.severity >= Severity.ERROR]
        if not differences:
            if variant.severity == "warning":
                return [Finding(Kind.VARIANT, Severity.WARNING, VARIANT_RULE, "shows the known deviation from what "
                                f"OpenAI documents: {variant.name}", actual=variant.name)]
            return [Finding(Kind.VARIANT, Severity.NOTE, VARIANT_RULE, f"shows the known variant: {variant.name}",
                            actual=variant.name)]
        misses.append(f"{variant.name}: {differences[0].message}")
    return [Finding(Kind.VARIANT, Severity.ERROR, VARIANT_RULE, "matches none of the known variants ("
                    + "; ".join(misses) + ")", expected=[v.name for v in variants])]


def expectation_of(contract: Contract) -> BaseModel:
    """What a recorded answer states, as an `Expect`: every field whose spec projects one."""
    return Expect.model_validate({spec.name: value for spec in EXPECTATIONS
                                  if (value := spec.project(contract)) is not NOT_STATED})


def stated_sequence(expect: BaseModel, chat: bool) -> list[str] | None:
    """The sequence an expectation states for a stream: `events`, or a chat completion's `chat.chunks`."""
    if chat:
        return expect.chat.chunks if expect.chat else None
    return expect.events

