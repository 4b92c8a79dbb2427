"""What the judge adds around a step's expectation (the expectations compare themselves:
`scenario/expectations`): differences a live model decides, softened to notes; the sequence a
streamed answer is shown beside; and what the scripted upstream could not answer as scripted or
the model's API would have refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import replace

from ..model.contract import StreamReference
from ..model.findings import Finding, Kind, Rule, Severity
from ..model.observed import Observed
from ..scenario.expectations import VARIANT_RULE, Expect, stated_sequence


def model_dependent_as_notes(findings: list[Finding], fields: Sequence[str]) -> list[Finding]:
    """Findings of expectations a live model decides (`expect.output`, ...) turned into notes."""
    return [replace(f, severity=Severity.NOTE, message=f"{f.message} (model-dependent)")
            if f.rule.family == "expect" and f.rule.field in fields and f.severity > Severity.NOTE else f
            for f in findings]


def stream_reference(expect: Expect, findings: list[Finding], actual: tuple[str, ...], chat: bool) -> StreamReference:
    """The sequence the step states for its stream (`events`, or `chat.chunks` for a chat
    completion), else that of the variant the answer matched (`findings` name it) or, when it
    matched none, of the variant closest to `actual`; else none, saying why."""
    field = "`expect.chat.chunks`" if chat else "`expect.events`"
    if (own := stated_sequence(expect, chat)) is not None:
        return StreamReference(tuple(own), "expected by the scenario")
    sequences = {variant.name: tuple(sequence) for variant in expect.variants or []
                 if (sequence := stated_sequence(variant.expect, chat)) is not None}
    matched = next((f.actual for f in findings if f.rule == VARIANT_RULE and isinstance(f.actual, str)), None)
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


REFUSED = Rule("upstream", ("refused",))


def upstream_findings(observed: Observed) -> list[Finding]:
    """What the scripted upstream could not answer as scripted (a call to a tool the gateway
    did not offer, more model calls than the script has), and every parameter of a model request
    the model's own API would have refused, with what that API answers to it."""
    anomalies = [Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, "upstream.anomaly", anomaly)
                 for anomaly in observed.anomalies]
    return anomalies + [
        Finding(Kind.UPSTREAM_REQUEST, Severity.ERROR, REFUSED,
                f"model request {number} carried `{refusal['param']}`, which {refusal['api']} refuses: HTTP 400 "
                f"{refusal['code'] or 'with no code'}, \"{refusal['message']}\"",
                expected="a request the model's API takes", actual=refusal["param"],
                key=f"{refusal['api']} refuses {refusal['param']} ({refusal['code']})")
        for number, refusal in observed.refusals]

